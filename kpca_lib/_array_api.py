"""Exact kernel PCA on any Array API namespace and device (GPU via PyTorch or CuPy).

With scikit-learn's ``array_api_dispatch`` on (``sklearn.set_config(array_api_dispatch=True)``)
and ``X`` an array of a non-NumPy namespace (``torch`` on ``"cuda"``, CuPy, or
``array_api_strict`` in the tests), :class:`~kpca_lib.kernel_pca.KernelPCA` runs
here instead of on the CPU code: every step in ``X``'s namespace, on ``X``'s
device, and every array it returns or keeps is of that namespace and device.

1. **Kernel**: the ``n×n`` matrix is stored on the device in ``X``'s dtype
   (float32 in → float32 kernel), built in row blocks whose temporaries fit
   :data:`BLOCK_BYTES` (:func:`build_kernel`): only the upper block rows are
   computed, their transposes mirrored, so ``K`` is exactly symmetric. The
   arithmetic is the CPU evaluator's (:class:`kpca_lib.kernels.KernelEvaluator`):
   RBF and (centred) linear kernels on data shifted by the training mean, a
   wide Gaussian stored as ``K − 1`` (``expm1``), zero cosine rows give 0.
2. **Centring** in place: ``K_c = K − 1 r̄ᵀ − r̄ 1ᵀ + ḡ`` (row means ``r̄``, grand
   mean ``ḡ``), both kept for ``transform``'s test-kernel centring.
3. **Top-k eigenpairs** by the solvers and the verification every namespace shares
   (:func:`kpca_lib._eigen.top_eigh_operator` with ``like=``, written once against
   the Array API): the randomized subspace iteration of :mod:`kpca_lib._randomized`
   for every iterative request, ``xp.linalg.eigh`` of the whole matrix for
   ``eigen_solver="dense"`` (and when ``"auto"``'s first choice does not verify),
   each result checked by :func:`kpca_lib._verify.verify_eigenpairs` (count,
   order, orthonormality, residuals, a block Krylov search of the complement for
   a missed eigenvalue). Only the kernel operator (:class:`DenseOperator`) is this
   module's: the NumPy path's is the half-stored, threaded
   :class:`kpca_lib._blocked.SymmetricPanels`.

The eigenvalues are classified on the host (``k`` numbers) by the CPU code
(:func:`kpca_lib._exact._classify`): rounding-level ones become 0, clearly
negative ones raise. Nothing here is imported on the NumPy path, and no array
library beyond NumPy is ever imported by this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from sklearn import get_config
from sklearn.exceptions import NotFittedError
from sklearn.externals.array_api_compat import array_namespace
from sklearn.utils._array_api import _convert_to_numpy, _is_numpy_namespace, get_namespace

from ._blocked import KernelStats
from ._eigen import record_solver_reports, top_eigh_operator
from ._exact import ExactResult, _Eigenpairs, _rounding_bound, _smallest_eigenvalue, finish
from ._validation import check_nonnegative, detached
from ._xp import device, to_host
from .kernels import KERNELS, KernelEvaluator, KernelSpec, check_kernel_values

__all__ = [
    "DEVICE_SOLVERS",
    "BLOCK_BYTES",
    "DeviceResult",
    "DevicePreimageMap",
    "device_namespace",
    "build_kernel",
    "DenseOperator",
    "fit_device",
    "transform_device",
    "inverse_transform_device",
]

#: Accepted ``eigen_solver`` values on the device (all but ``"dense"`` run subspace iteration).
DEVICE_SOLVERS = ("auto", "dense", "lanczos", "randomized")

#: Bytes of temporaries per block of the kernel build and of ``transform`` (the n×n kernel
#: itself is not counted). Module-level so that tests can make it tiny.
BLOCK_BYTES = 1 << 28

#: Temporaries of one block row, in units of ``rows × n`` entries (product, distances, exp).
_TEMPORARIES = 4

_EPS64 = float(np.finfo(np.float64).eps)
_EPS32 = float(np.finfo(np.float32).eps)



# -- namespace and device ---------------------------------------------------------------


def device_namespace(X: object) -> ModuleType | None:
    """The Array API namespace of ``X`` if the device path applies, else ``None``.

    It applies when scikit-learn's ``array_api_dispatch`` is on and ``X`` is an
    array of a namespace other than NumPy (lists, DataFrames and sparse
    matrices stay on the NumPy path, as scikit-learn's :func:`get_namespace` says).
    """
    if not get_config()["array_api_dispatch"]:
        return None
    xp, is_array_api = get_namespace(X)
    if not is_array_api or _is_numpy_namespace(xp):
        return None
    return xp


def _from_host(a: np.ndarray, xp: ModuleType, device: Any, dtype: Any) -> Any:
    return xp.asarray(np.ascontiguousarray(a), dtype=dtype, device=device)


def _has_float64(xp: ModuleType, device: Any) -> bool:
    try:
        dtypes = xp.__array_namespace_info__().dtypes(device=device, kind="real floating")
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - older namespaces
        return True
    return "float64" in dtypes


def _float_dtype(X: Any, xp: ModuleType) -> Any:
    """float32 stays float32, float64 stays; anything else becomes the widest float of the device."""
    if X.dtype == xp.float32 or X.dtype == xp.float64:
        return X.dtype
    return xp.float64 if _has_float64(xp, device(X)) else xp.float32


def _eps(dtype: Any, xp: ModuleType) -> float:
    return _EPS32 if dtype == xp.float32 else _EPS64


def _refuse(option: str, why: str, fix: str) -> ValueError:
    return ValueError(
        f"{option} is not supported on the Array API (device) path of KernelPCA: {why}. {fix}"
    )


_TO_NUMPY = "pass a NumPy array (e.g. X.cpu().numpy() for PyTorch, X.get() for CuPy)"


def check_device_params(estimator: Any, spec: KernelSpec) -> None:
    """Refuse, naming the option and the fix, what the device path does not do."""
    if spec.name == "precomputed":
        raise _refuse(
            "kernel='precomputed'",
            "the kernel is built on the device from X",
            f"Use a named kernel ({', '.join(map(repr, KERNELS))}) on the device array, or "
            f"{_TO_NUMPY} holding the precomputed kernel.",
        )
    if spec.name == "callable":
        raise _refuse(
            "a callable kernel",
            "k(x, y) is a Python function of two samples, evaluated on the CPU",
            f"Use a named kernel ({', '.join(map(repr, KERNELS))}), or {_TO_NUMPY}.",
        )
    if estimator.approximation is not None:
        raise _refuse(
            f"approximation={estimator.approximation!r}",
            "only exact kernel PCA runs on the device (approximation= is deprecated)",
            f"Use approximation=None for exact kernel PCA on the device, or "
            f"kpca_lib.ApproximateKernelPCA on a {_TO_NUMPY[7:]}.",
        )
    if estimator.eigen_solver not in DEVICE_SOLVERS:
        raise _refuse(
            f"eigen_solver={estimator.eigen_solver!r}",
            "ARPACK is SciPy's, on the CPU; the device runs the randomized subspace iteration "
            "and xp.linalg.eigh",
            f"Use eigen_solver in {DEVICE_SOLVERS} (all but 'dense' run the randomized subspace "
            f"iteration on the device), or {_TO_NUMPY}.",
        )
    if str(estimator.kernel_dtype) != "float64":
        raise _refuse(
            f"kernel_dtype={estimator.kernel_dtype!r}",
            "the kernel matrix on the device has X's dtype",
            "Pass X as float32 for a float32 kernel (e.g. X.to(torch.float32)) and leave "
            "kernel_dtype='float64'.",
        )


def _check_X(X: Any, xp: ModuleType, name: str = "X", dtype: Any = None) -> Any:
    """``X`` as a finite 2-D floating array of its namespace and device.

    A tensor that requires grad is detached, integer and boolean arrays become the
    device's widest float (or ``dtype``), and a non-contiguous view (a transpose, a
    strided slice) is used as it is (every operation here takes any strides).
    """
    X = detached(X)
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2D array, got {name} with {X.ndim} dimension(s) (shape {tuple(X.shape)})."
        )
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(
            f"{name} is empty: shape {tuple(X.shape)}; at least one sample and one "
            "feature are required."
        )
    if xp.isdtype(X.dtype, "complex floating"):
        raise ValueError(f"Complex data not supported: {name} has complex values.")
    dtype = _float_dtype(X, xp) if dtype is None else dtype
    if X.dtype != dtype:
        X = xp.astype(X, dtype)
    finite = xp.isfinite(X)
    if not bool(xp.all(finite)):
        bad = np.argwhere(~_convert_to_numpy(finite, xp))[0]
        raise ValueError(
            f"Input {name} contains NaN or infinity (first at index "
            f"{tuple(int(i) for i in bad)}, of {X.shape[0]}×{X.shape[1]}); remove or impute "
            "those values before KernelPCA: e.g. drop the rows with "
            f"{name}[xp.all(xp.isfinite({name}), axis=1)] (torch: "
            f"{name}[torch.isfinite({name}).all(dim=1)]), or impute them with "
            "sklearn.impute.SimpleImputer on a NumPy copy."
        )
    return X


# -- the kernel ---------------------------------------------------------------------------


def _rows_per_block(n_cols: int, itemsize: int, budget: int) -> int:
    return max(1, int(budget) // max(1, _TEMPORARIES * n_cols * itemsize))


def _itemsize(dtype: Any, xp: ModuleType) -> int:
    return 4 if dtype == xp.float32 else 8


@dataclass
class _Built:
    K: Any
    max_abs: float
    finite: bool
    frobenius: float


def build_kernel(ev: KernelEvaluator, X: Any, xp: ModuleType, *, budget: int | None = None) -> _Built:
    """The symmetric ``n×n`` kernel ``k(X, X)`` of the evaluator's reference rows ``X``, in row
    blocks within ``budget`` bytes, by the evaluator every namespace shares
    (:class:`kpca_lib.kernels.KernelEvaluator`).

    Block row ``[r0, r1)`` computes ``k(X[r0:r1], X[r0:])`` only (its square part made
    exactly symmetric), writes it to ``K[r0:r1, r0:]`` and its transpose to
    ``K[r0:, r0:r1]``. Also returns ``max|K|``, finiteness and ``‖K‖_F`` (host floats).
    """
    budget = BLOCK_BYTES if budget is None else budget
    side = ev.side(X)
    n, dtype = X.shape[0], X.dtype
    K = xp.empty((n, n), dtype=dtype, device=device(X))
    rows = _rows_per_block(n, _itemsize(dtype, xp), budget)
    big, finite, frob2 = 0.0, True, 0.0
    for r0 in range(0, n, rows):
        r1 = min(r0 + rows, n)
        square = ev.block(side, slice(r0, r1), slice(r0, r1), diagonal=True)
        K[r0:r1, r0:r1] = square
        parts = [(square, 1.0)]
        if r1 < n:
            rest = ev.block(side, slice(r0, r1), slice(r1, n))
            K[r0:r1, r1:] = rest
            K[r1:, r0:r1] = xp.matrix_transpose(rest)
            parts.append((rest, 2.0))
        for part, weight in parts:
            finite = finite and bool(xp.all(xp.isfinite(part)))
            big = max(big, float(xp.max(xp.abs(part))))
            frob2 += weight * float(xp.sum(part * part))
    return _Built(K, big, finite, math.sqrt(frob2) if math.isfinite(frob2) else math.inf)


def cross_kernel(ev: KernelEvaluator, A: Any) -> Any:
    """``k(A, B)`` (uncentred, as stored at fit) for a block of rows ``A``."""
    return ev.block(ev.side(A), slice(0, A.shape[0]), slice(0, ev.right.shape[0]))


def center_inplace(K: Any, xp: ModuleType) -> tuple[Any, Any]:
    """``K ← K − 1 r̄ᵀ − r̄ 1ᵀ + ḡ`` in place (``K`` symmetric); return ``r̄`` and ``ḡ`` (0-d)."""
    row_means = xp.mean(K, axis=1)
    grand_mean = xp.mean(row_means)
    K -= row_means[None, :]
    K -= row_means[:, None]
    K += grand_mean
    return row_means, grand_mean


# -- the kernel operator ------------------------------------------------------------------


@dataclass
class DenseOperator:
    """The centred kernel held dense on its device, as the shared solvers see it.

    ``matmat(V) = K_c @ V`` in ``V``'s dtype (the solvers work in the device's
    widest float; a float32 kernel is multiplied in float32), ``matrix`` for the
    dense solver, and the norm and precision of what is stored.
    """

    matrix: Any
    frobenius_norm: float
    dtype_eps: float

    def matmat(self, V: Any) -> Any:
        K = self.matrix
        if V.dtype == K.dtype:
            return K @ V
        xp = array_namespace(K)
        return xp.astype(K @ xp.astype(V, K.dtype), V.dtype)


def _work_like(K: Any, xp: ModuleType) -> Any:
    """An empty array of the dtype and device the solvers work in (float64 where available)."""
    dev = device(K)
    work = xp.float64 if _has_float64(xp, dev) else K.dtype
    return xp.zeros((1,), dtype=work, device=dev)


def solve_top(
    op: DenseOperator, k: int, xp: ModuleType, *, estimator: Any, tol: float | None,
    max_iter: int | None, smallest: bool,
) -> tuple[Any, Any, str, float | None]:
    """Verified top-``k`` pairs of the centred kernel by the shared solvers
    (:func:`kpca_lib._eigen.top_eigh_operator`), the solver used and, if ``smallest``, a
    bound of the smallest eigenvalue (:func:`kpca_lib._exact._smallest_eigenvalue`)."""
    n = op.matrix.shape[0]
    like = _work_like(op.matrix, xp)
    with record_solver_reports() as reports:
        theta, U = top_eigh_operator(
            op.matmat, n, k, estimator.eigen_solver, tol=tol,
            max_iter=max_iter, matrix_norm=op.frobenius_norm, dtype_eps=op.dtype_eps,
            iterated_power=estimator.iterated_power, random_state=estimator.random_state,
            like=like,
        )
    solver = reports[-1].used if reports and reports[-1].used else "randomized"
    low = _smallest_eigenvalue(op.matmat, n, like=like) if smallest and k < n else None
    return theta, U, solver, low


# -- the fitted model ---------------------------------------------------------------------


@dataclass
class DeviceResult(ExactResult):
    """An :class:`~kpca_lib._exact.ExactResult` whose arrays live in ``xp`` on ``device``.

    ``col_means`` are the training kernel's row (= column) means and
    ``grand_mean`` its grand mean (host float); ``evaluator`` evaluates the
    kernel against the training rows as at fit (shifted, normalised).
    """

    device: Any = None
    evaluator: KernelEvaluator | None = None

    @property
    def xp(self) -> ModuleType:
        """The namespace (from the arrays, so that a fitted model pickles)."""
        return array_namespace(self.eigenvalues)

    def projections(self) -> Any:
        """``K_c α_k = √λ_k β_k`` on the device."""
        xp = self.xp
        return (
            self.eigenvectors
            * xp.astype(xp.sqrt(self.eigenvalues), self.eigenvectors.dtype)[None, :]
        )


@dataclass(frozen=True)
class DevicePreimageMap:
    """The learned pre-image map on the device: ``predict(Z) = k(Z, X_transformed_fit_) @ dual_coef_``."""

    X_transformed_fit_: Any
    dual_coef_: Any
    spec: KernelSpec
    alpha: float

    @property
    def xp(self) -> ModuleType:
        return array_namespace(self.dual_coef_)

    def predict(self, Z: Any) -> Any:
        K = cross_kernel(KernelEvaluator(self.spec, self.X_transformed_fit_), Z)
        return K @ self.dual_coef_


def fit_preimage_device(
    Z: Any, X: Any, spec: KernelSpec, alpha: float, xp: ModuleType
) -> DevicePreimageMap:
    """Kernel ridge regression ``(K_Z + αI) C = X`` solved on the device (``xp.linalg.solve``)."""
    alpha = check_nonnegative(alpha, "alpha")  # 0 allowed, as scikit-learn
    K = build_kernel(KernelEvaluator(spec, Z), Z, xp).K
    K = K + alpha * xp.eye(K.shape[0], dtype=K.dtype, device=device(K))
    dual = xp.linalg.solve(K, X)
    if not bool(xp.all(xp.isfinite(dual))):
        raise ValueError(
            f"K_Z + alpha*I is singular or not positive definite (alpha={alpha!r}): the kernel "
            "is not positive semi-definite on the projections, or alpha is too small compared "
            "with the rounding of K_Z. Use a Mercer kernel or a larger alpha."
        )
    return DevicePreimageMap(Z, dual, spec, alpha)


def fit_device(estimator: Any, X: Any, xp: ModuleType, *, project: bool) -> Any:
    """Fit ``estimator`` (a :class:`~kpca_lib.kernel_pca.KernelPCA`) on the device array ``X``.

    Sets the same attributes as the CPU fit (arrays of ``xp`` on ``X``'s device)
    and returns the training projections when ``project`` (else ``None``).
    """
    from ._validation import capped_n_components

    X = _check_X(X, xp)
    n, d = int(X.shape[0]), int(X.shape[1])
    spec = estimator._check_params(n, d)
    check_device_params(estimator, spec)
    n_components = capped_n_components(estimator.n_components, n)
    k = n if n_components is None else n_components
    drop = estimator.n_components is None or bool(estimator.remove_zero_eig)
    tol, max_iter = estimator.tol or None, estimator.max_iter  # validated by _check_params
    dev, dtype = device(X), X.dtype
    dtype_eps = _eps(dtype, xp)
    if estimator.copy_X:
        X = xp.asarray(X, copy=True)
    ev = KernelEvaluator(spec, X, centred=True)
    built = build_kernel(ev, X, xp)
    check_kernel_values(
        spec, KernelStats(np.zeros(0), 0.0, built.frobenius, built.max_abs, built.finite)
    )
    K = built.K
    row_means, grand_mean = center_inplace(K, xp)
    op = DenseOperator(K, built.frobenius, dtype_eps)
    theta_dev, U, solver, smallest = solve_top(
        op, k, xp, estimator=estimator, tol=tol, max_iter=max_iter,
        smallest=spec.may_be_indefinite,
    )
    del K, op
    theta = to_host(theta_dev)
    np_dtype = np.dtype(np.float32) if dtype == xp.float32 else np.dtype(np.float64)
    solver_for_bound = "dense" if solver == "dense" else "randomized"
    rtol = None if tol is None else tol
    if dtype_eps > _EPS64:
        rtol = max(1e-6 if tol is None else tol, 10.0 * _EPS32)
    bound = _rounding_bound(n, theta, built.frobenius, np_dtype, solver_for_bound, rtol, smallest)
    if U.dtype != dtype:
        U = xp.astype(U, dtype)
    float32 = dtype_eps > _EPS64
    pairs = _Eigenpairs(
        theta, U, row_means, float(grand_mean), ev.shift, ev.expm1, solver, bound, smallest,
        built.frobenius if float32 else None, None, "device",
    )
    eigenvalues, U, alphas = finish(pairs, k, n, spec, drop, estimator.n_components)
    # The fitted attributes in the device's widest float, as the NumPy path keeps them in
    # float64 (scikit-learn's check_array_api_input compares their dtypes); the kernel, the
    # eigenvectors and the outputs stay in X's dtype.
    values = _from_host(eigenvalues, xp, dev, xp.float64 if _has_float64(xp, dev) else dtype)
    result = DeviceResult(
        eigenvalues=values,
        eigenvectors=U,
        alphas=alphas,
        col_means=row_means,
        grand_mean=float(grand_mean),
        X_fit=X,
        shift=ev.shift,
        expm1=ev.expm1,
        solver=solver,
        rounding_bound=bound,
        device=dev,
        evaluator=ev,
    )
    estimator._preimage = None
    estimator._set_fitted(result, spec, n, d)
    estimator._fit_dtype = np_dtype
    estimator.eigen_solver_ = result.solver
    Z = result.projections()
    if estimator.fit_inverse_transform:
        estimator._preimage = fit_preimage_device(Z, X, spec, float(estimator.alpha), xp)
    return Z if project else None


def same_place_message(estimator: Any, what: str, fitted: str, given: str, fix: str) -> str:
    """scikit-learn's wording (``sklearn.utils._array_api.check_same_namespace``, which its
    ``check_array_api_same_namespace`` looks for), then where each array is and the fix."""
    return (
        f"Inputs passed to {type(estimator).__name__}.{what}() must use the same namespace "
        f"and the same device as those passed to fit(). This KernelPCA was fitted on "
        f"{fitted}; {what} got {given}. {fix}"
    )


def _where(X: Any) -> str:
    device = getattr(X, "device", None)
    kind = f"{type(X).__module__}.{type(X).__name__}"
    return kind if device is None else f"{kind} on device {device}"


def _move_hint(xp: ModuleType, device: Any) -> str:
    """How to move an array to ``device`` of ``xp``, in that library's words."""
    name = xp.__name__
    if "torch" in name:
        return f'X = torch.as_tensor(X, device="{device}")'
    if "cupy" in name:
        return f"with cupy.cuda.Device({getattr(device, 'id', device)}): X = cupy.asarray(X)"
    return f"X = {name.rsplit('.', 1)[-1]}.asarray(X, device={device!r})"


