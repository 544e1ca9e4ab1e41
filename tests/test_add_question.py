"""The README's walkthrough works: a question added by editing only a copy of ``solutions/``
is checked in the notebook, released and graded, with its public and hidden checks.

The cells are taken from the README itself (the blocks after ``<!-- add-question: ROLE -->``),
so the walkthrough cannot drift from what works.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
import textwrap
from pathlib import Path

import nbformat
import pytest
from test_grading import sandbox_or_skip

from kpca_lib.course.checks import CheckFailed
from kpca_lib.course.cli import main
from kpca_lib.course.grading.judge.notebooks import meta, read_solution, with_answers

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_feature_maps"
QID = "q9_rbf"


def readme_cells() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- add-question: (\w[\w-]*) -->\s*\n(\s*)```python\n(.*?)\n\s*```", text, re.S)
    cells = {role: textwrap.dedent(body) for role, _indent, body in blocks}
    assert set(cells) == {"question", "answer", "check", "hidden"}, sorted(cells)
    return cells


def add_question(folder: Path) -> Path:
    """A copy of the assignment's solution notebook in ``folder``, with the README's question."""
    src = ROOT / "solutions" / f"{ASSIGNMENT}.ipynb"
    nb = nbformat.read(src, as_version=4)
    cells = readme_cells()

    def code(role: str, source: str, cid: str, **extra: object) -> nbformat.NotebookNode:
        c = nbformat.v4.new_code_cell(source, id=cid)
        c.metadata["kpca"] = {"role": role, "question": QID, **extra}
        return c

    nb.cells += [
        nbformat.v4.new_markdown_cell("## Question 9 (2 points): the Gaussian kernel\n\nWrite `rbf(X, Y, sigma)`.",
                                      id="q9-intro"),
        code("question", cells["question"], "q9-question"),
        code("answer", cells["answer"], "q9-answer"),
        code("check", cells["check"], "q9-check"),
        code("hidden-check", cells["hidden"], "q9-hidden", points=1),
    ]
    folder.mkdir(parents=True)
    out = folder / src.name
    nbformat.write(nb, out)
    return out


def run_cells(nb, roles=("setup", "question", "answer", "check", "hidden-check")) -> str:
    """Execute the notebook's code cells of ``roles`` in one fresh namespace (as a kernel
    would, in order); return what they printed."""
    ns: dict[str, object] = {"__name__": "__main__"}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        for cell in nb.cells:
            if cell.cell_type == "code" and meta(cell).get("role") in roles:
                exec(compile(cell.source, f"<cell {cell.id}>", "exec"), ns)
    return buf.getvalue()


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret")


def test_an_instructor_adds_a_question_by_editing_solutions_only(tmp_path, monkeypatch):
    sol_dir, ex_dir = tmp_path / "solutions", tmp_path / "exercises"
    path = add_question(sol_dir)

    # the solution notebook passes its own checks, public and hidden, with checks raising
    monkeypatch.setenv("KPCA_CHECKS_RAISE", "1")
    solution_nb = nbformat.read(path, as_version=4)
    printed = run_cells(solution_nb)
    assert f"✔ {QID}: all 1 public checks passed." in printed
    assert "hidden check of q9_rbf: 1 of 1 checks passed" in printed
    assert "worth 1 point of the question's 2 points" in printed

    solution = read_solution(path)
    assert QID in solution.questions and solution.points[QID] == 2.0
    assert [c.id for c in solution.hidden[QID]] == ["q9_rbf.unit_diagonal"]

    # release: the question cell is public (read-only, folded), the answer is stubbed
    assert main(["release", "--solutions", str(sol_dir), "--exercises", str(ex_dir)]) == 0
    exercise = nbformat.read(ex_dir / path.name, as_version=4)
    by_id = {c.id: c for c in exercise.cells}
    assert "q9-hidden" not in by_id and "unit_diagonal" not in (ex_dir / path.name).read_text()
    assert by_id["q9-question"].metadata["editable"] is False
    assert by_id["q9-question"].metadata["jupyter"] == {"source_hidden": True}
    stub = by_id["q9-answer"].source
    assert "# YOUR CODE HERE" in stub and "raise NotImplementedError" in stub and "np.exp" not in stub

    # the blank exercise: the check reports ✘ and a summary, and only raises when asked to
    monkeypatch.delenv("KPCA_CHECKS_RAISE")
    printed = run_cells(exercise, roles=("setup", "question", "answer", "check"))
    assert f"✘ {QID}: 1 of 1 checks failed" in printed and "rbf is not implemented yet" in printed
    monkeypatch.setenv("KPCA_CHECKS_RAISE", "1")
    with pytest.raises(CheckFailed):
        run_cells(exercise, roles=("setup", "question", "answer", "check"))

    # grade: full marks, and a slip in the exponent that keeps the unit diagonal (hidden ✔)
    sandbox = sandbox_or_skip()
    subs = tmp_path / "submissions"
    right = with_answers(exercise, solution_nb)
    wrong = json.loads(nbformat.writes(right))
    for cell in wrong["cells"]:
        if cell.get("id") == "q9-answer":
            cell["source"] = "".join(cell["source"]).replace("(2 * sigma**2)", "sigma**2")
            assert "sigma**2)" in cell["source"]
    for name, nb in (("right", right), ("wrong", nbformat.from_dict(wrong))):
        (subs / name).mkdir(parents=True)
        nbformat.write(nb, subs / name / path.name)
    out = tmp_path / "grades"
    rc = main(["grade", "--assignment", ASSIGNMENT, "--solutions", str(sol_dir), "--out", str(out),
               "--jobs", "2", "--sandbox", sandbox, *[str(p) for p in sorted(subs.glob("*/*.ipynb"))]])
    assert rc == 0
    with open(out / "grades.csv", newline="") as fh:
        rows = {r["submission"].split("/")[0]: r for r in csv.DictReader(fh)}
    assert rows["right"][QID] == "2" and rows["right"]["score"] == rows["right"]["max_score"]
    assert rows["wrong"][QID] == "1"
    assert float(rows["wrong"]["score"]) == float(rows["wrong"]["max_score"]) - 1
    record = json.loads((out / "grades.json").read_text())
    row = next(r for r in record["submissions"] if r["submission"].startswith("wrong"))
    feedback = (out / row["feedback"]).read_text()
    assert "where does σ appear in the exponent" in feedback
    assert "✔ hidden check (1 pt): rbf(X, X, sigma) has k(x, x) = 1 on its diagonal." in feedback
    shutil.rmtree(out)
