"""The released blank exercises run, and every one of their checks fails with a clear message.

(The solutions run under nbval in `make test`, where every cell, hidden checks included,
must pass.) A check that cannot fail is a bug: here each check cell of each blank
exercise must raise ``CheckFailed`` with a report, while the set-up and demo cells run.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from kpca_lib.course.grading.notebooks import meta

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def _text(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_blank_exercise_checks_fail(path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=120, allow_errors=True, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
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
        elif role == "answer":
            assert all(e.ename == "NotImplementedError" for e in errors), (cell.id, errors)
        else:
            assert not errors, (cell.id, errors[0].ename, errors[0].evalue)
    assert n_checks >= 1
