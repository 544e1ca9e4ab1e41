"""Exact kernel PCA: kernel matrix → verified top eigenpairs → ``alphas`` (and projections).

The fitting half of :class:`kpca_lib.kernel_pca.KernelPCA` with
``approximation=None``, as two pure functions:

* :func:`fit_exact` builds the kernel matrix of the training data (half-stored
  panels for the iterative solvers, a full matrix for ``"dense"``, callables,
  precomputed kernels and sparse data), centres it (implicitly for the panels),
  computes the top eigenpairs and classifies the eigenvalues (rounding-level
  values become 0; clearly negative ones mean a non-Mercer kernel). A
  precomputed or callable kernel whose entries are far from 1 (e.g. near
  ``1e±150``, where the solvers' squares would over- or underflow) is scaled
  by a power of two inside (exactly), and the eigenvalues scaled back;
* :func:`transform_exact` projects new points with the *same* kernel code
  (:class:`kpca_lib.kernels.KernelEvaluator` with the training shift), in
  row blocks and threads.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
from numpy.typing import NDArray

from ._blocked import KernelStats, build_kernel_dense, build_kernel_panels, symmetrize_inplace
from ._eigen import choose_solver, record_solver_reports, top_eigh, top_eigh_operator
from ._threads import (
    one_blas_thread_for_solver,
    parallel_for,
    resolve_threads,
    with_caller_blas_threads,
)
from ._xp import from_host, namespace, take_columns, to_host
from .centering import center_kernel, center_test_kernel_from_means
from .kernels import (
    KernelEvaluator,
    KernelSpec,
    _stats_of,
    check_kernel_values,
    evaluator_blocks,
    kernel_matrix,
    sparse_kernel,
)

__all__ = ["ExactResult", "fit_exact", "transform_exact", "NonPSDKernelWarning"]

#: Test-kernel entries computed at once per thread in ``transform`` (16 MB of float64).
_TRANSFORM_BLOCK = 1 << 21
_EPS64 = float(np.finfo(np.float64).eps)
#: A precomputed or callable kernel with max|K_ij| outside this range is scaled inside.
_SCALE_ABOVE, _SCALE_BELOW = 1e100, 1e-100
#: Dense data with max|x − mean| outside this range is scaled inside for the linear kernel.
_LINEAR_ABOVE, _LINEAR_BELOW = 1e50, 1e-50


class NonPSDKernelWarning(UserWarning):
    """The centred kernel matrix has negative eigenvalues beyond rounding (not a Mercer kernel)."""


@dataclass
class ExactResult:
    """A fitted exact kernel PCA (see :func:`fit_exact`).

    Attributes
    ----------
    eigenvalues : ndarray of shape (k,)
        Eigenvalues of the centred kernel matrix, descending; rounding-level
        ones are exactly 0.
    eigenvectors : ndarray of shape (n, k)
        Unit eigenvectors ``β_k``.
    alphas : ndarray of shape (n, k)
        ``β_k / √λ_k`` (zero columns for zero eigenvalues).
    col_means : ndarray of shape (n,)
        Column means of the training kernel as evaluated (see ``shift``).
    grand_mean : float
    X_fit : ndarray or scipy.sparse.csr_matrix
        Training data (the Gram matrix for ``kernel="precomputed"``).
    shift : ndarray or None
        The vector the evaluator subtracted from every point at fit.
    expm1 : bool
        The RBF kernel was stored as ``K − 1``.
    solver : str
        The eigen solver used.
    rounding_bound : float
        Eigenvalues within ``±rounding_bound`` are rounding noise (set to 0).
    input_exponent : int
        Linear kernel of dense data far from unit scale (:func:`_linear_exponent`): the
        fit ran on ``X·2^-input_exponent`` (exact), and ``transform`` does the same;
        every field above is in the caller's units.
    """

    eigenvalues: NDArray[np.float64]
    eigenvectors: NDArray[np.float64]
    alphas: NDArray[np.float64]
    col_means: NDArray[np.float64]
    grand_mean: float
    X_fit: NDArray[np.float64]
    shift: NDArray[np.float64] | None
    expm1: bool
    solver: str
    rounding_bound: float
    input_exponent: int = 0

    def projections(self) -> NDArray[np.float64]:
        """The training points' projections ``K_c α_k = √λ_k β_k``."""
        return self.eigenvectors * np.sqrt(self.eigenvalues)[None, :]


@dataclass
class _Eigenpairs:
    eigenvalues: NDArray[np.float64]
    eigenvectors: NDArray[np.float64]
    col_means: NDArray[np.float64]
    grand_mean: float
    shift: NDArray[np.float64] | None
    expm1: bool
    solver: str
    rounding_bound: float
    smallest: float | None  # smallest eigenvalue of the whole K_c, when checked
    float32_frobenius: float | None = None  # ‖K‖_F of a float32-stored kernel
    rounding_bound64: float | None = None  # the bound had the kernel been stored in float64
    float32_cause: str = "kernel_dtype"  # or "precomputed": the caller's kernel is float32


