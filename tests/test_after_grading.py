"""After grading, end to end on a real batch: feedback pages, a roster and the LMS exports,
overrides and by-hand questions that last, late work, one question regraded, and problems
shown where the instructor looks. Bad inputs stop with a clear error and change nothing.

One course, graded in the sandbox through the command line, as an instructor would:
alice (full marks), bob (one slip, two days' extension), carol (a truncated file), dave (no
roster entry, late; resubmits from another folder), erin (on the roster, never handed in).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from test_grading import ASSIGNMENT, Q, cell, sandbox_or_skip, student_copy

from kpca_lib.course.cli import main

DEADLINE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone(timedelta(hours=1)))
POLICY = """\
roster = "../roster.csv"

[questions]
by_hand = ["q2_feature_count"]

[late]
deadline = 2026-12-01T23:59:00+01:00
submitted = "file"  # the test's own copies: it set their times
penalty_per_day = 10
[late.extensions]
bob = "2d"
"""
ADJUSTMENTS = """\
row,question,points,score,reason
alice/01_feature_maps,q2_feature_count,,3,"clear argument, with the formula"
bob/01_feature_maps,q1_phi_p3,+1,,dim_3 off by one: the map itself is right
"""
ROSTER = """\
Student,Name,Email,LMS ID,SIS User ID,Section
alice,"Liddell, Alice",alice@uni.example,1001,A-1,Sec 1
bob,Bob =HYPERLINK(1),bob@uni.example,1002,B-2,Sec 1
carol,Carol Ann,carol@uni.example,1003,C-3,Sec 2
erin,Erin,erin@uni.example,1005,E-5,Sec 2
"""


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret")


def write(path: Path, nb, when: datetime) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    os.utime(path, (when.timestamp(), when.timestamp()))
    return path


def course(tmp: Path) -> tuple[Path, Path, list[Path]]:
    subs = tmp / "submissions"
    slip = copy.deepcopy(student_copy())
    c = cell(slip, "q1-p3-answer")
    c.source = c.source.replace("dim_3 = 10", "dim_3 = 9")
    files = [
        write(subs / "alice" / f"{ASSIGNMENT}.ipynb", student_copy(), DEADLINE - timedelta(hours=3)),
        write(subs / "bob" / f"{ASSIGNMENT}.ipynb", slip, DEADLINE + timedelta(days=1)),
        write(subs / "dave" / f"{ASSIGNMENT}.ipynb", student_copy(), DEADLINE + timedelta(hours=30)),
    ]
    carol = subs / "carol" / f"{ASSIGNMENT}.ipynb"
    carol.parent.mkdir(parents=True)
    carol.write_text('{"cells": [')
    os.utime(carol, ((DEADLINE - timedelta(hours=1)).timestamp(),) * 2)
    files.insert(2, carol)
    out = tmp / "grades" / "01"
    out.mkdir(parents=True)
    (out / "policy.toml").write_text(POLICY)
    (out / "adjustments.csv").write_text(ADJUSTMENTS)
    (tmp / "grades" / "roster.csv").write_text(ROSTER)
    return subs, out, files


def table(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return {r["submission"]: r for r in csv.DictReader(fh)}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def cli(*args: str) -> int:
    return main([*args])


def grade(out: Path, *args: str) -> int:
    return cli("grade", "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "2", *args)


def test_after_grading_end_to_end(tmp_path, capsys):
    sandbox_or_skip()
    subs, out, files = course(tmp_path)

    # 1. Grade into a folder that holds only the instructor's policy and adjustments.
    assert grade(out, *map(str, files)) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert ("final grades: 2 adjustment(s) of adjustments.csv applied, 1 late, 0 with no "
            "submission time, 3 waiting for a by-hand grade") in captured.out
    carol_line = next(line for line in err.splitlines() if "carol/" in line and "] " in line)
    assert "invalid" in carol_line and "why: the file is not valid JSON" in carol_line
    rows = table(out / "grades.csv")
    assert list(rows) == [f"{s}/{ASSIGNMENT}" for s in ("alice", "bob", "carol", "dave")]
    alice, bob, carol, dave = rows.values()
    # alice: 9 automatic points on q1 + q2 by hand (3 from adjustments.csv); auto_score 12.
    assert (alice["score"], alice["q2_feature_count"], alice["auto_score"]) == ("12", "3", "12")
    assert alice["late"] == "no" and alice["adjustments"] == "q2_feature_count = 3"
    # bob: the slip costs 1 point, given back by the adjustment; q2 waits for a hand grade;
    # a day late, but with a two days' extension.
    assert (bob["q1_phi_p3"], bob["auto_score"], bob["score"]) == ("3", "11", "9")
    assert bob["late"] == "no" and "q2_feature_count by hand: not graded yet" in bob["adjustments"]
    assert carol["status"] == "invalid" and "not valid JSON" in carol["message"]
    assert carol["late"] == "no" and carol["score"] == "0"
    # dave: 30 hours late = 2 started days = 20 % of 9 points.
    assert (dave["late"], dave["penalty"], dave["score"]) == ("yes", "1.8", "7.2")
    summary = (out / "summary.md").read_text()
    assert "## Problems" in summary and "- carol/01_feature_maps (invalid): the file is not valid JSON" in summary
    assert "Late: 1 submission(s), 1.8 point(s) deducted" in summary
    data = json.loads((out / "grades.json").read_text())
    auto = {s["submission"]: s for s in data["submissions"]}
    assert auto["alice/01_feature_maps"]["questions"]["q2_feature_count"] == 3  # automatic, kept
    assert data["final"]["dave/01_feature_maps"]["late"]["days"] == 2
    page = (out / "students" / "alice" / f"{ASSIGNMENT}.html").read_text()
    assert "clear argument, with the formula" in page and "<script" not in page
    assert (out / "students" / "bob" / f"{ASSIGNMENT}.md").exists()
    index = json.loads((out / "students" / "index.json").read_text())
    assert index[f"carol/{ASSIGNMENT}"] == {"folder": "carol", "html": f"{ASSIGNMENT}.html",
                                             "md": f"{ASSIGNMENT}.md"}
    assert (out / "policy.toml").read_text() == POLICY  # the instructor's files, untouched
    assert (out / "adjustments.csv").read_text() == ADJUSTMENTS

    # 2. Late work from anywhere, into dave's row; everything else and the overrides stay.
    resubmitted = write(tmp_path / "inbox" / "dave-late.ipynb", student_copy(),
                        DEADLINE + timedelta(hours=50))
    assert grade(out, "--merge", "--row-id", f"dave/{ASSIGNMENT}", str(resubmitted)) == 0
    after = table(out / "grades.csv")
    assert list(after) == list(rows)
    assert (after["dave/01_feature_maps"]["late"], after["dave/01_feature_maps"]["score"]) == (
        "yes", "6.3")  # 50 h: 3 started days, 30 % of 9
    assert after["alice/01_feature_maps"]["score"] == "12"
    assert after["bob/01_feature_maps"] == bob
    assert json.loads((out / "grades.json").read_text())["submissions"][3]["file"] == str(resubmitted)

    # 3. Regrade one question: only its scores and checks are replaced. Forge two values to
    # see which survive: bob's q1_phi_p4 (another question) stays, alice's q1_phi_p3 is
    # computed again.
    book = json.loads((out / "grades.json").read_text())
    for s in book["submissions"]:
        if s["submission"] == "bob/01_feature_maps":
            s["questions"]["q1_phi_p4"] = 1.0
        if s["submission"] == "alice/01_feature_maps":
            s["questions"]["q1_phi_p3"] = 0.0
    (out / "grades.json").write_text(json.dumps(book))
    before = {s["submission"]: s for s in book["submissions"]}
    with open(resubmitted, "a") as fh:  # dave's file is not the one graded any more
        fh.write("\n")
    assert grade(out, "--regrade", "q1_phi_p3") == 0
    captured = capsys.readouterr()
    assert "regrading q1_phi_p3 in 3 submissions" in captured.err
    assert "not regraded 'carol/01_feature_maps'" in captured.err
    assert "not regraded 'dave/01_feature_maps': kept as it was: its file changed" in captured.err
    data = json.loads((out / "grades.json").read_text())
    now = {s["submission"]: s for s in data["submissions"]}
    assert now["bob/01_feature_maps"]["questions"]["q1_phi_p4"] == 1.0
    assert now["alice/01_feature_maps"]["questions"]["q1_phi_p3"] == 3.0
    assert now["bob/01_feature_maps"]["questions"]["q1_phi_p3"] == 2.0
    for rid in ("alice/01_feature_maps", "bob/01_feature_maps"):
        others = [c for c in before[rid]["checks"] if c["question"] != "q1_phi_p3"]
        assert [c for c in now[rid]["checks"] if c["question"] != "q1_phi_p3"] == others
        assert now[rid]["regraded"][-1]["question"] == "q1_phi_p3"
    assert "Regraded on " in (out / "students" / "alice" / f"{ASSIGNMENT}.md").read_text()
    for kept in ("carol/01_feature_maps", "dave/01_feature_maps"):
        assert now[kept] == before[kept]
    regraded = table(out / "grades.csv")
    assert regraded["bob/01_feature_maps"]["q1_phi_p3"] == "3"  # the override survives
    assert regraded["alice/01_feature_maps"]["q2_feature_count"] == "3"  # and the by-hand grade

    # 4. Export: a plain CSV with ids, Canvas and Moodle; the missing and extra students listed.
    # dave has no roster entry and erin no submission: written, listed, and exit 4 ...
    assert cli("export", "--out", str(out), "--format", "all", "--archives",
               "--canvas-column", "Homework 1 (4242)") == 4
    assert "exit 4" in capsys.readouterr().err
    # ... unless that is intended
    assert cli("export", "--out", str(out), "--format", "all", "--archives",
               "--canvas-column", "Homework 1 (4242)", "--allow-missing") == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("wrote ")  # what was written comes first
    assert "1 submission(s) with no roster entry" in captured.err and "dave/" in captured.err
    assert "1 student(s) of the roster with no submission" in captured.err and "'erin'" in captured.err
    plain = list(csv.DictReader(io.StringIO((out / "export" / "grades-with-ids.csv").read_text())))
    by_student = {r["student"]: r for r in plain}
    assert by_student["alice"]["email"] == "alice@uni.example"
    assert by_student["erin"]["status"] == "missing"
    canvas = list(csv.reader(io.StringIO((out / "export" / "canvas-import.csv").read_text())))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[0][5] == "Homework 1 (4242)"
    ids = {r[1]: r for r in canvas[1:] if r[1]}
    assert ids["1001"][5] == "12" and "1005" not in ids and "'=" not in "".join(ids["1002"][:1])
    assert not any(c.startswith("=") for r in canvas for c in r)
    moodle = list(csv.DictReader(io.StringIO((out / "export" / "moodle-import.csv").read_text())))
    assert {r["Email address"] for r in moodle} == {"alice@uni.example", "bob@uni.example",
                                                    "carol@uni.example"}
    with zipfile.ZipFile(out / "archives" / "alice.zip") as z:
        assert sorted(z.namelist()) == [f"alice/{ASSIGNMENT}.html", f"alice/{ASSIGNMENT}.md"]


def test_bad_inputs_change_nothing(tmp_path, capsys):
    sandbox_or_skip()
    subs, out, files = course(tmp_path)
    assert grade(out, str(files[0])) == 2  # adjustments.csv names bob's row: not in the batch
    assert "there is no row 'bob/01_feature_maps'" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["adjustments.csv", "policy.toml"]
    (out / "adjustments.csv").write_text(ADJUSTMENTS.splitlines()[0] + "\n")
    assert grade(out, str(files[0])) == 0  # a lone file keeps its student's folder name
    assert list(table(out / "grades.csv")) == [f"alice/{ASSIGNMENT}"]
    capsys.readouterr()
    good = snapshot(out)

    def refused(*args: str, needle: str) -> None:
        rc = cli(*args)
        err = capsys.readouterr().err
        assert rc == 2, err
        assert needle in err
        assert snapshot(out) == good

    # A roster with a duplicate id.
    roster = tmp_path / "dup.csv"
    roster.write_text("student,email,lms_id\nalice,a@x.org,1\nbob,A@X.org,2\n")
    refused("export", "--out", str(out), "--roster", str(roster), "--format", "canvas",
            needle="email 'A@X.org' is on line 2 and line 3")
    # An adjustment for a row or a question that does not exist.
    (out / "adjustments.csv").write_text("row,question,points,score,reason\n"
                                         "alice/01_feature_map,q2_feature_count,,3,x\n"
                                         "alice/01_feature_maps,q9,,3,x\n")
    good = snapshot(out)
    refused("export", "--out", str(out), needle="did you mean 'alice/01_feature_maps'")
    refused("grade", "--assignment", ASSIGNMENT, "--out", str(out), "--merge", str(files[1]),
            needle="'q9' is not a question")
    (out / "adjustments.csv").write_text(ADJUSTMENTS.splitlines()[0] + "\n")
    # A deadline that does not parse.
    (out / "policy.toml").write_text(POLICY.replace("2026-12-01T23:59:00+01:00", '"Friday 5pm"'))
    good = snapshot(out)
    refused("export", "--out", str(out), needle="'Friday 5pm' is not a time")
    refused("grade", "--assignment", ASSIGNMENT, "--out", str(out), "--merge", str(files[1]),
            needle="'Friday 5pm' is not a time")
    # --row-id needs --merge and one file; an unknown question cannot be regraded.
    (out / "policy.toml").write_text(POLICY)
    good = snapshot(out)
    refused("grade", "--assignment", ASSIGNMENT, "--out", str(out), "--merge", "--row-id",
            "x/../y", str(files[1]), needle="is not a row id")
    refused("grade", "--assignment", ASSIGNMENT, "--out", str(out), "--regrade", "q9",
            needle="'q9' is not a question")
    refused("grade", "--assignment", ASSIGNMENT, "--out", str(out), "--regrade", Q[0],
            str(files[1]), needle="not in the gradebook")
