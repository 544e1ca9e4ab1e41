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
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

__all__ = [
    "Verification",
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


def residual_norms(
    AU: NDArray[np.float64], U: NDArray[np.float64], theta: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``‖A u_j − θ_j u_j‖`` for every column, with one n×k temporary (not three).

    At large ``k`` the temporaries of ``np.linalg.norm(AU − U·θ, axis=0)`` were the
    fit's peak memory after the kernel.
    """
    R = U * theta
    np.subtract(AU, R, out=R)
    return np.sqrt(np.einsum("ij,ij->j", R, R))


def _project_out(Z: NDArray[np.float64], U: NDArray[np.float64]) -> NDArray[np.float64]:
    for _ in range(2):
        Z -= U @ (U.T @ Z)
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


def verify_eigenpairs(
    matmat: MatMat,
    n: int,
    k: int,
    eigenvalues: NDArray[np.float64],
    eigenvectors: NDArray[np.float64],
    *,
    tol: float,
    norm_estimate: float | None = None,
    matrix_norm: float | None = None,
    dtype_eps: float = float(np.finfo(np.float64).eps),
    AU: NDArray[np.float64] | None = None,
    check_block: int = 8,
    min_passes: int = 2,
    max_passes: int = 8,
    sketch_above: int = 64,
    sketch_probes: int = 16,
    seed: int = 12345,
    probe: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
) -> Verification:
    """Check that ``(eigenvalues, eigenvectors)`` are the ``k`` largest eigenpairs of ``A``.

    Parameters
    ----------
    matmat : callable
        ``matmat(V) = A @ V`` for ``V`` of shape (n, b).
    n, k : int
        Matrix size and number of requested eigenpairs.
    eigenvalues : ndarray of shape (k,)
        Should be descending.
    eigenvectors : ndarray of shape (n, k)
    tol : float
        Relative residual tolerance: ``‖A u − θ u‖ ≤ tol·‖A‖`` (see :func:`residual_bound`).
    norm_estimate : float, optional
        Estimate of ``‖A‖₂`` (a lower bound keeps the check strict); the largest
        ``|θ|`` and the deflated Ritz values also count.
    matrix_norm : float, optional
        Norm of the stored matrix, which sets the rounding level of products.
    dtype_eps : float
        Machine epsilon of the stored matrix (``2.2e-16`` float64, ``1.2e-7`` float32).
    AU : ndarray of shape (n, k), optional
        ``A @ eigenvectors`` if the solver has it: Krylov solvers keep the
        products ``A q_j`` of their basis vectors, and ``A (Q s) = (AQ) s`` by
        linearity, so this is a genuine residual (whatever ``Q``'s
        orthonormality) at the rounding error of the combination; it saves
        ``k`` products. Default: computed here.
    check_block : int
        Random vectors of the deflation check (one is enough to find a missed
        eigenvalue, which is the largest of the complement; a block costs more
        per pass with thin products).
    min_passes, max_passes : int
        Products with ``A`` (the first shared with the residual check) of the deflation check.
    sketch_above, sketch_probes : int
        With more than ``sketch_above`` pairs and no ``AU``, the residual and
        orthonormality checks use ``sketch_probes`` Gaussian probes (Frobenius
        norms, which bound every column's residual; ``O(n²)`` instead of the
        ``O(n²k)`` of forming ``A U`` and ``UᵀU``).
    seed : int
        Seed of the random block (reproducible results).
    probe : tuple of two ndarrays of shape (n, p), optional
        ``(Z₀, A @ Z₀)``: the deflation check's random block, with
        ``p = min(check_block, n − k)``, and its product, computed beforehand
        (:func:`deflation_probe`; a solver multiplies it along with its first
        block, which saves a pass). ``Z₀`` must be drawn independently of the
        solver. Requires ``AU``.

    Returns
    -------
    Verification
    """
    start = time.perf_counter()
    report = Verification(ok=False)
    theta = np.asarray(eigenvalues, dtype=np.float64)
    U = np.asarray(eigenvectors, dtype=np.float64)
    if theta.shape != (k,) or U.shape != (n, k):
        report.failures.append(
            f"wrong number of eigenpairs: {theta.shape[0] if theta.ndim == 1 else theta.shape} "
            f"eigenvalues and eigenvectors of shape {U.shape} for k = {k}, n = {n}"
        )
        report.seconds = time.perf_counter() - start
        return report
    if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(U))):
        report.failures.append("non-finite eigenvalues or eigenvectors (NaN or inf)")
        report.seconds = time.perf_counter() - start
        return report
    if k > 1 and np.any(np.diff(theta) > 0):
        report.failures.append("eigenvalues are not in descending order")
    rng = np.random.default_rng(seed)
    # Many pairs without A·U: check ‖UᵀU − I‖_F and ‖AU − UΘ‖_F (≥ every column's residual)
    # through Gaussian probes G (E‖M g‖² = ‖M‖_F²), at O(n²·s) instead of O(n²·k).
    G = rng.standard_normal((k, sketch_probes)) if (AU is None and k > sketch_above) else None
    if G is None:
        report.orthonormality = float(np.abs(U.T @ U - np.eye(k)).max()) if k else 0.0
        what = "max|UᵀU − I|"
    else:
        E = U.T @ (U @ G) - G
        report.orthonormality = float(np.sqrt(np.sum(E * E) / sketch_probes))
        what = f"‖UᵀU − I‖_F (estimated with {sketch_probes} random probes)"
    if report.orthonormality > ORTHONORMALITY_TOL:
        report.failures.append(
            f"eigenvectors are not orthonormal: {what} = {report.orthonormality:.2g} "
            f"> {ORTHONORMALITY_TOL:.0e}"
        )

    p = min(check_block, n - k)
    Z = np.empty((n, 0))
    AZ: NDArray[np.float64] | None = None
    if probe is not None:
        if AU is None or any(np.shape(a) != (n, max(p, 0)) for a in probe):
            raise ValueError(
                f"probe must be two arrays of shape ({n}, {max(p, 0)}) and needs AU; got "
                f"shapes {[np.shape(a) for a in probe]}{' without AU' if AU is None else ''}"
            )
        if p > 0:
            Z, AZ = _probe_complement(probe, U, np.asarray(AU, dtype=np.float64))
    elif p > 0:
        Z = _project_out(rng.standard_normal((n, p)), U)
        Z = np.linalg.qr(Z)[0]
    if AU is not None:
        AU = np.asarray(AU, dtype=np.float64)
        if AZ is None:
            AZ = matmat(Z) if p > 0 else np.empty((n, 0))
        report.n_products += p
        residuals = residual_norms(AU, U, theta)
    elif G is None:
        Y = matmat(np.hstack([U, Z]))
        report.n_products += k + p
        AU, AZ = Y[:, :k], Y[:, k:]
        residuals = residual_norms(AU, U, theta)
    else:
        Y = matmat(np.hstack([U @ G, Z]))
        report.n_products += sketch_probes + p
        RG, AZ = Y[:, :sketch_probes] - U @ (theta[:, None] * G), Y[:, sketch_probes:]
        residuals = np.array([np.sqrt(np.sum(RG * RG) / sketch_probes)])
    report.max_residual = float(residuals.max()) if k else 0.0
    norm = max(
        float(np.abs(theta).max()) if k else 0.0,
        0.0 if norm_estimate is None else float(norm_estimate),
    )

    deflated_top = None
    missed = None
    if p > 0:
        # Block Lanczos (full Rayleigh–Ritz) on P A P, P = I − UUᵀ; Z ⟂ U so P Z = Z.
        Q, AQ = Z, _project_out(AZ, U)
        passes, width = 1, p
        while True:
            H = Q.T @ AQ
            H = 0.5 * (H + H.T)
            mu, S = np.linalg.eigh(H)
            norm = max(norm, float(np.abs(mu).max()))
            bound = residual_bound(norm, tol, n, dtype_eps=dtype_eps, matrix_norm=matrix_norm)
            slack = 2.0 * bound
            top = S[:, -1:]
            rho = float(np.linalg.norm(AQ @ top - (Q @ top) * mu[-1]))
            deflated_top = float(mu[-1])
            if k and deflated_top > theta[-1] + slack:
                above = mu > theta[-1] + slack
                missed = Q @ S[:, above]
                break
            resolved = (not k) or deflated_top + rho <= theta[-1] + slack
            if passes >= max_passes or (passes >= min_passes and resolved) or Q.shape[1] >= n - k:
                break
            W = AQ[:, -width:].copy()
            W = _project_out(_project_out(W, U), Q)
            W, R = np.linalg.qr(W)
            # Stop early only if the new directions are zero to float64 precision (the
            # complement's Krylov space is exhausted). Small is not enough: a missed
            # eigenvalue far below ‖A‖ yet above θ_k (or below a float32 matrix's rounding)
            # shows in a random block with a weight of about 1/√n, and needs the passes.
            keep = np.abs(np.diag(R)) > EXHAUSTED * max(norm, np.finfo(float).tiny)
            if not np.any(keep):
                break  # the Krylov space of the complement is exhausted: exact
            W = _project_out(W[:, keep], U)
            W = np.linalg.qr(_project_out(W, Q))[0]
            AW = matmat(W)
            report.n_products += W.shape[1]
            passes, width = passes + 1, W.shape[1]
            Q = np.hstack([Q, W])
            AQ = np.hstack([AQ, _project_out(AW, U)])
    report.deflated_top = deflated_top
    report.missed = missed

    bound = residual_bound(norm, tol, n, dtype_eps=dtype_eps, matrix_norm=matrix_norm)
    report.residual_bound = bound
    report.multiplicity = _cluster_size(theta, 2.0 * bound)
    if report.max_residual > bound:
        worst = int(np.argmax(residuals))
        which = (
            f"‖A u − θ u‖ = {report.max_residual:.3g} for eigenvalue {worst + 1} (θ = {theta[worst]:.6g})"
            if G is None
            else f"‖AU − UΘ‖_F ≈ {report.max_residual:.3g} (estimated with {sketch_probes} random probes)"
        )
        report.failures.append(
            f"residual too large: {which} > {bound:.3g} = max(tol·‖A‖, rounding level) "
            f"with tol = {tol:.2g}, ‖A‖ ≈ {norm:.4g}"
        )
    if missed is not None:
        report.failures.append(
            f"missed eigenvalue(s): the complement of the {k} returned eigenvectors still holds "
            f"{missed.shape[1]} direction(s) with Rayleigh quotient up to {deflated_top:.6g} > "
            f"θ_k = {theta[-1]:.6g} (a repeated or clustered eigenvalue the solver did not "
            "resolve)"
        )
    report.ok = not report.failures
    report.seconds = time.perf_counter() - start
    return report
