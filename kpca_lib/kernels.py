"""Kernel functions evaluated on whole datasets.

All functions take arrays of shape ``(n_samples, n_features)`` and return the
kernel matrix ``K`` with ``K[i, j] = k(X[i], Y[j])``. When ``Y`` is omitted,
``Y = X`` and ``K`` is the (square) Gram matrix of ``X``.

In the lectures' notation, with data points as columns of ``X ∈ R^{d×n}``,
the linear kernel matrix is ``XᵀX``; in code, with points as rows, it is
``X @ X.T``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._blocked import symmetrize_inplace
from ._validation import (
    check_array,
    check_degree,
    check_finite_scalar,
    check_positive,
)

__all__ = [
    "linear_kernel",
    "polynomial_kernel",
    "rbf_kernel",
    "kernel_matrix",
    "squared_distances",
    "get_kernel",
    "kernel_block_function",
    "KERNELS",
]

KERNELS = ("linear", "poly", "rbf")


def _pair(X: ArrayLike, Y: ArrayLike | None) -> tuple[NDArray, NDArray]:
    X = check_array(X, "X")
    if Y is None:
        return X, X
    Y = check_array(Y, "Y")
    if Y.shape[1] != X.shape[1]:
        raise ValueError(
            f"X and Y must have the same number of features; got {X.shape[1]} and {Y.shape[1]}."
        )
    return X, Y


def linear_kernel(X: ArrayLike, Y: ArrayLike | None = None) -> NDArray[np.float64]:
    """Linear kernel ``k(x, y) = xᵀy``.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional
        Defaults to ``X``.

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)
    """
    X, Y = _pair(X, Y)
    return X @ Y.T


def polynomial_kernel(
    X: ArrayLike, Y: ArrayLike | None = None, degree: int = 2, coef0: float = 1.0
) -> NDArray[np.float64]:
    """Polynomial kernel ``k(x, y) = (xᵀy + coef0) ** degree``.

    With ``coef0 = 1`` this is the lectures' ``(xᵀx' + 1)^p``; it equals
    ``polynomial_features(x, p) @ polynomial_features(y, p)``.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional
    degree : int, default=2
        The power ``p``, a positive integer.
    coef0 : float, default=1.0
        The additive constant.

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)
    """
    degree = check_degree(degree)
    coef0 = check_finite_scalar(coef0, "coef0")
    X, Y = _pair(X, Y)
    K = X @ Y.T
    K += coef0
    with np.errstate(over="ignore"):
        K **= degree
    if not np.all(np.isfinite(K)):
        raise ValueError(
            f"polynomial_kernel overflowed (degree={degree}); scale X to a smaller range "
            "or use a lower degree."
        )
    return K


def squared_distances(X: ArrayLike, Y: ArrayLike | None = None) -> NDArray[np.float64]:
    """Squared Euclidean distances ``‖x_i − y_j‖²`` via one matrix product.

    Uses ``‖x‖² + ‖y‖² − 2xᵀy``, clips the rounding negatives to 0 and, when
    ``Y`` is omitted, sets the diagonal to exactly 0.
    """
    same = Y is None
    X, Y = _pair(X, Y)
    D = X @ Y.T
    D *= -2.0
    D += np.einsum("ij,ij->i", X, X)[:, None]
    D += np.einsum("ij,ij->i", Y, Y)[None, :]
    np.maximum(D, 0.0, out=D)
    if same:
        # BLAS does not guarantee an exactly symmetric X @ X.T: enforce it
        # (block by block: no second n×n matrix).
        symmetrize_inplace(D)
        np.fill_diagonal(D, 0.0)
    return D


def rbf_kernel(
    X: ArrayLike, Y: ArrayLike | None = None, sigma: float = 1.0
) -> NDArray[np.float64]:
    """Gaussian (RBF) kernel ``k(x, y) = exp(−‖x − y‖² / (2σ²))``.

    This is scikit-learn's ``rbf_kernel`` with ``gamma = 1 / (2 sigma**2)``.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional
    sigma : float, default=1.0
        Bandwidth σ > 0.

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)
    """
    sigma = check_positive(sigma, "sigma")
    D = squared_distances(X, Y)
    D *= -1.0 / (2.0 * sigma**2)
    np.exp(D, out=D)
    return D


def kernel_matrix(
    k: Callable[[NDArray, NDArray], float], X: ArrayLike, Y: ArrayLike | None = None
) -> NDArray[np.float64]:
    """Evaluate any Python function ``k(x, y) -> float`` on all pairs of rows.

    Every pair is evaluated, including both ``k(x_i, x_j)`` and ``k(x_j, x_i)``,
    so an asymmetric function gives an asymmetric matrix (which
    :func:`kpca_lib.mercer.check_mercer` then reports).

    Parameters
    ----------
    k : callable
        A function of two 1-D arrays returning a real number.
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)

    Raises
    ------
    ValueError
        If ``k`` is not callable, or returns something that is not a finite real number.
    """
    if not callable(k):
        raise ValueError(f"k must be a function k(x, y) -> float; got {type(k).__name__}.")
    X, Y = _pair(X, Y)
    K = np.empty((X.shape[0], Y.shape[0]), dtype=np.float64)
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            value = k(x, y)
            try:
                value = float(np.asarray(value, dtype=np.float64).item())
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"the kernel function must return one real number; for pair ({i}, {j}) "
                    f"it returned {value!r}."
                ) from exc
            if not np.isfinite(value):
                raise ValueError(
                    f"the kernel function returned {value} for pair ({i}, {j}); "
                    "a kernel must return finite numbers."
                )
            K[i, j] = value
    return K


def get_kernel(
    kernel: str | Callable[[NDArray, NDArray], float],
    *,
    sigma: float = 1.0,
    degree: int = 2,
    coef0: float = 1.0,
) -> Callable[[ArrayLike, ArrayLike | None], NDArray[np.float64]]:
    """Return a function ``(X, Y=None) -> K`` for a kernel name or a pairwise callable.

    Parameters
    ----------
    kernel : {"linear", "poly", "rbf"} or callable
        A kernel name, or a function ``k(x, y) -> float`` on two samples.
    sigma, degree, coef0
        Parameters of the named kernels (validated here).

    Returns
    -------
    callable
        ``f(X, Y=None)`` returning the kernel matrix.
    """
    if callable(kernel):
        return lambda X, Y=None: kernel_matrix(kernel, X, Y)
    if kernel == "linear":
        return linear_kernel
    if kernel == "poly":
        degree = check_degree(degree)
        coef0 = check_finite_scalar(coef0, "coef0")
        return lambda X, Y=None: polynomial_kernel(X, Y, degree=degree, coef0=coef0)
    if kernel == "rbf":
        sigma = check_positive(sigma, "sigma")
        return lambda X, Y=None: rbf_kernel(X, Y, sigma=sigma)
    raise ValueError(
        f"kernel must be one of {', '.join(repr(k) for k in KERNELS)} or a callable "
        f"k(x, y) -> float; got {kernel!r}."
    )


def kernel_block_function(
    kernel: str,
    X: NDArray[np.float64],
    *,
    sigma: float = 1.0,
    degree: int = 2,
    coef0: float = 1.0,
) -> Callable[..., NDArray[np.float64]]:
    """Return ``block(rows, cols, out=None) -> K[rows, cols]`` for the kernel matrix of ``X``.

    The fast path behind :class:`kpca_lib.kernel_pca.KernelPCA` for large ``n``:
    each block is a single BLAS product (the norms of the RBF kernel and the
    constant of the polynomial kernel are folded into it as extra columns)
    followed by in-place element-wise operations, so that ``K`` can be built
    block by block, in parallel threads, without n×n temporaries. The values
    equal :func:`rbf_kernel`, :func:`polynomial_kernel` and
    :func:`linear_kernel` up to rounding; diagonal blocks (``rows == cols``)
    are exactly symmetric, and the RBF diagonal is exactly 1.

    Parameters
    ----------
    kernel : {"linear", "poly", "rbf"}
        A named kernel (callables go through :func:`kernel_matrix`).
    X : ndarray of shape (n_samples, n_features)
        Validated float64 training data.
    sigma, degree, coef0
        Kernel parameters, already validated.

    Returns
    -------
    callable
        ``block(rows, cols, out=None)`` with two slices of ``range(n_samples)``;
        writes ``K[rows, cols]`` into ``out`` (a float64 array or view of shape
        ``(len(rows), len(cols))``) or a new array, and returns it.
    """
    ones = np.ones((X.shape[0], 1))
    if kernel == "rbf":
        # The RBF kernel is translation invariant: centring X first makes the
        # ‖x‖² + ‖y‖² − 2xᵀy expansion lose less to cancellation.
        Xs = X - X.mean(axis=0)
        gamma = 1.0 / (2.0 * sigma**2)
        sq = gamma * np.einsum("ij,ij->i", Xs, Xs)[:, None]
        # -γ‖x − y‖² = [2γx, −γ‖x‖², −1] · [y, 1, γ‖y‖²]
        left = np.hstack([2.0 * gamma * Xs, -sq, -ones])
        right = np.hstack([Xs, ones, sq])

        def block(
            rows: slice, cols: slice, out: NDArray[np.float64] | None = None
        ) -> NDArray[np.float64]:
            B = np.matmul(left[rows], right[cols].T, out=out)
            np.minimum(B, 0.0, out=B)  # rounding can make -γ‖x − y‖² slightly positive
            np.exp(B, out=B)
            if rows == cols:
                _symmetrize(B)
                np.fill_diagonal(B, 1.0)
            return B

        return block
    if kernel in ("poly", "linear"):
        poly = kernel == "poly"
        # xᵀy + coef0 = [x, 1] · [y, coef0]
        left = np.hstack([X, ones]) if poly else X
        right = np.hstack([X, coef0 * ones]) if poly else X

        def block(
            rows: slice, cols: slice, out: NDArray[np.float64] | None = None
        ) -> NDArray[np.float64]:
            B = np.matmul(left[rows], right[cols].T, out=out)
            if poly and degree > 1:
                with np.errstate(over="ignore", invalid="ignore"):
                    if degree == 2:
                        np.multiply(B, B, out=B)
                    else:
                        np.power(B, degree, out=B)
            if rows == cols:
                _symmetrize(B)
            return B

        return block
    raise ValueError(f"kernel must be one of {', '.join(repr(k) for k in KERNELS)}; got {kernel!r}.")


def _symmetrize(B: NDArray[np.float64]) -> None:
    """Replace the square block ``B`` by ``(B + Bᵀ)/2`` in place (BLAS rounding differs)."""
    B += B.T.copy()
    B *= 0.5
