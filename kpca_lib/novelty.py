r"""Novelty detection by the reconstruction error in feature space.

Linear PCA flags a point as unusual when it is far from the subspace spanned by
the leading principal directions: the *reconstruction error*
``‖(x − x̄) − Σ_k (w_kᵀ(x − x̄)) w_k‖²`` (notebook 07's face detector). Kernel
PCA has the same quantity in feature space, although neither ``φ(x)`` nor the
directions ``w_k`` can be written down. With ``μ = (1/n) Σ_i φ(x_i)`` and the
centred image ``φ̃(x) = φ(x) − μ``, the projection ``P_r φ̃(x)`` onto the ``r``
orthonormal directions ``w_k`` has the coordinates ``z_k(x) = ⟨φ̃(x), w_k⟩``
(``KernelPCA.transform``), so by Pythagoras

.. math::

    ‖φ̃(x) − P_r φ̃(x)‖² = ‖φ̃(x)‖² − ‖z(x)‖², \qquad
    ‖φ̃(x)‖² = k(x, x) − \frac{2}{n}\sum_i k(x, x_i)
             + \frac{1}{n^2}\sum_{i,j} k(x_i, x_j).

Every term is a kernel value: this is the lectures' "kernel trick" once more.
Hoffmann (2007) uses it as a novelty detector ("Kernel PCA for novelty
detection", Pattern Recognition 40).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted

from ._validation import check_array
from .approximate_kernel_pca import ApproximateKernelPCA
from .kernel_pca import KernelPCA
from .kernels import get_kernel, squared_distances

__all__ = ["feature_space_reconstruction_error"]

#: Kernel entries computed at once (32 MB of float64).
_BLOCK = 1 << 22

#: Named kernels with a feature space (positive semi-definite).
_MERCER_KERNELS = ("rbf", "poly", "linear", "cosine")


def _row_means(kernel_fn: Any, A: NDArray, B: NDArray) -> NDArray[np.float64]:
    """``kernel_fn(A, B).mean(axis=1)`` in row blocks of at most ``_BLOCK`` entries."""
    rows = max(1, _BLOCK // B.shape[0])
    out = np.empty(A.shape[0])
    for start in range(0, A.shape[0], rows):
        out[start : start + rows] = kernel_fn(A[start : start + rows], B).mean(axis=1)
    return out


def _diagonal(
    kernel: Any, kernel_fn: Any, X: NDArray, gamma: float | None, degree: int, coef0: float
) -> NDArray[np.float64]:
    """``k(x, x)`` for every row ``x`` of ``X`` (kernels other than linear and rbf)."""
    sq = np.einsum("ij,ij->i", X, X)
    if kernel == "poly":
        return (gamma * sq + coef0) ** degree
    if kernel == "cosine":
        return (sq > 0).astype(np.float64)  # 1, or 0 for a zero row (as the kernel)
    return np.array([kernel_fn(x[None, :], x[None, :])[0, 0] for x in X])  # a callable


def feature_space_reconstruction_error(
    estimator: KernelPCA | ApproximateKernelPCA, X: ArrayLike
) -> NDArray[np.float64]:
    """Squared distance of ``φ(x)`` from the kernel principal subspace: a novelty score.

    For each row ``x`` of ``X``, ``‖φ̃(x) − P_r φ̃(x)‖² = ‖φ̃(x)‖² − ‖z(x)‖²``,
    where ``φ̃(x) = φ(x) − μ`` is centred with the *training* mean ``μ`` of the
    features, ``P_r`` projects onto the estimator's ``r`` components and
    ``z(x) = estimator.transform(x)``; ``‖φ̃(x)‖² = k(x, x) − (2/n) Σ_i k(x, x_i)
    + (1/n²) Σ_ij k(x_i, x_j)`` (the module docstring has the derivation). Large
    values: ``x`` is unlike the training data. For ``kernel="linear"`` it is
    linear PCA's squared reconstruction error ``‖(x − x̄) − W Wᵀ(x − x̄)‖²``.

    Parameters
    ----------
    estimator : kpca_lib.KernelPCA or kpca_lib.ApproximateKernelPCA
        A fitted kernel PCA with a positive semi-definite kernel: ``"rbf"``,
        ``"poly"``, ``"linear"``, ``"cosine"`` or a callable. For an
        :class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA` (Nyström
        or random Fourier features) the error is computed in its approximate
        feature space ``feature_map_``.
    X : array-like of shape (n_points, n_features)
        The points to score.

    Returns
    -------
    ndarray of shape (n_points,)
        The squared distances, ``>= 0``: values that rounding makes slightly
        negative (a point on the subspace) are returned as 0.

    Raises
    ------
    ValueError
        If ``estimator`` is not a :class:`kpca_lib.KernelPCA` or
        :class:`kpca_lib.ApproximateKernelPCA`, its kernel is
        ``"precomputed"`` (``k(x, x)`` is unknown) or ``"sigmoid"`` (not
        positive semi-definite: no feature space), or ``X`` has the wrong
        number of columns.
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted.

    Notes
    -----
    Cost: ``O(m·n·d)`` for ``m`` new points and ``n`` training points, plus
    ``O(n²·d)`` for the grand mean ``(1/n²) Σ_ij k(x_i, x_j)``, recomputed on
    every call; memory ``O(m + n)`` beyond blocks of 32 MB. For the RBF kernel
    the means are taken of ``k − 1 = expm1(−‖x − y‖²/(2σ²))``, which keeps the
    digits of a wide Gaussian (``k(x, x) = 1`` then contributes 0).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_lib import KernelPCA
    >>> rng = np.random.default_rng(0)
    >>> angle = rng.uniform(0, 2 * np.pi, 200)
    >>> circle = np.column_stack([np.cos(angle), np.sin(angle)])
    >>> kp = KernelPCA(8, kernel="rbf", sigma=0.5).fit(circle)
    >>> on, off = feature_space_reconstruction_error(kp, [[0.0, 1.0], [0.0, 0.0]])
    >>> bool(on < 0.1 < off)
    True
    """
    if not isinstance(estimator, KernelPCA | ApproximateKernelPCA):
        raise ValueError(
            "feature_space_reconstruction_error needs a fitted kpca_lib.KernelPCA or "
            "ApproximateKernelPCA; got "
            f"{type(estimator).__name__} (scikit-learn's KernelPCA has other kernel defaults)."
        )
    check_is_fitted(estimator, "eigenvalues_")
    kernel = estimator.kernel
    if kernel == "precomputed":
        raise ValueError(
            "kernel='precomputed': the reconstruction error needs k(x, x) of every new point, "
            "which a precomputed kernel does not give; fit with the kernel by name or as a "
            "callable."
        )
    if not callable(kernel) and kernel not in _MERCER_KERNELS:
        raise ValueError(
            f"kernel={kernel!r} is not positive semi-definite, so there is no feature space "
            f"to measure distances in; use one of {', '.join(map(repr, _MERCER_KERNELS))}."
        )
    Z = estimator.transform(X)  # checks the columns (and DataFrame names)
    X = check_array(X)
    if isinstance(estimator, ApproximateKernelPCA) or estimator.approximation is not None:
        F = estimator.feature_map_.transform(X) - estimator.feature_mean_
        error = np.einsum("ij,ij->i", F, F) - np.einsum("ij,ij->i", Z, Z)
        return np.maximum(error, 0.0)
    X_fit = estimator.X_fit_
    if kernel == "linear":  # φ̃(x) = x − x̄ exactly: no cancellation for data far from 0
        centred = X - X_fit.mean(axis=0)
        norms = np.einsum("ij,ij->i", centred, centred)
    elif kernel == "rbf":
        gamma = estimator.gamma_

        def shifted(A: NDArray, B: NDArray) -> NDArray:  # k − 1, without cancellation
            return np.expm1(-gamma * squared_distances(A, B))

        norms = -2.0 * _row_means(shifted, X, X_fit) + _row_means(shifted, X_fit, X_fit).mean()
    else:
        gamma = estimator.gamma_ if kernel == "poly" else None  # cosine, callable: none
        kernel_fn = get_kernel(kernel, gamma=gamma, degree=estimator.degree, coef0=estimator.coef0)
        diag = _diagonal(kernel, kernel_fn, X, gamma, estimator.degree, estimator.coef0)
        grand_mean = _row_means(kernel_fn, X_fit, X_fit).mean()
        norms = diag - 2.0 * _row_means(kernel_fn, X, X_fit) + grand_mean
    return np.maximum(norms - np.einsum("ij,ij->i", Z, Z), 0.0)