def _checker(spec: KernelSpec):
    def check(stats: KernelStats, dtype: np.dtype) -> None:
        check_kernel_values(spec, stats, dtype)

    return check


def _solver_tolerance(solver: str, tol: float | None, dtype: np.dtype) -> float | None:
    if dtype == np.float32 and solver in ("lanczos", "randomized"):
        # The stored kernel is only float32-accurate: ask no more of the solver.
        return max(1e-6 if tol is None else tol, 10.0 * float(np.finfo(np.float32).eps))
    return tol


def _solver_error(solver: str, tol: float | None) -> float:
    """Relative eigenvalue error the solver may leave (its residual tolerance)."""
    if solver in ("lanczos", "randomized"):
        return 1e-10 if tol is None else tol
    if solver == "arpack":
        return _EPS64 if not tol else tol
    return 0.0


def _first_or_auto(eigen_solver: str, solver: str) -> str:
    """What to ask the eigensolver for: ``"auto"`` stays ``"auto"`` (it may fall back)."""
    return "auto" if eigen_solver == "auto" else solver


def _used(reports: list, solver: str) -> str:
    """The solver whose pairs were returned (after any fallback)."""
    return reports[-1].used if reports and reports[-1].used else solver


def _eigenpairs(
    spec: KernelSpec,
    X: NDArray[np.float64],
    k: int,
    *,
    eigen_solver: str,
    tol: float | None,
    max_iter: int | None,
    dtype: np.dtype,
    n_threads: int,
    iterated_power: int | str = "auto",
    random_state: object = None,
    input_eps: float = _EPS64,
) -> _Eigenpairs:
    n = X.shape[0]
    solver = choose_solver(n, k, eigen_solver)
    shift, expm1 = None, False
    sparse = scipy.sparse.issparse(X)
    randomized = {"iterated_power": iterated_power, "random_state": random_state}
    if spec.is_named and solver != "dense" and not sparse:
        evaluator = KernelEvaluator(spec, X, centred=True)
        shift, expm1 = evaluator.shift, evaluator.expm1
        panels = build_kernel_panels(
            evaluator_blocks(evaluator, X),
            n,
            dtype=dtype,
            n_threads=n_threads,
            check=_checker(spec),
        )
        check_kernel_values(spec, panels.stats, dtype)
        user_tol = tol
        tol = _solver_tolerance(solver, tol, dtype)
        # "auto" is passed on unresolved so that the solver can fall back to a robust one
        # when its first choice does not verify; the report names the solver used.
        with record_solver_reports() as reports:
            eigenvalues, eigenvectors = top_eigh_operator(
                panels.centered_matmat,
                n,
                k,
                _first_or_auto(eigen_solver, solver),
                tol=tol,
                max_iter=max_iter,
                **randomized,
            )
        solver = _used(reports, solver)
        smallest = None
        if spec.may_be_indefinite and k < n:
            smallest = _smallest_eigenvalue(panels.centered_matmat, n)
        bound = _rounding_bound(n, eigenvalues, panels.frobenius_norm, dtype, solver, tol, smallest)
        float32 = dtype == np.float32
        # What float64 storage would resolve, at the caller's tolerance (float32 raises it).
        bound64 = (
            _rounding_bound(
                n, eigenvalues, panels.frobenius_norm, np.dtype(np.float64), solver, user_tol
            )
            if float32
            else None
        )
        return _Eigenpairs(
            eigenvalues,
            eigenvectors,
            panels.row_means,
            panels.grand_mean,
            shift,
            expm1,
            solver,
            bound,
            smallest,
            panels.frobenius_norm if float32 else None,
            bound64,
        )
    # A full n×n matrix: the dense solver, callable and precomputed kernels, sparse data.
    exponent = 0  # K is stored as K·2^-exponent (exactly), see _power_of_two_exponent
    if sparse:
        K = sparse_kernel(spec, X)  # from the sparse rows: X is never densified
        check_kernel_values(spec, _stats_of(K))
    elif spec.is_named:
        evaluator = KernelEvaluator(spec, X, centred=True)
        shift, expm1 = evaluator.shift, evaluator.expm1
        K, stats = build_kernel_dense(
            evaluator_blocks(evaluator, X), n, n_threads=n_threads, check=_checker(spec)
        )
        check_kernel_values(spec, stats)
    else:
        K = kernel_matrix(spec.function, X) if spec.name == "callable" else X.copy()
        _check_symmetric(K, spec, input_eps)
        exponent = _power_of_two_exponent(_stats_of(K).max_abs)
        if exponent:
            K = np.ldexp(K, -exponent, out=K)
        symmetrize_inplace(K)
    frobenius = float(np.linalg.norm(K))
    col_means = K.mean(axis=0)
    grand_mean = float(col_means.mean())
    K_c = center_kernel(K, copy=False)
    # Centring leaves rounding-level asymmetry; use the symmetric part.
    symmetrize_inplace(K_c)
    keep = spec.may_be_indefinite and k < n
    if solver == "dense":
        eigenvalues, eigenvectors = top_eigh(K_c, k, "dense", overwrite=not keep)
    else:
        with record_solver_reports() as reports:
            eigenvalues, eigenvectors = top_eigh_operator(
                K_c.__matmul__,
                n,
                k,
                _first_or_auto(eigen_solver, solver),
                tol=tol,
                max_iter=max_iter,
                **randomized,
            )
        solver = _used(reports, solver)
    smallest = _smallest_eigenvalue(K_c.__matmul__, n, K_c) if keep else None
    bound = _rounding_bound(n, eigenvalues, frobenius, np.dtype(np.float64), solver, tol, smallest)
    if exponent:
        eigenvalues, col_means, grand_mean, bound, smallest = _scale_back(
            exponent, eigenvalues, col_means, grand_mean, bound, smallest, spec
        )
        frobenius = float(np.ldexp(frobenius, exponent))
    bound64 = float32_frobenius = None
    if spec.name == "precomputed" and input_eps > _EPS64:
        # The caller's float32 entries are themselves rounded: eigenvalues within that
        # rounding level are not resolved (the same bound as a float32-stored kernel).
        bound64, float32_frobenius = bound, frobenius
        bound = max(bound, 2.0**-24 * frobenius)
    return _Eigenpairs(
        eigenvalues,
        eigenvectors,
        col_means,
        grand_mean,
        shift,
        expm1,
        solver,
        bound,
        smallest,
        float32_frobenius,
        bound64,
        "precomputed",
    )


