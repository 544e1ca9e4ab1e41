"""`make check`: the student's exercises run as Restart & Run All does, each question's
check report shown; one homework on its own (`make check HW=01`); a ✘ is a result, not an
error (exit code 0, 1 only with --strict), and the output ends with the report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.grading.judge.notebooks import with_answers
from kpca_lib.course.selfcheck import DESCRIPTION, main, run_notebook, select

ROOT = Path(__file__).resolve().parents[1]
NAME = "01_feature_maps"


def selfcheck(*args: Path | str, cwd: Path, hw: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HW"}
    if hw is not None:
        env["HW"] = hw  # as `make check HW=01` passes it
    return subprocess.run([sys.executable, "-m", "kpca_lib.course.selfcheck", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


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
    other = nbformat.v4.new_notebook()
    other.cells = [nbformat.v4.new_code_cell("print('THE OTHER HOMEWORK RAN')")]
    nbformat.write(other, tmp_path / "exercises" / "02_other.ipynb")
    done = selfcheck(cwd=tmp_path, hw="01")  # make check HW=01: that homework only
    assert done.returncode == 0, done.stdout + done.stderr  # a ✘ is a result, not a crash
    assert "raised ValueError: not yet" in done.stdout and "OTHER HOMEWORK" not in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("✘ 3 of 4 question(s) pass their public checks")  # ends with the report
    assert done.stderr == ""  # no warnings, no transport notice
    done = selfcheck("--hw", "1", "--strict", cwd=tmp_path)
    assert done.returncode == 1 and "OTHER HOMEWORK" not in done.stdout

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


def test_homeworks_are_chosen_by_number(tmp_path, monkeypatch, capsys):
    for name in ("01_feature_maps", "02_pca_and_centering", "10_later"):
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / f"{name}.ipynb")
    assert [p.stem for p in select("01", tmp_path)] == ["01_feature_maps"]
    assert [p.stem for p in select("2", tmp_path)] == ["02_pca_and_centering"]
    assert [p.stem for p in select("01_feature_maps", tmp_path)] == ["01_feature_maps"]
    assert select("1_feature", tmp_path) == [] and select("05", tmp_path) == []
    (tmp_path / "exercises").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HW", raising=False)
    assert main(["--hw", "05"]) == 2
    assert "no homework '05' in exercises/" in capsys.readouterr().err


def test_help_is_whole_sentences(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert " ".join(DESCRIPTION.split()) in text and DESCRIPTION.endswith(".")
    assert "make check HW=01" in text and "--strict" in text
