"""Approximate kernel PCA through explicit, finite feature maps (the feature view).

Exact kernel PCA works with the n×n kernel matrix (the *kernel view*). For
millions of points that is impossible, so we go back to the *feature view*:
find an explicit map ``Φ: R^d → R^J`` with ``Φ(x)ᵀΦ(y) ≈ k(x, y)``, then run
ordinary (linear) PCA on the J features. Its cost is O(n·J²) time and O(J²)
memory, linear in ``n``.

Two maps are provided, as scikit-learn style transformers (``fit``/``transform``):

* :class:`RandomFourierFeatures` (Rahimi & Recht, 2007), for the RBF kernel
  only. By Bochner's theorem ``exp(−‖x−y‖²/(2σ²)) = E_ω[cos(ωᵀ(x−y))]`` with
  ``ω ~ N(0, σ⁻² I)``; averaging ``J/2`` random frequencies, each giving the
  pair ``cos(ωᵀx), sin(ωᵀx)``, gives an unbiased estimate whose error shrinks
  like ``1/√J``.
* :class:`NystroemFeatures` (Williams & Seeger, 2001), for any kernel. Pick
  ``J`` landmark points ``L`` among the training points and use
  ``Φ(x) = k(x, L) U S^{-1/2}`` where ``K_LL = U S Uᵀ``; then
  ``ΦΦᵀ = K_nL K_LL⁻¹ K_Ln``, exact on the landmarks and usually much more
  accurate than random features for the same ``J``.

:func:`feature_pca` then does the *centred* linear PCA in R^J. Centring
matters: the features must be centred with the mean of the *training*
features, the explicit version of centring the kernel matrix; forgetting it
gives a different (uncentred) analysis.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._blocked import available_cores
from ._eigen import flip_signs, top_eigh
from ._threads import blas_threads
from ._validation import check_array, check_n_features
from .kernels import KernelSpec, evaluate, make_kernel

__all__ = [
    "RandomFourierFeatures",
    "NystroemFeatures",
    "FeaturePCAResult",
    "feature_pca",
    "feature_moments",
    "pca_from_moments",
    "APPROXIMATIONS",
]

APPROXIMATIONS = ("nystroem", "rff")

#: Rows per chunk when features are computed on the fly (≈ 40 MB for J = 500).
CHUNK_ROWS = 10_000


def check_n_features_out(n_features: object, n_samples: int | None = None) -> int:
    """Validate the number ``J`` of approximate features (landmarks or random features).

    Parameters
    ----------
    n_features : int
        Requested ``J >= 1``.
    n_samples : int, optional
        For the Nyström method ``J`` landmarks are drawn among the samples, so
        ``J <= n_samples``.
    """
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral):
        raise ValueError(
            f"n_features (the number J of approximate features) must be a positive integer; "
            f"got {n_features!r}."
        )
    if int(n_features) < 1:
        raise ValueError(f"n_features must be >= 1; got {n_features}.")
    if n_samples is not None and int(n_features) > n_samples:
        raise ValueError(
            f"n_features = {n_features} Nyström landmarks cannot be drawn from n_samples = "
            f"{n_samples} points; use n_features <= {n_samples}."
        )
    return int(n_features)


class _FeatureMap(TransformerMixin, BaseEstimator):
    """Shared ``transform`` of the explicit feature maps (subclasses define ``_features``)."""

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """The features ``Φ(X)``, of shape (n_samples, n_features)."""
        check_is_fitted(self, "n_features_out_")
        X = check_array(X)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        return self._features(X)

    def _features(self, X: NDArray[np.float64]) -> NDArray[np.float64]:  # pragma: no cover
        raise NotImplementedError


class RandomFourierFeatures(_FeatureMap):
    """Random Fourier features for the RBF kernel ``exp(−‖x−y‖²/(2σ²))``.

    ``Φ(x) = [cos(ω_iᵀx), sin(ω_iᵀx)]_{i=1..J/2} / √(J/2)`` with
    ``ω_i ~ N(0, σ⁻² I)``, so ``E[Φ(x)ᵀΦ(y)] = k(x, y)`` exactly and the error
    of ``ΦΦᵀ`` shrinks like ``1/√J``. For odd ``J`` the last feature is
    ``√2·cos(ωᵀx + b)`` with a random phase ``b ~ U[0, 2π)`` (weighted like one
    pair, so the estimate stays unbiased).

    Parameters
    ----------
    n_features : int, default=100
        Number ``J`` of output features.
    sigma : float, optional
        Bandwidth σ of the RBF kernel (default 1).
    gamma : float, optional
        scikit-learn's ``gamma = 1/(2σ²)`` instead of ``sigma`` (not both).
    random_state : int, Generator or None
        Seed of the random frequencies.

    Attributes
    ----------
    frequencies_ : ndarray of shape (n_features_in_, n_frequencies)
        The random ``ω_i`` as columns (``ceil(J/2)`` of them).
    phases_ : ndarray of shape (n_frequencies,)
        Zero for the cos/sin pairs, ``b`` for the odd last feature.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_lib.kernels import rbf_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> Phi = RandomFourierFeatures(4000, sigma=1.0, random_state=0).fit_transform(X)
    >>> bool(np.abs(Phi @ Phi.T - rbf_kernel(X, sigma=1.0)).max() < 0.1)
    True
    """

    def __init__(
        self,
        n_features: int = 100,
        sigma: float | None = None,
        random_state: int | np.random.Generator | None = None,
        *,
        gamma: float | None = None,
    ) -> None:
        self.n_features = n_features
        self.sigma = sigma
        self.random_state = random_state
        self.gamma = gamma

    def fit(self, X: ArrayLike, y: object = None) -> RandomFourierFeatures:
        """Draw the random frequencies for data with ``X.shape[1]`` features."""
        X = check_array(X)
        return self._draw(X.shape[1])

    def _draw(self, n_features_in: int) -> RandomFourierFeatures:
        """Draw the frequencies for ``n_features_in`` input features (they depend on nothing else)."""
        J = check_n_features_out(self.n_features)
        sigma = make_kernel("rbf", sigma=self.sigma, gamma=self.gamma).sigma
        rng = np.random.default_rng(self.random_state)
        n_pairs, odd = divmod(J, 2)
        self.frequencies_ = rng.standard_normal((n_features_in, n_pairs + odd)) / sigma
        self.phases_ = np.zeros(n_pairs + odd)
        if odd:
            self.phases_[-1] = rng.uniform(0.0, 2.0 * np.pi)
        self._n_pairs = n_pairs
        self._scale = 1.0 / np.sqrt(n_pairs + odd)
        self.n_features_in_ = n_features_in
        self.n_features_out_ = J
        return self

    def _project(self, X: NDArray[np.float64], W: NDArray[np.float64]) -> NDArray[np.float64]:
        """``Φ(X) @ W`` (no checks)."""
        return self._features(X) @ W

    def _features(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        p = self._n_pairs
        Z = X @ self.frequencies_
        out = np.empty((X.shape[0], self.n_features_out_))
        np.cos(Z[:, :p], out=out[:, :p])
        np.sin(Z[:, :p], out=out[:, p : 2 * p])
        if self.n_features_out_ > 2 * p:  # odd J: one random-phase feature
            out[:, -1] = np.sqrt(2.0) * np.cos(Z[:, -1] + self.phases_[-1])
        out *= self._scale
        return out


class NystroemFeatures(_FeatureMap):
    """Nyström features: ``Φ(x) = k(x, L) U S^{-1/2}`` for ``J`` random landmarks ``L``.

    With ``K_LL = U S Uᵀ`` the kernel matrix of the landmarks,
    ``Φ(X)Φ(Y)ᵀ = k(X, L) K_LL⁺ k(L, Y)``: exact whenever ``X`` or ``Y`` is a
    landmark, and a rank-``J`` approximation of ``K`` elsewhere. Eigen-directions
    of ``K_LL`` below ``1e-12`` times its largest eigenvalue are numerically
    zero; their features are set to 0 (``rank_`` counts the others).

    Parameters
    ----------
    n_features : int, default=100
        Number ``J`` of landmarks, drawn uniformly without replacement from the
        training points (so ``J <= n_samples``); also the number of features.
    kernel : {"rbf", "poly", "linear", "sigmoid", "cosine"} or callable, default="rbf"
        As in :class:`kpca_lib.kernel_pca.KernelPCA`.
    sigma, gamma, degree, coef0
        Kernel parameters, as in :class:`kpca_lib.kernel_pca.KernelPCA`
        (:func:`kpca_lib.kernels.make_kernel`).
    random_state : int, Generator or None
        Seed of the landmark choice.

    Attributes
    ----------
    landmarks_ : ndarray of shape (n_features, n_features_in_)
    landmark_indices_ : ndarray of shape (n_features,)
        Rows of the training ``X`` used as landmarks (sorted).
    normalization_ : ndarray of shape (n_features, n_features)
        ``U S^{-1/2}``, so that ``Φ(X) = k(X, landmarks_) @ normalization_``.
    rank_ : int
        Number of non-zero features (numerical rank of ``K_LL``).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_lib.kernels import rbf_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> nys = NystroemFeatures(50, sigma=1.0, random_state=0).fit(X)
    >>> Phi = nys.transform(X)                       # every point is a landmark: exact
    >>> bool(np.allclose(Phi @ Phi.T, rbf_kernel(X, sigma=1.0), atol=1e-6))
    True
    """

    def __init__(
        self,
        n_features: int = 100,
        kernel: str | Callable = "rbf",
        sigma: float | None = None,
        degree: int = 2,
        coef0: float = 1.0,
        random_state: int | np.random.Generator | None = None,
        *,
        gamma: float | None = None,
    ) -> None:
        self.n_features = n_features
        self.kernel = kernel
        self.sigma = sigma
        self.degree = degree
        self.coef0 = coef0
        self.random_state = random_state
        self.gamma = gamma

    def _spec(self) -> KernelSpec:
        return make_kernel(
            self.kernel, sigma=self.sigma, gamma=self.gamma, degree=self.degree, coef0=self.coef0
        )

    def _kernel_function(self) -> Callable[[NDArray, NDArray | None], NDArray]:
        spec = self._spec()
        return lambda X, Y=None: evaluate(spec, X, Y)

    def fit(self, X: ArrayLike, y: object = None) -> NystroemFeatures:
        """Choose the landmarks among the rows of ``X`` and factor their kernel matrix."""
        X = check_array(X)
        idx = self._landmark_indices(X.shape[0])
        return self._fit_landmarks(X[idx], idx)

    def _landmark_indices(self, n_samples: int) -> NDArray[np.intp]:
        """The sorted rows drawn as landmarks: they depend on ``n_samples`` and the seed only,
        so any container of the same rows (a Dask array) gets the same landmarks."""
        self._kernel_function()  # validates kernel, sigma, degree, coef0
        J = check_n_features_out(self.n_features, n_samples)
        rng = np.random.default_rng(self.random_state)
        return np.sort(rng.choice(n_samples, size=J, replace=False))

    def _fit_landmarks(self, L: NDArray[np.float64], idx: NDArray[np.intp]) -> NystroemFeatures:
        """Factor the kernel matrix of the landmarks ``L`` (the rows ``idx`` of the training X)."""
        J = L.shape[0]
        K_LL = self._kernel_function()(L)
        K_LL = 0.5 * (K_LL + K_LL.T)
        S, U = np.linalg.eigh(K_LL)
        keep = S > 1e-12 * max(float(S[-1]), 0.0)
        normalization = np.zeros_like(U)
        normalization[:, keep] = U[:, keep] / np.sqrt(S[keep])
        # Largest eigenvalue first, so the leading features carry most of K.
        self.normalization_ = np.ascontiguousarray(normalization[:, ::-1])
        self.landmarks_ = L
        self.landmark_indices_ = idx
        self.rank_ = int(keep.sum())
        self.n_features_in_ = L.shape[1]
        self.n_features_out_ = J
        return self

    def _features(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._kernel_function()(X, self.landmarks_) @ self.normalization_

    def _project(self, X: NDArray[np.float64], W: NDArray[np.float64]) -> NDArray[np.float64]:
        """``Φ(X) @ W = k(X, L) @ (normalization_ @ W)``: O(J·k) per point instead of O(J²)."""
        return self._kernel_function()(X, self.landmarks_) @ (self.normalization_ @ W)


def _chunks(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def _map_chunks(
    fn: Callable[[slice], object], n: int, chunk_rows: int, n_threads: int
) -> list[object]:
    """``[fn(chunk) for chunk in chunks]``, on ``n_threads`` threads with single-threaded BLAS."""
    chunks = list(_chunks(n, chunk_rows))
    if n_threads <= 1 or len(chunks) == 1:
        return [fn(c) for c in chunks]
    with blas_threads(1), ThreadPoolExecutor(n_threads) as pool:
        return list(pool.map(fn, chunks))


@dataclass
class FeaturePCAResult:
    """Linear PCA of centred features (see :func:`feature_pca`).

    Attributes
    ----------
    eigenvalues : ndarray of shape (k,)
        ``n ×`` the eigenvalues of the feature covariance (descending): the
        eigenvalues of ``Φ_cᵀΦ_c``, which are those of ``Φ_cΦ_cᵀ ≈ K_c``, so
        they approximate the exact ``KernelPCA.eigenvalues_``.
    components : ndarray of shape (k, J)
        Unit principal directions in feature space, as rows.
    mean : ndarray of shape (J,)
        Mean of the training features (the centre).
    """

    eigenvalues: NDArray[np.float64]
    components: NDArray[np.float64]
    mean: NDArray[np.float64]


def feature_pca(
    features: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    X: NDArray[np.float64],
    n_components: int,
    *,
    chunk_rows: int = CHUNK_ROWS,
    n_threads: int | None = None,
) -> FeaturePCAResult:
    """Centred linear PCA of ``features(X)`` without holding all the features at once.

    One pass over ``X`` in chunks accumulates the feature sum and ``ΦᵀΦ``
    (shifted by the first chunk's mean, against cancellation), then the J×J
    covariance ``C = (1/n) Σ (Φ(x_i) − μ)(Φ(x_i) − μ)ᵀ`` is diagonalised.
    Memory is O(J² + chunk_rows·J) whatever ``n``.

    Parameters
    ----------
    features : callable
        ``features(X_chunk) -> Φ`` of shape (rows, J).
    X : ndarray of shape (n, d)
    n_components : int
        ``k <= J``.
    chunk_rows : int, default=10000
    n_threads : int, optional
        Threads computing chunks in parallel (default: every available core).

    Returns
    -------
    FeaturePCAResult
    """
    n = X.shape[0]
    n_threads = available_cores() if n_threads is None else n_threads
    shift = features(X[: min(n, chunk_rows)]).mean(axis=0)

    def moments(rows: slice) -> tuple[NDArray, NDArray]:
        return feature_moments(features, X[rows], shift, chunk_rows=chunk_rows)

    parts = _map_chunks(moments, n, chunk_rows, n_threads)
    total = sum(p[0] for p in parts)
    gram = sum(p[1] for p in parts)
    return pca_from_moments(total, gram, n, shift, n_components)


def feature_moments(
    features: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    X: NDArray[np.float64],
    shift: NDArray[np.float64],
    *,
    chunk_rows: int = CHUNK_ROWS,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(Σ_i (Φ(x_i) − shift), Σ_i (Φ(x_i) − shift)(Φ(x_i) − shift)ᵀ)`` over the rows of ``X``.

    The features of at most ``chunk_rows`` rows exist at once, so memory is
    O(chunk_rows·J + J²) whatever ``X.shape[0]``. Sums of these over disjoint row
    sets (in any order) give the moments of their union: what a Dask reduction
    or :meth:`~kpca_lib.kernel_pca.KernelPCA.partial_fit` adds up.
    """
    total: NDArray[np.float64] | None = None
    gram: NDArray[np.float64] | None = None
    for rows in _chunks(X.shape[0], chunk_rows):
        F = features(X[rows])
        F -= shift
        s, g = F.sum(axis=0), F.T @ F
        total, gram = (s, g) if total is None or gram is None else (total + s, gram + g)
    if total is None or gram is None:
        J = shift.shape[0]
        return np.zeros(J), np.zeros((J, J))
    return total, gram


def pca_from_moments(
    total: NDArray[np.float64],
    gram: NDArray[np.float64],
    n: int,
    shift: NDArray[np.float64],
    n_components: int,
) -> FeaturePCAResult:
    """The centred feature PCA from the shifted moments of :func:`feature_moments` over ``n`` rows.

    ``C = gram/n − δδᵀ`` with ``δ = total/n = mean − shift`` is the covariance
    ``(1/n) Σ (Φ(x_i) − μ)(Φ(x_i) − μ)ᵀ``; its top ``n_components`` eigenpairs.
    """
    delta = total / n  # mean − shift
    C = gram / n - np.outer(delta, delta)
    C = 0.5 * (C + C.T)
    eigenvalues, W = top_eigh(C, n_components, "dense")
    eigenvalues = np.clip(eigenvalues, 0.0, None) * n
    components = flip_signs(np.ascontiguousarray(W)).T
    return FeaturePCAResult(eigenvalues, np.ascontiguousarray(components), shift + delta)


def project_features(
    project: Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]],
    X: NDArray[np.float64],
    result: FeaturePCAResult,
    *,
    chunk_rows: int = CHUNK_ROWS,
    n_threads: int | None = None,
) -> NDArray[np.float64]:
    """``(Φ(X) − mean) @ componentsᵀ``, chunk by chunk.

    Parameters
    ----------
    project : callable
        ``project(X_chunk, W) = Φ(X_chunk) @ W`` (a feature map's ``_project``,
        which may avoid forming Φ), or any ``lambda A, W: features(A) @ W``.
    X : ndarray of shape (n, d)
    result : FeaturePCAResult
        From :func:`feature_pca`.
    """
    n_threads = available_cores() if n_threads is None else n_threads
    W = result.components.T
    offset = result.mean @ W

    def one_chunk(rows: slice) -> NDArray:
        Z = project(X[rows], W)
        Z -= offset
        return Z

    parts = _map_chunks(one_chunk, X.shape[0], chunk_rows, n_threads)
    return np.vstack(parts) if parts else np.empty((0, W.shape[1]))
