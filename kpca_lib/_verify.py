"""A posteriori verification of computed top eigenpairs of a symmetric matrix.

Given ``k`` computed pairs ``(θ_i, u_i)`` of a symmetric ``n×n`` matrix ``A``
(available only through ``matmat(V) = A @ V``), :func:`verify_eigenpairs`
checks, before any solver returns them:

* **shape and order**: exactly ``k`` finite values, descending, and ``n×k`` vectors;
* **orthonormality**: ``max|UᵀU − I| ≤ 1e-9``;
* **residuals**: ``‖A u_i − θ_i u_i‖ ≤ bound`` with ``bound = max(tol·‖A‖, floor)``,
  where ``floor = (10 + √n)·eps·matrix_norm`` is the rounding level of the *stored*
  matrix (``eps`` of its dtype, ``matrix_norm`` a norm of what is stored, e.g.
  the Frobenius norm of the uncentred float32 kernel): no product with a
  float32-stored matrix is more accurate than that (for many pairs without
  ``A U`` from the solver, this check and the previous one use Frobenius norms
  estimated with Gaussian probes: ``O(n²)`` work instead of ``O(n²k)``);
* **nothing missed** (repeated eigenvalues): block Lanczos on the deflated
  operator ``(I − UUᵀ) A (I − UUᵀ)``, started from a random block orthogonal
  to ``U``, must find no Ritz value above ``θ_k`` (beyond the rounding slack).
  A copy of a repeated eigenvalue that a Krylov solver missed lies entirely in
  the complement of ``U``, where it is the largest eigenvalue: the check sees
  it at once. This is a randomized check (a Ritz value is a lower bound of the
  largest eigenvalue of the complement; the block grows the Krylov space until
  the largest Ritz value is resolved below ``θ_k`` or a pass limit), not a
  proof; the residual and orthonormality checks are exact.

The first product with ``A`` is shared by the residual check and the
deflation check (``A @ [U, Z]``), so the whole verification usually costs two
passes over the matrix; a Krylov solver passes its own ``A U`` (kept by
linearity from its basis products), and the check then costs only the
deflation products. A solver can also multiply the deflation check's random
block along with its own first product (:func:`deflation_probe`, the ``probe``
argument): the check then starts from ``(I − UUᵀ) Z₀`` with its image
``A Z₀ − (A U)(UᵀZ₀)``, by linearity, and saves one pass over the matrix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from ._xp import T, column_norms, device, hstack, namespace, random_block, take_columns, to_host

__all__ = [
    "Verification",
    "VerifyOptions",
    "verify_eigenpairs",
    "deflation_probe",
    "residual_bound",
    "ORTHONORMALITY_TOL",
    "EXHAUSTED",
]

#: Largest accepted ``max|UᵀU − I|`` (the vectors are float64 whatever the matrix's dtype).
ORTHONORMALITY_TOL = 1e-9
#: The deflation check ends early when its new directions have images below this times
#: ‖A‖: zero to float64 precision. (It was 1e-10, which let a missed eigenvalue of up to
#: about 1e-10·√n·‖A‖ through when the requested ones were that small.)
EXHAUSTED = 1e-14

MatMat = Callable[[NDArray[np.float64]], NDArray[np.float64]]


@dataclass
class Verification:
    """Outcome of :func:`verify_eigenpairs` (all norms are absolute).

    Attributes
    ----------
    ok : bool
        Every check passed.
    failures : list of str
        One sentence per failed check, with the numbers.
    max_residual : float
        Largest ``‖A u_i − θ_i u_i‖``.
    residual_bound : float
        The bound it was compared with.
    orthonormality : float
        ``max|UᵀU − I|``.
    deflated_top : float or None
        Largest Ritz value found in the complement of ``U`` (``None`` if ``k = n``).
    missed : ndarray of shape (n, m) or None
        Ritz vectors of the complement with Ritz values above ``θ_k`` (directions
        the solver missed), to restart a solver from.
    multiplicity : int
        Size of the largest cluster of returned eigenvalues equal within the
        residual bound (a block solver needs a larger block than this).
    n_products : int
        Matrix–vector products spent verifying.
    seconds : float
        Wall time spent verifying.
    """

    ok: bool
    failures: list[str] = field(default_factory=list)
    max_residual: float = float("nan")
    residual_bound: float = float("nan")
    orthonormality: float = float("nan")
    deflated_top: float | None = None
    missed: NDArray[np.float64] | None = None
    multiplicity: int = 0
    n_products: int = 0
    seconds: float = 0.0


def residual_bound(
    norm_estimate: float, tol: float, n: int, *, dtype_eps: float, matrix_norm: float | None
) -> float:
    """``max(tol·‖A‖, (10 + √n)·eps·matrix_norm)``: the requested accuracy, or the storage's rounding level.

    ``matrix_norm`` defaults to ``norm_estimate``; pass the norm of what is
    stored when it is larger (e.g. an uncentred kernel applied with centring),
    since the rounding errors of a product scale with it.
    """
    stored = norm_estimate if matrix_norm is None else max(norm_estimate, matrix_norm)
    # A product y = A·u in the storage precision: rounding u costs eps·‖A‖₂, the sums of
    # length n about sqrt(n)·eps·‖|A||u|‖ ≤ sqrt(n)·eps·‖A‖_F (random-walk accumulation).
    floor = (10.0 + np.sqrt(n)) * dtype_eps * stored + 50.0 * n * np.finfo(np.float64).tiny
    return max(tol * norm_estimate, floor)


def _cluster_size(eigenvalues: NDArray[np.float64], width: float) -> int:
    """Largest number of consecutive (sorted) values within ``width`` of the cluster's first."""
    if eigenvalues.size == 0:
        return 0
    best, start = 1, 0
    for i in range(1, eigenvalues.size):
        while eigenvalues[start] - eigenvalues[i] > width:
            start += 1
        best = max(best, i - start + 1)
    return best


