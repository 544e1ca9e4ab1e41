"""Approximate kernel PCA: explicit features, then centred linear PCA of them.

:class:`ApproximateKernelPCA` maps every sample to ``J = n_features`` explicit
features ``Φ(x) ∈ R^J`` whose inner products approximate the kernel
(Nyström landmarks, :class:`~kpca_lib.approximation.NystroemFeatures`, or random
Fourier features, :class:`~kpca_lib.approximation.RandomFourierFeatures`) and runs
linear PCA on the centred features, chunk by chunk: O(n·J²) time and O(J²)
memory, so millions of points (scikit-learn composes the same thing as
``make_pipeline(Nystroem(...), PCA(...))``). The computations are in
:mod:`kpca_lib._approximate`; a Dask array is fitted where its chunks live
(:mod:`kpca_lib._dask`). Exact kernel PCA is :class:`~kpca_lib.kernel_pca.KernelPCA`.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from numbers import Integral, Real

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._approximate import (
    ApproximateResult,
    check_approximation,
    fit_approximate,
    transform_approximate,
)
from ._dask import is_dask_array
from ._exact import _caller_stacklevel
from ._kernel_params import KERNEL_CONSTRAINTS, estimator_kernel_spec
from ._validation import (
    check_array,
    check_n_features,
    check_n_jobs,
    check_sparse_array,
    output_dtype,
)
from .kernel_pca import _NO_INVERSE, _check_feature_names, _InverseTransform, _LearnedPreimage
from .kernels import KernelFunction, KernelSpec

__all__ = ["ApproximateKernelPCA"]


class ApproximateKernelPCA(
    _LearnedPreimage, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Approximate kernel PCA: linear PCA of ``n_features`` explicit kernel features.

    The kernel parameters (``kernel``, ``sigma``, ``gamma``, ``degree``,
    ``coef0``, ``kernel_params``) mean what they mean for
    :class:`~kpca_lib.kernel_pca.KernelPCA` (scikit-learn's); the default kernel
    is ``"rbf"`` with ``gamma = 1/n_features_in``. As ``n_features`` grows the
    result tends to exact kernel PCA (Nyström with every sample as a landmark
    is exact).

    Parameters
    ----------
    n_components : int, optional
        Number of components, between 1 and ``min(n_samples, n_features)``
        (Nyström) or ``n_features`` (random features). ``None`` keeps every
        component with a non-zero eigenvalue.
    method : {"nystroem", "rff"}, default="nystroem"
        ``"nystroem"``: the kernel's Nyström features from ``n_features``
        landmarks drawn among the samples (any kernel but precomputed);
        ``"rff"``: random Fourier features (``kernel="rbf"`` only).
    n_features : int, default=100
        Number ``J`` of approximate features (landmarks or random frequencies);
        Nyström needs ``J <= n_samples``.
    kernel : {"rbf", "linear", "poly", "sigmoid", "cosine"} or callable, default="rbf"
        As in :class:`~kpca_lib.kernel_pca.KernelPCA`; not ``"precomputed"``
        (the features need the kernel function).
    sigma : float, optional
        Bandwidth σ > 0 of the RBF kernel ``exp(−‖x−y‖²/(2σ²))``; only with
        ``kernel="rbf"``. Give ``sigma`` or ``gamma``, not both.
    gamma : float, optional
        scikit-learn's parameter (``rbf``: ``1/(2σ²)``; ``poly``, ``sigmoid``:
        the factor of ``xᵀy``). ``None`` (and no ``sigma``): ``1/n_features_in``.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Constant of the polynomial and sigmoid kernels.
    kernel_params : dict, optional
        Keyword arguments of a callable kernel (an error with a named kernel).
    remove_zero_eig : bool, default=False
        Drop the components whose eigenvalue is 0 (within rounding); with
        ``n_components=None`` they are always dropped.
    fit_inverse_transform : bool, default=False
        Learn the pre-image map (kernel ridge regression from the projections
        back to ``X``, with the same kernel) so that :meth:`inverse_transform`
        works. Not for a Dask array.
    alpha : float, default=1.0
        Ridge (>= 0) of the pre-image map.
    random_state : int, RandomState, Generator or None
        Seed of the Nyström landmarks or the random frequencies.
    n_jobs : int, optional
        Threads computing feature chunks (NumPy input). ``None`` or ``-1``:
        every available core.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components_,)
        ``n ×`` the eigenvalues of the covariance of the centred features,
        descending (approximating ``nλ_k`` of the centred kernel matrix).
    explained_variance_ : ndarray of shape (n_components_,)
        ``eigenvalues_ / n_samples``.
    components_ : ndarray of shape (n_components_, n_features)
        Unit principal directions in ``R^J``, as rows.
    feature_mean_ : ndarray of shape (n_features,)
        Mean of the training features, used to centre.
    feature_map_ : NystroemFeatures or RandomFourierFeatures
        The fitted feature map ``Φ``.
    n_components_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names of a DataFrame ``X`` at fit (then ``transform`` checks them).
    gamma_ : float or None
        The ``gamma`` in use (``1/(2σ²)`` for rbf); ``None`` for kernels without one.
    sigma_ : float or None
        The RBF bandwidth in use (``None`` for other kernels).
    X_transformed_fit_ : ndarray of shape (n_samples, n_components_)
        With ``fit_inverse_transform=True``: the training projections.
    dual_coef_ : ndarray of shape (n_samples, n_features_in_)
        With ``fit_inverse_transform=True``: coefficients of the pre-image map.

    Notes
    -----
    ``transform(X)`` is ``(Φ(X) − feature_mean_) @ components_.T``, computed in
    row chunks; ``fit_transform(X)`` equals ``fit(X).transform(X)``. Computations
    run in float64; the output is float32 when the input and the training data
    are. Sparse ``X`` is refused (the features are dense): pass ``X.toarray()``,
    or use the exact :class:`~kpca_lib.kernel_pca.KernelPCA`.

    A two-dimensional ``dask.array.Array`` (rows = samples) is fitted without
    being gathered: the feature map is the one the same rows in memory give
    (same ``random_state``), each chunk's feature moments are computed where the
    chunk lives, and ``transform`` returns a lazy Dask array, one block per
    chunk of rows (:mod:`kpca_lib._dask`).

    Examples
    --------
    >>> from kpca_lib.datasets import make_moons
    >>> X, y = make_moons(100, noise=0.05, random_state=0)
    >>> approx = ApproximateKernelPCA(2, method="nystroem", n_features=50, sigma=0.3,
    ...                               random_state=0)
    >>> approx.fit_transform(X).shape
    (100, 2)
    >>> approx.components_.shape
    (2, 50)
    """

    #: scikit-learn's parameter validation (``BaseEstimator._validate_params``), run first.
    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "method": [StrOptions({"nystroem", "rff"})],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        **KERNEL_CONSTRAINTS,
        "remove_zero_eig": ["boolean"],
        "fit_inverse_transform": ["boolean"],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        method: str = "nystroem",
        n_features: int = 100,
        kernel: str | Callable = "rbf",
        sigma: float | None = None,
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        kernel_params: dict | None = None,
        remove_zero_eig: bool = False,
        fit_inverse_transform: bool = False,
        alpha: float = 1.0,
        random_state: int | np.random.RandomState | np.random.Generator | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.n_features = n_features
        self.kernel = kernel
        self.sigma = sigma
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.remove_zero_eig = remove_zero_eig
        self.fit_inverse_transform = fit_inverse_transform
        self.alpha = alpha
        self.random_state = random_state
        self.n_jobs = n_jobs

    # -- parameters --------------------------------------------------------------------
    def _check_params(self, n_features_in: int) -> tuple[KernelSpec, str]:
        """The kernel and the method, every parameter checked (scikit-learn's constraints
        first, then what they cannot say: a ``ValueError`` naming it)."""
        self._validate_params()
        spec = estimator_kernel_spec(self, n_features_in)
        method = check_approximation(self.method, spec, param="method")
        check_n_jobs(self.n_jobs)
        return spec, method

    def _validate_X(self, X: ArrayLike, *, reset: bool) -> NDArray[np.float64]:
        """``X`` as float64: a dense array, or a CSR matrix (refused once the method is known)."""
        _check_feature_names(self, X, reset=reset)
        if scipy.sparse.issparse(X):
            return check_sparse_array(X)
        return check_array(X)

    def _refuse_sparse(self, X: object, method: str) -> None:
        if scipy.sparse.issparse(X):
            raise ValueError(
                f"X is a scipy.sparse matrix, and method={method!r} computes dense features "
                "of X. Pass X.toarray(), or use the exact kpca_lib.KernelPCA, which takes "
                "sparse X for the named kernels (from the sparse rows)."
            )

    # -- fitting -----------------------------------------------------------------------
    def _fit(self, X: ArrayLike, *, project: bool) -> NDArray[np.float64] | None:
        """Fit; return the training projections if ``project``."""
        if is_dask_array(X):
            return self._fit_dask(X, project=project)
        fit_dtype = output_dtype(X)
        X = self._validate_X(X, reset=True)
        spec, method = self._check_params(X.shape[1])
        self._refuse_sparse(X, method)
        result = fit_approximate(
            spec,
            X,
            self.n_components,
            approximation=method,
            n_features=self.n_features,
            random_state=self.random_state,
            n_threads=check_n_jobs(self.n_jobs),
            remove_zero_eig=bool(self.remove_zero_eig),
        )
        needed = project or self.fit_inverse_transform
        Z = transform_approximate(result, X) if needed else None
        self._set_fitted(result, spec, X.shape, fit_dtype)
        if self.fit_inverse_transform:
            self._preimage = _fit_preimage(Z, X, spec, float(self.alpha))
        return None if Z is None else Z.astype(fit_dtype, copy=False)

    def _fit_dask(self, X: object, *, project: bool) -> object:
        """Fit on a Dask array, chunk by chunk where the chunks live (:mod:`kpca_lib._dask`)."""
        from ._dask import check_dask_array, fit_approximate_dask, transform_dask

        X = check_dask_array(X)
        spec, method = self._check_params(int(X.shape[1]))
        if self.fit_inverse_transform:
            raise ValueError(
                "fit_inverse_transform=True is not supported for a Dask array (the pre-image "
                "map needs every training point in memory); fit it on X.compute() or a sample."
            )
        _check_feature_names(self, X, reset=True)
        result = fit_approximate_dask(
            spec,
            X,
            self.n_components,
            approximation=method,
            n_features=self.n_features,
            random_state=self.random_state,
            remove_zero_eig=bool(self.remove_zero_eig),
        )
        self._set_fitted(result, spec, tuple(int(s) for s in X.shape), np.dtype(np.float64))
        return transform_dask(result, X) if project else None

    def _set_fitted(
        self, result: ApproximateResult, spec: KernelSpec, shape: tuple[int, int], dtype: np.dtype
    ) -> None:
        n, n_features_in = shape
        self._result = result
        self._spec = spec
        self._fit_dtype = dtype
        self._preimage = None
        self.eigenvalues_ = result.eigenvalues
        self.explained_variance_ = result.eigenvalues / n
        self.components_ = result.pca.components
        self.feature_mean_ = result.pca.mean
        self.feature_map_ = result.feature_map
        self.n_components_ = int(result.eigenvalues.shape[0])
        self.n_features_in_ = n_features_in
        self.gamma_ = spec.gamma
        self.sigma_ = spec.sigma

    def fit(self, X: ArrayLike, y: object = None) -> ApproximateKernelPCA:
        """Fit the feature map and the PCA of the centred features on ``X``.

        Parameters
        ----------
        X : array-like or Dask array of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.

        Returns
        -------
        ApproximateKernelPCA
            The fitted estimator.
        """
        self._fit(X, project=False)
        return self

    def fit_transform(self, X: ArrayLike, y: object = None) -> NDArray[np.float64]:
        """Fit on ``X`` and project it (a second pass over the features).

        Parameters
        ----------
        X : array-like or Dask array of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.

        Returns
        -------
        ndarray or Dask array of shape (n_samples, n_components_)
            Equal to ``fit(X).transform(X)``; a lazy Dask array for a Dask ``X``.
        """
        return self._fit(X, project=True)

    # -- projecting --------------------------------------------------------------------
    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project ``X``: ``(Φ(X) − feature_mean_) @ components_.T``.

        Parameters
        ----------
        X : array-like or Dask array of shape (n_points, n_features_in_)
            Points to project.

        Returns
        -------
        ndarray or Dask array of shape (n_points, n_components_)
            A lazy Dask array (one block per chunk of rows) for a Dask ``X``.
        """
        check_is_fitted(self, "eigenvalues_")
        if is_dask_array(X):
            from ._dask import check_dask_array, transform_dask

            X = check_dask_array(X)
            check_n_features(X, self.n_features_in_, type(self).__name__)
            return transform_dask(self._result, X)
        dtype = output_dtype(X, self._fit_dtype)
        X = self._validate_X(X, reset=False)
        self._refuse_sparse(X, self.method)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        return transform_approximate(self._result, X).astype(dtype, copy=False)

    @_InverseTransform
    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Pre-images of projections ``X`` by the learned map.

        Needs ``fit_inverse_transform=True``; without it the attribute does not
        exist (``hasattr`` is ``False``; getting it raises scikit-learn's
        ``NotFittedError``), as for :class:`~kpca_lib.kernel_pca.KernelPCA`.

        Parameters
        ----------
        X : array-like of shape (n_points, n_components_)
            Projections, e.g. ``transform(X_new)``.

        Returns
        -------
        ndarray of shape (n_points, n_features_in_)
        """
        check_is_fitted(self, "eigenvalues_")
        if self._preimage is None:
            raise NotFittedError(_NO_INVERSE)
        return self._predict_preimage(X)

    def __sklearn_tags__(self):  # noqa: ANN204 - sklearn.utils.Tags
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _fit_preimage(Z: NDArray, X: NDArray, spec: KernelSpec, alpha: float):  # noqa: ANN202
    """The learned pre-image map from the projections ``Z`` back to ``X`` (same kernel)."""
    from .preimage import fit_preimage_map

    if Z.shape[1] == 0:
        raise ValueError(
            "fit_inverse_transform=True learns the pre-image map from the components, "
            "and none is left (no variance: see the warning above). Check X and the "
            "kernel parameters."
        )
    return fit_preimage_map(Z, X, kernel_fn=KernelFunction(spec), alpha=alpha)


