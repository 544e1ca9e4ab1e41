"""The form every lecture keeps (issue 12): a header, stored executed, short cells, a "Try it"
cell, no test scaffolding and no widget moved by code.

Numerical claims are asserted inside the lectures themselves and run under nbval; this file
checks what nbval cannot see: that no lecture assert compares a float with ``==`` (a lecture
asserts what a student would accept: inequalities, orders of magnitude), and the exact values the
lectures quote in their text, pinned here instead.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LECTURES = sorted(NOTEBOOKS.glob("*.ipynb"))
MAX_CODE_LINES = 25


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def test_lectures_are_numbered_without_gaps():
    names = [p.name for p in LECTURES]
    assert names, "no lectures found"
    for i, name in enumerate(names, start=1):
        assert re.fullmatch(rf"{i:02d}_[a-z0-9]+(_[a-z0-9]+)*\.ipynb", name), (
            f"{name}: lectures are named NN_snake_case.ipynb and numbered 01, 02, ... without gaps"
        )


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_header_states_goals_and_prerequisite(path):
    head = _source(_cells(path)[0])
    number = path.name[:2]
    assert head.startswith(f"# {number} · "), f"{path.name}: the first cell is '# {number} · Title'"
    assert "**What you will learn**" in head, f"{path.name}: the header lists learning goals"
    assert "**Before this notebook:**" in head, f"{path.name}: the header names the prerequisite"
    for target in re.findall(r"\]\(([^)#]+\.ipynb)\)", head):
        assert (NOTEBOOKS / target).is_file(), f"{path.name}: the header links to missing {target}"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_stored_executed_without_errors(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code" or not _source(cell).strip():
            continue
        assert cell.get("execution_count") is not None, f"{path.name} cell {i} is not executed"
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", f"{path.name} cell {i} stored an error"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_code_cells_are_short(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] == "code":
            n = len(_source(cell).strip().splitlines())
            assert n <= MAX_CODE_LINES, (
                f"{path.name} cell {i} has {n} lines; split it (at most {MAX_CODE_LINES})"
            )


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_no_scaffolding_and_no_slider_moved_by_code(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code":
            continue
        src = _source(cell)
        assert "sys.path" not in src, f"{path.name} cell {i}: no sys.path hacks"
        assert not re.search(r"\.value\s*=(?!=)", src), (
            f"{path.name} cell {i} moves a widget by code; after Run All the widget must show "
            "what the student set (test widgets in tests/)"
        )
        assert "CI check" not in src, f"{path.name} cell {i}: test scaffolding belongs in tests/"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_set_up_cell_applies_the_course_style(path):
    first = next(c for c in _cells(path) if c["cell_type"] == "code")
    calls = [ln for ln in _source(first).splitlines() if re.match(r"\s*[\w.]*use_course_style\(\)", ln)]
    assert calls, (
        f"{path.name}: call kpca_lib.plotting.use_course_style() in the set-up cell (one figure "
        "style for the course)"
    )


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_has_a_try_it_cell_followed_by_code(path):
    cells = _cells(path)
    found = [
        i for i, c in enumerate(cells[:-1])
        if c["cell_type"] == "markdown" and _source(c).lstrip().startswith("**Try it.**")
        and cells[i + 1]["cell_type"] == "code"
    ]
    assert found, f"{path.name}: add an ungraded '**Try it.**' markdown cell followed by its code cell"


_EXERCISE_ITEM = re.compile(r"^(\d+)\. \*\*[^*]+\*\* \((derivation|code|prediction)\)", re.M)


def _exercises_heading(path: Path) -> int:
    """Index of the lecture's ``## Exercises`` markdown cell (there must be exactly one)."""
    found = [i for i, c in enumerate(_cells(path))
             if c["cell_type"] == "markdown" and _source(c).lstrip().startswith("## Exercises")]
    assert len(found) == 1, f"{path.name}: end the lecture with one '## Exercises' markdown cell"
    return found[0]


def exercise_numbers(path: Path) -> list[int]:
    """The numbers of the lecture's exercises, in the order of its ``## Exercises`` list."""
    return [int(n) for n, _ in _EXERCISE_ITEM.findall(_source(_cells(path)[_exercises_heading(path)]))]


