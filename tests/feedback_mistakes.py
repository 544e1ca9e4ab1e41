"""A catalogue of real student mistakes, one per submission, and what feedback each must get.

Each :class:`Mistake` is the solution with exactly one slip: an exact ``old`` → ``new``
replacement on one answer cell of ``solutions/`` (it must apply exactly once). It says which
checks (public and hidden, by id) the grader must fail, regular expressions that the
grader's message of a failing check must match (and, for a public check, the message the
notebook's check cell prints too), and the question's expected score. Every other question
keeps full marks. Entries whose ``fails`` is empty are right answers written differently
(they keep full marks).

The scores follow one rule: a recognised slip is charged once per question, by the first check
that diagnoses it; a later check of the same question (public or hidden) that finds the same
slip passes and says where it was counted. Unrecognised failures are charged wherever they show.

Used by ``tests/test_feedback.py`` and ``benchmarks/feedback_table.py``: :func:`build` writes the
submissions, :func:`grade_all` grades them with ``kpca-course grade`` (one batch per
assignment), :func:`public_run` runs a submission's code cells in-process as a student would.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from kpca_lib.course.grading.notebooks import load_questions, meta, with_answers

ROOT = Path(__file__).resolve().parents[1]

ASSIGNMENTS = {
    "01_feature_maps": ["q1_phi_p3", "q1_phi_p4", "q1_phi_general", "q2_feature_count"],
    "02_pca_and_centering": ["q3_gram_pca", "q4_centering", "q5_kpca_projection"],
    "03_mercer": ["q6_mercer"],
    "04_widgets_sigma_and_eigenfaces": ["q7_sigma_moons", "q8_eigenfaces_r"],
}
ASSIGNMENT_OF = {q: a for a, qs in ASSIGNMENTS.items() for q in qs}


@functools.lru_cache(maxsize=1)
def _questions() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for assignment in ASSIGNMENTS:
        path = ROOT / "solutions" / f"{assignment}.ipynb"
        out.update(load_questions(nbformat.read(path, as_version=4), path.name))
    return out


def get_question(qid: str) -> Any:
    """The question ``qid`` as its question cell in ``solutions/`` defines it (``ValueError``
    for an unknown id)."""
    try:
        return _questions()[qid]
    except KeyError:
        raise ValueError(f"unknown question {qid!r}") from None
FULL = {"q1_phi_p3": 3, "q1_phi_p4": 3, "q1_phi_general": 3, "q2_feature_count": 3, "q3_gram_pca": 3,
        "q4_centering": 3, "q5_kpca_projection": 3, "q6_mercer": 5, "q7_sigma_moons": 2,
        "q8_eigenfaces_r": 3}

# check ids (hidden ones: <question>.<function name in the hidden-check cell>)
P3_ID, P3_DIM, P3_H = "q1_phi_p3.identity", "q1_phi_p3.dimension", "q1_phi_p3.large_coordinates_and_one_point"
P4_ID, P4_DIM, P4_H = "q1_phi_p4.identity", "q1_phi_p4.dimension", "q1_phi_p4.large_coordinates_and_one_point"
G_D3, G_D5, G_H = "q1_phi_general.d3", "q1_phi_general.d5", "q1_phi_general.one_input_feature_degree_five"
C_COUNT, C_CHEAP, C_H = "q2_feature_count.count", "q2_feature_count.cheaper", "q2_feature_count.exact_for_large_d"
GR_EV, GR_W, GR_H = "q3_gram_pca.eigenvalues", "q3_gram_pca.directions", "q3_gram_pca.repeated_eigenvalue"
CE_T, CE_N, CE_H = "q4_centering.train", "q4_centering.new", "q4_centering.polynomial_kernel_and_one_new_point"
KP_T, KP_N, KP_H = ("q5_kpca_projection.train", "q5_kpca_projection.new",
                    "q5_kpca_projection.training_points_as_new_points")
M_C, M_E, M_H = "q6_mercer.complete", "q6_mercer.evidence", "q6_mercer.called_kernels_are_kernels"
S_SEP = "q7_sigma_moons.separates"
R_BELOW, R_SMALL = "q8_eigenfaces_r.below", "q8_eigenfaces_r.smallest_r"


@dataclass(frozen=True)
class Mistake:
    """One submission: the solution with ``old`` replaced by ``new`` in answer cell ``cell``."""

    id: str
    question: str
    cell: str
    old: str
    new: str
    fails: frozenset[str]
    messages: dict[str, str] = field(default_factory=dict)  # check id -> regex of its message
    points: float = 0.0
    what: str = ""  # the slip, in words (for the table)

    @property
    def assignment(self) -> str:
        return ASSIGNMENT_OF[self.question]


def M(id: str, question: str, cell: str, old: str, new: str, fails: list[str], messages: dict[str, str],
      points: float, what: str) -> Mistake:
    return Mistake(id, question, cell, old, new, frozenset(fails), messages, points, what)


def OK(id: str, question: str, cell: str, old: str, new: str, what: str) -> Mistake:
    return Mistake(id, question, cell, old, new, frozenset(), {}, FULL[question], what)


_PHI_POLY_D2 = '''    X = np.asarray(X, dtype=float)
    columns = []
    for a1 in range(p + 1):
        for a2 in range(p + 1 - a1):
            a0 = p - a1 - a2
            weight = math.factorial(p) / (math.factorial(a0) * math.factorial(a1) * math.factorial(a2))
            columns.append(np.sqrt(weight) * X[:, 0] ** a1 * X[:, 1] ** a2)
    return np.column_stack(columns)
'''
_PHI_POLY_BODY = '''    for total in range(p + 1):
        for combo in itertools.combinations_with_replacement(range(d), total):
            a = np.bincount(np.asarray(combo, dtype=int), minlength=d)
            weight = math.factorial(p) / (
                math.factorial(p - total) * math.prod(math.factorial(int(k)) for k in a)
            )
            columns.append(np.sqrt(weight) * np.prod(X**a, axis=1))
'''
_PHI_POLY_PRODUCT = '''    for a in itertools.product(range(p + 1), repeat=d):
        if sum(a) <= p:
            rest = p - sum(a)
            weight = math.factorial(p) / (math.factorial(rest) * math.prod(math.factorial(e) for e in a))
            columns.append(np.sqrt(weight) * np.prod(X ** np.array(a), axis=1))
'''
_P3_COLUMNS = '''        np.ones_like(x1), s3 * x1, s3 * x2,
        s3 * x1**2, s6 * x1 * x2, s3 * x2**2,
        x1**3, s3 * x1**2 * x2, s3 * x1 * x2**2, x2**3,
'''
_GRAM_BODY = '''    values, vectors = np.linalg.eigh(Xc @ Xc.T)
    order = np.argsort(values)[::-1][:n_components]
    n_lambda, B = values[order], vectors[:, order]
    alphas = B / np.sqrt(n_lambda)
    return n_lambda / n, Xc.T @ alphas
'''
_MERCER_HEAD = '''is_kernel = {"a": True, "b": True, "c": False, "d": False, "e": False, "f": True}
counterexamples = {
'''
_CENTER = "return K - K.mean(axis=0)[None, :] - K.mean(axis=1)[:, None] + K.mean()"
_CENTER_NEW = "return K_new - K.mean(axis=0)[None, :] - K_new.mean(axis=1)[:, None] + K.mean()"

CATALOGUE: list[Mistake] = [
    # ------------------------------------------------------------------ q1: φ for p = 3, 4 (d = 2)
    M("p3_no_sqrt", "q1_phi_p3", "q1-p3-answer", "s3, s6 = np.sqrt(3.0), np.sqrt(6.0)", "s3, s6 = 3.0, 6.0",
      [P3_ID], {P3_ID: r"right monomials.*multinomial coefficient itself.*square root"}, 2,
      "multinomial coefficients without the square root"),
    M("p3_no_weights", "q1_phi_p3", "q1-p3-answer", "s3, s6 = np.sqrt(3.0), np.sqrt(6.0)", "s3, s6 = 1.0, 1.0",
      [P3_ID], {P3_ID: r"right monomials, but without coefficients"}, 2, "no √ weights at all"),
    M("p3_missing_constant", "q1_phi_p3", "q1-p3-answer", "np.ones_like(x1), s3 * x1,", "s3 * x1,",
      [P3_ID], {P3_ID: r"your map has 9 features, fewer.*no constant feature"}, 2,
      "the constant feature left out (dim_3 = 10 kept)"),
    M("p3_dim_wrong", "q1_phi_p3", "q1-p3-answer", "dim_3 = 10", "dim_3 = 9",
      [P3_DIM], {P3_DIM: r"dim_3 = 9, but your phi_3 returns 10 features"}, 2, "dim_3 off by one"),
    M("p3_one_coefficient", "q1_phi_p3", "q1-p3-answer", "s6 * x1 * x2,", "s3 * x1 * x2,",
      [P3_ID], {P3_ID: r"1 of them has the wrong coefficient \(x₁x₂\)"}, 2, "one wrong coefficient (√3 for √6)"),
    M("p3_duplicate", "q1_phi_p3", "q1-p3-answer", "s6 * x1 * x2,", "s3 * x1 * x2, s3 * x2 * x1,",
      [P3_DIM], {P3_DIM: r"dim_3 = 10: .*11 features.*x₁x₂ appears in 2 features"}, 2,
      "x₁x₂ and x₂x₁ as two features (the identity still holds)"),
    M("p3_squeeze", "q1_phi_p3", "q1-p3-answer", "    ])\n", "    ]).squeeze()\n",
      [P3_H], {P3_H: r"single point.*returned shape \(10,\).*squeeze"}, 2,
      "squeeze(): one point gives a 1-D array"),
    M("p4_range", "q1_phi_p4", "q1-p4-answer", "range(5 - a1)", "range(4 - a1)",
      [P4_ID], {P4_ID: r"10 features, fewer.*5 monomials of degree ≤ 4 are missing \(e\.g\. x₁⁴"}, 2,
      "loop bound one short: the degree-4 monomials are missing"),
    M("p4_weight_without_a0", "q1_phi_p4", "q1-p4-answer",
      "math.factorial(4) / (math.factorial(a0) * math.factorial(a1) * math.factorial(a2))",
      "math.factorial(4) / (math.factorial(a1) * math.factorial(a2))",
      [P4_ID], {P4_ID: r"right monomials, but \d+ of them have the wrong coefficient.*multinomial"}, 2,
      "multinomial coefficient without a0!"),
    M("p4_no_sqrt", "q1_phi_p4", "q1-p4-answer", "np.sqrt(weight) *", "weight *",
      [P4_ID], {P4_ID: r"multinomial coefficient itself"}, 2, "weights without the square root"),
    # ------------------------------------------------------------------ q1: φ for any d
    M("general_only_d2", "q1_phi_general", "q1-general-answer",
      "    X = np.asarray(X, dtype=float)\n    n, d = X.shape\n    columns = []\n" + _PHI_POLY_BODY
      + "    return np.column_stack(columns)\n", _PHI_POLY_D2,
      [G_D3], {G_D3: r"for d = 3, p = 3 your map has 10 features; the polynomial feature map has "
                     r"C\(d \+ p, p\) = 20.*only the first two coordinates"}, 2,
      "phi_poly written for d = 2 only"),
    M("general_combinations", "q1_phi_general", "q1-general-answer", "combinations_with_replacement(",
      "combinations(", [G_D3], {G_D3: r"d = 3, p = 3 your map has 8 features.*C\(d \+ p, p\) = 20.*missing \(e\.g\. x₁²"},
      2, "combinations without replacement: no squares"),
    M("general_no_sqrt", "q1_phi_general", "q1-general-answer", "np.sqrt(weight) *", "weight *",
      [G_D3], {G_D3: r"multinomial coefficient itself"}, 2, "weights without the square root"),
    M("general_no_constant", "q1_phi_general", "q1-general-answer", "for total in range(p + 1):",
      "for total in range(1, p + 1):", [G_D3], {G_D3: r"19 features.*no constant feature"}, 2,
      "degree 0 left out"),
    # ------------------------------------------------------------------ q2: counting
    M("count_exact_degree", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return math.comb(d + p - 1, p)", [C_COUNT],
      {C_COUNT: r"number of monomials of degree exactly p"}, 2,
      "monomials of degree exactly p (kernel_cheaper uses it: judged against it)"),
    M("count_tensor", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)", "return (d + 1) ** p",
      [C_COUNT], {C_COUNT: r"ordered choices.*same monomial"}, 2, "(d + 1)^p: ordered choices"),
    M("count_float", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return round(math.prod(range(d + 1, d + p + 1)) / math.factorial(p))",
      [C_H], {C_H: r"off by rounding for large values.*integer arithmetic"}, 2, "float division: rounding for large d"),
    M("cheaper_ge", "q2_feature_count", "q2-answer", "return n_features(d, p) > n", "return n_features(d, p) >= n",
      [C_CHEAP], {C_CHEAP: r"also when D = n.*strict"}, 2, "D ≥ n instead of D > n"),
    M("cheaper_reversed", "q2_feature_count", "q2-answer", "return n_features(d, p) > n",
      "return n_features(d, p) < n", [C_CHEAP], {C_CHEAP: r"opposite of the right ones"}, 2, "D < n"),
    M("cheaper_input_dimension", "q2_feature_count", "q2-answer", "return n_features(d, p) > n",
      "return d > n", [C_CHEAP], {C_CHEAP: r"you compare n with d, the dimension of the inputs"}, 2,
      "compares d, not D, with n"),
    # ------------------------------------------------------------------ q3: PCA through XᵀX
    M("gram_n_minus_1", "q3_gram_pca", "q3-answer", "return n_lambda / n,", "return n_lambda / (n - 1),",
      [GR_EV], {GR_EV: r"exactly n/\(n − 1\) = [\d.]+ times.*divided by n − 1"}, 2, "covariance with 1/(n − 1)"),
    M("gram_n_times", "q3_gram_pca", "q3-answer", "return n_lambda / n,", "return n_lambda,",
      [GR_EV], {GR_EV: r"exactly n times too large"}, 2, "eigenvalues of XcXcᵀ returned (nλ)"),
    M("gram_sqrt", "q3_gram_pca", "q3-answer", "return n_lambda / n,", "return np.sqrt(n_lambda / n),",
      [GR_EV], {GR_EV: r"square roots of the eigenvalues"}, 2, "square roots of the eigenvalues"),
    M("gram_ascending", "q3_gram_pca", "q3-answer", "order = np.argsort(values)[::-1][:n_components]",
      "order = np.argsort(values)[:n_components]", [GR_EV],
      {GR_EV: r"you took the smallest eigenvalues: numpy.linalg.eigh returns them in ascending order"}, 2,
      "eigh's ascending order kept: the smallest eigenvalues"),
    M("gram_increasing", "q3_gram_pca", "q3-answer", "order = np.argsort(values)[::-1][:n_components]",
      "order = np.argsort(values)[-n_components:]", [GR_EV],
      {GR_EV: r"right eigenvalues in increasing order"}, 2, "the top k, in increasing order"),
    M("gram_not_centred", "q3_gram_pca", "q3-answer", "Xc = X - X.mean(axis=0)", "Xc = X",
      [GR_EV], {GR_EV: r"eigenvalues of the uncentred data.*centre X first"}, 2, "X not centred"),
    M("gram_alpha_beta", "q3_gram_pca", "q3-answer", "alphas = B / np.sqrt(n_lambda)", "alphas = B",
      [GR_W], {GR_W: r"right directions.*constant factor per column, √\(nλ_k\).*unit eigenvectors β_k"}, 2,
      "α = β: W's columns have norm √(nλ)"),
    M("gram_alpha_sqrt_lambda", "q3_gram_pca", "q3-answer", "alphas = B / np.sqrt(n_lambda)",
      "alphas = B / np.sqrt(n_lambda / n)", [GR_W], {GR_W: r"constant factor per column, √n"}, 2,
      "α = β/√λ: W's columns have norm √n"),
    # ------------------------------------------------------------------ q4: centring
    M("center_no_grand_mean", "q4_centering", "q4-answer", "K.mean(axis=1)[:, None] + K.mean()\n",
      "K.mean(axis=1)[:, None]\n", [CE_T], {CE_T: r"grand mean of the training K is not added back"}, 2,
      "center without + grand mean (q5 uses center: keeps full marks)"),
    M("center_grand_sign", "q4_centering", "q4-answer", "K.mean(axis=1)[:, None] + K.mean()\n",
      "K.mean(axis=1)[:, None] - K.mean()\n", [CE_T],
      {CE_T: r"grand mean is subtracted instead of added back"}, 2, "grand mean subtracted"),
    M("center_broadcast", "q4_centering", "q4-answer", _CENTER,
      "return K - K.mean(axis=0) - K.mean(axis=1) + K.mean()", [CE_T],
      {CE_T: r"subtracts nothing per row and the column means twice.*broadcast"}, 2,
      "row means broadcast along the rows (no [:, None])"),
    M("center_one_sided", "q4_centering", "q4-answer", _CENTER, "return K - K.mean(axis=0)[None, :]",
      [CE_T], {CE_T: r"nothing is subtracted per row"}, 2, "only the column means subtracted"),
    M("center_new_own_means", "q4_centering", "q4-answer", "K_new - K.mean(axis=0)[None, :]",
      "K_new - K_new.mean(axis=0)[None, :]", [CE_N],
      {CE_N: r"column means of K_new, the new points' own statistics"}, 2,
      "new points centred with K_new's own column means"),
    M("center_new_no_grand_mean", "q4_centering", "q4-answer", "K_new.mean(axis=1)[:, None] + K.mean()",
      "K_new.mean(axis=1)[:, None]", [CE_N], {CE_N: r"grand mean of the training K is not added back"}, 2,
      "center_new without the grand mean"),
    M("center_new_own_grand", "q4_centering", "q4-answer", "K_new.mean(axis=1)[:, None] + K.mean()",
      "K_new.mean(axis=1)[:, None] + K_new.mean()", [CE_N],
      {CE_N: r"grand mean of\s+K_new instead of that of the training K"}, 2, "K_new's grand mean"),
    M("center_new_axis_swapped", "q4_centering", "q4-answer", "K_new.mean(axis=1)[:, None]",
      "K_new.mean(axis=0)[None, :]", [CE_N],
      {CE_N: r"nothing is subtracted per new point.*column means of K_new.*wrong axis"}, 2,
      "center_new: the new rows' means taken along the wrong axis"),
    M("center_new_squeeze", "q4_centering", "q4-answer", _CENTER_NEW, f"return np.squeeze({_CENTER_NEW[7:]})",
      [CE_H], {CE_H: r"should be a 2-D array; got 1-D"}, 2, "squeeze(): one new point gives 1-D"),
    # ------------------------------------------------------------------ q5: kernel PCA projections
    M("kpca_uncentred_train", "q5_kpca_projection", "q5-answer", "return center(K) @ _alphas(K, n_components)",
      "return K @ _alphas(K, n_components)", [KP_T],
      {KP_T: r"shifted by a constant.*kernel matrix was not centred"}, 2, "training projections with the uncentred K"),
    M("kpca_uncentred_new", "q5_kpca_projection", "q5-answer",
      "return center_new(K_new, K) @ _alphas(K, n_components)", "return K_new @ _alphas(K, n_components)",
      [KP_N], {KP_N: r"shifted by a constant.*new rows were not centred"}, 2, "new rows not centred"),
    M("kpca_alpha_beta", "q5_kpca_projection", "q5-answer",
      "return vectors[:, order] / np.sqrt(values[order])", "return vectors[:, order]",
      [KP_T], {KP_T: r"constant factor times kernel PCA's, √\(nλ_k\): you used the unit eigenvectors"}, 2,
      "α = β"),
    M("kpca_alpha_over_lambda", "q5_kpca_projection", "q5-answer",
      "return vectors[:, order] / np.sqrt(values[order])", "return vectors[:, order] / values[order]",
      [KP_T], {KP_T: r"1/√\(nλ_k\): you divided β_k by nλ_k"}, 2, "α = β/(nλ)"),
    M("kpca_alpha_sqrt_lambda", "q5_kpca_projection", "q5-answer",
      "return vectors[:, order] / np.sqrt(values[order])",
      "return vectors[:, order] / np.sqrt(values[order] / len(K))", [KP_T],
      {KP_T: r"constant factor times kernel PCA's, √n: you divided β_k by √λ_k"}, 2, "α = β/√λ (λ = nλ/n)"),
    M("kpca_eig_of_K", "q5_kpca_projection", "q5-answer", "np.linalg.eigh((Kc + Kc.T) / 2)",
      "np.linalg.eigh(K)", [KP_T], {KP_T: r"eigenvectors of the uncentred K"}, 2,
      "eigenvectors of K instead of K^c"),
    M("kpca_ascending", "q5_kpca_projection", "q5-answer", "order = np.argsort(values)[::-1][:n_components]",
      "order = np.argsort(values)[:n_components]", [KP_T, KP_N],
      {KP_T: r"you took the smallest eigenvalues of K\^c: numpy.linalg.eigh returns them in ascending order",
       KP_N: r"may come from the slip the check of kpca_project reports"}, 1,
      "eigh's ascending order kept (new points: not recognised, charged)"),
    M("kpca_skip_first", "q5_kpca_projection", "q5-answer", "order = np.argsort(values)[::-1][:n_components]",
      "order = np.argsort(values)[::-1][1:n_components + 1]", [KP_T],
      {KP_T: r"your components lie along kernel PCA's components 2, 3, 4"}, 2,
      "the first component skipped (new points on the same components: counted once)"),
    M("kpca_new_sign_flipped", "q5_kpca_projection", "q5-answer",
      "return center_new(K_new, K) @ _alphas(K, n_components)",
      "return -(center_new(K_new, K) @ _alphas(K, n_components))", [KP_N],
      {KP_N: r"components 1, 2, 3 of kpca_project_new have the opposite sign of kpca_project's"}, 2,
      "new points projected with −α (full marks before: each output compared up to sign)"),
    # ------------------------------------------------------------------ q6: Mercer
    M("mercer_valid_false_no_points", "q6_mercer", "q6-answer", '"f": True}', '"f": False}',
      [M_E], {M_E: r"you marked 'f' as not a kernel: give points"}, 3, "cos(x₁ − y₁) marked not a kernel"),
    M("mercer_valid_false_with_points", "q6_mercer", "q6-answer", _MERCER_HEAD,
      _MERCER_HEAD.replace('"f": True}', '"f": False}') + '    "f": np.array([[0.0, 0.0], [3.0, 0.0]]),\n',
      [M_E], {M_E: r"either the points or the verdict is wrong"}, 3,
      "cos(x₁ − y₁) marked not a kernel, with points"),
    M("mercer_invalid_true", "q6_mercer", "q6-answer", '"d": False,', '"d": True,',
      [M_H], {M_H: r"you call 'd' \(tanh\(xᵀy − 1\)\) a kernel, but it is not: .*k\(x, x\)"}, 3,
      "tanh(xᵀy − 1) called a kernel"),
    M("mercer_symmetric_only", "q6_mercer", "q6-answer", '"c": False, "d": False,', '"c": True, "d": True,',
      [M_H], {M_H: r"you call 'c' .* and 'd' .* Symmetry is not enough"}, 3,
      "every symmetric candidate called a kernel"),
    M("mercer_bad_points", "q6_mercer", "q6-answer", '"c": np.array([[0.0, 0.0], [1.0, 0.0]]),',
      '"c": np.array([[0.0, 0.0]]),', [M_E], {M_E: r"counterexamples\['c'\].*either the points or the verdict"},
      3, "one point: no counterexample for ‖x − y‖²"),
    M("mercer_missing_verdict", "q6_mercer", "q6-answer", ', "f": True}', "}", [M_C],
      {M_C: r"no verdict for f"}, 4, "no verdict for f"),
    M("mercer_two_slips", "q6_mercer", "q6-answer", '"b": True, "c": False, "d": False, "e": False,',
      '"b": False, "c": False, "d": False, "e": True,', [M_E, M_H],
      {M_E: r"'b' as not a kernel", M_H: r"you call 'e' .*not even symmetric"}, 1,
      "b and e swapped: two slips, two charges"),
    # ------------------------------------------------------------------ q7, q8: widgets
    M("sigma_too_large", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 1.0",
      [S_SEP], {S_SEP: r"not separated; only smaller σ separate them"}, 0, "σ right of the window"),
    M("sigma_too_small", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 0.1",
      [S_SEP], {S_SEP: r"not separated; only larger σ separate them"}, 0, "σ left of the window"),
    M("sigma_off_slider", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 20.0",
      [S_SEP], {S_SEP: r"outside the slider's range"}, 0, "σ outside the slider"),
    M("r_twenty", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = 20",
      [R_SMALL], {R_SMALL: r"fewer eigenfaces reach it too"}, 1, "r = 20: below the target, not the smallest"),
    M("r_one_too_many", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = 16",
      [R_SMALL], {R_SMALL: r"with r − 1 = 15 the error is"}, 1, "r one too large"),
    M("r_one_too_few", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = 14",
      [R_BELOW, R_SMALL], {R_BELOW: r"not below the target", R_SMALL: r"does not reach the target"}, 0,
      "r one too small"),
    # ------------------------------------------------------------------ right, written differently
    OK("ok_phi3_permuted", "q1_phi_p3", "q1-p3-answer", _P3_COLUMNS,
       "        x2**3, s3 * x1 * x2**2, s3 * x1**2 * x2, x1**3,\n        s3 * x2**2, s6 * x1 * x2, s3 * x1**2,\n"
       "        s3 * x2, s3 * x1, np.ones_like(x1),\n", "φ's columns in another order"),
    OK("ok_phi3_sign", "q1_phi_p3", "q1-p3-answer", "s6 * x1 * x2,", "-s6 * x1 * x2,", "one φ component negated"),
    OK("ok_phi_poly_product", "q1_phi_general", "q1-general-answer", _PHI_POLY_BODY, _PHI_POLY_PRODUCT,
       "φ built from itertools.product"),
    OK("ok_count_falling_factorial", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
       "return math.prod(range(d + 1, d + p + 1)) // math.factorial(p)", "exact integer product formula"),
    OK("ok_gram_svd", "q3_gram_pca", "q3-answer", _GRAM_BODY,
       "    _, S, Vt = np.linalg.svd(Xc, full_matrices=False)\n"
       "    return S[:n_components] ** 2 / n, Vt[:n_components].T\n", "SVD of Xc instead of eigh"),
    OK("ok_gram_flipped", "q3_gram_pca", "q3-answer", "Xc.T @ alphas", "-(Xc.T @ alphas)", "every w negated"),
    OK("ok_center_matrices", "q4_centering", "q4-answer", _CENTER,
       "one = np.full(K.shape, 1.0 / len(K))\n    return K - one @ K - K @ one + one @ K @ one",
       "K − 1K − K1 + 1K1 with the matrix of 1/n"),
    OK("ok_center_axes_swapped", "q4_centering", "q4-answer", _CENTER,
       "return K - K.mean(axis=1)[None, :] - K.mean(axis=0)[:, None] + K.mean()",
       "axes swapped in center (K is symmetric)"),
    OK("ok_kpca_flipped", "q5_kpca_projection", "q5-answer", "return vectors[:, order] / np.sqrt(values[order])",
       "return -vectors[:, order] / np.sqrt(values[order])", "α negated (the same in both functions)"),
    OK("ok_kpca_svd", "q5_kpca_projection", "q5-answer", "values, vectors = np.linalg.eigh((Kc + Kc.T) / 2)",
       "vectors, values, _ = np.linalg.svd((Kc + Kc.T) / 2)", "SVD of K^c instead of eigh"),
    OK("ok_mercer_other_points", "q6_mercer", "q6-answer", '"d": np.array([[0.0, 0.0]]),',
       '"d": np.array([[0.1, -0.2], [3.0, 1.0]]),', "other counterexample points"),
    OK("ok_sigma_other", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 0.19",
       "another σ in the window"),
]


# --------------------------------------------------------------------------- building submissions
def _solution(assignment: str) -> Any:
    return nbformat.read(ROOT / "solutions" / f"{assignment}.ipynb", as_version=4)


def _exercise(assignment: str) -> Any:
    return nbformat.read(ROOT / "exercises" / f"{assignment}.ipynb", as_version=4)


def submission(m: Mistake) -> Any:
    """The exercise as a student would submit it: every answer right except ``m``'s slip."""
    sol = copy.deepcopy(_solution(m.assignment))
    cell = next(c for c in sol.cells if c.get("id") == m.cell)
    assert meta(cell).get("role") == "answer", (m.id, m.cell)
    n = cell.source.count(m.old)
    assert n == 1, f"{m.id}: the replacement applies {n} times to cell {m.cell}, not once"
    cell.source = cell.source.replace(m.old, m.new)
    return with_answers(_exercise(m.assignment), sol)


