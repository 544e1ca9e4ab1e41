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
3. **Top-k eigenpairs**: block subspace iteration with Rayleigh–Ritz
   (:func:`subspace_iteration`): ``Y = K_c Q``, ``H = QᵀY``, ``eigh(H)``, Ritz
   pairs and their residuals ``‖K_c u − θu‖`` after every product, until every
   one of the ``k`` wanted residuals is below ``max(tol·‖K_c‖, rounding level)``;
   block ``k + max(k//2, 10)``, deterministic start (``random_state``). Or
   ``xp.linalg.eigh`` of the whole matrix (``eigen_solver="dense"``, and
   ``"auto"`` when the block would cover half the matrix).
4. **Verified** as on the CPU (:func:`verify_on_device`, the checks of
   :func:`kpca_lib._verify.verify_eigenpairs`): count, order, finiteness,
   orthonormality, residuals from a fresh product, and a block Krylov search
   of the complement ``(I − UUᵀ)K_c(I − UUᵀ)`` for a missed eigenvalue. A result
   that does not verify raises :class:`kpca_lib._eigen.EigenpairsNotVerifiedError`.

The eigenvalues are classified on the host (``k`` numbers) by the CPU code
(:func:`kpca_lib._exact._classify`): rounding-level ones become 0, clearly
negative ones raise. Nothing here is imported on the NumPy path, and no array
library beyond NumPy is ever imported by this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
from sklearn import get_config
from sklearn.exceptions import NotFittedError
from sklearn.externals.array_api_compat import array_namespace
from sklearn.utils._array_api import _convert_to_numpy, _is_numpy_namespace, get_namespace

from ._blocked import KernelStats
from ._eigen import Attempt, EigenpairsNotVerifiedError
from ._exact import (
    ExactResult,
    _check_float32_accuracy,
    _classify,
    _rounding_bound,
    nothing_positive_message,
    warn_nothing_to_project,
)
from ._validation import check_nonnegative, check_random_state, detached
from ._verify import EXHAUSTED, ORTHONORMALITY_TOL, Verification, residual_bound
from .kernels import KERNELS, KernelSpec, check_kernel_values

__all__ = [
    "DEVICE_SOLVERS",
    "BLOCK_BYTES",
    "DeviceResult",
    "DevicePreimageMap",
    "device_namespace",
    "build_kernel",
    "subspace_iteration",
    "verify_on_device",
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

#: Default cap on matrix–vector products: this many passes over the block, at least _MIN_PRODUCTS.
_MAX_PASSES, _MIN_PRODUCTS = 200, 4000
#: Passes without halving the worst residual after which the iteration has stagnated.
_PATIENCE = 25


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


def _device(x: Any) -> Any:
    return x.device


def _to_host(x: Any, xp: ModuleType) -> np.ndarray:
    """A (small) device array as a float64 NumPy array on the host."""
    return np.asarray(_convert_to_numpy(x, xp), dtype=np.float64)


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
    return xp.float64 if _has_float64(xp, _device(X)) else xp.float32


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
            "only exact kernel PCA runs on the device",
            f"Use approximation=None, or {_TO_NUMPY}.",
        )
    if estimator.eigen_solver not in DEVICE_SOLVERS:
        raise _refuse(
            f"eigen_solver={estimator.eigen_solver!r}",
            "the device solvers are subspace iteration and xp.linalg.eigh",
            f"Use eigen_solver in {DEVICE_SOLVERS} (all but 'dense' run subspace iteration on "
            f"the device), or {_TO_NUMPY}.",
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


@dataclass
class _Prepared:
    """Reference rows prepared once (shifted / normalised), as the CPU evaluator does."""

    spec: KernelSpec
    right: Any  # shifted (rbf, linear), normalised (cosine) or plain rows of the reference set
    sq: Any  # squared row norms of ``right`` (rbf) or None
    shift: Any  # device vector or None
    expm1: bool


def _safe_normalise(A: Any, xp: ModuleType) -> Any:
    """Rows of ``A`` divided by their norm (scaled against overflow); zero rows stay 0."""
    scale = xp.max(xp.abs(A), axis=1)
    safe = xp.where(scale > 0, scale, xp.ones_like(scale))
    scaled = A / safe[:, None]
    norms = xp.sqrt(xp.sum(scaled * scaled, axis=1))
    norms = xp.where(norms > 0, norms, xp.ones_like(norms))
    return scaled / norms[:, None]


def _check_spread(sq: Any, xp: ModuleType) -> None:
    if not bool(xp.all(xp.isfinite(sq))):
        raise ValueError(
            "X has values too large for squared distances (largest |x − mean| squared "
            "overflows); scale X, e.g. with sklearn.preprocessing.StandardScaler (and sigma with it)."
        )


def prepare(
    spec: KernelSpec,
    B: Any,
    xp: ModuleType,
    *,
    centred: bool,
    shift: Any = None,
    expm1: bool | None = None,
) -> _Prepared:
    """Prepare the reference rows ``B`` for :func:`kernel_block` (the CPU evaluator's rules).

    ``centred``: the caller centres the kernel, so the linear kernel may use
    shifted data and the RBF kernel may be stored as ``K − 1``.
    """
    name = spec.name
    use_shift = name == "rbf" or (name == "linear" and centred)
    if use_shift and shift is None:
        shift = xp.mean(B, axis=0)
    if not use_shift:
        shift = None
    Bs = B - shift if shift is not None else B
    sq = None
    stored_expm1 = False
    if name == "rbf":
        sq = xp.sum(Bs * Bs, axis=1)
        _check_spread(sq, xp)
        if expm1 is None:
            expm1 = centred and spec.gamma * 4.0 * float(xp.max(sq)) <= 2.0
        stored_expm1 = bool(expm1 and centred)
    elif name == "cosine":
        Bs = _safe_normalise(Bs, xp)
    return _Prepared(spec, Bs, sq, shift, stored_expm1)


def _side(prep: _Prepared, A: Any, xp: ModuleType) -> tuple[Any, Any]:
    """Rows ``A`` prepared like the reference rows: (rows, squared norms or None)."""
    As = A - prep.shift if prep.shift is not None else A
    if prep.spec.name == "rbf":
        sq = xp.sum(As * As, axis=1)
        _check_spread(sq, xp)
        return As, sq
    if prep.spec.name == "cosine":
        return _safe_normalise(As, xp), None
    return As, None


def kernel_block(
    prep: _Prepared,
    left: Any,
    left_sq: Any,
    start: int,
    stop: int,
    xp: ModuleType,
    *,
    diagonal_at: int | None = None,
) -> Any:
    """``k(left, B[start:stop])``; ``diagonal_at=j``: ``left`` is ``B[j:j+m]`` (made symmetric there)."""
    spec = prep.spec
    right = prep.right[start:stop, :]
    P = left @ xp.matrix_transpose(right)
    if spec.name == "rbf":
        P = left_sq[:, None] + prep.sq[None, start:stop] - 2.0 * P
        P = xp.maximum(P, xp.zeros_like(P))  # rounding can make ‖x − y‖² slightly negative
    elif spec.name in ("poly", "sigmoid"):
        P = spec.gamma * P + spec.coef0
    if diagonal_at is not None:
        P = _symmetric_diagonal(P, diagonal_at, xp, zero=spec.name == "rbf")
    if spec.name == "rbf":
        P = -spec.gamma * P
        return xp.expm1(P) if prep.expm1 else xp.exp(P)
    if spec.name == "poly":
        return P**spec.degree if spec.degree != 1 else P
    if spec.name == "sigmoid":
        return xp.tanh(P)
    return P


def _symmetric_diagonal(P: Any, j: int, xp: ModuleType, *, zero: bool) -> Any:
    """Make the square sub-block ``P[:, j:j+m]`` exactly symmetric (and its diagonal 0 if ``zero``)."""
    m = P.shape[0]
    D = P[:, j : j + m]
    D = 0.5 * (D + xp.matrix_transpose(D))
    if zero:
        i = xp.arange(m, device=_device(P))
        D = xp.where(i[:, None] == i[None, :], xp.zeros_like(D), D)
    return xp.concat([P[:, :j], D, P[:, j + m :]], axis=1)


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


def build_kernel(prep: _Prepared, xp: ModuleType, *, budget: int | None = None) -> _Built:
    """The symmetric ``n×n`` kernel of the reference rows, in row blocks within ``budget`` bytes.

    Block row ``[r0, r1)`` computes ``k(B[r0:r1], B[r0:])`` only (a temporary of at most
    ``budget`` bytes), writes it to ``K[r0:r1, r0:]`` and its transpose to
    ``K[r0:, r0:r1]``. Also returns ``max|K|``, finiteness and ``‖K‖_F`` (host floats).
    """
    budget = BLOCK_BYTES if budget is None else budget
    B = prep.right
    n, dtype, dev = B.shape[0], B.dtype, _device(B)
    left_all, sq_all = prep.right, prep.sq
    K = xp.empty((n, n), dtype=dtype, device=dev)
    rows = _rows_per_block(n, _itemsize(dtype, xp), budget)
    big, finite, frob2 = 0.0, True, 0.0
    for r0 in range(0, n, rows):
        r1 = min(r0 + rows, n)
        left = left_all[r0:r1, :]
        sq = None if sq_all is None else sq_all[r0:r1]
        block = kernel_block(prep, left, sq, r0, n, xp, diagonal_at=0)
        K[r0:r1, r0:] = block
        if r1 < n:
            K[r1:, r0:r1] = xp.matrix_transpose(block[:, r1 - r0 :])
        absb = xp.abs(block)
        finite = finite and bool(xp.all(xp.isfinite(block)))
        big = max(big, float(xp.max(absb)))
        m = r1 - r0
        sq_diag = float(xp.sum(block[:, :m] * block[:, :m]))
        sq_off = float(xp.sum(block[:, m:] * block[:, m:])) if r1 < n else 0.0
        frob2 += sq_diag + 2.0 * sq_off
    return _Built(K, big, finite, math.sqrt(frob2) if math.isfinite(frob2) else math.inf)


def cross_kernel(prep: _Prepared, A: Any, xp: ModuleType, r0: int, r1: int) -> Any:
    """``k(A[r0:r1], B)`` (uncentred, as stored at fit)."""
    left, sq = _side(prep, A[r0:r1, :], xp)
    return kernel_block(prep, left, sq, 0, prep.right.shape[0], xp)


def center_inplace(K: Any, xp: ModuleType) -> tuple[Any, Any]:
    """``K ← K − 1 r̄ᵀ − r̄ 1ᵀ + ḡ`` in place (``K`` symmetric); return ``r̄`` and ``ḡ`` (0-d)."""
    row_means = xp.mean(K, axis=1)
    grand_mean = xp.mean(row_means)
    K -= row_means[None, :]
    K -= row_means[:, None]
    K += grand_mean
    return row_means, grand_mean


# -- the eigensolver ----------------------------------------------------------------------


def _start_block(n: int, b: int, seed: int, xp: ModuleType, device: Any, dtype: Any) -> Any:
    """A deterministic Gaussian block (drawn on the host, ``n×b`` numbers, moved once)."""
    G = np.random.default_rng(seed).standard_normal((n, b))
    return _from_host(G, xp, device, dtype)


def _norms(R: Any, xp: ModuleType) -> Any:
    return xp.sqrt(xp.sum(R * R, axis=0))


@dataclass
class _Iteration:
    theta: Any  # (k,) descending
    U: Any  # (n, k)
    converged: bool
    why: str
    products: int
    scale: float


def _descending(theta: Any, S: Any, xp: ModuleType, k: int) -> tuple[Any, Any]:
    """The last ``k`` (largest) of ascending eigenpairs, in descending order."""
    m = theta.shape[0]
    return xp.flip(theta[m - k :], axis=0), xp.flip(S[:, m - k :], axis=1)


def subspace_iteration(
    matmat: Any,
    n: int,
    k: int,
    b: int,
    xp: ModuleType,
    *,
    device: Any,
    dtype: Any,
    tol: float,
    max_products: int,
    dtype_eps: float,
    matrix_norm: float,
    seed: int = 0,
    start: Any = None,
) -> _Iteration:
    """Top-``k`` eigenpairs of a symmetric operator by block subspace iteration with Rayleigh–Ritz.

    Each pass: ``Y = A Q`` (one product with ``b`` columns), ``H = QᵀY``,
    ``θ, S = eigh(H)``, Ritz vectors ``U = QS`` with images ``AU = YS`` (by
    linearity), residuals ``‖AU − Uθ‖`` of the ``k`` largest; stop when each is
    ``≤ residual_bound(‖A‖, tol)`` (:func:`kpca_lib._verify.residual_bound`),
    else ``Q = qr(AU + sU)`` with ``s = max(0, −θ_min)`` (a shift that keeps the
    largest *algebraic* eigenvalues dominant for an indefinite kernel).
    """
    Q = _start_block(n, b, seed, xp, device, dtype)
    if start is not None and start.shape[1]:
        s = min(start.shape[1], b)
        Q = xp.concat([start[:, :s], Q[:, s:]], axis=1)
    Q, _ = xp.linalg.qr(Q)
    products, scale = 0, float(np.finfo(np.float64).tiny)
    best, since_best = math.inf, 0
    while True:
        Y = matmat(Q)
        products += b
        H = xp.matrix_transpose(Q) @ Y
        H = 0.5 * (H + xp.matrix_transpose(H))
        theta_all, S = xp.linalg.eigh(H)
        theta_host = _to_host(theta_all, xp)
        scale = max(scale, float(np.max(np.abs(theta_host))))
        theta, Sk = _descending(theta_all, S, xp, k)
        U = Q @ Sk
        AU = Y @ Sk
        residuals = _to_host(_norms(AU - U * theta[None, :], xp), xp)
        bound = residual_bound(scale, tol, n, dtype_eps=dtype_eps, matrix_norm=matrix_norm)
        worst = float(np.max(residuals))
        if worst <= bound:
            return _Iteration(theta, U, True, "", products, scale)
        if worst < 0.5 * best:
            best, since_best = worst, 0
        else:
            since_best += 1
        if products >= max_products or since_best > _PATIENCE:
            why = "stagnated after" if since_best > _PATIENCE else "did not converge in"
            return _Iteration(theta, U, False, why, products, scale)
        shift = max(0.0, -float(theta_host[0]))
        Q, _ = xp.linalg.qr(Y @ S + shift * (Q @ S) if shift else Y)


def _project_out(Z: Any, U: Any, xp: ModuleType) -> Any:
    for _ in range(2):
        Z = Z - U @ (xp.matrix_transpose(U) @ Z)
    return Z


def verify_on_device(
    matmat: Any,
    n: int,
    k: int,
    theta: Any,
    U: Any,
    xp: ModuleType,
    *,
    tol: float,
    norm_estimate: float | None,
    matrix_norm: float | None,
    dtype_eps: float,
    orthonormality_tol: float = ORTHONORMALITY_TOL,
    check_block: int = 4,
    min_passes: int = 3,
    max_passes: int = 6,
    seed: int = 12345,
) -> Verification:
    """The checks of :func:`kpca_lib._verify.verify_eigenpairs`, in ``xp`` on ``U``'s device.

    Count and shapes, finiteness, descending order, ``max|UᵀU − I|``, residuals
    ``‖A u − θ u‖`` from a fresh product (shared with the first step of the
    deflation check), and a block Krylov search (Rayleigh–Ritz) of
    ``(I − UUᵀ) A (I − UUᵀ)`` from a random block orthogonal to ``U``: a Ritz
    value above ``θ_k`` beyond the slack is a missed eigenvalue.
    """
    report = Verification(ok=False)
    if tuple(theta.shape) != (k,) or tuple(U.shape) != (n, k):
        report.failures.append(
            f"wrong number of eigenpairs: {tuple(theta.shape)} eigenvalues and eigenvectors of "
            f"shape {tuple(U.shape)} for k = {k}, n = {n}"
        )
        return report
    th = _to_host(theta, xp)
    if not (np.all(np.isfinite(th)) and bool(xp.all(xp.isfinite(U)))):
        report.failures.append("non-finite eigenvalues or eigenvectors (NaN or inf)")
        return report
    if k > 1 and np.any(np.diff(th) > 0):
        report.failures.append("eigenvalues are not in descending order")
    dev, dtype = _device(U), U.dtype
    eye = xp.eye(k, dtype=dtype, device=dev)
    report.orthonormality = float(xp.max(xp.abs(xp.matrix_transpose(U) @ U - eye)))
    if report.orthonormality > orthonormality_tol:
        report.failures.append(
            f"eigenvectors are not orthonormal: max|UᵀU − I| = {report.orthonormality:.2g} "
            f"> {orthonormality_tol:.0e}"
        )
    p = min(check_block, n - k)
    if p > 0:
        Z = _project_out(_start_block(n, p, seed, xp, dev, dtype), U, xp)
        Z, _ = xp.linalg.qr(Z)
        Y = matmat(xp.concat([U, Z], axis=1))
        AU, AZ = Y[:, :k], Y[:, k:]
    else:
        AU, AZ = matmat(U), None
    report.n_products += k + max(p, 0)
    residuals = _to_host(_norms(AU - U * theta[None, :], xp), xp)
    report.max_residual = float(np.max(residuals))
    norm = max(float(np.max(np.abs(th))), 0.0 if norm_estimate is None else float(norm_estimate))
    if p > 0:
        Q, AQ = Z, _project_out(AZ, U, xp)
        passes, width = 1, p
        while True:
            H = xp.matrix_transpose(Q) @ AQ
            H = 0.5 * (H + xp.matrix_transpose(H))
            mu_all, S = xp.linalg.eigh(H)
            mu = _to_host(mu_all, xp)
            norm = max(norm, float(np.max(np.abs(mu))))
            slack = 2.0 * residual_bound(norm, tol, n, dtype_eps=dtype_eps, matrix_norm=matrix_norm)
            top = S[:, -1:]
            rho = float(xp.sum((AQ @ top - (Q @ top) * mu_all[-1]) ** 2)) ** 0.5
            report.deflated_top = float(mu[-1])
            if report.deflated_top > th[-1] + slack:
                above = int(np.sum(mu > th[-1] + slack))
                report.missed = Q @ S[:, S.shape[1] - above :]
                break
            resolved = report.deflated_top + rho <= th[-1] + slack
            if passes >= max_passes or (passes >= min_passes and resolved) or Q.shape[1] >= n - k:
                break
            W = _project_out(_project_out(AQ[:, AQ.shape[1] - width :], U, xp), Q, xp)
            W, R = xp.linalg.qr(W)
            # Only new directions that are zero to float64 precision end the check early
            # (as on the CPU, kpca_lib._verify.EXHAUSTED): a missed eigenvalue far below ‖A‖
            # but above θ_k shows in a random block only with a weight of about 1/√n.
            if float(xp.max(xp.abs(xp.linalg.diagonal(R)))) <= EXHAUSTED * max(norm, 1e-300):
                break  # the Krylov space of the complement is exhausted
            W, _ = xp.linalg.qr(_project_out(_project_out(W, U, xp), Q, xp))
            AW = matmat(W)
            report.n_products += W.shape[1]
            passes, width = passes + 1, W.shape[1]
            Q = xp.concat([Q, W], axis=1)
            AQ = xp.concat([AQ, _project_out(AW, U, xp)], axis=1)
    bound = residual_bound(norm, tol, n, dtype_eps=dtype_eps, matrix_norm=matrix_norm)
    report.residual_bound = bound
    if report.max_residual > bound:
        worst = int(np.argmax(residuals))
        report.failures.append(
            f"residual too large: ‖A u − θ u‖ = {report.max_residual:.3g} for eigenvalue "
            f"{worst + 1} (θ = {th[worst]:.6g}) > {bound:.3g} = max(tol·‖A‖, rounding level) "
            f"with tol = {tol:.2g}, ‖A‖ ≈ {norm:.4g}"
        )
    if report.missed is not None:
        report.failures.append(
            f"missed eigenvalue(s): the complement of the {k} returned eigenvectors still holds "
            f"{report.missed.shape[1]} direction(s) with Rayleigh quotient up to "
            f"{report.deflated_top:.6g} > θ_k = {th[-1]:.6g} (a repeated or clustered "
            "eigenvalue the solver did not resolve)"
        )
    report.ok = not report.failures
    return report


def _flip_signs(V: Any, xp: ModuleType) -> Any:
    """Largest-magnitude entry of every column positive (:func:`kpca_lib._eigen.flip_signs`)."""
    idx = xp.argmax(xp.abs(V), axis=0)
    picked = xp.linalg.diagonal(xp.take(V, idx, axis=0))
    signs = xp.where(picked < 0, -xp.ones_like(picked), xp.ones_like(picked))
    return V * signs[None, :]


@dataclass
class _Solve:
    theta: Any
    U: Any
    solver: str
    attempts: list[Attempt] = field(default_factory=list)
    smallest: float | None = None  # of the whole K_c, when asked for (indefinite kernels)


def smallest_eigenvalue_bound(
    matmat: Any,
    n: int,
    xp: ModuleType,
    *,
    device: Any,
    dtype: Any,
    dtype_eps: float,
    matrix_norm: float,
) -> float:
    """An upper bound of the smallest eigenvalue of a symmetric operator (to report a non-PSD kernel).

    Informative, as the CPU path's loose ARPACK run: minus the largest Ritz value of
    ``−A`` after a short block subspace iteration (8 columns, residuals to ``1e-3``). A
    Rayleigh quotient of ``−A`` never exceeds ``−λ_min``, so the value returned is at
    least ``λ_min`` whether or not the iteration converged: a negative one proves a
    negative eigenvalue, and the CPU path's warning then names it.
    """
    b = min(n, 8)
    it = subspace_iteration(
        lambda V: -matmat(V),
        n,
        1,
        b,
        xp,
        device=device,
        dtype=dtype,
        tol=1e-3,
        max_products=40 * b,
        dtype_eps=dtype_eps,
        matrix_norm=matrix_norm,
        seed=2024,
    )
    return -float(_to_host(it.theta, xp)[0])


def _block_size(k: int, n: int) -> int:
    return min(n, k + max(k // 2, 10))


def solve_top(
    K_c: Any,
    k: int,
    xp: ModuleType,
    *,
    requested: str,
    tol: float | None,
    max_iter: int | None,
    seed: int,
    dtype_eps: float,
    matrix_norm: float,
    smallest: bool = False,
) -> _Solve:
    """Verified top-``k`` eigenpairs of the centred kernel on its device, or raise.

    ``smallest=True`` also bounds the smallest eigenvalue of the whole ``K_c`` (exact
    from the dense solver, :func:`smallest_eigenvalue_bound` otherwise), for the warning
    of an indefinite kernel.
    """
    n, dev = K_c.shape[0], _device(K_c)
    work = xp.float64 if _has_float64(xp, dev) else K_c.dtype
    work_eps = _eps(work, xp)
    orth_tol = ORTHONORMALITY_TOL if work == xp.float64 else max(1e-5, 10 * math.sqrt(n) * work_eps)
    if dtype_eps > _EPS64:  # a float32 kernel: ask no more than it holds (the CPU rule)
        rtol = max(1e-6 if tol is None else tol, 10.0 * _EPS32)
    else:
        rtol = 1e-10 if tol is None else tol

    def matmat(V: Any) -> Any:
        if V.dtype == K_c.dtype:
            return K_c @ V
        return xp.astype(K_c @ xp.astype(V, K_c.dtype), V.dtype)

    b = _block_size(k, n)
    dense = requested == "dense" or k >= n or 2 * b >= n
    result = _Solve(None, None, "dense" if dense else "subspace")
    max_products = max(_MAX_PASSES * b, _MIN_PRODUCTS) if max_iter is None else int(max_iter)
    if not dense:
        start = None
        for attempt in range(2):
            it = subspace_iteration(
                matmat,
                n,
                k,
                b,
                xp,
                device=dev,
                dtype=work,
                tol=rtol,
                max_products=max_products,
                dtype_eps=dtype_eps,
                matrix_norm=matrix_norm,
                seed=seed + attempt,
                start=start,
            )
            U = _flip_signs(it.U, xp)
            check = verify_on_device(
                matmat,
                n,
                k,
                it.theta,
                U,
                xp,
                tol=rtol,
                norm_estimate=it.scale,
                matrix_norm=matrix_norm,
                dtype_eps=dtype_eps,
                orthonormality_tol=orth_tol,
                seed=12345 + attempt,
            )
            detail = f"block size {b}"
            if not it.converged:
                detail += f", {it.why} {it.products} products"
            result.attempts.append(Attempt("subspace", detail, 0.0, it.products, check))
            if check.ok:
                result.theta, result.U = it.theta, U
                if smallest and k < n:
                    result.smallest = smallest_eigenvalue_bound(
                        matmat,
                        n,
                        xp,
                        device=dev,
                        dtype=work,
                        dtype_eps=dtype_eps,
                        matrix_norm=matrix_norm,
                    )
                return result
            if check.missed is None and not (it.converged or it.why == "stagnated after"):
                break  # out of products: a larger block would not help within max_iter
            start = check.missed
            b = min(n, max(2 * b, b + (0 if start is None else start.shape[1])))
        if requested != "auto":
            _raise_device(result, xp, dev, requested, n, k, tol, max_iter, dtype_eps)
        result.solver = "dense"  # "auto" promised a verified result: the whole matrix
    A = K_c if K_c.dtype == work else xp.astype(K_c, work)
    w, V = xp.linalg.eigh(A)
    theta, U = _descending(w, V, xp, k)
    U = _flip_signs(U, xp)
    check = verify_on_device(
        A.__matmul__,
        n,
        k,
        theta,
        U,
        xp,
        tol=max(rtol, 100.0 * n * _eps(work, xp)),
        norm_estimate=None,
        matrix_norm=matrix_norm,
        dtype_eps=dtype_eps,
        orthonormality_tol=orth_tol,
    )
    result.attempts.append(Attempt("dense", "xp.linalg.eigh", 0.0, 0, check))
    if not check.ok:
        _raise_device(result, xp, dev, requested, n, k, tol, max_iter, dtype_eps)
    result.theta, result.U = theta, U
    if smallest and k < n:
        result.smallest = float(_to_host(w[:1], xp)[0])
    return result


def _raise_device(
    result: _Solve,
    xp: ModuleType,
    dev: Any,
    requested: str,
    n: int,
    k: int,
    tol: float | None,
    max_iter: int | None,
    dtype_eps: float,
) -> None:
    tried = "\n".join(f"  - {a.describe()}" for a in result.attempts)
    fixes = []
    if requested != "dense":
        fixes.append("eigen_solver='dense' (xp.linalg.eigh on the device; a second n×n matrix)")
        fixes.append(f"a larger tol (now {tol!r}) or max_iter (now {max_iter!r})")
    if dtype_eps > _EPS64:
        fixes.append("X in float64 (the kernel matrix is stored in X's dtype, here float32)")
    fixes.append(f"{_TO_NUMPY} (the CPU solvers)")
    raise EigenpairsNotVerifiedError(
        f"eigen_solver={requested!r} on the Array API path ({xp.__name__}, device {dev}): the "
        f"{k} largest eigenpairs of the {n}×{n} centred kernel matrix could not be computed and "
        f"verified. Attempts:\n{tried}\nFix: {'; or '.join(fixes)}."
    )


# -- the fitted model ---------------------------------------------------------------------


@dataclass
class DeviceResult(ExactResult):
    """An :class:`~kpca_lib._exact.ExactResult` whose arrays live in ``xp`` on ``device``.

    ``col_means`` are the training kernel's row (= column) means and
    ``grand_mean`` its grand mean (host float); ``prepared`` holds the
    training rows as the kernel uses them (shifted, normalised).
    """

    device: Any = None
    prepared: _Prepared | None = None

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
        prep = prepare(self.spec, self.X_transformed_fit_, self.xp, centred=False)
        K = cross_kernel(prep, Z, self.xp, 0, Z.shape[0])
        return K @ self.dual_coef_


def fit_preimage_device(
    Z: Any, X: Any, spec: KernelSpec, alpha: float, xp: ModuleType
) -> DevicePreimageMap:
    """Kernel ridge regression ``(K_Z + αI) C = X`` solved on the device (``xp.linalg.solve``)."""
    alpha = check_nonnegative(alpha, "alpha")  # 0 allowed, as scikit-learn
    prep = prepare(spec, Z, xp, centred=False)
    K = build_kernel(prep, xp).K
    K = K + alpha * xp.eye(K.shape[0], dtype=K.dtype, device=_device(K))
    dual = xp.linalg.solve(K, X)
    if not bool(xp.all(xp.isfinite(dual))):
        raise ValueError(
            f"K_Z + alpha*I is singular or not positive definite (alpha={alpha!r}): the kernel "
            "is not positive semi-definite on the projections, or alpha is too small compared "
            "with the rounding of K_Z. Use a Mercer kernel or a larger alpha."
        )
    return DevicePreimageMap(Z, dual, spec, alpha)


@dataclass
class _HostPairs:
    """What :func:`kpca_lib._exact._classify` reads (host values)."""

    eigenvalues: np.ndarray
    rounding_bound: float
    smallest: float | None = None


def _seed(random_state: object) -> int:
    random_state = check_random_state(random_state)
    if random_state is None:
        return 0
    if isinstance(random_state, (int, np.integer)):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    return int(random_state.integers(0, 2**31 - 1))


def fit_device(estimator: Any, X: Any, xp: ModuleType, *, project: bool) -> Any:
    """Fit ``estimator`` (a :class:`~kpca_lib.kernel_pca.KernelPCA`) on the device array ``X``.

    Sets the same attributes as the CPU fit (arrays of ``xp`` on ``X``'s device)
    and returns the training projections when ``project`` (else ``None``).
    """
    from ._validation import capped_n_components, check_max_iter, check_tol

    X = _check_X(X, xp)
    n, d = int(X.shape[0]), int(X.shape[1])
    spec = estimator._check_params(n, d)
    check_device_params(estimator, spec)
    n_components = capped_n_components(estimator.n_components, n)
    k = n if n_components is None else n_components
    drop = estimator.n_components is None or bool(estimator.remove_zero_eig)
    tol, max_iter = check_tol(estimator.tol), check_max_iter(estimator.max_iter)
    dev, dtype = _device(X), X.dtype
    dtype_eps = _eps(dtype, xp)
    if estimator.copy_X:
        X = xp.asarray(X, copy=True)
    prep = prepare(spec, X, xp, centred=True)
    built = build_kernel(prep, xp)
    check_kernel_values(
        spec, KernelStats(np.zeros(0), 0.0, built.frobenius, built.max_abs, built.finite)
    )
    K = built.K
    row_means, grand_mean = center_inplace(K, xp)
    solved = solve_top(
        K,
        k,
        xp,
        requested=estimator.eigen_solver,
        tol=tol,
        max_iter=max_iter,
        seed=_seed(estimator.random_state),
        dtype_eps=dtype_eps,
        matrix_norm=built.frobenius,
        smallest=spec.may_be_indefinite,
    )
    del K
    theta = _to_host(solved.theta, xp)
    np_dtype = np.dtype(np.float32) if dtype == xp.float32 else np.dtype(np.float64)
    solver_for_bound = "dense" if solved.solver == "dense" else "randomized"
    rtol = None if tol is None else tol
    if dtype_eps > _EPS64:
        rtol = max(1e-6 if tol is None else tol, 10.0 * _EPS32)
    bound = _rounding_bound(
        n, theta, built.frobenius, np_dtype, solver_for_bound, rtol, solved.smallest
    )
    eigenvalues = _classify(_HostPairs(theta, bound, solved.smallest), k, n, spec)
    if dtype_eps > _EPS64:
        fate = (
            "dropped (remove_zero_eig=True)" if drop else "returned as 0 (their projections are 0)"
        )
        # n_components=None asks for the non-zero components only: zeros are not a loss.
        _check_float32_accuracy(
            eigenvalues,
            built.frobenius,
            None,
            k,
            fate,
            "device",
            count_zeros=estimator.n_components is not None,
        )
    if not np.any(eigenvalues > 0):
        precision = "float32 rounding" if dtype_eps > _EPS64 else "float64 rounding"
        message = nothing_positive_message(n, float(theta.max()), bound, spec, precision)
        warn_nothing_to_project(message, drop, estimator.n_components)
    U = solved.U
    if U.dtype != dtype:
        U = xp.astype(U, dtype)
    if drop:
        keep = np.flatnonzero(eigenvalues > 0)
        eigenvalues = eigenvalues[keep]
        U = xp.take(U, _from_host(keep, xp, dev, xp.int64), axis=1)
    inv_sqrt = np.zeros_like(eigenvalues)
    nz = eigenvalues > 0
    inv_sqrt[nz] = 1.0 / np.sqrt(eigenvalues[nz])
    # The fitted attributes in the device's widest float, as the NumPy path keeps them in
    # float64 (scikit-learn's check_array_api_input compares their dtypes); the kernel, the
    # eigenvectors and the outputs stay in X's dtype.
    values = _from_host(eigenvalues, xp, dev, xp.float64 if _has_float64(xp, dev) else dtype)
    result = DeviceResult(
        eigenvalues=values,
        eigenvectors=U,
        alphas=U * _from_host(inv_sqrt, xp, dev, dtype)[None, :],
        col_means=row_means,
        grand_mean=float(grand_mean),
        X_fit=X,
        shift=prep.shift,
        expm1=prep.expm1,
        solver=solved.solver,
        rounding_bound=bound,
        device=dev,
        prepared=prep,
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
        same = array_namespace(X).__name__ == xp.__name__ and str(_device(X)) == str(result.device)
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
    prep, n_fit = result.prepared, result.alphas.shape[0]
    rows = _rows_per_block(n_fit, _itemsize(fitted, xp), BLOCK_BYTES)
    parts = []
    for r0 in range(0, X.shape[0], rows):
        r1 = min(r0 + rows, X.shape[0])
        K = cross_kernel(prep, X, xp, r0, r1)
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
    K = build_kernel(result.prepared, result.xp).K
    center_inplace(K, result.xp)
    return K
