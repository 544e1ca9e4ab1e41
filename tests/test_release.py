"""`kpca-course release`: exercises/ is generated from solutions/, deterministically."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.cli import main
from kpca_lib.course.grading.judge.notebooks import meta, read_solution, strip_solutions
from kpca_lib.course.release import release

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
QUESTIONS_REQUIRED = {
    "q1_phi_p3", "q1_phi_p4", "q1_phi_general", "q2_feature_count", "q3_gram_pca",
    "q4_centering", "q5_kpca_projection", "q6_mercer", "q7_sigma_moons", "q8_eigenfaces_r",
}


def test_exercises_are_up_to_date(capsys):
    assert main(["release", "--check"]) == 0, capsys.readouterr().err


def test_every_question_is_in_a_solution_with_points():
    seen = set()
    for path in SOLUTIONS:
        solution = read_solution(path)
        seen |= set(solution.questions)
        assert all(p > 0 for p in solution.points.values())
        assert solution.nb.metadata["kpca"]["assignment"] == path.stem
    assert seen >= QUESTIONS_REQUIRED


def test_release_is_deterministic_and_check_names_files(tmp_path, capsys):
    out = tmp_path / "exercises"
    release(ROOT / "solutions", out)
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert release(ROOT / "solutions", out) == []
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    target = out / SOLUTIONS[0].name
    target.write_text(target.read_text().replace("check(", "print("))
    (out / "99_stale.ipynb").write_text("{}")
    (out / SOLUTIONS[1].name).unlink()
    args = ["release", "--check", "--solutions", str(ROOT / "solutions"), "--exercises", str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert SOLUTIONS[0].name in err and SOLUTIONS[1].name in err and "99_stale" in err
    assert main(args[:1] + args[2:]) == 0  # release fixes all three
    assert main(args) == 0
    assert not (out / "99_stale.ipynb").exists()


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_exercise_content(path):
    solution = nbformat.read(path, as_version=4)
    exercise_path = ROOT / "exercises" / path.name
    text = exercise_path.read_text()
    exercise = nbformat.reads(text, as_version=4)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    assert "run_hidden_check" not in text and "hidden-check" not in text
    assert exercise.metadata["kpca"]["assignment"] == path.stem
    kept = [c for c in solution.cells if meta(c).get("role") not in ("hidden-check", "solution-only")]
    assert [c.id for c in exercise.cells] == [c.id for c in kept]  # ids kept, order kept
    public = "\n".join(c.source for c in kept if meta(c).get("role") in ("setup", "question", "check"))
    for cell in solution.cells:  # no hidden check's code reaches the exercise
        if meta(cell).get("role") in ("hidden-check", "solution-only"):
            body = [line for line in cell.source.splitlines() if len(line.strip()) > 30 and line not in public]  # not e.g. imports of public helpers
            assert not any(line in text for line in body)
    sol_regions = {c.id: c.source.count("### BEGIN SOLUTION") for c in solution.cells}
    for cell in exercise.cells:
        role = meta(cell).get("role")
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
        if role in ("check", "question"):
            assert cell.metadata["editable"] is False and cell.metadata["deletable"] is False
        if role == "question":
            assert cell.metadata["jupyter"] == {"source_hidden": True}
        if role == "answer":
            assert meta(cell)["slot"] == cell.id
            assert "NotImplementedError" in cell.source or "None" in cell.source or "{}" in cell.source
            # every region a student fills says so
            assert cell.source.count("# YOUR CODE HERE") >= sol_regions[cell.id] >= 1, cell.source
    json.loads(text)
    assert text.endswith("\n")


def test_strip_solutions_keeps_indentation_and_uses_stubs():
    src = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n\n### BEGIN SOLUTION\ny = 1\n### END SOLUTION\n"
    out = strip_solutions(src, None, "q")
    assert "    raise NotImplementedError" in out and "return x" not in out and "y = 1" not in out
    out = strip_solutions(src, ["pass", "y = ..."], "q")
    assert "    pass" in out and "\ny = ..." in out
    with pytest.raises(ValueError, match="unbalanced"):
        strip_solutions("### BEGIN SOLUTION\nx = 1\n", None, "q")


def test_points_must_match_the_checks(tmp_path):
    nb = nbformat.read(SOLUTIONS[0], as_version=4)
    for cell in nb.cells:
        if meta(cell).get("role") == "question":
            cell.source = re.sub(r"points=3\)", "points=99)", cell.source, count=1)
            break
    bad = tmp_path / SOLUTIONS[0].name
    nbformat.write(nb, bad)
    with pytest.raises(ValueError, match="declares points=99"):
        read_solution(bad)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.source.replace('define_question("q1_phi_p3"', 'define_question("q1_other"', 1),
     "must define exactly that question"),
    (lambda c: c.source + "\n1 / 0\n", "fails: ZeroDivisionError"),
    (lambda c: c.source.replace("@q1_p3.probe", "@staticmethod", 1), "has no probe"),
])
def test_broken_question_cells_are_clear_errors(tmp_path, edit, message):
    nb = nbformat.read(SOLUTIONS[0], as_version=4)
    cell = next(c for c in nb.cells if meta(c).get("role") == "question")
    cell.source = edit(cell)
    bad = tmp_path / SOLUTIONS[0].name
    nbformat.write(nb, bad)
    with pytest.raises(ValueError, match=message):
        read_solution(bad)


def test_an_answer_without_its_question_cell_is_a_clear_error(tmp_path):
    nb = nbformat.read(SOLUTIONS[0], as_version=4)
    nb.cells = [c for c in nb.cells if meta(c).get("role") != "question" or meta(c)["question"] != "q2_feature_count"]
    bad = tmp_path / SOLUTIONS[0].name
    nbformat.write(nb, bad)
    with pytest.raises(ValueError, match="no question cell defines"):
        read_solution(bad)


def test_release_needs_solutions(tmp_path, capsys):
    shutil.rmtree(tmp_path, ignore_errors=True)
    tmp_path.mkdir()
    assert main(["release", "--solutions", str(tmp_path), "--exercises", str(tmp_path / "e")]) == 2
    assert "no solutions notebooks" in capsys.readouterr().err


def test_student_edition_arguments(tmp_path, capsys):
    assert main(["release", "--git"]) == 2
    assert "--git goes with --student-edition" in capsys.readouterr().err
    assert main(["release", "--student-edition", str(tmp_path / "e"), "--check"]) == 2
    assert main(["scan", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()
