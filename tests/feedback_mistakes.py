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

from kpca_lib.course.grading.judge.notebooks import load_questions, meta, with_answers

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
GR_EV, GR_W, GR_H = ("q3_gram_pca.eigenvalues", "q3_gram_pca.directions",
                     "q3_gram_pca.repeated_eigenvalue_and_d_much_larger_than_n")
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
    extra: str = ""  # a code cell the student added at the end of the notebook (after every check)

    @property
    def assignment(self) -> str:
        return ASSIGNMENT_OF[self.question]


def M(id: str, question: str, cell: str, old: str, new: str, fails: list[str], messages: dict[str, str],
      points: float, what: str, extra: str = "") -> Mistake:
    return Mistake(id, question, cell, old, new, frozenset(fails), messages, points, what, extra)


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
_MERCER_VERDICTS = 'is_kernel = {"a": True, "b": True, "c": False, "d": False, "e": False, "f": True}'
_MERCER_POINTS = '''    "c": np.array([[0.0, 0.0], [1.0, 0.0]]),   # zero diagonal, positive off-diagonal
    "d": np.array([[0.0, 0.0]]),               # k(0, 0) = tanh(-1) < 0
    "e": np.array([[1.0, 0.0], [0.0, 1.0]]),   # k(x, y) - k(y, x) = x1 - y1
'''
_ALPHAS = '''### BEGIN SOLUTION
def _alphas(K, n_components):
    Kc = center(K)
    values, vectors = np.linalg.eigh((Kc + Kc.T) / 2)
    order = np.argsort(values)[::-1][:n_components]
    return vectors[:, order] / np.sqrt(values[order])
### END SOLUTION'''
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
    M("p3_rows", "q1_phi_p3", "q1-p3-answer", "    return np.column_stack([\n", "    return np.array([\n",
      [P3_ID], {P3_ID: r"phi_3\(X\) has shape \(10, \d+\), the transpose of the expected.*one row per point"}, 2,
      "np.array of the feature columns: features as rows, shape (D, n) (charged once)"),
    M("p4_float32_inputs", "q1_phi_p4", "q1-p4-answer", "X = np.asarray(X, dtype=float)",
      "X = np.asarray(X, dtype=np.float32)",
      [P4_ID], {P4_ID: r"about 7 significant digits.*float32"}, 2,
      "coordinates converted to float32 (the features come out float64, 7 digits right)"),
    # ------------------------------------------------------------------ q1: φ for any d
    M("general_only_d2", "q1_phi_general", "q1-general-answer",
      "    X = np.asarray(X, dtype=float)\n    n, d = X.shape\n    columns = []\n" + _PHI_POLY_BODY
      + "    return np.column_stack(columns)\n", _PHI_POLY_D2,
      [G_D3], {G_D3: r"for d = 3, p = 3 your map has 10 features; the polynomial feature map has 20, "
                     r"one per monomial.*only the first two coordinates"}, 2,
      "phi_poly written for d = 2 only"),
    M("general_combinations", "q1_phi_general", "q1-general-answer", "combinations_with_replacement(",
      "combinations(", [G_D3], {G_D3: r"d = 3, p = 3 your map has 8 features.*has 20, one per monomial.*missing \(e\.g\. x₁²"},
      2, "combinations without replacement: no squares"),
    M("general_no_sqrt", "q1_phi_general", "q1-general-answer", "np.sqrt(weight) *", "weight *",
      [G_D3], {G_D3: r"multinomial coefficient itself"}, 2, "weights without the square root"),
    M("general_no_constant", "q1_phi_general", "q1-general-answer", "for total in range(p + 1):",
      "for total in range(1, p + 1):", [G_D3], {G_D3: r"19 features.*no constant feature"}, 2,
      "degree 0 left out"),
    M("general_float32_result", "q1_phi_general", "q1-general-answer", "    return np.column_stack(columns)\n",
      "    return np.column_stack(columns).astype(np.float32)\n",
      [G_D3], {G_D3: r"float32 array.*7 significant digits.*float64"}, 2,
      "features cast to float32 to save memory (charged once, not for each d)"),
    M("general_int_array", "q1_phi_general", "q1-general-answer",
      "            columns.append(np.sqrt(weight) * np.prod(X**a, axis=1))\n    return np.column_stack(columns)\n",
      "            columns.append(np.sqrt(weight) * np.prod(X**a, axis=1))\n"
      "    out = np.zeros((n, len(columns)), dtype=int)\n"
      "    for j, column in enumerate(columns):\n"
      "        out[:, j] = column\n"
      "    return out\n",
      [G_D3], {G_D3: r"integer array \(int64\).*truncated"}, 2,
      "features written into an integer array (np.zeros(..., dtype=int))"),
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
    M("count_int64_product", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return int(np.prod(np.arange(d + 1, d + p + 1)) // math.factorial(p))",
      [C_H], {C_H: r"int64.*wrap"}, 2, "numpy product of d + 1 … d + p: int64 overflows for large d"),
    M("count_int64_table", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "by_degree = np.zeros(p + 1, dtype=np.int64)\n    by_degree[0] = 1\n    for _ in range(d):\n"
      "        by_degree = np.cumsum(by_degree)\n    return int(by_degree.sum())",
      [C_H], {C_H: r"int64.*wrap"}, 2, "a table of counts per degree in an int64 array: wraps past 9.2e18"),
    M("count_arrangements", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return math.factorial(d + p) // math.factorial(d)",
      [C_COUNT], {C_COUNT: r"p! times the number of monomials.*order"}, 2,
      "(d + p)!/d!: ordered arrangements (charged once, not again for large d)"),
    M("count_degree_below_p", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return sum(math.comb(d + k - 1, k) for k in range(p))",
      [C_COUNT], {C_COUNT: r"degree ≤ p − 1.*degree exactly p"}, 2,
      "sum over the degrees with range(p): degree p left out"),
    M("cheaper_string", "q2_feature_count", "q2-answer", "return n_features(d, p) > n",
      "return str(n_features(d, p) > n)", [C_CHEAP], {C_CHEAP: r"the string '(True|False)'.*without quotes"}, 2,
      "str(...) around the comparison: 'True'/'False' strings"),
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
    M("gram_covariance_route", "q3_gram_pca", "q3-answer", _GRAM_BODY,
      "    vals, vecs = np.linalg.eigh(Xc.T @ Xc / n)\n    order = np.argsort(vals)[::-1][:n_components]\n"
      "    return vals[order], vecs[:, order]\n", [GR_H],
      {GR_H: r"d = 1000 features gram_pca allocated [\d.]+ MB, as much as a d×d matrix"}, 2,
      "the d×d covariance instead of the Gram matrix (right values; fails d ≫ n)"),
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
    M("center_new_library", "q4_centering", "q4-answer", _CENTER_NEW,
      "from kpca_lib.centering import center_test_kernel\n    return center_test_kernel(K_new, K)", [CE_N, CE_H],
      {CE_N: r"center_new calls kpca_lib\.centering\.center_test_kernel, which this question asks you to write",
       CE_H: r"as reported in the check"}, 1, "center_new through the library (forbidden): its checks fail"),
    OK("ok_center_matrix_form", "q4_centering", "q4-answer", _CENTER,
       "H = np.eye(len(K)) - 1.0 / len(K)\n    return H @ K @ H",
       "center as H K H with the centring matrix H = I − 1/n"),
    # ------------------------------------------------------------------ q5: kernel PCA projections
    M("kpca_sklearn", "q5_kpca_projection", "q5-answer", "return center(K) @ _alphas(K, n_components)",
      "from sklearn.decomposition import KernelPCA\n    return KernelPCA(n_components, kernel='precomputed', "
      "eigen_solver='dense').fit_transform(K)", [KP_T],
      {KP_T: r"kpca_project calls sklearn\.decomposition\.KernelPCA, which this question asks you to write"}, 2,
      "kpca_project through scikit-learn's KernelPCA (forbidden)"),
    M("kpca_rows", "q5_kpca_projection", "q5-answer", "return center(K) @ _alphas(K, n_components)",
      "return (center(K) @ _alphas(K, n_components)).T", [KP_T],
      {KP_T: r"the transpose of the expected \(30, 3\)"}, 2, "training projections returned as rows (transposed)"),
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
    M("mercer_verdict_strings", "q6_mercer", "q6-answer", _MERCER_VERDICTS,
      'is_kernel = {"a": "True", "b": "True", "c": "False", "d": "False", "e": "False", "f": "True"}',
      [M_C], {M_C: r"is_kernel\['a'\] is the string 'True', not the boolean True: write True or False "
                   r"without quotes.*With that put right, the check passes"}, 4,
      "verdicts as the strings 'True'/'False' (one form slip, charged once)"),
    M("mercer_keys_upper_case", "q6_mercer", "q6-answer", _MERCER_HEAD + _MERCER_POINTS,
      'is_kernel = {"A": True, "B": True, "C": False, "D": False, "E": False, "F": True}\n'
      "counterexamples = {\n" + _MERCER_POINTS.replace('"c"', '"C"').replace('"d"', '"D"').replace('"e"', '"E"'),
      [M_C], {M_C: r"is_kernel uses the keys 'A', 'B'.*names them 'a', 'b'"}, 4,
      "candidates keyed 'A'–'F' in both dicts (one form slip, charged once)"),
    M("mercer_points_as_columns", "q6_mercer", "q6-answer",
      '"e": np.array([[1.0, 0.0], [0.0, 1.0]]),', '"e": np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.5]]),',
      [M_E], {M_E: r"counterexamples\[.?e.?\] has shape \(2, 3\), the transpose of the expected \(any, 2\)"}, 3,
      "three points given as the columns of a (2, 3) array"),
    M("mercer_point_flat", "q6_mercer", "q6-answer", '"d": np.array([[0.0, 0.0]]),', '"d": np.array([0.0, 0.0]),',
      [M_E], {M_E: r"counterexamples\['d'\] is a flat pair of shape \(2,\).*\(m, 2\)"}, 3,
      "one point as a flat pair (2,) instead of (1, 2)"),
    M("mercer_verdict_none", "q6_mercer", "q6-answer", '"f": True}', '"f": None}',
      [M_C], {M_C: r"is_kernel\['f'\] should be True or False; got None"}, 4,
      "one verdict left as None (the others are judged)"),
    M("mercer_verdict_numbers", "q6_mercer", "q6-answer", _MERCER_VERDICTS,
      'is_kernel = {"a": 1, "b": 1, "c": 0, "d": 0, "e": 0, "f": 1}',
      [M_C], {M_C: r"is_kernel\['a'\] is the number 1, not a boolean: write True or False"}, 4,
      "verdicts written 1/0 (one form slip, charged once)"),
    M("mercer_integer_point_repeated", "q6_mercer", "q6-answer", '"c": np.array([[0.0, 0.0], [1.0, 0.0]]),',
      '"c": np.array([[2, 1], [2, 1]]),', [M_E],
      {M_E: r"counterexamples\['c'\]: on your 2 points the kernel matrix of ‖x − y‖² is symmetric and positive "
            r"semi-definite.*either the points or the verdict"}, 3,
      "one point twice, in an integer array (the integers are fine: no hint about them)"),
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
      [R_SMALL], {R_SMALL: r"^(?!.*\b15\b).*fewer eigenfaces reach it too: the question asks for the smallest r"}, 1,
      "r one too large (the message never names the smallest r)"),
    M("r_one_too_few", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = 14",
      [R_BELOW], {R_BELOW: r"^(?!.*\b15\b).*r = 14 eigenfaces the relative error is 17\.8%, not below the target "
                           r"17\.5%: the answer is the first r whose error is below the target"}, 2,
      "r one too small: the last r above the target (smallest_r: the same slip, counted once)"),
    M("sigma_as_gamma", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 12.5",
      [S_SEP], {S_SEP: r"^(?!.*0\.2\b).*but it would as γ = 1/\(2σ²\): this looks like γ"}, 0,
      "γ = 1/(2σ²) of a separating σ, outside the slider"),
    M("sigma_as_gamma_on_slider", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 9.5",
      [S_SEP], {S_SEP: r"^(?!.*0\.2\d).*answer_sigma = 9\.5 does not separate.*would as γ = 1/\(2σ²\).*looks like γ"}, 0,
      "γ of a separating σ, a value the slider also has"),
    M("sigma_as_variance", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 0.045",
      [S_SEP], {S_SEP: r"^(?!.*0\.21).*would as σ²: this looks like σ², not σ"}, 0, "σ² for σ"),
    M("sigma_decimal_comma", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 0,21",
      [S_SEP], {S_SEP: r"answer_sigma is the pair \(0, 21\), not one number.*decimal point"}, 0,
      "decimal comma: answer_sigma = 0,21 is a tuple"),
    M("sigma_string", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = '0.2'",
      [S_SEP], {S_SEP: r"answer_sigma is the string '0\.2', not a number.*With that put right, the check passes"},
      0, "σ pasted in quotes (a form slip; the question has one check)"),
    M("r_string", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", 'answer_r = "15"',
      [R_BELOW], {R_BELOW: r"answer_r is the string '15', not a number"}, 2,
      "r pasted in quotes (one form slip, charged once)"),
    M("r_slider_default", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = 5",
      [R_BELOW, R_SMALL], {R_BELOW: r"relative error is 18\.5%, not below the target 17\.5%",
                           R_SMALL: r"does not reach the target"},
      0, "the slider's starting value r = 5 (far from the target: not a slip)"),
    M("r_fraction", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = 15.5",
      [R_BELOW, R_SMALL], {R_BELOW: r"should be an integer; got 15\.5", R_SMALL: r"as reported in"}, 0,
      "r = 15.5: no number of eigenfaces (reported once, nothing checked)"),
    # ------------------------------------------------------------------ issue 40: classes 1-9
    # 1. a hidden check's large input too slow: that check only, naming the input
    M("count_slow_enumeration", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return sum(1 for k in range(p + 1) for _ in itertools.combinations_with_replacement(range(d), k))",
      [C_H], {C_H: r"n_features\(\d{4,5}, \d\) did not finish within 2 s, so it was stopped: it is too slow"}, 2,
      "an exact count by enumerating the monomials: right, too slow for large d (the public checks pass)"),
    M("count_slow_stars_and_bars", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return sum(1 for _ in itertools.combinations(range(d + p), p))",
      [C_H], {C_H: r"n_features\(\d{4,5}, \d\) did not finish within 2 s"}, 2,
      "stars and bars, enumerated one by one: right, too slow for large d"),
    # 2. one form slip (or one missing factor), charged once per question
    M("gram_w_rows", "q3_gram_pca", "q3-answer", "return n_lambda / n, Xc.T @ alphas",
      "return n_lambda / n, (Xc.T @ alphas).T", [GR_EV],
      {GR_EV: r"W for X of shape \(12, 30\) has shape \(3, 30\), the transpose of the expected \(30, 3\).*"
              r"With that put right, the check passes"}, 2,
      "the directions as the rows of W, shape (k, d) (one form slip, charged once)"),
    M("mercer_verdict_list", "q6_mercer", "q6-answer", _MERCER_VERDICTS,
      "is_kernel = [True, True, False, False, False, True]", [M_C],
      {M_C: r"is_kernel is a list of 6 verdicts, not a dict.*Read in the candidates' order"}, 4,
      "six right verdicts as a list in the candidates' order (one form slip, charged once)"),
    M("mercer_verdict_tuple_of_words", "q6_mercer", "q6-answer", _MERCER_VERDICTS,
      'is_kernel = ("yes", "yes", "no", "no", "no", "yes")', [M_C],
      {M_C: r"is_kernel is a tuple of 6 verdicts, not a dict"}, 4,
      "verdicts as a tuple of 'yes'/'no' (the container counted once; the words are read as meant)"),
    M("count_factor_p", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return math.prod(range(d + 1, d + p + 1)) // math.factorial(p - 1)", [C_COUNT],
      {C_COUNT: r"p times the number of monomials: a factor p is left over"}, 2,
      "(p − 1)! for p!: a missing factor, charged once (not again for large d)"),
    M("count_doubled", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
      "return 2 * math.comb(d + p, p)", [C_COUNT], {C_COUNT: r"exactly 2 times the number of monomials"}, 2,
      "twice the count: charged once"),
    # 3. containers named as given
    M("sigma_trailing_comma", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 0.2,",
      [S_SEP], {S_SEP: r"answer_sigma should be a number; got a tuple of one number, \(0\.2,\): a comma after a "
                       r"value makes a tuple"}, 0, "a trailing comma: a tuple of one number"),
    M("r_in_a_list", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = [15]",
      [R_BELOW, R_SMALL], {R_BELOW: r"answer_r should be one integer; got a list of one number",
                           R_SMALL: r"as reported in"}, 0, "r in a list: [15]"),
    M("mercer_points_in_a_list", "q6_mercer", "q6-answer", _MERCER_HEAD + _MERCER_POINTS + "}",
      _MERCER_VERDICTS + "\ncounterexamples = [\n" + _MERCER_POINTS.replace('"c": ', "").replace('"d": ', "")
      .replace('"e": ', "") + "]", [M_E],
      {M_E: r"counterexamples should be a dict; got a list of 3 items \(array\) that do not form one regular "
            r"array of numbers"}, 3, "counterexamples as a list of point arrays, not a dict by candidate"),
    # 5. the reason given is the real one
    M("gram_library_pca", "q3_gram_pca", "q3-answer", _GRAM_BODY,
      "    from kpca_lib.pca import PCA\n    pca = PCA(n_components).fit(X)\n"
      "    return pca.eigenvalues_, pca.components_.T\n", [GR_EV, GR_W, GR_H],
      {GR_EV: r"gram_pca calls kpca_lib\.pca\.PCA, which this question asks you to write yourself",
       GR_H: r"^(?!.*did not return).*calls kpca_lib\.pca\.PCA.*as reported in"}, 0,
      "gram_pca through the library's PCA (forbidden): every check says so, none blames the shapes"),
    M("gram_sklearn_pca", "q3_gram_pca", "q3-answer", _GRAM_BODY,
      "    from sklearn.decomposition import PCA\n    pca = PCA(n_components).fit(X)\n"
      "    return pca.explained_variance_, pca.components_.T\n", [GR_EV, GR_W, GR_H],
      {GR_EV: r"gram_pca calls sklearn\.decomposition\.PCA",
       GR_H: r"^(?!.*did not return).*calls sklearn\.decomposition\.PCA"}, 0,
      "gram_pca through scikit-learn's PCA (forbidden)"),
    # 6. no message hands over a value that answers a question
    M("sigma_r_pasted", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 15",
      [S_SEP], {S_SEP: r"^(?!.*(γ|0\.1\d|0\.2)).*outside the slider's range.*another slider \(answer_r"}, 0,
      "r = 15 pasted as σ: no γ reading, no working σ in the message"),
    # 7. causes, not symptoms
    M("center_n_minus_1", "q4_centering", "q4-answer", _CENTER,
      "n = len(K)\n    return K - K.sum(axis=0)[None, :] / (n - 1) - K.sum(axis=1)[:, None] / (n - 1) + K.mean()",
      [CE_T], {CE_T: r"row means are divided by n − 1 = 9 instead of n = 10.*column means are divided by n − 1"},
      2, "means taken with 1/(n − 1)"),
    M("center_new_n_minus_1", "q4_centering", "q4-answer", _CENTER_NEW,
      "return K_new - K.sum(axis=0)[None, :] / (len(K) - 1) - K_new.mean(axis=1)[:, None] + K.mean()",
      [CE_N], {CE_N: r"column means are divided by n − 1 = 9 instead of n = 10"}, 2,
      "center_new: the training column means with 1/(n − 1)"),
    M("sigma_log10", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = -0.7",
      [S_SEP], {S_SEP: r"^(?!.*0\.2).*answer_sigma = -0\.7 .*would as log₁₀ σ"}, 0, "log₁₀ σ pasted: a negative σ"),
    M("kpca_helper_in_a_later_cell", "q5_kpca_projection", "q5-answer", _ALPHAS, "# (room for helper functions)",
      [KP_T, KP_N, KP_H], {KP_T: r"NameError: name '_alphas' is not defined \(defined in a cell below the check cell"}, 0,
      "the helper _alphas defined in a cell after the check cell", extra=_ALPHAS),
    M("phi_poly_helper_in_a_later_cell", "q1_phi_general", "q1-general-answer",
      "    return np.column_stack(columns)\n", "    return stack(columns)\n",
      [G_D3, G_D5, G_H], {G_D3: r"NameError: name 'stack' is not defined \(defined in a cell below the check cell"}, 0,
      "a helper phi_poly calls, defined at the end of the notebook",
      extra="def stack(columns):\n    return np.column_stack(columns)\n"),
    # 8. a result kept from the first call
    M("kpca_cached_alphas", "q5_kpca_projection", "q5-answer", _ALPHAS,
      "_KEPT = {}\n\n\ndef _alphas(K, n_components):\n    if n_components not in _KEPT:\n        Kc = center(K)\n"
      "        values, vectors = np.linalg.eigh((Kc + Kc.T) / 2)\n"
      "        order = np.argsort(values)[::-1][:n_components]\n"
      "        _KEPT[n_components] = vectors[:, order] / np.sqrt(values[order])\n    return _KEPT[n_components]",
      [KP_T], {KP_T: r"for a second, different K it returns what the first K gives.*cache"}, 2,
      "α cached in a global by n_components: the K given is ignored after the first call"),
    M("kpca_cached_projection", "q5_kpca_projection", "q5-answer", "    return center(K) @ _alphas(K, n_components)\n",
      "    global _Z\n    if '_Z' not in globals():\n        _Z = center(K) @ _alphas(K, n_components)\n"
      "    return _Z\n", [KP_T], {KP_T: r"keeps a result of an earlier call"}, 2,
      "the first projections kept in a global and returned for every K"),
    # 9. a stub left as it is: "not answered yet"
    M("dim_left_blank", "q1_phi_p3", "q1-p3-answer", "dim_3 = 10", "dim_3 = ...",
      [P3_DIM], {P3_DIM: r"dim_3 is not answered yet \(`\.\.\.` is still there\)"}, 2, "dim_3 = ... left as given"),
    M("r_left_none", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = None",
      [R_BELOW, R_SMALL], {R_BELOW: r"answer_r is not answered yet \(None is still there\)"}, 0,
      "answer_r = None left as given"),
    # ------------------------------------------------------------------ right, written differently
    OK("ok_phi3_permuted", "q1_phi_p3", "q1-p3-answer", _P3_COLUMNS,
       "        x2**3, s3 * x1 * x2**2, s3 * x1**2 * x2, x1**3,\n        s3 * x2**2, s6 * x1 * x2, s3 * x1**2,\n"
       "        s3 * x2, s3 * x1, np.ones_like(x1),\n", "φ's columns in another order"),
    OK("ok_phi3_sign", "q1_phi_p3", "q1-p3-answer", "s6 * x1 * x2,", "-s6 * x1 * x2,", "one φ component negated"),
    OK("ok_phi_poly_product", "q1_phi_general", "q1-general-answer", _PHI_POLY_BODY, _PHI_POLY_PRODUCT,
       "φ built from itertools.product"),
    OK("ok_count_falling_factorial", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
       "return math.prod(range(d + 1, d + p + 1)) // math.factorial(p)", "exact integer product formula"),
    OK("ok_count_int_loop", "q2_feature_count", "q2-answer", "return math.comb(d + p, p)",
       "count = 1\n    for k in range(1, p + 1):\n        count = count * (d + k) // k\n    return count",
       "a loop of exact Python-int steps"),
    OK("ok_phi_poly_constant_column", "q1_phi_general", "q1-general-answer",
       "    X = np.asarray(X, dtype=float)\n    n, d = X.shape\n    columns = []\n" + _PHI_POLY_BODY
       + "    return np.column_stack(columns)\n",
       "    Z = np.hstack([np.ones((len(X), 1)), np.asarray(X, dtype=float)])\n    columns = []\n"
       "    for combo in itertools.combinations_with_replacement(range(Z.shape[1]), p):\n"
       "        counts = np.bincount(np.asarray(combo, dtype=int), minlength=Z.shape[1])\n"
       "        weight = math.factorial(p) / math.prod(math.factorial(int(c)) for c in counts)\n"
       "        columns.append(np.sqrt(weight) * np.prod(Z[:, list(combo)], axis=1))\n"
       "    return np.column_stack(columns)\n",
       "φ from p factors among (1, x₁, …, x_d): the constant as a column"),
    OK("ok_phi4_binomial_weights", "q1_phi_p4", "q1-p4-answer",
       "weight = math.factorial(4) / (math.factorial(a0) * math.factorial(a1) * math.factorial(a2))",
       "weight = math.comb(4, a1) * math.comb(4 - a1, a2)", "multinomial weights as a product of binomials"),
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
    OK("ok_mercer_zip_and_lists", "q6_mercer", "q6-answer", _MERCER_HEAD + _MERCER_POINTS,
       'is_kernel = dict(zip("abcdef", [True, True, False, False, False, True]))\n'
       'counterexamples = {\n    "c": [[0, 0], [2, 1]],\n    "d": [(0.5, -0.5)],\n    "e": [[3, 1], [1, 3]],\n',
       "verdicts from zip, points as lists of integer lists and of tuples"),
    OK("ok_mercer_numpy_bools", "q6_mercer", "q6-answer", _MERCER_VERDICTS,
       'is_kernel = {name: np.bool_(name in "abf") for name in "abcdef"}', "np.bool_ verdicts from a comprehension"),
    OK("ok_sigma_expression", "q7_sigma_moons", "q7-answer", "answer_sigma = 0.2", "answer_sigma = 1 / 5",
       "σ written as 1 / 5"),
    OK("ok_r_float", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = 15.0", "r as the float 15.0"),
    OK("ok_r_numpy_int", "q8_eigenfaces_r", "q8-answer", "answer_r = 15", "answer_r = np.int64(15)",
       "r as a numpy integer"),
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
    nb = with_answers(_exercise(m.assignment), sol)
    if m.extra:
        nb.cells.append(nbformat.v4.new_code_cell(m.extra))
    return nb


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
