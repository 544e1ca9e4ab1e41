"""Bounds that hold for a whole notebook and without cgroups (issue 39, items 2 and 3).

* A notebook is bounded as a whole: a cap on its cells (read before anything runs: a
  notebook of 100 000 one-line cells is an ``invalid`` row at once) and a wall clock for the
  whole notebook (``--notebook-timeout``; its row is ``timeout``, the answers checked before
  keep their points, the questions after score 0).
* Kernel memory without a memory cgroup: a submission that holds about 1.5 GB in Unix socket
  buffers under ``--memory 768`` is stopped as out of memory, with the reason.

Each batch holds honest full-marks and blank neighbours, graded beside the attack. No
assertion depends on timing: a slow notebook sleeps far longer than its limit, and the
socket hog holds its memory for the whole cell.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.grading.pipeline import grade_batch
from kpca_lib.course.grading.run import sockmem
from kpca_lib.course.grading.run.handed_in import MAX_CELLS, read_submission

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from test_grading import ASSIGNMENT, Q, blank, cell, sandbox_or_skip, student_copy  # noqa: E402

FULL = {q: 3.0 for q in Q}
ZERO = {q: 0.0 for q in Q}
NO_Q2 = {**FULL, "q2_feature_count": 0.0}


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret-do-not-leak")


def _write(folder: Path, name: str, nb) -> Path:
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def _grade(folder: Path, files: list[Path], **limits) -> dict:
    """Grade ``files`` on two workers (30 s a cell) into ``folder/out``: rows by submission."""
    rows = grade_batch(
        assignment=ASSIGNMENT, submissions=files, out=folder / "out",
        solutions=ROOT / "solutions", timeout=30, jobs=2, **limits,
    )  # fmt: skip
    return {r.submission: r for r in rows}


def _honest(folder: Path) -> list[Path]:
    return [_write(folder, "honest_full", student_copy()), _write(folder, "honest_blank", blank())]


def _check_honest(rows: dict) -> None:
    got = {n: (rows[n].status, dict(rows[n].questions)) for n in ("honest_full", "honest_blank")}
    assert got == {"honest_full": ("graded", FULL), "honest_blank": ("graded", ZERO)}, got


def _hundred_thousand_cells() -> dict:
    nb = student_copy()
    extra = [nbformat.v4.new_code_cell(f"x = {i}", id=f"many-{i}") for i in range(100_000)]
    at = nb.cells.index(cell(nb, "q2-answer"))
    nb.cells[at:at] = extra
    return nb


def test_the_cell_cap_is_read_before_anything_runs(tmp_path):
    path = _write(tmp_path, "many", _hundred_thousand_cells())
    nb, why = read_submission(path, ASSIGNMENT)
    assert nb is None and f"more than the {MAX_CELLS}" in why and "100" in why, why
    ok, why = read_submission(_write(tmp_path, "fine", student_copy()), ASSIGNMENT)
    assert ok is not None and why == ""


def test_a_whole_notebook_is_bounded_and_its_neighbours_are_graded(tmp_path):
    """Beside a full and a blank neighbour: 100 000 one-line cells (``invalid`` at once) and
    100 student cells of 2 s each after question 1 (200 s of sleep, against a notebook limit
    of 90 s): ``timeout``, question 1 kept, question 2 scores 0, and the message names the
    whole notebook's limit."""
    sandbox_or_skip()
    slow = student_copy()
    at = slow.cells.index(cell(slow, "q2-answer"))
    slow.cells[at:at] = [
        nbformat.v4.new_code_cell("import time\ntime.sleep(2)", id=f"slow-{i}") for i in range(100)
    ]
    files = [
        *_honest(tmp_path),
        _write(tmp_path, "slow", slow),
        _write(tmp_path, "many", _hundred_thousand_cells()),
    ]
    rows = _grade(tmp_path, files, notebook_timeout=90, memory_mb=2048)
    _check_honest(rows)
    many = rows["many"]
    assert many.status == "invalid" and "cells, more than the" in " ".join(many.messages), (
        many.status,
        many.messages,
    )
    s = rows["slow"]
    text = " ".join(s.messages)
    assert (s.status, dict(s.questions)) == ("timeout", NO_Q2), (s.status, s.questions, text)
    assert "90 s for the whole notebook" in text, text


