"""The released blank exercises run, and every one of their checks fails with a clear message.

(The solutions run under nbval in `make test`, where every cell, hidden checks included,
must pass.) A check that cannot fail is a bug. Each blank exercise runs twice:

* as a student's *Run All*: no cell raises; every check cell prints its ✘ report, what the
  checks are worth and the one-line ✘ summary, and no traceback;
* with ``KPCA_CHECKS_RAISE=1`` (as ``make test`` runs the solutions): every check cell
  raises ``CheckFailed``.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from kpca_lib.course.grading.judge.notebooks import meta

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def _text(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def _run(path, env=None):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    if env:  # the kernel inherits this process's environment
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
    try:
        client.execute()
    finally:
        for k, v in (old.items() if env else ()):
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_run_all_checks_every_question_of_a_blank_exercise(path):
    nb = _run(path)
    n_checks = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert not _errors(cell), (cell.id, _errors(cell)[0].ename, _errors(cell)[0].evalue)
        if meta(cell).get("role") == "check":
            n_checks += 1
            report = _text(cell)
            qid = meta(cell)["question"]
            assert "✘" in report and "0 of" in report, report
            assert f"✘ {qid}: " in report.splitlines()[-1], report  # the one-line summary, last
            assert "worth" in report and "Traceback" not in report, report
    assert n_checks >= 1


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_blank_exercise_checks_fail(path):
    nb = _run(path, {"KPCA_CHECKS_RAISE": "1"})
    n_checks = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        role = meta(cell).get("role")
        errors = _errors(cell)
        if role == "check":
            n_checks += 1
            assert errors, f"check cell {cell.id} passed on the blank exercise"
            assert errors[0].ename == "CheckFailed", (cell.id, errors[0].ename, errors[0].evalue)
            report = _text(cell)
            assert "✘" in report and "0 of" in report, report
        else:
            assert not errors, (cell.id, errors[0].ename, errors[0].evalue)
    assert n_checks >= 1