def exercise_cells(path: Path) -> list[tuple[int, str]]:
    """(number, cell id) of each self-checked exercise cell, in order."""
    return [(c["metadata"]["kpca"]["exercise"], c["id"]) for c in _cells(path)
            if isinstance(c.get("metadata", {}).get("kpca"), dict) and "exercise" in c["metadata"]["kpca"]]


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_ends_with_numbered_exercises(path):
    cells = _cells(path)
    start = _exercises_heading(path)
    numbers = exercise_numbers(path)
    assert 3 <= len(numbers) <= 5 and numbers == list(range(1, len(numbers) + 1)), (
        f"{path.name}: the '## Exercises' cell lists 3-5 exercises numbered from 1, each "
        f"'N. **Title** (derivation|code|prediction)'; found {numbers}"
    )
    kinds = {kind for _, kind in _EXERCISE_ITEM.findall(_source(cells[start]))}
    assert len(kinds) >= 2, f"{path.name}: mix the kinds of exercise (found only {kinds})"
    checked = exercise_cells(path)
    assert checked, f"{path.name}: at least one exercise has a self-checked code cell"
    after = cells[start + 1:]
    assert [c.get("metadata", {}).get("kpca", {}).get("exercise") for c in after] == [n for n, _ in checked], (
        f"{path.name}: after '## Exercises' come only the exercise cells, in order"
    )
    assert [n for n, _ in checked] == sorted({n for n, _ in checked}), f"{path.name}: one cell per exercise"
    for cell in after:
        n = cell["metadata"]["kpca"]["exercise"]
        assert n in numbers, f"{path.name}: an exercise cell for exercise {n}, which the list lacks"
        assert f"self_check({n}," in _source(cell), f"{path.name}: exercise {n}'s cell calls self_check({n}, ...)"
        printed = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
        assert f"Exercise {n}: not answered yet" in printed, (
            f"{path.name}: exercise {n} is stored unanswered (the placeholder, not a solution)"
        )


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_claims_are_checked(path):
    code = "\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "code")
    n = len(re.findall(r"^\s*(assert\b|np\.testing\.assert)", code, flags=re.M))
    assert n >= 3, f"{path.name}: only {n} asserts; assert the claims the prose makes"


# -- no `==` on floats in a lecture's asserts ------------------------------------------------
# A lecture asserts what a student would accept as the claim: an inequality, an order of
# magnitude, np.isclose with a stated tolerance. `==` on a float pins one stored number of one
# BLAS / scikit-learn version (exact pins of that kind, where useful, live in the tests below).
#
# What counts as a float: a float (or complex) literal; a call of round() (with or without
# digits: rounding a computed number and comparing it is a pin) or float(); a true division
# `/`; NumPy/math functions that return floats (np.mean, np.sqrt, np.linalg.norm, ...) and the
# methods .mean(), .std(), .var(); arithmetic, abs(), min() or max() involving any of these; and
# a name the notebook assigns from such an expression (x = a / b; then `x == 3` is flagged).

_FLOAT_CALLS = {"float", "round"}
_FLOAT_NUMPY = {
    "mean", "median", "std", "var", "average", "quantile", "percentile", "sqrt", "exp", "log",
    "log2", "log10", "sin", "cos", "tan", "arctan2", "hypot", "norm", "cond", "det", "trace",
}
_FLOAT_METHODS = {"mean", "std", "var"}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _float_like(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (float, complex))
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.UnaryOp):
        return _float_like(node.operand, names)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Div) or _float_like(node.left, names) or _float_like(node.right, names)
    if isinstance(node, ast.Call):
        name = _dotted(node.func)
        if name in _FLOAT_CALLS:
            return True
        if name in {"abs", "min", "max"}:
            return any(_float_like(arg, names) for arg in node.args)
        if name.split(".")[0] in {"np", "numpy", "math"} and name.split(".")[-1] in _FLOAT_NUMPY:
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr in _FLOAT_METHODS:
            return True
    return False


def _code_trees(path: Path) -> list[tuple[int, ast.Module]]:
    from IPython.core.inputtransformer2 import TransformerManager  # magics -> plain Python

    transform = TransformerManager().transform_cell
    trees = []
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] == "code" and _source(cell).strip():
            trees.append((i, ast.parse(transform(_source(cell)))))
    return trees


