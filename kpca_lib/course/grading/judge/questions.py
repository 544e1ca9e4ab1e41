"""What a homework question is, and the helpers its question cell uses.

Questions are *defined* in the question cells of ``solutions/`` notebooks (see
:mod:`kpca_lib.course.grading.judge.registry`); this module holds the :class:`Question` they
build, the probing helpers (:func:`call`, :func:`call_tuple`, :func:`variable`) and the
reusable comparisons and diagnoses the course's own question cells call.

A :class:`Question` says

* which names the student defines in the answer cells (``names``);
* ``make_inputs(rng)``: the inputs on which function answers are evaluated. The
  grader draws them with its own seed, unknown to students; the public checks in
  the notebook use a fixed seed;
* ``probe(namespace, inputs)``: runs in the student's kernel, calls the student's
  functions on the inputs and returns *plain data* (see :mod:`kpca_lib.course.grading.judge.plain`);
* ``checks``: functions ``check(answers, inputs) -> str`` of the decoded plain data
  that return a success message or raise :class:`~kpca_lib.course.grading.judge.plain.CheckError`.
  They compute their references with the trusted library, in whatever process calls
  them: in the grader, that is the grader's own process.

Hidden checks are not here: they live only in ``solutions/`` (cells with role
``hidden-check``) and are read by the grader from there.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
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
    AnswerSequence,
    CheckError,
    as_array,
    as_bool,
    as_float,
    as_int,
    as_list,
    as_map,
    encode,
    error_value,
    note,
    orient,
    plain_list,
    unanswerable,
)

__all__ = [
    "call_with",
    "own_break_even",
    "cheaper_triples",
    "count_slip",
    "Check",
    "Question",
    "call",
    "call_within",
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
    #: Dotted names the answers may not call (see :func:`forbidden_calls`).
    forbid: tuple[str, ...] = ()

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
        return error_value(f"{name} is not defined where the question is checked: define it in its "
                           "answer cell, above the check cell, and run the notebook from the top.")
    if value is Ellipsis or value is None:
        return error_value(f"{name} is not answered yet ({'`...`' if value is Ellipsis else 'None'} is "
                           "still there): replace it with your answer.")
    return value


_FORBID: ContextVar[tuple[str, ...]] = ContextVar("kpca_forbid", default=())
_HITS: ContextVar[list[str] | None] = ContextVar("kpca_forbidden_hits", default=None)


@contextmanager
def forbidden_calls(names: tuple[str, ...]) -> Iterator[list[str]]:
    """While probing: calls to ``names`` (dotted) made by the answers become errors; yields the
    list of those seen. A teaching guard, not a security boundary (student code can switch a
    profiler off); the grader backs it with a scan of the cells' source."""
    hits: list[str] = []
    t1, t2 = _FORBID.set(tuple(names)), _HITS.set(hits)
    try:
        yield hits
    finally:
        _FORBID.reset(t1)
        _HITS.reset(t2)


def _target(dotted: str) -> tuple[str, str] | None:
    """``(defining module, qualified name)`` of a dotted name whose module is imported already."""
    module, _, attr = dotted.rpartition(".")
    mod = sys.modules.get(module)
    obj = getattr(mod, attr, None) if mod is not None else None
    if obj is None:
        return None
    return getattr(obj, "__module__", module), getattr(obj, "__qualname__", attr)


def _guarded(f: Callable[..., Any], args: tuple[Any, ...], forbid: tuple[str, ...]) -> tuple[Any, str | None]:
    """``f(*args)`` with a profiler that notes the first call into a forbidden function."""
    seen: list[str] = []
    targets: dict[str, tuple[str, str] | None] = {}

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or seen:
            return
        module = frame.f_globals.get("__name__", "")
        qual = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
        for dotted in forbid:
            t = targets.get(dotted) or _target(dotted)
            targets[dotted] = t
            if t is not None and module == t[0] and (qual == t[1] or qual.startswith(t[1] + ".")):
                seen.append(dotted)
                return

    import threading

    old, old_threads = sys.getprofile(), threading.getprofile()
    sys.setprofile(hook)
    threading.setprofile(hook)  # threads the answer starts (a guard; the rule: judge.method)
    try:
        value = f(*args)
    except Exception:
        if seen:  # the forbidden call is the cause, whatever failed after it
            return None, seen[0]
        raise
    finally:
        sys.setprofile(old)
        threading.setprofile(old_threads)
    return value, (seen[0] if seen else None)