def _linear_exponent(spec: KernelSpec, X: object) -> int:
    """``e`` such that the linear kernel of ``X·2^-e`` is near unit scale, when needed (else 0).

    The linear kernel of data scaled by ``s`` is ``s²`` times the kernel (and kernel
    PCA's components do not change): data near ``1e±100`` would give kernel values
    beyond what the eigensolvers square safely (``1e±140``) although the result is
    well defined, as scikit-learn's shows. Such data (the largest ``|x − mean|``
    outside ``[1e-50, 1e50]``) is fitted as ``X·2^-e``, exactly, and the results
    are scaled back (eigenvalues by ``4^e``, projections by ``2^e``).
    """
    if spec.name != "linear" or scipy.sparse.issparse(X) or X.size == 0:
        return 0
    with np.errstate(over="ignore", invalid="ignore"):  # max|x − mean| without an n×d temporary
        mean = X.mean(axis=0)
        spread = float(max(np.max(X.max(axis=0) - mean), np.max(mean - X.min(axis=0))))
    if not np.isfinite(spread) or spread == 0.0 or _LINEAR_BELOW <= spread <= _LINEAR_ABOVE:
        return 0
    return int(np.frexp(spread)[1])


def _unscale_linear(result: ExactResult, X: NDArray[np.float64], exponent: int) -> ExactResult:
    """``result`` of a fit on ``X·2^-exponent`` in the units of ``X`` (see :func:`_linear_exponent`)."""
    with np.errstate(over="ignore"):
        eigenvalues = np.ldexp(result.eigenvalues, 2 * exponent)
    if not np.all(np.isfinite(eigenvalues)):
        raise ValueError(
            f"the eigenvalues of the linear kernel matrix overflow float64 (X's entries reach "
            f"2^{exponent} from their mean, and an eigenvalue is up to n_samples·n_features "
            "times their square): scale X down (kernel PCA's components do not change)."
        )
    lost = (result.eigenvalues != 0) & (np.abs(eigenvalues) < np.finfo(np.float64).tiny)
    if np.any(lost):
        raise ValueError(
            f"the eigenvalues of the linear kernel matrix underflow float64 ({int(lost.sum())} "
            f"of them are below {np.finfo(np.float64).tiny:.3g}: X's entries are about "
            f"2^{exponent} from their mean, and the eigenvalues scale with their square): scale "
            "X up, e.g. with StandardScaler (kernel PCA's components do not change)."
        )
    return replace(
        result,
        eigenvalues=eigenvalues,
        alphas=np.ldexp(result.alphas, -exponent),
        col_means=np.ldexp(result.col_means, 2 * exponent),
        grand_mean=float(np.ldexp(result.grand_mean, 2 * exponent)),
        X_fit=X,
        shift=None if result.shift is None else np.ldexp(result.shift, exponent),
        rounding_bound=float(np.ldexp(result.rounding_bound, 2 * exponent)),
        input_exponent=exponent,
    )


def _rescaled(result: ExactResult) -> ExactResult:
    """The inverse of :func:`_unscale_linear`: ``result`` in the units it was fitted in."""
    e = result.input_exponent
    return replace(
        result,
        eigenvalues=np.ldexp(result.eigenvalues, -2 * e),
        alphas=np.ldexp(result.alphas, e),
        col_means=np.ldexp(result.col_means, -2 * e),
        grand_mean=float(np.ldexp(result.grand_mean, -2 * e)),
        X_fit=np.ldexp(result.X_fit, -e),
        shift=None if result.shift is None else np.ldexp(result.shift, -e),
        rounding_bound=float(np.ldexp(result.rounding_bound, -2 * e)),
        input_exponent=0,
    )