def float_equalities(path: Path) -> list[str]:
    """Every comparison with ``==`` or ``!=`` of a float inside an ``assert`` of ``path``."""
    trees = _code_trees(path)
    names: set[str] = set()
    while True:  # names assigned from float expressions, anywhere in the notebook
        before = len(names)
        for _, tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and _float_like(node.value, names):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                    if node.value is not None and (
                        _float_like(node.value, names) or isinstance(getattr(node, "op", None), ast.Div)
                    ):
                        names.add(node.target.id)
        if len(names) == before:
            break
    found = []
    for i, tree in trees:
        for statement in ast.walk(tree):
            if not isinstance(statement, ast.Assert):
                continue
            for node in ast.walk(statement.test):
                if not isinstance(node, ast.Compare):
                    continue
                operands = [node.left, *node.comparators]
                for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
                    if isinstance(op, (ast.Eq, ast.NotEq)) and (
                        _float_like(left, names) or _float_like(right, names)
                    ):
                        found.append(f"cell {i}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_no_float_equality_in_asserts(path):
    found = float_equalities(path)
    assert not found, (
        f"{path.name}: an assert compares a float with ==; assert a tolerant claim instead "
        "(an inequality, np.isclose with a stated tolerance) and pin exact values in tests/:\n  "
        + "\n  ".join(found)
    )


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("assert x == 0.91", True),
        ("assert round(x, 2) == 0.91", True),
        ("assert round(1000 * a * 8 / 1e9) == 26", True),
        ("assert a == b == 4.0", True),
        ("assert np.mean(errors) == m", True),
        ("y = a / b\nassert y == 3", True),
        ("assert errors.mean() != 2", True),
        ("assert abs(x - 0.5) < 0.1", False),
        ("assert n == 2 and k == 15", False),
        ("assert (len(a), len(b)) == (1198, 599)", False),
        ("assert np.isclose(x, 0.91, atol=0.01)", False),
        ("assert name == 'rbf'", False),
        ("x = 0.5 == y", False),  # not an assert
    ],
)
def test_float_equality_detector(tmp_path, source, flagged):
    notebook = {"cells": [{"cell_type": "code", "source": source, "metadata": {}, "outputs": []}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    assert bool(float_equalities(path)) is flagged


# -- exact values the lectures quote, pinned here (the lectures assert tolerant claims) ----------


def _stdout(path: Path) -> str:
    return "".join(
        "".join(out["text"]) if isinstance(out["text"], list) else out["text"]
        for cell in _cells(path) if cell["cell_type"] == "code"
        for out in cell.get("outputs", []) if out.get("output_type") == "stream"
    )


def _markdown(path: Path) -> str:
    return " ".join(" ".join(_source(c).split()) for c in _cells(path) if c["cell_type"] == "markdown")


def test_lecture_05_kernel_numbers_quoted_in_the_text():
    from kpca_lib.centering import center_kernel
    from kpca_lib.datasets import make_circle
    from kpca_lib.kernels import polynomial_kernel

    X = make_circle(200, center=(1.0, 0.5), radius=1.0, noise=0.05, random_state=0)
    K = polynomial_kernel(X, degree=2, gamma=1.0, coef0=1.0)
    mean_part = np.linalg.norm(K - center_kernel(K)) / np.linalg.norm(K)
    assert K.min() == pytest.approx(0.27, abs=0.005) and K.max() == pytest.approx(34.8, abs=0.05)
    assert mean_part == pytest.approx(0.91, abs=0.005)
    text = _markdown(NOTEBOOKS / "05_kernel_pca.ipynb")
    assert "entries from 0.27 to 34.8" in text and "91 % of that of $K$" in text


def test_lecture_07_own_photo_counts():
    from sklearn.model_selection import train_test_split

    from kpca_lib import PCA
    from kpca_lib.analysis import reconstruct
    from kpca_lib.datasets import load_faces

    faces = load_faces()
    X_train, X_test, y_train, y_test = train_test_split(
        faces.data, faces.target, test_size=0.2, stratify=faces.target, random_state=0
    )
    faces_train, faces_test = X_train[y_train == 1], X_test[y_test == 1]
    pca = PCA(len(faces_train) - 1, solver="gram").fit(faces_train)
    own_photo = {}
    for r in (0, 10, 25, len(faces_train) - 1):
        recons = reconstruct(pca, faces_test, r)
        distances = np.linalg.norm(recons[:, None, :] - faces_test[None, :, :], axis=2)
        own_photo[r] = int(np.sum(distances.argmin(axis=1) == np.arange(len(faces_test))))
    assert own_photo == {0: 1, 10: 15, 25: 20, 79: 20}


def test_lecture_07_detector_counts_quoted_in_the_text():
    path = NOTEBOOKS / "07_eigenfaces.ipynb"
    out, text = _stdout(path), _markdown(path)
    counts = re.search(r"detector, images right of 40: \{1: (\d+), 2: (\d+), 5: (\d+), 10: (\d+), "
                       r"20: (\d+), 40: (\d+)\}; r = 2 vs r = 10: (\d+) and (\d+) images differ, "
                       r"McNemar's exact p = ([\d.]+)", out)
    assert counts, "07 no longer prints the detector's counts"
    c1, c2, c5, c10, c20, c40, only_2, only_10 = (int(g) for g in counts.groups()[:8])
    assert (c1, c2, c5, min(c10, c20, c40), max(c10, c20, c40)) == (36, 36, 35, 32, 33)
    assert (only_2, only_10) == (4, 0) and counts.group(9) == "0.125"
    for quoted in ("36 of the 40", "32 or 33", "four that $r = 2$ gets right and $r = 10$ gets wrong",
                   "$2\\cdot(1/2)^4 = 1/8$", "35 of the 40", "15 of the 20"):
        assert quoted in text, quoted
    assert "test accuracy 87.5%" in out and "test accuracy 100.0%" in out  # 35 and 40 of 40


def test_digits_description_supports_lecture_10():
    # Lecture 10 says load_digits is the UCI test part, written by 13 people, and block counts.
    from sklearn.datasets import load_digits

    description = " ".join(load_digits().DESCR.split())
    assert "30 contributed to the training set and different 13 to the test set" in description
    assert "copy of the test set of the UCI ML hand-written digits datasets" in description
    assert "nonoverlapping blocks of 4x4" in description and "range 0..16" in description