def _call_raw(ns: Mapping[str, Any], name: str, *args: Any) -> Any:
    f = _lookup(ns, name)
    if isinstance(f, dict) and "__error__" in f:
        return f
    if not callable(f):
        return error_value(f"{name} should be a function; got {type(f).__name__}.")
    args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    before = [a.copy() if isinstance(a, np.ndarray) else None for a in args]
    forbid = _FORBID.get()
    try:
        if forbid:
            value, hit = _guarded(f, args, forbid)
            if hit is not None:
                hits = _HITS.get()
                if hits is not None and hit not in hits:
                    hits.append(hit)
                return error_value(f"{name} calls {hit}, which this question asks you to write "
                                   "yourself: its result measures the library, not your code.")
        else:
            value = f(*args)
        changed = tuple(i for i, (a, b) in enumerate(zip(args, before, strict=True))
                        if b is not None and not _same_array(a, b))
        return ("ok", value, changed)
    except NotImplementedError:
        return error_value(f"{name} is not implemented yet (it raises NotImplementedError).")
    except MemoryError:
        raise  # the grader reports the run as out of memory
    except NameError as exc:
        return error_value(f"{name} raised {type(exc).__name__}: {exc} (defined in a cell below the check "
                           "cell, or in one not run? Run the notebook from the top).")
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


class _TooSlow(BaseException):
    """Raised in the probe by the timer of :func:`call_within` (a BaseException, so that the
    answer's own ``except Exception`` does not swallow it)."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[bool]:
    """Raise :class:`_TooSlow` in this thread after ``seconds`` of wall clock; yields whether a
    timer could be set (only the main thread of a process can, where ``SIGALRM`` exists)."""
    import signal
    import threading

    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield False
        return

    def ring(signum: int, frame: Any) -> None:
        raise _TooSlow

    try:
        old = signal.signal(signal.SIGALRM, ring)
    except (OSError, ValueError):
        yield False
        return
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def call_within(ns: Mapping[str, Any], seconds: float, name: str, *args: Any) -> Any:
    """:func:`call`, stopped after ``seconds``: an answer too slow for one input (a hidden check's
    large case) is an error naming that input, and the probe goes on, so the cell that probes it
    does not run out of time and the question's other answers are still recorded."""
    shown = ", ".join(str(a) if isinstance(a, (int, float)) else type(a).__name__ for a in args)
    out: Any = _MISSING
    try:
        with _time_limit(seconds):
            out = call(ns, name, *args)
    except _TooSlow:
        if out is not _MISSING:  # the timer rang as the call returned: the answer stands
            return out
        return error_value(
            f"{name}({shown}) did not finish within {seconds:g} s, so it was stopped: it is too slow "
            "for an input of this size (look for a loop over every item it counts or builds: a formula "
            "or a vectorised step needs none).")
    return out


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


def call_tuple_peak(ns: Mapping[str, Any], name: str, size: int, *args: Any) -> tuple[list[Any], int]:
    """:func:`call_tuple`, and the peak of the memory NumPy and Python allocated during the call
    (bytes, by :mod:`tracemalloc`): how a question tells an n×n route from a d×d one."""
    import tracemalloc

    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        out = call_tuple(ns, name, size, *args)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was:
            tracemalloc.stop()
    return out, int(max(peak, 0))


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


def phi_rows(value: Any, label: str, X: np.ndarray) -> np.ndarray:
    """The features ``value`` of the points ``X`` (one row per point), as a float array. Features
    returned as rows, shape (D, n), are turned back and noted as one slip of form (charged once per
    question); a float32 or integer array is noted as the explanation of a failure."""
    A = as_array(value, f"{label}(X)", ndim=2)
    n = X.shape[0]
    if A.shape[0] != n and A.shape[1] == n:
        return orient(A, (n, None), f"{label}(X)",
                      rows="keep one row per point and one column per feature")
    if A.shape[0] != n:
        message = (f"{label} should return one row per point: for {n} points in R^{X.shape[1]} it "
                   f"returned shape {A.shape}. Hint: points are rows, so the result is (n_samples, D).")
        raise CheckError(message, cause=unanswerable("phi-rows", message))
    return A


def _low_precision_dtype(*values: Any) -> bool:
    return any(getattr(v, "kpca_dtype", "float64") in ("float32", "float16", "bfloat16") for v in values)