def build(folder: Path, catalogue: list[Mistake] = CATALOGUE) -> dict[str, list[Path]]:
    """Write every submission as ``folder/<assignment>/<id>.ipynb``; assignment -> files."""
    out: dict[str, list[Path]] = {}
    for m in catalogue:
        d = folder / m.assignment
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{m.id}.ipynb"
        nbformat.write(submission(m), path)
        out.setdefault(m.assignment, []).append(path)
    return out


def grade_all(folder: Path, catalogue: list[Mistake] = CATALOGUE, jobs: int = 2,
              extra: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Grade every submission with ``kpca-course grade`` (one batch per assignment); mistake id ->
    its record in ``grades.json``."""
    from kpca_lib.course.cli import main

    records: dict[str, dict[str, Any]] = {}
    for assignment, files in build(folder / "submissions", catalogue).items():
        out = folder / "grades" / assignment
        rc = main(["grade", "--assignment", assignment, "--out", str(out), "--jobs", str(jobs), *extra,
                   *[str(f) for f in files]])
        assert rc == 0, f"kpca-course grade exited with {rc} for {assignment}"
        data = json.loads((out / "grades.json").read_text())
        for sub in data["submissions"]:
            records[sub["submission"]] = sub
    return records


# --------------------------------------------------------------------------- the public path
_MARK = re.compile(r"^\s*([✔✘])\s+(.*\S)\s*$")


def parse_report(text: str) -> dict[str, tuple[str, str]]:
    """Check id -> (mark, message) from what check cells printed (``format_results``'s layout:
    a title ``<question id> (...)``, then ``✔``/``✘`` lines with the description, each followed
    by its indented message lines)."""
    out: dict[str, tuple[str, str]] = {}
    question = None
    current: tuple[str, str] | None = None
    lines: list[str] = []

    def flush() -> None:
        if current and question:
            desc = {c.description: c.id for c in get_question(question).checks}
            cid = desc.get(current[1])
            if cid:
                out[cid] = (current[0], " ".join(s.strip() for s in lines))

    for line in text.splitlines():
        head = line.split(" ", 1)[0]
        if head.startswith("q") and "_" in head and not line.startswith(" "):
            flush()
            current, lines = None, []
            try:
                get_question(head)
                question = head
            except ValueError:
                question = None
            continue
        mark = _MARK.match(line)
        if mark:
            flush()
            current, lines = (mark.group(1), mark.group(2)), []
        elif current and line.startswith("      "):
            lines.append(line)
    flush()
    return out


def public_run(nb: Any) -> tuple[dict[str, tuple[str, str]], str]:
    """Run the notebook's code cells (not the demos) in-process in a fresh namespace, as a student
    running every cell would; every check cell runs even when one fails. Returns the parsed
    report (check id -> (mark, message)) and the printed text."""
    ns: dict[str, Any] = {"__name__": "__main__"}
    buf = io.StringIO()
    for cell in nb.cells:
        if cell.cell_type != "code" or meta(cell).get("role") == "demo":
            continue
        with contextlib.redirect_stdout(buf), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a slip may divide by zero: the checks say so
            try:
                exec(compile(cell.source, f"<cell {cell.get('id')}>", "exec"), ns)
            except AssertionError:  # CheckFailed: the report is printed above it
                pass
            except Exception as exc:  # an answer cell that raises: its question's checks say so
                print(f"[cell {cell.get('id')} raised {type(exc).__name__}: {exc}]")
    text = buf.getvalue()
    return parse_report(text), text


def public_ids(question: str) -> set[str]:
    """The ids of the question's public checks (the registry of this version)."""
    return {c.id for c in get_question(question).checks}
