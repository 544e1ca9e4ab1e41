"""The gradebook of a fixed batch, byte for byte: what an instructor's files hold must not change
when the grader's code is moved or cut differently.

A fixed batch (six submissions of 01_feature_maps, stored in ``tests/data/golden_batch/``: full
marks, blank, one question wrong, a cell that raises, a ``.py`` handed in, a name that looks like
another's), a fixed seed, fixed file times and a late-work policy, graded through the command line
with ``--jobs 2``. Its
``grades.csv``, ``grades.json``, ``feedback/`` and ``students/`` are compared with
``tests/data/golden_gradebook/``. Only what is not the grader's to decide is normalised: the
folders of this run (temporary paths) and the notebooks' wall-clock run times.

After an intended change of the gradebook's content, rewrite the stored gradebook with
``KPCA_UPDATE_GOLDEN=1 pytest tests/test_gradebook_golden.py`` and review the diff; with
``KPCA_UPDATE_GOLDEN=batch`` the submissions are built again from ``solutions/`` and
``exercises/`` too (after a change of the assignment).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.cli import main
from kpca_lib.course.grading.judge.notebooks import with_answers

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden_gradebook"
BATCH = ROOT / "tests" / "data" / "golden_batch"
ASSIGNMENT = "01_feature_maps"
SEED = "golden-gradebook-seed"
COMPARED = ("grades.csv", "grades.json", "feedback", "students")
# 2026-01-10 12:00 UTC and two days later: on time and late under the policy below.
ON_TIME, LATE = 1768046400, 1768219200
POLICY = """\
[late]
deadline = 2026-01-11T00:00:00Z
penalty_per_day = 0.1
submitted = "file"
"""


def _build_batch(folder: Path) -> None:
    """Write the batch's submissions (only with ``KPCA_UPDATE_GOLDEN=batch``)."""
    solution = nbformat.read(ROOT / "solutions" / f"{ASSIGNMENT}.ipynb", as_version=4)
    exercise = nbformat.read(ROOT / "exercises" / f"{ASSIGNMENT}.ipynb", as_version=4)

    def cell(nb, cid):
        return next(c for c in nb.cells if c.id == cid)

    def save(student: str, nb, name: str = f"{ASSIGNMENT}.ipynb") -> None:
        path = folder / student / name
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)

    save("alice", with_answers(exercise, solution))
    save("bob", exercise)
    partial = with_answers(exercise, solution)
    cell(partial, "q1-p4-answer").source = cell(exercise, "q1-p4-answer").source
    save("carol", partial)
    raising = with_answers(exercise, solution)
    cell(raising, "q2-answer").source = "raise ValueError('not done yet')\n"
    save("dave", raising)
    script = folder / "erin" / f"{ASSIGNMENT}.py"
    script.parent.mkdir(parents=True)
    script.write_text("print('a script, not a notebook')\n")
    save("a1ice", with_answers(exercise, solution))  # looks like alice


def _submissions(folder: Path) -> None:
    """The stored batch, copied, with its file times: carol's is late."""
    if os.environ.get("KPCA_UPDATE_GOLDEN") == "batch":
        shutil.rmtree(BATCH, ignore_errors=True)
        _build_batch(BATCH)
    shutil.copytree(BATCH, folder)
    for path in folder.rglob("*"):
        if path.is_file():
            when = LATE if path.parent.name == "carol" else ON_TIME
            os.utime(path, (when, when))


def _normalised(path: Path, tmp: Path) -> bytes:
    text = path.read_bytes().decode("utf-8")
    text = text.replace(str(tmp), "<tmp>")
    if path.suffix == ".json":
        text = re.sub(r'"run_seconds": [0-9.e+-]+', '"run_seconds": 0', text)
    if path.suffix == ".csv":
        text = _without_column(text, "run_seconds")
    text = re.sub(r"(?<![\w.])\d+\.\d+ ?s\b", "<seconds>", text)  # run times in tables and pages
    return text.encode("utf-8")


def _without_column(text: str, column: str) -> str:
    """The CSV ``text`` with ``column``'s cells emptied (byte for byte otherwise)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or column not in rows[0]:
        return text
    k = rows[0].index(column)
    lines = text.splitlines(keepends=True)
    if len(lines) != len(rows):  # a cell with a line break: compare it whole
        return text
    out = [lines[0]]
    for line, row in zip(lines[1:], rows[1:], strict=True):
        parts = line.split(",")
        if len(row) == len(rows[0]) and len(parts) > k and parts[k] == row[k]:
            parts[k] = "<seconds>"
        out.append(",".join(parts))
    return "".join(out)


def _tree(top: Path, tmp: Path) -> dict[str, bytes]:
    files = {}
    for name in COMPARED:
        base = top / name
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for p in paths:
            if p.relative_to(top).as_posix() == "students/index.json.sig":
                continue  # signed with this machine's grading secret (handback.trees.INDEX_SIG)
            files[p.relative_to(top).as_posix()] = _normalised(p, tmp)
    return files


@pytest.mark.slow
def test_a_fixed_batch_gives_the_stored_gradebook(tmp_path, capsys):
    submissions = tmp_path / "submissions"
    _submissions(submissions)
    out = tmp_path / "grades"
    out.mkdir()
    (out / "policy.toml").write_text(POLICY)
    files = sorted(str(p) for p in submissions.rglob("*") if p.is_file())
    code = main(["grade", "--assignment", ASSIGNMENT, "--out", str(out), "--seed", SEED,
                 "--jobs", "2", "--solutions", str(ROOT / "solutions"), *files])
    capsys.readouterr()
    assert code == 0
    got = _tree(out, tmp_path)
    assert {"grades.csv", "grades.json"} <= set(got) and any(k.startswith("students/") for k in got)
    if os.environ.get("KPCA_UPDATE_GOLDEN"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        for name, data in got.items():
            (GOLDEN / name).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / name).write_bytes(data)
    stored = {p.relative_to(GOLDEN).as_posix(): p.read_bytes()
              for p in sorted(GOLDEN.rglob("*")) if p.is_file()}
    assert sorted(got) == sorted(stored), "the gradebook's files differ from the stored ones"
    for name in stored:
        assert got[name] == stored[name], (
            f"{name} differs from tests/data/golden_gradebook/{name}:\n"
            + _first_difference(got[name], stored[name]))


def _first_difference(a: bytes, b: bytes) -> str:
    lines_a, lines_b = a.decode().splitlines(), b.decode().splitlines()
    for k, (x, y) in enumerate(zip(lines_a, lines_b, strict=False)):
        if x != y:
            return f"line {k + 1}:\n  now:    {x[:300]}\n  stored: {y[:300]}"
    return f"{len(lines_a)} lines now, {len(lines_b)} stored"


def test_normalising_keeps_everything_but_paths_and_run_times(tmp_path):
    """The comparison can fail: only this run's folder and run times are replaced."""
    page = tmp_path / "grades.json"
    page.write_text(json.dumps({"file": f"{tmp_path}/alice/x.ipynb", "run_seconds": 1.25,
                                "score": 12.0, "message": "took 3.5 s"}))
    assert _normalised(page, tmp_path) == (
        b'{"file": "<tmp>/alice/x.ipynb", "run_seconds": 0, "score": 12.0, '
        b'"message": "took <seconds>"}')
    table = tmp_path / "grades.csv"
    table.write_text("submission,score,run_seconds,message\r\nalice/x,12,0.71,\"a, b\"\r\n")
    assert _normalised(table, tmp_path) == (
        b"submission,score,run_seconds,message\r\nalice/x,12,<seconds>,\"a, b\"\r\n")
