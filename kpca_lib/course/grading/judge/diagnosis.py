"""Diagnoses of wrong answers: *which* slip, found by testing its relation to the right answer.

A check that fails should say what went wrong, not recite the formula. Every function here
compares a student's (decoded) answer with the trusted computation and tests a few
*relations* that real slips leave behind (a constant factor per column, a constant shift per
column, an exact ratio ``n/(n − 1)``, the smallest eigenvalues instead of the largest, a
feature count equal to ``C(2 + p, p)`` for ``d > 2``...). None of them looks at code, so they
apply to any answer showing the same relation.

A diagnosis is a :class:`Slip`: a ``code`` naming the relation (empty when the failure is not
recognised) and a ``message`` for the student. Messages never quote input values, so hidden
checks may show them. Checks use :func:`counted_once` so that one recognised slip costs one
check: a later check of the same question (public or hidden) that finds the *same* slip
passes and says where it was counted.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np

from .plain import CheckError, Slip

__all__ = [
    "components_taken",
    "Slip",
    "counted_once",
    "monomial_name",
    "identify_monomials",
    "diagnose_phi",
    "diagnose_count",
    "diagnose_cheaper",
    "diagnose_eigenvalues",
    "diagnose_directions",
    "diagnose_centering",
    "diagnose_projection",
    "column_fit",
]

TOL = 1e-6


def counted_once(slip: Slip | None, earlier: Iterable[tuple[str, Slip | None]], ok: str) -> str:
    """``ok`` if there is no slip; a pass naming where it was counted if an earlier check of the
    same question found the same recognised slip; otherwise :class:`CheckError` (the slip's message)."""
    if slip is None:
        return ok
    for where, prior in earlier:
        if slip.same_as(prior):
            return f"the same slip as in {where}, counted once, there: {slip.message}"
    raise CheckError(slip.message, cause=slip)


def _close(a: np.ndarray, b: np.ndarray, scale: float, tol: float = TOL) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or not np.all(np.isfinite(a)):
        return False
    return bool(np.max(np.abs(a - b), initial=0.0) <= tol * max(scale, 1e-300))


def _sup(x: float) -> str:
    return "" if x == 1 else str(int(x)).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _sub(i: int) -> str:
    return str(i).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


# --------------------------------------------------------------------------- q1: feature maps
def monomial_name(a: Sequence[int]) -> str:
    """``(2, 1)`` -> ``x₁²x₂``; the zero exponent -> ``1`` (the constant feature)."""
    parts = [f"x{_sub(i + 1)}{_sup(e)}" for i, e in enumerate(a) if e]
    return "".join(parts) or "1 (the constant)"


def _exponents(d: int, p: int) -> list[tuple[int, ...]]:
    """Every exponent vector of a monomial of degree ≤ p in d variables."""
    return [a for a in itertools.product(range(p + 1), repeat=d) if sum(a) <= p]


def _multinomial(a: Sequence[int], p: int) -> int:
    rest = p - sum(a)
    return math.factorial(p) // (math.factorial(rest) * math.prod(math.factorial(e) for e in a))


def identify_monomials(P: np.ndarray, X: np.ndarray, p: int) -> list[tuple[tuple[int, ...], float] | None]:
    """For each column of ``P``: ``(a, s)`` if it is ``s·x^a`` on the rows of ``X`` (|a| ≤ p), else ``None``."""
    return [None if f is None else f[:2] for f in _monomial_fits(P, X, p, 1e-7)]


def _monomial_fits(P: np.ndarray, X: np.ndarray, p: int,
                   tol: float) -> list[tuple[tuple[int, ...], float, float] | None]:
    """For each column of ``P``: ``(a, s, r)`` if it is ``s·x^a`` up to a relative residual
    ``r < tol`` on the rows of ``X`` (|a| ≤ p), else ``None``."""
    n, d = X.shape
    if d > 8 or not np.all(np.isfinite(P)):
        return [None] * P.shape[1]
    monos = {a: np.prod(X ** np.asarray(a, dtype=float), axis=1) for a in _exponents(d, p)}
    out: list[tuple[tuple[int, ...], float, float] | None] = []
    for j in range(P.shape[1]):
        c = P[:, j]
        norm_c = float(np.linalg.norm(c))
        best: tuple[float, tuple[int, ...], float] | None = None
        if norm_c > 0:
            for a, m in monos.items():
                s = float(m @ c) / float(m @ m)
                res = float(np.linalg.norm(c - s * m)) / norm_c
                if res < tol and (best is None or res < best[0]):
                    best = (res, a, s)
        out.append(None if best is None else (best[1], best[2], best[0]))
    return out


def diagnose_phi(PX: np.ndarray, PY: np.ndarray, X: np.ndarray, Y: np.ndarray, p: int, label: str,
                 *, name_count: bool, identity_ok: bool = False) -> Slip:
    """Why ``PX``, ``PY`` are not the polynomial feature map of degree ``p`` on ``X``, ``Y``: either
    ``PX @ PY.T`` is not ``(XYᵀ + 1)^p``, or (``identity_ok``) it is but with a wrong number of features.

    ``name_count``: the message may state the right number of features (not for the questions
    asking for D); it never states the formula, question 2's answer.
    Recognised codes: ``precision``, ``integer-inputs``, ``two-coordinates``, ``no-constant``,
    ``missing``, ``duplicates``, ``coefficients-unsquared``, ``coefficients-one``, ``coefficients``.
    """
    d = X.shape[1]
    D, D_true = PX.shape[1], math.comb(d + p, p)
    if not identity_ok and D == D_true:
        rounded = _low_precision(PX, PY, X, Y, p, label)
        if rounded is not None:
            return rounded
    both = np.vstack([PX, PY])
    found = identify_monomials(both, np.vstack([X, Y]), p)
    identified = all(f is not None for f in found)
    exps = [f[0] for f in found if f is not None]
    counts: dict[tuple[int, ...], int] = {}
    for a in exps:
        counts[a] = counts.get(a, 0) + 1
    missing = [a for a in _exponents(d, p) if a not in counts]
    missing.sort(key=lambda a: (sum(a), [-e for e in a]))
    dups = [a for a, c in counts.items() if c > 1]
    where = f"for d = {d}, p = {p}" if name_count else f"for p = {p}"
    has = f"{where} your map has {D} feature{'s' if D != 1 else ''}"
    count = ""
    if D != D_true:
        two = d > 2 and (D == math.comb(2 + p, p) or (identified and all(not any(a[2:]) for a in exps)))
        if two:
            return Slip("two-coordinates", (
                f"{has}; the polynomial feature map has {D_true}, one per monomial of "
                f"degree ≤ p in all d coordinates. Your count is that of d = 2 ({math.comb(2 + p, p)} "
                f"for p = {p}): your map uses only the first two coordinates of x."))
        count = (f"; the polynomial feature map has {D_true}, one per monomial of degree ≤ p"
                 if name_count else f", {'fewer' if D < D_true else 'more'} than the monomials of "
                 f"degree ≤ {p} in x₁, x₂")
    if identity_ok:
        lead = f"{label}(x)ᵀ{label}(y) = (xᵀy + 1)^{p}, but {has}{count}."
    else:
        lead = f"{label}(x)ᵀ{label}(y) is not (xᵀy + 1)^{p}" + (f": {has}{count}." if count else ".")
    if not identified:
        bad = [j + 1 for j, f in enumerate(found) if f is None]
        return Slip("", (
            f"{lead} Feature{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad[:5]))} "
            f"{'are not' if len(bad) > 1 else 'is not'} a single monomial (a number times a product of "
            f"coordinates) of degree ≤ {p}: each feature of the polynomial map is one."))
    if (0,) * d in missing:
        return Slip("no-constant", (
            f"{lead} There is no constant feature: (xᵀy + 1)^{p} has the constant term 1, which "
            "φ(x)ᵀφ(y) only produces with a feature that is constant."))
    if missing or dups:
        return _missing_or_duplicates(lead, missing, dups, counts, p)
    return _coefficients_slip(lead, found, p)  # the right monomials, each once


def _missing_or_duplicates(lead: str, missing: Sequence[tuple[int, ...]],
                           dups: Sequence[tuple[int, ...]], counts: dict[tuple[int, ...], int],
                           p: int) -> Slip:
    """The slip of a map whose features are monomials, but not each monomial of degree ≤ ``p``
    exactly once: some ``missing`` (sorted by degree), some in several features (``dups``, with
    their ``counts``). ``lead`` opens the message."""
    parts = []
    if missing:
        shown = ", ".join(monomial_name(a) for a in missing[:3])
        parts.append(f"{len(missing)} monomial{'s' if len(missing) > 1 else ''} of degree ≤ {p} "
                     f"{'are' if len(missing) > 1 else 'is'} missing (e.g. {shown})")
    if dups:
        parts.append(f"the monomial {monomial_name(dups[0])} appears in {counts[dups[0]]} features "
                     "(each monomial is one feature: merge them, adding their squared "
                     "coefficients)")
    text = "; ".join(parts)
    return Slip("missing" if missing else "duplicates", f"{lead} {text[0].upper()}{text[1:]}.")


def _coefficients_slip(lead: str, found: Sequence[tuple[tuple[int, ...], float] | None],
                       p: int) -> Slip:
    """The slip of a map with the right monomials, each once (``found``: each feature's exponents
    and coefficient): the coefficients are wrong. ``lead`` opens the message."""
    coef = {f[0]: abs(f[1]) for f in found if f is not None}
    wrong = [a for a, s in coef.items() if not math.isclose(s * s, _multinomial(a, p), rel_tol=1e-6)]
    if not wrong:  # the right map up to signs: cannot happen when the identity fails, but be safe
        return Slip("", lead)
    wrong.sort(key=lambda a: (sum(a), [-e for e in a]))
    if all(math.isclose(coef[a], _multinomial(a, p), rel_tol=1e-6) for a in wrong):
        a = wrong[0]
        return Slip("coefficients-unsquared", (
            f"{lead[:-1]}: your features are the right monomials, but each carries its multinomial coefficient itself (e.g. {_multinomial(a, p)}·{monomial_name(a)}). "
            "φ(x)ᵀφ(y) multiplies the coefficients of x and y, so each feature carries the square root "
            "of its multinomial coefficient."))
    if all(math.isclose(coef[a], 1.0, rel_tol=1e-6) for a in coef):
        return Slip("coefficients-one", (
            f"{lead[:-1]}: your features are the right monomials, but without coefficients (all ±1). Expanding (1 + x₁y₁ + …)^p, each monomial comes with a "
            "multinomial coefficient; each feature carries the square root of its coefficient."))
    shown = ", ".join(monomial_name(a) for a in wrong[:3])
    return Slip("coefficients", (
        f"{lead[:-1]}: your features are the right monomials, but {len(wrong)} of them ha{'ve' if len(wrong) > 1 else 's'} the wrong coefficient ({shown}"
        f"{', …' if len(wrong) > 3 else ''}). The square of a feature's coefficient is the multinomial "
        "coefficient of its monomial in the expansion of (1 + x₁y₁ + …)^p."))


def _relative_error(A: np.ndarray, B: np.ndarray) -> float:
    scale = max(1.0, float(np.max(np.abs(B))) if B.size else 1.0)
    return float(np.max(np.abs(A - B), initial=0.0)) / scale


def _low_precision(PX: np.ndarray, PY: np.ndarray, X: np.ndarray, Y: np.ndarray, p: int,
                   label: str) -> Slip | None:
    """The right map to a few digits only: each feature the right monomial with the right coefficient
    up to rounding noise (a float32 or float16 step), or with coefficients written to a few decimals;
    or the map of the coordinates truncated to whole numbers (an integer array on the way)."""
    d = X.shape[1]
    fits = _monomial_fits(np.vstack([PX, PY]), np.vstack([X, Y]), p, 1e-2)
    exps = [f[0] for f in fits if f is not None]
    if len(exps) == len(fits) == math.comb(d + p, p) and len(set(exps)) == len(exps):
        coef = max(abs(abs(f[1]) / math.sqrt(_multinomial(f[0], p)) - 1.0) for f in fits if f is not None)
        noise = max(f[2] for f in fits if f is not None)
        G = PX @ PY.T
        err = _relative_error(G, (X @ Y.T + 1.0) ** p)
        level = max(coef, noise)
        if level <= 1e-2 and noise > 1e-12:
            digits, kind = ("7", "float32 (single precision)") if level <= 1e-5 else ("3", "float16 (half precision)")
            return Slip("precision", (
                f"{label}(x)ᵀ{label}(y) agrees with (xᵀy + 1)^{p} to about {digits} significant digits only "
                f"(relative error {err:.1e}): your features are the right monomials with the right "
                f"coefficients, but rounded as {kind} rounds, not to float64's 16 digits. A step of your map "
                "computes in low precision (a float32 or float16 array, or .astype(np.float32)): compute "
                "in float64, NumPy's default."))
        if level <= 1e-2:
            shown = max(1, int(-math.log10(max(coef, 1e-16))))
            return Slip("coefficients-rounded", (
                f"{label}(x)ᵀ{label}(y) agrees with (xᵀy + 1)^{p} to about {shown} significant digits only "
                f"(relative error {err:.1e}): your features are the right monomials, but their coefficients "
                "are right to a few digits only (a square root written out as a decimal?). Compute each "
                "coefficient exactly, as the square root of the multinomial coefficient (np.sqrt or math.sqrt)."))
    Xt, Yt = np.trunc(X), np.trunc(Y)
    if _relative_error(PX @ PY.T, (Xt @ Yt.T + 1.0) ** p) <= 1e-9:
        return Slip("integer-inputs", (
            f"{label}(x)ᵀ{label}(y) is (xᵀy + 1)^{p} for the coordinates truncated to whole numbers: "
            "your map converts x to integers (an integer dtype, or an integer array the coordinates "
            "are written into), which drops their decimals. Keep the coordinates as floats."))
    return None


# --------------------------------------------------------------------------- q2: counting
_COUNT_RELATIONS = (
    ("exact-degree", lambda d, p: math.comb(d + p - 1, p),
     "the number of monomials of degree exactly p: the map also has every lower degree (down to the "
     "constant)"),
    ("no-constant", lambda d, p: math.comb(d + p, p) - 1,
     "one less than the right count: the constant monomial 1 is a feature too"),
    ("ordered-products", lambda d, p: sum(d**k for k in range(p + 1)),
     "the number of ordered products of at most p coordinates: x₁x₂ and x₂x₁ are the same monomial, "
     "one feature"),
    ("ordered-choices", lambda d, p: (d + 1) ** p,
     "the number of ordered choices of p factors among 1, x₁, …, x_d (a tensor power): x₁x₂ and x₂x₁ "
     "are the same monomial, one feature"),
    ("power", lambda d, p: d**p,
     "d^p, the number of ordered products of exactly p coordinates: the same monomial is counted several "
     "times and the lower degrees are missing"),
    ("pure-powers", lambda d, p: d * p + 1,
     "the count of the constant and the pure powers x_i^k only: the mixed monomials such as x₁x₂ are "
     "features too"),
    ("arrangements", lambda d, p: math.perm(d + p, p),
     "p! times the number of monomials: it counts ordered arrangements, each choice of p factors "
     "among 1, x₁, …, x_d once per order, but the order of the factors does not change a monomial "
     "(x₁x₂ = x₂x₁)"),
    ("extra-variable", lambda d, p: math.comb(d + p + 1, p),
     "the number of monomials of degree ≤ p in d + 1 variables: one variable too many (the constant "
     "feature 1 is the monomial of degree 0, not an extra variable)"),
    ("degree-below", lambda d, p: math.comb(d + p - 1, p - 1),
     "the number of monomials of degree ≤ p − 1: the monomials of degree exactly p are features too "
     "(a range over the degrees that stops one short?)"),
)

_INT64 = 2**63


def _wrap64(v: int) -> int:
    """``v`` as a NumPy int64 holds it: modulo 2⁶⁴, in [−2⁶³, 2⁶³)."""
    return (v + _INT64) % (2 * _INT64) - _INT64


def _int64_count(g: int, d: int, p: int) -> bool:
    """``g`` is what an int64 computation of C(d + p, p) gives (right when nothing overflows): the
    count itself wrapped, the product (d + 1)⋯(d + p) wrapped then divided by p!, or the steps
    D·(d + k)//k wrapped one by one; or any value int64 can hold, when the count cannot."""
    true = math.comb(d + p, p)
    if g == true:
        return True
    if not -_INT64 <= g < _INT64:
        return False
    if true >= _INT64 or g == _wrap64(true):
        return True
    f = math.factorial(p)
    W = _wrap64(math.perm(d + p, p))
    if W // f == g or abs(g * f - W) <= f + 1e-12 * abs(W):
        return True
    D = 1
    for k in range(1, p + 1):
        D = _wrap64(D * (d + k)) // k
    return D == g


_INT64_MESSAGE = (
    "your n_features gives what int64 arithmetic gives: NumPy integers (np.prod, np.arange, an int64 "
    "array) hold at most 9.2e18 and wrap around past it, without an error, and the count (or a product "
    "on the way to it) is larger for large d. Keep the count in Python ints (exact integer "
    "arithmetic, no NumPy integers), which never overflow.")


def diagnose_count(got: Sequence[int], cases: Sequence[tuple[int, int]]) -> Slip | None:
    """Which known wrong count ``n_features`` computes on all ``cases``, if one; ``None`` when right."""
    if all(g == math.comb(d + p, p) for g, (d, p) in zip(got, cases, strict=True)):
        return None
    for code, f, why in _COUNT_RELATIONS:
        if all(g == f(d, p) for g, (d, p) in zip(got, cases, strict=True)):
            return Slip("count:" + code, f"your n_features gives {why}.")
    if all(abs(g - math.comb(d + p, p)) <= max(1, 1e-12 * math.comb(d + p, p)) * 4
           for g, (d, p) in zip(got, cases, strict=True)):
        return Slip("count:rounding", "your n_features is off by rounding for large values: a float keeps "
                    "15–16 significant digits, so a float division (/) or a float function is not exact "
                    "past 2**53 ≈ 9.0e15; use exact integer arithmetic (integer products and // on integers).")
    if all(_int64_count(g, d, p) for g, (d, p) in zip(got, cases, strict=True)):
        return Slip("count:int64", _INT64_MESSAGE)
    return _count_factor(got, cases)


def _count_factor(got: Sequence[int], cases: Sequence[tuple[int, int]]) -> Slip:
    """A count off by a factor: the same on every case, or p (a factorial one short)."""
    ratios = [Fraction(g, math.comb(d + p, p)) for g, (d, p) in zip(got, cases, strict=True)]
    if ratios and all(r == p for r, (_d, p) in zip(ratios, cases, strict=True)) and len({p for _d, p in cases}) > 1:
        return Slip("count:factor-p", "your n_features gives p times the number of monomials: a factor p is "
                    "left over (e.g. a factorial one term short, (p − 1)! where the count divides by p!).")
    if ratios and len(set(ratios)) == 1 and ratios[0] not in (0, 1):
        r = ratios[0]
        shown = f"{r.numerator}/{r.denominator}" if r.denominator != 1 else str(r.numerator)
        return Slip("count:factor", f"your n_features gives exactly {shown} times the number of monomials on "
                    "every case: a constant factor is missing or extra.", (float(r),))
    return Slip("", "")


_CHEAPER_RULES = (
    ("ge", lambda D, d, n: D >= n,
     "you answer True also when D = n: there both matrices have the same size, so the kernel route is "
     "not cheaper. The comparison is strict."),
    ("reversed", lambda D, d, n: D < n,
     "your answers are the opposite of the right ones: the kernel route (an n×n matrix) is cheaper when "
     "the feature space is larger than the sample, not smaller."),
    ("reversed-ge", lambda D, d, n: D <= n,
     "your comparison is reversed (and not strict): the kernel route (an n×n matrix) is cheaper when the "
     "feature space is larger than the sample."),
    ("input-dimension", lambda D, d, n: d > n,
     "you compare n with d, the dimension of the inputs; the covariance of the explicit route is D×D with "
     "D the number of features."),
)


def diagnose_cheaper(got: Sequence[bool], cases: Sequence[tuple[int, int, int]]) -> Slip:
    """Which known wrong rule ``kernel_cheaper`` follows on all ``cases`` (call only when it is wrong)."""
    for code, rule, why in _CHEAPER_RULES:
        if all(g == rule(math.comb(d + p, p), d, n) for g, (d, p, n) in zip(got, cases, strict=True)):
            return Slip("cheaper:" + code, why)
    return Slip("", "")


# --------------------------------------------------------------------------- q3: PCA via XᵀX
def _spectrum(M: np.ndarray) -> np.ndarray:
    """Eigenvalues of the symmetric ``M``, largest first."""
    return np.sort(np.linalg.eigvalsh((M + M.T) / 2))[::-1]


def diagnose_eigenvalues(ev: np.ndarray, X: np.ndarray, k: int) -> Slip | None:
    """Which known slip gives the eigenvalues ``ev`` of PCA on ``X`` (``None``: right).

    Codes: ``order``, ``ascending``, ``n-1``, ``n-times``, ``n-squared``, ``uncentred``, ``sqrt``.
    """
    n = len(X)
    Xc = X - X.mean(axis=0)
    gram = _spectrum(Xc @ Xc.T)  # nλ, then zeros
    ref = gram[:k] / n
    scale = float(abs(ref[0])) or 1.0
    if _close(ev, ref, scale):
        return None
    tries: list[tuple[str, np.ndarray, str]] = []
    small = np.sort(gram)[:k]
    ratio = n / (n - 1) if n > 1 else float("nan")
    for div, note in ((n, ""), (1, " (and they are not divided by n)"), (n - 1, " (and divided by n − 1)")):
        if div <= 0:
            continue
        tries.append(("ascending", small / div, (
            "you took the smallest eigenvalues: numpy.linalg.eigh returns them in ascending order, so "
            "the largest come last" + note + ".")))
    tries += [
        ("order", ref[::-1], "these are the right eigenvalues in increasing order: return them in "
         "decreasing order (the first component has the largest variance), W's columns in the same order."),
        ("n-1", ref * ratio, (
            f"your eigenvalues are exactly n/(n − 1) = {ratio:.4g} times the covariance's: you divided by "
            "n − 1 (the unbiased sample covariance). This course's covariance is XcᵀXc/n.")),
        ("n-times", ref * n, (
            "your eigenvalues are exactly n times too large: the eigenvalues of the n×n matrix XcXcᵀ are "
            "nλ; the covariance's are λ.")),
        ("n-squared", ref / n, "your eigenvalues are exactly n times too small: you divided by n twice."),
        ("sqrt", np.sqrt(np.clip(ref, 0, None)), (
            "your values are the square roots of the eigenvalues (standard deviations along the "
            "components); the eigenvalues of the covariance are the variances, their squares.")),
        ("sqrt", np.sqrt(np.clip(ref * n, 0, None)), (
            "your values are the singular values of Xc, the square roots of nλ; the eigenvalues of the "
            "covariance are λ.")),
    ]
    un = _spectrum(X @ X.T)
    Xr = X - X.mean(axis=1, keepdims=True)
    rows = _spectrum(Xr @ Xr.T)
    for div, note in ((n, ""), (1, ", and not divided by n"), (n - 1, ", and divided by n − 1")):
        tries.append(("uncentred", un[:k] / div, (
            "these are the eigenvalues of the uncentred data (X instead of Xc = X − mean)" + note + ": "
            "PCA describes the spread around the mean, so centre X first.")))
        tries.append(("centred-rows", rows[:k] / div, _ROWS + note + "."))
    for code, cand, why in tries:
        if _close(ev, cand, max(scale, float(np.max(np.abs(cand)))), 1e-6):
            return Slip(code, why)
    r = ev / np.where(ref == 0, np.nan, ref)
    if np.all(np.isfinite(r)) and np.ptp(r) <= 1e-6 * abs(float(np.mean(r))):
        return Slip("ratio", f"all your eigenvalues are {float(np.mean(r)):.4g} times the covariance's "
                    "(C = XcᵀXc/n): a normalisation is off.")
    if np.any(np.diff(ev) > 1e-9 * scale):
        return Slip("", "your eigenvalues differ from those of the covariance C = XcᵀXc/n, and they are "
                    "not in decreasing order.")
    return Slip("", "your eigenvalues differ from those of the covariance C = XcᵀXc/n. Hint: XcXcᵀ "
                "(n×n) and XcᵀXc (d×d) have the same non-zero eigenvalues.")


def _ascending_directions(W: np.ndarray, ev: np.ndarray | None, Xc: np.ndarray, C: np.ndarray, k: int) -> bool:
    """W's columns belong to the smallest eigenvalues: each is NaN or infinite, or goes with an
    eigenvalue ≈ 0 (its direction is then rounding noise), or is a unit eigenvector of C whose
    eigenvalue is among the k smallest of XcXcᵀ/n."""
    if ev is None:
        return False
    n = Xc.shape[0]
    gram = np.sort(np.linalg.eigvalsh(Xc @ Xc.T / n))
    top = max(float(gram[-1]), 1e-300)
    bound = float(gram[min(k, gram.size) - 1]) + 1e-9 * top
    for j in range(k):
        w = W[:, j]
        if not np.all(np.isfinite(w)) or not np.isfinite(ev[j]) or abs(float(ev[j])) <= 1e-9 * top * n:
            continue
        norm = float(np.linalg.norm(w))
        if norm == 0 or abs(norm - 1) > 1e-6:
            return False
        rho = float(w @ C @ w)
        if float(np.linalg.norm(C @ w - rho * w)) > 1e-6 * top or rho > bound:
            return False
    return True


_ROWS = ("you centred each row (each point: the mean over axis 1) instead of each column: the mean to "
         "remove is the mean point, one value per feature, the same for every row")


def _same_span(W: np.ndarray, R: np.ndarray, groups: list[list[int]]) -> bool:
    for g in groups:
        if np.max(np.abs(W[:, g] @ W[:, g].T - R[:, g] @ R[:, g].T)) > 1e-6:
            return False
    return True


def _top_vectors(M: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    vals, vecs = np.linalg.eigh((M + M.T) / 2)
    idx = np.argsort(vals)[::-1][:k]
    return vals[idx], vecs[:, idx]


def _groups(values: np.ndarray, rtol: float = 1e-6) -> list[list[int]]:
    scale = max(float(np.max(np.abs(values))), 1e-300)
    out: list[list[int]] = []
    for i, v in enumerate(values):
        if out and abs(values[out[-1][-1]] - v) <= rtol * scale:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _name_factor(f: np.ndarray, nlam: np.ndarray, n: int) -> tuple[str, str] | None:
    """Name a factor per column in terms of ``nλ_k`` and ``n`` (for α's normalisation)."""
    cands = (
        ("sqrt(nλ)", np.sqrt(nlam), "√(nλ_k): you used the unit eigenvectors β_k as α_k, without "
         "dividing by √(nλ_k)"),
        ("sqrt(n)", np.full_like(nlam, math.sqrt(n)), "√n: you divided β_k by √λ_k with λ_k = nλ_k/n "
         "(the covariance's eigenvalue); the normalisation uses the eigenvalue nλ_k of the n×n matrix itself"),
        ("1/sqrt(nλ)", 1 / np.sqrt(nlam), "1/√(nλ_k): you divided β_k by nλ_k instead of its square root"),
        ("1/sqrt(n)", np.full_like(nlam, 1 / math.sqrt(n)), "1/√n: the normalisation has an extra factor √n"),
        ("nλ", nlam, "nλ_k: you multiplied β_k by √(nλ_k) instead of dividing"),
    )
    for code, cand, why in cands:
        if np.allclose(f, cand, rtol=1e-6, atol=0):
            return code, why
    return None


def diagnose_directions(W: np.ndarray, ev_slip: Slip | None, X: np.ndarray, k: int,
                        ev: np.ndarray | None = None) -> Slip | None:
    """Which known slip gives the directions ``W`` (d, k) of PCA on ``X`` (``None``: right up to sign).

    ``ev_slip``: the diagnosis of the eigenvalues ``ev`` returned with ``W`` (a slip there may
    explain W).
    Codes: ``ascending``, ``scale:…``, ``uncentred``, ``order``.
    """
    n = len(X)
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / n
    ref_ev, ref_W = _top_vectors(C, k)
    groups = _groups(ref_ev)
    finite = bool(np.all(np.isfinite(W)))
    if ev_slip is not None and ev_slip.code == "ascending" and _ascending_directions(W, ev, Xc, C, k):
        return Slip("ascending", (
            "W belongs to the smallest eigenvalues: you took them because numpy.linalg.eigh returns "
            "eigenvalues in ascending order, so the largest come last"
            + ("; the smallest eigenvalue of XcXcᵀ is 0, and dividing by its square root gives NaN "
               "or infinity" if not finite else "") + "."))
    if not finite:
        return Slip("", "W contains NaN or infinity: did you divide by the square root of an "
                    "eigenvalue that is 0 (or negative through rounding)? Only the largest eigenvalues are used.")
    norms = np.linalg.norm(W, axis=0)
    if np.any(norms == 0):
        return Slip("", "a column of W is zero; each column should be a unit direction w_k.")
    Wn = W / norms
    if _same_span(Wn, ref_W, groups):
        if np.allclose(norms, 1.0, rtol=0, atol=1e-6):
            return None
        named = _name_factor(norms, ref_ev * n, n)
        if named:
            return Slip("scale:" + named[0], (
                "the columns of W point in the right directions, but their norms are a constant factor "
                f"per column, {named[1]}. α = β/√(nλ) makes w = Xcᵀα a unit vector."), ())
        return Slip("scale:other", (
            f"the columns of W point in the right directions but are not unit vectors (norms "
            f"{np.round(norms, 4).tolist()}). Hint: α = β/√(nλ) makes w = Xcᵀα a unit vector."))
    if not np.allclose(norms, 1.0, rtol=0, atol=1e-6):
        return Slip("", f"the columns of W should be unit vectors; their norms are {np.round(norms, 4).tolist()}. "
                    "Hint: α = β/√(nλ) makes w = Xcᵀα a unit vector.")
    un_ev, un_W = _top_vectors(X.T @ X, k)
    if _same_span(Wn, un_W, _groups(un_ev)):
        return Slip("uncentred", "W holds the principal directions of the uncentred data (X instead of "
                    "Xc = X − mean): PCA describes the spread around the mean, so centre X first.")
    Xr = X - X.mean(axis=1, keepdims=True)
    r_ev, r_W = _top_vectors(Xr.T @ Xr, k)
    if _same_span(Wn, r_W, _groups(r_ev)):
        return Slip("centred-rows", "W: " + _ROWS + ".")
    by_variance = np.argsort([-float(w @ C @ w) for w in Wn.T], kind="stable")
    if np.any(by_variance != np.arange(k)) and _same_span(Wn[:, by_variance], ref_W, groups):
        return Slip("order", "the columns of W are the right directions in the wrong order: w_1 belongs to "
                    "the largest eigenvalue, and the columns follow the eigenvalues in decreasing order.")
    for g in groups:
        err = float(np.max(np.abs(Wn[:, g] @ Wn[:, g].T - ref_W[:, g] @ ref_W[:, g].T)))
        if err > 1e-6:
            which = f"w_{g[0] + 1}" if len(g) == 1 else f"w_{g[0] + 1}..w_{g[-1] + 1}"
            return Slip("", (
                f"{which} does not match the covariance eigenvector(s) (up to sign"
                + (" and rotation inside the repeated eigenvalue" if len(g) > 1 else "")
                + f"): difference {err:.3g}. Hint: w = Xcᵀβ/√(nλ) with the centred X and β the unit "
                "eigenvectors of XcXcᵀ, in the same order as the eigenvalues."))
    return Slip("", "W does not match the covariance eigenvectors.")


# --------------------------------------------------------------------------- q4: centring
def _additive(D: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``D ≈ a_i + b_j + t`` with mean(a) = mean(b) = 0: (a, b, t, relative residual)."""
    t = float(D.mean())
    a = D.mean(axis=1) - t
    b = D.mean(axis=0) - t
    R = D - a[:, None] - b[None, :] - t
    return a, b, t, float(np.max(np.abs(R), initial=0.0)) / max(float(np.max(np.abs(D), initial=0.0)), 1e-300)


def diagnose_centering(got: np.ndarray, K: np.ndarray, K_new: np.ndarray | None = None) -> Slip | None:
    """Which statistic of the centring is wrong (``K_new is None``: ``center(K)``; else
    ``center_new(K_new, K)``); ``None`` when right. The messages name the statistic, not the formula.

    Codes (joined by ``+``): ``rows-*``, ``columns-*``, ``grand-*``, ``constant``, ``broadcast``; the
    same code in ``center`` and ``center_new`` is the same slip (e.g. the grand mean left out of both).
    """
    new = K_new is not None
    A = K_new if new else K
    assert A is not None
    col_train = K.mean(axis=0)
    g = float(col_train.mean())
    rows_ref = A.mean(axis=1)
    D = A - got
    D_ref = rows_ref[:, None] + col_train[None, :] - g
    scale = max(1.0, float(np.max(np.abs(A))))
    if _close(D, D_ref, scale, 1e-9):
        return None
    what = "center_new(K_new, K)" if new else "center(K)"
    a, b, t, res = _additive(D)
    a_ref, b_ref, t_ref, _ = _additive(D_ref)
    if res > 1e-8:
        return Slip("", (
            f"{what} − {'K_new' if new else 'K'} is not a sum of one term per row, one per column and a "
            "constant: centring only subtracts statistics of rows and columns and adds back a constant "
            "(no products, no scaling)."))
    tol = 1e-9 * scale
    ok_rows = A.shape[0] == 1 or _close(a, a_ref, scale, 1e-9)
    ok_cols = _close(b, b_ref, scale, 1e-9)
    found: list[tuple[str, str]] = []  # (code, part of the message) per wrong term
    if not ok_rows:
        if _close(a, np.zeros_like(a), scale, 1e-9) and _close(b, 2 * b_ref, scale, 1e-9) and not new:
            return Slip("broadcast", (
                f"{what} subtracts nothing per row and the column means twice: both vectors of means were "
                "broadcast along the rows. A vector of row means must be a column, shape (n, 1), to act on "
                "the rows."))
        found.append(_rows_slip(a, a_ref, scale, new, A.shape[1]))
    if not ok_cols:
        found.append(_columns_slip(A, b, b_ref, scale, new, K.shape[0]))
    if not found:  # rows and columns right: the constant is off
        found.append(_constant_slip(t - t_ref, g, A, rows_ref, tol, new))
    text = f"{what}: " + "; ".join(part for _, part in found) + "."
    if any(code.endswith("-n-1") for code, _ in found):
        text += (" A mean divides the sum of the entries it averages by their number; n − 1 belongs to "
                 "an unbiased sample variance, not to the centring.")
    return Slip("+".join(code for code, _ in found), text)


_N_MINUS_1 = "divided by n − 1 = {m1} instead of n = {m}"


def _rows_slip(a: np.ndarray, a_ref: np.ndarray, scale: float, new: bool, m: int) -> tuple[str, str]:
    """``(code, part of the message)`` for a wrong per-row term ``a`` (the right one: ``a_ref``)
    of the centring (``new``: of ``center_new``; ``m``: the entries a row's mean averages)."""
    if _close(a, np.zeros_like(a), scale, 1e-9):
        return ("rows-missing",
                "nothing is subtracted per " + ("new point (row)" if new else "row")
                + ", so the rows of your result do not have mean 0"
                + (" over the training points" if new else ""))
    if _close(a, 2 * a_ref, scale, 1e-9):
        return "rows-twice", "the per-row statistic is subtracted twice"
    if m > 1 and _close(a, m / (m - 1) * a_ref, scale, 1e-9):
        return "rows-n-1", "the row means are " + _N_MINUS_1.format(m=m, m1=m - 1)
    return "rows-other", "the statistic subtracted per row is not the row's mean"


def _columns_slip(A: np.ndarray, b: np.ndarray, b_ref: np.ndarray, scale: float,
                  new: bool, m: int) -> tuple[str, str]:
    """``(code, part of the message)`` for a wrong per-column term ``b`` (the right one: ``b_ref``)
    of the centring of ``A`` (``new``: ``center_new``, ``A`` is ``K_new``; ``m``: the training
    points a column's mean averages)."""
    own = A.mean(axis=0) - A.mean()
    if new and _close(b, b_ref + own, scale, 1e-9):
        return ("columns-own-extra",
                "besides the training column means you subtract the column means of K_new (a "
                "statistic of the new points, taken along the wrong axis?)")
    if new and _close(b, own, scale, 1e-9):
        return ("columns-own",
                "you subtracted the column means of K_new, the new points' own statistics; the "
                "columns must be centred with the statistics of the training kernel K (the mean in "
                "feature space is that of the training points, and K_new may hold a single point)")
    if _close(b, np.zeros_like(b), scale, 1e-9):
        return "columns-missing", "nothing is subtracted per column"
    if _close(b, 2 * b_ref, scale, 1e-9):
        return "columns-twice", "the per-column statistic is subtracted twice"
    if m > 1 and _close(b, m / (m - 1) * b_ref, scale, 1e-9):
        return "columns-n-1", "the column means are " + _N_MINUS_1.format(m=m, m1=m - 1)
    return ("columns-other",
            "the statistic subtracted per column is not the training kernel's column mean")


def _constant_slip(delta: float, g: float, A: np.ndarray, rows_ref: np.ndarray, tol: float,
                   new: bool) -> tuple[str, str]:
    """``(code, part of the message)`` when the rows and columns of the centring of ``A`` are right
    but the constant is off by ``delta`` (``g``: the training grand mean; ``rows_ref``: the right
    statistic of each row; ``new``: ``center_new``, ``A`` is ``K_new``)."""
    if new and A.shape[0] == 1 and abs(delta + float(rows_ref[0])) <= tol:
        return "rows-missing", "nothing is subtracted per new point (row)"
    if abs(delta - g) <= tol:
        return ("grand-missing",
                "the rows and columns are right, but the grand mean of the training K is not "
                "added back: subtracting both the row and the column statistics removes it twice")
    if abs(delta - 2 * g) <= tol:
        return ("grand-sign",
                "the rows and columns are right, but the grand mean is subtracted instead of added "
                "back")
    if new and abs(delta - (g - float(A.mean()))) <= tol:
        return ("grand-own",
                "the rows and columns are right, but the constant added back is the grand mean of "
                "K_new instead of that of the training K")
    if abs(delta + g) <= tol:
        return ("grand-twice",
                "the rows and columns are right, but the grand mean is added back twice")
    if new and A.shape[0] == 1:  # one row: its statistic and the constant cannot be told apart
        return ("rows-other|constant",
                f"the columns are right, but the result is off by {-delta:.3g}: the statistic "
                "subtracted for the new point or the constant added back is wrong")
    return ("constant",
            f"the rows and columns are right, but every entry is off by the same constant "
            f"({-delta:.3g}): the grand-mean term is wrong")


# --------------------------------------------------------------------------- q5: projections
def column_fit(Z: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column ``Z_j ≈ c_j R_j + b_j``: (c, b, relative residual) by least squares."""
    m, k = R.shape
    c, b, res = np.zeros(k), np.zeros(k), np.zeros(k)
    for j in range(k):
        A = np.column_stack([R[:, j], np.ones(m)])
        coef, *_ = np.linalg.lstsq(A, Z[:, j], rcond=None)
        c[j], b[j] = coef
        r = Z[:, j] - A @ coef
        res[j] = float(np.linalg.norm(r)) / max(float(np.linalg.norm(Z[:, j])), float(np.linalg.norm(R[:, j])), 1e-300)
    return c, b, res


def diagnose_projection(Z: np.ndarray, ref: np.ndarray, nlam: np.ndarray, n: int, Kc: np.ndarray,
                        what: str, uncentred_refs: Sequence[np.ndarray] = ()) -> Slip | None:
    """Which known slip gives the projections ``Z`` instead of ``ref`` (each column up to sign).

    ``nlam``: the eigenvalues of K^c of the components; ``Kc``: the centred training kernel (for
    the ascending-order test); ``uncentred_refs``: projections computed from the eigenvectors of
    the uncentred K. Codes: ``ascending``, ``order``, ``scale:…``, ``shift``, ``eig-uncentred``.
    """
    k = ref.shape[1]
    finite = bool(np.all(np.isfinite(Z)))
    if finite:
        c, b, res = column_fit(Z, ref)
        col_scale = np.array([max(float(np.linalg.norm(ref[:, j])) / math.sqrt(ref.shape[0]), 1e-300)
                              for j in range(k)])
        if np.all(res <= 1e-7) and np.all(np.abs(c) > 1e-6):
            unit = np.abs(np.abs(c) - 1) <= 1e-6
            no_shift = np.abs(b) <= 1e-7 * col_scale * np.maximum(np.abs(c), 1)
            if np.all(unit) and np.all(no_shift):
                return None
            parts, code = [], []
            if not np.all(unit):
                named = _name_factor(np.abs(c), nlam, n)
                code.append("scale:" + (named[0] if named else "other"))
                parts.append("each component is a constant factor times kernel PCA's, "
                             + (named[1] if named else f"factors {np.round(np.abs(c), 4).tolist()}")
                             + ". α_k = β_k/√(nλ_k) makes the direction in feature space a unit vector")
            if not np.all(no_shift):
                code.append("shift")
                parts.append("each component is shifted by a constant (a constant per column): "
                             + ("the kernel matrix was not centred; with K^c every component has mean 0 "
                                "over the training points" if what == "train" else
                                "the new rows were not centred with the training statistics"))
            values = tuple(float(v) for v in np.abs(c)) if code == ["scale:other"] else ()
            return Slip("+".join(code), f"{what_name(what)}: " + "; ".join(parts) + ".", values)
    for U in uncentred_refs:
        if finite and U.shape == Z.shape:
            cu, bu, ru = column_fit(Z, U)
            if np.all(ru <= 1e-7) and np.allclose(np.abs(cu), 1, atol=1e-6):
                return Slip("eig-uncentred", f"{what_name(what)}: your components come from the eigenvectors "
                            "of the uncentred K; kernel PCA diagonalises the centred K^c (the feature-space "
                            "mean removed), so its eigenvectors give α.")
    if finite and np.all(np.linalg.norm(Z, axis=0) > 0):
        M = np.abs(_cos(Z, ref))
        perm = np.argmax(M, axis=1)
        if (np.any(perm != np.arange(k)) and len(set(perm.tolist())) == k
                and np.allclose(np.max(M, axis=1), 1.0, atol=1e-6)):
            return Slip("order", f"{what_name(what)}: the right components in the wrong order: the first "
                        "belongs to the largest eigenvalue of K^c, the others follow in decreasing order.")
    if Z.shape[0] == Kc.shape[0] and _bottom_components(Z, ref, Kc, k, require_low=what != "self"):
        return Slip("ascending", (
            f"{what_name(what)}: you took the smallest eigenvalues of K^c: numpy.linalg.eigh returns them "
            "in ascending order, so the largest come last"
            + ("" if finite else "; the smallest is 0, and dividing by its square root gives NaN or infinity")
            + "."))
    if not finite:
        return Slip("", f"{what_name(what)} contains NaN or infinity: did you divide by the square root of an "
                    "eigenvalue that is 0 (or negative through rounding)?")
    picked = components_taken(Z, Kc)
    if picked is not None and picked != list(range(k)):
        return Slip("components", (
            f"{what_name(what)}: your components lie along kernel PCA's components "
            f"{', '.join(str(i + 1) for i in picked)} (numbered from the largest eigenvalue of K^c); "
            f"the projections are on the {k} largest, in decreasing order."),
            tuple(float(i) for i in picked))
    err, col = 0.0, 0
    for j in range(k):
        scale = max(1.0, float(np.max(np.abs(ref[:, j]))))
        e = min(float(np.max(np.abs(Z[:, j] - ref[:, j]))), float(np.max(np.abs(Z[:, j] + ref[:, j])))) / scale
        if e > err:
            err, col = e, j
    return Slip("", f"{what_name(what)}: component {col + 1} differs from kernel PCA by up to {err:.3g} "
                "(relative, compared up to sign).")


def components_taken(Z: np.ndarray, Kc: np.ndarray) -> list[int] | None:
    """For projections ``Z`` of the training points: the index (0 = largest eigenvalue of ``Kc``) of
    the simple eigenvector each column lies along, whatever its scale; ``None`` when some column
    lies along no single one (or along one of a repeated eigenvalue, whose direction is not defined)."""
    if Z.ndim != 2 or Z.shape[0] != Kc.shape[0] or not np.all(np.linalg.norm(Z, axis=0) > 0):
        return None
    vals, vecs = np.linalg.eigh((Kc + Kc.T) / 2)
    order = np.argsort(vals)[::-1]
    vals, vecs = vals[order], vecs[:, order]
    cos = np.abs((Z / np.linalg.norm(Z, axis=0)).T @ vecs)
    idx = np.argmax(cos, axis=1)
    if not np.allclose(cos[np.arange(Z.shape[1]), idx], 1.0, atol=1e-6):
        return None
    gap = 1e-6 * max(float(np.max(np.abs(vals))), 1e-300)
    for i in idx:
        neighbours = [j for j in (i - 1, i + 1) if 0 <= j < vals.size]
        if any(abs(vals[i] - vals[j]) <= gap for j in neighbours):
            return None
    return [int(i) for i in idx]


def _bottom_components(Z: np.ndarray, ref: np.ndarray, Kc: np.ndarray, k: int, *, require_low: bool) -> bool:
    """Every component of the projections ``Z`` of the training points belongs to the smallest
    eigenvalues of ``Kc``: it is NaN or infinite (a division by the square root of an eigenvalue
    ≤ 0), numerically 0, or in the span of the k smallest eigenvectors; with ``require_low``, at
    least one component is of the last kind (the evidence)."""
    vals = np.sort(np.linalg.eigvalsh((Kc + Kc.T) / 2))
    top = max(float(vals[-1]), 1e-300)
    bound = float(vals[min(k, vals.size) - 1]) + 1e-9 * top
    size = max(float(np.max(np.abs(ref))), 1e-300)
    low = 0
    for j in range(k):
        z = Z[:, j]
        if not np.all(np.isfinite(z)) or float(np.max(np.abs(z))) <= 1e-6 * size:
            continue
        if float(z @ Kc @ z) / float(z @ z) > bound:
            return False
        low += 1
    return low > 0 or not require_low


def _cos(Z: np.ndarray, R: np.ndarray) -> np.ndarray:
    zn = Z / np.maximum(np.linalg.norm(Z, axis=0), 1e-300)
    rn = R / np.maximum(np.linalg.norm(R, axis=0), 1e-300)
    return zn.T @ rn


def what_name(what: str) -> str:
    return {"train": "kpca_project(K, n_components)", "new": "kpca_project_new(K_new, K, n_components)",
            "self": "kpca_project_new(K, K, 1)"}.get(what, what)
