"""Principal component analysis, computed both ways.

The lectures write the data as columns, ``X ∈ R^{d×n}``; in code, as in
scikit-learn, data points are rows, so the lecture's ``X`` is our ``X.T``.
With centred data ``Xc`` (rows ``x_i − x̄``) the covariance is
``C = (1/n) Xcᵀ Xc`` (d×d, the lectures' ``1/n``).

* ``solver="covariance"``: eigendecompose the d×d matrix ``C``; O(d³).
* ``solver="gram"``: the XᵀX trick. Eigendecompose the n×n Gram matrix
  ``G = Xc Xcᵀ`` (the lecture's ``XᵀX``): ``G β_k = (nλ_k) β_k``, then
  ``w_k = Xcᵀ β_k / √(nλ_k)`` is a unit eigenvector of ``C`` with eigenvalue
  ``λ_k``; O(n³), the better choice when ``d > n``.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._eigen import flip_signs, top_eigh
from ._validation import check_array, check_n_components, check_n_features

__all__ = ["PCA", "n_components_for_variance"]

SOLVERS = ("auto", "covariance", "gram")


def n_components_for_variance(explained_variance_ratio: ArrayLike, threshold: float = 0.95) -> int:
    """Smallest ``k`` whose first ``k`` components explain at least ``threshold`` of the variance.

    Parameters
    ----------
    explained_variance_ratio : array-like of shape (n_components,)
        Ratios in descending order, e.g. ``PCA().fit(X).explained_variance_ratio_``.
    threshold : float, default=0.95
        Fraction in (0, 1].
    """
    ratios = np.asarray(explained_variance_ratio, dtype=float)
    if ratios.ndim != 1 or ratios.size == 0 or not np.all(np.isfinite(ratios)):
        raise ValueError("explained_variance_ratio must be a non-empty 1-D array of finite numbers.")
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1]; got {threshold!r}.")
    cumulative = np.cumsum(ratios)
    # Rounding may leave the total at 0.9999999999: compare with a small slack.
    return int(min(np.searchsorted(cumulative, threshold - 1e-12) + 1, ratios.size))


def _check_n_components_param(n_components: object, max_k: int) -> int | float:
    """Validate ``n_components``: ``None``, an integer in [1, max_k], or a fraction in (0, 1)."""
    if n_components is None:
        return max_k
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Real):
        raise ValueError(
            f"n_components must be None, an integer between 1 and {max_k} "
            f"(min(n_samples, n_features) = {max_k}), or a fraction of the variance in (0, 1); "
            f"got {n_components!r}."
        )
    if isinstance(n_components, numbers.Integral):
        return check_n_components(n_components, max_k, f"min(n_samples, n_features) = {max_k}")
    value = float(n_components)
    if not 0.0 < value < 1.0:  # NaN fails too
        hint = (
            " For one component pass the integer 1; for all of them, None."
            if value == 1.0
            else ""
        )
        raise ValueError(
            f"n_components given as a float is the fraction of the variance to keep and must be "
            f"strictly between 0 and 1 (e.g. 0.95), or pass an integer between 1 and {max_k}; "
            f"got {n_components!r}.{hint}"
        )
    return value


def _why_no_variance(n: int) -> str:
    if n == 1:
        return "n_samples = 1: one sample has no variance"
    return "every sample is the same point"


def _orthonormal_completion(W: NDArray[np.float64], d: int, k: int) -> NDArray[np.float64]:
    """Extend the ``m`` orthonormal rows of ``W`` to ``k`` orthonormal rows in R^d.

    Projects the first ``k`` standard basis vectors onto the orthogonal
    complement of ``W``'s rows (rank at least ``k − m``) and orthonormalises
    them with a pivoted QR: O(d·k²) time and never a d×d matrix.
    """
    m = W.shape[0]
    if m >= k:
        return W
    E = np.zeros((d, k))
    E[np.arange(k), np.arange(k)] = 1.0
    V = E - W.T @ (W @ E)
    Q, _, _ = scipy.linalg.qr(V, mode="economic", pivoting=True)
    extra = Q[:, : k - m]
    extra -= W.T @ (W @ extra)  # one more projection against rounding
    extra, _ = np.linalg.qr(extra)
    return np.vstack([W, extra.T])


class PCA(TransformerMixin, BaseEstimator):
    """Principal component analysis with the covariance or the Gram (XᵀX) route.

    Parameters
    ----------
    n_components : int, float or None, default=None
        * an integer ``k`` between 1 and ``min(n_samples, n_features)``;
        * a fraction in (0, 1), as scikit-learn: keep the smallest number of
          components whose cumulative ``explained_variance_ratio_`` reaches it
          (the lectures' 95 % rule: ``n_components=0.95``; see
          :func:`n_components_for_variance`). scikit-learn asks for a sum
          strictly *above* the fraction; the two differ only when a partial sum
          equals it exactly;
        * ``None``: ``min(n_samples, n_features)``.
    solver : {"auto", "covariance", "gram"}, default="auto"
        ``"covariance"`` eigendecomposes the d×d covariance ``C = XcᵀXc/n``;
        ``"gram"`` eigendecomposes the n×n ``XcXcᵀ`` (the lecture's XᵀX trick);
        ``"auto"`` picks ``"gram"`` when ``n_features > n_samples``.
    whiten : bool, default=False
        As scikit-learn: ``transform`` divides each projection by
        ``√λ_k`` so that every output column has unit variance (with the
        lectures' ``1/n``: ``Z.T @ Z / n`` is the identity on the training
        data), and ``inverse_transform`` multiplies it back. scikit-learn
        divides by the ``1/(n−1)`` standard deviation instead, so its whitened
        outputs are ours times ``√((n−1)/n)``. Components with (numerically)
        zero variance cannot be whitened: ``fit`` raises ``ValueError``.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
    components_ : ndarray of shape (n_components, n_features)
        Unit principal directions ``w_k`` as rows, in order of decreasing variance.
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues ``λ_k`` of ``C`` (variance along ``w_k``, with ``1/n``;
        scikit-learn's ``explained_variance_`` uses ``1/(n−1)``:
        ``eigenvalues_ = explained_variance_ · (n−1)/n``).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``λ_k`` divided by the total variance ``trace(C)`` (the same as
        scikit-learn's).
    n_components_ : int
        The number of components kept (chosen by the fraction if one was given).
    solver_ : str
        The solver actually used.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(10, 50))   # d > n
    >>> a = PCA(3, solver="gram").fit(X)
    >>> b = PCA(3, solver="covariance").fit(X)
    >>> bool(np.allclose(a.eigenvalues_, b.eigenvalues_))
    True
    """

    def __init__(
        self, n_components: int | float | None = None, solver: str = "auto", whiten: bool = False
    ) -> None:
        self.n_components = n_components
        self.solver = solver
        self.whiten = whiten

    def fit(self, X: ArrayLike, y: object = None) -> PCA:
        """Fit the principal components of ``X`` of shape (n_samples, n_features)."""
        X = check_array(X)
        n, d = X.shape
        if self.solver not in SOLVERS:
            raise ValueError(
                f"solver must be one of {', '.join(repr(s) for s in SOLVERS)}; got {self.solver!r}."
            )
        if not isinstance(self.whiten, bool | np.bool_):
            raise ValueError(f"whiten must be True or False; got {self.whiten!r}.")
        max_k = min(n, d)
        requested = _check_n_components_param(self.n_components, max_k)
        # A fraction needs the whole spectrum; the number is chosen after the fit.
        k = max_k if isinstance(requested, float) else requested
        solver = self.solver
        if solver == "auto":
            solver = "gram" if d > n else "covariance"
        self.mean_ = X.mean(axis=0)
        Xc = X - self.mean_
        total_variance = float(np.einsum("ij,ij->", Xc, Xc)) / n
        if solver == "covariance":
            C = (Xc.T @ Xc) / n
            eigenvalues, W = top_eigh(C, k, "dense")
            components = W.T
        else:
            G = Xc @ Xc.T  # the lecture's XᵀX, n x n
            n_lambda, B = top_eigh(G, k, "dense")
            eigenvalues = n_lambda / n
            # Directions with (numerically) zero variance cannot be recovered as
            # Xcᵀβ/√(nλ); complete them with any orthonormal basis, as the
            # covariance route would (they are arbitrary there too).
            tol = max(n, d) * np.finfo(float).eps * max(float(n_lambda[0]), 1e-300)
            good = n_lambda > tol
            W = (Xc.T @ B[:, good]) / np.sqrt(n_lambda[good])
            # Re-orthonormalise against rounding (Gram-Schmidt keeps each w_k's
            # direction; a no-op in exact arithmetic).
            Q, R = np.linalg.qr(W)
            Q *= np.where(np.diag(R) < 0, -1.0, 1.0)[None, :]
            components = _orthonormal_completion(Q.T, d, k)
            eigenvalues = np.where(np.arange(k) < good.sum(), eigenvalues, 0.0)
        eigenvalues = np.clip(eigenvalues, 0.0, None)
        ratios = eigenvalues / total_variance if total_variance > 0 else np.zeros_like(eigenvalues)
        if isinstance(requested, float):
            if total_variance <= 0:
                raise ValueError(
                    f"n_components={self.n_components!r} asks for a fraction of the variance, but "
                    f"X has zero variance ({_why_no_variance(n)}); pass an integer."
                )
            k = n_components_for_variance(ratios, requested)
            eigenvalues, components, ratios = eigenvalues[:k], components[:k], ratios[:k]
        if self.whiten:
            tiny = max(n, d) * np.finfo(float).eps * max(float(eigenvalues[0]), 0.0)
            flat = np.flatnonzero(eigenvalues <= tiny)
            if flat.size and flat[0] == 0:
                raise ValueError(
                    f"whiten=True, but X has zero variance ({_why_no_variance(n)}): nothing can "
                    "be scaled to unit variance; use whiten=False."
                )
            if flat.size:
                raise ValueError(
                    f"whiten=True, but component(s) {flat.tolist()} of the {k} requested have "
                    f"(numerically) zero variance and cannot be scaled to unit variance; ask "
                    f"for at most {int(flat[0])} components (n_components), or a fraction of the "
                    "variance such as 0.95, or whiten=False."
                )
        components = flip_signs(np.ascontiguousarray(components.T)).T
        self.components_ = np.ascontiguousarray(components)
        self.eigenvalues_ = eigenvalues
        self.explained_variance_ratio_ = ratios
        self.n_components_ = k
        self.solver_ = solver
        self.n_features_in_ = d
        self.n_samples_ = n
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project ``X`` onto the components: ``(X − mean_) @ components_.T``.

        With ``whiten=True`` each column is then divided by ``√eigenvalues_``.
        """
        check_is_fitted(self, "components_")
        X = check_array(X)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        Z = (X - self.mean_) @ self.components_.T
        if self.whiten:
            Z /= np.sqrt(self.eigenvalues_)
        return Z

    def fit_transform(self, X: ArrayLike, y: object = None) -> NDArray[np.float64]:
        """Fit and return the projections of ``X``."""
        return self.fit(X).transform(X)

    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Map projections back to the input space: ``X @ components_ + mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            Projections (scikit-learn's name for the argument), e.g. the
            output of :meth:`transform`. With ``whiten=True`` they are first
            multiplied by ``√eigenvalues_``, so this inverts ``transform``
            exactly on the span of the components.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self, "components_")
        X = check_array(X, "X")
        if X.shape[1] != self.n_components_:
            raise ValueError(
                f"X has {X.shape[1]} columns, but this PCA has {self.n_components_} components; "
                "inverse_transform takes projections (the output of transform)."
            )
        if self.whiten:
            X = X * np.sqrt(self.eigenvalues_)
        return X @ self.components_ + self.mean_
