"""Choosing σ and the number of components without labels.

Kernel PCA is unsupervised, so its parameters should not be tuned on class labels
unless the downstream task is supervised (then use cross-validation, e.g.
``GridSearchCV`` over a ``Pipeline(KernelPCA, classifier)``). Two label-free rules:

- the **median heuristic**: σ = the median distance between (a sample of) the points;
- the **explained-variance rule in feature space**: the total variance of the centred
  features φ(x_i) is ``trace(K^c)/n``, so the share of the first k components is
  ``(θ_1 + … + θ_k) / trace(K^c)``, where θ are the eigenvalues of K^c. Keep the smallest
  k whose share reaches e.g. 95 %.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import pdist

from ._validation import check_array
from .centering import center_kernel

__all__ = [
    "median_heuristic_sigma",
    "explained_variance_ratio",
    "n_components_for_variance",
]


def median_heuristic_sigma(
    X: ArrayLike, *, max_samples: int = 1000, random_state: int | None = 0
) -> float:
    """σ for the Gaussian kernel by the median heuristic: the median pairwise distance.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The points (no labels are used).
    max_samples : int, default=1000
        At most this many points (drawn without replacement) enter the median, so the cost
        stays O(max_samples² · n_features).
    random_state : int or None, default=0
        Seed of the subsample (used only when ``n_samples > max_samples``).

    Returns
    -------
    float
        The median of ``‖x_i − x_j‖`` over distinct pairs ``i < j``.

    Raises
    ------
    ValueError
        If fewer than two points are given, ``max_samples < 2``, or every pair of points
        coincides (the median distance is 0: σ = 0 is not a valid bandwidth).
    """
    X = check_array(X, name="X")
    if (
        isinstance(max_samples, bool)
        or not isinstance(max_samples, (int, np.integer))
        or max_samples < 2
    ):
        raise ValueError(f"max_samples must be an integer >= 2, got {max_samples!r}.")
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"The median heuristic needs at least 2 points, got {n}.")
    if n > max_samples:
        rows = np.random.default_rng(random_state).choice(n, size=int(max_samples), replace=False)
        X = X[np.sort(rows)]
    # Direct differences (not the ‖x‖² + ‖y‖² − 2xᵀy expansion), so far-offset data keep
    # their digits.
    sigma = float(np.median(pdist(X)))
    if not sigma > 0.0:
        raise ValueError(
            "The median distance between the points is 0 (more than half of the pairs "
            "coincide), so the median heuristic gives no bandwidth; remove duplicate points "
            "or choose sigma by hand."
        )
    return sigma


def explained_variance_ratio(K: ArrayLike) -> NDArray[np.float64]:
    """The share of the feature-space variance carried by each kernel principal component.

    Parameters
    ----------
    K : array-like of shape (n_samples, n_samples)
        The (uncentred) kernel matrix of the training points; it is centred here.

    Returns
    -------
    ndarray of shape (n_samples,)
        ``θ_k / trace(K^c)`` in decreasing order, where θ are the eigenvalues of K^c
        (rounding-level negative ones are clipped to 0). It sums to 1.

    Raises
    ------
    ValueError
        If K is not a finite square matrix, or if ``trace(K^c) = 0`` (all features coincide:
        there is no variance to share).
    """
    K = check_array(K, name="K")
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square kernel matrix, got shape {K.shape}.")
    K_c = center_kernel(K)
    K_c = (K_c + K_c.T) / 2.0
    total = float(np.trace(K_c))
    if not total > 0.0:
        raise ValueError(
            "trace(K^c) is 0: every point has the same feature vector, so there is no "
            "variance to explain; check the kernel and its parameters (e.g. sigma)."
        )
    theta = np.clip(np.linalg.eigvalsh(K_c)[::-1], 0.0, None)
    return theta / total


def n_components_for_variance(ratio: ArrayLike, fraction: float = 0.95) -> int:
    """The smallest k whose first k components explain at least ``fraction`` of the variance.

    Parameters
    ----------
    ratio : array-like of shape (n_components,)
        Explained-variance ratios in decreasing order (e.g. from
        :func:`explained_variance_ratio`, or ``PCA.explained_variance_ratio_``).
    fraction : float, default=0.95
        Target share, in (0, 1].

    Returns
    -------
    int
        k in ``1 … len(ratio)``.

    Raises
    ------
    ValueError
        If ``fraction`` is not in (0, 1], or the ratios do not reach it (they were
        truncated: compute all of them).
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.floating)):
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}.")
    if not 0.0 < float(fraction) <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}.")
    r = np.asarray(ratio, dtype=np.float64).ravel()
    if r.size == 0 or not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError("ratio must be a non-empty array of finite, non-negative shares.")
    cumulative = np.cumsum(r)
    # A share that should be exactly 1 may come out as 1 - 1e-16.
    reached = np.flatnonzero(cumulative >= float(fraction) - 1e-12)
    if reached.size == 0:
        raise ValueError(
            f"The given ratios explain only {cumulative[-1]:.4g} of the variance, less than "
            f"fraction={fraction}; pass the ratios of all components."
        )
    return int(reached[0]) + 1