def _check_same_place(estimator: Any, X: Any, what: str) -> tuple[ModuleType, Any]:
    """The fitted namespace; ``X`` must be of it and on the fitted device."""
    result = estimator._result
    if getattr(result, "xp", None) is None:
        raise ValueError(
            same_place_message(
                estimator,
                what,
                "NumPy data (the CPU path)",
                f"an Array API array, {_where(X)}",
                f"Either {_TO_NUMPY}, or refit on the device array.",
            )
        )
    xp = result.xp
    try:
        same = array_namespace(X).__name__ == xp.__name__ and str(device(X)) == str(result.device)
    except (TypeError, AttributeError):  # not an Array API array
        same = False
    if not same:
        raise ValueError(
            same_place_message(
                estimator,
                what,
                f"the Array API path ({xp.__name__}, device {result.device})",
                _where(X),
                f"Move X there ({_move_hint(xp, result.device)}), or refit on a NumPy array for the "
                "CPU path.",
            )
        )
    return xp, result.device


def _output_dtype(xp: ModuleType, fitted: Any, given: Any) -> Any:
    """float32 only when both the input and the training data are float32 (as the CPU path)."""
    return xp.float32 if (fitted == xp.float32 and given == xp.float32) else xp.float64


def transform_device(estimator: Any, X: Any) -> Any:
    """Project ``X`` on the device: ``centre(k(X, X_fit)) @ alphas`` in row blocks."""
    result = estimator._result
    xp, _ = _check_same_place(estimator, X, "transform")
    fitted = result.alphas.dtype
    given = X.dtype
    X = _check_X(X, xp, dtype=fitted)
    if X.shape[1] != estimator.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )
    ev, n_fit = result.evaluator, result.alphas.shape[0]
    rows = _rows_per_block(n_fit, _itemsize(fitted, xp), BLOCK_BYTES)
    parts = []
    for r0 in range(0, X.shape[0], rows):
        r1 = min(r0 + rows, X.shape[0])
        K = cross_kernel(ev, X[r0:r1, :])
        if not bool(xp.all(xp.isfinite(K))) or float(xp.max(xp.abs(K))) > 1e140:
            big = float(xp.max(xp.abs(K)))
            check_kernel_values(
                result_spec(estimator),
                KernelStats(np.zeros(0), 0.0, 0.0, big, math.isfinite(big)),
                where="transform",
            )
        K = K - result.col_means[None, :] - xp.mean(K, axis=1)[:, None] + result.grand_mean
        parts.append(K @ result.alphas)
    Z = parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)
    out = _output_dtype(xp, fitted, given)
    return Z if Z.dtype == out else xp.astype(Z, out)


