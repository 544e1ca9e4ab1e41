"""Centring kernel matrices in feature space.

With ``μ = (1/n) Σ_j φ(x_j)`` the mean of the mapped training points, the
centred kernel is ``K^c_ij = (φ(x_i) − μ)ᵀ(φ(x_j) − μ)``. Expanding gives

    K^c = K − 1_n K − K 1_n + 1_n K 1_n,

where ``1_n`` is the n×n matrix with every entry ``1/n``. The products with
``1_n`` are just means: ``(1_n K)_ij`` is the mean of column ``j``, ``(K 1_n)_ij``
the mean of row ``i`` and ``1_n K 1_n`` the grand mean, so centring costs
O(n²) and never forms ``1_n``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_array, check_square

__all__ = ["center_kernel", "center_test_kernel", "kernel_means"]


def kernel_means(K_train: ArrayLike) -> tuple[NDArray[np.float64], float]:
    """Column means and grand mean of a training kernel matrix.

    Returns
    -------
    col_means : ndarray of shape (n,)
        ``(1/n) Σ_l K_lj``, i.e. ``μᵀφ(x_j)``.
    grand_mean : float
        ``(1/n²) Σ_lj K_lj``, i.e. ``μᵀμ``.
    """
    K_train = check_square(K_train, "K_train")
    col_means = K_train.mean(axis=0)
    return col_means, float(col_means.mean())


def center_kernel(K: ArrayLike, *, copy: bool = True) -> NDArray[np.float64]:
    """Centre a training kernel matrix: ``K − 1K − K1 + 1K1`` in O(n²).

    Parameters
    ----------
    K : array-like of shape (n, n)
        Kernel matrix of the training points.
    copy : bool, default=True
        If False and ``K`` is already a float64 ndarray, centre it in place
        (saves one n×n matrix of memory).

    Returns
    -------
    K_c : ndarray of shape (n, n)
    """
    K_in = K
    K = check_square(K, "K")
    if copy and K is K_in:
        K = K.copy()
    col_means = K.mean(axis=0)
    row_means = K.mean(axis=1)
    grand_mean = col_means.mean()
    K -= col_means[None, :]
    K -= row_means[:, None]
    K += grand_mean
    return K


def center_test_kernel(K_test: ArrayLike, K_train: ArrayLike) -> NDArray[np.float64]:
    """Centre the kernel rows of new points with the *training* statistics.

    For new points ``x`` the centred entries are
    ``(φ(x) − μ)ᵀ(φ(x_j) − μ) = K_test − 1' K_train − K_test 1_n + 1' K_train 1_n``
    with ``μ`` the mean of the training points in feature space.

    Parameters
    ----------
    K_test : array-like of shape (m, n)
        ``K_test[i, j] = k(x_new_i, x_train_j)``.
    K_train : array-like of shape (n, n)
        Kernel matrix of the training points (uncentred).

    Returns
    -------
    K_test_c : ndarray of shape (m, n)
    """
    K_test = check_array(K_test, "K_test")
    col_means, grand_mean = kernel_means(K_train)
    if K_test.shape[1] != col_means.shape[0]:
        raise ValueError(
            f"K_test must have one column per training point: K_train is "
            f"{col_means.shape[0]}x{col_means.shape[0]} but K_test has shape {K_test.shape}."
        )
    return center_test_kernel_from_means(K_test, col_means, grand_mean)


def center_test_kernel_from_means(
    K_test: NDArray[np.float64], col_means: NDArray[np.float64], grand_mean: float
) -> NDArray[np.float64]:
    """Like :func:`center_test_kernel`, from precomputed :func:`kernel_means` (no checks)."""
    return K_test - col_means[None, :] - K_test.mean(axis=1)[:, None] + grand_mean
