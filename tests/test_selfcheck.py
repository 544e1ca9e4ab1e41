"""`make check`: the student's exercises run as Restart & Run All does, each question's
check report shown, the exit code 0 only when every question passes its public checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat

from kpca_lib.course.grading.judge.notebooks import with_answers
from kpca_lib.course.selfcheck import run_notebook

ROOT = Path(__file__).resolve().parents[1]
NAME = "01_feature_maps"


def selfcheck(*paths: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kpca_lib.course.selfcheck", *map(str, paths)],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def test_solved_and_blank_exercises(tmp_path):
    exercise = nbformat.read(ROOT / "exercises" / f"{NAME}.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / f"{NAME}.ipynb", as_version=4)
    (tmp_path / "solved").mkdir()
    nbformat.write(with_answers(exercise, solution), tmp_path / "solved" / f"{NAME}.ipynb")
    report = run_notebook(tmp_path / "solved" / f"{NAME}.ipynb")
    assert report.passed == list(report.questions) and len(report.questions) == 4
    assert all("✔" in text for text in report.questions.values())

    broken = with_answers(exercise, solution)
    answer = next(c for c in broken.cells if c.metadata.get("kpca", {}).get("slot") == "q2-answer")
    answer.source = "raise ValueError('not yet')\n" + answer.source
    (tmp_path / "exercises").mkdir()
    nbformat.write(broken, tmp_path / "exercises" / f"{NAME}.ipynb")
    done = selfcheck(cwd=tmp_path)  # default: exercises/*.ipynb of the current folder
    assert done.returncode == 1, done.stdout + done.stderr
    assert "raised ValueError: not yet" in done.stdout
    assert "✘ 3 of 4 question(s) pass their public checks" in done.stdout
    assert done.stderr == ""  # no warnings, no transport notice

    done = selfcheck(tmp_path / "solved" / f"{NAME}.ipynb", cwd=tmp_path)
    assert done.returncode == 0 and "✔ 4 of 4 question(s) pass" in done.stdout
    assert done.stderr == ""
    # Nothing is written back to the student's notebooks.
    assert nbformat.read(tmp_path / "exercises" / f"{NAME}.ipynb", as_version=4) == broken


def test_no_notebook_is_a_clear_error(tmp_path):
    done = selfcheck(cwd=tmp_path)
    assert done.returncode == 2 and "no exercise notebook found" in done.stderr


def test_the_kernels_own_stderr_is_shown_only_when_the_run_fails(tmp_path):
    # What the kernel writes to its file descriptor 2 (C libraries; libzmq's rare abort while
    # the kernel shuts down) is not the student's business on a clean run; when the kernel
    # dies, it is shown with the error.
    def notebook(name: str, source: str) -> Path:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source)]
        nbformat.write(nb, tmp_path / name)
        return tmp_path / name

    quiet = notebook("noise.ipynb", "import os\nos.write(2, b'fd-2 noise\\n')\nprint('ok')")
    done = selfcheck(quiet, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    dead = notebook("dies.ipynb", "import os\nos.write(2, b'last words\\n')\nos._exit(3)")
    done = selfcheck(dead, cwd=tmp_path)
    assert done.returncode == 2 and "could not be run" in done.stderr
    assert "the kernel's stderr:\nlast words" in done.stderr