def result_spec(estimator: Any) -> KernelSpec:
    return estimator._spec


def inverse_transform_device(estimator: Any, Z: Any) -> Any:
    """Pre-images of projections ``Z`` on the device (kernel ridge map learned at fit)."""
    if estimator._preimage is None:
        raise NotFittedError(
            "The fit_inverse_transform parameter was not set to True when instantiating and "
            "hence the inverse transform is not available."
        )
    xp, _ = _check_same_place(estimator, Z, "inverse_transform")
    fitted, given = estimator._result.alphas.dtype, Z.dtype
    Z = _check_X(Z, xp, "X", dtype=fitted)
    if Z.shape[1] != estimator.n_components_:
        raise ValueError(
            f"X must have one column per component: got {Z.shape[1]} columns, expected "
            f"n_components_ = {estimator.n_components_} (the output of transform)."
        )
    out = estimator._preimage.predict(Z)
    dtype = _output_dtype(xp, fitted, given)
    return out if out.dtype == dtype else xp.astype(out, dtype)


def kernel_matrix_c_device(estimator: Any) -> Any:
    """The centred training kernel, recomputed on the device."""
    result = estimator._result
    K = build_kernel(result.evaluator, result.X_fit, result.xp).K
    center_inplace(K, result.xp)
    return K
