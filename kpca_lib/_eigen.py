"""Symmetric eigendecompositions shared by PCA and kernel PCA, verified before they are returned.

Four solvers compute the ``k`` largest eigenpairs of a symmetric ``n×n`` matrix:

* ``"dense"``: LAPACK ``eigh`` restricted to the top ``k`` (``?syevr``); needs
  the whole matrix in float64 and O(n³) time, but no iteration. If LAPACK
  returns fewer than ``k`` pairs (it does, e.g. for ``K = I − 11ᵀ/n``), the full
  divide-and-conquer ``?syevd`` is used instead.
* ``"arpack"``: implicitly restarted Lanczos (``scipy.sparse.linalg.eigsh``),
  one matrix–vector product at a time.
* ``"lanczos"``: block Lanczos with full reorthogonalisation and thick
  restarts (:func:`lanczos_eigh`). It only needs products ``A @ V`` and stops
  as soon as every requested Ritz pair has a small residual
  ``‖A u − θ u‖ ≤ tol · ‖A‖``, checked after every product, so it does the
  fewest passes over the matrix.
* ``"randomized"``: randomized subspace iteration from a random block
  (:mod:`kpca_lib._randomized`, scikit-learn's ``eigen_solver="randomized"``
  with ``iterated_power`` and ``random_state``), run until its residuals meet
  the same tolerance; never chosen by ``"auto"``.

**Every result is verified** (:func:`kpca_lib._verify.verify_eigenpairs`):
exactly ``k`` finite pairs in descending order, orthonormal vectors, residuals
``‖A u − θ u‖ ≤ max(tol·‖A‖, rounding level of the stored matrix)`` (from a
fresh product, or from a Krylov solver's own products by linearity), and a
randomized deflation check that no eigenvalue above the ``k``-th was missed (a
copy of a repeated eigenvalue that a Krylov solver did not see; block Lanczos
multiplies the check's random block along with its first block). What cannot
be verified is never returned:

* ``"lanczos"`` retries with a larger block (larger than any multiplicity
  found, started from the missed directions) before giving up;
* ``"auto"`` tries ``"lanczos"`` and falls back to ``"dense"`` (when the
  matrix fits in memory) or ``"arpack"``, silently, since it promised only a
  verified result;
* an explicitly requested solver that cannot be verified raises
  :class:`EigenpairsNotVerifiedError` (no silent switch to another solver);
  the message names the failed check, by how much, and the fix.

The iterative solvers only need a function ``matmat(V) -> A @ V``, so the
matrix may be stored in any form (e.g. half of it, in float32, or implicitly
centred). The cost of verification (time, products) of every call is
recorded by :func:`record_solver_reports`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from numpy.typing import NDArray

from ._blocked import symmetrize_inplace
from ._threads import blas_threads, one_blas_thread_for_solver, with_caller_blas_threads
from ._verify import ORTHONORMALITY_TOL, Verification, deflation_probe, verify_eigenpairs
from ._xp import column_signs, device, namespace, take_columns, to_host

__all__ = [
    "top_eigh",
    "top_eigh_operator",
    "lanczos_eigh",
    "flip_signs",
    "choose_solver",
    "record_solver_reports",
    "EigenpairsNotVerifiedError",
    "SolverReport",
    "EIGEN_SOLVERS",
]

EIGEN_SOLVERS = ("auto", "dense", "arpack", "lanczos", "randomized")

#: Below this size the iterative solvers just form the matrix and call LAPACK.
_SMALL = 64
#: ``"auto"`` takes ARPACK for ``k ≤ 10`` below ``_ARPACK_BELOW + 100·k`` samples (measured
#: crossover, see :func:`choose_solver`).
_ARPACK_BELOW = 500

#: Relative residual tolerance of the dense solver is ``max(tol, _DENSE_TOL_FACTOR·n·eps)``.
_DENSE_TOL_FACTOR = 100.0

_EPS64 = float(np.finfo(np.float64).eps)

#: Deflation check of the operator paths: 3 to 6 products with a block of 4 random vectors.
#: At least 3 passes: with 2 (a Krylov space of degree 1) a second copy of a repeated
#: eigenvalue that the solver missed went unnoticed in up to 70 % of random draws on hard
#: spectra (n = 300-3000, one vector), and single-vector Lanczos returned such a result as
#: verified (1 of 120 random cases, 16 of 48 targeted ones). With 3 passes of one vector,
#: 2 of 720 draws still missed it; with 3 passes of 4 vectors, none (the overlap of one
#: random probe with the missed direction shrinks as 1/√n). A product with 4 columns
#: costs about what 1 does from n = 2048 (the kernel is streamed from memory), and little
#: below, where products are cheap.
_KRYLOV_CHECK = {"check_block": 4, "min_passes": 3, "max_passes": 6}


MatMat = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def _product_threads(matmat: MatMat) -> MatMat:
    """``matmat`` on the caller's BLAS threads, unless its owner runs its products on its own
    threads (``SymmetricPanels``: one BLAS thread per worker, the caller's setting unused)."""
    if getattr(getattr(matmat, "__self__", None), "threads_own_products", False):
        return matmat
    return with_caller_blas_threads(matmat)


def orthonormality_tol(like: Any, n: int) -> float:
    """The verification's ``max|UᵀU − I|`` limit for vectors of ``like``'s dtype.

    NumPy vectors are float64 (``1e-9``); a device without float64 works in float32,
    whose orthonormalisation is good to about ``√n·eps``.
    """
    if like is None or isinstance(like, np.ndarray):
        return ORTHONORMALITY_TOL
    eps = float(np.finfo(np.float32).eps) if "float32" in str(like.dtype) else _EPS64
    return ORTHONORMALITY_TOL if eps == _EPS64 else max(1e-5, 10 * np.sqrt(n) * eps)


class EigenpairsNotVerifiedError(np.linalg.LinAlgError):
    """The requested eigenpairs could not be computed and verified.

    The message names the solver(s) tried, the check that failed (count,
    orthonormality, residual, missed eigenvalue) with its numbers, and the fix.
    """


@dataclass
class Attempt:
    """One solver run and its verification."""

    solver: str
    detail: str
    seconds: float
    products: int
    verification: Verification | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.verification is not None and self.verification.ok

    def describe(self) -> str:
        what = f"{self.solver}{f' ({self.detail})' if self.detail else ''}"
        if self.error is not None:
            return f"{what}: {self.error}"
        assert self.verification is not None
        return f"{what}: {'; '.join(self.verification.failures) or 'verified'}"


@dataclass
class SolverReport:
    """What one call of :func:`top_eigh` / :func:`top_eigh_operator` did.

    Attributes
    ----------
    requested : str
        The solver asked for.
    n, k : int
    attempts : list of Attempt
        Every solver run, in order; the last one is returned if ``ok``.
    """

    requested: str
    n: int
    k: int
    attempts: list[Attempt] = field(default_factory=list)
    dtype_eps: float = _EPS64
    where: str = ""  # "" for NumPy, else "namespace, device" of the arrays

    @property
    def ok(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].ok

    @property
    def used(self) -> str:
        return self.attempts[-1].solver if self.attempts else ""

    @property
    def verify_seconds(self) -> float:
        return sum(a.verification.seconds for a in self.attempts if a.verification)

    @property
    def verify_products(self) -> int:
        return sum(a.verification.n_products for a in self.attempts if a.verification)

    @property
    def solve_products(self) -> int:
        return sum(a.products for a in self.attempts)

    @property
    def seconds(self) -> float:
        return sum(a.seconds for a in self.attempts)


_REPORTS: contextvars.ContextVar[list[SolverReport] | None] = contextvars.ContextVar(
    "kpca_eigen_reports", default=None
)


@contextlib.contextmanager
def record_solver_reports() -> Iterator[list[SolverReport]]:
    """Collect a :class:`SolverReport` of every eigensolver call made inside the block.

    >>> import numpy as np
    >>> with record_solver_reports() as reports:
    ...     _ = top_eigh(np.diag([3.0, 2.0, 1.0]), 2, "dense")
    >>> reports[0].used, reports[0].ok
    ('dense', True)

    Blocks nest: an outer block also receives the reports of an inner one (the
    estimator records which solver it used; a benchmark around it still sees them).
    """
    outer = _REPORTS.get()
    reports: list[SolverReport] = []
    token = _REPORTS.set(reports)
    try:
        yield reports
    finally:
        _REPORTS.reset(token)
        if outer is not None:
            outer.extend(reports)


def _publish(report: SolverReport) -> None:
    sink = _REPORTS.get()
    if sink is not None:
        sink.append(report)


def flip_signs(V: NDArray[np.float64]) -> NDArray[np.float64]:
    """Make the largest-magnitude entry of every column positive (in place).

    This is scikit-learn's ``svd_flip(u, None)`` convention, so that results
    are deterministic and compare directly with scikit-learn.
    """
    V *= _signs(V)[None, :]
    return V


def _signs(V: NDArray[np.float64]) -> NDArray[np.float64]:
    """The sign of the largest-magnitude entry of every column (1 for a zero column)."""
    return column_signs(namespace(V), V)


def choose_solver(n: int, k: int, solver: str) -> str:
    """Validate ``solver`` and resolve ``"auto"``.

    ``"auto"`` picks ``"lanczos"`` for a few components of a large matrix
    (``n > 200`` and ``k ≤ n/10``), where it is the fastest accurate solver,
    but ``"arpack"`` for ``k ≤ 10`` below ``n = 500 + 100·k`` (there ARPACK's
    compiled loop beats our block Lanczos's per-iteration Python; measured on
    two moons, warm: n = 500, k = 10, 4.0 ms against 5.2 ms; n = 1000, k = 10,
    9.5 against 10.1; n = 1000, k = 2 and 5, Lanczos ahead by 0.3-0.5 ms), and
    ``"dense"`` otherwise (many components: LAPACK computes them all at once). ``"arpack"`` and ``"lanczos"`` fall back to ``"dense"`` when
    ``k >= n``, which they cannot compute.

    This is the first choice only: :func:`top_eigh` and
    :func:`top_eigh_operator` called with ``"auto"`` fall back to a robust
    solver when the first one cannot be verified.
    """
    if solver not in EIGEN_SOLVERS:
        raise ValueError(
            f"eigen_solver must be one of {', '.join(repr(s) for s in EIGEN_SOLVERS)}; "
            f"got {solver!r}."
        )
    if solver == "auto":
        if not (n > 200 and k <= n // 10):
            return "dense"
        return "arpack" if (k <= 10 and n < _ARPACK_BELOW + 100 * k) else "lanczos"
    if solver in ("arpack", "lanczos", "randomized") and k >= n:
        return "dense"
    return solver


def _check_k(n: int, k: int) -> None:
    if not 1 <= k <= n:
        raise ValueError(
            f"the number of eigenpairs k must be between 1 and n = {n}; got k = {k}."
        )


def _descending(
    eigenvalues: NDArray[np.float64], eigenvectors: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    order = np.argsort(eigenvalues, kind="stable")[::-1]
    eigenvalues = np.ascontiguousarray(eigenvalues[order], dtype=np.float64)
    eigenvectors = np.ascontiguousarray(eigenvectors[:, order], dtype=np.float64)
    return eigenvalues, flip_signs(eigenvectors)


def _descending_with_images(eigenvalues: Any, eigenvectors: Any, images: Any) -> tuple[Any, Any, Any]:
    """:func:`_descending`, applying the same order and signs to ``images = A @ eigenvectors``.

    Any namespace: NumPy pairs come back as float64, others in their dtype and on their device.
    """
    xp = namespace(eigenvectors)
    if xp is not np:
        order = np.argsort(to_host(eigenvalues), kind="stable")[::-1]
        V = take_columns(xp, eigenvectors, order)
        signs = column_signs(xp, V)[None, :]
        w = xp.take(eigenvalues, xp.asarray(order.copy(), device=device(V)), axis=0)
        return w, V * signs, take_columns(xp, images, order) * signs
    order = np.argsort(eigenvalues, kind="stable")[::-1]
    V = np.ascontiguousarray(eigenvectors[:, order], dtype=np.float64)
    signs = _signs(V)
    V *= signs
    AV = images[:, order].astype(np.float64, copy=False)  # a copy (fancy indexing), signed in place
    AV *= signs
    return np.ascontiguousarray(eigenvalues[order], dtype=np.float64), V, AV


# -- dense ---------------------------------------------------------------------------


def _copy_upper_to_lower(A: NDArray[np.float64], diag: NDArray[np.float64], block: int = 512) -> None:
    """Rebuild a symmetric ``A`` whose lower triangle (and diagonal) LAPACK destroyed."""
    n = A.shape[0]
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        A[i1:, i0:i1] = A[i0:i1, i1:].T
        D = A[i0:i1, i0:i1]
        lower = np.tril(np.ones(D.shape, dtype=bool), -1)
        D[lower] = D.T[lower]
    np.fill_diagonal(A, diag)


def _dense_top(
    S: NDArray[np.float64], k: int, overwrite: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], str]:
    """Top-``k`` pairs by LAPACK (ascending), and the matrix to verify them with.

    ``?syevr`` on the top ``k`` first; if it returns fewer than ``k`` pairs (or
    non-finite ones), the full ``?syevd`` (on a copy). With ``overwrite``
    ``?syevr`` works on ``S`` in place and destroys one triangle; the other
    triangle is intact, so ``S`` is rebuilt from it (O(n²)) for the retry and
    the verification.
    """
    n = S.shape[0]
    A = S.T if (overwrite and S.flags.c_contiguous) else S  # Fortran order: no copy
    in_place = overwrite and A.flags.f_contiguous and A.dtype == np.float64
    diag = np.diag(A).copy() if in_place else None

    def restore() -> None:
        if diag is not None:
            _copy_upper_to_lower(A, diag)

    how = "syevr, top k"
    w, V = scipy.linalg.eigh(A, subset_by_index=(n - k, n - 1), overwrite_a=in_place)
    restore()
    if V.shape[1] != k or not (np.all(np.isfinite(w)) and np.all(np.isfinite(V))):
        how = f"syevr returned {V.shape[1]} of {k} pairs; syevd, all pairs"
        # Not in place: ?syevd would return the eigenvectors in A, and A is needed to verify.
        w, V = scipy.linalg.eigh(A, driver="evd")
        w, V = w[n - k :], V[:, n - k :]
    return w, V, A, how


#: From this size on, LAPACK on the whole matrix runs on the caller's BLAS threads (quiet,
#: n = 2000: 0.30 s with 2 threads against 0.40 s with 1; n = 4000: 2.3 s against 4.0 s).
#: Below, on one: the gain is nil (n = 500: 0.023 s against 0.019 s), and on a busy machine
#: OpenBLAS's threads wait for each other in ?syevr's many small calls (n = 500, k = 50,
#: beside stress-ng: 2.8-3.2 s with 2 threads, 0.025 s with 1; benchmarks/solver_results.md).
_DENSE_THREADS_FROM = 1024


def _dense_blas_threads(func: Callable) -> Callable:
    """Decorator of :func:`_dense_attempt`: BLAS threads for a large matrix only."""

    @functools.wraps(func)
    def wrapper(S: NDArray[np.float64], *args: Any, **kwargs: Any) -> Any:
        if S.shape[0] >= _DENSE_THREADS_FROM:
            return with_caller_blas_threads(func)(S, *args, **kwargs)
        with blas_threads(1):
            return func(S, *args, **kwargs)

    return wrapper


@_dense_blas_threads
def _dense_attempt(
    S: NDArray[np.float64], k: int, overwrite: bool, tol: float | None, report: SolverReport,
    *, matrix_norm: float | None = None, dtype_eps: float = _EPS64,
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    n = S.shape[0]
    start = time.perf_counter()
    w, V, A, how = _dense_top(S, k, overwrite)
    w, V = _descending(w, V)
    seconds = time.perf_counter() - start
    rtol = max(0.0 if tol is None else tol, _DENSE_TOL_FACTOR * n * _EPS64)
    check = verify_eigenpairs(
        A.__matmul__, n, k, w, V, tol=rtol, matrix_norm=matrix_norm, dtype_eps=dtype_eps
    )
    if not check.ok:
        asym = _asymmetry(A)
        if asym > 0:
            check.failures.append(
                f"the matrix is not symmetric (max|S − Sᵀ| = {asym:.3g}; the dense solver reads "
                "one triangle only): pass its symmetric part (S + Sᵀ)/2"
            )
    report.attempts.append(Attempt("dense", how, seconds, 0, check))
    return (w, V) if check.ok else None


def _asymmetry(A: NDArray[np.float64], block: int = 512) -> float:
    """``max|A − Aᵀ|`` without an n×n temporary."""
    n, worst = A.shape[0], 0.0
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        worst = max(worst, float(np.abs(A[i0:i1, :] - A[:, i0:i1].T).max(initial=0.0)))
    return worst


def _materialize(matmat: MatMat, n: int, chunk: int = 1024) -> NDArray[np.float64]:
    """The matrix ``A`` from products with the identity, column chunk by chunk, symmetrised."""
    A = np.empty((n, n))
    for j0 in range(0, n, chunk):
        j1 = min(j0 + chunk, n)
        E = np.zeros((n, j1 - j0))
        E[np.arange(j0, j1), np.arange(j1 - j0)] = 1.0
        A[:, j0:j1] = matmat(E)
    return symmetrize_inplace(A)


def _dense_fits(n: int) -> bool:
    """Whether forming the n×n float64 matrix (plus LAPACK's copy) fits in available memory."""
    need = 3.0 * 8.0 * n * n
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return need < 0.8 * int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return need < 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return n <= 20_000


# -- public entry points ----------------------------------------------------------------


def top_eigh(
    S: NDArray[np.float64],
    k: int,
    solver: str = "auto",
    *,
    overwrite: bool = False,
    tol: float | None = None,
    max_iter: int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The ``k`` largest eigenpairs of the symmetric matrix ``S``, in descending order, verified.

    Parameters
    ----------
    S : ndarray of shape (n, n)
        Symmetric matrix (LAPACK reads one triangle; the verification uses all
        of it, so an asymmetric ``S`` is reported).
    k : int
        Number of eigenpairs, ``1 <= k <= n``.
    solver : {"auto", "dense", "arpack", "lanczos"}
        See the module docstring and :func:`choose_solver`. ``"auto"`` falls
        back to ``"dense"`` if the iterative result cannot be verified.
    overwrite : bool, default=False
        Let the dense solver work in ``S`` instead of a copy (saves an n×n
        matrix). ``S`` keeps one triangle, from which it is rebuilt for the
        verification, so on return it holds the same symmetric matrix (built
        from the triangle LAPACK did not read).
    tol, max_iter : optional
        Passed to the iterative solvers (see :func:`top_eigh_operator`).

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
    eigenvectors : ndarray of shape (n, k), orthonormal columns, signs fixed by :func:`flip_signs`.

    Raises
    ------
    EigenpairsNotVerifiedError
        If no allowed solver produced pairs that pass verification.
    """
    n = S.shape[0]
    _check_k(n, k)
    resolved = choose_solver(n, k, solver)
    if resolved != "dense":
        return top_eigh_operator(S.__matmul__, n, k, solver, tol=tol, max_iter=max_iter)
    report = SolverReport(solver, n, k)
    _publish(report)
    if S.dtype != np.float64:
        # LAPACK in float32 gives vectors orthonormal to 1e-6 only: solve the (exactly
        # representable) float64 matrix instead, in a copy we may overwrite.
        S, overwrite = np.asarray(S, dtype=np.float64), True
    result = _dense_attempt(S, k, overwrite, tol, report)
    if result is None:
        _raise(report, tol, max_iter)
    return result  # type: ignore[return-value]


def _operator_hints(
    matmat: MatMat, n: int, matrix_norm: float | None, dtype_eps: float | None
) -> tuple[float | None, float, NDArray[np.float64] | None]:
    """Norm and precision of the stored matrix, from ``matmat``'s owner when not given.

    ``matmat`` is often a bound method: of an ``ndarray`` (then the matrix
    itself is available for a dense fallback) or of
    :class:`kpca_lib._blocked.SymmetricPanels` (``dtype``, ``frobenius_norm``).
    """
    owner = getattr(matmat, "__self__", None)
    dense = owner if isinstance(owner, np.ndarray) and owner.shape == (n, n) else None
    if dtype_eps is None:
        dtype = getattr(owner, "dtype", None)
        try:
            dtype_eps = float(np.finfo(dtype).eps) if dtype is not None else _EPS64
        except (TypeError, ValueError):
            dtype_eps = _EPS64
        dtype_eps = max(dtype_eps, _EPS64)
    if matrix_norm is None:
        norm = getattr(owner, "frobenius_norm", None)
        matrix_norm = float(norm) if isinstance(norm, (int, float)) else None
    return matrix_norm, float(dtype_eps), dense


@one_blas_thread_for_solver  # see kpca_lib._threads: products keep the caller's threads
def top_eigh_operator(
    matmat: MatMat,
    n: int,
    k: int,
    solver: str = "lanczos",
    *,
    tol: float | None = None,
    max_iter: int | None = None,
    matrix_norm: float | None = None,
    dtype_eps: float | None = None,
    iterated_power: int | str = "auto",
    random_state: object = None,
    like: Any = None,
) -> tuple[Any, Any]:
    """The ``k`` largest eigenpairs of a symmetric matrix given by ``matmat(V) = A @ V``, verified.

    Parameters
    ----------
    matmat : callable
        Product with the symmetric ``n×n`` matrix, for ``V`` of shape (n, b).
    n, k : int
        Matrix size and number of eigenpairs, ``1 <= k <= n``.
    solver : {"lanczos", "arpack", "randomized", "auto", "dense"}
        ``"auto"`` tries ``"lanczos"`` and falls back to ``"dense"`` (matrix
        formed from products, if it fits in memory) or ``"arpack"`` when the
        result cannot be verified; ``"dense"`` forms the matrix;
        ``"randomized"``: :mod:`kpca_lib._randomized`.
    tol : float, optional
        Relative tolerance. ``"lanczos"``: residuals ``‖A u − θ u‖ ≤ tol·‖A‖``
        (default ``1e-10``, at least ``10·dtype_eps``); ``"arpack"``: scipy's
        ``tol`` (default 0, machine precision). Verification accepts residuals
        up to ``max(tol, 1e-10)·‖A‖`` (or the rounding level of the stored matrix).
    max_iter : int, optional
        Maximum number of matrix–vector products (default: ``max(1000, 50k)``
        for ``"lanczos"``, ``10n`` for ``"arpack"``).
    matrix_norm : float, optional
        A norm of the *stored* matrix (e.g. the Frobenius norm of an uncentred
        kernel applied with centring): products cannot be more accurate than
        ``dtype_eps·matrix_norm``. Default: ``matmat.__self__.frobenius_norm`` if any.
    dtype_eps : float, optional
        Machine epsilon of the stored matrix (``np.finfo(np.float32).eps`` for a
        float32 kernel). Default: from ``matmat.__self__.dtype``, else float64.
    iterated_power : int or "auto", default="auto"
        ``"randomized"`` only: minimum number of power iterations.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        ``"randomized"`` only: seed of the random start block.
    like : array, optional
        An array of the namespace, device and dtype to work in (default NumPy
        float64). On a namespace other than NumPy every iterative request
        (``"lanczos"``, ``"arpack"``, ``"randomized"``, ``"auto"``) runs the
        randomized subspace iteration of :mod:`kpca_lib._randomized` (block
        Lanczos and ARPACK are NumPy/SciPy code; ``"randomized"`` keeps its
        ``iterated_power`` minimum, the others stop as soon as the residuals
        meet ``tol``), and ``"dense"`` (and the fallback of ``"auto"``) is
        ``xp.linalg.eigh`` of ``matmat``'s owner, the dense matrix. The pairs
        are verified by the same :func:`kpca_lib._verify.verify_eigenpairs`.

    Returns
    -------
    eigenvalues : array of shape (k,), descending
    eigenvectors : array of shape (n, k), orthonormal columns, signs fixed by :func:`flip_signs`.

    Raises
    ------
    EigenpairsNotVerifiedError
        If no allowed solver produced pairs that pass verification.
    """
    _check_k(n, k)
    if solver not in EIGEN_SOLVERS:
        choose_solver(n, k, solver)  # raises the ValueError
    if like is not None and not isinstance(like, np.ndarray):
        return _top_eigh_namespace(
            matmat, n, k, solver, tol=tol, max_iter=max_iter, matrix_norm=matrix_norm,
            dtype_eps=_EPS64 if dtype_eps is None else dtype_eps, iterated_power=iterated_power,
            random_state=random_state, like=like,
        )
    matrix_norm, dtype_eps, dense = _operator_hints(matmat, n, matrix_norm, dtype_eps)
    matmat = _product_threads(matmat)
    report = SolverReport(solver, n, k, dtype_eps=dtype_eps)
    _publish(report)
    first = choose_solver(n, k, solver)

    def dense_attempt() -> tuple[NDArray, NDArray] | None:
        if dense is not None:
            return _dense_attempt(dense, k, False, tol, report, dtype_eps=_EPS64)
        A = _materialize(matmat, n)
        return _dense_attempt(A, k, True, tol, report, matrix_norm=matrix_norm, dtype_eps=dtype_eps)

    small = n <= _SMALL or k >= n
    if first == "dense" or small:
        result = dense_attempt()
    elif first == "randomized":
        from ._randomized import randomized_attempts

        result = randomized_attempts(
            matmat,
            n,
            k,
            tol,
            max_iter,
            report,
            matrix_norm,
            dtype_eps,
            iterated_power=iterated_power,
            random_state=random_state,
        )
    elif first == "arpack":
        result = _arpack_attempt(matmat, n, k, tol, max_iter, report, matrix_norm, dtype_eps)
        if result is None and solver == "auto":  # "auto" promised a verified result
            result = dense_attempt()
    else:
        result = _lanczos_attempts(matmat, n, k, tol, max_iter, report, matrix_norm, dtype_eps)
        if result is None and solver == "auto":
            if dense is not None or _dense_fits(n):
                result = dense_attempt()
            else:
                result = _arpack_attempt(matmat, n, k, tol, max_iter, report, matrix_norm, dtype_eps)
    if result is None:
        _raise(report, tol, max_iter)
    return result  # type: ignore[return-value]


def _top_eigh_namespace(
    matmat: MatMat, n: int, k: int, solver: str, *, tol: float | None, max_iter: int | None,
    matrix_norm: float | None, dtype_eps: float, iterated_power: int | str,
    random_state: object, like: Any,
) -> tuple[Any, Any]:
    """:func:`top_eigh_operator` on a namespace other than NumPy (see ``like`` there)."""
    from ._randomized import randomized_attempts

    xp = namespace(like)
    owner = getattr(matmat, "__self__", None)
    owner = getattr(owner, "matrix", owner)  # an operator that holds its dense matrix
    where = f"the Array API path ({xp.__name__}, device {device(like)})"
    report = SolverReport(solver, n, k, dtype_eps=dtype_eps, where=where)
    _publish(report)
    first = choose_solver(n, k, solver)
    result = None
    if first != "dense" and k < n:
        power = iterated_power if first == "randomized" else 0
        result = randomized_attempts(
            matmat, n, k, tol, max_iter, report, matrix_norm, dtype_eps,
            iterated_power=power, random_state=random_state, like=like,
        )
    if result is None and (first == "dense" or solver == "auto" or k >= n) and owner is not None:
        result = _dense_attempt_namespace(owner, k, tol, report, matrix_norm, dtype_eps, like)
    if result is None:
        _raise(report, tol, max_iter)
    return result  # type: ignore[return-value]


def _dense_attempt_namespace(
    A: Any, k: int, tol: float | None, report: SolverReport, matrix_norm: float | None,
    dtype_eps: float, like: Any,
) -> tuple[Any, Any] | None:
    """``xp.linalg.eigh`` of the whole matrix (in ``like``'s dtype), top ``k``, verified."""
    xp, n = namespace(like), A.shape[0]
    start = time.perf_counter()
    W = A if A.dtype == like.dtype else xp.astype(A, like.dtype)
    w, V = xp.linalg.eigh(W)
    top = np.arange(n - 1, n - k - 1, -1)
    V = take_columns(xp, V, top)
    V = V * column_signs(xp, V)[None, :]
    w = xp.take(w, xp.asarray(top.copy(), device=device(V)), axis=0)
    seconds = time.perf_counter() - start
    work_eps = _EPS64 if "float64" in str(like.dtype) else float(np.finfo(np.float32).eps)
    rtol = max(0.0 if tol is None else tol, _DENSE_TOL_FACTOR * n * work_eps)
    check = verify_eigenpairs(
        W.__matmul__, n, k, w, V, tol=rtol, matrix_norm=matrix_norm, dtype_eps=dtype_eps,
        orthonormality_tol=orthonormality_tol(like, n),
    )
    report.attempts.append(Attempt("dense", "xp.linalg.eigh", seconds, 0, check))
    return (w, V) if check.ok else None


def _raise(report: SolverReport, tol: float | None, max_iter: int | None) -> None:
    tried = "\n".join(f"  - {a.describe()}" for a in report.attempts)
    fixes = []
    if report.requested != "dense":
        fixes.append("eigen_solver='dense' (exact LAPACK, needs the n×n matrix in memory)")
        if report.requested != "auto":
            fixes.append("eigen_solver='auto' (falls back to a solver that verifies)")
        fixes.append(f"a larger tol (now {tol!r}) or max_iter (now {max_iter!r})")
    if report.dtype_eps > _EPS64:
        fixes.append(
            "X in float64 (the kernel matrix is stored in X's dtype, here float32)"
            if report.where
            else "kernel_dtype='float64' (the matrix is stored in lower precision)"
        )
    if report.where:
        fixes.append(
            "a NumPy array (e.g. X.cpu().numpy() for PyTorch, X.get() for CuPy: the CPU "
            "solvers)"
        )
    if not fixes:
        fixes.append("check that the matrix is symmetric and finite, and report the case")
    raise EigenpairsNotVerifiedError(
        f"eigen_solver={report.requested!r}{' on ' + report.where if report.where else ''}: "
        f"the {report.k} largest eigenpairs of the {report.n}×{report.n} matrix could not be "
        f"computed and verified. Attempts:\n{tried}\n"
        f"Fix: {'; or '.join(fixes)}."
    )


# -- arpack -----------------------------------------------------------------------------


def _arpack_attempt(
    matmat: MatMat, n: int, k: int, tol: float | None, max_iter: int | None,
    report: SolverReport, matrix_norm: float | None, dtype_eps: float,
) -> tuple[NDArray, NDArray] | None:
    calls = [0]

    def counted(V: NDArray[np.float64]) -> NDArray[np.float64]:
        calls[0] += V.shape[1]
        return matmat(V)

    op = scipy.sparse.linalg.LinearOperator(
        (n, n),
        matvec=lambda v: counted(v.reshape(-1, 1)).ravel(),
        matmat=counted,
        dtype=np.float64,
    )
    arpack_tol = 0.0 if tol is None else tol
    if dtype_eps > _EPS64:  # a float32-stored matrix cannot give more
        arpack_tol = max(arpack_tol, 10.0 * dtype_eps)
    # ARPACK's "no shifts could be applied" (error 3) happens with highly repeated
    # eigenvalues; its own advice is a larger NCV: try scipy's default, then two larger
    # subspaces (each from another start vector) before giving up.
    larger = {min(n - 1, max(m * k, 10 * m)) for m in (4, 8)}
    ncvs: list[int | None] = [None, *sorted(c for c in larger if c > k)]
    for attempt, ncv in enumerate(ncvs):
        v0 = np.random.default_rng(attempt).uniform(-1.0, 1.0, size=n)
        start = time.perf_counter()
        try:
            w, V = scipy.sparse.linalg.eigsh(
                op, k=k, which="LA", v0=v0, tol=arpack_tol, maxiter=max_iter, ncv=ncv
            )
            break
        except scipy.sparse.linalg.ArpackNoConvergence as exc:
            report.attempts.append(
                Attempt("arpack", "", time.perf_counter() - start, calls[0], None,
                        f"did not converge ({len(exc.eigenvalues)} of {k} pairs converged, "
                        f"max_iter = {max_iter}, ncv = {ncv or 'default'})")
            )
            if ncv == ncvs[-1]:
                return None
        except scipy.sparse.linalg.ArpackError as exc:
            report.attempts.append(
                Attempt("arpack", "", time.perf_counter() - start, calls[0], None,
                        f"ARPACK error (ncv = {ncv or 'default'}): {exc}")
            )
            if ncv == ncvs[-1]:
                return None
    w, V = _descending(w, V)
    seconds = time.perf_counter() - start
    check = verify_eigenpairs(
        matmat, n, k, w, V, tol=max(arpack_tol, 1e-10), matrix_norm=matrix_norm,
        dtype_eps=dtype_eps, **_KRYLOV_CHECK,
    )
    report.attempts.append(Attempt("arpack", "", seconds, calls[0], check))
    return (w, V) if check.ok else None


# -- block Lanczos ------------------------------------------------------------------


#: From this size on a product streams the kernel from memory rather than from cache.
_STREAMING_N = 2048


def _default_block_size(k: int, n: int, max_basis: int | None = None) -> int:
    """Columns per product with the matrix.

    For a large matrix (``n`` from :data:`_STREAMING_N`) at least 4: a product with a few
    columns costs about as much as one with a single column (reading the half-stored kernel
    dominates), and a block of 4 reaches the top eigenpairs in about half the passes of a
    single vector (measured: k = 2 and 10 on n = 12 000 two moons, 0.9 s and 1.2 s instead
    of 1.4 s and 2.2 s). A small matrix keeps single vectors for small ``k``: there products
    are cheap, and per product a single vector resolves clustered spectra better within a
    restart cycle. A small ``max_basis`` caps the block, so that a restart cycle still holds
    several blocks beyond the ``k`` kept Ritz vectors.
    """
    if n >= _STREAMING_N:
        b = max(4, k // 4)
    else:
        b = 1 if k <= 10 else max(2, k // 4)
    if max_basis is not None:
        b = min(b, max(1, (int(max_basis) - k) // 4))
    return b


def _lanczos_attempts(
    matmat: MatMat, n: int, k: int, tol: float | None, max_iter: int | None,
    report: SolverReport, matrix_norm: float | None, dtype_eps: float,
) -> tuple[NDArray, NDArray] | None:
    """Block Lanczos, verified; retried with a larger block, from the missed directions."""
    rtol = 1e-10 if tol is None else tol
    rtol = max(rtol, 10.0 * dtype_eps) if dtype_eps > _EPS64 else rtol
    block = _default_block_size(k, n)
    start_block = None
    for attempt in range(3):
        t0 = time.perf_counter()
        # The first attempt multiplies the verification's random block along with its
        # first block (a pass saved); a retry, started from what that check found, does not.
        check_seed = 1000 + attempt
        probe = (
            deflation_probe(n, k, _KRYLOV_CHECK["check_block"], check_seed) if not attempt else None
        )
        theta, U, info = _block_lanczos(
            matmat, n, k, tol=rtol, max_iter=max_iter, block_size=block,
            seed=attempt, start=start_block, probe=probe,
        )
        # The solver's U and A·U are released: at large k they are the fit's peak memory.
        w, V, AV = _descending_with_images(theta, U, info.pop("AU"))
        del U
        seconds = time.perf_counter() - t0
        check = verify_eigenpairs(
            matmat, n, k, w, V, tol=rtol, norm_estimate=info["scale"], AU=AV,
            matrix_norm=matrix_norm, dtype_eps=dtype_eps, seed=check_seed,
            probe=info.get("probe"), **_KRYLOV_CHECK,
        )
        detail = f"block size {block}"
        if not info["converged"]:
            detail += f", {info['why']} {info['products']} products"
        report.attempts.append(Attempt("lanczos", detail, seconds, info["products"], check))
        if check.ok:
            return w, V
        if not info["converged"] and check.missed is None and info["why"] != "stagnated after":
            break  # out of iterations: a larger block would not help within max_iter
        missed = 0 if check.missed is None else check.missed.shape[1]
        new_block = max(2 * block, check.multiplicity + 1, missed + 1, 2)
        block = min(new_block, k + 1, max(n // 4, 1))
        start_block = check.missed
    return None


def _orthonormal_block(
    W: NDArray[np.float64],
    Q: NDArray[np.float64],
    rng: np.random.Generator,
    scale: float,
) -> NDArray[np.float64]:
    """Orthonormalise the block ``W`` against the orthonormal columns of ``Q`` and itself.

    Block classical Gram–Schmidt, repeated after normalisation until the
    normalised columns lose almost nothing to ``Q`` (a column that was mostly
    in ``span(Q)`` is, once normalised, dominated by the rounding error of the
    projection, and must be projected again). Directions that vanish (``W``
    already lies in ``span(Q)``: an invariant subspace was found) are replaced
    by random ones, so the basis keeps growing.
    """
    size = max(float(np.linalg.norm(W, axis=0).max(initial=0.0)), scale, np.finfo(float).tiny)
    for _ in range(2):
        W -= Q @ (Q.T @ W)
    W, R = np.linalg.qr(W)
    bad = np.abs(np.diag(R)) <= 1e-12 * size
    for _ in range(3):
        good = W[:, ~bad]
        if good.shape[1] == 0:
            break
        good -= Q @ (Q.T @ good)
        good, R = np.linalg.qr(good)
        kept = np.abs(np.diag(R))
        W = W.copy()
        idx = np.flatnonzero(~bad)
        W[:, idx] = good
        bad[idx[kept <= 1e-8]] = True
        if np.all(kept > 0.5):
            break
    if np.any(bad):
        Z = rng.standard_normal((W.shape[0], int(bad.sum())))
        basis = np.hstack([Q, W[:, ~bad]])
        for _ in range(2):
            Z -= basis @ (basis.T @ Z)
        W = np.hstack([W[:, ~bad], np.linalg.qr(Z)[0]])
    return W


@one_blas_thread_for_solver
def lanczos_eigh(
    matmat: MatMat,
    n: int,
    k: int,
    *,
    tol: float = 1e-10,
    max_iter: int | None = None,
    block_size: int | None = None,
    max_basis: int | None = None,
    seed: int = 0,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Top ``k`` eigenpairs by block Lanczos with full reorthogonalisation and thick restarts, verified.

    The basis ``Q`` of the Krylov space ``span{V0, AV0, A²V0, ...}`` is grown by
    one block of ``block_size`` vectors per product with ``A``; both ``Q`` and
    ``AQ`` are kept, so the Rayleigh–Ritz problem ``H = Qᵀ(AQ)`` and the true
    residuals ``‖A u − θ u‖`` of the Ritz pairs are available after every
    product. When the basis reaches ``max_basis`` vectors it is restarted with
    the best Ritz vectors (thick restart), which keeps memory at
    ``2·n·max_basis`` numbers. The result is then verified
    (:func:`kpca_lib._verify.verify_eigenpairs`: residuals from a fresh
    product, orthonormality, no eigenvalue above the ``k``-th missed).

    Parameters
    ----------
    matmat : callable
        ``matmat(V) = A @ V`` for a symmetric ``A`` and ``V`` of shape (n, b).
    n, k : int
        Matrix size and number of wanted eigenpairs (largest eigenvalues).
    tol : float, default=1e-10
        Stop when every wanted Ritz pair has ``‖A u − θ u‖ ≤ tol · max|θ|``.
        Eigenvalue errors are then about ``tol²·‖A‖²/gap`` and eigenvector
        angles about ``tol·‖A‖/gap``.
    max_iter : int, optional
        Maximum number of matrix–vector products (default ``max(1000, 50k)``).
    block_size : int, optional
        Vectors per product (1 is plain Lanczos). Default (see
        ``_default_block_size``): from ``n = 2048``, ``max(4, k // 4)`` (a product
        streams the matrix from memory, so a few columns cost about one, and the
        passes over it are fewer); below, 1 for ``k <= 10``, else ``k // 4``. A block size no
        larger than a multiplicity can miss copies of that eigenvalue: the
        verification then fails.
    max_basis : int, optional
        Basis size that triggers a restart (default ``max(2k + 20, k + 40)``).
    seed : int, default=0
        Seed of the start block, so that results are reproducible.

    Returns
    -------
    eigenvalues : ndarray of shape (k,), ascending
    eigenvectors : ndarray of shape (n, k)

    Raises
    ------
    EigenpairsNotVerifiedError
        If the iteration did not converge within ``max_iter`` products or the
        result fails verification (this function does not retry; use
        :func:`top_eigh_operator`, which does).
    """
    _check_k(n, k)
    b = _default_block_size(k, n, max_basis) if block_size is None else max(1, int(block_size))
    _, dtype_eps, _ = _operator_hints(matmat, n, None, None)
    matmat = _product_threads(matmat)
    report = SolverReport("lanczos", n, k, dtype_eps=dtype_eps)
    t0 = time.perf_counter()
    theta, U, info = _block_lanczos(
        matmat, n, k, tol=tol, max_iter=max_iter, block_size=b, max_basis=max_basis, seed=seed,
        probe=deflation_probe(n, k, _KRYLOV_CHECK["check_block"], 12345),
    )
    w, V, AV = _descending_with_images(theta, U, info["AU"])
    seconds = time.perf_counter() - t0
    check = verify_eigenpairs(
        matmat, n, k, w, V, tol=tol, norm_estimate=info["scale"], AU=AV, dtype_eps=dtype_eps,
        probe=info.get("probe"), **_KRYLOV_CHECK,
    )
    detail = f"block size {b}"
    if not info["converged"]:
        detail += f", {info['why']} {info['products']} products"
    report.attempts.append(Attempt("lanczos", detail, seconds, info["products"], check))
    _publish(report)
    if not check.ok:
        _raise(report, tol, max_iter)
    return theta, U


def _ritz_residual(
    Q: NDArray[np.float64], AQ: NDArray[np.float64], S: NDArray[np.float64],
    theta: NDArray[np.float64],
) -> float:
    """``max_j ‖(AQ) s_j − θ_j Q s_j‖`` (true residuals of the Ritz pairs), without forming ``Q S``.

    ``R = (AQ) S`` is made column-major and ``Q (S θ)`` subtracted from it in place by one
    BLAS ``dgemm`` (``beta = 1``): one n×k array instead of four (``QS``, ``(AQ)S``, ``QSθ``
    and their difference). ``Q`` and ``AQ`` are column-major column ranges.
    """
    R = (S.T @ AQ.T).T  # column-major n×k
    R = scipy.linalg.blas.dgemm(-1.0, Q, S * theta, beta=1.0, c=R, overwrite_c=True)
    return float(np.sqrt(np.einsum("ij,ij->j", R, R).max()))  # no n×k temporary of R·R


def _block_lanczos(
    matmat: MatMat,
    n: int,
    k: int,
    *,
    tol: float = 1e-10,
    max_iter: int | None = None,
    block_size: int = 1,
    max_basis: int | None = None,
    seed: int = 0,
    start: NDArray[np.float64] | None = None,
    probe: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], dict]:
    """The iteration of :func:`lanczos_eigh`, unverified: ascending ``θ``, ``U`` and a status dict.

    ``start`` (n×s, optional) are directions to put first in the start block
    (e.g. eigenvectors a previous run missed); the block is at least ``s`` wide.
    ``probe`` (n×p, optional) is multiplied along with the first block but not
    used by the iteration: the verification's random block
    (:func:`kpca_lib._verify.deflation_probe`), which then costs no pass of its own.
    The status has ``converged`` (bool), ``why`` (text), ``products`` (int),
    ``scale`` (largest ``|θ|`` seen, a lower bound of ``‖A‖``), ``AU`` and, with
    ``probe`` on the iterative path, ``probe``: ``(probe, A @ probe)``.
    """
    b = max(1, int(block_size))
    if start is not None:
        b = max(b, start.shape[1])
    m_max = max(2 * k + 20, k + 40) if max_basis is None else int(max_basis)
    m_max = max(m_max, k + 2 * b)
    if n <= max(_SMALL, 2 * m_max):
        A = _materialize(matmat, n)
        w, V, A, _ = _dense_top(A, k, overwrite=True)
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        return w, V, {"converged": True, "why": "", "products": n, "scale": scale, "AU": A @ V}
    max_iter = max(1000, 50 * k) if max_iter is None else int(max_iter)
    rng = np.random.default_rng(seed)

    # Column-major: a basis column is contiguous, and the columns a run never reaches are
    # never touched (never resident memory).
    Q = np.empty((n, m_max + b), order="F")
    AQ = np.empty((n, m_max + b), order="F")
    H = np.zeros((m_max + b, m_max + b))
    block = rng.standard_normal((n, b))
    if start is not None and start.shape[1]:
        block[:, : start.shape[1]] = start
    block = _orthonormal_block(block, np.empty((n, 0)), rng, 1.0)
    m = 0  # current basis size
    n_products = 0
    scale = 0.0
    best, since_best = np.inf, 0  # to detect stagnation at the rounding floor
    patience = max(50, 2 * m_max)
    images: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
    while True:
        j = block.shape[1]
        if probe is not None and not images:
            W = matmat(np.hstack([block, probe]))
            images["probe"] = (probe, W[:, j:])
            W = W[:, :j]
        else:
            W = matmat(block)
        n_products += j
        Q[:, m : m + j] = block
        AQ[:, m : m + j] = W
        # New columns of H = Qᵀ A Q, symmetrised.
        H[: m + j, m : m + j] = Q[:, : m + j].T @ W
        H[m : m + j, : m] = H[: m, m : m + j].T
        H[m : m + j, m : m + j] = 0.5 * (H[m : m + j, m : m + j] + H[m : m + j, m : m + j].T)
        m += j
        theta_all, S = np.linalg.eigh(H[:m, :m])
        scale = max(scale, float(np.max(np.abs(theta_all))), np.finfo(float).tiny)
        top = S[:, -k:] if m >= k else S
        theta = theta_all[-top.shape[1] :]
        worst = _ritz_residual(Q[:, :m], AQ[:, :m], top, theta) / scale if m >= k else np.inf
        if worst <= tol:
            status: dict = {"converged": True, "why": ""}
            break
        if worst < 0.5 * best:
            best, since_best = worst, 0
        else:
            since_best += j
        if n_products >= max_iter or since_best > patience:
            why = "stagnated after" if since_best > patience else "did not converge in"
            status = {"converged": False, "why": why, "worst": worst}
            break
        W = _orthonormal_block(W.copy(), Q[:, :m], rng, scale)
        if m + W.shape[1] > m_max:
            # Thick restart: keep the best Ritz vectors (with their images under A).
            keep = min(m, m_max - W.shape[1], max(k + b, (m_max + k) // 2))
            Sk = S[:, -keep:]
            Q[:, :keep] = Q[:, :m] @ Sk
            AQ[:, :keep] = AQ[:, :m] @ Sk
            H[:keep, :keep] = np.diag(theta_all[-keep:])
            m = keep
            W = _orthonormal_block(W, Q[:, :m], rng, scale)
        block = W
    U = Q[:, :m] @ top
    del Q  # the basis, its image and both results are never resident at once
    return theta, U, {
        **status, "products": n_products, "scale": scale, "AU": AQ[:, :m] @ top, **images,
    }