def test_the_notebook_limit_is_checked_with_the_cell_limit(tmp_path):
    from kpca_lib.course.grading.config import GradeConfig

    with pytest.raises(ValueError, match="--notebook-timeout"):
        GradeConfig(
            assignment=ASSIGNMENT,
            solutions=ROOT / "solutions",
            out=tmp_path / "o",
            timeout=30,
            notebook_timeout=10,
        )


#: Holds about 1.5 GB in Unix socket buffers: 8 processes, each 500 socket pairs whose
#: sending end is filled and never read, then waits (the memory stays held meanwhile).
SOCKET_HOG = r"""
import os, socket, time
kids = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        pairs = []
        try:
            for _ in range(500):
                a, b = socket.socketpair()
                a.setblocking(False)
                try:
                    while True:
                        a.send(b"x" * 65536)
                except BlockingIOError:
                    pass
                pairs.append((a, b))
        except OSError:
            pass
        time.sleep(25)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
"""


def test_kernel_memory_is_bounded_without_a_memory_cgroup(tmp_path, monkeypatch):
    """``KPCA_SANDBOX_NO_CGROUPS=1``, ``--memory 768``: the socket hog is ``crashed`` as out of
    memory, the message names the socket buffers; question 1 keeps its points, and the
    neighbours graded beside it are exact."""
    sandbox_or_skip()
    if not sockmem.measurable():
        pytest.skip(
            "not root: the grader grades one at a time instead (its warning is tested "
            "in test_a_grader_that_cannot_count_kernel_memory_grades_one_at_a_time)"
        )
    monkeypatch.setenv("KPCA_SANDBOX_NO_CGROUPS", "1")
    hog = student_copy()
    cell(hog, "q2-answer").source = SOCKET_HOG
    files = [*_honest(tmp_path), _write(tmp_path, "socket_hog", hog)]
    rows = _grade(tmp_path, files, memory_mb=768)
    _check_honest(rows)
    h = rows["socket_hog"]
    text = " ".join(h.messages)
    assert (h.status, dict(h.questions)) == ("crashed", NO_Q2), (h.status, h.questions, text)
    assert "memory limit of 768 MB" in text and "socket buffers" in text, text


def test_a_grader_that_cannot_count_kernel_memory_grades_one_at_a_time(
    monkeypatch, capsys, tmp_path
):
    from kpca_lib.course.grading.run import runner
    from kpca_lib.course.grading.run import sandbox as sb

    monkeypatch.setattr(sockmem, "measurable", lambda: False)
    monkeypatch.setattr(sb, "cgroup_roots", lambda: {})
    assert not runner.kernel_memory_bounded("bwrap") and runner.kernel_memory_bounded("none")
    seen = []

    def chunk(runs, *args, **kwargs):
        seen.append(len(runs))
        for r in runs:
            r.finished = True

    monkeypatch.setattr(runner, "_run_chunk", chunk)
    monkeypatch.setattr(sb, "sweep_stale_cgroups", lambda: None)
    runs = [runner.Run(tmp_path / f"{i}.ipynb", n_cells=1) for i in range(4)]
    runner.run_all(runs, tmp_path, timeout=5, memory_mb=1024, jobs=2, sandbox="bwrap")
    assert seen == [4], seen  # one worker over all four: one at a time
    assert runner.KERNEL_MEMORY_WARNING in capsys.readouterr().err


def test_the_judge_never_runs_while_a_worker_is_forked(monkeypatch, tmp_path):
    """``on_done`` (the judge, with its BLAS calls) runs under ``FORK_LOCK``, which the runner
    also holds to fork each worker: OpenBLAS shuts its threads down at a fork, and a BLAS call
    in another thread at that moment never returns."""
    from kpca_lib.course.grading.run import runner
    from kpca_lib.course.grading.run import sandbox as sb

    held = []

    def chunk(runs, workdir, timeout, limits, sandbox, deliver, delivered, notebook):
        for r in runs:
            r.finished = True
            delivered.add(id(r))
            deliver(r)

    monkeypatch.setattr(runner, "_run_chunk", chunk)
    monkeypatch.setattr(sb, "sweep_stale_cgroups", lambda: None)
    runs = [runner.Run(tmp_path / f"{i}.ipynb", n_cells=1) for i in range(3)]
    runner.run_all(
        runs,
        tmp_path,
        timeout=5,
        memory_mb=1024,
        jobs=2,
        sandbox="none",
        on_done=lambda r: held.append(runner.FORK_LOCK.locked()),
    )
    assert held == [True, True, True]
