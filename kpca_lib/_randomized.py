"""The randomized eigensolver (``eigen_solver="randomized"``), verified like every other solver.

Randomized subspace iteration (Halko, Martinsson & Tropp, *Finding structure
with randomness*, SIAM Review 2011, algorithms 4.3–4.4 and 5.3), for the ``k``
largest eigenpairs of a symmetric ``n×n`` matrix ``A`` known only through
products ``matmat(V) = A @ V``:

1. a random Gaussian block ``Ω`` of ``l = k + p`` columns (``p`` oversampling
   columns) is orthonormalised: ``Q = qr(Ω)``;
2. each pass multiplies the block by ``A`` (one product with ``l`` columns),
   then re-orthonormalises: ``Q ← qr(A Q)``, the power iteration that makes
   the spectrum of the block decay faster;
3. after every pass, Rayleigh–Ritz on ``span(Q)``: the eigenpairs
   ``(θ, s)`` of ``H = Qᵀ(AQ)`` give Ritz pairs ``(θ, Qs)`` and their true
   residuals ``‖A Qs − θ Qs‖`` at no extra product (``A Qs = (AQ)s``).

It stops when at least ``2·iterated_power + 1`` passes are done (as many
products as scikit-learn's randomized solver, whose power iterations multiply
by ``K`` and ``Kᵀ``) **and** every one of the ``k`` wanted Ritz pairs has a
residual ``≤ tol·‖A‖``; so, unlike scikit-learn's, it returns no
approximation that could not be verified: ``iterated_power`` is a minimum,
not a fixed count, and the result goes through the same a-posteriori checks
as every solver (:func:`kpca_lib._verify.verify_eigenpairs`: count, order,
orthonormality, residuals, no eigenvalue above the ``k``-th missed).

A pass shrinks the error of the ``k``-th pair by about ``|λ_{l+1}/λ_k|``, so
a flat spectrum converges slowly; when the residuals measured over the last
passes predict too many more, the block is doubled (new random columns, up to
``max(4(k + p), k + 100)`` columns), which makes every pass contract more.

Two differences from scikit-learn's ``_randomized_eigsh(selection="module")``,
on purpose:

* the ``k`` *largest* eigenvalues are returned, not the ``k`` largest in
  magnitude: when negative Ritz values dominate the wanted positive ones
  (an indefinite kernel) the iteration runs on ``A + sI`` with the shift
  ``s = −(θ_min + ν)/2`` (``ν`` the largest unwanted Ritz value), so that the
  wanted end of the spectrum dominates; convergence is then slower (the
  unwanted part is wide), and a case that does not converge is refused;
* a result that fails verification is retried once with a larger block,
  started from the directions the check found missing, then refused
  (:class:`kpca_lib._eigen.EigenpairsNotVerifiedError`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._eigen import (
    _KRYLOV_CHECK,
    Attempt,
    SolverReport,
    _descending_with_images,
    orthonormality_tol,
)
from ._validation import check_iterated_power, check_random_state
from ._verify import residual_norms, verify_eigenpairs
from ._xp import T, hstack, namespace, random_block, to_host

__all__ = ["randomized_eigh", "randomized_attempts", "resolve_iterated_power"]

MatMat = Callable[[NDArray[np.float64]], NDArray[np.float64]]

_EPS64 = float(np.finfo(np.float64).eps)

#: Passes without halving the worst residual after which the iteration has stagnated.
_PATIENCE = 25

#: Default cap on the number of products: this many passes over the first block, or
#: _MIN_PRODUCTS, whichever is larger.
_MAX_PASSES, _MIN_PRODUCTS = 200, 4000

#: Every this many passes the contraction rate is measured; if more than _SLOW passes
#: would still be needed, the block is doubled.
_RATE_WINDOW, _SLOW = 10, 40


def resolve_iterated_power(iterated_power: int | str, n: int, k: int) -> int:
    """scikit-learn's ``"auto"``: 7 power iterations if ``k < 0.1·n``, else 4."""
    iterated_power = check_iterated_power(iterated_power)
    if iterated_power == "auto":
        return 7 if k < 0.1 * n else 4
    return int(iterated_power)


