"""Your exercises run: every notebook in exercises/ is executed, as the grader would.

For each question of an exercise:

* **not started** (its answer cells are as released): the answer cells may only raise
  ``NotImplementedError``, and its check cells must fail with ``CheckFailed`` (a check that
  passed on a blank answer would be a bug of the course);
* **started** (you changed one of its answer cells): its answer cells must run without an
  error and its check cells must pass.

Every other cell (set-up, demos, cells you added) must run without an error. So a blank
copy passes, finished work passes, and a wrong or half-done answer fails here, naming the
question. The released answer cells are recognised by the hash of their source, kept in the
edition's ``.kpca-edition.json`` (without it, as in the instructor's repository where
exercises/ is always as released, every question counts as not started).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))
MARKER = ROOT / ".kpca-edition.json"


def _kpca(cell: Any) -> dict[str, Any]:
    value = cell.get("metadata", {}).get("kpca", {})
    return value if isinstance(value, dict) else {}


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def released_answers(path: Path, nb: Any) -> dict[str, str]:
    """Cell id -> hash of the source of each answer cell as released."""
    if MARKER.is_file():
        answers = json.loads(MARKER.read_text(encoding="utf-8")).get("answers", {})
        rel = path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(ROOT) else ""
        if rel in answers:
            return dict(answers[rel])
    return {c.id: _digest(c.source) for c in nb.cells
            if c.cell_type == "code" and _kpca(c).get("role") == "answer"}


def run_in_local_kernel(nb: Any, folder: Path, **client: Any) -> Any:
    """Run ``nb`` in a fresh python3 kernel in ``folder``, over IPC sockets in a private
    temporary folder, not TCP: a local kernel needs no port, and ipykernel warns on the stderr
    of every kernel "running over TCP without encryption". The client starts the kernel, so it
    also shuts it down and closes its own sockets."""
    with tempfile.TemporaryDirectory(prefix="kpca-kernel-") as sockets:
        ipc = Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel"}})
        NotebookClient(
            nb,
            kernel_name="python3",
            config=ipc,
            resources={"metadata": {"path": str(folder)}},
            **client,
        ).execute()
    return nb


def execute(nb: Any, folder: Path) -> Any:
    """Run every cell of ``nb`` (errors are kept in the outputs), in ``folder``, with checks
    that raise ``CheckFailed`` when they fail (``KPCA_CHECKS_RAISE=1``; in JupyterLab they
    only print their report, so that *Run All* reaches every question)."""
    old = os.environ.get("KPCA_CHECKS_RAISE")
    os.environ["KPCA_CHECKS_RAISE"] = "1"  # the kernel inherits this process's environment
    try:
        run_in_local_kernel(nb, folder, timeout=300, allow_errors=True)
    finally:
        if old is None:
            os.environ.pop("KPCA_CHECKS_RAISE", None)
        else:
            os.environ["KPCA_CHECKS_RAISE"] = old
    return nb


def _errors(cell: Any) -> list[Any]:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def _report(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def problems(nb: Any, released: dict[str, str]) -> list[str]:
    """What is wrong in an executed exercise, one line each (empty: the test passes)."""
    started: set[str] = set()
    answered: dict[str, set[str]] = {}
    for cell in nb.cells:
        m = _kpca(cell)
        if cell.cell_type == "code" and m.get("role") == "answer":
            q = m.get("question", "?")
            answered.setdefault(q, set()).add(cell.id)
            if released.get(cell.id) != _digest(cell.source):
                started.add(q)
    present = {cid for ids in answered.values() for cid in ids}
    out = [f"the answer cell with id {cid} is missing (deleted, or its id changed): restore it "
           "from a fresh copy of the exercise" for cid in sorted(set(released) - present)]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        m = _kpca(cell)
        role, q = m.get("role"), m.get("question", "?")
        errors = _errors(cell)
        first = f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else ""
        where = f"cell {index} (id {cell.get('id')})"
        if role == "answer" and q not in started:
            if any(e.get("ename") != "NotImplementedError" for e in errors):
                out.append(f"{q}: the blank answer {where} raised {first}")
        elif role == "check" and q not in started:
            report = _report(cell)
            if not errors:
                out.append(f"{q}: the check {where} passed on a blank answer (a bug of the course)")
            elif errors[0].get("ename") != "CheckFailed" or "✘" not in report or "0 of" not in report:
                out.append(f"{q}: the check {where} on a blank answer raised {first}")
        elif role == "answer" and errors:
            out.append(f"{q}: your answer {where} raised {first}")
        elif role == "check" and errors:
            out.append(f"{q}: your answer does not pass its check yet ({first}); "
                       "run the exercise in JupyterLab to see the check's report")
        elif errors:
            out.append(f"{where} ({role or 'a cell without a role'}) raised {first}")
    return out


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_exercise_runs(path):
    nb = nbformat.read(path, as_version=4)
    released = released_answers(path, nb)
    assert released, f"{path.name} has no answer cells"
    execute(nb, path.parent)
    found = problems(nb, released)
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found)
