"""Pre-images: from kernel PCA projections back to the input space.

Kernel PCA projects a point onto directions in feature space; the projection
``PΦ(x)`` is a point of feature space that is usually not the image ``Φ(z)`` of
any input ``z``. A *pre-image* is an input ``z`` whose image is as close as
possible to it. Two classic answers, both here:

* **Learned pre-images** (Bakır, Weston & Schölkopf 2004, and scikit-learn's
  ``KernelPCA(fit_inverse_transform=True)``): learn the map ``Z → X`` from the
  training pairs ``(z_i, x_i)`` by kernel ridge regression, with the same kernel
  applied in ``Z`` space. Any kernel; one matrix product per new point.
* **Fixed-point pre-images** (Mika et al. 1999), RBF kernel only: minimise
  ``‖Φ(z) − PΦ(x)‖²`` directly by a fixed-point iteration on ``z``.

Denoising (project noisy points on the leading components and map back) is the
classic demonstration: :func:`denoise`.

References
----------
G. H. Bakır, J. Weston, B. Schölkopf. Learning to find pre-images. NIPS 16, 2004.
S. Mika, B. Schölkopf, A. Smola, K.-R. Müller, M. Scholz, G. Rätsch. Kernel PCA
and de-noising in feature spaces. NIPS 11, 1999.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from ._validation import check_array, check_nonnegative, check_positive
from .kernels import squared_distances

__all__ = [
    "PreimageMap",
    "FixedPointResult",
    "fit_preimage_map",
    "fixed_point_preimage",
    "denoise",
    "rbf_sigma",
    "expansion_coefficients",
]

KernelFunction = Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]]

DENOISE_METHODS = ("ridge", "fixed-point")

#: Query-by-training entries handled at once by the fixed-point iteration (32 MB).
_BLOCK = 1 << 22


def _kernel_matrix(kernel_fn: KernelFunction, A: NDArray, B: NDArray, what: str) -> NDArray:
    """Call ``kernel_fn(A, B)`` and check its shape and values."""
    K = np.asarray(kernel_fn(A, B), dtype=np.float64)
    if K.shape != (A.shape[0], B.shape[0]):
        raise ValueError(
            f"kernel_fn must return the ({A.shape[0]}, {B.shape[0]}) kernel matrix of its two "
            f"arguments; for {what} it returned shape {K.shape}."
        )
    if not np.all(np.isfinite(K)):
        raise ValueError(
            f"kernel_fn returned NaN or infinity for {what}; check the kernel parameters "
            "(e.g. a polynomial kernel of high degree overflows on large projections)."
        )
    return K


@dataclass(frozen=True)
class PreimageMap:
    """A fitted kernel ridge regression from projections ``Z`` back to inputs ``X``.

    Built by :func:`fit_preimage_map`; ``predict(Z)`` is
    ``kernel_fn(Z, X_transformed_fit_) @ dual_coef_``.

    Attributes
    ----------
    X_transformed_fit_ : ndarray of shape (n_samples, n_components)
        The training projections ``Z_fit`` (scikit-learn's name).
    dual_coef_ : ndarray of shape (n_samples, n_features)
        ``(K_Z + alpha I)⁻¹ X_fit``, with ``K_Z = kernel_fn(Z_fit, Z_fit)``.
    kernel_fn : callable
        ``kernel_fn(A, B)`` returns the ``(len(A), len(B))`` kernel matrix.
    alpha : float
        The ridge parameter used.
    """

    X_transformed_fit_: NDArray[np.float64]
    dual_coef_: NDArray[np.float64]
    kernel_fn: KernelFunction
    alpha: float

    def predict(self, Z: ArrayLike) -> NDArray[np.float64]:
        """Pre-images of the projections ``Z``.

        Parameters
        ----------
        Z : array-like of shape (n_points, n_components)
            Projections, e.g. ``KernelPCA.transform(X)``.

        Returns
        -------
        ndarray of shape (n_points, n_features)
        """
        Z = check_array(Z, "Z")
        k = self.X_transformed_fit_.shape[1]
        if Z.shape[1] != k:
            raise ValueError(
                f"Z has {Z.shape[1]} columns, but the pre-image map was fitted on projections "
                f"with {k} components; pass the output of the same transform."
            )
        K = _kernel_matrix(self.kernel_fn, Z, self.X_transformed_fit_, "predict(Z)")
        return K @ self.dual_coef_


def fit_preimage_map(
    Z_fit: ArrayLike, X_fit: ArrayLike, *, kernel_fn: KernelFunction, alpha: float = 1.0
) -> PreimageMap:
    """Learn pre-images by kernel ridge regression from projections to inputs.

    Bakır, Weston & Schölkopf (2004), as scikit-learn's
    ``KernelPCA(fit_inverse_transform=True)``: with ``K_Z = kernel_fn(Z_fit, Z_fit)``
    (the estimator's kernel, applied in the space of projections), solve
    ``(K_Z + alpha I) C = X_fit`` for the dual coefficients ``C`` (n×d). The
    pre-image of a projection ``z`` is then ``Σ_i k(z, z_i) C_i``, the ridge
    regression estimate of the input that produced ``z``.

    Parameters
    ----------
    Z_fit : array-like of shape (n_samples, n_components)
        Projections of the training points (``KernelPCA.fit_transform(X_fit)``).
    X_fit : array-like of shape (n_samples, n_features)
        The training points themselves.
    kernel_fn : callable
        ``kernel_fn(A, B)`` returns the ``(len(A), len(B))`` kernel matrix, e.g.
        ``lambda A, B: kpca_lib.kernels.rbf_kernel(A, B, sigma=s)``. It must be
        positive semi-definite on ``Z_fit`` (any Mercer kernel is).
    alpha : float, default=1.0
        Ridge parameter, finite and >= 0 (as scikit-learn's). Larger values give
        smoother, more averaged pre-images; smaller ones fit the training pairs
        more closely, and 0 interpolates them (``K_Z`` must then be positive
        definite).

    Returns
    -------
    PreimageMap

    Raises
    ------
    ValueError
        If ``alpha`` is not a finite number >= 0, the shapes disagree, the kernel
        returns a matrix of the wrong shape or non-finite values, or
        ``K_Z + alpha I`` is not numerically positive definite (a kernel that is
        not positive semi-definite, or ``alpha`` too small for the rounding).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_lib.kernels import linear_kernel
    >>> Z = np.arange(6.0).reshape(3, 2)
    >>> m = fit_preimage_map(Z, 2 * Z, kernel_fn=linear_kernel, alpha=1e-9)
    >>> bool(np.allclose(m.predict(Z), 2 * Z))
    True
    """
    alpha = check_nonnegative(alpha, "alpha")
    Z_fit = check_array(Z_fit, "Z_fit")
    X_fit = check_array(X_fit, "X_fit")
    if Z_fit.shape[0] != X_fit.shape[0]:
        raise ValueError(
            f"Z_fit and X_fit must have the same number of rows (one projection per training "
            f"point); got {Z_fit.shape[0]} and {X_fit.shape[0]}."
        )
    if not callable(kernel_fn):
        raise ValueError(
            f"kernel_fn must be a function kernel_fn(A, B) -> kernel matrix; "
            f"got {type(kernel_fn).__name__}."
        )
    Z_fit = Z_fit.copy()
    K = _kernel_matrix(kernel_fn, Z_fit, Z_fit, "the training projections Z_fit")
    n = K.shape[0]
    K.flat[:: n + 1] += alpha
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
            dual_coef = scipy.linalg.solve(K, X_fit, assume_a="pos", overwrite_a=True)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgWarning) as exc:
        raise ValueError(
            f"K_Z + alpha*I is singular or not positive definite (alpha={alpha!r}): the kernel "
            "is not positive semi-definite on the projections, or alpha is too small compared "
            f"with the rounding of K_Z. Use a Mercer kernel or a larger alpha. ({exc})"
        ) from exc
    return PreimageMap(
        X_transformed_fit_=Z_fit, dual_coef_=dual_coef, kernel_fn=kernel_fn, alpha=alpha
    )


def rbf_sigma(estimator: Any) -> float:
    """The bandwidth σ of a fitted RBF kernel PCA, given as ``sigma`` or as ``gamma``.

    scikit-learn's ``gamma`` is ``1/(2σ²)``, so ``σ = 1/√(2 gamma)``. A fitted
    ``sigma_`` attribute, when present, wins; otherwise ``gamma`` if it is set
    (not ``None``), else ``sigma``.

    Raises
    ------
    ValueError
        If neither gives a finite bandwidth > 0.
    """
    fitted = getattr(estimator, "sigma_", None)
    if fitted is not None:
        return check_positive(fitted, "sigma_")
    gamma = getattr(estimator, "gamma", None)
    if gamma is not None:
        gamma = check_positive(gamma, "gamma")
        sigma = 1.0 / np.sqrt(2.0 * gamma)
        if not np.isfinite(sigma) or sigma <= 0:
            raise ValueError(f"gamma={gamma!r} gives no usable bandwidth σ = 1/√(2 gamma).")
        return float(sigma)
    sigma = getattr(estimator, "sigma", None)
    if sigma is None:
        raise ValueError(
            "the estimator has neither sigma nor gamma set: the RBF bandwidth is unknown."
        )
    return check_positive(sigma, "sigma")


class FixedPointResult(NamedTuple):
    """Result of :func:`fixed_point_preimage`.

    Attributes
    ----------
    X : ndarray of shape (n_points, n_features)
        The pre-images (for each point the iterate with the largest objective
        ``ρ(z) = Σ_i γ_i k(z, x_i)`` met).
    converged : ndarray of bool, shape (n_points,)
        Whether the step ``‖z_{t+1} − z_t‖`` fell below ``tol·σ``.
    n_iter : ndarray of int, shape (n_points,)
        Iterations done per point.
    objective : ndarray of shape (n_points,)
        ``ρ(z)`` at the returned pre-image; ``‖Φ(z) − PΦ‖² = 1 − 2ρ(z) + ‖PΦ‖²``.
    """

    X: NDArray[np.float64]
    converged: NDArray[np.bool_]
    n_iter: NDArray[np.int64]
    objective: NDArray[np.float64]


def _check_rbf_estimator(estimator: Any) -> tuple[NDArray, NDArray, float]:
    check_is_fitted(estimator, "eigenvalues_")
    if getattr(estimator, "kernel", None) != "rbf":
        raise ValueError(
            f"the fixed-point pre-image exists for kernel='rbf' only; the estimator has "
            f"kernel={getattr(estimator, 'kernel', None)!r}. Use the learned (ridge) pre-image "
            "(fit_inverse_transform=True, or fit_preimage_map) for other kernels."
        )
    X_fit = getattr(estimator, "X_fit_", None)
    alphas = getattr(estimator, "alphas_", None)
    if X_fit is None or alphas is None:
        raise ValueError(
            "the fixed-point pre-image needs the training points X_fit_ and the exact "
            f"alphas_ of a fitted kpca_lib.KernelPCA; {type(estimator).__name__} has "
            f"{'no X_fit_' if X_fit is None else 'no alphas_'} (an approximation, such as "
            "ApproximateKernelPCA, keeps neither: fit the exact kpca_lib.KernelPCA)."
        )
    return (
        np.asarray(X_fit, dtype=np.float64),
        np.asarray(alphas, dtype=np.float64),
        rbf_sigma(estimator),
    )


def expansion_coefficients(alphas: ArrayLike, Z: ArrayLike) -> NDArray[np.float64]:
    """Coefficients ``γ`` of the feature-space reconstructions ``PΦ = Σ_i γ_i Φ(x_i)``.

    ``γ_i = 1/n + Σ_k z_k (α_ik − ᾱ_k)`` for each row ``z`` of ``Z`` (the
    derivation is in :func:`fixed_point_preimage`); every row sums to 1.

    Parameters
    ----------
    alphas : array-like of shape (n_samples, n_components)
        ``KernelPCA.alphas_`` (``α_k = β_k/√(nλ_k)``, on the centred features).
    Z : array-like of shape (n_points, n_components)
        Projections on those components.

    Returns
    -------
    ndarray of shape (n_points, n_samples)
    """
    alphas = check_array(alphas, "alphas")
    Z = check_array(Z, "Z")
    if Z.shape[1] != alphas.shape[1]:
        raise ValueError(
            f"Z has {Z.shape[1]} columns, but alphas has {alphas.shape[1]} components."
        )
    return 1.0 / alphas.shape[0] + Z @ (alphas - alphas.mean(axis=0)).T


#: Training points with the largest γ_i tried as starting points.
_N_CANDIDATES = 16


def _best_training_start(
    G: NDArray[np.float64], Xc: NDArray[np.float64], sigma: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """For each row of ``G``, the training point with the largest ``ρ`` among those with the
    largest ``γ_i``, and that ``ρ``: O(m·c·n·d) time, in blocks."""
    m, n = G.shape
    c = min(n, _N_CANDIDATES)
    cand = np.argpartition(-G, c - 1, axis=1)[:, :c] if c < n else np.tile(np.arange(n), (m, 1))
    start = np.empty((m, Xc.shape[1]))
    rho = np.empty(m)
    rows = max(1, _BLOCK // (c * n))
    for first in range(0, m, rows):
        block = slice(first, first + rows)
        b = cand[block]
        K = squared_distances(Xc[b.ravel()], Xc)
        K *= -0.5 / sigma / sigma
        np.exp(K, out=K)
        values = np.einsum("rcn,rn->rc", K.reshape(b.shape[0], c, n), G[block])
        best = np.argmax(values, axis=1)
        start[block] = Xc[b[np.arange(b.shape[0]), best]]
        rho[block] = values[np.arange(b.shape[0]), best]
    return start, rho


def _rho(G: NDArray, Y: NDArray, Xc: NDArray, sigma: float) -> tuple[NDArray, NDArray, NDArray]:
    """Scaled weights ``W_i = γ_i k(y, x_i)/k(y, x_nearest)``, their sum, and ``ρ(y)``.

    ``k(y, x_i)/k(y, x_nearest) = exp(−(‖y − x_i‖² − min_j ‖y − x_j‖²)/(2σ²))``:
    the nearest training point gets exactly 1, so the sum cannot underflow.
    """
    inv = 0.5 / sigma / sigma  # 0 for a huge σ (no overflow, unlike sigma**2)
    D = squared_distances(Y, Xc)
    nearest = D.min(axis=1)
    D -= nearest[:, None]
    D *= -inv
    W = np.exp(D, out=D)
    W *= G
    denom = W.sum(axis=1)
    with np.errstate(under="ignore"):
        rho = denom * np.exp(-inv * nearest)
    return W, denom, rho


def _fixed_point_block(
    G: NDArray, Y: NDArray, restart: NDArray, Xc: NDArray, sigma: float, max_iter: int, tol: float
) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Run the iteration for the rows of ``Y`` (centred coordinates) with weights ``G``."""
    m = Y.shape[0]
    Y = Y.copy()
    best = Y.copy()
    best_obj = np.full(m, -np.inf)
    converged = np.zeros(m, dtype=bool)
    restarted = np.zeros(m, dtype=bool)
    n_iter = np.zeros(m, dtype=np.int64)
    active = np.ones(m, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        W, denom, rho = _rho(G[idx], Y[idx], Xc, sigma)
        better = rho > best_obj[idx]
        best[idx[better]] = Y[idx[better]]
        best_obj[idx[better]] = rho[better]
        # Cancellation between positive and negative γ_i (or a negative sum) leaves no
        # usable step: restart once from the best training start, then give up.
        degenerate = denom <= 1e-10 * np.abs(W).sum(axis=1)
        if np.any(degenerate):
            bad = idx[degenerate]
            active[bad[restarted[bad]]] = False
            fresh = bad[~restarted[bad]]
            if fresh.size:
                Y[fresh] = restart[fresh]
                restarted[fresh] = True
        ok = ~degenerate
        step = idx[ok]
        Y_new = (W[ok] @ Xc) / denom[ok][:, None]
        diff = Y_new - Y[step]
        moved = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        Y[step] = Y_new
        n_iter[step] += 1
        done = moved <= tol * sigma
        converged[step[done]] = True
        active[step[done]] = False
    # The last iterates have not been scored yet.
    _, _, rho = _rho(G, Y, Xc, sigma)
    better = (rho > best_obj) | converged  # a converged point returns its stationary point
    best[better] = Y[better]
    best_obj[better] = rho[better]
    return best, converged, n_iter, best_obj


def _fixed_point_blocks(
    G: NDArray, Y0: NDArray, restart: NDArray, Xc: NDArray, sigma: float, max_iter: int, tol: float
) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """:func:`_fixed_point_block` over row blocks of at most ``_BLOCK`` kernel entries."""
    m, n = G.shape
    X_out = np.empty_like(Y0)
    converged = np.empty(m, dtype=bool)
    n_iter = np.empty(m, dtype=np.int64)
    objective = np.empty(m)
    rows = max(1, _BLOCK // n)
    for start in range(0, m, rows):
        block = slice(start, start + rows)
        X_out[block], converged[block], n_iter[block], objective[block] = _fixed_point_block(
            G[block], Y0[block], restart[block], Xc, sigma, max_iter, tol
        )
    return X_out, converged, n_iter, objective


def fixed_point_preimage(
    estimator: Any,
    Z: ArrayLike,
    *,
    X_init: ArrayLike | None = None,
    max_iter: int = 100,
    tol: float = 1e-8,
) -> FixedPointResult:
    r"""Pre-images of RBF kernel PCA projections by the fixed-point iteration of Mika et al.

    **Derivation.** Let ``Φ̄ = (1/n) Σ_j Φ(x_j)`` be the training mean in feature
    space. The fitted components are ``w_k = Σ_j α_jk (Φ(x_j) − Φ̄)`` (``alphas_``,
    defined on the *centred* features), i.e.
    ``w_k = Σ_i (α_ik − ᾱ_k) Φ(x_i)`` with ``ᾱ_k = (1/n) Σ_j α_jk``. A point with
    projections ``z = (z_1, …, z_q)`` on them is reconstructed in feature space
    as ``PΦ = Φ̄ + Σ_k z_k w_k`` (the centring undone), that is

    .. math:: PΦ = \sum_i γ_i Φ(x_i), \qquad γ_i = \frac{1}{n} + \sum_k z_k (α_{ik} − ᾱ_k),

    with ``Σ_i γ_i = 1``. For the Gaussian kernel ``k(z, z) = 1``, so
    ``‖Φ(z) − PΦ‖² = 1 − 2ρ(z) + ‖PΦ‖²`` with ``ρ(z) = Σ_i γ_i k(z, x_i)``: the
    best pre-image maximises ``ρ``. Its gradient,
    ``Σ_i γ_i k(z, x_i)(x_i − z)/σ²``, vanishes where

    .. math:: z = \frac{\sum_i γ_i k(z, x_i)\, x_i}{\sum_i γ_i k(z, x_i)},

    and this is iterated. The common factor ``exp(−min_i ‖z − x_i‖²/(2σ²))`` is
    divided out of both sums, so points far from the data do not underflow to
    0/0. When the denominator ``ρ(z)`` is not clearly positive (the γ_i have
    both signs and cancel, or sum to a negative value, where a step would go
    *down* ``ρ``), the point restarts once from the *training start* (below);
    if that happens again, it stops. The returned pre-image is the last
    iterate if converged, else the iterate with the largest ``ρ`` met: never
    NaN.

    The iteration finds a *local* maximum of ``ρ``. The training start of a
    point is, among the 16 training points with the largest ``γ_i``, the one
    with the largest ``ρ(x_j)``. When a given ``X_init`` ends at a lower ``ρ``
    than its training start (a poor local maximum, e.g. from a start far from
    the data), the iteration is repeated from the training start and the
    result with the larger ``ρ`` is kept.

    Parameters
    ----------
    estimator : kpca_lib.KernelPCA
        Fitted exact kernel PCA with ``kernel="rbf"``: uses ``X_fit_``,
        ``alphas_`` and the bandwidth (``sigma``, or scikit-learn's ``gamma``).
    Z : array-like of shape (n_points, n_components)
        Projections, e.g. ``estimator.transform(X)``.
    X_init : array-like of shape (n_points, n_features), optional
        Starting points, e.g. the noisy inputs or the ridge pre-images.
        Default: the training start of each point.
    max_iter : int, default=100
        Maximum number of iterations per point.
    tol : float, default=1e-8
        Converged when a step moves less than ``tol·σ``.

    Returns
    -------
    FixedPointResult
        ``(X, converged, n_iter, objective)``. A :class:`ConvergenceWarning`
        is issued when some point did not converge.

    Raises
    ------
    ValueError
        For a kernel other than ``"rbf"``, an approximate (feature-based) fit,
        or inputs of the wrong shape.
    """
    X_fit, alphas, sigma = _check_rbf_estimator(estimator)
    Z = check_array(Z, "Z")
    n, d = X_fit.shape
    q = alphas.shape[1]
    if Z.shape[1] != q:
        raise ValueError(
            f"Z has {Z.shape[1]} columns, but the estimator has {q} components; pass "
            "estimator.transform(X)."
        )
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}.")
    tol = check_positive(tol, "tol")
    if not np.isfinite(0.5 / sigma / sigma):
        raise ValueError(
            f"the RBF bandwidth sigma={sigma!r} is too small for float64 (σ² underflows); "
            "refit with a larger sigma (smaller gamma), e.g. of the order of the distances "
            "between points."
        )
    # Work in coordinates centred on the training mean: distances without cancellation.
    mean = X_fit.mean(axis=0)
    Xc = X_fit - mean
    with np.errstate(over="ignore", invalid="ignore"):
        G = expansion_coefficients(alphas, Z)
    if not np.all(np.isfinite(G)):
        raise ValueError(
            "Z is too large: its expansion coefficients overflow float64. Pass projections of "
            "the estimator, e.g. estimator.transform(X)."
        )
    # The iteration is invariant to scaling γ by a positive number: scale every row to a
    # largest |γ_i| of 1 (at least 1/n, as Σ γ_i = 1), so no sum can overflow.
    g_scale = np.abs(G).max(axis=1)
    G = G / g_scale[:, None]
    m = Z.shape[0]
    Y_train, rho_train = _best_training_start(G, Xc, sigma)
    if X_init is None:
        Y0 = Y_train
    else:
        Y0 = check_array(X_init, "X_init")
        if Y0.shape != (m, d):
            raise ValueError(
                f"X_init must have shape {(m, d)} (one starting point per row of Z); "
                f"got {Y0.shape}."
            )
        Y0 = Y0 - mean
    X_out, converged, n_iter, objective = _fixed_point_blocks(
        G, Y0, Y_train, Xc, sigma, max_iter, tol
    )
    if X_init is not None:
        # A local maximum below a training point's ρ: try again from that training point.
        worse = np.flatnonzero(objective < rho_train - 1e-12 * np.abs(rho_train))
        if worse.size:
            again = _fixed_point_blocks(
                G[worse], Y_train[worse], Y_train[worse], Xc, sigma, max_iter, tol
            )
            better = again[3] > objective[worse]
            for out, new in zip((X_out, converged, n_iter, objective), again, strict=True):
                out[worse[better]] = new[better]
    X_out += mean
    if not np.all(converged):
        warnings.warn(
            f"the fixed-point pre-image did not converge for {int((~converged).sum())} of {m} "
            f"point(s) within max_iter={max_iter} (step > tol·σ = {tol * sigma:.3g}, or no "
            "usable step); those return the iterate with the largest ρ. Increase max_iter, "
            "start from better X_init (e.g. the ridge pre-image) or use method='ridge'.",
            ConvergenceWarning,
            stacklevel=2,
        )
    with np.errstate(over="ignore"):
        objective = objective * g_scale
    return FixedPointResult(X_out, converged, n_iter, objective)


def denoise(
    estimator: Any,
    X: ArrayLike,
    *,
    method: str = "ridge",
    preimage_map: PreimageMap | None = None,
    max_iter: int = 100,
    tol: float = 1e-8,
) -> NDArray[np.float64]:
    """Denoise ``X``: project on the estimator's components and map back to the inputs.

    Parameters
    ----------
    estimator : kpca_lib.KernelPCA
        Fitted kernel PCA (typically on noisy training data, few components).
    X : array-like of shape (n_points, n_features)
        Points to denoise.
    method : {"ridge", "fixed-point"}, default="ridge"
        ``"ridge"``: the learned pre-image, ``preimage_map.predict`` if given,
        else ``estimator.inverse_transform`` (fit with
        ``fit_inverse_transform=True``). ``"fixed-point"``: the RBF fixed-point
        iteration (:func:`fixed_point_preimage`) started from ``X`` itself.
    preimage_map : PreimageMap, optional
        A map from :func:`fit_preimage_map`, for ``method="ridge"``.
    max_iter, tol
        Passed to :func:`fixed_point_preimage`.

    Returns
    -------
    ndarray of shape (n_points, n_features)
    """
    if method not in DENOISE_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(repr(m) for m in DENOISE_METHODS)}; got {method!r}."
        )
    X = check_array(X)
    Z = estimator.transform(X)
    if method == "fixed-point":
        if preimage_map is not None:
            raise ValueError(
                "preimage_map is used by method='ridge' only; got a map with "
                "method='fixed-point'. Pass X_init-style starts via fixed_point_preimage."
            )
        return fixed_point_preimage(estimator, Z, X_init=X, max_iter=max_iter, tol=tol).X
    if preimage_map is not None:
        return preimage_map.predict(Z)
    inverse = getattr(estimator, "inverse_transform", None)
    if inverse is None or getattr(estimator, "fit_inverse_transform", True) is False:
        raise ValueError(
            "method='ridge' needs a learned pre-image map: fit the estimator with "
            "fit_inverse_transform=True, or pass preimage_map=fit_preimage_map(...)."
        )
    return inverse(Z)
