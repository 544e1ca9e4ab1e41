"""Kernel PCA, following the lectures step by step.

1. Build the kernel matrix ``K_ij = k(x_i, x_j)`` (n×n).
2. Centre it: ``K_c = K − 1K − K1 + 1K1`` (:func:`kpca_lib.centering.center_kernel`).
3. Eigendecompose ``K_c β_k = (nλ_k) β_k`` with unit ``β_k``.
4. Normalise ``α_k = β_k / √(nλ_k)`` so that ``w_k = Σ_j α_kj φ(x_j)`` has unit
   norm (``α_kᵀ K_c α_k = 1``).
5. Project without ever forming φ: the k-th coordinate of ``x_i`` is
   ``Σ_j α_kj K^c_ij``, and of a new point ``x`` it is ``Σ_j α_kj k^c(x, x_j)``
   with the kernel row centred by the *training* statistics.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse.linalg
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._eigen import top_eigh
from ._validation import check_array, check_n_components, check_n_features
from .centering import center_kernel, center_test_kernel_from_means
from .kernels import get_kernel

__all__ = ["KernelPCA", "NonPSDKernelWarning"]


class NonPSDKernelWarning(UserWarning):
    """The centred kernel matrix has clearly negative eigenvalues (not a Mercer kernel)."""


def _negative_threshold(max_abs: float) -> float:
    """Eigenvalues below ``-threshold`` are 'clearly negative' (not rounding)."""
    return max(1e-10, 1e-5 * max_abs)


class KernelPCA(TransformerMixin, BaseEstimator):
    """Kernel principal component analysis.

    Parameters
    ----------
    n_components : int, optional
        Number of components, between 1 and ``n_samples``. ``None`` keeps every
        component with a non-zero eigenvalue.
    kernel : {"rbf", "poly", "linear"} or callable, default="rbf"
        ``"rbf"``: ``exp(−‖x−y‖²/(2σ²))``; ``"poly"``: ``(xᵀy + coef0)^degree``;
        ``"linear"``: ``xᵀy``; or any function ``k(x, y) -> float`` of two samples.
    sigma : float, default=1.0
        Bandwidth σ of the RBF kernel (scikit-learn's ``gamma = 1/(2σ²)``).
    degree : int, default=2
        Degree ``p`` of the polynomial kernel.
    coef0 : float, default=1.0
        Constant of the polynomial kernel.
    eigen_solver : {"auto", "dense", "arpack"}, default="auto"
        ``"dense"``: LAPACK ``eigh`` of the top eigenpairs; ``"arpack"``: Lanczos
        (fast for a few components); ``"auto"``: ARPACK when ``n > 200`` and
        ``n_components < 10``, else dense.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues ``nλ_k`` of the centred kernel matrix, descending
        (``λ_k`` is the variance along the k-th component in feature space).
    alphas_ : ndarray of shape (n_samples, n_components)
        ``α_k = β_k / √(nλ_k)``; columns with a zero eigenvalue are zero.
        ``alphas_.T @ K_c @ alphas_`` is the identity (on non-zero components).
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        Unit eigenvectors ``β_k``; the largest-magnitude entry of each is positive.
    explained_variance_ : ndarray of shape (n_components,)
        ``λ_k = eigenvalues_ / n``.
    X_fit_ : ndarray of shape (n_samples, n_features)
    n_features_in_ : int

    Examples
    --------
    >>> from kpca_lib.datasets import make_moons
    >>> X, y = make_moons(100, noise=0.05, random_state=0)
    >>> Z = KernelPCA(n_components=2, kernel="rbf", sigma=0.3).fit_transform(X)
    >>> Z.shape
    (100, 2)
    """

    def __init__(
        self,
        n_components: int | None = None,
        kernel: str | Callable = "rbf",
        sigma: float = 1.0,
        degree: int = 2,
        coef0: float = 1.0,
        eigen_solver: str = "auto",
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.sigma = sigma
        self.degree = degree
        self.coef0 = coef0
        self.eigen_solver = eigen_solver

    # -- helpers ---------------------------------------------------------
    def _kernel_function(self) -> Callable[[ArrayLike, ArrayLike | None], NDArray]:
        return get_kernel(self.kernel, sigma=self.sigma, degree=self.degree, coef0=self.coef0)

    def _check_symmetric(self, K: NDArray) -> None:
        if callable(self.kernel):
            asym = float(np.max(np.abs(K - K.T)))
            scale = max(1.0, float(np.max(np.abs(K))))
            if asym > 1e-10 * scale * K.shape[0]:
                raise ValueError(
                    f"the kernel function is not symmetric on this data (max |K_ij - K_ji| = "
                    f"{asym:.3g}); a Mercer kernel needs k(x, y) = k(y, x). "
                    "Use kpca_lib.mercer.check_mercer to diagnose it."
                )

    @staticmethod
    def _warn_if_not_psd(K_c: NDArray, threshold: float) -> None:
        """Warn when the unrequested bottom of the spectrum is clearly negative."""
        n = K_c.shape[0]
        if n <= 500:
            smallest = float(np.linalg.eigvalsh(K_c)[0])
        else:
            v0 = np.random.default_rng(0).uniform(-1.0, 1.0, size=n)
            smallest = float(scipy.sparse.linalg.eigsh(K_c, k=1, which="SA", v0=v0)[0][0])
        if smallest < -threshold:
            warnings.warn(
                f"the centred kernel matrix has a clearly negative eigenvalue ({smallest:.4g}): "
                "the kernel function is not positive semi-definite on this data (not a Mercer "
                "kernel). The requested components are still well defined, but check the kernel "
                "with kpca_lib.mercer.check_mercer.",
                NonPSDKernelWarning,
                stacklevel=3,
            )

    # -- scikit-learn API -------------------------------------------------
    def fit(self, X: ArrayLike, y: object = None) -> KernelPCA:
        """Fit kernel PCA on ``X`` of shape (n_samples, n_features)."""
        X = check_array(X)
        n = X.shape[0]
        kernel_fn = self._kernel_function()  # validates kernel, sigma, degree, coef0
        if self.n_components is not None:
            k = check_n_components(self.n_components, n, f"n_samples = {n}")
        else:
            k = n
        K = kernel_fn(X)
        self._check_symmetric(K)
        col_means = K.mean(axis=0)
        grand_mean = float(col_means.mean())
        K_c = center_kernel(K, copy=False)
        # Centring leaves rounding-level asymmetry; use the symmetric part.
        K_c += K_c.T
        K_c *= 0.5
        eigenvalues, eigenvectors = top_eigh(K_c, k, self.eigen_solver)

        max_abs = float(np.max(np.abs(eigenvalues))) if eigenvalues.size else 0.0
        threshold = _negative_threshold(max_abs)
        if eigenvalues.size and eigenvalues[-1] < -threshold:
            bad = eigenvalues[eigenvalues < -threshold]
            raise ValueError(
                f"the centred kernel matrix has {bad.size} clearly negative eigenvalue(s) among "
                f"the {k} requested (smallest {bad.min():.4g}, largest {max_abs:.4g}): the kernel "
                "is not positive semi-definite on this data, so √(nλ) is undefined. Use a valid "
                "(Mercer) kernel (see kpca_lib.mercer.check_mercer) or fewer components."
            )
        if callable(self.kernel) and k < n:
            self._warn_if_not_psd(K_c, threshold)
        # Tiny eigenvalues are rounding noise: treat them as exact zeros.
        zero = eigenvalues <= max(1e-12 * max_abs, 0.0)
        eigenvalues = np.where(zero, 0.0, eigenvalues)
        if self.n_components is None:
            keep = ~zero
            if not np.any(keep):
                raise ValueError(
                    "the centred kernel matrix is zero: every sample is the same point in feature "
                    "space, so there is no variance to analyse. Check X and the kernel parameters."
                )
            eigenvalues, eigenvectors, zero = eigenvalues[keep], eigenvectors[:, keep], zero[keep]

        alphas = np.zeros_like(eigenvectors)
        nz = ~zero
        alphas[:, nz] = eigenvectors[:, nz] / np.sqrt(eigenvalues[nz])

        self.X_fit_ = X
        self.eigenvalues_ = eigenvalues
        self.eigenvectors_ = eigenvectors
        self.alphas_ = alphas
        self.explained_variance_ = eigenvalues / n
        self._col_means = col_means
        self._grand_mean = grand_mean
        self._fit_projection = eigenvectors * np.sqrt(eigenvalues)[None, :]
        self.n_components_ = eigenvalues.size
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project new points: ``center_test_kernel(k(X, X_fit_), K_fit) @ alphas_``."""
        check_is_fitted(self, "alphas_")
        X = check_array(X)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        K_test = self._kernel_function()(X, self.X_fit_)
        K_test_c = center_test_kernel_from_means(K_test, self._col_means, self._grand_mean)
        return K_test_c @ self.alphas_

    def fit_transform(self, X: ArrayLike, y: object = None) -> NDArray[np.float64]:
        """Fit and project the training points: ``K_c α_k = √(nλ_k) β_k``.

        Equal to ``fit(X).transform(X)`` up to rounding, without recomputing the kernel.
        """
        self.fit(X)
        return self._fit_projection.copy()

    def kernel_matrix_c(self) -> NDArray[np.float64]:
        """The centred training kernel matrix ``K_c`` (recomputed, O(n²) memory)."""
        check_is_fitted(self, "alphas_")
        return center_kernel(self._kernel_function()(self.X_fit_), copy=False)