def _power_of_two_exponent(max_abs: float) -> int:
    """``e`` such that ``max|K|·2^-e`` is about 1, when ``max|K|`` is far from 1 (else 0).

    The solvers square kernel values (norms, products), which over- or
    underflows near ``1e±150``; multiplying by a power of two is exact, so a
    precomputed or callable kernel is solved as ``K·2^-e`` and the eigenvalues
    multiplied back by ``2^e``.
    """
    if max_abs == 0.0 or _SCALE_BELOW <= max_abs <= _SCALE_ABOVE:
        return 0
    return int(np.frexp(max_abs)[1])


def _scale_back(
    exponent: int,
    eigenvalues: NDArray[np.float64],
    col_means: NDArray[np.float64],
    grand_mean: float,
    bound: float,
    smallest: float | None,
    spec: KernelSpec,
) -> tuple[NDArray[np.float64], NDArray[np.float64], float, float, float | None]:
    """Undo :func:`_power_of_two_exponent`'s scaling on everything measured in kernel units."""
    with np.errstate(over="ignore"):
        eigenvalues = np.ldexp(eigenvalues, exponent)
    if not np.all(np.isfinite(eigenvalues)):
        what = (
            "precomputed kernel matrix"
            if spec.name == "precomputed"
            else "kernel function's values"
        )
        raise ValueError(
            f"the eigenvalues of the {what} overflow float64 (its entries reach 2^{exponent} and "
            f"an eigenvalue is up to n_samples times that): divide the kernel by a constant "
            "(kernel PCA's components do not change, the eigenvalues scale with it)."
        )
    col_means = np.ldexp(col_means, exponent)
    grand_mean = float(np.ldexp(grand_mean, exponent))
    bound = float(np.ldexp(bound, exponent))
    smallest = None if smallest is None else float(np.ldexp(smallest, exponent))
    return eigenvalues, col_means, grand_mean, bound, smallest


def _symmetry_tolerance(n: int, input_eps: float) -> float:
    """Relative ``max|K − Kᵀ|`` that rounding explains: ``max(1000·eps, 100·n·eps64)``.

    ``eps`` is that of the caller's dtype (a float32 kernel matrix computed as
    ``X @ X.T`` in float32 has halves that differ by float32 rounding); the
    ``100·n·eps64`` term covers float64 sums of ``n`` terms.
    """
    return max(1000.0 * input_eps, 100.0 * n * _EPS64)


def _check_symmetric(K: NDArray[np.float64], spec: KernelSpec, input_eps: float = _EPS64) -> None:
    """Refuse a kernel matrix whose halves differ by more than rounding of its dtype explains."""
    diff = np.abs(K - K.T)
    asym = float(np.max(diff))
    scale = max(float(np.max(np.abs(K))), np.finfo(np.float64).tiny)
    rtol = _symmetry_tolerance(K.shape[0], input_eps)
    if asym > rtol * scale:
        i, j = (int(v) for v in np.unravel_index(np.argmax(diff), K.shape))
        dtype = "float32" if input_eps > _EPS64 else "float64"
        digits = 9 if input_eps > _EPS64 else 17
        what = (
            "the kernel function is not symmetric on this data"
            if spec.name == "callable"
            else "the precomputed kernel matrix X is not symmetric"
        )
        raise ValueError(
            f"{what}: K[{i}, {j}] = {K[i, j]:.{digits}g} but K[{j}, {i}] = {K[j, i]:.{digits}g}, "
            f"a difference of {asym:.3g}, more than rounding of its {dtype} entries explains "
            f"(tolerance {rtol * scale:.3g} = {rtol:.3g} × max|K| = {rtol:.3g} × {scale:.6g}). "
            "A kernel needs k(x, y) = k(y, x): check how the matrix was computed "
            "(kpca_lib.mercer.check_mercer_matrix diagnoses it); if the difference is "
            "legitimate rounding, pass its symmetric part (K + K.T) / 2."
        )


def _rounding_bound(
    n: int,
    eigenvalues: NDArray[np.float64],
    frobenius: float,
    dtype: np.dtype,
    solver: str,
    tol: float | None,
    smallest: float | None = None,
) -> float:
    """How far rounding (and the solver's tolerance) can move an eigenvalue of ``K_c``.

    Two parts. Rounding of the stored kernel and of the centring: relative to the
    *uncentred* kernel (``‖K‖₂ ≥ ‖K‖_F/√n``), whose entries are what is rounded. The
    solver's tolerance: relative to the *centred* matrix it iterated on (its residuals are
    measured against ``‖K_c‖₂``, here the largest computed ``|λ|``, with ``smallest`` when it
    is known), which can be many orders of magnitude smaller for data far from the origin.
    """
    top = float(np.max(np.abs(eigenvalues))) if eigenvalues.size else 0.0
    operator = max(top, abs(smallest) if smallest is not None and np.isfinite(smallest) else 0.0)
    stored = max(top, frobenius / np.sqrt(n))  # ‖K‖₂ >= ‖K‖_F/√n
    bound = max(10.0 * _EPS64 * n * stored, _solver_error(solver, tol) * operator)
    if dtype == np.float32:
        bound = max(bound, 2.0**-24 * frobenius)  # ‖E‖₂ ≤ ‖E‖_F ≤ u‖K‖_F
    return bound