@dataclass(frozen=True, eq=False)
class PhiCase:
    """A feature map of degree ``p`` probed on two sets of points: its features of ``X`` are the
    answer ``fx``, those of ``Y`` the answer ``fy``; ``label`` names the map in messages."""

    X: np.ndarray
    Y: np.ndarray
    p: int
    fx: str
    fy: str
    label: str


def phi_slip(
    answers: dict[str, Any], case: PhiCase,
    *, name_count: bool = False, count: bool = False, tol: float = 1e-10,
) -> Slip | None:
    """The diagnosis of ``case.label`` on the points ``case.X``, ``case.Y`` (``None``:
    φ(x)ᵀφ(y) = (xᵀy + 1)^p, exact in float64, and, with ``count``, one feature per monomial of
    degree ≤ p). Malformed answers raise :class:`CheckError`."""
    X, Y, p, fx, fy, label = case.X, case.Y, case.p, case.fx, case.fy, case.label
    PX = phi_rows(answers[fx], label, X)
    PY = phi_rows(answers[fy], label, Y)
    if PX.shape[1] != PY.shape[1]:
        raise CheckError(
            f"{label} returned {PX.shape[1]} features for one input and {PY.shape[1]} for another; "
            "the number of features must not depend on the data."
        )
    err = _rel_err(PX @ PY.T, _poly_kernel(X, Y, p))
    identity = err <= tol
    if identity and _low_precision_dtype(answers[fx], answers[fy]):
        # right to the tolerance by luck: a float32 array keeps 7 digits (plain notes why)
        return Slip("precision", f"{label} returns a low-precision array (relative error {err:.1e}).")
    if identity and (not count or PX.shape[1] == math.comb(X.shape[1] + p, p)):
        return None
    return diagnose_phi(PX, PY, X, Y, p, label, name_count=name_count, identity_ok=identity)


def _check_phi_identity(answers: dict[str, Any], case: PhiCase, *, name_count: bool = False) -> str:
    slip = phi_slip(answers, case, name_count=name_count)
    if slip is not None:
        raise CheckError(slip.message + _phi_example(answers, case, slip),
                         cause=slip if slip.recognised else None)
    X, Y, p, fx, fy, label = case.X, case.Y, case.p, case.fx, case.fy, case.label
    PX = phi_rows(answers[fx], label, X)
    err = _rel_err(PX @ phi_rows(answers[fy], label, Y).T, _poly_kernel(X, Y, p))
    return f"{label}(x)ᵀ{label}(y) = (xᵀy + 1)^{p} on {X.shape[0]}×{Y.shape[0]} random pairs (relative error {err:.1e})."


def _phi_example(answers: dict[str, Any], case: PhiCase, slip: Slip) -> str:
    """For a slip that is not recognised: one pair of (public) points where the identity fails."""
    if slip.recognised:
        return ""
    X, Y, p, fx, fy, label = case.X, case.Y, case.p, case.fx, case.fy, case.label
    G = phi_rows(answers[fx], label, X) @ phi_rows(answers[fy], label, Y).T
    K = _poly_kernel(X, Y, p)
    i, j = np.unravel_index(np.argmax(np.abs(G - K)), K.shape)
    got, want = _digits((float(G[i, j]), float(K[i, j])), "{:.{d}g}", 6, stop=18)
    return (f" E.g. for x = {np.round(X[i], 3).tolist()}, y = {np.round(Y[j], 3).tolist()}: "
            f"φ(x)ᵀφ(y) = {got} instead of {want}. Hint: expand (1 + x₁y₁ + …)^{p} "
            "with the multinomial theorem.")


#: Slips of φ that make its number of features wrong (so a dimension equal to it is consistent).
COUNT_SLIPS = ("missing", "no-constant", "duplicates", "two-coordinates")


def phi_identity(answers: dict[str, Any], inputs: dict[str, Any], p: int, fname: str) -> str:
    """Check ``fname``'s features on ``inputs["X"]``, ``inputs["Y"]`` (probed as ``phi_X``, ``phi_Y``)."""
    public = PhiCase(inputs["X"], inputs["Y"], p, "phi_X", "phi_Y", fname)
    return _check_phi_identity(answers, public)