def residual_norms(AU: Any, U: Any, theta: Any) -> Any:
    """``‖A u_j − θ_j u_j‖`` for every column, with one n×k temporary (not three).

    At large ``k`` the temporaries of ``np.linalg.norm(AU − U·θ, axis=0)`` were the
    fit's peak memory after the kernel. Any namespace; ``theta`` in ``U``'s.
    """
    xp = namespace(U)
    if xp is np:
        R = U * theta
        np.subtract(AU, R, out=R)
        return column_norms(xp, R)
    return column_norms(xp, AU - U * theta[None, :])


def _project_out(Z: Any, U: Any, xp: ModuleType = np) -> Any:
    Ut = T(xp, U)
    for _ in range(2):
        Z = Z - U @ (Ut @ Z)
    return Z


def deflation_probe(n: int, k: int, check_block: int, seed: int) -> NDArray[np.float64]:
    """The random block (n×p, ``p = min(check_block, n − k)``) a solver may multiply early.

    It is drawn from its own seed, independently of the solver's start, and
    must not depend on the solver's result (see ``probe`` in :func:`verify_eigenpairs`).
    """
    return np.random.default_rng(seed).standard_normal((n, max(min(check_block, n - k), 0)))


def _probe_complement(
    probe: tuple[NDArray[np.float64], NDArray[np.float64]],
    U: NDArray[np.float64],
    AU: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    """An orthonormal basis ``Z`` of ``(I − UUᵀ) Z₀`` and ``A Z``, by linearity from ``A Z₀`` and ``A U``.

    ``Z₀ − U C = Z R`` (two projections, then QR), so ``A Z = (A Z₀ − (A U) C) R⁻¹``.
    ``A Z`` is ``None`` (the caller multiplies) if ``R`` is too ill-conditioned for that.
    (NumPy only: the block Lanczos solver, which multiplies the probe, is NumPy's.)
    """
    Z0, AZ0 = probe
    C = U.T @ Z0
    Z = Z0 - U @ C
    C2 = U.T @ Z
    Z -= U @ C2
    C += C2
    Z, R = np.linalg.qr(Z)
    d = np.abs(np.diag(R))
    if d.size == 0 or d.min() <= 1e-6 * d.max():
        return Z, None
    AZ = scipy.linalg.solve_triangular(R, (AZ0 - AU @ C).T, trans="T").T
    return Z, np.ascontiguousarray(AZ)


# -- the named checks -------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyOptions:
    """How thorough the check of the complement is (see :func:`verify_eigenpairs`)."""

    check_block: int = 8
    min_passes: int = 2
    max_passes: int = 8
    sketch_above: int = 64
    sketch_probes: int = 16
    seed: int = 12345
    orthonormality_tol: float = ORTHONORMALITY_TOL


@dataclass
class Pairs:
    """What every check reads: the pairs, in their namespace, and the host copy of ``θ``."""

    matmat: MatMat
    n: int
    k: int
    theta: Any  # (k,), in U's namespace
    U: Any  # (n, k)
    host: NDArray[np.float64]  # θ on the host
    xp: ModuleType


def check_shape(p: Pairs) -> str | None:
    """Exactly ``k`` eigenvalues and ``n×k`` vectors."""
    if tuple(p.theta.shape) == (p.k,) and tuple(p.U.shape) == (p.n, p.k):
        return None
    got = p.theta.shape[0] if len(p.theta.shape) == 1 else tuple(p.theta.shape)
    return (
        f"wrong number of eigenpairs: {got} eigenvalues and eigenvectors of shape "
        f"{tuple(p.U.shape)} for k = {p.k}, n = {p.n}"
    )


def check_finite(p: Pairs) -> str | None:
    """No NaN or infinity anywhere."""
    if np.all(np.isfinite(p.host)) and bool(p.xp.all(p.xp.isfinite(p.U))):
        return None
    return "non-finite eigenvalues or eigenvectors (NaN or inf)"


def check_descending(p: Pairs) -> str | None:
    """The eigenvalues in descending order."""
    if p.k > 1 and np.any(np.diff(p.host) > 0):
        return "eigenvalues are not in descending order"
    return None


def measure_orthonormality(p: Pairs, G: Any, opts: VerifyOptions) -> tuple[float, str | None]:
    """``max|UᵀU − I|``, or ``‖UᵀU − I‖_F`` estimated with the probes ``G`` (many pairs)."""
    xp, U = p.xp, p.U
    if not p.k:
        return 0.0, None
    if G is None:
        eye = xp.eye(p.k, dtype=U.dtype, device=device(U)) if xp is not np else np.eye(p.k)
        value = float(xp.max(xp.abs(T(xp, U) @ U - eye)))
        what = "max|UᵀU − I|"
    else:
        E = T(xp, U) @ (U @ G) - G
        value = float(xp.sum(E * E) / opts.sketch_probes) ** 0.5
        what = f"‖UᵀU − I‖_F (estimated with {opts.sketch_probes} random probes)"
    if value > opts.orthonormality_tol:
        return value, (
            f"eigenvectors are not orthonormal: {what} = {value:.2g} > {opts.orthonormality_tol:.0e}"
        )
    return value, None


@dataclass
class _Start:
    """The first product's outcome: residuals and the complement's first block with its image."""

    residuals: NDArray[np.float64]  # host
    Z: Any
    AZ: Any
    n_products: int


def first_product(
    p: Pairs, AU: Any, G: Any, opts: VerifyOptions, probe: tuple | None, rng: np.random.Generator
) -> _Start:
    """Residuals ``‖A u − θ u‖`` and the complement's random block ``Z ⟂ U`` with ``A Z``.

    One product ``A [U, Z]`` (``A [UG, Z]`` with sketch probes ``G``); none for ``U``
    when the solver passes ``AU``, and none for ``Z`` when it multiplied ``probe``.
    """
    xp, U, n, k = p.xp, p.U, p.n, p.k
    width = min(opts.check_block, n - k)
    Z = AZ = None
    if probe is not None:
        if AU is None or any(np.shape(a) != (n, max(width, 0)) for a in probe):
            raise ValueError(
                f"probe must be two arrays of shape ({n}, {max(width, 0)}) and needs AU; got "
                f"shapes {[np.shape(a) for a in probe]}{' without AU' if AU is None else ''}"
            )
        if width > 0:
            Z, AZ = _probe_complement(probe, U, AU)
    elif width > 0:
        Z = _project_out(random_block(rng, n, width, U), U, xp)
        Z = xp.linalg.qr(Z)[0]
    products = 0
    if AU is not None:
        if Z is not None and AZ is None:
            AZ = p.matmat(Z)
        products = max(width, 0)  # a probe multiplied beforehand counts too
        residuals = residual_norms(AU, U, p.theta)
    elif G is None:
        Y = p.matmat(U if Z is None else hstack(xp, [U, Z]))
        products = k + max(width, 0)
        AU, AZ = Y[:, :k], (None if Z is None else Y[:, k:])
        residuals = residual_norms(AU, U, p.theta)
    else:
        UG = U @ G
        Y = p.matmat(UG if Z is None else hstack(xp, [UG, Z]))
        s = opts.sketch_probes
        products = s + max(width, 0)
        RG = Y[:, :s] - U @ (p.theta[:, None] * G)
        AZ = None if Z is None else Y[:, s:]
        residuals = xp.reshape(xp.sum(RG * RG) / s, (1,)) ** 0.5
    return _Start(to_host(residuals), Z, AZ, products)


@dataclass
class Complement:
    """What the block Krylov search of ``(I − UUᵀ) A (I − UUᵀ)`` found."""

    top: float | None = None  # largest Ritz value
    missed: Any = None  # Ritz vectors above θ_k
    norm: float = 0.0  # largest |Ritz value| seen (a lower bound of ‖A‖)
    n_products: int = 0


def search_complement(
    p: Pairs, Z: Any, AZ: Any, norm: float, bound: Callable[[float], float], opts: VerifyOptions
) -> Complement:
    """Block Lanczos (full Rayleigh–Ritz) on ``P A P``, ``P = I − UUᵀ``, from ``Z ⟂ U``.

    Stops at a Ritz value above ``θ_k + 2·bound`` (a missed eigenvalue: its Ritz
    vectors are returned), when the largest is resolved below it after
    ``min_passes``, at ``max_passes``, or when the Krylov space is exhausted.
    """
    xp, U = p.xp, p.U
    out = Complement(norm=norm)
    theta_k = float(p.host[-1]) if p.k else -np.inf
    Q, AQ = Z, _project_out(AZ, U, xp)
    passes, width = 1, Z.shape[1]
    while True:
        H = T(xp, Q) @ AQ
        mu_all, S = xp.linalg.eigh(0.5 * (H + T(xp, H)))
        mu = to_host(mu_all)
        out.norm = max(out.norm, float(np.abs(mu).max()))
        slack = 2.0 * bound(out.norm)
        top = S[:, -1:]
        rho = float(xp.sum((AQ @ top - (Q @ top) * mu_all[-1]) ** 2)) ** 0.5
        out.top = float(mu[-1])
        if out.top > theta_k + slack:
            above = int(np.sum(mu > theta_k + slack))
            out.missed = Q @ S[:, S.shape[1] - above :]
            return out
        resolved = (not p.k) or out.top + rho <= theta_k + slack
        if passes >= opts.max_passes or (passes >= opts.min_passes and resolved):
            return out
        if Q.shape[1] >= p.n - p.k:
            return out
        W = _project_out(_project_out(AQ[:, AQ.shape[1] - width :], U, xp), Q, xp)
        W, R = xp.linalg.qr(W)
        # Stop early only if the new directions are zero to float64 precision (the
        # complement's Krylov space is exhausted). Small is not enough: a missed
        # eigenvalue far below ‖A‖ yet above θ_k (or below a float32 matrix's rounding)
        # shows in a random block with a weight of about 1/√n, and needs the passes.
        keep = np.flatnonzero(
            to_host(xp.abs(_diagonal(xp, R))) > EXHAUSTED * max(out.norm, np.finfo(float).tiny)
        )
        if keep.size == 0:
            return out  # the Krylov space of the complement is exhausted: exact
        if keep.size < W.shape[1]:
            W = take_columns(xp, W, keep)
        W = xp.linalg.qr(_project_out(_project_out(W, U, xp), Q, xp))[0]
        AW = p.matmat(W)
        out.n_products += W.shape[1]
        passes, width = passes + 1, W.shape[1]
        Q = hstack(xp, [Q, W])
        AQ = hstack(xp, [AQ, _project_out(AW, U, xp)])


def _diagonal(xp: ModuleType, R: Any) -> Any:
    return np.diag(R) if xp is np else xp.linalg.diagonal(R)


def check_residual(residuals: NDArray, bound: float, p: Pairs, norm: float, tol: float,
                   sketch: int | None) -> str | None:
    """Every residual within ``max(tol·‖A‖, rounding level)``."""
    worst = float(residuals.max()) if residuals.size else 0.0
    if worst <= bound:
        return None
    j = int(np.argmax(residuals))
    which = (
        f"‖A u − θ u‖ = {worst:.3g} for eigenvalue {j + 1} (θ = {p.host[j]:.6g})"
        if sketch is None
        else f"‖AU − UΘ‖_F ≈ {worst:.3g} (estimated with {sketch} random probes)"
    )
    return (
        f"residual too large: {which} > {bound:.3g} = max(tol·‖A‖, rounding level) "
        f"with tol = {tol:.2g}, ‖A‖ ≈ {norm:.4g}"
    )


def check_missed(c: Complement, p: Pairs) -> str | None:
    """No direction of the complement with a Rayleigh quotient above ``θ_k``."""
    if c.missed is None:
        return None
    return (
        f"missed eigenvalue(s): the complement of the {p.k} returned eigenvectors still holds "
        f"{c.missed.shape[1]} direction(s) with Rayleigh quotient up to {c.top:.6g} > "
        f"θ_k = {p.host[-1]:.6g} (a repeated or clustered eigenvalue the solver did not "
        "resolve)"
    )


def verify_eigenpairs(
    matmat: MatMat,
    n: int,
    k: int,
    eigenvalues: Any,
    eigenvectors: Any,
    *,
    tol: float,
    norm_estimate: float | None = None,
    matrix_norm: float | None = None,
    dtype_eps: float = float(np.finfo(np.float64).eps),
    AU: Any = None,
    options: VerifyOptions | None = None,
    probe: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    **option_overrides: Any,
) -> Verification:
    """Check that ``(eigenvalues, eigenvectors)`` are the ``k`` largest eigenpairs of ``A``.

    Written once for every Array API namespace: the arrays stay in the namespace
    and on the device of ``eigenvectors`` (NumPy arrays are checked in float64).

    Parameters
    ----------
    matmat : callable
        ``matmat(V) = A @ V`` for ``V`` of shape (n, b), in ``V``'s namespace.
    n, k : int
        Matrix size and number of requested eigenpairs.
    eigenvalues : array of shape (k,)
        Should be descending.
    eigenvectors : array of shape (n, k)
    tol : float
        Relative residual tolerance: ``‖A u − θ u‖ ≤ tol·‖A‖`` (see :func:`residual_bound`).
    norm_estimate : float, optional
        Estimate of ``‖A‖₂`` (a lower bound keeps the check strict); the largest
        ``|θ|`` and the deflated Ritz values also count.
    matrix_norm : float, optional
        Norm of the stored matrix, which sets the rounding level of products.
    dtype_eps : float
        Machine epsilon of the stored matrix (``2.2e-16`` float64, ``1.2e-7`` float32).
    AU : array of shape (n, k), optional
        ``A @ eigenvectors`` if the solver has it: Krylov solvers keep the
        products ``A q_j`` of their basis vectors, and ``A (Q s) = (AQ) s`` by
        linearity, so this is a genuine residual (whatever ``Q``'s
        orthonormality) at the rounding error of the combination; it saves
        ``k`` products. Default: computed here.
    options : VerifyOptions, optional
        ``check_block`` random vectors of the deflation check; ``min_passes`` and
        ``max_passes`` products of it (the first shared with the residual check);
        with more than ``sketch_above`` pairs and no ``AU``, the residual and
        orthonormality checks use ``sketch_probes`` Gaussian probes (Frobenius
        norms, which bound every column's residual; ``O(n²)`` instead of
        ``O(n²k)``); ``seed`` of the random block; ``orthonormality_tol``.
        Keyword arguments of the same names override single fields.
    probe : tuple of two ndarrays of shape (n, p), optional
        ``(Z₀, A @ Z₀)``: the deflation check's random block, with
        ``p = min(check_block, n − k)``, and its product, computed beforehand
        (:func:`deflation_probe`; a solver multiplies it along with its first
        block, which saves a pass). ``Z₀`` must be drawn independently of the
        solver. Requires ``AU``. NumPy only.

    Returns
    -------
    Verification
    """
    start = time.perf_counter()
    opts = replace(options or VerifyOptions(), **option_overrides)
    xp = namespace(eigenvectors)
    if xp is np:
        eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
        eigenvectors = np.asarray(eigenvectors, dtype=np.float64)
        AU = None if AU is None else np.asarray(AU, dtype=np.float64)
    p = Pairs(matmat, n, k, eigenvalues, eigenvectors, to_host(eigenvalues), xp)
    report = Verification(ok=False)
    for check in (check_shape, check_finite):
        failure = check(p)
        if failure:  # every later check needs the shapes and finite values
            report.failures.append(failure)
            report.seconds = time.perf_counter() - start
            return report
    _add(report, check_descending(p))
    rng = np.random.default_rng(opts.seed)
    # Many pairs without A·U: check ‖UᵀU − I‖_F and ‖AU − UΘ‖_F (≥ every column's residual)
    # through Gaussian probes G (E‖M g‖² = ‖M‖_F²), at O(n²·s) instead of O(n²·k).
    G = None
    if AU is None and k > opts.sketch_above:
        G = random_block(rng, k, opts.sketch_probes, eigenvectors)
    report.orthonormality, failure = measure_orthonormality(p, G, opts)
    _add(report, failure)
    first = first_product(p, AU, G, opts, probe, rng)
    report.n_products = first.n_products
    report.max_residual = float(first.residuals.max()) if k else 0.0
    norm = max(float(np.abs(p.host).max()) if k else 0.0, float(norm_estimate or 0.0))

    def bound(norm: float) -> float:
        return residual_bound(norm, tol, n, dtype_eps=dtype_eps, matrix_norm=matrix_norm)

    complement = Complement(norm=norm)
    if first.Z is not None:
        complement = search_complement(p, first.Z, first.AZ, norm, bound, opts)
        report.n_products += complement.n_products
    report.deflated_top, report.missed = complement.top, complement.missed
    report.residual_bound = bound(complement.norm)
    report.multiplicity = _cluster_size(p.host, 2.0 * report.residual_bound)
    sketch = None if G is None else opts.sketch_probes
    _add(report, check_residual(first.residuals, report.residual_bound, p, complement.norm, tol,
                                sketch))
    _add(report, check_missed(complement, p))
    report.ok = not report.failures
    report.seconds = time.perf_counter() - start
    return report


def _add(report: Verification, failure: str | None) -> None:
    if failure:
        report.failures.append(failure)