# -- KernelPCA(approximation=...), deprecated: the ApproximateKernelPCA it stands for ---------

#: KernelPCA's parameters that ApproximateKernelPCA takes with the same meaning.
_SHARED_PARAMS = (
    "kernel", "sigma", "gamma", "degree", "coef0", "kernel_params", "remove_zero_eig",
    "fit_inverse_transform", "alpha", "random_state", "n_jobs",
)


def _from_kernel_pca(estimator: BaseEstimator) -> ApproximateKernelPCA:
    """The unfitted :class:`ApproximateKernelPCA` that ``KernelPCA(approximation=...)`` means.

    Emits the ``FutureWarning`` of the deprecated spelling, naming the replacement
    call exactly (with the kernel parameters that differ from its defaults), at the
    caller's line.

    Parameters
    ----------
    estimator : KernelPCA
        With ``approximation`` ``"nystroem"`` or ``"rff"``.

    Returns
    -------
    ApproximateKernelPCA
        The same model: its fit gives the same results, bit for bit.
    """
    model = ApproximateKernelPCA(
        estimator.n_components,
        method=estimator.approximation,
        n_features=estimator.n_features,
        **{name: getattr(estimator, name) for name in _SHARED_PARAMS},
    )
    old = (
        f"KernelPCA(approximation={estimator.approximation!r}, "
        f"n_features={estimator.n_features!r})"
    )
    warnings.warn(
        f"{old} is deprecated since 0.2 and will be removed in 0.3: use "
        f"{_call(model)} (kpca_lib.ApproximateKernelPCA: the same model and attributes).",
        FutureWarning,
        stacklevel=_caller_stacklevel(),
    )
    return model


def _call(model: ApproximateKernelPCA) -> str:
    """``ApproximateKernelPCA(2, method='nystroem', n_features=50, kernel='linear')``:
    ``method`` and ``n_features``, then every parameter that is not the default."""
    args = [] if model.n_components is None else [repr(model.n_components)]
    for name, param in inspect.signature(type(model)).parameters.items():
        if name == "n_components":
            continue
        value = getattr(model, name)
        if name in ("method", "n_features") or not _is_default(value, param.default):
            args.append(f"{name}={value!r}")
    return f"{type(model).__name__}({', '.join(args)})"


def _is_default(value: object, default: object) -> bool:
    return value is default or (type(value) is type(default) and value == default)
