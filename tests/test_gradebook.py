"""The gradebook loses nothing: incremental atomic rows, --resume, --merge, a guarded --out.

Unit tests of :mod:`kpca_lib.course.grading.record.gradebook` (no kernel), then a few batches
graded end to end with ``--sandbox none`` (each kernel costs ~1-2 s). No test depends on
timing: the killed-grader test polls the gradebook and gates a submission on a file.
"""

from __future__ import annotations

import copy
import csv
import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.cli import EXIT_GRADER_FAILURE, EXIT_INCOMPLETE, EXIT_USAGE, main
from kpca_lib.course.grading.judge.notebooks import extract_answers, read_solution, with_answers
from kpca_lib.course.grading.record import gradebook as gb
from kpca_lib.course.grading.run.handed_in import link_counts
from kpca_lib.course.grading.run.handed_in import read_submission as _read_submission

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_feature_maps"
SOLUTION = nbformat.read(ROOT / "solutions" / f"{ASSIGNMENT}.ipynb", as_version=4)
EXERCISE = nbformat.read(ROOT / "exercises" / f"{ASSIGNMENT}.ipynb", as_version=4)
Q = ["q1_phi_p3", "q1_phi_p4", "q1_phi_general", "q2_feature_count"]
POINTS = {q: 3.0 for q in Q}


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret")


def full_copy():
    return with_answers(EXERCISE, SOLUTION)


def save(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nbformat.write(nb, path)
    return path


def garbage(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a notebook")
    return path


def grade(out: Path, files, *extra: str) -> int:
    return main(["grade", "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "2",
                 "--timeout", "60", "--sandbox", "none", *extra, *[str(f) for f in files]])


def rows_csv(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        return {r["submission"]: r for r in csv.DictReader(fh)}


def book(out: Path) -> dict:
    return json.loads((out / "grades.json").read_text(encoding="utf-8"))


def assert_valid_gradebook(out: Path) -> dict[str, dict]:
    """Every row present is complete: in grades.json with its feedback; grades.csv agrees."""
    data = book(out)
    rows = {r["submission"]: r for r in data["submissions"]}
    assert len(rows) == len(data["submissions"])
    for r in rows.values():
        feedback = (out / r["feedback"]).read_text(encoding="utf-8")
        assert f"**Score: {gb.format_points(r['score'])} / 12**" in feedback
        assert f"(status: {r['status']})" in feedback
        assert r["score"] == sum(r["questions"].values())
    csv_rows = rows_csv(out)
    assert set(csv_rows) <= {gb.csv_cell(rid) for rid in rows}
    for rid, r in rows.items():
        c = csv_rows.get(gb.csv_cell(rid))
        if c is not None:
            assert (c["status"], float(c["score"])) == (r["status"], r["score"])
            assert [float(c[q]) for q in Q] == [r["questions"][q] for q in Q]
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    return rows


# --------------------------------------------------------------------------- row ids
def test_row_ids_keep_the_student_folder(tmp_path):
    paths = [tmp_path / "alice" / "03_mercer.ipynb", tmp_path / "bob" / "03_mercer.ipynb"]
    assert gb.row_ids(paths, gb.common_root(paths)) == ["alice/03_mercer", "bob/03_mercer"]
    flat = [tmp_path / "alice.ipynb", tmp_path / "bob.ipynb"]
    assert gb.row_ids(flat, gb.common_root(flat)) == ["alice", "bob"]
    clash = [tmp_path / "x.ipynb", tmp_path / "x"]
    assert gb.row_ids(clash, tmp_path) == ["x", "x~2"]
    assert gb.row_ids([tmp_path / "a\u202eb\x1b.ipynb"], tmp_path) == ["a<U+202E>b<U+001B>"]
    with pytest.raises(ValueError, match="not inside"):
        gb.row_ids([tmp_path.parent / "elsewhere.ipynb"], tmp_path)


def test_missing_submission_is_named_before_anything_is_written(tmp_path, capsys):
    real = garbage(tmp_path / "real.ipynb")
    out = tmp_path / "out"
    assert grade(out, [real, tmp_path / "typo.ipynb"]) == EXIT_USAGE
    assert "'" + str(tmp_path / "typo.ipynb") + "'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("row_id", ["../../etc/passwd", ".bashrc", "a/b/../c", "x\x00y",
                                    "\u202ecod.exe", "é" * 300, "con", "a b", ""])
def test_feedback_names_are_safe(row_id):
    name = gb.feedback_name(row_id)
    assert name.endswith(".md") and "/" not in name and "\x00" not in name
    assert not name.startswith(".") and name.isprintable()
    assert len(name.encode()) <= 255
    assert all(c.isalnum() or c in "-_.%~" for c in name)


def test_feedback_names_are_unique_ignoring_case():
    names = set()
    for rid in ["alice/x", "alice%2Fx", "Alice/x", "ALICE/X", "alice_x", "alice.x"]:
        name = gb.feedback_name(rid, names)
        assert name.casefold() not in {n.casefold() for n in names}
        names.add(name)


def test_csv_cells_never_start_a_formula():
    for bad in ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "=HYPERLINK(\"http://x\")"]:
        assert gb.csv_cell(bad) == "'" + bad
    for good in ["alice", "12", "0", "a=b", "bob/03"]:
        assert gb.csv_cell(good) == good


