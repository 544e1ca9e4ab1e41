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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

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
)

__all__ = [
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
    try:
        return ("ok", f(*args))
    except NotImplementedError:
        return error_value(f"{name} is not implemented yet (it raises NotImplementedError).")
    except MemoryError:
        raise  # the grader reports the run as out of memory
    except Exception as exc:
        return error_value(f"{name} raised {type(exc).__name__}: {exc}")


def call(ns: Mapping[str, Any], name: str, *args: Any) -> Any:
    """Plain data of ``ns[name](*args)``, or an error record saying what went wrong."""
    out = _call_raw(ns, name, *args)
    return encode(out[1]) if isinstance(out, tuple) else out


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
    return [encode(v) for v in value]


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


def _signed_col_err(Z: np.ndarray, Zref: np.ndarray) -> tuple[float, int]:
    """Largest relative error over columns, each compared up to its sign."""
    worst, col = 0.0, -1
    for j in range(Zref.shape[1]):
        e = min(_rel_err(Z[:, j], Zref[:, j]), _rel_err(-Z[:, j], Zref[:, j]))
        if e > worst:
            worst, col = e, j
    return worst, col


def _eigen_clusters(values: np.ndarray, rtol: float = 1e-6) -> list[list[int]]:
    """Indices of (numerically) equal eigenvalues, in order."""
    scale = max(float(np.max(np.abs(values))), 1e-300)
    groups: list[list[int]] = []
    for i, v in enumerate(values):
        if groups and abs(values[groups[-1][-1]] - v) <= rtol * scale:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


# --------------------------------------------------------------------------- q1: explicit φ
def _poly_kernel(X: np.ndarray, Y: np.ndarray, p: int) -> np.ndarray:
    return (X @ Y.T + 1.0) ** p


def _check_phi_identity(
    answers: dict[str, Any], X: np.ndarray, Y: np.ndarray, p: int, fx: str, fy: str, label: str
) -> str:
    PX = as_array(answers[fx], f"{label}(X)", ndim=2)
    PY = as_array(answers[fy], f"{label}(Y)", ndim=2)
    if PX.shape[0] != X.shape[0] or PY.shape[0] != Y.shape[0]:
        raise CheckError(
            f"{label} should return one row per point: for X of shape {X.shape} it returned "
            f"shape {PX.shape}. Hint: points are rows, so the result is (n_samples, D)."
        )
    if PX.shape[1] != PY.shape[1]:
        raise CheckError(
            f"{label} returned {PX.shape[1]} features for one input and {PY.shape[1]} for another; "
            "the number of features must not depend on the data."
        )
    K = _poly_kernel(X, Y, p)
    err = _rel_err(PX @ PY.T, K)
    if err > 1e-8:
        i, j = np.unravel_index(np.argmax(np.abs(PX @ PY.T - K)), K.shape)
        raise CheckError(
            f"{label}(x)ᵀ{label}(y) differs from (xᵀy + 1)^{p} by up to {err:.3g} (relative); "
            f"e.g. for the points x = {np.round(X[i], 3).tolist()}, y = {np.round(Y[j], 3).tolist()}: "
            f"{float((PX @ PY.T)[i, j]):.6g} instead of {float(K[i, j]):.6g}. Hint: expand "
            f"(1 + x₁y₁ + ... )^{p} with the multinomial theorem; each feature carries the square "
            "root of its multinomial coefficient."
        )
    return f"{label}(x)ᵀ{label}(y) = (xᵀy + 1)^{p} on {X.shape[0]}×{Y.shape[0]} random pairs (relative error {err:.1e})."


def phi_identity(answers: dict[str, Any], inputs: dict[str, Any], p: int, fname: str) -> str:
    """Check ``fname``'s features on ``inputs["X"]``, ``inputs["Y"]`` (probed as ``phi_X``, ``phi_Y``)."""
    return _check_phi_identity(answers, inputs["X"], inputs["Y"], p, "phi_X", "phi_Y", fname)


def phi_dimension(answers: dict[str, Any], p: int, fname: str, dname: str) -> str:
    """Check that ``dname`` (probed as ``dim``) is the dimension of ``fname``'s map for d = 2."""
    dim = as_int(answers["dim"], dname)
    PX = as_array(answers["phi_X"], f"{fname}(X)", ndim=2)
    if dim != PX.shape[1]:
        raise CheckError(
            f"{dname} = {dim}, but your {fname} returns {PX.shape[1]} features: the dimension "
            "D is the number of entries of φ(x)."
        )
    if dim != math.comb(2 + p, p):
        raise CheckError(
            f"{dname} = {dim} matches your {fname}, but it is not the dimension of the "
            "polynomial feature map: "
            + (
                "some monomials appear more than once (e.g. x₁x₂ and x₂x₁); merge them, "
                "adding their weights under the square root."
                if dim > math.comb(2 + p, p)
                else "some monomials are missing; every monomial x₁^a x₂^b with a + b ≤ "
                f"{p} appears."
            )
        )
    return f"{dname} = {fname}'s number of features, and no monomial is repeated."


# --------------------------------------------------------------------------- q1c: general d
def general_d3(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    return _check_phi_identity(answers, inputs["X3"], inputs["Y3"], 3, "g3x", "g3y", "phi_poly(·, 3)")


def general_d5(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    msg = _check_phi_identity(answers, inputs["X5"], inputs["Y5"], 2, "g5x", "g5y", "phi_poly(·, 2)")
    D = as_array(answers["g5x"], "phi_poly(X, 2)", ndim=2).shape[1]
    if D != math.comb(5 + 2, 2):
        raise CheckError(
            f"for d = 5, p = 2 your map has {D} features; the polynomial feature map has one "
            "feature per monomial of degree ≤ p, each appearing once. Count them with C(d + p, p)."
        )
    return msg + " The number of features is C(d + p, p)."


# --------------------------------------------------------------------------- q2: counting
def count_check(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    counts = as_list(answers["counts"], "n_features")
    for (d, p), value in zip(inputs["pairs"], counts, strict=False):
        d, p = int(d), int(p)
        got = as_int(value, f"n_features({d}, {p})")
        if got != math.comb(d + p, p):
            raise CheckError(
                f"n_features({d}, {p}) = {got} is not the number of monomials of degree ≤ {p} in "
                f"{d} variables. Hint: check small cases by hand (d = 2, p = 2 gives the lecture's "
                "6 features) and compare with your explicit φ from question 1."
            )
    return f"n_features(d, p) is right on {len(counts)} random (d, p) pairs."


def cheaper_check(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    values = as_list(answers["cheaper"], "kernel_cheaper")
    for (d, p, n), value in zip(inputs["triples"], values, strict=False):
        d, p, n = int(d), int(p), int(n)
        got = as_bool(value, f"kernel_cheaper({d}, {p}, {n})")
        if got != (math.comb(d + p, p) > n):
            raise CheckError(
                f"kernel_cheaper({d}, {p}, {n}) = {got} is wrong. Hint: compare the size D of "
                "the D×D covariance in feature space with the n×n kernel matrix; the kernel "
                "route is cheaper exactly when D > n."
            )
    return f"kernel_cheaper(d, p, n) is right on {len(values)} cases near the break-even point."


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


def compare_gram(answers: dict[str, Any], inputs: dict[str, Any], i: str, what: str) -> str:
    X, k = np.asarray(inputs["X" + i]), int(inputs["k" + i])
    n, d = X.shape
    ev = as_array(answers["ev" + i], f"eigenvalues for X of shape {X.shape}", ndim=1)
    W = as_array(answers["W" + i], f"W for X of shape {X.shape}", ndim=2)
    if ev.shape != (k,) or W.shape != (d, k):
        raise CheckError(
            f"for X of shape ({n}, {d}) and n_components = {k}, expected eigenvalues of shape "
            f"({k},) and W of shape ({d}, {k}) (one unit direction w_k per column); got "
            f"{ev.shape} and {W.shape}."
        )
    ref_ev, ref_W = covariance_reference(X, k)
    if what == "eigenvalues":
        err = _rel_err(ev, ref_ev)
        if err > 1e-6:
            ratio = float(ev[0] / ref_ev[0]) if ref_ev[0] else float("nan")
            hint = ""
            if abs(ratio - n) < 1e-3 * n:
                hint = " Your values are n times too large: XᵀX has eigenvalues nλ."
            elif np.any(np.diff(ev) > 1e-9 * abs(ev[0])):
                hint = " Return them in decreasing order."
            raise CheckError(
                f"the eigenvalues differ from those of the covariance C = XcᵀXc/n by up to "
                f"{err:.3g} (relative; X of shape {X.shape}).{hint} Hint: centre X first."
            )
        return f"eigenvalues agree with the covariance route (X of shape {X.shape})."
    norms = np.linalg.norm(W, axis=0)
    if np.max(np.abs(norms - 1.0)) > 1e-6:
        raise CheckError(
            f"the columns of W should be unit vectors; their norms are {np.round(norms, 4).tolist()}. "
            "Hint: α = β/√(nλ) makes w = Xcᵀα a unit vector."
        )
    for group in _eigen_clusters(ref_ev):
        P = W[:, group] @ W[:, group].T
        Pref = ref_W[:, group] @ ref_W[:, group].T
        err = float(np.max(np.abs(P - Pref)))
        if err > 1e-6:
            which = f"w_{group[0] + 1}" if len(group) == 1 else f"w_{group[0] + 1}..w_{group[-1] + 1}"
            raise CheckError(
                f"{which} does not match the covariance eigenvector(s) (up to sign"
                + (" and rotation inside the repeated eigenvalue" if len(group) > 1 else "")
                + f"): difference {err:.3g} (X of shape {X.shape}). Hint: w = Xcᵀβ/√(nλ) with "
                "the centred X and β the unit eigenvectors of XcXcᵀ, in the same order as the eigenvalues."
            )
    return f"directions agree with the covariance eigenvectors up to sign (X of shape {X.shape})."


def gram_eigenvalues(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    return compare_gram(answers, inputs, "1", "eigenvalues") + " " + compare_gram(
        answers, inputs, "2", "eigenvalues"
    )


def gram_vectors(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    return compare_gram(answers, inputs, "1", "vectors") + " " + compare_gram(
        answers, inputs, "2", "vectors"
    )


# --------------------------------------------------------------------------- q4: centring
def _rbf(A: np.ndarray, B: np.ndarray, sigma: float) -> np.ndarray:
    from ...kernels import rbf_kernel

    return rbf_kernel(A, B, sigma=sigma)


def compare_centered(answers: dict[str, Any], inputs: dict[str, Any], base: str, new: bool) -> str:
    from ...centering import center_kernel, center_test_kernel

    K_train = np.asarray(inputs[base])
    if new:
        K_new = np.asarray(inputs[base + "_new"])
        ref = center_test_kernel(K_new, K_train)
        name = f"center_new(K_new, K) for K_new of shape {K_new.shape}"
        key = base + "c_new"
        hint = ("centre with the training statistics: subtract the training column means and the "
                "mean of each new row, and add the training grand mean.")
    else:
        ref = center_kernel(K_train)
        name = f"center(K) for K of shape {K_train.shape}"
        key = base + "c"
        hint = ("K_c = K − 1K − K1 + 1K1 with 1 the n×n matrix of 1/n; the rows and columns of "
                "K_c should then sum to 0.")
    got = as_array(answers[key], name, shape=ref.shape)
    err = _rel_err(got, ref)
    if err > 1e-9:
        extra = ""
        if not new:
            extra = f" (row sums of your K_c reach {float(np.max(np.abs(got.sum(axis=1)))):.3g})"
        raise CheckError(f"{name} is off by up to {err:.3g} (relative){extra}. Hint: {hint}")
    return f"{name} matches the centred kernel."


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


def compare_kpca(answers: dict[str, Any], inputs: dict[str, Any], which: str) -> str:
    from ...centering import center_kernel, center_test_kernel

    K, k = np.asarray(inputs["K"]), int(inputs["k"])
    vals, alphas = kpca_reference(K, k)
    if which == "Z":
        ref = center_kernel(K) @ alphas
        name = "kpca_project(K, n_components)"
        hint = ("the k-th coordinate of x_i is Σ_j α_kj K^c_ij with α_k = β_k/√(nλ_k) and K^c "
                "the centred kernel (the modified step 3).")
    elif which == "Z_new":
        ref = center_test_kernel(np.asarray(inputs["K_new"]), K) @ alphas
        name = "kpca_project_new(K_new, K, n_components)"
        hint = ("centre the new rows with the training statistics (question 4), then multiply "
                "by the α of the training kernel.")
    else:
        ref = center_kernel(K) @ alphas[:, :1]
        name = "kpca_project_new(K, K, 1)"
        hint = "the training points, projected as new points, must land where kpca_project puts them."
    Z = as_array(answers[which], name, shape=ref.shape)
    err, col = _signed_col_err(Z, ref)
    if err > 1e-6:
        raise CheckError(
            f"{name}: component {col + 1} differs from kernel PCA by up to {err:.3g} (relative, "
            f"compared up to sign). Hint: {hint}"
        )
    return f"{name} matches kernel PCA up to the sign of each component."


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
            f"counterexamples[{name!r}]: on your {P.shape[0]} points the kernel matrix of {formula} "
            f"is symmetric and positive semi-definite (smallest eigenvalue {result.min_eigenvalue:.3g}), "
            "so these points do not show that it is invalid. Hint: look for points where K_ij ≠ K_ji, "
            "or a small set (even one or two points) with a negative eigenvalue."
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
                f"you marked {name!r} as not a kernel: give points showing it in counterexamples[{name!r}]."
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


def sigma_check(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    from ...analysis import first_component_separates

    sigma = as_float(answers["sigma"], "answer_sigma")
    lo, hi = SIGMA_RANGE
    if not lo <= sigma <= hi:
        raise CheckError(f"answer_sigma = {sigma:g} is outside the slider's range [{lo}, {hi}].")
    X, y = homework_moons()
    ok, acc = first_component_separates(X, y, sigma)
    if not ok:
        raise CheckError(
            f"at σ = {sigma:.4g} the best threshold on the first kernel principal component "
            f"classifies {acc:.1%} of the points: the moons are not separated. Hint: move the "
            "slider until the status line says the classes are separated, then paste the line it shows."
        )
    return f"at σ = {sigma:.4g} a threshold on the first component separates the moons (100%)."


def r_below_target(answers: dict[str, Any], inputs: dict[str, Any]) -> str:
    from ...analysis import reconstruction_errors

    r = as_int(answers["r"], "answer_r")
    pca, _, face = homework_faces()
    r_max = pca.components_.shape[0]
    if not 0 <= r <= r_max:
        raise CheckError(f"answer_r = {r} is outside the slider's range [0, {r_max}].")
    err = float(reconstruction_errors(pca, face, [r])[0])
    if not err < FACE_TARGET:
        raise CheckError(
            f"with r = {r} eigenfaces the relative error is {err:.1%}, not below the target "
            f"{FACE_TARGET:.1%}. Hint: more components lower the error."
        )
    return f"with r = {r} the error {err:.1%} is below {FACE_TARGET:.1%}."
