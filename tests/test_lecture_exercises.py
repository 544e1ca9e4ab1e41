"""The numbered exercises each lecture ends with: every worked solution passes its self-check,
every wrong answer in the solution file is refused, and every exercise has a worked solution.

The solutions are the instructor's (``solutions/lectures/NN_<lecture>.md``, never in the
student edition): for each exercise a ``## Exercise N`` section; for each exercise code cell
(``metadata["kpca"]["exercise"] = N`` in the lecture) exactly one ```` ```python answer ````
block (the cell's complete source, solved) and at least one ```` ```python wrong ```` block (a
typical slip, which the cell's check must refuse). The form of the exercise block in the
lectures themselves is checked by ``tests/test_lectures.py``, which the student edition holds.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from test_exercises_run import run_in_local_kernel
from test_lectures import LECTURES, exercise_cells, exercise_numbers

from kpca_lib.course.lecture_checks import REQUIRE_ENV, parse_solutions

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions" / "lectures"


def solution_file(lecture: Path) -> Path:
    return SOLUTIONS / f"{lecture.stem}.md"


def test_parse_solutions_reads_sections_and_blocks():
    text = ("# 05 · x: solutions\n\n## Exercise 1\nprose $a$\n\n## Exercise 2\nwhy\n\n"
            "```python answer\nx = 1\nself_check(2, x, c)\n```\n\n```python wrong\nx = 2\n```\n"
            "\n```python wrong\nx = 3\n```\n")
    found = parse_solutions(text)
    assert sorted(found) == [1, 2]
    assert found[1].answer == [] and "prose" in found[1].text
    assert found[2].answer == ["x = 1\nself_check(2, x, c)\n"]
    assert found[2].wrong == ["x = 2\n", "x = 3\n"]
    with pytest.raises(ValueError, match="two sections"):
        parse_solutions("## Exercise 1\na\n## Exercise 1\nb\n")


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_every_exercise_has_a_worked_solution(path):
    numbers = exercise_numbers(path)
    target = solution_file(path)
    assert target.is_file(), f"{path.name}: its exercises need worked solutions in {target}"
    solutions = parse_solutions(target.read_text(encoding="utf-8"))
    assert sorted(solutions) == numbers, (
        f"{target.name}: sections {sorted(solutions)}, but {path.name} lists exercises {numbers}"
    )
    checked = {n for n, _ in exercise_cells(path)}
    for n, section in solutions.items():
        assert section.text.strip(), f"{target.name}: exercise {n} has an empty section"
        if n in checked:
            assert len(section.answer) == 1, f"{target.name}: exercise {n} needs one 'python answer' block"
            assert section.wrong, f"{target.name}: exercise {n} needs at least one 'python wrong' block"
            assert f"self_check({n}," in section.answer[0], (
                f"{target.name}: exercise {n}'s answer must keep the cell's self_check({n}, ...) call"
            )
        else:
            assert not section.answer and not section.wrong, (
                f"{target.name}: exercise {n} has code blocks but no exercise cell in {path.name}"
            )


_WRONG = """\
from kpca_lib.course.lecture_checks import ExerciseNotYetRight as _Refused
try:
    exec(compile({source!r}, "exercise {n}, wrong answer {i}", "exec"))
except _Refused as _error:
    print("refused:", _error)
else:
    raise AssertionError("exercise {n}: wrong answer {i} of the solution file passed its check")
"""


@pytest.mark.slow
@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_solutions_pass_and_wrong_answers_are_refused(path, tmp_path, monkeypatch):
    solutions = parse_solutions(solution_file(path).read_text(encoding="utf-8"))
    nb = nbformat.read(path, as_version=4)
    cells = dict(exercise_cells(path))
    assert cells, f"{path.name} has no self-checked exercise"
    by_id = {cell.id: cell for cell in nb.cells}
    for n, cell_id in cells.items():
        by_id[cell_id].source = solutions[n].answer[0]
    for n in cells:
        for i, source in enumerate(solutions[n].wrong, start=1):
            nb.cells.append(nbformat.v4.new_code_cell(_WRONG.format(source=source, n=n, i=i)))
    monkeypatch.setenv(REQUIRE_ENV, "1")
    monkeypatch.setenv("KPCA_CHECKS_RAISE", "1")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    run_in_local_kernel(nb, path.parent, timeout=600)
    for n, cell_id in cells.items():
        printed = "".join(o.get("text", "") for o in by_id[cell_id].outputs if o.output_type == "stream")
        assert f"Exercise {n}: correct" in printed, f"{path.name}: exercise {n}'s answer printed {printed!r}"


def test_self_check_says_unanswered_right_and_wrong(capsys, monkeypatch):
    from kpca_lib.course.lecture_checks import ExerciseNotYetRight, self_check

    def check(f):
        assert f(2) == 4, "square the number"

    def unfilled(x):
        raise NotImplementedError

    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    self_check(1, ..., check)
    self_check(1, unfilled, check)
    assert capsys.readouterr().out.count("Exercise 1: not answered yet") == 2
    self_check(1, lambda x: x * x, check)
    assert "Exercise 1: correct" in capsys.readouterr().out
    with pytest.raises(ExerciseNotYetRight, match="Exercise 1: not yet right: square the number"):
        self_check(1, lambda x: 2 * x + 1, check)
    with pytest.raises(AssertionError, match="no hint given"):
        self_check(3, 0, lambda a: (_ for _ in ()).throw(AssertionError()))
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(ExerciseNotYetRight, match="Exercise 1: not answered"):
        self_check(1, ..., check)