def test_lookalike_names_are_grouped():
    names = ["alice", "аlice", "ALICE", "al\u200bice", "ａｌｉｃｅ", "a1ice", "bob", "b0b", "carol",
             "alicia"]
    groups = gb.lookalike_groups(names)
    assert sorted(map(sorted, groups)) == sorted([
        sorted(["alice", "аlice", "ALICE", "al\u200bice", "ａｌｉｃｅ", "a1ice"]),
        ["b0b", "bob"]])
    assert "mixes Cyrillic and Latin" in gb.suspicious_name("аlice")
    assert "invisible" in gb.suspicious_name(gb.visible("\u202eecila"))
    assert gb.suspicious_name("alice/03_mercer") == ""


# --------------------------------------------------------------------------- reading submissions
def hostile_notebook(victim: Path | None = None) -> dict:
    """A full submission wrapped in hostile structure that must not crash the grader.

    With ``victim``, its answer also plants symbolic links to it in the grader's scratch
    folder (reachable with ``--sandbox none``), which the clean-up must not follow.
    """
    nb = json.loads(nbformat.writes(full_copy()))
    cells = nb["cells"]
    p3 = next(c for c in cells if c.get("id") == "q1-p3-answer")
    p3["id"] = {"evil": ["object", "id"]}  # found by its metadata slot
    if victim is not None:
        p3["source"] += (f"\nimport os\nfor _d in ('.', '..', '../..'):\n"
                         f"    os.symlink({str(victim)!r}, os.path.join(_d, 'planted'))\n")
    q2 = next(c for c in cells if c.get("id") == "q2-answer")
    bad_copy = copy.deepcopy(q2)
    bad_copy["source"] = [1, 2, {"x": 3}]  # an earlier copy with a source that is not text
    bad_copy["metadata"]["kpca"]["slot"] = ["unhashable"]
    cells.insert(0, bad_copy)
    cells[1:1] = [42, "cell", None, [], {"cell_type": {"a": 1}}, {"cell_type": "code", "id": 7,
                  "metadata": "wrong", "source": "x"}, {"cell_type": "code", "metadata": {"kpca": []}}]
    nb["metadata"]["kpca"]["questions"] = {"not": "a list"}
    return nb


def test_extract_answers_survives_hostile_structure():
    solution = read_solution(ROOT / "solutions" / f"{ASSIGNMENT}.ipynb", with_hidden=False)
    sources, notes = extract_answers(hostile_notebook(), solution)
    assert set(sources) == {c for ids in solution.answer_cells.values() for c in ids}
    assert sources["q2-answer"] == next(c.source for c in SOLUTION.cells if c.id == "q2-answer")
    bad = json.loads(nbformat.writes(full_copy()))
    for c in bad["cells"]:
        if c.get("id") == "q2-answer":
            c["source"] = ["ok", 3]
        if c.get("id") == "q1-p4-answer":
            c["source"] = "\ud800 lone surrogate"
    sources, notes = extract_answers(bad, solution)
    assert "q2-answer" not in sources and "q1-p4-answer" not in sources
    assert sum("malformed source" in n for n in notes) == 2
    for weird in [None, [], {"cells": {"a": 1}}, {"cells": [[], 1]}, "text"]:
        assert extract_answers(weird, solution)[0] == {}


