"""From the LMS and back: a download collected, graded and exported, as the LMSs name things.

The downloads are built here from each LMS's own naming, as its code writes it:

* Canvas, canvas-lms ``app/models/content_zipper.rb`` (``get_filename``,
  ``add_upload_submission``, ``sanitize_file_name``): one flat zip of
  ``<sortable name, lowercased, non-word characters removed>[_LATE]_<user id>_<attachment
  id>_<file name>``, then lowercased as a whole (so ``LATE`` reads ``late``); the roster is
  Canvas's gradebook export (``Student, ID, SIS User ID, SIS Login ID, Section``, a
  ``Points Possible`` row, the Test Student);
* Moodle, ``mod/assign/locallib.php`` (``download_submissions``) and the tests of
  ``mod/assign/feedback/file/importziplib.php`` (``StudentName_StudentID_PluginType_Plugin_
  FilePathAndName``): a folder ``<Full name>_<participant number>_assignsubmission_file/``
  per participant; the roster is the grading worksheet (``Identifier`` = ``Participant
  <number>``, ``Last modified (submission)`` in Moodle's ``strftimedatetime``).

The students' own file times inside the zips are set to lie (a late file dated before the
deadline); the grades must follow the LMS, never those times.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from test_grading import ASSIGNMENT, cell, student_copy

from kpca_lib.course.cli import main
from kpca_lib.course.grading.record.collect import (
    CollectOptions,
    collect,
    collected_entry,
    load_collected,
)
from kpca_lib.course.grading.record.lms_names import CANVAS, read_name
from kpca_lib.course.grading.record.policy import parse_policy, submission_time
from kpca_lib.course.grading.record.roster import RosterError, parse_roster

DEADLINE = "2026-12-01T23:59:00+01:00"
POLICY = f"""\
[late]
deadline = {DEADLINE}
penalty_per_day = 10
"""
LIE = (2026, 11, 20, 12, 0, 0)  # every zip entry claims to be from well before the deadline


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret")


def canvas_name(sortable: str, user_id: int, attachment_id: int, filename: str,
                late: bool = False) -> str:
    """content_zipper.rb: [sortable name, 'LATE', user id].compact.join('_'), every non-word
    character removed and lowercased, then _<attachment id>_<display name>."""
    parts = [sortable, "LATE" if late else None, str(user_id)]
    stem = re.sub(r"[^\w]", "", "_".join(p for p in parts if p)).lower()
    return f"{stem}_{attachment_id}_{filename}"


def moodle_name(fullname: str, participant: int, filename: str) -> str:
    return f"{fullname}_{participant}_assignsubmission_file/{filename}"


def notebook_bytes(nb) -> bytes:
    return nbformat.writes(nb).encode("utf-8")


def slip():
    nb = copy.deepcopy(student_copy())
    c = cell(nb, "q1-p3-answer")
    c.source = c.source.replace("dim_3 = 10", "dim_3 = 9")
    return nb


def make_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=LIE), data)
    return path


CANVAS_ROSTER = """\
Student,ID,SIS User ID,SIS Login ID,Section,Homework 1 (4242),Current Score,Final Score
    Points Possible,,,,,12,(read only),(read only)
