"""Kernel PCA, following the lectures step by step.

1. Build the kernel matrix ``K_ij = k(x_i, x_j)`` (n×n).
2. Centre it: ``K_c = K − 1K − K1 + 1K1`` (:func:`kpca_lib.centering.center_kernel`).
3. Eigendecompose ``K_c β_k = (nλ_k) β_k`` with unit ``β_k``.
4. Normalise ``α_k = β_k / √(nλ_k)`` so that ``w_k = Σ_j α_kj φ(x_j)`` has unit
   norm (``α_kᵀ K_c α_k = 1``).
5. Project without ever forming φ: the k-th coordinate of ``x_i`` is
   ``Σ_j α_kj K^c_ij``, and of a new point ``x`` it is ``Σ_j α_kj k^c(x, x_j)``
   with the kernel row centred by the *training* statistics.

This module holds the public estimator: parameters, validation, the
scikit-learn API and the dispatch to the fitting modes, each a small
module returning a result object:

* exact (:mod:`kpca_lib._exact`): at scale (``n`` in the tens of thousands)
  the kernel is built block by block in parallel threads, only its lower
  triangle is stored (:mod:`kpca_lib._blocked`), it is centred implicitly
  inside every matrix–vector product, and only the top eigenpairs are
  computed (:mod:`kpca_lib._eigen`). Fit and ``transform`` evaluate the
  kernel with the same code (:class:`kpca_lib.kernels.KernelEvaluator`).
* approximate: the estimator of its own,
  :class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA` (Nyström or
  random Fourier features, then centred linear PCA of them; Dask arrays too).
  ``KernelPCA(approximation="nystroem" | "rff", n_features=J)`` is deprecated
  since 0.2 (a ``FutureWarning``, removed in 0.3): it fits that estimator and
  exposes its attributes, with the same results.

It is a drop-in for ``sklearn.decomposition.KernelPCA``: the same parameters,
defaults and attributes (plus the lectures' ``sigma`` and this package's
options), sparse ``X``, float32 in → float32 out, ``eigen_solver="randomized"``
and ``remove_zero_eig``. ``tests/test_sklearn_kernel_pca_port.py`` runs
scikit-learn's own tests of ``KernelPCA`` against it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from numbers import Integral, Real

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval, Options, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._approximate import (
    ApproximateResult,
    check_approximation,
    transform_approximate,
)
from ._dask import is_dask_array
from ._eigen import EIGEN_SOLVERS
from ._exact import ExactResult, NonPSDKernelWarning, fit_exact, transform_exact
from ._kernel_params import KERNEL_CONSTRAINTS, estimator_kernel_spec
from ._validation import (
    capped_n_components,
    check_array,
    check_n_features,
    check_n_jobs,
    check_sparse_array,
    detached,
    output_dtype,
)
from .centering import center_kernel
from .kernels import KERNELS, KernelFunction, KernelSpec, sparse_kernel

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import _check_feature_names
except ImportError:  # pragma: no cover - older scikit-learn

    def _check_feature_names(estimator: BaseEstimator, X: object, *, reset: bool) -> None:
        estimator._check_feature_names(X, reset=reset)


__all__ = ["KernelPCA", "NonPSDKernelWarning"]

KERNEL_DTYPES = ("float64", "float32")
#: ``kernel_dtype`` may also be given as a NumPy type or dtype.
_DTYPE_OBJECTS = {np.float64, np.float32, np.dtype(np.float64), np.dtype(np.float32)}

#: Test-kernel entries computed at once per thread in ``transform`` (16 MB of float64).
_TRANSFORM_BLOCK = 1 << 21

_NO_INVERSE = (
    "The fit_inverse_transform parameter was not set to True when instantiating and hence "
    "the inverse transform is not available."
)


class _InverseTransform:
    """``inverse_transform`` as an attribute that exists only with ``fit_inverse_transform=True``.

    Without the pre-image map, getting the attribute raises scikit-learn's
    :class:`~sklearn.exceptions.NotFittedError` (the message scikit-learn gives when
    it is called), which is also an ``AttributeError``: ``hasattr(est,
    "inverse_transform")`` is ``False``, so that scikit-learn's estimator checks
    (``check_array_api_input``), ``Pipeline`` and other duck-typing callers skip a map
    that was not asked for, while ``est.inverse_transform(Z)`` still raises the same
    ``NotFittedError`` as scikit-learn's ``KernelPCA``.
    """

    def __init__(self, method: Callable) -> None:
        self.method = method
        functools.update_wrapper(self, method)

    def __get__(self, instance: object, owner: type | None = None) -> Callable:
        if instance is None:
            return self.method  # on the class: the plain function (help, Sphinx)
        if not getattr(instance, "fit_inverse_transform", False):
            raise NotFittedError(_NO_INVERSE)
        return self.method.__get__(instance, owner)


class _LearnedPreimage:
    """The learned pre-image map's attributes, shared by both kernel PCA estimators.

    ``X_transformed_fit_`` and ``dual_coef_`` exist after a fit with
    ``fit_inverse_transform=True`` only; :meth:`_predict_preimage` is the NumPy part
    of ``inverse_transform``; ``_n_features_out`` names the output columns.
    """

    def _inverse(self, name: str):  # noqa: ANN202 - the preimage module's PreimageMap
        preimage = self.__dict__.get("_preimage")
        if preimage is None:
            raise AttributeError(f"{name} exists after a fit with fit_inverse_transform=True only")
        return preimage

    @property
    def X_transformed_fit_(self) -> NDArray[np.float64]:
        return self._inverse("X_transformed_fit_").X_transformed_fit_

    @property
    def dual_coef_(self) -> NDArray[np.float64]:
        return self._inverse("dual_coef_").dual_coef_

    @property
    def _n_features_out(self) -> int:
        """Number of output columns (for ``get_feature_names_out``)."""
        return self.eigenvalues_.shape[0]

    def _predict_preimage(self, X: ArrayLike) -> NDArray[np.float64]:
        """Pre-images of NumPy projections ``X`` by the learned map (fitted, checked here)."""
        dtype = output_dtype(X, self._fit_dtype)
        Z = check_array(X, "X")
        if Z.shape[1] != self.n_components_:
            raise ValueError(
                f"X must have one column per component: got {Z.shape[1]} columns, expected "
                f"n_components_ = {self.n_components_} (the output of transform)."
            )
        return self._preimage.predict(Z).astype(dtype, copy=False)


class KernelPCA(_LearnedPreimage, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel principal component analysis (exact; approximate: ``ApproximateKernelPCA``).

    A drop-in for ``sklearn.decomposition.KernelPCA``: the same parameters,
    defaults and meaning, plus the lectures' ``sigma`` and the options of this
    package (``kernel_dtype``, ...). ``KernelPCA()`` with no
    arguments is scikit-learn's: a linear kernel. For the lectures' kernels
    pass them explicitly: ``kernel="rbf", sigma=σ`` for ``exp(−‖x−y‖²/(2σ²))``
    and ``kernel="poly", degree=p, gamma=1.0, coef0=1.0`` for ``(xᵀy + 1)^p``.

    Parameters
    ----------
    n_components : int, optional
        Number of components, at least 1. More than ``n_samples`` is capped at
        ``n_samples`` (as scikit-learn; the deprecated ``approximation=`` needs
        at most ``min(n_samples, n_features)``). ``None`` keeps every component
        with a non-zero eigenvalue.
    kernel : {"linear", "poly", "rbf", "sigmoid", "cosine", "precomputed"} or callable, default="linear"
        ``"linear"``: ``xᵀy``; ``"poly"``: ``(γ xᵀy + coef0)^degree``;
        ``"rbf"``: ``exp(−γ‖x−y‖²) = exp(−‖x−y‖²/(2σ²))``; ``"sigmoid"``:
        ``tanh(γ xᵀy + coef0)`` (not positive semi-definite in general: not a
        Mercer kernel); ``"cosine"``: ``xᵀy/(‖x‖‖y‖)`` (0 for a zero row, as
        scikit-learn); ``"precomputed"``: ``X`` is the ``n×n`` kernel matrix at
        ``fit`` and the ``m×n`` kernel between new and training points at
        ``transform``; or any function ``k(x, y) -> float`` of two samples.
    sigma : float, optional
        Bandwidth σ > 0 of the RBF kernel (the lectures' parameter): given, it
        sets ``gamma_ = 1/(2σ²)``. Only with ``kernel="rbf"``: with any other
        kernel it is an error (``KernelPCA(k, sigma=s)`` would otherwise be a
        linear PCA now that the default kernel is scikit-learn's ``"linear"``).
    gamma : float, optional
        scikit-learn's parameter; give ``sigma`` or ``gamma``, not both.
        ``rbf``: ``gamma = 1/(2σ²)`` (so ``gamma=0.5`` is σ = 1); ``poly`` and
        ``sigmoid``: the factor of ``xᵀy``. ``None`` (and no ``sigma``):
        ``1/n_features``, as scikit-learn. Ignored by ``linear``, ``cosine``
        and callables. Must be > 0.
    degree : int, default=3
        Degree ``p`` of the polynomial kernel.
    coef0 : float, default=1.0
        Constant of the polynomial and sigmoid kernels.
    kernel_params : dict, optional
        Keyword arguments of a callable kernel: ``kernel(x, y, **kernel_params)``
        (scikit-learn's parameter). Unlike scikit-learn, which ignores them for a
        named kernel, a non-empty ``kernel_params`` with a named kernel is a
        ``ValueError``: pass ``gamma``, ``degree`` and ``coef0`` (or ``sigma``)
        instead.
    alpha : float, default=1.0
        Ridge (>= 0, as scikit-learn) of the learned pre-image map
        (``fit_inverse_transform=True``). ``alpha=0`` interpolates the training
        pairs and needs a kernel matrix of the projections that is positive
        definite (a ``ValueError`` says so otherwise).
    fit_inverse_transform : bool, default=False
        Learn the pre-image map (kernel ridge regression from the projections
        back to ``X``, Bakır, Weston & Schölkopf 2004, with the same kernel) so
        that :meth:`inverse_transform` works. Not with ``kernel="precomputed"``.
    eigen_solver : {"auto", "dense", "lanczos", "arpack", "randomized"}, default="auto"
        How the top eigenpairs of the centred kernel matrix are computed (exact
        method only), see :mod:`kpca_lib._eigen`; every result is verified
        (residuals, orthonormality, no missed eigenvalue) or refused:

        * ``"dense"``: LAPACK ``eigh`` of the full float64 matrix, top pairs
          only. O(n³) time and a full n×n matrix: for small ``n`` or many
          components.
        * ``"lanczos"``: our block Lanczos on the half-stored, implicitly
          centred kernel; stops when every residual ``‖K_c u − θu‖ ≤ tol·‖K_c‖``.
        * ``"arpack"``: scipy's ARPACK ``eigsh`` on the same half-stored matrix.
        * ``"randomized"``: randomized subspace iteration (Halko et al. 2011,
          :mod:`kpca_lib._randomized`) from a random block (``random_state``),
          at least ``2·iterated_power + 1`` passes and then until the residuals
          meet ``tol``, so its result is as accurate as the others'. It
          returns the largest eigenvalues (scikit-learn's: the largest in
          magnitude, wrong for an indefinite kernel).
        * ``"auto"``: chosen from ``n`` and ``n_components`` as measured fastest
          (``"lanczos"``; ``"arpack"`` for at most 10 components below
          ``n = 500 + 100·n_components``; ``"dense"`` for ``n ≤ 200`` or more than ``n/10``
          components; never ``"randomized"``), falling back to ``"dense"`` when
          its first choice does not verify.

        Callable and precomputed kernels and sparse ``X`` build the full matrix.
    tol : float, optional
        Relative residual tolerance of the iterative solvers. ``None`` or 0
        (scikit-learn's default): ``1e-10`` for ``"lanczos"`` and
        ``"randomized"`` with a float64 kernel and machine precision for
        ``"arpack"``. With a float32 kernel ``"lanczos"`` and ``"randomized"``
        never ask for less than ``10·eps(float32) ≈ 1.2e-6``.
    max_iter : int, optional
        Maximum number of matrix–vector products of the iterative solvers
        (``"randomized"``: default 200 passes over its block).
    iterated_power : int >= 0 or "auto", default="auto"
        ``eigen_solver="randomized"`` only: the minimum number of power
        iterations (scikit-learn's ``"auto"``: 7 if ``n_components < 0.1·n``,
        else 4).
    remove_zero_eig : bool, default=False
        Drop the components whose eigenvalue is 0 (within rounding), so that
        there may be fewer than ``n_components``; with ``n_components=None``
        they are always dropped (as scikit-learn). A fit that keeps no
        component at all returns ``(n, 0)`` projections, as scikit-learn, and
        warns (a ``UserWarning`` naming the cause); only
        ``fit_inverse_transform=True`` then raises a ``ValueError``, since its
        pre-image map has no component to learn from.
    kernel_dtype : {"float64", "float32"}, default="float64"
        Storage precision of the kernel matrix for the iterative solvers with
        a named kernel. ``"float32"`` halves the memory again and speeds up
        the solver; kernel entries are then rounded to ~6e-8 relative, so
        eigenvalues below ``2⁻²⁴·‖K‖_F`` cannot be told from 0. A
        :class:`UserWarning` names every requested component that float32
        does not resolve: those returned as 0 (or dropped) because their
        eigenvalue is within that rounding level, and all of them when
        rounding may move the eigenvalues by more than 1e-4 of the smallest
        resolved one. A kernel whose values do not fit in float32 is a
        ``ValueError``. Ignored by ``"dense"``, callable and precomputed
        kernels and sparse ``X``.
    approximation : {None, "nystroem", "rff"}, default=None
        Deprecated since 0.2, removed in 0.3: use
        :class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA` with
        ``method=approximation`` (the warning names the exact call; mind its
        default kernel, ``"rbf"``). ``None``: exact kernel PCA. Otherwise a fit
        emits a ``FutureWarning``, fits that estimator and exposes its
        attributes (the same results).
    n_features : int, default=100
        Deprecated with ``approximation`` (its ``n_features``); ignored when
        ``approximation=None``.
    random_state : int, RandomState, Generator or None
        Seed of the randomized solver's start block and of the approximations'
        landmarks or random frequencies. The other exact solvers are always
        deterministic (fixed start vector), and so is ``"randomized"`` with
        ``None`` (a fixed seed; scikit-learn draws from NumPy's global state).
    copy_X : bool, default=True
        Keep a private copy of the training data in ``X_fit_``; ``False``
        keeps a reference to the caller's array (then changing it afterwards
        changes ``transform``, as in scikit-learn).
    n_jobs : int, optional
        Threads computing kernel blocks (fit and transform). ``None`` or
        ``-1``: every available core.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues ``nλ_k`` of the centred kernel matrix, descending
        (``λ_k`` is the variance along the k-th component in feature space).
        Values within rounding of 0 are exactly 0. With the deprecated
        ``approximation=``: ``n ×`` the eigenvalues of the covariance of the centred features.
    explained_variance_ : ndarray of shape (n_components,)
        ``λ_k = eigenvalues_ / n``.
    alphas_ : ndarray of shape (n_samples, n_components)
        Exact method only. ``α_k = β_k / √(nλ_k)``; columns with a zero
        eigenvalue are zero. ``alphas_.T @ K_c @ alphas_`` is the identity (on
        non-zero components).
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        Exact method only. Unit eigenvectors ``β_k``; the largest-magnitude
        entry of each is positive.
    X_fit_ : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features)
        Exact method only (``transform`` needs every training point), as
        float64 (a CSR matrix for sparse ``X``); the kernel matrix for
        ``kernel="precomputed"``.
    feature_map_, components_, feature_mean_
        Only after a fit with the deprecated ``approximation=``: those of
        :class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA`.
    X_transformed_fit_ : ndarray of shape (n_samples, n_components)
        With ``fit_inverse_transform=True``: the training projections.
    dual_coef_ : ndarray of shape (n_samples, n_features)
        With ``fit_inverse_transform=True``: coefficients of the pre-image map.
    gamma_ : float or None
        The ``gamma`` in use (``1/(2σ²)`` for rbf); ``None`` for kernels without one.
    sigma_ : float or None
        The RBF bandwidth in use (``None`` for other kernels).
    eigen_solver_ : str
        The solver actually used (``"features"`` for an approximation).
    n_components_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names of a DataFrame ``X`` at fit (then ``transform`` checks them).

    Notes
    -----
    ``transform(X)`` is ``center_test_kernel(k(X, X_fit_), K_fit) @ alphas_``
    (computed in row blocks); ``fit_transform(X)`` equals ``fit(X).transform(X)``.
    A Dask array is refused (exact kernel PCA needs the whole kernel matrix):
    use :class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA`, or
    ``X.compute()``.

    ``X`` may be a ``scipy.sparse`` matrix for the named kernels (exact method):
    the kernel matrix is computed from the sparse rows (``X`` is never
    densified; ``X_fit_`` is a CSR matrix) and held as a full float64 matrix.
    Callable and precomputed kernels need dense ``X`` (a ``ValueError`` says so).

    Computations run in float64. As in scikit-learn, the output of
    ``fit_transform``, ``transform`` and ``inverse_transform`` is float32 when
    its input and the training data are float32, float64 otherwise; the
    fitted attributes stay float64.

    A precomputed kernel matrix must be symmetric up to the rounding of its
    dtype (its symmetric part is used); entries of any magnitude (e.g. near
    ``1e±150``) are accepted: such a kernel is scaled by a power of two inside.

    Examples
    --------
    >>> from kpca_lib.datasets import make_moons
    >>> X, y = make_moons(100, noise=0.05, random_state=0)
    >>> Z = KernelPCA(n_components=2, kernel="rbf", sigma=0.3).fit_transform(X)
    >>> Z.shape
    (100, 2)
    """

    #: scikit-learn's parameter validation (``BaseEstimator._validate_params``), run before
    #: any work: every parameter's type and range, with scikit-learn's messages
    #: (``InvalidParameterError``, a ``ValueError`` and a ``TypeError``).
    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        **KERNEL_CONSTRAINTS,
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_inverse_transform": ["boolean"],
        "eigen_solver": [StrOptions(set(EIGEN_SOLVERS))],
        "tol": [Interval(Real, 0, np.inf, closed="left"), None],  # finite: inf verifies nothing
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "iterated_power": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "remove_zero_eig": ["boolean"],
        "kernel_dtype": [StrOptions(set(KERNEL_DTYPES)), Options(object, _DTYPE_OBJECTS)],
        "approximation": [StrOptions({"nystroem", "rff"}), None],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        "copy_X": ["boolean"],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: str | Callable = "linear",
        sigma: float | None = None,
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        kernel_params: dict | None = None,
        alpha: float = 1.0,
        fit_inverse_transform: bool = False,
        eigen_solver: str = "auto",
        tol: float | None = None,
        max_iter: int | None = None,
        iterated_power: int | str = "auto",
        remove_zero_eig: bool = False,
        kernel_dtype: str = "float64",
        approximation: str | None = None,
        n_features: int = 100,
        random_state: int | np.random.RandomState | np.random.Generator | None = None,
        copy_X: bool = True,
        n_jobs: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.sigma = sigma
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.kernel_dtype = kernel_dtype
        self.approximation = approximation
        self.n_features = n_features
        self.random_state = random_state
        self.copy_X = copy_X
        self.n_jobs = n_jobs

    # -- parameters --------------------------------------------------------------------
    def _kernel_spec(self, n_features: int) -> KernelSpec:
        return estimator_kernel_spec(self, n_features)  # shared with ApproximateKernelPCA

    def _check_params(self, n: int, n_features: int) -> KernelSpec:
        """The kernel, and what scikit-learn's constraints cannot say (checked first)."""
        self._validate_params()
        spec = self._kernel_spec(n_features)
        check_n_jobs(self.n_jobs)
        if self.fit_inverse_transform and spec.name == "precomputed":
            raise ValueError(
                "Cannot fit_inverse_transform with a precomputed kernel: the pre-image map "
                "needs the kernel function. Use fit_inverse_transform=False, or pass the "
                "kernel by name or as a callable."
            )
        return spec

    # -- fitting -----------------------------------------------------------------------
    def _validate_X(self, X: ArrayLike, *, reset: bool) -> NDArray[np.float64]:
        """``X`` as float64: a dense array, or a CSR matrix for sparse ``X`` (checked later)."""
        _check_feature_names(self, X, reset=reset)
        if scipy.sparse.issparse(X):
            return check_sparse_array(X)
        return check_array(X)

    @staticmethod
    def _refuse_sparse(spec: KernelSpec, approximation: str | None) -> None:
        """Sparse ``X`` is for the exact method with a named kernel: say why otherwise."""
        if spec.name == "precomputed":
            why, other = "kernel='precomputed' needs the dense kernel matrix", "X.toarray()"
        elif spec.name == "callable":
            why = "a callable kernel k(x, y) is evaluated on dense rows"
            other = f"X.toarray(), or a named kernel ({', '.join(map(repr, KERNELS))})"
        elif approximation is not None:
            why = f"approximation={approximation!r} computes dense features of X"
            other = "X.toarray(), or approximation=None (exact, from the sparse rows)"
        else:
            return
        raise ValueError(
            f"X is a scipy.sparse matrix, which is supported for the exact method with the "
            f"named kernels ({', '.join(map(repr, KERNELS))}) only: {why}. Pass {other}."
        )

    def _fit(self, X: ArrayLike, *, project: bool) -> NDArray[np.float64] | None:
        """Fit; return the training projections if ``project`` (or they are needed anyway)."""
        if is_dask_array(X):
            return self._fit_dask(X, project=project)
        xp = _device_namespace(X)
        if xp is not None:  # Array API (device) path: kpca_lib._array_api
            from ._array_api import fit_device

            _check_feature_names(self, X, reset=True)
            return fit_device(self, X, xp, project=project)
        X_in = X
        fit_dtype = output_dtype(X)
        X = self._validate_X(X, reset=True)
        sparse = scipy.sparse.issparse(X)
        n = X.shape[0]
        spec = self._check_params(n, X.shape[1])
        approximation = check_approximation(self.approximation, spec)
        if sparse:
            self._refuse_sparse(spec, approximation)
        n_threads = check_n_jobs(self.n_jobs)
        if spec.name == "precomputed" and X.shape[0] != X.shape[1]:
            raise ValueError(
                f"kernel='precomputed': X must be the square (n_samples, n_samples) kernel matrix "
                f"of the training points; got shape {X.shape}."
            )
        self._preimage = None
        if approximation is not None:  # deprecated: ApproximateKernelPCA does the work
            Z = self._fit_approximation(X, n, project=project)
            self._fit_dtype = fit_dtype
            return None if Z is None else Z.astype(fit_dtype, copy=False)
        else:
            n_components = capped_n_components(self.n_components, n)
            if self.copy_X and _shares_memory(X, X_in):
                X = X.copy()  # X_fit_ must not change when the caller edits X
            result = fit_exact(
                spec,
                X,
                n_components,
                eigen_solver=self.eigen_solver,
                tol=self.tol or None,  # 0 (scikit-learn's default): the solver's
                max_iter=self.max_iter,
                kernel_dtype=np.dtype(self.kernel_dtype),
                n_threads=n_threads,
                remove_zero_eig=bool(self.remove_zero_eig),
                iterated_power=self.iterated_power,
                random_state=self.random_state,
                input_eps=float(np.finfo(fit_dtype).eps),
            )
            Z = result.projections()
            self.eigen_solver_ = result.solver
        self._set_fitted(result, spec, n, X.shape[1])
        self._fit_dtype = fit_dtype
        if self.fit_inverse_transform:
            from .preimage import fit_preimage_map

            if Z.shape[1] == 0:
                raise ValueError(
                    "fit_inverse_transform=True learns the pre-image map from the components, "
                    "and none is left (no variance: see the warning above). Check X and the "
                    "kernel parameters."
                )
            target = X.toarray() if sparse else X  # n×d, the size of dual_coef_ anyway
            self._preimage = fit_preimage_map(
                Z, target, kernel_fn=KernelFunction(spec), alpha=float(self.alpha)
            )
        return None if Z is None else Z.astype(fit_dtype, copy=False)

    def _set_fitted(
        self, result: ApproximateResult | ExactResult, spec: KernelSpec, n: int, n_features_in: int
    ) -> None:
        self._result = result
        self._spec = spec
        self.eigenvalues_ = result.eigenvalues
        self.explained_variance_ = result.eigenvalues / n
        self.n_components_ = int(result.eigenvalues.shape[0])
        self.n_features_in_ = n_features_in
        self.gamma_ = spec.gamma
        self.sigma_ = spec.sigma

    def _fit_dask(self, X: object, *, project: bool) -> object:
        """A Dask array: only ``ApproximateKernelPCA`` (or the deprecated ``approximation=``)
        fits one, chunk by chunk (:mod:`kpca_lib._dask`)."""
        spec = self._check_params(2, int(X.shape[1]))
        if check_approximation(self.approximation, spec) is None:
            raise ValueError(
                "X is a Dask array: exact kernel PCA needs the whole n×n kernel matrix in one "
                "place, so it does not run on chunks. Use kpca_lib.ApproximateKernelPCA("
                "method='nystroem' or 'rff', n_features=...) (features computed chunk by chunk "
                "on the workers), or pass X.compute() to KernelPCA."
            )
        _check_feature_names(self, X, reset=True)
        self._preimage = None
        Z = self._fit_approximation(X, int(X.shape[0]), project=project)
        self._fit_dtype = np.dtype(np.float64)
        return Z

    def _fit_approximation(self, X: object, n: int, *, project: bool) -> object:
        """``approximation=`` (deprecated, a ``FutureWarning``): fit the
        :class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA` it stands for on the
        validated ``X`` (or a Dask array) and take its fitted attributes."""
        from .approximate_kernel_pca import _from_kernel_pca

        model = _from_kernel_pca(self)
        Z = model._fit(X, project=project)
        self._approximate_model = model
        self._preimage = model._preimage
        self.eigen_solver_ = "features"
        self._set_fitted(model._result, model._spec, n, model.n_features_in_)
        return Z

    def fit(self, X: ArrayLike, y: object = None) -> KernelPCA:
        """Fit kernel PCA on ``X`` of shape (n_samples, n_features).

        With ``kernel="precomputed"``, ``X`` is the (n_samples, n_samples)
        kernel matrix of the training points.
        """
        self._fit(X, project=False)
        return self

    def fit_transform(self, X: ArrayLike, y: object = None) -> NDArray[np.float64]:
        """Fit and project the training points: ``K_c α_k = √(nλ_k) β_k``.

        Equal to ``fit(X).transform(X)`` up to rounding, without recomputing the
        kernel (exact method); an approximation makes a second pass over the
        features.
        """
        return self._fit(X, project=True)

    # -- projecting --------------------------------------------------------------------
    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project new points.

        Exact: ``center_test_kernel(k(X, X_fit_), K_fit) @ alphas_``, computed
        in row blocks so that the m×n test kernel is never held at once.
        With ``kernel="precomputed"``, ``X`` is the (m, n_samples) kernel
        between the new and the training points.
        Deprecated ``approximation=``: ``(Φ(X) − feature_mean_) @ components_.T``.
        """
        check_is_fitted(self, "eigenvalues_")
        if is_dask_array(X):
            return self._transform_dask(X)
        if _on_device(self) or _device_namespace(X) is not None:  # kpca_lib._array_api
            from ._array_api import transform_device

            return transform_device(self, X)
        dtype = output_dtype(X, self._fit_dtype)
        X = self._validate_X(X, reset=False)
        result = self._result
        if scipy.sparse.issparse(X):
            self._refuse_sparse(
                self._spec, self.approximation if isinstance(result, ApproximateResult) else None
            )
        if isinstance(result, ApproximateResult):
            check_n_features(X, self.n_features_in_, type(self).__name__)
            return transform_approximate(result, X).astype(dtype, copy=False)
        if self._spec.name == "precomputed" and X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"kernel='precomputed': transform needs the kernel between the new points and "
                f"the {self.n_features_in_} training points, shape (n_new, {self.n_features_in_}); "
                f"got shape {X.shape}."
            )
        check_n_features(X, self.n_features_in_, type(self).__name__)
        Z = transform_exact(
            self._spec, result, X, n_threads=check_n_jobs(self.n_jobs), block=_TRANSFORM_BLOCK
        )
        return Z.astype(dtype, copy=False)

    def _transform_dask(self, X: object) -> object:
        if not isinstance(self._result, ApproximateResult):
            raise ValueError(
                "X is a Dask array: transform of a Dask array needs an approximate fit "
                "(kpca_lib.ApproximateKernelPCA, fitted on the Dask array or in memory); for "
                "an exact model pass X.compute()."
            )
        return self._approximate_model.transform(X)  # deprecated approximation=

    @_InverseTransform
    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Pre-images of projections ``X`` (shape (n, n_components)), by the learned map.

        Needs ``fit_inverse_transform=True``. As in scikit-learn, the map is a
        kernel ridge regression from the training projections back to the
        training points; it does not reconstruct the data mean exactly (the
        kernel is centred). With ``fit_inverse_transform=False`` the attribute
        does not exist: ``hasattr(est, "inverse_transform")`` is ``False`` and
        ``est.inverse_transform`` raises scikit-learn's ``NotFittedError`` (also
        an ``AttributeError``) with scikit-learn's message.
        """
        check_is_fitted(self, "eigenvalues_")
        if self._preimage is None:
            raise NotFittedError(_NO_INVERSE)
        if _on_device(self) or _device_namespace(X) is not None:  # kpca_lib._array_api
            from ._array_api import inverse_transform_device

            return inverse_transform_device(self, X)
        return self._predict_preimage(X)

    # -- attributes of one mode --------------------------------------------------------
    def _exact(self, name: str) -> ExactResult:
        result = self.__dict__.get("_result")
        if not isinstance(result, ExactResult):
            raise AttributeError(
                f"{name} exists after an exact fit only (approximation=None)"
                + (
                    ""
                    if result is None
                    else f"; this estimator used approximation={self.approximation!r}"
                )
            )
        return result

    def _approximate(self, name: str):  # noqa: ANN202 - an ApproximateKernelPCA
        """The fitted ApproximateKernelPCA of the deprecated ``approximation=`` (for ``name``)."""
        if not isinstance(self.__dict__.get("_result"), ApproximateResult):
            raise AttributeError(
                f"{name} is an attribute of kpca_lib.ApproximateKernelPCA (KernelPCA has it only "
                "after a fit with the deprecated approximation='nystroem' or 'rff')"
            )
        return self._approximate_model

    @property
    def alphas_(self) -> NDArray[np.float64]:
        return self._exact("alphas_").alphas

    @property
    def eigenvectors_(self) -> NDArray[np.float64]:
        return self._exact("eigenvectors_").eigenvectors

    @property
    def X_fit_(self) -> NDArray[np.float64] | scipy.sparse.csr_matrix:
        return self._exact("X_fit_").X_fit

    @property
    def components_(self) -> NDArray[np.float64]:
        return self._approximate("components_").components_

    @property
    def feature_mean_(self) -> NDArray[np.float64]:
        return self._approximate("feature_mean_").feature_mean_

    @property
    def feature_map_(self):  # noqa: ANN201 - RandomFourierFeatures or NystroemFeatures
        return self._approximate("feature_map_").feature_map_

    # -- helpers for the lectures ------------------------------------------------------
    def kernel_matrix_c(self) -> NDArray[np.float64]:
        """The centred training kernel matrix ``K_c`` (recomputed, O(n²) memory; exact only)."""
        check_is_fitted(self, "eigenvalues_")
        if not isinstance(self._result, ExactResult):
            raise ValueError(
                "kernel_matrix_c needs the training points, which an approximation does not "
                "keep; fit with approximation=None."
            )
        if _on_device(self):  # kpca_lib._array_api
            from ._array_api import kernel_matrix_c_device

            return kernel_matrix_c_device(self)
        if self._spec.name == "precomputed":
            return center_kernel(self.X_fit_, copy=True)
        if scipy.sparse.issparse(self.X_fit_):
            return center_kernel(sparse_kernel(self._spec, self.X_fit_), copy=False)
        return center_kernel(KernelFunction(self._spec)(self.X_fit_), copy=False)

    def __sklearn_tags__(self):  # noqa: ANN204 - sklearn.utils.Tags
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = isinstance(self.kernel, str) and self.kernel == "precomputed"
        tags.input_tags.sparse = (
            self.approximation is None and isinstance(self.kernel, str) and self.kernel in KERNELS
        )
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        # The exact method runs on any Array API namespace and device (kpca_lib._array_api)
        tags.array_api_support = self.approximation is None and (
            isinstance(self.kernel, str) and self.kernel in KERNELS
        )
        return tags


# -- Array API (device) dispatch: the whole device path is in kpca_lib._array_api --------


def _device_namespace(X: object) -> object | None:
    """``X``'s Array API namespace when scikit-learn's ``array_api_dispatch`` is on and ``X``
    is not a NumPy array (then the device path runs); ``None`` otherwise, without importing
    anything (the NumPy path is unchanged)."""
    if not get_config()["array_api_dispatch"]:
        return None
    from ._array_api import device_namespace

    return device_namespace(X)


def _on_device(estimator: KernelPCA) -> bool:
    """Whether ``estimator`` was fitted on the device path (its result holds a namespace)."""
    return getattr(estimator.__dict__.get("_result"), "xp", None) is not None


def _shares_memory(X: object, X_in: object) -> bool:
    """Whether the validated ``X`` may share memory with the caller's ``X_in``."""
    if X is X_in:
        return True
    if scipy.sparse.issparse(X):
        if not scipy.sparse.issparse(X_in):
            return False
        return any(
            np.may_share_memory(getattr(X, a), getattr(X_in, a, np.empty(0)))
            for a in ("data", "indices", "indptr")
        )
    return np.may_share_memory(X, np.asarray(detached(X_in)))