def test_unreadable_files_are_invalid_not_fatal(tmp_path):
    cases = {
        "nested": ("[" * 100_000 + "]" * 100_000).encode(),
        "latin1": "{\"cells\": [], \"x\": \"caf\xe9\"}".encode("latin-1"),
        "bigint": b'{"nbformat": 1' + b"1" * 5000 + b"}",
        "v_is_true": b'{"nbformat": true, "cells": []}',
        "wrong_assignment_type": b'{"nbformat": 4, "cells": [], "metadata": {"kpca": {"assignment": [1]}}}',
        "answers.py": b"def phi_3(x):\n    return x\n",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder.ipynb").mkdir()
    os.mkfifo(tmp_path / "fifo.ipynb")  # a reader that waits would hang the batch
    with open(tmp_path / "huge.ipynb", "wb") as fh:
        fh.truncate(25_000_000)
    expect = {"nested": "nested too deeply", "latin1": "not text", "bigint": "not valid JSON",
              "v_is_true": "nbformat", "wrong_assignment_type": "(malformed)",
              "folder.ipynb": "folder", "fifo.ipynb": "FIFO", "huge.ipynb": "25 MB",
              "answers.py": "this is a .py file, not a Jupyter notebook (.ipynb)"}
    for name, why in expect.items():
        nb, reason = _read_submission(tmp_path / name, ASSIGNMENT)
        assert nb is None and why in reason, (name, reason)


def test_only_files_the_student_handed_in_are_read(tmp_path):
    """Links, hard links from outside and special files are refused; nothing is followed."""
    good = b'{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {}}'
    outside = tmp_path / "instructor" / "solution.ipynb"
    outside.parent.mkdir()
    outside.write_bytes(good)
    subs = tmp_path / "submissions"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "01.ipynb").write_bytes(good)
    (subs / "bob").mkdir()
    (subs / "bob" / "01.ipynb").symlink_to("../../instructor/solution.ipynb")
    (subs / "carol").mkdir()
    (subs / "carol" / "01.ipynb").symlink_to("../alice/01.ipynb")  # a classmate's
    (subs / "dave").symlink_to(outside.parent, target_is_directory=True)  # a linked folder
    (subs / "erin").mkdir()
    os.link(outside, subs / "erin" / "01.ipynb")  # a hard link to a file outside
    (subs / "frank").mkdir()
    (subs / "frank" / "01.ipynb").write_bytes(good)
    os.link(subs / "frank" / "01.ipynb", subs / "frank" / "copy.ipynb")  # both handed in
    paths = [subs / "alice" / "01.ipynb", subs / "bob" / "01.ipynb", subs / "carol" / "01.ipynb",
             subs / "dave" / "solution.ipynb", subs / "erin" / "01.ipynb",
             subs / "frank" / "01.ipynb", subs / "frank" / "copy.ipynb"]
    batch = link_counts(paths, subs)
    expect = {"alice": None, "bob": "symbolic link", "carol": "symbolic link",
              "dave": "folder 'dave' on the way to this file is a symbolic link",
              "erin": "hard link", "frank": None}
    for path in paths:
        nb, reason = _read_submission(path, ASSIGNMENT, root=subs, batch=batch)
        why = expect[path.relative_to(subs).parts[0]]
        if why is None:
            assert nb is not None and reason == "", (path, reason)
        else:
            assert nb is None and why in reason, (path, reason)
    # Without the batch's counts a second name is a link from outside.
    nb, reason = _read_submission(subs / "frank" / "01.ipynb", ASSIGNMENT, root=subs)
    assert nb is None and "hard link" in reason


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root (CI runs as root)")
def test_a_device_is_not_read(tmp_path):
    os.mknod(tmp_path / "null.ipynb", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    nb, reason = _read_submission(tmp_path / "null.ipynb", ASSIGNMENT, root=tmp_path)
    assert nb is None and "a device" in reason


# --------------------------------------------------------------------------- the folder
def test_atomic_write_keeps_the_old_file_on_any_failure(tmp_path, monkeypatch):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        gb.atomic_write(fd, "f.txt", b"old")

        def killed(*a, **k):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(gb.os, "replace", killed)
        with pytest.raises(OSError):
            gb.atomic_write(fd, "f.txt", b"new")
        monkeypatch.undo()
        assert (tmp_path / "f.txt").read_bytes() == b"old"
        assert sorted(os.listdir(tmp_path)) == ["f.txt"]
        victim = tmp_path / "bashrc"
        victim.write_text("precious")
        (tmp_path / "link.md").symlink_to(victim)
        with pytest.raises(gb.GradebookWriteError, match="symbolic link"):
            gb.atomic_write(fd, "link.md", b"owned")
        assert victim.read_text() == "precious" and (tmp_path / "link.md").is_symlink()
    finally:
        os.close(fd)


def new_book(out: Path, mode: str = "new", assignment: str = ASSIGNMENT) -> gb.Gradebook:
    return gb.Gradebook(out, assignment=assignment, points=POINTS, mode=mode)


def record(rid: str, book_: gb.Gradebook, status: str = "invalid", score: float = 0.0) -> dict:
    qs = {q: 0.0 for q in Q}
    qs[Q[0]] = score
    return {"submission": rid, "file": f"/x/{rid}.ipynb", "feedback": book_.feedback_path(rid),
            "sandbox": "none", "status": status, "score": score, "max_score": 12.0,
            "questions": qs, "messages": [], "checks": []}


def feedback_text(r: dict) -> str:
    return f"**Score: {gb.format_points(r['score'])} / 12** (status: {r['status']})\n"


def add(book_: gb.Gradebook, rid: str, **kw) -> None:
    r = record(rid, book_, **kw)
    book_.add(r, feedback_text(r))


def test_out_that_is_not_a_gradebook_is_refused_and_untouched(tmp_path):
    notes = tmp_path / "mine"
    notes.mkdir()
    (notes / "notes.txt").write_text("instructor's notes")
    for mode in gb.MODES:
        with pytest.raises(gb.GradebookError, match="not a gradebook written by kpca-course"):
            new_book(notes, mode)
    assert os.listdir(notes) == ["notes.txt"]
    link = tmp_path / "link"
    link.symlink_to(notes)
    for mode in gb.MODES:
        with pytest.raises(gb.GradebookError, match="symbolic link"):
            new_book(link, mode)
    (tmp_path / "file").write_text("x")
    with pytest.raises(gb.GradebookError, match="is a file"):
        new_book(tmp_path / "file")
    with pytest.raises(gb.GradebookError, match="nothing to resume"):
        new_book(tmp_path / "absent", "resume")
    assert os.listdir(notes) == ["notes.txt"] and sorted(os.listdir(tmp_path)) == [
        "file", "link", "mine"]


def test_existing_gradebook_needs_resume_or_merge_of_the_same_assignment(tmp_path):
    out = tmp_path / "out"
    with new_book(out) as b:
        b.start(tmp_path, "none")
        add(b, "alice")
    with pytest.raises(gb.GradebookError, match="--resume .* --merge"):
        new_book(out)
    with pytest.raises(gb.GradebookError, match="assignment '01_feature_maps', not '03_mercer'"):
        new_book(out, "resume", assignment="03_mercer")
    with new_book(out, "merge") as b:
        assert "alice" in b and b.root == str(tmp_path)
        b.start(tmp_path / "elsewhere", "none")
        assert b.root == str(tmp_path)  # the first batch's folder stays the reference
        add(b, "bob")
    assert list(assert_valid_gradebook(out)) == ["alice", "bob"]
    for damage, why in [("{", "not valid JSON"), ('{"submissions": [1]}', "assignment"),
                        ("[" * 50_000, "not valid JSON")]:
        (out / "grades.json").write_text(damage)
        with pytest.raises(gb.GradebookError, match=why):
            new_book(out, "resume")
    (out / MARKER_PATH).write_text('{"format": "something else"}')
    with pytest.raises(gb.GradebookError, match="not a kpca-course marker"):
        new_book(out, "merge")


MARKER_PATH = gb.MARKER


def test_planted_symlinks_are_never_followed(tmp_path):
    victim = tmp_path / "bashrc"
    victim.write_text("precious")
    out = tmp_path / "out"
    with new_book(out) as b:
        b.start(tmp_path, "none")
        add(b, "alice")
    (out / "feedback" / "bob.md").symlink_to(victim)
    with pytest.raises(gb.GradebookWriteError, match="feedback/bob.md is a symbolic link"):
        with new_book(out, "merge") as b:
            b.start(tmp_path, "none")
            add(b, "bob")
            add(b, "carol")  # later rows are still written
    assert victim.read_text() == "precious"
    assert list(assert_valid_gradebook(out)) == ["alice", "carol"]
    (out / "grades.csv").unlink()
    (out / "grades.csv").symlink_to(victim)
    with pytest.raises(gb.GradebookError, match="grades.csv is a symbolic link"):
        new_book(out, "merge")
    (out / "grades.csv").unlink()
    os.rename(out / "feedback", tmp_path / "fb")
    (out / "feedback").symlink_to(tmp_path / "fb")
    with pytest.raises(gb.GradebookError, match="feedback is a symbolic link"):
        new_book(out, "resume")
    assert victim.read_text() == "precious"


def test_full_disk_keeps_a_valid_gradebook_and_says_so(tmp_path, monkeypatch):
    out = tmp_path / "out"
    real = gb.atomic_write
    full = {"on": False}

    def write(dir_fd, name, data, **kw):
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(dir_fd, name, data, **kw)

    monkeypatch.setattr(gb, "atomic_write", write)
    with pytest.raises(gb.GradebookWriteError, match=r"No space left on device \[ENOSPC\].*--resume"):
        with new_book(out) as b:
            b.start(tmp_path, "none")
            add(b, "alice", status="graded", score=3.0)
            full["on"] = True
            add(b, "bob", status="graded", score=3.0)
            assert b.unsaved == ["bob"]
    assert list(assert_valid_gradebook(out)) == ["alice"]
    full["on"] = False  # space is back: a later row brings the earlier one with it
    with new_book(out, "resume") as b:
        b.start(tmp_path, "none")
        full["on"] = True
        add(b, "bob")
        full["on"] = False
        add(b, "carol")
    assert list(assert_valid_gradebook(out)) == ["alice", "bob", "carol"]


def test_csv_injection_and_lookalikes_in_a_batch(tmp_path, capsys):
    subs = tmp_path / "subs"
    names = ["=HYPERLINK(\"http:evil\")", "+cmd", "@SUM(1)", "-2", "alice", "аlice", "ALICE",
             "al\u200bice", "bob"]
    files = [garbage(subs / f"{n}.ipynb") for n in names]
    out = tmp_path / "out"
    assert grade(out, files) == 0
    text = (out / "grades.csv").read_text(encoding="utf-8")
    for line in text.splitlines()[1:]:
        assert line.lstrip('"')[0] not in "=+-@\t\r", line
    rows = assert_valid_gradebook(out)
    assert list(rows) == ["=HYPERLINK(\"http:evil\")", "+cmd", "@SUM(1)", "-2", "alice",
                          "аlice", "ALICE", "al<U+200B>ice", "bob"]
    for rid in ["alice", "аlice", "ALICE", "al<U+200B>ice"]:
        assert "checks this submission's name" in " ".join(rows[rid]["messages"])
        assert rows[rid]["lookalikes"]
    assert "lookalikes" not in rows["bob"]
    err = capsys.readouterr().err
    assert "look-alike names" in err and "'аlice'" in err and "'bob'" not in err


# --------------------------------------------------------------------------- graded end to end
def test_merge_keeps_rows_and_ids_keep_student_folders(tmp_path, capsys):
    subs = tmp_path / "subs"
    alice = save(subs / "alice" / "hw.ipynb", full_copy())
    bob = save(subs / "bob" / "hw.ipynb", copy.deepcopy(EXERCISE))
    out = tmp_path / "out"
    (out).mkdir()  # an empty folder is fine
    assert grade(out, [alice, bob]) == 0
    first = rows_csv(out)
    assert {k: v["score"] for k, v in first.items()} == {"alice/hw": "12", "bob/hw": "0"}
    assert book(out)["sandbox"] == "none"
    assert grade(out, [alice]) == EXIT_USAGE  # no silent replacement
    assert "--merge" in capsys.readouterr().err
    save(bob, full_copy())  # bob resubmits; carol is late (and broken)
    carol = garbage(subs / "carol" / "hw.ipynb")
    assert grade(out, [bob, carol], "--merge") == 0
    rows = assert_valid_gradebook(out)
    assert list(rows) == ["alice/hw", "bob/hw", "carol/hw"]
    assert (rows["alice/hw"]["score"], rows["bob/hw"]["score"]) == (12, 12)
    assert rows["carol/hw"]["status"] == "invalid"
    assert rows_csv(out)["alice/hw"] == first["alice/hw"]
    assert sorted(p.name for p in (out / "feedback").iterdir()) == [
        "alice%2Fhw.md", "bob%2Fhw.md", "carol%2Fhw.md"]


def test_hostile_files_become_rows_and_the_batch_goes_on(tmp_path):
    subs = tmp_path / "subs"
    (subs / "nested.ipynb").parent.mkdir(parents=True)
    (subs / "nested.ipynb").write_text("[" * 100_000 + "]" * 100_000)
    (subs / "latin1.ipynb").write_bytes(b"\xff\xfe{\x00")
    (subs / "folder.ipynb").mkdir()
    os.mkfifo(subs / "fifo.ipynb")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    (subs / "hostile.ipynb").write_text(json.dumps(hostile_notebook(victim)))
    save(subs / "full.ipynb", full_copy())
    names = ["nested", "latin1", "folder", "fifo", "hostile", "full"]
    files = [subs / f"{n}.ipynb" for n in names]
    out = tmp_path / "out"
    assert grade(out, files) == 0
    rows = assert_valid_gradebook(out)
    assert list(rows) == names
    assert [rows[n]["status"] for n in names[:4]] == ["invalid"] * 4
    assert (rows["hostile"]["status"], rows["hostile"]["score"]) == ("graded", 12)
    assert (rows["full"]["status"], rows["full"]["score"]) == ("graded", 12)
    assert (victim / "precious.txt").read_text() == "keep me"  # scratch clean-up followed no link


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def test_killed_grader_leaves_a_valid_gradebook_that_resume_completes(tmp_path):
    subs = tmp_path / "subs"
    gate = tmp_path / "gate"
    gated = full_copy()
    cell = next(c for c in gated.cells if c.id == "q1-p3-answer")
    cell.source = f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.02)\n" + cell.source
    files = [garbage(subs / "a_garbage.ipynb"), save(subs / "b_gated.ipynb", gated),
             save(subs / "c_full.ipynb", full_copy())]
    out = tmp_path / "out"
    # The killed grader cannot clean its scratch: keep it in a folder of ours (short path:
    # kernels put ZMQ ipc sockets there, whose paths are limited to ~100 bytes).
    scratch = Path(tempfile.mkdtemp(prefix="kpca-test-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch)}
    cmd = [sys.executable, "-m", "kpca_lib.course.cli", "grade", "--assignment", ASSIGNMENT,
           "--out", str(out), "--jobs", "2", "--timeout", "600", "--sandbox", "none",
           *map(str, files)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 600  # a safety net, not a measurement
        while True:  # wait for the garbage row and the full one; the gated one cannot finish
            try:
                if len((out / "grades.csv").read_text().splitlines()) >= 3:
                    break
            except FileNotFoundError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        tree = _descendants(proc.pid)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in tree:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        proc.wait()
        proc.stderr.close()
        shutil.rmtree(scratch, ignore_errors=True)
    assert proc.returncode == -signal.SIGKILL
    rows = assert_valid_gradebook(out)
    assert list(rows) == ["a_garbage", "c_full"] and rows["c_full"]["score"] == 12
    gate.write_text("open")
    assert grade(out, files, "--resume") == 0
    rows = assert_valid_gradebook(out)
    assert list(rows) == ["a_garbage", "b_gated", "c_full"]
    assert [rows[n]["score"] for n in rows] == [0, 12, 12]


@pytest.fixture
def tiny_disk():
    """A 1 MB tmpfs (needs root to mount), at a short path (kernels' ipc sockets go there)."""
    where = Path(tempfile.mkdtemp(prefix="kpca-tiny-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                          capture_output=True)
    if done.returncode != 0:
        where.rmdir()
        pytest.skip("mounting a tmpfs needs root; the full-disk paths are also covered by "
                    "test_full_disk_keeps_a_valid_gradebook_and_says_so")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)
        where.rmdir()


def fill(where: Path, leave: int = 0) -> None:
    """Fill the disk of ``where``, then free ``leave`` bytes."""
    fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    size = (where / "filler").stat().st_size
    os.truncate(where / "filler", max(0, size - leave))


@pytest.mark.parametrize("leave", [0, 300_000], ids=["full", "nearly_full"])
def test_full_scratch_disk_makes_rows_crashed_never_zero(tmp_path, tiny_disk, monkeypatch, capsys,
                                                         leave):
    fill(tiny_disk, leave)  # nearly full: the notebook is written, the kernel's files are not
    monkeypatch.setattr(tempfile, "tempdir", str(tiny_disk))
    files = [save(tmp_path / "full.ipynb", full_copy()), garbage(tmp_path / "junk.ipynb")]
    out = tmp_path / "out"
    assert grade(out, files) == EXIT_GRADER_FAILURE
    rows = assert_valid_gradebook(out)
    assert rows["full"]["status"] == "crashed" and "disk is full" in rows["full"]["grader_error"]
    assert rows["junk"]["status"] == "invalid"
    err = capsys.readouterr().err
    assert "GRADER FAILURE 'full'" in err and "disk is full" in err and "--merge" in err


def test_full_gradebook_disk_exits_nonzero_and_keeps_what_it_wrote(tmp_path, tiny_disk, capsys):
    out = tiny_disk / "out"
    assert grade(out, [garbage(tmp_path / "a.ipynb")]) == 0
    fill(tiny_disk)
    late = [garbage(tmp_path / "b.ipynb"), garbage(tmp_path / "c.ipynb")]
    assert grade(out, late, "--merge") == EXIT_INCOMPLETE
    assert "No space left on device" in capsys.readouterr().err
    assert list(assert_valid_gradebook(out)) == ["a"]
    (tiny_disk / "filler").unlink()
    assert grade(out, late, "--merge") == 0
    assert list(assert_valid_gradebook(out)) == ["a", "b", "c"]


def test_default_sandbox_is_bwrap_and_recorded(tmp_path):
    """Passes once the bwrap sandbox (kpca_lib.course.grading.run.sandbox) is merged."""
    out = tmp_path / "out"
    rc = main(["grade", "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "1",
               str(save(tmp_path / "full.ipynb", full_copy()))])
    assert rc == 0
    data = book(out)
    assert data["sandbox"] == "bwrap" and data["submissions"][0]["sandbox"] == "bwrap"
    assert data["submissions"][0]["score"] == 12


# --------------------------------------------------------------------------- summary
def synthetic(status: str, per: dict[str, float], failed: tuple[str, ...] = (), *,
              seconds: float | None = 1.0, grader_error: str = "") -> dict:
    """A row as grades.json holds it; two checks per question (``.a`` public, ``.b``
    hidden, each worth half), those named in ``failed`` failed."""
    checks = [] if status == "invalid" or grader_error else [
        {"id": f"{q}.{k}", "question": q, "description": f"{q} check {k}", "points": 1.5,
         "passed": f"{q}.{k}" not in failed, "message": "", "hidden": k == "b"}
        for q in Q for k in "ab"]
    r = {"submission": "x", "status": status, "score": float(sum(per.values())),
         "max_score": 12.0, "questions": {q: float(per.get(q, 0.0)) for q in Q},
         "checks": checks}
    if seconds is not None:
        r["run_seconds"] = seconds
    if grader_error:
        r["grader_error"] = grader_error
    return r


def test_summary_counts_scores_and_most_failed_checks():
    from kpca_lib.course.grading.record.summary import summarize

    full = {q: 3.0 for q in Q}
    rows = [
        synthetic("graded", full, seconds=2.0),
        synthetic("graded", {**full, Q[1]: 0.0}, (f"{Q[1]}.a", f"{Q[1]}.b"), seconds=4.0),
        synthetic("graded", {**full, Q[1]: 1.5, Q[3]: 1.5}, (f"{Q[1]}.b", f"{Q[3]}.a"),
                  seconds=3.0),
        synthetic("timeout", {**full, Q[0]: 0.0, Q[1]: 0.0},
                  (f"{Q[0]}.a", f"{Q[0]}.b", f"{Q[1]}.a", f"{Q[1]}.b"), seconds=40.0),
        synthetic("crashed", {}, seconds=1.0, grader_error="the grader's disk is full"),
        synthetic("invalid", {}, seconds=0.0),
        synthetic("invalid", {}, seconds=None),  # a row of an older gradebook: no run time
    ]
    s = summarize(rows, POINTS, assignment=ASSIGNMENT)
    assert s.n == 7 and s.max_score == 12
    assert s.counts == {"graded": 3, "timeout": 1, "crashed": 1, "invalid": 2}
    assert s.grader_failures == 1
    scores = [12, 9, 9, 6, 0, 0, 0]
    assert s.mean == pytest.approx(sum(scores) / 7) and s.median == 6
    assert [(b.label, b.count) for b in s.bins if b.count] == [("[0, 1)", 3), ("[6, 7)", 1),
                                                               ("[9, 10)", 2), ("12", 1)]
    assert sum(b.count for b in s.bins) == s.n
    stats = {q.id: (q.points, q.mean, q.median) for q in s.questions}
    assert [q.id for q in s.questions] == Q
    assert stats[Q[0]] == (3, pytest.approx(9 / 7), 0)
    assert stats[Q[1]] == (3, pytest.approx(4.5 / 7), 0)
    assert stats[Q[2]] == (3, pytest.approx(12 / 7), 3)
    # Most failed first; ties in the assignment's order, then the checks' order.
    assert [(c.id, c.failed, c.rows) for c in s.checks] == [
        (f"{Q[1]}.b", 3, 4), (f"{Q[1]}.a", 2, 4), (f"{Q[0]}.a", 1, 4), (f"{Q[0]}.b", 1, 4),
        (f"{Q[3]}.a", 1, 4)]
    top = s.checks[0]
    assert (top.question, top.description, top.hidden, top.share) == (
        Q[1], f"{Q[1]} check b", True, 0.75)
    assert s.checks[1].hidden is False and s.checked == 4
    assert (s.timed, s.ran, s.total_seconds, s.median_seconds) == (6, 5, 50.0, 3.0)


def test_summary_markdown_and_figure():
    from kpca_lib.course.grading.record.summary import summarize, summary_markdown, summary_png

    full = {q: 3.0 for q in Q}
    rows = [synthetic("graded", full), synthetic("graded", {**full, Q[2]: 0.0},
                                                 (f"{Q[2]}.a", f"{Q[2]}.b")),
            synthetic("invalid", {}, seconds=None)]
    s = summarize(rows, POINTS, assignment=ASSIGNMENT)
    text = summary_markdown(s)
    assert text.startswith(f"# Summary: {ASSIGNMENT}\n")
    assert "**3 submissions**: 2 graded, 0 timeout, 0 crashed, 1 invalid." in text
    assert "Mean 7, median 9 over all 3 submissions" in text
    lines = text.splitlines()
    histogram = [line for line in lines if line.startswith(("| [", "| 12 "))]
    assert len(histogram) == 13 and sum(int(h.split("|")[2]) for h in histogram) == 3
    assert [h.split("|")[2].strip() for h in histogram][::9] == ["1", "1"]  # [0, 1) and [9, 10)
    assert histogram[-1].split("|")[2].strip() == "1"  # full marks
    row = next(line for line in lines if line.startswith(f"| {Q[2]} "))
    assert [c.strip() for c in row.strip("|").split("|")] == [Q[2], "3", "1", "0", "33 %"]
    check = next(line for line in lines if line.startswith(f"| {Q[2]}.a "))
    assert [c.strip() for c in check.strip("|").split("|")] == [
        f"{Q[2]}.a", Q[2], f"{Q[2]} check a", "public", "1", "50 %"]
    assert "1 row(s) have no run time (graded by an older kpca-course)." in text
    assert len({len(line) for line in lines if line.startswith(f"| {Q[0]} ")
                or line.startswith("| question ")}) == 1  # aligned as plain text
    compact = summary_markdown(s, compact=True)
    assert "Written by" not in compact and "Mean 7, median 9" in compact
    png = summary_png(s)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_summary_of_an_empty_or_all_invalid_batch():
    from kpca_lib.course.grading.record.summary import (
        score_bins,
        summarize,
        summary_markdown,
        summary_png,
    )

    empty = summarize([], POINTS, assignment=ASSIGNMENT)
    assert (empty.n, empty.mean, empty.median, empty.checks, empty.timed) == (0, None, None, [], 0)
    assert sum(b.count for b in empty.bins) == 0 and len(empty.bins) == 13
    assert all(q.mean is None for q in empty.questions)
    text = summary_markdown(empty)
    assert "No submission yet." in text and "No checks ran." in text
    assert "No run time recorded." in text
    assert summary_png(empty).startswith(b"\x89PNG")
    invalid = summarize([synthetic("invalid", {}, seconds=0.0) for _ in range(4)], POINTS)
    assert invalid.counts == {"graded": 0, "timeout": 0, "crashed": 0, "invalid": 4}
    assert (invalid.mean, invalid.median, invalid.checks, invalid.checked) == (0, 0, [], 0)
    assert [b.count for b in invalid.bins] == [4] + [0] * 12
    assert (invalid.timed, invalid.ran, invalid.median_seconds) == (4, 0, None)
    text = summary_markdown(invalid)
    assert "No checks ran." in text and "median - per submission that ran (0 of 4" in text
    assert summary_png(invalid).startswith(b"\x89PNG")
    # Ten bins above 20 points or for fractional maxima, the last one closed.
    for top in (25.0, 7.5):
        edges = score_bins(top)
        assert len(edges) == 10 and edges[0][0] == 0 and edges[-1][1] == top
        rows = [{"status": "graded", "score": x, "questions": {}} for x in (0, top / 2, top)]
        s = summarize(rows, {"q": top})
        assert sum(b.count for b in s.bins) == 3 and s.bins[-1].count == 1
        assert s.bins[-1].label.endswith("]")


def test_rows_of_an_older_gradebook_without_run_time_are_kept(tmp_path):
    """A gradebook written before run times (no run_seconds) is resumed and merged into;
    its rows keep an empty run_seconds cell and the summary says so."""
    out = tmp_path / "out"
    with new_book(out) as b:
        b.start(tmp_path, "none")
        add(b, "alice", status="graded", score=3.0)
        add(b, "bob")
    assert "run_seconds" not in book(out)["submissions"][0]
    late = garbage(tmp_path / "carol.ipynb")
    assert grade(out, [late], "--merge") == 0
    rows = rows_csv(out)
    assert list(rows) == ["alice", "bob", "carol"]
    assert [rows[r]["run_seconds"] for r in rows] == ["", "", "0.00"]
    assert book(out)["submissions"][2]["run_seconds"] == 0
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "**3 submissions**: 1 graded, 0 timeout, 0 crashed, 2 invalid." in text
    assert "2 row(s) have no run time" in text
    assert (out / "summary.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    data = book(out)
    data["submissions"][0]["run_seconds"] = "fast"
    (out / "grades.json").write_text(json.dumps(data))
    with pytest.raises(gb.GradebookError, match="malformed run time"):
        new_book(out, "resume")


def test_summary_files_follow_the_gradebook_guard(tmp_path, capsys):
    """summary.md and summary.png are the gradebook's own: replaced atomically; a symbolic
    link planted in their place stops --merge before grading and is never followed."""
    out = tmp_path / "out"
    assert grade(out, [garbage(tmp_path / "a.ipynb")]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        gb.MARKER, "feedback", "grades.csv", "grades.json", gb.SEAL, "students", "summary.md",
        "summary.png"]
    first = (out / "summary.md").read_text(encoding="utf-8")
    assert "**1 submission**: 0 graded, 0 timeout, 0 crashed, 1 invalid." in first
    out_text = capsys.readouterr().out
    assert "# Summary: 01_feature_maps" in out_text and f"summary: {out}/summary.md" in out_text
    assert grade(out, [garbage(tmp_path / "b.ipynb")], "--merge") == 0
    assert "**2 submissions**" in (out / "summary.md").read_text(encoding="utf-8")
    victim = tmp_path / "notes.md"
    victim.write_text("precious")
    for name in gb.GENERATED:
        (out / name).unlink()
        (out / name).symlink_to(victim)
        with pytest.raises(gb.GradebookError, match=f"{name} is a symbolic link"):
            new_book(out, "merge")
        assert grade(out, [garbage(tmp_path / "c.ipynb")], "--merge") == EXIT_USAGE
        assert victim.read_text() == "precious"
        (out / name).unlink()
    assert list(assert_valid_gradebook(out)) == ["a", "b"]
    with new_book(out, "merge") as b:
        b.start(tmp_path, "none")
        with pytest.raises(ValueError, match="not a file the gradebook generates"):
            b.write_generated({"grades.csv": b"forged"})
        (out / "summary.md").symlink_to(victim)  # planted while grading: refused, reported
        errors = b.write_generated({"summary.md": b"new", "summary.png": b"png"})
    assert len(errors) == 1 and "summary.md" in errors[0] and "symbolic link" in errors[0]
    assert victim.read_text() == "precious" and (out / "summary.png").read_bytes() == b"png"
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]


def test_hand_back_trees_follow_the_gradebook_guard(tmp_path):
    """students/, archives/ and export/ are the gradebook's own: a symbolic link planted in
    place of a tree or of a student's folder is refused and reported, never followed; a file
    whose bytes are unchanged is not rewritten; names are one visible path part."""
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.html").write_text("precious")
    with new_book(out) as b:
        b.start(tmp_path, "none")
        assert b.write_tree(gb.STUDENTS, {("alice", "01.html"): b"<p>1</p>"}) == []
        first = (out / "students" / "alice" / "01.html").stat()
        assert b.write_tree(gb.STUDENTS, {("alice", "01.html"): b"<p>1</p>"}) == []
        assert (out / "students" / "alice" / "01.html").stat().st_mtime_ns == first.st_mtime_ns
        (out / "students" / "bob").symlink_to(victim)
        errors = b.write_tree(gb.STUDENTS, {("bob", "keep.html"): b"forged",
                                            ("alice", "01.html"): b"<p>2</p>"})
        assert len(errors) == 1 and "students/bob" in errors[0] and "symbolic link" in errors[0]
        assert (out / "students" / "alice" / "01.html").read_bytes() == b"<p>2</p>"
        (out / gb.EXPORT).symlink_to(victim)
        errors = b.write_tree(gb.EXPORT, {("", "keep.html"): b"forged"})
        assert len(errors) == 1 and "symbolic link" in errors[0]
        for bad in [("..", "x"), ("a/b", "x"), ("a", ".hidden"), ("a", ""), ("a", "x/y")]:
            with pytest.raises(ValueError, match="not a name"):
                b.write_tree(gb.STUDENTS, {bad: b"x"})
        with pytest.raises(ValueError, match="not a tree"):
            b.write_tree("feedback", {("a", "b"): b"x"})
    assert (victim / "keep.html").read_text() == "precious"
    assert sorted(p.name for p in victim.iterdir()) == ["keep.html"]


def test_an_edited_grades_json_is_named_when_read_back(tmp_path, capsys):
    """grades.json is sealed under the grading secret: an edit (or another secret) is named
    by every command that reads it back, never used silently."""
    out = tmp_path / "out"
    assert grade(out, [garbage(tmp_path / "a.ipynb")]) == 0
    capsys.readouterr()
    assert grade(out, [garbage(tmp_path / "b.ipynb")], "--merge") == 0
    assert "changed outside kpca-course" not in capsys.readouterr().err
    book = json.loads((out / "grades.json").read_text())
    book["submissions"][0]["messages"].append("edited by hand")
    (out / "grades.json").write_text(json.dumps(book))
    assert grade(out, [garbage(tmp_path / "c.ipynb")], "--merge") == 0
    err = capsys.readouterr().err
    assert "grades.json was changed outside kpca-course" in err and "does not match" in err
    (out / gb.SEAL).unlink()
    with new_book(out, "merge") as opened:
        assert any("signature is missing" in w for w in opened.warnings)
