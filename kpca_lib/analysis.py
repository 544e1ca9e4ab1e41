"""Pure computations behind the interactive widgets and the exercise checks.

Nothing here draws or displays: widgets call these functions, and tests and
graders call them directly.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_array, check_positive
from .kernel_pca import KernelPCA
from .pca import PCA

__all__ = [
    "kpca_projection",
    "threshold_accuracy",
    "first_component_separates",
    "reconstruct",
    "reconstruction_errors",
    "relative_error",
    "smallest_r_below",
]


def kpca_projection(
    X: ArrayLike,
    *,
    kernel: str = "rbf",
    sigma: float = 1.0,
    degree: int = 2,
    coef0: float = 1.0,
    n_components: int = 2,
) -> NDArray[np.float64]:
    """Kernel PCA projections of the training points (``KernelPCA(...).fit_transform(X)``).

    The lectures' kernels: ``rbf`` is ``exp(−‖x−y‖²/(2σ²))`` and ``poly`` is
    ``(xᵀy + coef0)^degree`` (``gamma = 1``, not scikit-learn's ``1/n_features``);
    ``sigma`` is used by ``rbf`` only.
    """
    if kernel == "rbf":
        params = {"sigma": sigma}
    elif kernel in ("poly", "sigmoid"):
        params = {"gamma": 1.0, "degree": degree, "coef0": coef0}
    else:
        params = {}
    return KernelPCA(n_components=n_components, kernel=kernel, **params).fit_transform(X)


def threshold_accuracy(z: ArrayLike, y: ArrayLike) -> float:
    """Best accuracy of a single threshold on the numbers ``z`` for binary labels ``y``.

    Tries every cut between sorted values, in both orientations, so the result
    is exact: 1.0 means one number per point separates the two classes.

    Parameters
    ----------
    z : array-like of shape (n,)
        One number per point (e.g. the first kernel principal component).
    y : array-like of shape (n,)
        Two classes.

    Returns
    -------
    float
        Fraction of points on the correct side of the best threshold.
    """
    z = np.asarray(z, dtype=float).ravel()
    y = np.asarray(y).ravel()
    if z.shape != y.shape or z.size == 0:
        raise ValueError(
            f"z and y must be non-empty and of the same length; got {z.shape} and {y.shape}."
        )
    if not np.all(np.isfinite(z)):
        raise ValueError("z contains NaN or infinity.")
    classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(f"y must contain exactly two classes; got {classes.size}.")
    order = np.argsort(z, kind="stable")
    z_sorted, positive = z[order], (y[order] == classes[1]).astype(float)
    n = z.size
    # Candidate cuts: before everything, and after each run of equal values.
    cut_after = np.flatnonzero(np.diff(z_sorted) > 0)
    pos_left = np.concatenate([[0.0], np.cumsum(positive)[cut_after], [positive.sum()]])
    left = np.concatenate([[0], cut_after + 1, [n]])
    # "positive on the right": correct = negatives on the left + positives on the right
    correct = (left - pos_left) + (positive.sum() - pos_left)
    best = max(correct.max(), (n - correct).max())
    return float(best / n)


def first_component_separates(
    X: ArrayLike, y: ArrayLike, sigma: float, *, tol: float = 0.0
) -> tuple[bool, float]:
    """Does the first RBF kernel principal component at ``sigma`` separate the classes?

    Returns
    -------
    separates : bool
        ``accuracy >= 1 - tol``.
    accuracy : float
        :func:`threshold_accuracy` of the first component.
    """
    sigma = check_positive(sigma, "sigma")
    z = kpca_projection(X, kernel="rbf", sigma=sigma, n_components=1)[:, 0]
    acc = threshold_accuracy(z, y)
    return acc >= 1.0 - tol, acc


def reconstruct(pca: PCA, x: ArrayLike, r: int) -> NDArray[np.float64]:
    """Reconstruct ``x`` (one sample or rows) from its first ``r`` principal components.

    ``x̂ = x̄ + Σ_{k≤r} (w_kᵀ(x − x̄)) w_k``.
    """
    X = np.atleast_2d(np.asarray(x, dtype=float))
    X = check_array(X, "x")
    if not 0 <= r <= pca.components_.shape[0]:
        raise ValueError(f"r must be between 0 and {pca.components_.shape[0]}; got {r}.")
    W = pca.components_[:r]
    out = pca.mean_ + ((X - pca.mean_) @ W.T) @ W
    return out[0] if np.ndim(x) == 1 else out


def relative_error(x: ArrayLike, x_hat: ArrayLike) -> float:
    """``‖x − x̂‖ / ‖x‖``."""
    x = np.asarray(x, dtype=float)
    norm = np.linalg.norm(x)
    if norm == 0:
        raise ValueError("the relative error of the zero vector is undefined.")
    return float(np.linalg.norm(x - np.asarray(x_hat, dtype=float)) / norm)


def reconstruction_errors(pca: PCA, x: ArrayLike, rs: ArrayLike) -> NDArray[np.float64]:
    """Relative reconstruction error of one sample ``x`` for every ``r`` in ``rs``.

    Computed from one projection: the error after ``r`` components uses the
    first ``r`` coefficients.
    """
    x = np.asarray(x, dtype=float).ravel()
    coef = pca.components_ @ (x - pca.mean_)
    out = []
    for r in np.asarray(rs, dtype=int):
        if not 0 <= r <= coef.size:
            raise ValueError(f"every r must be between 0 and {coef.size}; got {r}.")
        x_hat = pca.mean_ + coef[:r] @ pca.components_[:r]
        out.append(relative_error(x, x_hat))
    return np.asarray(out)


def smallest_r_below(pca: PCA, x: ArrayLike, target: float) -> int | None:
    """Smallest number of components whose reconstruction of ``x`` has relative error < ``target``.

    Returns ``None`` when even all components do not reach the target.
    """
    rs = np.arange(pca.components_.shape[0] + 1)
    errors = reconstruction_errors(pca, x, rs)
    below = np.flatnonzero(errors < target)
    return int(rs[below[0]]) if below.size else None
