"""Kernel PCA, following the lectures step by step.

1. Build the kernel matrix ``K_ij = k(x_i, x_j)`` (n×n).
2. Centre it: ``K_c = K − 1K − K1 + 1K1`` (:func:`kpca_lib.centering.center_kernel`).
3. Eigendecompose ``K_c β_k = (nλ_k) β_k`` with unit ``β_k``.
4. Normalise ``α_k = β_k / √(nλ_k)`` so that ``w_k = Σ_j α_kj φ(x_j)`` has unit
   norm (``α_kᵀ K_c α_k = 1``).
5. Project without ever forming φ: the k-th coordinate of ``x_i`` is
   ``Σ_j α_kj K^c_ij``, and of a new point ``x`` it is ``Σ_j α_kj k^c(x, x_j)``
   with the kernel row centred by the *training* statistics.

At scale (the exact method, ``n`` in the tens of thousands) the same steps are
done without copies of the n×n matrix: the kernel is built block by block in
parallel threads, only its lower triangle is stored (:mod:`kpca_lib._blocked`),
it is centred implicitly inside every matrix–vector product, and only the top
eigenpairs are computed, by a Lanczos solver that stops at the requested
accuracy (:func:`kpca_lib._eigen.lanczos_eigh`).

With ``approximation="nystroem"`` or ``"rff"`` the kernel matrix is not used at
all: explicit approximate features ``Φ(x) ∈ R^J`` are computed chunk by chunk
and linear PCA is run on them, centred (:mod:`kpca_lib.approximation`).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse.linalg
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._blocked import build_kernel_panels, symmetrize_inplace
from ._eigen import EIGEN_SOLVERS, choose_solver, top_eigh, top_eigh_operator
from ._validation import check_array, check_n_components, check_n_features, check_positive
from .approximation import (
    APPROXIMATIONS,
    NystroemFeatures,
    RandomFourierFeatures,
    check_n_features_out,
    feature_pca,
    project_features,
)
from .centering import center_kernel, center_test_kernel_from_means
from .kernels import get_kernel, kernel_block_function

__all__ = ["KernelPCA", "NonPSDKernelWarning"]

KERNEL_DTYPES = ("float64", "float32")

#: Test-kernel entries computed at once in ``transform`` (32 MB of float64).
_TRANSFORM_BLOCK = 1 << 22


class NonPSDKernelWarning(UserWarning):
    """The centred kernel matrix has clearly negative eigenvalues (not a Mercer kernel)."""


def _negative_threshold(max_abs: float) -> float:
    """Eigenvalues below ``-threshold`` are 'clearly negative' (not rounding)."""
    return max(1e-10, 1e-5 * max_abs)


def _check_kernel_dtype(kernel_dtype: object) -> np.dtype:
    try:
        dtype = np.dtype(kernel_dtype)
    except TypeError:
        dtype = None
    if dtype is None or dtype.name not in KERNEL_DTYPES:
        raise ValueError(
            f"kernel_dtype must be one of {', '.join(repr(d) for d in KERNEL_DTYPES)}; "
            f"got {kernel_dtype!r}."
        )
    return dtype


def _check_tol(tol: object) -> float | None:
    if tol is None:
        return None
    return check_positive(tol, "tol")


def _check_max_iter(max_iter: object) -> int | None:
    if max_iter is None:
        return None
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be None or a positive integer; got {max_iter!r}.")
    return int(max_iter)


class KernelPCA(TransformerMixin, BaseEstimator):
    """Kernel principal component analysis, exact or approximate.

    Parameters
    ----------
    n_components : int, optional
        Number of components, between 1 and ``n_samples`` (and ``n_features``
        for an approximation). ``None`` keeps every component with a non-zero
        eigenvalue.
    kernel : {"rbf", "poly", "linear"} or callable, default="rbf"
        ``"rbf"``: ``exp(−‖x−y‖²/(2σ²))``; ``"poly"``: ``(xᵀy + coef0)^degree``;
        ``"linear"``: ``xᵀy``; or any function ``k(x, y) -> float`` of two samples.
    sigma : float, default=1.0
        Bandwidth σ of the RBF kernel (scikit-learn's ``gamma = 1/(2σ²)``).
    degree : int, default=2
        Degree ``p`` of the polynomial kernel.
    coef0 : float, default=1.0
        Constant of the polynomial kernel.
    eigen_solver : {"auto", "dense", "lanczos", "arpack"}, default="auto"
        How the top eigenpairs of the centred kernel matrix are computed (exact
        method only):

        * ``"dense"``: LAPACK ``eigh`` of the full float64 matrix, top pairs
          only. O(n³) time and a full n×n matrix: for small ``n`` or many
          components.
        * ``"lanczos"``: our block Lanczos (full reorthogonalisation, thick
          restarts) on the half-stored, implicitly centred kernel; stops when
          every residual ``‖K_c u − θu‖ ≤ tol·‖K_c‖``. Usually 10–20 passes
          over the matrix for a few components.
        * ``"arpack"``: scipy's ARPACK ``eigsh`` on the same half-stored matrix
          (to machine precision by default: slower than ``"lanczos"``).
        * ``"auto"``: ``"lanczos"`` when ``n > 200`` and
          ``n_components ≤ n/10``, else ``"dense"``.

        Callable kernels always build the full matrix (their Python loop is
        the bottleneck anyway).
    tol : float, optional
        Relative residual tolerance of the iterative solvers. ``None``:
        ``1e-10`` for ``"lanczos"`` with a float64 kernel and 0 (machine
        precision) for ``"arpack"``. With a float32 kernel ``"lanczos"`` never
        asks for less than ``10·eps(float32) ≈ 1.2e-6``, since the stored
        matrix is not more accurate.
    max_iter : int, optional
        Maximum number of matrix–vector products of the iterative solvers.
    kernel_dtype : {"float64", "float32"}, default="float64"
        Storage precision of the kernel matrix for the iterative solvers with
        a named kernel. ``"float32"`` halves the memory again (``2n²`` bytes
        instead of ``4n²``) and speeds up the solver; kernel entries are then
        rounded to ~6e-8 relative, which moves the eigenvalues by at most
        ``2⁻²⁴‖K‖_F`` (a :class:`UserWarning` is issued when that bound exceeds
        1e-4 of the smallest requested eigenvalue). Everything else, including
        the output, stays float64. Ignored by ``"dense"`` and callable kernels.
    approximation : {None, "nystroem", "rff"}, default=None
        ``None``: exact kernel PCA. ``"nystroem"``: :class:`~kpca_lib.approximation.NystroemFeatures`
        with ``n_features`` landmarks (any kernel); ``"rff"``:
        :class:`~kpca_lib.approximation.RandomFourierFeatures` (RBF kernel
        only). Then centred linear PCA of the ``n_features`` features, in
        O(n·J²) time and O(J²) memory: millions of points.
    n_features : int, default=100
        Number ``J`` of approximate features (approximations only).
    random_state : int, Generator or None
        Seed of the approximations' landmarks or random frequencies. The exact
        solvers are always deterministic (fixed start vector).

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues ``nλ_k`` of the centred kernel matrix, descending
        (``λ_k`` is the variance along the k-th component in feature space).
        For an approximation: ``n ×`` the eigenvalues of the covariance of the
        centred features (the eigenvalues of ``Φ_cᵀΦ_c``, equal to those of
        ``Φ_cΦ_cᵀ ≈ K_c``), which approximate the exact ones.
    explained_variance_ : ndarray of shape (n_components,)
        ``λ_k = eigenvalues_ / n``.
    alphas_ : ndarray of shape (n_samples, n_components)
        Exact method only. ``α_k = β_k / √(nλ_k)``; columns with a zero
        eigenvalue are zero. ``alphas_.T @ K_c @ alphas_`` is the identity (on
        non-zero components).
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        Exact method only. Unit eigenvectors ``β_k``; the largest-magnitude
        entry of each is positive.
    X_fit_ : ndarray of shape (n_samples, n_features)
        Exact method only (``transform`` needs every training point).
    feature_map_ : RandomFourierFeatures or NystroemFeatures
        Approximations only: the fitted feature map ``Φ``.
    components_ : ndarray of shape (n_components, n_features)
        Approximations only: unit principal directions in R^J, as rows (the
        largest-magnitude entry of each is positive).
    feature_mean_ : ndarray of shape (n_features,)
        Approximations only: mean of the training features, used to centre.
    eigen_solver_ : str
        The solver actually used (``"features"`` for an approximation).
    n_components_ : int
    n_features_in_ : int

    Notes
    -----
    ``transform(X)`` is ``center_test_kernel(k(X, X_fit_), K_fit) @ alphas_``
    (computed in row blocks), or ``(Φ(X) − feature_mean_) @ components_.T``
    for an approximation; ``fit_transform(X)`` equals ``fit(X).transform(X)``.

    Examples
    --------
    >>> from kpca_lib.datasets import make_moons
    >>> X, y = make_moons(100, noise=0.05, random_state=0)
    >>> Z = KernelPCA(n_components=2, kernel="rbf", sigma=0.3).fit_transform(X)
    >>> Z.shape
    (100, 2)
    >>> approx = KernelPCA(2, sigma=0.3, approximation="nystroem", n_features=50, random_state=0)
    >>> approx.fit_transform(X).shape
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
        tol: float | None = None,
        max_iter: int | None = None,
        kernel_dtype: str = "float64",
        approximation: str | None = None,
        n_features: int = 100,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.sigma = sigma
        self.degree = degree
        self.coef0 = coef0
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.kernel_dtype = kernel_dtype
        self.approximation = approximation
        self.n_features = n_features
        self.random_state = random_state

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

    def _check_approximation(self) -> str | None:
        if self.approximation is None:
            return None
        if not isinstance(self.approximation, str) or self.approximation not in APPROXIMATIONS:
            raise ValueError(
                f"approximation must be None, {', '.join(repr(a) for a in APPROXIMATIONS)}; "
                f"got {self.approximation!r}."
            )
        if self.approximation == "rff" and self.kernel != "rbf":
            raise ValueError(
                f"approximation='rff' (random Fourier features) exists for kernel='rbf' only; "
                f"got kernel={self.kernel!r}. Use approximation='nystroem' for other kernels."
            )
        return self.approximation

    def _exact_eigenpairs(
        self, X: NDArray[np.float64], k: int
    ) -> tuple[NDArray, NDArray, NDArray, float, NDArray | None]:
        """Top-k eigenpairs of the centred kernel, its column means, grand mean and (if formed) K_c."""
        n = X.shape[0]
        kernel_fn = self._kernel_function()
        solver = choose_solver(n, k, self.eigen_solver)
        tol, max_iter = _check_tol(self.tol), _check_max_iter(self.max_iter)
        dtype = _check_kernel_dtype(self.kernel_dtype)
        self.eigen_solver_ = solver
        if solver == "dense" or callable(self.kernel):
            K = kernel_fn(X)
            self._check_symmetric(K)
            col_means = K.mean(axis=0)
            grand_mean = float(col_means.mean())
            K_c = center_kernel(K, copy=False)
            # Centring leaves rounding-level asymmetry; use the symmetric part.
            symmetrize_inplace(K_c)
            if solver == "dense":
                # K_c is still needed only to check the rest of a callable's spectrum.
                keep = callable(self.kernel) and k < n
                eigenvalues, eigenvectors = top_eigh(K_c, k, "dense", overwrite=not keep)
                if not keep:
                    K_c = None
            else:
                eigenvalues, eigenvectors = top_eigh_operator(
                    K_c.__matmul__, n, k, solver, tol=tol, max_iter=max_iter
                )
            return eigenvalues, eigenvectors, col_means, grand_mean, K_c
        block = kernel_block_function(
            self.kernel, X, sigma=self.sigma, degree=self.degree, coef0=self.coef0
        )
        panels = build_kernel_panels(block, n, dtype=dtype)
        if dtype == np.float32 and solver == "lanczos":
            # The stored kernel is only float32-accurate: ask no more of the solver.
            tol = max(1e-6 if tol is None else tol, 10.0 * float(np.finfo(np.float32).eps))
        eigenvalues, eigenvectors = top_eigh_operator(
            panels.centered_matmat, n, k, solver, tol=tol, max_iter=max_iter
        )
        if dtype == np.float32:
            self._check_float32_accuracy(eigenvalues, panels.frobenius_norm)
        return eigenvalues, eigenvectors, panels.row_means, panels.grand_mean, None

    @staticmethod
    def _check_float32_accuracy(eigenvalues: NDArray, frobenius_norm: float) -> None:
        """Warn if float32 rounding of K may move the eigenvalues by more than 1e-4 relative."""
        bound = 2.0**-24 * frobenius_norm  # ‖E‖₂ ≤ ‖E‖_F ≤ u‖K‖_F, and ‖P E P‖₂ ≤ ‖E‖₂
        positive = eigenvalues[eigenvalues > 0]
        smallest = float(positive.min()) if positive.size else 0.0
        if bound > 1e-4 * smallest:
            warnings.warn(
                f"kernel_dtype='float32': rounding the kernel matrix may move the eigenvalues by "
                f"up to {bound:.3g}, more than 1e-4 of the smallest requested eigenvalue "
                f"({smallest:.3g}); use kernel_dtype='float64' for accurate results.",
                UserWarning,
                stacklevel=4,
            )

    # -- scikit-learn API -------------------------------------------------
    def fit(self, X: ArrayLike, y: object = None) -> KernelPCA:
        """Fit kernel PCA on ``X`` of shape (n_samples, n_features)."""
        self._fit(X, project=False)
        return self

    def _fit(self, X: ArrayLike, *, project: bool) -> NDArray[np.float64] | None:
        X = check_array(X)
        n = X.shape[0]
        self._kernel_function()  # validates kernel, sigma, degree, coef0
        if self.eigen_solver not in EIGEN_SOLVERS:
            choose_solver(n, 1, self.eigen_solver)  # raises the ValueError
        _check_tol(self.tol)
        _check_max_iter(self.max_iter)
        _check_kernel_dtype(self.kernel_dtype)
        if self._check_approximation() is not None:
            return self._fit_approximate(X, project=project)
        if self.n_components is not None:
            k = check_n_components(self.n_components, n, f"n_samples = {n}")
        else:
            k = n
        eigenvalues, eigenvectors, col_means, grand_mean, K_c = self._exact_eigenpairs(X, k)

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
        del K_c
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
        self.n_components_ = eigenvalues.size
        self.n_features_in_ = X.shape[1]
        for name in ("feature_map_", "components_", "feature_mean_"):
            self.__dict__.pop(name, None)
        return eigenvectors * np.sqrt(eigenvalues)[None, :] if project else None

    def _fit_approximate(self, X: NDArray[np.float64], *, project: bool) -> NDArray | None:
        n = X.shape[0]
        J = check_n_features_out(self.n_features, n if self.approximation == "nystroem" else None)
        max_k = min(n, J)
        if self.n_components is not None:
            k = check_n_components(
                self.n_components, max_k, f"min(n_samples, n_features) = {max_k}"
            )
        else:
            k = max_k
        if self.approximation == "rff":
            feature_map = RandomFourierFeatures(J, sigma=self.sigma, random_state=self.random_state)
        else:
            feature_map = NystroemFeatures(
                J,
                kernel=self.kernel,
                sigma=self.sigma,
                degree=self.degree,
                coef0=self.coef0,
                random_state=self.random_state,
            )
        feature_map.fit(X)
        threads = 1 if callable(self.kernel) else None
        result = feature_pca(feature_map._features, X, k, n_threads=threads)
        eigenvalues = result.eigenvalues
        keep = eigenvalues > 1e-12 * max(float(eigenvalues.max()), 0.0)
        if self.n_components is None:
            if not np.any(keep):
                raise ValueError(
                    "the centred features are zero: every sample is the same point in feature "
                    "space, so there is no variance to analyse. Check X and the kernel parameters."
                )
            result.eigenvalues, result.components = eigenvalues[keep], result.components[keep]
        else:
            result.eigenvalues = np.where(keep, eigenvalues, 0.0)

        self.feature_map_ = feature_map
        self.components_ = result.components
        self.feature_mean_ = result.mean
        self.eigenvalues_ = result.eigenvalues
        self.explained_variance_ = result.eigenvalues / n
        self.eigen_solver_ = "features"
        self.n_components_ = result.eigenvalues.size
        self.n_features_in_ = X.shape[1]
        self._feature_pca = result
        for name in ("X_fit_", "alphas_", "eigenvectors_", "_col_means", "_grand_mean"):
            self.__dict__.pop(name, None)
        if not project:
            return None
        return project_features(feature_map._project, X, result, n_threads=threads)

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project new points.

        Exact: ``center_test_kernel(k(X, X_fit_), K_fit) @ alphas_``, computed
        in row blocks so that the m×n test kernel is never held at once.
        Approximation: ``(Φ(X) − feature_mean_) @ components_.T``.
        """
        check_is_fitted(self, "eigenvalues_")
        X = check_array(X)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        if hasattr(self, "feature_map_"):
            threads = 1 if callable(self.kernel) else None
            return project_features(
                self.feature_map_._project, X, self._feature_pca, n_threads=threads
            )
        kernel_fn = self._kernel_function()
        rows = max(1, _TRANSFORM_BLOCK // self.X_fit_.shape[0])
        Z = np.empty((X.shape[0], self.alphas_.shape[1]))
        for start in range(0, X.shape[0], rows):
            chunk = slice(start, start + rows)
            K_test = kernel_fn(X[chunk], self.X_fit_)
            K_test = center_test_kernel_from_means(K_test, self._col_means, self._grand_mean)
            Z[chunk] = K_test @ self.alphas_
        return Z

    def fit_transform(self, X: ArrayLike, y: object = None) -> NDArray[np.float64]:
        """Fit and project the training points: ``K_c α_k = √(nλ_k) β_k``.

        Equal to ``fit(X).transform(X)`` up to rounding, without recomputing the
        kernel (exact method); an approximation makes a second pass over the
        features.
        """
        return self._fit(X, project=True)

    def kernel_matrix_c(self) -> NDArray[np.float64]:
        """The centred training kernel matrix ``K_c`` (recomputed, O(n²) memory; exact only)."""
        check_is_fitted(self, "eigenvalues_")
        if not hasattr(self, "X_fit_"):
            raise ValueError(
                "kernel_matrix_c needs the training points, which an approximation does not "
                "keep; fit with approximation=None."
            )
        return center_kernel(self._kernel_function()(self.X_fit_), copy=False)