def _oversampling(k: int) -> int:
    return max(10, k // 4)


def randomized_eigh(
    matmat: MatMat,
    n: int,
    k: int,
    *,
    tol: float = 1e-10,
    max_iter: int | None = None,
    iterated_power: int | str = "auto",
    random_state: object = None,
    oversampling: int | None = None,
    start: Any = None,
    like: Any = None,
) -> tuple[Any, Any, dict]:
    """Randomized subspace iteration, unverified: ascending ``θ``, Ritz vectors ``U`` and a status.

    Written once for every Array API namespace: the blocks live in the namespace,
    dtype and device of ``like`` (default: a NumPy float64 array); the random
    start is drawn on the host, so a seed gives the same start everywhere.

    Parameters
    ----------
    matmat : callable
        ``matmat(V) = A @ V`` for a symmetric ``A`` and ``V`` of shape (n, b).
    n, k : int
        Matrix size and number of wanted eigenpairs (largest eigenvalues), ``1 <= k <= n``.
    tol : float, default=1e-10
        Stop when every wanted Ritz pair has ``‖A u − θ u‖ ≤ tol · max|θ|``.
    max_iter : int, optional
        Maximum number of matrix–vector products (a pass costs ``l``);
        default ``max(200·l, 4000)``.
    iterated_power : int or "auto", default="auto"
        Minimum number of power iterations (``2·iterated_power + 1`` passes).
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Seed of the random start block; ``None`` is a fixed seed (reproducible).
    oversampling : int, optional
        Extra block columns ``p`` (default ``max(10, k // 4)``).
    start : array of shape (n, s), optional
        Directions to put first in the start block (e.g. ones a previous run missed).
    like : array, optional
        An array of the namespace, device and dtype to work in.

    Returns
    -------
    theta : array of shape (k,), ascending
    U : array of shape (n, k), orthonormal columns
    info : dict
        ``converged`` (bool), ``why`` (text), ``products``, ``passes``,
        ``scale`` (largest ``|θ|`` seen), ``shift``, ``block`` and ``AU`` (``A @ U``).
    """
    if not 1 <= k <= n:
        raise ValueError(f"the number of eigenpairs k must be between 1 and n = {n}; got k = {k}.")
    like = np.empty(0) if like is None else like
    xp = namespace(like)
    q = resolve_iterated_power(iterated_power, n, k)
    check_random_state(random_state)
    rng = np.random.default_rng(0 if random_state is None else random_state)
    p = _oversampling(k) if oversampling is None else max(0, int(oversampling))
    s = 0 if start is None else start.shape[1]
    block = min(n, max(k + p, k + s))
    max_block = min(n, max(4 * (k + p), k + 100, block))
    min_passes = 2 * q + 1
    if max_iter is None:
        max_products = max(block * _MAX_PASSES, _MIN_PRODUCTS)
    else:
        max_products = max(int(max_iter), block)
    history: list[float] = []

    omega = random_block(rng, n, block, like)
    if s:
        omega = hstack(xp, [start, omega[:, s:]])
    Q = xp.linalg.qr(omega)[0]
    shift = 0.0
    scale = 0.0
    products = passes = 0
    best, since_best = np.inf, 0
    while True:
        Y = matmat(Q)
        if xp is np:
            Y = np.asarray(Y, dtype=np.float64)
        products += block
        passes += 1
        H = T(xp, Q) @ Y
        mu_all, S = xp.linalg.eigh(0.5 * (H + T(xp, H)))
        mu = to_host(mu_all)
        scale = max(scale, float(np.max(np.abs(mu))), np.finfo(float).tiny)
        top = S[:, S.shape[1] - k :]
        theta = mu_all[mu.shape[0] - k :]
        U = Q @ top
        AU = Y @ top
        worst = float(to_host(residual_norms(AU, U, theta)).max()) / scale
        history.append(worst)
        info = {
            "converged": False,
            "why": "",
            "products": products,
            "passes": passes,
            "scale": scale,
            "shift": shift,
            "block": block,
            "AU": AU,
            "worst": worst,
        }
        if passes >= min_passes and worst <= tol:
            info["converged"] = True
            return theta, U, info
        if worst < 0.9 * best:  # progress (slow contraction is still progress)
            best, since_best = worst, 0
        else:
            since_best += 1
        if products + block > max_products or (passes >= min_passes and since_best > _PATIENCE):
            info["why"] = "stagnated after" if since_best > _PATIENCE else "did not converge in"
            return theta, U, info
        # Negative Ritz values that dominate the wanted ones (an indefinite matrix): iterate
        # on A + shift·I, whose largest-magnitude end is then the wanted (largest) one. The
        # shift centres the unwanted part [μ_min, ν] (ν: the largest unwanted Ritz value)
        # on 0, so that it contracts as much as possible against the wanted end.
        top_wanted = float(mu[-k])
        if mu[0] < 0 and -mu[0] > max(top_wanted, 1e3 * _EPS64 * scale):
            nu = float(mu[-k - 1]) if mu.size > k else top_wanted
            shift = max(shift, -0.5 * (nu + float(mu[0])))
        if shift:
            Y = Y + shift * Q
        grow = _growth(history, passes, min_passes, tol, block, max_block)
        if grow:
            Y = hstack(xp, [Y, random_block(rng, n, grow, like)])
            block += grow
        Q = xp.linalg.qr(Y)[0]


def _growth(
    history: list[float], passes: int, min_passes: int, tol: float, block: int, max_block: int
) -> int:
    """Columns to add to the block: doubling it when convergence is measured to be slow."""
    if block >= max_block or passes < min_passes or passes % _RATE_WINDOW:
        return 0
    if len(history) <= _RATE_WINDOW:
        return 0
    then, now = history[-1 - _RATE_WINDOW], history[-1]
    if now <= tol:
        return 0
    rate = (now / then) ** (1.0 / _RATE_WINDOW) if then > 0 else 0.0
    needed = np.log(tol / now) / np.log(rate) if 0.0 < rate < 1.0 else np.inf
    return min(max_block, 2 * block) - block if needed > _SLOW else 0


def randomized_attempts(
    matmat: MatMat,
    n: int,
    k: int,
    tol: float | None,
    max_iter: int | None,
    report: SolverReport,
    matrix_norm: float | None,
    dtype_eps: float,
    *,
    iterated_power: int | str = "auto",
    random_state: object = None,
    like: Any = None,
) -> tuple[Any, Any] | None:
    """Randomized subspace iteration, verified; retried once with a larger block from the missed
    directions. Every run is recorded in ``report``; ``None`` if none verifies. Any namespace
    (``like``, as in :func:`randomized_eigh`)."""
    rtol = 1e-10 if tol is None else tol
    rtol = max(rtol, 10.0 * dtype_eps) if dtype_eps > _EPS64 else rtol
    check_random_state(random_state)
    rng = np.random.default_rng(0 if random_state is None else random_state)
    oversampling = _oversampling(k)
    start = None
    for attempt in range(2):
        t0 = time.perf_counter()
        seed = rng.integers(0, 2**63 - 1) if attempt else rng
        theta, U, info = randomized_eigh(
            matmat,
            n,
            k,
            tol=rtol,
            max_iter=max_iter,
            iterated_power=iterated_power,
            random_state=seed,
            oversampling=oversampling,
            start=start,
            like=like,
        )
        w, V, AV = _descending_with_images(theta, U, info["AU"])
        seconds = time.perf_counter() - t0
        check = verify_eigenpairs(
            matmat,
            n,
            k,
            w,
            V,
            tol=rtol,
            norm_estimate=info["scale"],
            AU=AV,
            matrix_norm=matrix_norm,
            dtype_eps=dtype_eps,
            seed=2000 + attempt,
            orthonormality_tol=orthonormality_tol(like, n),
            **_KRYLOV_CHECK,
        )
        detail = f"block size {info['block']}, {info['passes']} passes"
        if info["shift"]:
            detail += f", shift {info['shift']:.3g}"
        if not info["converged"]:
            detail += f", {info['why']} {info['products']} products"
        report.attempts.append(Attempt("randomized", detail, seconds, info["products"], check))
        if check.ok:
            return w, V
        if not info["converged"] and check.missed is None:
            break  # out of products or stagnated: a larger block would not help within max_iter
        start = check.missed
        missed = 0 if start is None else start.shape[1]
        oversampling = max(2 * oversampling, check.multiplicity + 1, missed + 1)
        if k + oversampling > n:
            oversampling = n - k
    return None