@one_blas_thread_for_solver  # ARPACK's own small calls on one thread, as in every solver
def _smallest_eigenvalue(
    matmat, n: int, K_c: NDArray[np.float64] | None = None, like: object = None
) -> float | None:
    """Smallest eigenvalue of the whole centred kernel (to report a non-PSD kernel).

    Informative only (the requested top eigenpairs do not depend on it): a
    loose ARPACK run; ``None`` if it does not converge. On another namespace
    (``like``): minus the largest Ritz value of ``−A`` after a short randomized
    subspace iteration (residuals to ``1e-3``), an upper bound of the smallest
    eigenvalue whether or not it converged, so a negative value proves one.
    """
    if like is not None and not isinstance(like, np.ndarray):
        from ._randomized import randomized_eigh

        theta, _, _ = randomized_eigh(
            lambda V: -matmat(V), n, 1, tol=1e-3, max_iter=320, iterated_power=0,
            oversampling=7, random_state=2024, like=like,
        )
        return -float(to_host(theta)[0])
    matmat = with_caller_blas_threads(matmat)
    if K_c is not None and n <= 500:
        return float(np.linalg.eigvalsh(K_c)[0])
    op = scipy.sparse.linalg.LinearOperator(
        (n, n), matvec=lambda v: matmat(v.reshape(-1, 1)).ravel(), dtype=np.float64
    )
    v0 = np.random.default_rng(0).uniform(-1.0, 1.0, size=n)
    try:
        values = scipy.sparse.linalg.eigsh(
            op, k=1, which="SA", v0=v0, tol=1e-3, maxiter=max(300, n // 10)
        )[0]
    except scipy.sparse.linalg.ArpackNoConvergence as exc:
        values = exc.eigenvalues
    return float(values[0]) if len(values) else None


def _check_float32_accuracy(
    eigenvalues: NDArray,
    frobenius_norm: float,
    bound64: float | None,
    k: int,
    fate: str,
    cause: str = "kernel_dtype",
    *,
    count_zeros: bool = True,
) -> None:
    """Warn about every requested component that float32 storage of K does not resolve.

    Two cases, one warning: eigenvalues within float32's rounding level of the
    kernel (``2^-24·‖K‖_F``) were set to 0 by the classification (float32
    cannot tell them from 0: they are returned as 0 or dropped, ``fate``), and
    the resolved ones may move by more than 1e-4 of the smallest of them.
    ``cause``: ``"kernel_dtype"`` (``kernel_dtype='float32'``), ``"precomputed"``
    (the caller's precomputed kernel matrix is float32) or ``"device"`` (a float32 ``X``
    on an Array API device, whose kernel matrix has ``X``'s dtype). ``count_zeros=False``
    when zeros are not a loss (``n_components=None`` asks for the non-zero ones only).
    """
    bound = 2.0**-24 * frobenius_norm  # ‖E‖₂ ≤ ‖E‖_F ≤ u‖K‖_F, and ‖P E P‖₂ ≤ ‖E‖₂
    positive = eigenvalues[eigenvalues > 0]  # rounding-level ones are already 0
    if not positive.size:
        return  # nothing resolved at all: fit_exact reports it (naming float32)
    zeroed = int(np.sum(eigenvalues == 0)) if count_zeros else 0
    smallest = float(positive.min())
    parts = []
    if zeroed:
        float64 = "" if bound64 is None else f", against ±{bound64:.3g} in float64"
        parts.append(
            f"{zeroed} of the {k} requested components have eigenvalues within the float32 "
            f"rounding level of the kernel matrix (±{bound:.3g} = 2⁻²⁴·‖K‖_F{float64}), so "
            f"float32 storage cannot tell them from 0: they are {fate}"
        )
    if bound > 1e-4 * smallest:
        parts.append(
            f"rounding the kernel matrix may move the eigenvalues by up to {bound:.3g}, more "
            f"than 1e-4 of the smallest {'resolved' if zeroed else 'requested'} eigenvalue "
            f"({smallest:.3g})"
        )
    if parts:
        fewer = f", or request at most n_components={positive.size}" if zeroed else ""
        if cause == "precomputed":
            what, fix = "the precomputed kernel matrix is float32", "Pass it in float64 (computed"
            fix += " in float64)"
        elif cause == "device":
            what = "X is float32, so the kernel matrix on the device is float32"
            fix = "Pass X in float64"
        else:
            what, fix = "kernel_dtype='float32'", "Use kernel_dtype='float64' (twice the memory)"
        warnings.warn(
            f"{what}: {'; and '.join(parts)}. {fix} for accurate results{fewer}.",
            UserWarning,
            stacklevel=_caller_stacklevel(),
        )


def _significance(max_abs: float) -> float:
    """scikit-learn's relative threshold: eigenvalues below ``-this`` are clearly negative.

    (Without scikit-learn's absolute floor of 1e-10, so that it does not depend
    on the scale of the kernel.)
    """
    return 1e-5 * max_abs


def _classify(pairs: _Eigenpairs, k: int, n: int, spec: KernelSpec) -> NDArray[np.float64]:
    """Eigenvalues with rounding noise set to 0; raise or warn for genuinely negative ones."""
    eigenvalues = pairs.eigenvalues
    max_abs = float(np.max(np.abs(eigenvalues))) if eigenvalues.size else 0.0
    r = pairs.rounding_bound
    significant = max(r, _significance(max_abs))
    why = _indefinite_cause(spec)
    if eigenvalues.size and eigenvalues[-1] < -significant:
        bad = eigenvalues[eigenvalues < -significant]
        positive = int(np.sum(eigenvalues > r))
        raise ValueError(
            # The first words are scikit-learn's, for code that matches its message.
            "There are significant negative eigenvalues: the centred kernel matrix has "
            f"{bad.size} clearly negative eigenvalue(s) among the "
            f"{k} requested (smallest {bad.min():.4g}, largest eigenvalue {max_abs:.4g}; rounding "
            f"explains at most ±{r:.2g}): {why}, so √λ is undefined for those components. "
            f"Request at most n_components={positive} (the positive eigenvalues), or use a "
            "positive semi-definite kernel (check it with kpca_lib.mercer.check_mercer)."
        )
    slightly = eigenvalues < -r
    if np.any(slightly):
        warnings.warn(
            f"the centred kernel matrix has {int(slightly.sum())} slightly negative "
            f"eigenvalue(s) (smallest {eigenvalues.min():.3g}), beyond rounding (±{r:.2g}): "
            f"{why}. They are treated as 0.",
            NonPSDKernelWarning,
            stacklevel=_caller_stacklevel(),
        )
    if pairs.smallest is not None and pairs.smallest < -r:
        clearly = pairs.smallest < -significant
        warnings.warn(
            f"the centred kernel matrix has a {'clearly' if clearly else 'slightly'} negative "
            f"eigenvalue ({pairs.smallest:.4g}; rounding explains at most ±{r:.2g}) below the "
            f"requested components: {why}. The {k} requested components are still well defined "
            "(the top eigenpairs), but check the kernel with kpca_lib.mercer.check_mercer.",
            NonPSDKernelWarning,
            stacklevel=_caller_stacklevel(),
        )
    zero = eigenvalues <= max(1e-12 * max_abs, r)
    return np.where(zero, 0.0, eigenvalues)


def _indefinite_cause(spec: KernelSpec) -> str:
    if spec.name == "sigmoid":
        return (
            "the sigmoid kernel tanh(gamma·xᵀy + coef0) is not positive semi-definite on this "
            "data (it is not a Mercer kernel in general)"
        )
    if spec.name == "precomputed":
        return "the precomputed kernel matrix is not positive semi-definite (not a Mercer kernel)"
    if spec.name == "callable":
        return (
            "the kernel function is not positive semi-definite on this data (not a Mercer kernel)"
        )
    return (
        f"the {spec.name} kernel should be positive semi-definite, so this is a numerical "
        "problem: scale X or change the kernel parameters"
    )


def _caller_stacklevel() -> int:
    """``stacklevel`` for a ``warnings.warn`` in the calling function that names the first
    frame outside kpca_lib and scikit-learn (the user's line), whatever the path to it."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] not in ("kpca_lib", "sklearn"):
            return level
        frame, level = frame.f_back, level + 1
    return 1


def warn_nothing_to_project(message: str, drop: bool, n_components: int | None) -> None:
    """Warn that no requested eigenvalue is positive; ``message`` says why.

    Kept components (``drop=False``) have projections that are all 0; dropped ones
    (``n_components=None`` or ``remove_zero_eig=True``) leave none, and the projections
    have 0 columns, as in scikit-learn (which says nothing).
    """
    if not drop:
        text = f"{message}: every projection is 0."
    else:
        which = (
            "remove_zero_eig=True removes every component"
            if n_components
            else "n_components=None keeps only the non-zero components and none is left"
        )
        text = (
            f"{message}, so there is no variance to analyse: {which}; the projections have 0 "
            "columns (shape (n_samples, 0)). Check X and the kernel parameters."
        )
    warnings.warn(text, UserWarning, stacklevel=_caller_stacklevel())


def nothing_positive_message(
    n: int, largest: float, bound: float, spec: KernelSpec, precision: str
) -> str:
    """Why no requested eigenvalue is positive: an indefinite kernel (``largest`` below
    ``−bound``), or a centred kernel that is zero up to rounding (``precision`` names it)."""
    if largest < -bound:
        return (
            f"no requested eigenvalue of the centred kernel matrix is positive (n_samples = "
            f"{n}; the largest is {largest:.4g}): {_indefinite_cause(spec)}"
        )
    return (
        f"the centred kernel matrix is zero up to rounding (n_samples = {n}; every requested "
        f"eigenvalue within ±{bound:.3g}): every sample is the same point in feature space, or "
        f"the kernel's variation is below {precision} (e.g. gamma too small or sigma too large "
        "for the scale of X)"
    )


def fit_exact(
    spec: KernelSpec,
    X: NDArray[np.float64],
    n_components: int | None,
    *,
    eigen_solver: str = "auto",
    tol: float | None = None,
    max_iter: int | None = None,
    kernel_dtype: object = "float64",
    n_threads: int = 1,
    remove_zero_eig: bool = False,
    iterated_power: int | str = "auto",
    random_state: object = None,
    input_eps: float = _EPS64,
) -> ExactResult:
    """Exact kernel PCA of ``X`` (the Gram matrix itself for ``kernel="precomputed"``).

    Parameters
    ----------
    spec : KernelSpec
    X : ndarray of shape (n, d), (n, n) for a precomputed kernel, or scipy.sparse.csr_matrix
        Validated data; kept (not copied) as ``X_fit``. Sparse data (named
        kernels only) give a full float64 kernel matrix computed from the
        sparse rows (:func:`kpca_lib.kernels.sparse_kernel`).
    n_components : int or None
        Number of components (validated); ``None`` keeps every non-zero one.
    eigen_solver, tol, max_iter, kernel_dtype, remove_zero_eig, iterated_power, random_state
        As in :class:`~kpca_lib.kernel_pca.KernelPCA` (validated).
    n_threads : int
        Threads that build the kernel matrix.
    input_eps : float
        Machine epsilon of the caller's data (``float32``: a precomputed
        kernel whose halves differ by float32 rounding is symmetric enough).

    Returns
    -------
    ExactResult

    Raises
    ------
    ValueError
        For clearly negative requested eigenvalues (a non-Mercer kernel) or an
        overflowing kernel.

    Warns
    -----
    UserWarning
        When no requested eigenvalue is positive: every projection is 0, or, with
        ``n_components=None`` or ``remove_zero_eig=True``, no component is left.
    """
    exponent = _linear_exponent(spec, X)
    if exponent:  # the same fit on X·2^-e (exact), scaled back
        scaled = fit_exact(
            spec,
            np.ldexp(X, -exponent),
            n_components,
            eigen_solver=eigen_solver,
            tol=tol,
            max_iter=max_iter,
            kernel_dtype=kernel_dtype,
            n_threads=n_threads,
            remove_zero_eig=remove_zero_eig,
            iterated_power=iterated_power,
            random_state=random_state,
            input_eps=input_eps,
        )
        return _unscale_linear(scaled, X, exponent)
    n = X.shape[0]
    k = n if n_components is None else n_components
    drop = n_components is None or bool(remove_zero_eig)
    pairs = _eigenpairs(
        spec,
        X,
        k,
        eigen_solver=eigen_solver,
        tol=tol,
        max_iter=max_iter,
        dtype=np.dtype(kernel_dtype),
        n_threads=n_threads,
        iterated_power=iterated_power,
        random_state=random_state,
        input_eps=input_eps,
    )
    eigenvalues, eigenvectors, alphas = finish(pairs, k, n, spec, drop, n_components)
    return ExactResult(
        eigenvalues=eigenvalues,
        eigenvectors=eigenvectors,
        alphas=alphas,
        col_means=pairs.col_means,
        grand_mean=pairs.grand_mean,
        X_fit=X,
        shift=pairs.shift,
        expm1=pairs.expm1,
        solver=pairs.solver,
        rounding_bound=pairs.rounding_bound,
    )


def _precision(pairs: _Eigenpairs) -> str:
    """What limits the resolution of the eigenvalues, for the 'nothing to project' message."""
    if pairs.float32_frobenius is None:
        return "float64 rounding"
    level = f"±{2.0**-24 * pairs.float32_frobenius:.3g}"
    if pairs.float32_cause == "precomputed":
        return (
            "float32 rounding (the precomputed kernel matrix is float32: it resolves "
            f"eigenvalues only down to {level}; pass it in float64)"
        )
    if pairs.float32_cause == "device":
        return (
            f"float32 rounding (X is float32, so the kernel matrix on the device is float32: it "
            f"resolves eigenvalues only down to {level}; pass X in float64)"
        )
    return (
        "float32 rounding (kernel_dtype='float32' resolves eigenvalues only down to "
        f"{level}; use kernel_dtype='float64')"
    )


def finish(
    pairs: _Eigenpairs, k: int, n: int, spec: KernelSpec, drop: bool, n_components: int | None
) -> tuple[NDArray[np.float64], object, object]:
    """The components kept, for every namespace: eigenvalues (host), eigenvectors and alphas.

    Classifies the eigenvalues (rounding-level ones become 0, clearly negative ones
    raise), warns about what float32 storage does not resolve and about a fit with
    nothing to project, drops the zero components when ``drop`` and scales the
    eigenvectors ``α_k = β_k / √λ_k`` (zero columns for zero eigenvalues). The
    eigenvectors stay in their namespace and on their device.
    """
    eigenvalues = _classify(pairs, k, n, spec)
    if pairs.float32_frobenius is not None:
        fate = (
            "dropped (remove_zero_eig=True)" if drop else "returned as 0 (their projections are 0)"
        )
        # n_components=None asks for the non-zero components only: zeros are not a loss.
        _check_float32_accuracy(
            eigenvalues,
            pairs.float32_frobenius,
            pairs.rounding_bound64,
            k,
            fate,
            pairs.float32_cause,
            count_zeros=pairs.float32_cause != "device" or n_components is not None,
        )
    eigenvectors = pairs.eigenvectors
    if not np.any(eigenvalues > 0):
        message = nothing_positive_message(
            n, float(to_host(pairs.eigenvalues).max()), pairs.rounding_bound, spec,
            _precision(pairs),
        )
        warn_nothing_to_project(message, drop, n_components)
    xp = namespace(eigenvectors)
    if drop:
        keep = np.flatnonzero(eigenvalues > 0)
        eigenvalues, eigenvectors = eigenvalues[keep], take_columns(xp, eigenvectors, keep)
    nz = eigenvalues > 0
    if xp is np:
        alphas = np.zeros_like(eigenvectors)
        alphas[:, nz] = eigenvectors[:, nz] / np.sqrt(eigenvalues[nz])
    else:
        inv_sqrt = np.zeros_like(eigenvalues)
        inv_sqrt[nz] = 1.0 / np.sqrt(eigenvalues[nz])
        alphas = eigenvectors * from_host(inv_sqrt, eigenvectors)[None, :]
    return eigenvalues, eigenvectors, alphas


def cross_kernel(
    spec: KernelSpec,
    result: ExactResult,
    X: NDArray[np.float64],
    *,
    n_threads: int = 1,
    block: int = _TRANSFORM_BLOCK,
) -> NDArray[np.float64]:
    """The (uncentred, as stored at fit) kernel between ``X`` and the training points.

    Fitted on sparse data: from the sparse rows (:func:`~kpca_lib.kernels.sparse_kernel`),
    ``X`` sparse or dense. Fitted on dense data, a sparse ``X`` (these rows only) is
    densified, so that the same code as for dense ``X`` gives the same numbers.
    """
    if spec.name == "precomputed":
        return X
    if spec.name == "callable":
        return kernel_matrix(spec.function, X, result.X_fit)
    if scipy.sparse.issparse(result.X_fit):
        K = sparse_kernel(spec, X, result.X_fit)
        stats = _stats_of(K)
        if not stats.finite or stats.max_abs > 1e140:
            check_kernel_values(spec, stats, where="transform")
        return K
    if scipy.sparse.issparse(X):
        X = X.toarray()
    evaluator = KernelEvaluator(
        spec, result.X_fit, shift=result.shift, centred=True, expm1=result.expm1
    )
    side = evaluator.side(X)
    n_fit = result.X_fit.shape[0]
    K = np.empty((X.shape[0], n_fit))
    rows = max(1, block // n_fit)
    chunks = [slice(s, min(s + rows, X.shape[0])) for s in range(0, X.shape[0], rows)]

    bigs = np.zeros(len(chunks))

    def one(i: int) -> None:
        B = evaluator.block(side, chunks[i], slice(0, n_fit), out=K[chunks[i]])
        with np.errstate(invalid="ignore"):
            bigs[i] = max(float(B.max()), -float(B.min())) if B.size else 0.0

    # The library's work queue, clipped to the available CPUs (as the fit's kernel build).
    parallel_for(one, len(chunks), resolve_threads(n_threads))
    big = float(np.max(bigs)) if bigs.size else 0.0
    if not np.isfinite(big) or big > 1e140:
        check_kernel_values(
            spec, KernelStats(np.zeros(0), 0.0, 0.0, big, bool(np.isfinite(big))), where="transform"
        )
    return K


def transform_exact(
    spec: KernelSpec,
    result: ExactResult,
    X: NDArray[np.float64],
    *,
    n_threads: int = 1,
    block: int = _TRANSFORM_BLOCK,
) -> NDArray[np.float64]:
    """Project new points: ``center_test_kernel(k(X, X_fit)) @ alphas`` with the fit's statistics."""
    if result.input_exponent:  # fitted on X·2^-e (a linear kernel far from unit scale)
        e = result.input_exponent
        if scipy.sparse.issparse(X):
            X = X.toarray()
        Z = transform_exact(
            spec, _rescaled(result), np.ldexp(X, -e), n_threads=n_threads, block=block
        )
        return np.ldexp(Z, e)
    n_fit = result.alphas.shape[0]
    rows = max(1, (block * max(1, n_threads)) // n_fit)
    Z = np.empty((X.shape[0], result.alphas.shape[1]))
    for start in range(0, X.shape[0], rows):
        chunk = slice(start, start + rows)
        K_test = cross_kernel(spec, result, X[chunk], n_threads=n_threads, block=block)
        K_test = center_test_kernel_from_means(K_test, result.col_means, result.grand_mean)
        Z[chunk] = K_test @ result.alphas
    return Z
