"""What a homework question is, and the helpers its question cell uses.

Questions are *defined* in the question cells of ``solutions/`` notebooks (see
:mod:`kpca_lib.course.grading.registry`); this module holds the :class:`Question` they
build, the probing helpers (:func:`call`, :func:`call_tuple`, :func:`variable`) and the
reusable comparisons and diagnoses the course's own question cells call.

A :class:`Question` says

* which names the student defines in the answer cells (``names``);
* ``make_inputs(rng)``: the inputs on which function answers are evaluated. The
  grader draws them with its own seed, unknown to students; the public checks in
  the notebook use a fixed seed;
* ``probe(namespace, inputs)``: runs in the student's kernel, calls the student's
  functions on the inputs and returns *plain data* (see :mod:`kpca_lib.course.grading.plain`);
* ``checks``: functions ``check(answers, inputs) -> str`` of the decoded plain data
  that return a success message or raise :class:`~kpca_lib.course.grading.plain.CheckError`.
  They compute their references with the trusted library, in whatever process calls
  them: in the grader, that is the grader's own process.

Hidden checks are not here: they live only in ``solutions/`` (cells with role
``hidden-check``) and are read by the grader from there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from .diagnosis import (
    Slip,
    column_fit,
    components_taken,
    counted_once,
    diagnose_centering,
    diagnose_cheaper,
    diagnose_count,
    diagnose_directions,
    diagnose_eigenvalues,
    diagnose_phi,
    diagnose_projection,
)
from .plain import (
    CheckError,
    as_array,
    as_bool,
    as_float,
    as_int,
    as_list,
    as_map,
    encode,
    error_value,
    plain_list,
)

__all__ = [
    "call_with",
    "own_break_even",
    "Check",
    "Question",
    "call",
    "call_tuple",
    "variable",
    "mercer_candidates",
    "homework_moons",
    "homework_faces",
    "SIGMA_RANGE",
    "FACE_TARGET",
]

Probe = Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Check:
    """One graded property of a question's answers."""

    id: str
    description: str
    points: float
    fn: Callable[[dict[str, Any], dict[str, Any]], str]
    hidden: bool = False
    #: A hidden check's own inputs, ``inputs(rng) -> dict``, drawn by the grader (never released)
    #: and added to the question's before the probe runs.
    inputs: Callable[[np.random.Generator], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Question:
    """A question: the names it asks for, its probe and its public checks."""

    id: str
    assignment: str
    title: str
    names: tuple[str, ...]
    probe: Probe
    checks: tuple[Check, ...]
    make_inputs: Callable[[np.random.Generator], dict[str, Any]] = field(
        default=lambda rng: {}
    )

    #: The question's points: its public checks' plus its hidden checks' (0: public only).
    total_points: float = 0.0

    @property
    def public_points(self) -> float:
        return float(sum(c.points for c in self.checks))

    @property
    def hidden_points(self) -> float:
        """Points the grader's hidden checks add (declared total minus the public checks)."""
        return max(0.0, self.total_points - self.public_points)


# --------------------------------------------------------------------------- probing helpers
_MISSING = object()


def _lookup(ns: Mapping[str, Any], name: str) -> Any:
    value = ns.get(name, _MISSING)
    if value is _MISSING:
        return error_value(f"{name} is not defined: write it in its answer cell and run that cell.")
    if value is Ellipsis or value is None:
        return error_value(f"{name} is still {value!r}: replace it with your answer.")
    return value


def _call_raw(ns: Mapping[str, Any], name: str, *args: Any) -> Any:
    f = _lookup(ns, name)
    if isinstance(f, dict) and "__error__" in f:
        return f
    if not callable(f):
        return error_value(f"{name} should be a function; got {type(f).__name__}.")
    args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    before = [a.copy() if isinstance(a, np.ndarray) else None for a in args]
    try:
        value = f(*args)
        changed = tuple(i for i, (a, b) in enumerate(zip(args, before, strict=True))
                        if b is not None and not _same_array(a, b))
        return ("ok", value, changed)
    except NotImplementedError:
        return error_value(f"{name} is not implemented yet (it raises NotImplementedError).")
    except MemoryError:
        raise  # the grader reports the run as out of memory
    except Exception as exc:
        return error_value(f"{name} raised {type(exc).__name__}: {exc}")


def _same_array(a: Any, b: np.ndarray) -> bool:
    try:
        return bool(a.shape == b.shape and np.array_equal(a, b, equal_nan=True))
    except Exception:
        return False


def call(ns: Mapping[str, Any], name: str, *args: Any) -> Any:
    """Plain data of ``ns[name](*args)``, or an error record saying what went wrong. An array
    argument the function changed in place is recorded with the result."""
    out = _call_raw(ns, name, *args)
    return encode(out[1], changed=out[2]) if isinstance(out, tuple) else out


def call_tuple(ns: Mapping[str, Any], name: str, size: int, *args: Any) -> list[Any]:
    """Like :func:`call` for a function returning a tuple of ``size`` answers."""
    out = _call_raw(ns, name, *args)
    if not isinstance(out, tuple):
        return [out] * size
    value = out[1]
    if not isinstance(value, (tuple, list)) or len(value) != size:
        err = error_value(
            f"{name} should return a tuple of {size} values; got {type(value).__name__}"
            + (f" of length {len(value)}" if isinstance(value, (tuple, list)) else "")
            + "."
        )
        return [err] * size
    return [encode(v, changed=out[2]) for v in value]


def variable(ns: Mapping[str, Any], name: str) -> Any:
    """Plain data of the variable ``ns[name]``."""
    value = _lookup(ns, name)
    if isinstance(value, dict) and "__error__" in value:
        return value
    return encode(value)


# --------------------------------------------------------------------------- comparison helpers
def _rel_err(A: np.ndarray, B: np.ndarray) -> float:
    scale = max(1.0, float(np.max(np.abs(B))) if B.size else 1.0)
    return float(np.max(np.abs(A - B))) / scale if A.size else 0.0


# --------------------------------------------------------------------------- q1: explicit φ
def _poly_kernel(X: np.ndarray, Y: np.ndarray, p: int) -> np.ndarray:
    return (X @ Y.T + 1.0) ** p


def phi_slip(
    answers: dict[str, Any], X: np.ndarray, Y: np.ndarray, p: int, fx: str, fy: str, label: str,
    *, name_count: bool = False, count: bool = False, tol: float = 1e-8,
) -> Slip | None:
    """The diagnosis of ``label`` on the points ``X``, ``Y`` (``None``: φ(x)ᵀφ(y) = (xᵀy + 1)^p
    and, with ``count``, C(d + p, p) features). Malformed answers raise :class:`CheckError`."""
    PX = as_array(answers[fx], f"{label}(X)", ndim=2)
    PY = as_array(answers[fy], f"{label}(Y)", ndim=2)
    if PX.shape[0] != X.shape[0] or PY.shape[0] != Y.shape[0]:
        raise CheckError(
            f"{label} should return one row per point: for {X.shape[0]} points in R^{X.shape[1]} it "
            f"returned shape {PX.shape}. Hint: points are rows, so the result is (n_samples, D)."
        )
    if PX.shape[1] != PY.shape[1]:
        raise CheckError(
            f"{label} returned {PX.shape[1]} features for one input and {PY.shape[1]} for another; "
            "the number of features must not depend on the data."
        )
    identity = _rel_err(PX @ PY.T, _poly_kernel(X, Y, p)) <= tol
    if identity and (not count or PX.shape[1] == math.comb(X.shape[1] + p, p)):
        return None
    return diagnose_phi(PX, PY, X, Y, p, label, name_count=name_count, identity_ok=identity)


def _check_phi_identity(
    answers: dict[str, Any], X: np.ndarray, Y: np.ndarray, p: int, fx: str, fy: str, label: str,
    *, name_count: bool = False,
) -> str:
    slip = phi_slip(answers, X, Y, p, fx, fy, label, name_count=name_count)
    if slip is not None:
        raise CheckError(slip.message + _phi_example(answers, X, Y, p, fx, fy, label, slip))
    PX = as_array(answers[fx], f"{label}(X)", ndim=2)
    err = _rel_err(PX @ as_array(answers[fy], f"{label}(Y)", ndim=2).T, _poly_kernel(X, Y, p))
    return f"{label}(x)ᵀ{label}(y) = (xᵀy + 1)^{p} on {X.shape[0]}×{Y.shape[0]} random pairs (relative error {err:.1e})."


def _phi_example(answers: dict[str, Any], X: np.ndarray, Y: np.ndarray, p: int, fx: str, fy: str,
                 label: str, slip: Slip) -> str:
    """For a slip that is not recognised: one pair of (public) points where the identity fails."""
    if slip.recognised:
        return ""
    G = as_array(answers[fx], label, ndim=2) @ as_array(answers[fy], label, ndim=2).T
    K = _poly_kernel(X, Y, p)
    i, j = np.unravel_index(np.argmax(np.abs(G - K)), K.shape)
    return (f" E.g. for x = {np.round(X[i], 3).tolist()}, y = {np.round(Y[j], 3).tolist()}: "
            f"{float(G[i, j]):.6g} instead of {float(K[i, j]):.6g}. Hint: expand (1 + x₁y₁ + …)^{p} "
            "with the multinomial theorem.")


#: Slips of φ that make its number of features wrong (so a dimension equal to it is consistent).
COUNT_SLIPS = ("missing", "no-constant", "duplicates", "two-coordinates")


def phi_identity(answers: dict[str, Any], inputs: dict[str, Any], p: int, fname: str) -> str:
    """Check ``fname``'s features on ``inputs["X"]``, ``inputs["Y"]`` (probed as ``phi_X``, ``phi_Y``)."""
    return _check_phi_identity(answers, inputs["X"], inputs["Y"], p, "phi_X", "phi_Y", fname)


def phi_dimension(answers: dict[str, Any], inputs: dict[str, Any], p: int, fname: str, dname: str) -> str:
    """``dname`` is D. A φ with the wrong number of features: when its kernel identity fails, the
    identity check counts that slip, and a dimension equal to D or to φ's own count passes (not
    charged twice); when the identity holds (repeated monomials), this check counts it."""
    dim = as_int(answers["dim"], dname)
    PX = as_array(answers["phi_X"], f"{fname}(X)", ndim=2)
    D = math.comb(2 + p, p)
    X, Y = inputs["X"], inputs["Y"]
    if dim == D and PX.shape[1] == D:
        return f"{dname} = {fname}'s number of features, and no monomial is repeated."
    full = phi_slip(answers, X, Y, p, "phi_X", "phi_Y", fname, count=True)
    if full is not None and full.code in COUNT_SLIPS:
        identity = phi_slip(answers, X, Y, p, "phi_X", "phi_Y", fname) is None
        if not identity and dim in (D, PX.shape[1]):
            return (f"{dname} = {dim} is consistent with your {fname}, whose missing or repeated "
                    "features the check above counts (not charged twice).")
        if identity:
            raise CheckError(f"{dname} = {dim}: " + full.message)
    if dim != PX.shape[1]:
        raise CheckError(
            f"{dname} = {dim}, but your {fname} returns {PX.shape[1]} features: the dimension "
            "D is the number of entries of φ(x)."
        )
    raise CheckError(
        f"{dname} = {dim} matches your {fname}, but it is not the dimension of the "
        "polynomial feature map: "
        + (
            "some monomials appear more than once (e.g. x₁x₂ and x₂x₁); merge them, "
            "adding their weights under the square root."
            if dim > D
            else "some monomials are missing; every monomial x₁^a x₂^b with a + b ≤ "
            f"{p} appears."
        )
    )


# --------------------------------------------------------------------------- q1c: general d
def general_slips(answers: dict[str, Any], inputs: dict[str, Any]) -> list[tuple[str, Slip | None]]:
    """The slips the public checks of ``phi_poly`` find: [(where, slip)] for d = 3 and d = 5
    (a malformed answer counts as no recognised slip)."""
    out: list[tuple[str, Slip | None]] = []
    for where, (x, y, p, fx, fy) in (
        ("the check for d = 3", ("X3", "Y3", 3, "g3x", "g3y")),
        ("the check for d = 5", ("X5", "Y5", 2, "g5x", "g5y")),
    ):
        try:
            slip = phi_slip(answers, inputs[x], inputs[y], p, fx, fy, f"phi_poly(·, {p})",
                            name_count=True, count=(p == 2))
        except CheckError as exc:
            slip = Slip("", str(exc))
        out.append((where, slip))
    return out


def general_d3(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    return _check_phi_identity(answers, inputs["X3"], inputs["Y3"], 3, "g3x", "g3y", "phi_poly(·, 3)",
                               name_count=True)


def general_d5(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    slip = phi_slip(answers, inputs["X5"], inputs["Y5"], 2, "g5x", "g5y", "phi_poly(·, 2)",
                    name_count=True, count=True)
    ok = ("phi_poly(x, 2)ᵀphi_poly(y, 2) = (xᵀy + 1)² for d = 5, and the number of features is "
          "C(d + p, p).")
    if slip is not None and not slip.recognised:
        raise CheckError(slip.message + _phi_example(answers, inputs["X5"], inputs["Y5"], 2, "g5x", "g5y",
                                                     "phi_poly(·, 2)", slip))
    return counted_once(slip, general_slips(answers, inputs)[:1], ok)


# --------------------------------------------------------------------------- q2: counting
#: Offsets n − D of the kernel_cheaper cases: both sides of the break-even point and D = n itself.
CHEAPER_OFFSETS = (-2, -1, 0, 0, 1, 1, 2, -1)


def own_break_even(ns: Mapping[str, Any], d: int, p: int) -> Any:
    """``[D, kernel_cheaper(d, p, D − 1), kernel_cheaper(d, p, D)]`` with D the student's own
    ``n_features(d, p)``: kernel_cheaper's rule judged at the student's own break-even point."""
    out = _call_raw(ns, "n_features", d, p)
    if not isinstance(out, tuple):
        return out
    try:
        D = int(out[1])
        if D != out[1]:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        return error_value("n_features did not return an integer")
    return plain_list([D, call(ns, "kernel_cheaper", d, p, D - 1), call(ns, "kernel_cheaper", d, p, D)])


def count_slip(answers: dict[str, Any], inputs: dict[str, Any], key: str = "counts",
               cases: str = "pairs", label: str | None = None) -> Slip | None:
    """The diagnosis of ``n_features`` on ``inputs[cases]`` (malformed answers raise CheckError,
    naming each case unless ``label`` is given)."""
    values = as_list(answers[key], label or "n_features")
    got = [as_int(v, label or f"n_features({int(d)}, {int(p)})")
           for (d, p), v in zip(inputs[cases], values, strict=False)]
    return diagnose_count(got, [(int(d), int(p)) for d, p in inputs[cases]][: len(got)])


def count_check(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    counts = as_list(answers["counts"], "n_features")
    slip = count_slip(answers, inputs)
    if slip is None:
        return f"n_features(d, p) is right on {len(counts)} random (d, p) pairs."
    (d, p), got = next(((int(d), int(p)), as_int(v, "n_features"))
                       for (d, p), v in zip(inputs["pairs"], counts, strict=False)
                       if as_int(v, "n_features") != math.comb(int(d) + int(p), int(p)))
    raise CheckError(
        f"n_features({d}, {p}) = {got} is not the number of monomials of degree ≤ {p} in {d} "
        f"variable{'s' if d > 1 else ''}"
        + (f": {slip.message}" if slip.recognised else
           ". Hint: check small cases by hand (d = 2, p = 2 gives the lecture's 6 features) and compare "
           "with your explicit φ from question 1.")
    )


def cheaper_check(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    values = as_list(answers["cheaper"], "kernel_cheaper")
    cases = [(int(d), int(p), int(n)) for d, p, n in inputs["triples"]][: len(values)]
    got = [as_bool(v, f"kernel_cheaper({d}, {p}, {n})") for (d, p, n), v in zip(cases, values, strict=True)]
    wrong = [(c, g) for c, g in zip(cases, got, strict=True) if g != (math.comb(c[0] + c[1], c[1]) > c[2])]
    if not wrong:
        return f"kernel_cheaper(d, p, n) is right on {len(values)} cases near the break-even point."
    if _follows_own_count(answers, cases, got):
        return ("kernel_cheaper(d, p, n) answers D > n with D from your own n_features, on every case and "
                "at your own break-even point: its logic is right. Its wrong answers come from the counts, "
                "which the check above charges (not charged twice).")
    slip = diagnose_cheaper(got, cases)
    (d, p, n), g = wrong[0]
    raise CheckError(
        f"kernel_cheaper({d}, {p}, {n}) = {g} is wrong"
        + (f": {slip.message}" if slip.recognised else
           ". Hint: compare the size D of the D×D covariance in feature space with the n×n kernel "
           "matrix; the kernel route is cheaper exactly when D > n.")
    )


def _follows_own_count(answers: dict[str, Any], cases: list[tuple[int, int, int]], got: list[bool]) -> bool:
    """kernel_cheaper is exactly ``own_D > n`` (own_D from the student's n_features, wrong somewhere)
    on every case, and True at own_D − 1, False at own_D."""
    try:
        own = as_list(answers["cheaper_own"], "n_features")
        if len(own) != len(cases):
            return False
        wrong_count = False
        for (d, p, n), g, item in zip(cases, got, own, strict=True):
            D, below, at = as_list(item, "n_features")
            D = as_int(D, "n_features")
            if g != (D > n) or as_bool(below, "kernel_cheaper") is not True or as_bool(at, "kernel_cheaper"):
                return False
            wrong_count = wrong_count or D != math.comb(d + p, p)
        return wrong_count
    except (CheckError, ValueError, TypeError):
        return False


# --------------------------------------------------------------------------- q3: Gram PCA
def data_with_spectrum(
    rng: np.random.Generator, n: int, d: int, s: np.ndarray
) -> np.ndarray:
    """Data with exactly known covariance eigenvalues s²/n (s descending)."""
    r = s.size
    U = rng.normal(size=(n, r))
    U -= U.mean(axis=0)
    U, _ = np.linalg.qr(U)
    V, _ = np.linalg.qr(rng.normal(size=(d, r)))
    return U @ np.diag(s) @ V.T + rng.normal(size=d)[None, :]


def covariance_reference(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` eigenvalues (1/n) and unit eigenvectors (columns) of the covariance of ``X``."""
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / X.shape[0]
    vals, vecs = np.linalg.eigh(C)
    order = np.argsort(vals)[::-1][:k]
    return vals[order], vecs[:, order]


def _gram_answers(answers: dict[str, Any], inputs: dict[str, Any], i: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    X, k = np.asarray(inputs["X" + i]), int(inputs["k" + i])
    n, d = X.shape
    ev = as_array(answers["ev" + i], f"the eigenvalues for X of shape {X.shape}", ndim=1, finite=False)
    W = as_array(answers["W" + i], f"W for X of shape {X.shape}", ndim=2, finite=False)
    if ev.shape != (k,) or W.shape != (d, k):
        raise CheckError(
            f"for X of shape ({n}, {d}) and n_components = {k}, expected eigenvalues of shape "
            f"({k},) and W of shape ({d}, {k}) (one unit direction w_k per column); got "
            f"{ev.shape} and {W.shape}."
        )
    return X, ev, W, k


def gram_slips(answers: dict[str, Any], inputs: dict[str, Any], i: str) -> tuple[Slip | None, Slip | None]:
    """(eigenvalue slip, direction slip) of ``gram_pca`` on ``X<i>``; malformed answers raise CheckError."""
    X, ev, W, k = _gram_answers(answers, inputs, i)
    ev_slip = diagnose_eigenvalues(ev, X, k) if np.all(np.isfinite(ev)) else Slip(
        "", "the eigenvalues contain NaN or infinity.")
    return ev_slip, diagnose_directions(W, ev_slip, X, k, ev)


def public_gram_slips(answers: dict[str, Any], inputs: dict[str, Any]) -> list[tuple[str, Slip | None]]:
    """Every slip the public checks of ``gram_pca`` find, as [(where, slip)]."""
    out: list[tuple[str, Slip | None]] = []
    for i in ("1", "2"):
        try:
            ev_slip, w_slip = gram_slips(answers, inputs, i)
        except CheckError:
            continue
        out += [("the eigenvalue check", ev_slip), ("the direction check", w_slip)]
    return out


def compare_gram(answers: dict[str, Any], inputs: dict[str, Any], i: str, what: str) -> str:
    """Check the eigenvalues (``what="eigenvalues"``) or the directions of ``gram_pca`` on ``X<i>``.

    The directions pass when their slip is the one the eigenvalues of the same data show (counted
    once, in the eigenvalue check)."""
    X, ev, W, k = _gram_answers(answers, inputs, i)
    ev_slip, w_slip = gram_slips(answers, inputs, i)
    shape = f" (X of shape {X.shape})"
    if what == "eigenvalues":
        if ev_slip is not None:
            raise CheckError(ev_slip.message + shape)
        return f"eigenvalues agree with the covariance route{shape}."
    try:
        return counted_once(w_slip, [("the eigenvalue check", ev_slip)],
                            f"directions agree with the covariance eigenvectors up to sign{shape}.")
    except CheckError as exc:
        raise CheckError(str(exc) + shape) from None


def gram_eigenvalues(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    return compare_gram(answers, inputs, "1", "eigenvalues") + " " + compare_gram(
        answers, inputs, "2", "eigenvalues"
    )


def gram_vectors(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    return compare_gram(answers, inputs, "1", "vectors") + " " + compare_gram(
        answers, inputs, "2", "vectors"
    )


# --------------------------------------------------------------------------- q4: centring
def center_slip(answers: dict[str, Any], inputs: dict[str, Any], base: str, new: bool) -> Slip | None:
    """The diagnosis of ``center`` (``new=False``) or ``center_new`` on ``inputs[base]``
    (malformed answers raise :class:`CheckError`)."""
    K = np.asarray(inputs[base])
    if new:
        K_new = np.asarray(inputs[base + "_new"])
        name, key, shape = f"center_new(K_new, K) for K_new of shape {K_new.shape}", base + "c_new", K_new.shape
    else:
        K_new, name, key, shape = None, f"center(K) for K of shape {K.shape}", base + "c", K.shape
    got = as_array(answers[key], name, shape=shape)
    return diagnose_centering(got, K, K_new)


def compare_centered(answers: dict[str, Any], inputs: dict[str, Any], base: str, new: bool) -> str:
    """Check ``center`` or ``center_new`` on ``inputs[base]``; a slip the training check already
    found (the same statistic wrong in both functions) is counted once."""
    slip = center_slip(answers, inputs, base, new)
    name = "center_new(K_new, K)" if new else "center(K)"
    ok = f"{name} matches the centred kernel."
    earlier: list[tuple[str, Slip | None]] = []
    if new:
        try:
            earlier.append(("the check of center", center_slip(answers, inputs, base, False)))
        except CheckError:
            pass
    return counted_once(slip, earlier, ok)


# --------------------------------------------------------------------------- q5: kernel PCA
def kpca_reference(K: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues ``nλ`` and ``α`` (columns) of the centred ``K``, top ``k``."""
    from ...centering import center_kernel

    Kc = center_kernel(K)
    Kc = (Kc + Kc.T) / 2
    vals, vecs = np.linalg.eigh(Kc)
    order = np.argsort(vals)[::-1][:k]
    vals, vecs = vals[order], vecs[:, order]
    return vals, vecs / np.sqrt(vals)[None, :]


def call_with(ns: MutableMapping[str, Any], names: Mapping[str, Any], name: str, *args: Any) -> Any:
    """:func:`call` with ``names`` bound in the namespace ``ns`` for the duration of the call.

    The previous bindings (or their absence) are restored afterwards, whatever happens. The
    projections of question 5 are probed with the library's correct ``center`` and
    ``center_new``, so a slip in question 4 never costs question 5 too.
    """
    saved = {key: ns.get(key, _MISSING) for key in names}
    try:
        for key, value in names.items():
            ns[key] = value
        return call(ns, name, *args)
    finally:
        for key, value in saved.items():
            if value is _MISSING:
                ns.pop(key, None)
            else:
                ns[key] = value


_KPCA_NAMES = {"Z": "train", "Z_new": "new", "Z_self": "self"}


def kpca_slip(answers: dict[str, Any], inputs: dict[str, Any], which: str) -> Slip | None:
    """The diagnosis of the projections ``answers[which]`` (``"Z"``, ``"Z_new"`` or ``"Z_self"``)
    against kernel PCA, each component up to sign; malformed answers raise :class:`CheckError`."""
    from ...centering import center_kernel, center_test_kernel

    K, k = np.asarray(inputs["K"]), int(inputs["k"])
    kk = 1 if which == "Z_self" else k
    vals, alphas = kpca_reference(K, kk)
    Kc = center_kernel(K)
    rows = np.asarray(inputs["K_new"]) if which == "Z_new" else K
    rows_c = center_test_kernel(rows, K)
    ref = rows_c @ alphas
    name = {"Z": "kpca_project(K, n_components)", "Z_new": "kpca_project_new(K_new, K, n_components)",
            "Z_self": "kpca_project_new(K, K, 1)"}[which]
    Z = as_array(answers[which], name, shape=ref.shape, finite=False)
    uvals, uvecs = np.linalg.eigh((K + K.T) / 2)
    top = np.argsort(uvals)[::-1][:kk]
    alpha_u = uvecs[:, top] / np.sqrt(np.abs(uvals[top]))
    slip = diagnose_projection(Z, ref, vals, K.shape[0], Kc, _KPCA_NAMES[which],
                               uncentred_refs=(rows_c @ alpha_u, rows @ alpha_u))
    if which != "Z" and slip is not None and not slip.recognised:
        return _same_components(answers, Z, rows_c, K, Kc, name) or slip
    return slip


def _same_components(answers: dict[str, Any], Z: np.ndarray, rows_c: np.ndarray, K: np.ndarray,
                     Kc: np.ndarray, name: str) -> Slip | None:
    """New points projected on the same (wrong) components as kpca_project's training points,
    each up to scale and sign: the slip of the training check, diagnosed there."""
    try:
        Z_train = as_array(answers["Z"], "kpca_project(K, n_components)", ndim=2)
    except CheckError:
        return None
    picked = components_taken(Z_train, Kc)
    if picked is None or not np.all(np.isfinite(Z)) or Z.shape[1] > len(picked):
        return None
    picked = picked[: Z.shape[1]]
    vals, alphas = kpca_reference(K, max(picked) + 1)
    if np.any(vals[picked] <= 1e-12 * max(float(vals[0]), 1e-300)):
        return None
    c, _, res = column_fit(Z, rows_c @ alphas[:, picked])
    if not (np.all(res <= 1e-7) and np.all(np.abs(c) > 1e-9)):
        return None
    return Slip("components", f"{name}: your new points are projected on the same components "
                f"{', '.join(str(i + 1) for i in picked)} as kpca_project's training points.",
                tuple(float(i) for i in picked))


def _component_signs(answers: dict[str, Any], inputs: dict[str, Any], which: str) -> np.ndarray | None:
    """The sign of each component of ``answers[which]`` relative to the reference (None if unknown)."""
    from ...centering import center_test_kernel

    K, k = np.asarray(inputs["K"]), int(inputs["k"])
    kk = 1 if which == "Z_self" else k
    _, alphas = kpca_reference(K, kk)
    rows = np.asarray(inputs["K_new"]) if which == "Z_new" else K
    ref = center_test_kernel(rows, K) @ alphas
    try:
        Z = as_array(answers[which], which, shape=ref.shape)
    except CheckError:
        return None
    c, _, res = column_fit(Z, ref)
    return np.sign(c) if np.all(res <= 1e-7) and np.all(c != 0) else None


def _sign_slip(answers: dict[str, Any], inputs: dict[str, Any], which: str) -> Slip | None:
    """Components of ``which`` whose sign differs from kpca_project's (same data, same α)."""
    mine, train = _component_signs(answers, inputs, which), _component_signs(answers, inputs, "Z")
    if mine is None or train is None:
        return None
    flipped = [j + 1 for j in range(mine.size) if mine[j] != train[j]]
    if not flipped:
        return None
    name = "kpca_project_new(K, K, 1)" if which == "Z_self" else "kpca_project_new"
    return Slip("sign", (
        f"component{'s' if len(flipped) > 1 else ''} {', '.join(map(str, flipped))} of {name} "
        f"ha{'ve' if len(flipped) > 1 else 's'} the opposite sign of kpca_project's: new points must be "
        "projected on the same axes as the training points (the same α, sign included), or a new point "
        "equal to a training point lands on the mirror image of its projection."))


def kpca_public_slips(answers: dict[str, Any], inputs: dict[str, Any]) -> list[tuple[str, Slip | None]]:
    """The slips the public checks of question 5 find, as [(where, slip)]."""
    out: list[tuple[str, Slip | None]] = []
    for which, where in (("Z", "the check of kpca_project"), ("Z_new", "the check of kpca_project_new")):
        try:
            slip = kpca_slip(answers, inputs, which)
        except CheckError:
            continue
        if which == "Z_new" and slip is None:
            slip = _sign_slip(answers, inputs, "Z_new")
        out.append((where, slip))
    return out


def compare_kpca(answers: dict[str, Any], inputs: dict[str, Any], which: str) -> str:
    """Check projections against kernel PCA: ``"Z"`` (training points), ``"Z_new"`` (new points,
    with the signs of kpca_project's components) or ``"Z_self"`` (training points as new points:
    kpca_project's first component, sign included). A slip found by an earlier check is counted once."""
    slip = kpca_slip(answers, inputs, which)
    if slip is None and which != "Z":
        slip = _sign_slip(answers, inputs, which)
    ok = {"Z": "kpca_project(K, n_components) matches kernel PCA up to the sign of each component.",
          "Z_new": "kpca_project_new(K_new, K, n_components) matches kernel PCA, with the signs of "
                   "kpca_project's components.",
          "Z_self": "the training points projected as new points land on their training projections."}[which]
    earlier = kpca_public_slips(answers, inputs)
    earlier = earlier[:0] if which == "Z" else earlier[:1] if which == "Z_new" else earlier
    try:
        return counted_once(slip, earlier, ok)
    except CheckError as exc:
        known = [(where, s) for where, s in earlier if s is not None and s.recognised]
        if slip is None or slip.recognised or not known:
            raise
        raise CheckError(f"{exc} It may come from the slip {known[0][0]} reports: {known[0][1].message}") from None


# --------------------------------------------------------------------------- q6: Mercer
def mercer_candidates() -> dict[str, tuple[str, Callable[[np.ndarray, np.ndarray], float]]]:
    """The candidate kernels of the Mercer question: name -> (formula, function)."""
    return {
        "a": ("(xᵀy + 1)³", lambda x, y: (x @ y + 1.0) ** 3),
        "b": ("exp(−‖x − y‖)", lambda x, y: np.exp(-np.linalg.norm(x - y))),
        "c": ("‖x − y‖²", lambda x, y: np.linalg.norm(x - y) ** 2),
        "d": ("tanh(xᵀy − 1)", lambda x, y: np.tanh(x @ y - 1.0)),
        "e": ("xᵀy + x₁", lambda x, y: x @ y + x[0]),
        "f": ("cos(x₁ − y₁)", lambda x, y: np.cos(x[0] - y[0])),
    }


def mercer_complete(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    verdicts = as_map(answers["is_kernel"], "is_kernel")
    missing = sorted(set(mercer_candidates()) - set(verdicts))
    if missing:
        raise CheckError(f"is_kernel has no verdict for {', '.join(missing)}; give True or False for each candidate.")
    for name in mercer_candidates():
        as_bool(verdicts[name], f"is_kernel[{name!r}]")
    return "is_kernel gives True or False for every candidate."


def verify_counterexample(name: str, points: Any) -> str:
    """Check in the caller's process that ``points`` violate Mercer's condition for ``name``."""
    from ...kernels import kernel_matrix
    from ...mercer import check_mercer_matrix

    formula, k = mercer_candidates()[name]
    P = as_array(points, f"counterexamples[{name!r}]", ndim=2)
    if P.shape[1] != 2 or not 1 <= P.shape[0] <= 50:
        raise CheckError(
            f"counterexamples[{name!r}] should be between 1 and 50 points in R², shape (m, 2); got {P.shape}."
        )
    if np.max(np.abs(P)) > 100:
        raise CheckError(f"counterexamples[{name!r}]: keep the coordinates within ±100.")
    result = check_mercer_matrix(kernel_matrix(k, P))
    if result.valid:
        raise CheckError(
            f"counterexamples[{name!r}]: on your {P.shape[0]} point{'s' if P.shape[0] > 1 else ''} the "
            f"kernel matrix of {formula} "
            f"is symmetric and positive semi-definite (smallest eigenvalue {result.min_eigenvalue:.3g}), "
            "so these points do not violate Mercer's condition: either the points or the verdict is wrong. "
            f"If {formula} is not a kernel, look for points where K_ij ≠ K_ji, or a small set (even one or "
            "two points) with a negative eigenvalue; if it is a kernel, no points can show otherwise, and "
            f"is_kernel[{name!r}] should be True."
        )
    return f"{name}: {'not symmetric' if not result.symmetric else 'not PSD'} on your points"


def mercer_evidence(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    verdicts = as_map(answers["is_kernel"], "is_kernel")
    examples = as_map(answers["counterexamples"], "counterexamples")
    rejected = [n for n in mercer_candidates() if verdicts.get(n) is False]
    if not rejected:
        raise CheckError("you marked no candidate as invalid: at least one of them is not a kernel.")
    notes = []
    for name in rejected:
        if name not in examples:
            raise CheckError(
                f"you marked {name!r} as not a kernel: give points showing it in counterexamples[{name!r}] "
                "(if no points violate Mercer's condition for it, reconsider the verdict)."
            )
        notes.append(verify_counterexample(name, examples[name]))
    return "every 'not a kernel' verdict has a valid counterexample (" + "; ".join(notes) + ")."


# --------------------------------------------------------------------------- q7, q8: widgets
SIGMA_RANGE = (0.02, 10.0)
FACE_TARGET = 0.175


@lru_cache(maxsize=1)
def homework_moons() -> tuple[np.ndarray, np.ndarray]:
    """The two moons of question 7: ``make_moons(100, noise=0.05, random_state=0)``."""
    from ...datasets import make_moons

    X, y = make_moons(n_samples=100, noise=0.05, random_state=0)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


@lru_cache(maxsize=1)
def homework_faces() -> tuple[Any, np.ndarray, np.ndarray]:
    """Question 8: PCA of the first 80 faces of ``load_faces()``, and held-out face 85.

    Returns ``(pca, train_faces, face)``.
    """
    from ...datasets import load_faces
    from ...pca import PCA

    faces = load_faces().data[:100]
    train = faces[:80]
    pca = PCA(n_components=80).fit(train)
    return pca, train, faces[85]


@lru_cache(maxsize=1)
def _separating_grid() -> tuple[tuple[float, bool], ...]:
    """(σ, separates?) on a logarithmic grid of the slider's range, for the homework moons."""
    from ...analysis import first_component_separates

    X, y = homework_moons()
    lo, hi = SIGMA_RANGE
    return tuple((float(s), bool(first_component_separates(X, y, float(s))[0]))
                 for s in np.geomspace(lo, hi, 41))


def sigma_check(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    from ...analysis import first_component_separates

    sigma = as_float(answers["sigma"], "answer_sigma")
    lo, hi = SIGMA_RANGE
    if not lo <= sigma <= hi:
        raise CheckError(f"answer_sigma = {sigma:g} is outside the slider's range [{lo}, {hi}]: paste "
                         "the line shown under the slider, for a σ where the status says the moons are "
                         "separated.")
    X, y = homework_moons()
    ok, acc = first_component_separates(X, y, sigma)
    if not ok:
        good = [s for s, sep in _separating_grid() if sep]
        if good and all(s < sigma for s in good):
            where = "only smaller σ separate them: move the slider to the left"
        elif good and all(s > sigma for s in good):
            where = "only larger σ separate them: move the slider to the right"
        else:
            where = "move the slider until the status line says the classes are separated"
        raise CheckError(
            f"at σ = {sigma:.4g} the best threshold on the first kernel principal component "
            f"classifies {acc:.1%} of the points: the moons are not separated; {where}, then paste the "
            "line it shows."
        )
    return f"at σ = {sigma:.4g} a threshold on the first component separates the moons (100%)."


def _r_value(answers: dict[str, Any]) -> tuple[int, float]:
    """answer_r and its relative reconstruction error (range checked)."""
    from ...analysis import reconstruction_errors

    r = as_int(answers["r"], "answer_r")
    pca, _, face = homework_faces()
    r_max = pca.components_.shape[0]
    if not 0 <= r <= r_max:
        raise CheckError(f"answer_r = {r} is outside the slider's range [0, {r_max}].")
    return r, float(reconstruction_errors(pca, face, [r])[0])


def r_below_target(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    r, err = _r_value(answers)
    if not err < FACE_TARGET:
        raise CheckError(
            f"with r = {r} eigenfaces the relative error is {err:.1%}, not below the target "
            f"{FACE_TARGET:.1%}. Hint: more components lower the error."
        )
    return f"with r = {r} the error {err:.1%} is below {FACE_TARGET:.1%}."


def r_smallest(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    """Question 8's main requirement: no smaller r reaches the target (and r does)."""
    from ...analysis import reconstruction_errors

    r, err = _r_value(answers)
    if not err < FACE_TARGET:
        raise CheckError(
            f"with r = {r} the error {err:.1%} does not reach the target {FACE_TARGET:.1%}, so r is not "
            "the smallest r that reaches it: move the slider up until the error first goes below the target."
        )
    pca, _, face = homework_faces()
    if r > 0:
        before = float(reconstruction_errors(pca, face, [r - 1])[0])
        if before < FACE_TARGET:
            raise CheckError(
                f"with r = {r} the error {err:.1%} is below the target, but fewer eigenfaces reach it too "
                f"(with r − 1 = {r - 1} the error is {before:.1%}): the question asks for the smallest r. "
                "Move the slider down until one eigenface less goes above the target."
            )
    return f"r = {r} is the smallest number of eigenfaces below {FACE_TARGET:.1%} (error {err:.1%})."