def phi_dimension(answers: dict[str, Any], inputs: dict[str, Any], p: int, fname: str, dname: str) -> str:
    """``dname`` is D. A φ with the wrong number of features: when its kernel identity fails, the
    identity check counts that slip, and a dimension equal to D or to φ's own count passes (not
    charged twice); when the identity holds (repeated monomials), this check counts it."""
    dim = as_int(answers["dim"], dname)
    X, Y = inputs["X"], inputs["Y"]
    PX = phi_rows(answers["phi_X"], fname, X)
    D = math.comb(2 + p, p)
    if dim == D and PX.shape[1] == D:
        return f"{dname} = {fname}'s number of features, and no monomial is repeated."
    public = PhiCase(X, Y, p, "phi_X", "phi_Y", fname)
    full = phi_slip(answers, public, count=True)
    if full is not None and full.code in COUNT_SLIPS:
        identity = phi_slip(answers, public) is None
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
def general_d3(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    d3 = PhiCase(inputs["X3"], inputs["Y3"], 3, "g3x", "g3y", "phi_poly(·, 3)")
    return _check_phi_identity(answers, d3, name_count=True)


def general_d5(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    """The identity and one feature per monomial for d = 5; a slip the d = 3 check found already is
    counted there (:func:`~kpca_lib.course.grading.judge.evaluate.run_checks` sees the same cause)."""
    d5 = PhiCase(inputs["X5"], inputs["Y5"], 2, "g5x", "g5y", "phi_poly(·, 2)")
    slip = phi_slip(answers, d5, name_count=True, count=True)
    if slip is None:
        return ("phi_poly(x, 2)ᵀphi_poly(y, 2) = (xᵀy + 1)² for d = 5, with one feature per monomial "
                "of degree ≤ 2.")
    raise CheckError(slip.message + _phi_example(answers, d5, slip),
                     cause=slip if slip.recognised else None)


# --------------------------------------------------------------------------- q2: counting
#: Offsets n − D of the kernel_cheaper cases: both sides of the break-even point and D = n itself.
CHEAPER_OFFSETS = (-2, -1, 0, 0, 1, 1, 2, -1)


def cheaper_triples(rng: np.random.Generator) -> list[list[int]]:
    """Eight cases (d, p, n) of ``kernel_cheaper`` around the break-even point n = D (drawn here, not
    in the question cell, whose code would state the count, question 2's answer)."""
    triples = []
    offsets = rng.permutation(CHEAPER_OFFSETS)
    for d, p, off in zip(rng.integers(1, 30, size=8), rng.integers(1, 6, size=8), offsets, strict=True):
        D = math.comb(int(d + p), int(p))
        triples.append([int(d), int(p), int(max(1, D + int(off)))])
    return triples


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
           "with your explicit φ from question 1."),
        cause=slip if slip.recognised else None,
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
    if W.shape == (k, d) and k != d:  # the directions as rows: read as meant, one form slip
        W = orient(W, (d, k), f"W for X of shape {X.shape}",
                   rows="one unit direction w_k per column, one row per feature")
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
            raise CheckError(ev_slip.message + shape, cause=ev_slip)
        return f"eigenvalues agree with the covariance route{shape}."
    try:
        return counted_once(w_slip, [("the eigenvalue check", ev_slip)],
                            f"directions agree with the covariance eigenvectors up to sign{shape}.")
    except CheckError as exc:
        raise CheckError(str(exc) + shape, cause=exc.cause) from None


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
    from ....centering import center_kernel

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


_KPCA_NAMES = {"Z": "train", "Z_new": "new", "Z_self": "self", "Z_b": "train"}


def kpca_slip(answers: dict[str, Any], inputs: dict[str, Any], which: str) -> Slip | None:
    """The diagnosis of the projections ``answers[which]`` (``"Z"``, ``"Z_new"`` or ``"Z_self"``)
    against kernel PCA, each component up to sign; malformed answers raise :class:`CheckError`."""
    from ....centering import center_kernel, center_test_kernel

    K, k = np.asarray(inputs["K_b" if which == "Z_b" else "K"]), int(inputs["k"])
    kk = 1 if which == "Z_self" else k
    vals, alphas = kpca_reference(K, kk)
    Kc = center_kernel(K)
    rows = np.asarray(inputs["K_new"]) if which == "Z_new" else K
    rows_c = center_test_kernel(rows, K)
    ref = rows_c @ alphas
    name = {"Z": "kpca_project(K, n_components)", "Z_new": "kpca_project_new(K_new, K, n_components)",
            "Z_self": "kpca_project_new(K, K, 1)", "Z_b": "kpca_project(K, n_components) for a second K"}[which]
    Z = as_array(answers[which], name, shape=ref.shape, finite=False)
    if which == "Z_b":
        stale = _stale_slip(answers, inputs, Z, rows_c)
        if stale is not None:
            return stale
    uvals, uvecs = np.linalg.eigh((K + K.T) / 2)
    top = np.argsort(uvals)[::-1][:kk]
    alpha_u = uvecs[:, top] / np.sqrt(np.abs(uvals[top]))
    slip = diagnose_projection(Z, ref, vals, K.shape[0], Kc, _KPCA_NAMES[which],
                               uncentred_refs=(rows_c @ alpha_u, rows @ alpha_u))
    if which != "Z" and slip is not None and not slip.recognised:
        return _same_components(answers, Z, rows_c, K, Kc, name) or slip
    return slip


def _stale_slip(answers: dict[str, Any], inputs: dict[str, Any], Z_b: np.ndarray,
                rows_c: np.ndarray) -> Slip | None:
    """kpca_project's projections for a second kernel matrix that are those of the first K (or use
    its α): a result kept from an earlier call (a global, a cache) instead of the K it is given."""
    try:
        Z = as_array(answers["Z"], "kpca_project(K, n_components)", ndim=2)
    except CheckError:
        return None
    _, alphas = kpca_reference(np.asarray(inputs["K"]), int(inputs["k"]))
    kept = Z.shape == Z_b.shape and np.allclose(Z_b, Z, rtol=1e-9, atol=1e-12)
    if not kept and alphas.shape[0] == rows_c.shape[1]:
        c, _, res = column_fit(Z_b, rows_c @ alphas)
        kept = bool(np.all(res <= 1e-7) and np.allclose(np.abs(c), 1.0, rtol=1e-6))
    if not kept:
        return None
    return Slip("stale-kernel", (
        "kpca_project gives the right projections for the first kernel matrix, but for a second, "
        "different K it returns what the first K gives: it keeps a result of an earlier call (a "
        "global variable or a cache) instead of computing from the K it is given. Compute from the "
        "arguments of each call."))


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
    from ....centering import center_test_kernel

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
    if slip is None and which == "Z" and "K_b" in inputs:  # the same function on a second K
        slip = kpca_slip(answers, inputs, "Z_b")
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


def mercer_verdicts(answers: dict[str, Any]) -> tuple[dict[str, bool], list[str], CheckError | None]:
    """The verdicts of ``is_kernel`` that can be read, the candidates without one, and the error of
    the first verdict that cannot be read (``None``: all could).

    Every check of the Mercer question reads the verdicts here: keys spelled differently ("A" for
    "a"), the strings "True"/"False" or "yes"/"no" and the numbers 1/0 are read as meant and noted
    as one form slip each (charged once per question); a value that is not a verdict at all
    (``None``, ``2``, ``"maybe"``) is an error of type that every check needing it reports."""
    names = tuple(mercer_candidates())
    given = as_map(_verdict_list(answers["is_kernel"], names), "is_kernel", keys=names)
    read: dict[str, bool] = {}
    error: CheckError | None = None
    for name in names:
        if name in given:
            try:
                read[name] = as_bool(_verdict_word(given[name], f"is_kernel[{name!r}]"), f"is_kernel[{name!r}]")
            except CheckError as exc:
                error = error or exc
    return read, [n for n in names if n not in given], error


_VERDICT_WORDS = {"yes": True, "no": False}


def _verdict_list(value: Any, names: tuple[str, ...]) -> Any:
    """Verdicts given as a list or tuple, one per candidate in the question's order, read as the
    dict the question asks for and noted as one form slip (charged once); anything else as it is."""
    container = getattr(value, "kpca_container", "")
    if isinstance(value, AnswerSequence) and value.length == len(value.items):
        items, container = list(value.items), value.kind
    elif container and isinstance(value, np.ndarray) and value.shape == (len(names),):
        boolean = getattr(value, "kpca_dtype", "") == "bool"
        items = [bool(v) if boolean else int(v) if float(v).is_integer() else float(v) for v in value]
    else:
        return value
    if len(items) != len(names):
        return value
    note(Slip("form-verdict-list", (
        f"is_kernel is a {container} of {len(items)} verdicts, not a dict: the question asks for "
        "{" + ", ".join(f"{n!r}: True or False" for n in names[:2]) + ", …}, one entry per candidate. "
        f"Read in the candidates' order ({', '.join(names)})."), charge="form"))
    return dict(zip(names, items, strict=True))


def _verdict_word(value: Any, name: str) -> Any:
    """A verdict written 1/0 or "yes"/"no", read as True/False and noted as a form slip."""
    if type(value) is int and value in (0, 1):
        note(Slip("form-bool-number", (
            f"{name} is the number {value}, not a boolean: write True or False (1 and 0 are "
            "numbers that only behave like them)."), charge="form"))
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _VERDICT_WORDS:
        note(Slip("form-bool-word", (
            f"{name} is the string {value!r}: write the verdict as True or False, without quotes "
            "(any non-empty string, even 'no', counts as true in an if)."), charge="form"))
        return _VERDICT_WORDS[value.strip().lower()]
    return value


def _missing_verdicts(answers: dict[str, Any], missing: list[str]) -> CheckError:
    names = tuple(mercer_candidates())
    given = answers["is_kernel"] if isinstance(answers["is_kernel"], dict) else {}
    other = [k for k in given if k.strip().strip("'\"").strip().casefold() not in names]
    message = (f"is_kernel has no verdict for {', '.join(missing)}"
               + (f" (its keys {', '.join(repr(k) for k in other[:6])} name no candidate: the keys are "
                  f"{', '.join(repr(n) for n in names)})" if other else "")
               + "; give True or False for each candidate.")
    return CheckError(message, cause=unanswerable("mercer-missing", message))


def _unreadable_verdicts(answers: dict[str, Any], read: dict[str, bool], missing: list[str],
                         error: CheckError | None) -> CheckError | None:
    """Why no verdict of the kind a check needs was read, when the completeness check says so
    (a verdict that is not True or False, or none at all): that check's error, never a
    claim about verdicts the student did not give."""
    if error is not None:
        return error
    if missing and not read:
        return _missing_verdicts(answers, missing)
    return None


def mercer_complete(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    read, missing, error = mercer_verdicts(answers)
    if missing:
        raise _missing_verdicts(answers, missing)
    if error is not None:
        raise error
    if isinstance(answers["counterexamples"], dict):  # its keys' spelling: a form slip charged here
        as_map(answers["counterexamples"], "counterexamples", keys=tuple(mercer_candidates()))
    return "is_kernel gives True or False for every candidate."


def marked_candidates(answers: dict[str, Any], verdict: bool) -> list[str]:
    """The candidates whose ``is_kernel`` verdict is ``verdict``, read as :func:`mercer_verdicts`
    reads them; when there are none because verdicts cannot be read, the error that says why
    (:func:`_unreadable_verdicts`)."""
    read, missing, error = mercer_verdicts(answers)
    marked = [n for n, v in read.items() if v is verdict]
    if not marked:
        unreadable = _unreadable_verdicts(answers, read, missing, error)
        if unreadable is not None:
            raise unreadable
    return marked


def _as_points(points: Any, name: str) -> np.ndarray:
    """Counterexample points as an array of shape (m, 2): one point given as a flat pair, or the
    points given as columns, is read as meant and noted as a form slip. The points are data, not
    a computed result: their dtype (integer coordinates are fine) explains nothing."""
    if isinstance(points, np.ndarray):
        points = np.asarray(points)  # drops what the kernel's array was (AnswerArray's traits)
    P = as_array(points, name)
    if P.shape == (2,):
        note(Slip("form-one-point", (
            f"{name} is a flat pair of shape (2,): the question asks for points of shape (m, 2), so one "
            "point is [[x₁, x₂]] (np.array([[x₁, x₂]]))."), charge="form"))
        return P.reshape(1, 2)
    if P.ndim != 2:
        raise CheckError(f"{name} should be a 2-D array of points, shape (m, 2); got shape {P.shape}.",
                         cause=unanswerable("points-ndim", f"{name} has shape {P.shape}"))
    if P.shape[1] != 2 and P.shape[0] == 2:
        return orient(P, (None, 2), name, rows="one row per point, its two coordinates in the columns")
    return P


def verify_counterexample(name: str, points: Any) -> str:
    """Check in the caller's process that ``points`` violate Mercer's condition for ``name``."""
    from ....kernels import kernel_matrix
    from ....mercer import check_mercer_matrix

    formula, k = mercer_candidates()[name]
    P = _as_points(points, f"counterexamples[{name!r}]")
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
    rejected = marked_candidates(answers, False)
    if not rejected:
        raise CheckError("you marked no candidate as invalid (every verdict in is_kernel is True): at "
                         "least one of them is not a kernel.")
    examples = as_map(answers["counterexamples"], "counterexamples", keys=tuple(mercer_candidates()))
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
    from ....datasets import make_moons

    X, y = make_moons(n_samples=100, noise=0.05, random_state=0)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


@lru_cache(maxsize=1)
def homework_faces() -> tuple[Any, np.ndarray, np.ndarray]:
    """Question 8: PCA of the first 80 faces of ``load_faces()``, and held-out face 85.

    Returns ``(pca, train_faces, face)``.
    """
    from ....datasets import load_faces
    from ....pca import PCA

    faces = load_faces().data[:100]
    train = faces[:80]
    pca = PCA(n_components=80).fit(train)
    return pca, train, faces[85]


@lru_cache(maxsize=1)
def _separating_grid() -> tuple[tuple[float, bool], ...]:
    """(σ, separates?) on a logarithmic grid of the slider's range, for the homework moons."""
    from ....analysis import first_component_separates

    X, y = homework_moons()
    lo, hi = SIGMA_RANGE
    return tuple((float(s), bool(first_component_separates(X, y, float(s))[0]))
                 for s in np.geomspace(lo, hi, 41))


def _number_string(value: Any, name: str) -> Any:
    """``value``, or the number a string holds (``answer_r = "15"``), noted as a form slip."""
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return value
        if math.isfinite(number):
            note(Slip("form-number-string", (
                f"{name} is the string {value!r}, not a number: write {name} = {value.strip()} without "
                "quotes (Python does not compute with the text of a number)."), charge="form"))
            return number
    return value


def _digits(values: tuple[float, ...], fmt: str, start: int, stop: int | None = None) -> list[str]:
    """``values`` formatted with ``fmt`` (``"{:.{d}%}"``, ``"{:.{d}g}"``) and the fewest digits
    (from ``start``, at most ``stop``, default ``start + 4``) that keep different values different."""
    out: list[str] = []
    for d in range(start, (start + 4 if stop is None else stop) + 1):
        out = [fmt.format(v, d=d) for v in values]
        if all(a != b for (i, a), (j, b) in itertools.combinations(enumerate(out), 2)
               if values[i] != values[j]):
            return out
    return out


def _sigma_relation(value: float) -> Slip | None:
    """A recognised slip when ``value`` does not separate the moons as σ but would as another
    parameter of the RBF kernel: γ = 1/(2σ²) (the library's and scikit-learn's ``gamma``), σ², or
    log₁₀ σ (a value below the slider's range, negative or zero). The message never says which σ
    that is (it would answer the question). A whole number outside the slider's range is read as
    nothing: it looks like another slider's line (``answer_r = …``), and a reading that works would
    hand over a σ."""
    from ....analysis import first_component_separates

    X, y = homework_moons()
    lo, hi = SIGMA_RANGE
    readings = [
        ("sigma-as-gamma", 1.0 / math.sqrt(2.0 * value) if value > 0 else 0.0, "as γ = 1/(2σ²)",
         "γ, the kernel's gamma, not σ: the question and the slider use the width σ of "
         "exp(−‖x − y‖²/(2σ²)), and γ is another number"),
        ("sigma-as-variance", math.sqrt(value) if value > 0 else 0.0, "as σ²",
         "σ², not σ: the question and the slider use the width σ of exp(−‖x − y‖²/(2σ²))"),
        ("sigma-as-log10", 10.0**value if value < lo else 0.0, "as log₁₀ σ",
         "log₁₀ σ, the logarithm of σ (the slider moves σ on a logarithmic scale), not σ itself"),
    ]
    if value == int(value) and not lo <= value <= hi:
        return None  # 15 is answer_r's kind of line more likely than a γ: no reading that would work
    for code, sigma, read_as, what in readings:
        if lo <= sigma <= hi and first_component_separates(X, y, sigma)[0]:
            (shown,) = _digits((value,), "{:.{d}g}", 4)
            where = (" (a width σ is positive)" if value <= 0 else
                     "" if lo <= value <= hi else f" (it is outside the slider's range [{lo}, {hi}])")
            message = (
                f"answer_sigma = {shown} does not separate the moons as σ{where}, but it would {read_as}: "
                f"this looks like {what}. Paste the line shown under the slider (answer_sigma = …) as it is."
            )
            return Slip(code, message, (value,))
    return None


def sigma_check(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    from ....analysis import first_component_separates

    sigma = as_float(_number_string(answers["sigma"], "answer_sigma"), "answer_sigma")
    lo, hi = SIGMA_RANGE
    X, y = homework_moons()
    ok, acc = first_component_separates(X, y, sigma) if lo <= sigma <= hi else (False, 0.0)
    if not ok:
        slip = _sigma_relation(sigma)
        if slip is not None:
            raise CheckError(slip.message, cause=slip)
    if not lo <= sigma <= hi:
        raise CheckError(f"answer_sigma = {sigma:.6g} is outside the slider's range [{lo}, {hi}]: paste "
                         "the line shown under the slider, for a σ where the status says the moons are "
                         "separated."
                         + (" A whole number: is it the line of another slider (answer_r = … is question 8's)?"
                            if sigma == int(sigma) and sigma >= 1 else ""))
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
    from ....analysis import reconstruction_errors

    try:
        r = as_int(_number_string(answers["r"], "answer_r"), "answer_r")
    except CheckError as exc:  # no number of eigenfaces: both checks fail, reported once
        if exc.cause is not None:
            raise
        raise CheckError(str(exc), cause=unanswerable("r-not-integer", str(exc))) from None
    pca, _, face = homework_faces()
    r_max = pca.components_.shape[0]
    if not 0 <= r <= r_max:
        message = f"answer_r = {r} is outside the slider's range [0, {r_max}]."
        raise CheckError(message, cause=unanswerable("r-off-slider", message))
    return r, float(reconstruction_errors(pca, face, [r])[0])


def _r_short(r: int, err: float) -> Slip | None:
    """The slip of an r one short of the target (r + 1 reaches it): the last r above the target
    pasted for the first one below. Both checks of question 8 meet it; it is charged once."""
    from ....analysis import reconstruction_errors

    pca, _, face = homework_faces()
    if r >= pca.components_.shape[0] or not reconstruction_errors(pca, face, [r + 1])[0] < FACE_TARGET:
        return None
    e, t = _digits((err, FACE_TARGET), "{:.{d}%}", 1)
    return Slip("r-one-short", (
        f"with r = {r} eigenfaces the relative error is {e}, not below the target {t}: the answer is "
        "the first r whose error is below the target, not one whose error is still above it (the status "
        "line says “below the target” there)."), (float(r),))


def r_below_target(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    r, err = _r_value(answers)
    e, t = _digits((err, FACE_TARGET), "{:.{d}%}", 1)
    if not err < FACE_TARGET:
        slip = _r_short(r, err)
        if slip is not None:
            raise CheckError(slip.message, cause=slip)
        raise CheckError(
            f"with r = {r} eigenfaces the relative error is {e}, not below the target {t}. "
            "Hint: more components lower the error."
        )
    return f"with r = {r} the error {e} is below {t}."


def r_smallest(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    """Question 8's main requirement: no smaller r reaches the target (and r does)."""
    from ....analysis import reconstruction_errors

    r, err = _r_value(answers)
    if not err < FACE_TARGET:
        e, t = _digits((err, FACE_TARGET), "{:.{d}%}", 1)
        raise CheckError(
            f"with r = {r} the error {e} does not reach the target {t}, so r is not "
            "the smallest r that reaches it: move the slider up until the error first goes below the target.",
            cause=_r_short(r, err))
    pca, _, face = homework_faces()
    if r > 0:
        before = float(reconstruction_errors(pca, face, [r - 1])[0])
        if before < FACE_TARGET:
            e, t = _digits((err, FACE_TARGET), "{:.{d}%}", 1)
            raise CheckError(  # never which r: that would answer the question
                f"with r = {r} the error {e} is below the target {t}, but fewer eigenfaces reach it too: "
                "the question asks for the smallest r. Move the slider down until one eigenface less goes "
                "above the target."
            )
    e, t = _digits((err, FACE_TARGET), "{:.{d}%}", 1)
    return f"r = {r} is the smallest number of eigenfaces below {t} (error {e})."