"Liddell, Alice",1001,A-1,aliddell,Sec 1,,,
"Müller-Lüdenscheidt, Jörg",1002,B-2,jmueller,Sec 1,,,
"Ann, Carol",1003,C-3,cann,Sec 2,,,
"Ann, Carol",1004,D-4,cann2,Sec 2,,,
"Student, Test",1099,,,Sec 1,,,
"""


def canvas_download(tmp: Path) -> Path:
    good, bad = notebook_bytes(student_copy()), notebook_bytes(slip())
    files = {
        canvas_name("Liddell, Alice", 1001, 50001, f"{ASSIGNMENT}.ipynb"): good,
        # late by Canvas's mark; its file claims an old time
        canvas_name("Müller-Lüdenscheidt, Jörg", 1002, 50002, f"{ASSIGNMENT}.ipynb", True): bad,
        # two Carol Anns (a shared display name): each by her own id; the first uploaded twice
        canvas_name("Ann, Carol", 1003, 50003, f"{ASSIGNMENT}.ipynb"): b'{"cells": [',
        canvas_name("Ann, Carol", 1003, 50010, f"{ASSIGNMENT}-1.ipynb"): good,
        canvas_name("Ann, Carol", 1004, 50004, "answers.py"): b"print(1)\n",
        canvas_name("Ann, Carol", 1004, 50005, "homework.zip"): b"PK\x05\x06" + b"\0" * 18,
        canvas_name("Dropped, Dan", 1077, 50006, f"{ASSIGNMENT}.ipynb"): good,
    }
    return make_zip(tmp / "hw1-01_feature_maps submissions.zip", files)


def cli(*args: str) -> int:
    return main([*args])


def collect_grade_export(tmp: Path, download: Path, roster: Path, lms_args: list[str],
                         fmt: str) -> tuple[Path, Path]:
    subs, out = tmp / "submissions", tmp / "grades" / ASSIGNMENT
    assert cli("collect", "--assignment", ASSIGNMENT, "--out", str(subs), "--roster", str(roster),
               *lms_args, str(download)) in (0, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "policy.toml").write_text(f'roster = "{roster}"\n' + POLICY)
    files = sorted(subs.glob(f"*/{ASSIGNMENT}.ipynb"))
    assert cli("grade", "--assignment", ASSIGNMENT, "--out", str(out), "--sandbox", "none",
               "--jobs", "2", *map(str, files)) == 0
    assert cli("export", "--out", str(out), "--format", fmt, "--allow-missing",
               "--canvas-column", "Homework 1 (4242)") == 0
    return subs, out


def test_canvas_download_to_canvas_import(tmp_path, capsys):
    roster = tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    download = canvas_download(tmp_path)
    subs, out = collect_grade_export(tmp_path, download, roster, [], "canvas")
    said = capsys.readouterr()
    # the collect report: each left-over named
    assert "(named as canvas names them)" in said.out
    assert "answers.py" in said.err and "homework.zip" in said.err and "1077" in said.err
    assert "other file(s) of cann (the newest was taken)" in said.err
    assert sorted(p.parent.name for p in subs.glob(f"*/{ASSIGNMENT}.ipynb")) == [
        "aliddell", "cann", "jmueller"]
    manifest = json.loads((subs / "collected.json").read_text())
    taken = manifest["entries"][f"cann/{ASSIGNMENT}.ipynb"]
    assert taken["upload_id"] == 50010 and taken["lms_late"] is False
    assert manifest["entries"][f"jmueller/{ASSIGNMENT}.ipynb"]["lms_late"] is True
    rows = {r["submission"]: r for r in json.loads((out / "grades.json").read_text())["submissions"]}
    assert rows[f"jmueller/{ASSIGNMENT}"]["collected"]["lms_late"] is True
    with open(out / "export" / "canvas-import.csv", newline="", encoding="utf-8") as fh:
        lines = list(csv.reader(fh))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Homework 1 (4242)"]
    by_id = {r[1]: r for r in lines[2:]}
    assert set(by_id) == {"1001", "1002", "1003"}  # everyone who handed in, by Canvas's ID
    assert by_id["1001"][5] == "12"
    # Jörg's slip costs 1 of 12; late by Canvas's mark: 1 started day, 10 % of 11
    assert by_id["1002"][5] == "9.9" and by_id["1002"][0] == "Müller-Lüdenscheidt, Jörg"
    assert by_id["1003"][5] == "12"  # the newer upload was graded
    grades = {r["submission"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    assert grades[f"jmueller/{ASSIGNMENT}"]["late"] == "yes"
    assert grades[f"aliddell/{ASSIGNMENT}"]["late"] == "no"


MOODLE_WORKSHEET = """\
Identifier,"Full name","Email address",Status,Grade,"Maximum Grade","Grade can be changed","Last modified (submission)","Last modified (grade)","Feedback comments"
"Participant 4021","Alice Liddell",alice@uni.example,"Submitted for grading",,12.00,Yes,"Tuesday, 1 December 2026, 10:15 PM",-,
"Participant 4022","Bob Stone",bob@uni.example,"Submitted for grading",,12.00,Yes,"Thursday, 3 December 2026, 9:00 AM",-,
"Participant 4023","Alice Liddell",alice2@uni.example,"Submitted for grading",,12.00,Yes,"Monday, 30 November 2026, 8:00 AM",-,
"Participant 4024","Erin Gray",erin@uni.example,"No submission",,12.00,Yes,-,-,
"""


def test_moodle_download_to_moodle_import(tmp_path, capsys):
    roster = tmp_path / "worksheet.csv"
    roster.write_text(MOODLE_WORKSHEET, encoding="utf-8")
    good = notebook_bytes(student_copy())
    download = make_zip(tmp_path / "COURSE-Homework 1-4242.zip", {
        moodle_name("Alice Liddell", 4021, f"{ASSIGNMENT}.ipynb"): good,
        moodle_name("Bob Stone", 4022, f"{ASSIGNMENT}.ipynb"): good,
        moodle_name("Alice Liddell", 4023, f"{ASSIGNMENT}.ipynb"): notebook_bytes(slip()),
        "Bob Stone_4022_assignsubmission_onlinetext_onlinetext.html": b"<p>hi</p>",
    })
    out = tmp_path / "grades" / ASSIGNMENT
    out.mkdir(parents=True)
    (out / "adjustments.csv").write_text(
        "row,question,points,score,reason\n"
        f'bob@uni.example/{ASSIGNMENT},,+0,,"<script>alert(1)</script> & <b>bold</b>"\n')
    subs, out = collect_grade_export(tmp_path, download, roster,
                                     ["--timezone", "Europe/Berlin"], "moodle")
    with open(out / "export" / "moodle-import.csv", newline="", encoding="utf-8") as fh:
        rows = {r["Email address"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"alice@uni.example", "bob@uni.example", "alice2@uni.example"}
    grade, feedback = "Assignment: 01_feature_maps (Real)", "Assignment: 01_feature_maps (Feedback)"
    assert rows["alice@uni.example"][grade] == "12"  # 22:15 Berlin: before 23:59
    assert rows["alice2@uni.example"][grade] == "11"  # the slip, on time
    # Thursday 09:00 Berlin: 1 day 9 hours late, 2 started days: 20 % off
    assert rows["bob@uni.example"][grade] == "9.6"
    text = rows["bob@uni.example"][feedback]
    assert "<" not in text and ">" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in text
    assert "late 2 days" in text
    entry = json.loads((subs / "collected.json").read_text())["entries"]
    assert entry[f"bob@uni.example/{ASSIGNMENT}.ipynb"]["lms_time"] == "2026-12-03T09:00:00+01:00"


# --------------------------------------------------------------------------- bad inputs
def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_zip_with_a_path_outside_it_writes_nothing_outside(tmp_path, capsys):
    download = make_zip(tmp_path / "dl.zip", {
        "../../evil.ipynb": b"{}", "/abs/evil.ipynb": b"{}",
        "a_1001_50001_01_feature_maps.ipynb": notebook_bytes(student_copy()),
    })
    roster = tmp_path / "r.csv"
    roster.write_text("Student,ID,SIS Login ID,Section\n\"A, B\",1001,ab,S\n")
    code = cli("collect", "--assignment", ASSIGNMENT, "--out", str(tmp_path / "subs"),
               "--roster", str(roster), str(download))
    err = capsys.readouterr().err
    assert code == 1 and err.count("a path outside the download") == 2
    assert not list(tmp_path.parent.rglob("evil.ipynb"))
    assert (tmp_path / "subs" / "ab" / f"{ASSIGNMENT}.ipynb").exists()


def test_collect_never_replaces_a_differing_file_silently_and_dry_run_writes_nothing(tmp_path, capsys):
    roster = tmp_path / "r.csv"
    roster.write_text("Student,ID,SIS Login ID,Section\n\"A, B\",1001,ab,S\n")
    first = make_zip(tmp_path / "1.zip", {"ab_1001_1_x.ipynb": notebook_bytes(student_copy())})
    second = make_zip(tmp_path / "2.zip", {"ab_1001_2_x.ipynb": notebook_bytes(slip())})
    subs = tmp_path / "subs"
    args = ["collect", "--assignment", ASSIGNMENT, "--out", str(subs), "--roster", str(roster)]
    assert cli(*args, "--dry-run", str(first)) == 0 and not subs.exists()
    assert cli(*args, str(first)) == 0
    before = snapshot(subs)
    assert cli(*args, str(second)) == 1
    assert "differ from the download and were kept" in capsys.readouterr().err
    assert snapshot(subs) == before
    assert cli(*args, "--replace", str(second)) == 0
    kept = list((subs / ".replaced").rglob("*.ipynb"))
    assert len(kept) == 1 and kept[0].read_bytes() == before[f"ab/{ASSIGNMENT}.ipynb"]


def test_collect_refuses_what_it_cannot_attribute(tmp_path, capsys):
    download = make_zip(tmp_path / "dl.zip", {moodle_name("A B", 7, "x.ipynb"): b"{}"})
    grade_export = tmp_path / "moodle-grades.csv"
    grade_export.write_text("First name,Last name,ID number,Institution,Department,Email address\n"
                            "A,B,,,,ab@uni.example\n")
    subs = tmp_path / "subs"
    assert cli("collect", "--assignment", ASSIGNMENT, "--out", str(subs), "--roster",
               str(grade_export), str(download)) == 2
    assert "grading worksheet" in capsys.readouterr().err and not subs.exists()
    assert cli("collect", "--assignment", ASSIGNMENT, "--out", str(subs), str(download)) == 2
    assert "--roster" in capsys.readouterr().err
    other = make_zip(tmp_path / "other.zip", {"hw/alice.ipynb": b"{}"})
    assert cli("collect", "--assignment", ASSIGNMENT, "--out", str(subs), str(other)) == 2
    assert "--pattern" in capsys.readouterr().err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    assert cli("collect", "--assignment", ASSIGNMENT, "--out", str(tmp_path / "mine"),
               "--pattern", r"hw/(?P<student>\w+)\.ipynb", str(other)) == 2
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"


def test_a_pattern_for_any_other_platform(tmp_path):
    nb = notebook_bytes(student_copy())
    download = tmp_path / "unpacked"
    for name in ("alice_20261201T2300_01.ipynb", "bob_20261203T1000_01.ipynb"):
        (download / "hw").mkdir(parents=True, exist_ok=True)
        (download / "hw" / name).write_bytes(nb)
    options = CollectOptions(ASSIGNMENT, "pattern", re.compile(
        r"hw/(?P<student>[a-z]+)_(?P<timestamp>\d{8}T\d{4})_"), time_format="%Y%m%dT%H%M",
        zone=timezone(timedelta(hours=1)))
    done = collect(download, tmp_path / "subs", None, options)
    assert sorted(done.written) == [f"alice/{ASSIGNMENT}.ipynb", f"bob/{ASSIGNMENT}.ipynb"]
    sha = __import__("hashlib").sha256(nb).hexdigest()
    entry = collected_entry(load_collected(tmp_path / "subs"), f"bob/{ASSIGNMENT}.ipynb", sha)
    assert entry["lms_time"] == "2026-12-03T10:00:00+01:00"
    policy = parse_policy(POLICY)
    when, _ = submission_time({"submission": "bob/x", "collected": entry}, policy.late)
    assert when == datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
    # a file changed after collection has no LMS time
    changed = collected_entry(load_collected(tmp_path / "subs"), f"bob/{ASSIGNMENT}.ipynb", "0" * 64)
    assert submission_time({"submission": "bob/x", "collected": changed}, policy.late)[0] is None


def test_the_default_source_never_reads_the_file_time(tmp_path):
    policy = parse_policy(POLICY)
    assert policy.late.submitted == "lms"
    record = {"submission": "alice/x", "file_time": "2026-11-01T00:00:00+00:00"}
    when, why = submission_time(record, policy.late)
    assert when is None and "kpca-course collect" in why and "file" in why


def test_file_times_that_cannot_be_true_are_warned_about():
    from kpca_lib.course.grading.record.policy import file_time_warnings

    policy = parse_policy('[late]\ndeadline = 2026-12-01T23:59:00Z\nsubmitted = "file"\n'
                          'released = 2026-11-20T00:00:00Z\n')
    now = datetime(2026, 12, 5, tzinfo=timezone.utc)
    same = "2026-11-30T10:00:00+00:00"
    rows = [{"submission": f"s{i}/x", "file_time": same} for i in range(3)]
    rows += [{"submission": "early/x", "file_time": "2026-11-01T00:00:00+00:00"},
             {"submission": "future/x", "file_time": "2027-01-01T00:00:00+00:00"}]
    said = " | ".join(file_time_warnings(policy, rows, now))
    assert "in the future: future/x" in said and "before late.released: early/x" in said
    assert "3 files have the same time to the second" in said
    assert file_time_warnings(parse_policy(POLICY), rows, now) == []


# --------------------------------------------------------------------------- rosters
def test_lms_rosters_are_recognised_by_their_headers():
    canvas = parse_roster(CANVAS_ROSTER)
    assert canvas.layout == "canvas" and list(canvas.entries) == [
        "aliddell", "jmueller", "cann", "cann2", "1099"]
    assert canvas["cann2"].lms_id == "1004" and canvas["cann2"].name == "Ann, Carol"
    worksheet = parse_roster(MOODLE_WORKSHEET)
    assert worksheet.layout == "moodle-worksheet"
    assert worksheet.by("participant_id", "4023").student == "alice2@uni.example"
    participants = parse_roster("First name,Last name,Email address,Roles,Groups\n"
                                "Ann,Lee,ann@uni.example,Student,\n")
    assert participants.layout == "moodle" and "ann@uni.example" in participants
    with pytest.raises(RosterError, match="no `student` column"):
        parse_roster("Name,Mail\nA,a@b\n")


def test_canvas_file_names_read_back():
    for sortable, uid, aid, fname, late in [("Liddell, Alice", 1, 2, "a_1_2_b.ipynb", False),
                                            ("O'Brien-Ng, Ró", 31, 999, "x.ipynb", True),
                                            ("", 5, 6, "01_feature_maps.ipynb", False)]:
        name = canvas_name(sortable, uid, aid, fname, late)
        got = read_name("canvas", name)
        assert (got.key, got.late, got.upload, got.filename) == (str(uid), late, aid, fname), name
    assert CANVAS.match("notes.txt") is None


def test_export_refuses_a_roster_that_matches_nobody_and_keeps_a_good_lms_file(tmp_path, capsys):
    roster = tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    download = canvas_download(tmp_path)
    subs, out = collect_grade_export(tmp_path, download, roster, [], "canvas")
    capsys.readouterr()
    good = (out / "export" / "canvas-import.csv").read_bytes()
    names = tmp_path / "display-names.csv"
    names.write_text("student,lms_id\nAlice Liddell,1001\nJörg Müller,1002\n", encoding="utf-8")
    assert cli("export", "--out", str(out), "--format", "canvas", "--roster", str(names)) == 2
    err = capsys.readouterr().err
    assert "matches none of the gradebook's 3 row(s)" in err and "a `student` column" in err
    assert (out / "export" / "canvas-import.csv").read_bytes() == good
    no_ids = tmp_path / "no-ids.csv"
    no_ids.write_text("student,name\naliddell,Alice\njmueller,Jörg\ncann,Carol\n")
    assert cli("export", "--out", str(out), "--format", "canvas", "--roster", str(no_ids)) == 5
    assert "the existing file, with 3 student line(s), was kept" in capsys.readouterr().err
    assert (out / "export" / "canvas-import.csv").read_bytes() == good


@pytest.mark.parametrize("reason", [
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "&lt;b&gt; is already escaped",
    "a\r\nb<br>c", "=HYPERLINK(\"http://x\")", "<!-- hidden --> visible", "</td></tr><tr><td>",
])
def test_moodle_feedback_is_text_that_moodle_shows_as_text(reason):
    """Moodle renders its feedback column as HTML: what it shows, after decoding the entities
    once, must be the reason itself (on one line), and no tag may reach it."""
    import html

    from kpca_lib.course.grading.handback.export import moodle_text

    cell = moodle_text(reason)
    assert "<" not in cell and ">" not in cell and "\n" not in cell and "\r" not in cell
    assert html.unescape(cell) == " ".join(reason.split())


def test_late_work_from_a_second_download_merges_with_its_lms_mark(tmp_path, capsys):
    roster = tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    good = notebook_bytes(student_copy())
    first = make_zip(tmp_path / "first.zip", {
        canvas_name("Liddell, Alice", 1001, 50001, f"{ASSIGNMENT}.ipynb"): good})
    subs, out = tmp_path / "submissions", tmp_path / "grades"
    collect_args = ["collect", "--assignment", ASSIGNMENT, "--out", str(subs), "--roster",
                    str(roster)]
    assert cli(*collect_args, str(first)) == 0
    out.mkdir()
    (out / "policy.toml").write_text(POLICY)
    grade = ["grade", "--assignment", ASSIGNMENT, "--out", str(out), "--sandbox", "none",
             "--root", str(subs)]
    assert cli(*grade, str(subs / "aliddell" / f"{ASSIGNMENT}.ipynb")) == 0
    # the second download holds Alice again (unchanged) and Jörg's late file
    second = make_zip(tmp_path / "second.zip", {
        canvas_name("Liddell, Alice", 1001, 50001, f"{ASSIGNMENT}.ipynb"): good,
        canvas_name("Müller-Lüdenscheidt, Jörg", 1002, 50020, f"{ASSIGNMENT}.ipynb", True): good})
    assert cli(*collect_args, str(second)) == 0
    assert "1 new, 1 unchanged" in capsys.readouterr().out
    assert cli(*grade, "--merge", str(subs / "jmueller" / f"{ASSIGNMENT}.ipynb")) == 0
    grades = {r["submission"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text()))}
    assert grades[f"jmueller/{ASSIGNMENT}"]["late"] == "yes"
    assert grades[f"jmueller/{ASSIGNMENT}"]["score"] == "10.8"  # 12, 10 % off for 1 day
    assert grades[f"aliddell/{ASSIGNMENT}"]["late"] == "no"


def test_a_roster_without_the_id_a_format_needs_is_said_so_not_missing(tmp_path, capsys):
    """A Canvas roster has no emails: the Moodle file cannot name its students. They are in
    the roster, so the message says which id is lacking, not "no roster entry"."""
    roster = tmp_path / "canvas-gradebook.csv"
    roster.write_text(CANVAS_ROSTER, encoding="utf-8")
    subs, out = collect_grade_export(tmp_path, canvas_download(tmp_path), roster, [], "canvas")
    capsys.readouterr()
    assert cli("export", "--out", str(out), "--format", "all", "--allow-missing") == 0
    err = capsys.readouterr().err
    assert "no roster entry" not in err
    assert "left out of export/moodle-import.csv: their roster entry lacks the id" in err
    assert cli("export", "--out", str(out), "--format", "canvas", "--format", "moodle") == 5
    assert cli("export", "--out", str(out), "--format", "canvas") == 4  # cann2, Test Student
