"""Gradebook exports (plain CSV, Canvas, Moodle) and the roster's refusals.

Pure functions on hand-made ``grades.json`` records: no kernel, no files. Each output is
parsed back with :mod:`csv` and checked cell by cell: every student's score and ids, the
published headers, that nobody is dropped silently (``unmatched``, ``absent``, ``held``,
``pending``), and that formula-like names are neutralised.
"""

from __future__ import annotations

import csv
import io

import pytest

from kpca_lib.course.grading.handback import export as ex
from kpca_lib.course.grading.record.gradebook import format_points
from kpca_lib.course.grading.record.policy import finalize, parse_adjustments, parse_policy
from kpca_lib.course.grading.record.roster import Roster, RosterEntry, RosterError, parse_roster

A = "01_feature_maps"
POINTS = {"q1_phi_p3": 3.0, "q1_phi_p4": 3.0, "q2_feature_count": 6.0}
POLICY = parse_policy("""
[questions]
by_hand = ["q2_feature_count"]

[late]
deadline = 2026-12-01T23:59:00+01:00
submitted = "file"
penalty_per_day = 10
""")
ON_TIME = "2026-12-01T20:00:00+01:00"
FORMULA = '=HYPERLINK("http://evil.example","x")'
ODD_NAME = 'Zoë "Z" O\'Brien, Jr.\nIII 李'  # comma, quotes, a line break, Unicode

ROSTER_ROWS = [
    # student, name, first, last, email, lms_id, sis_user_id, sis_login_id, section, id_number
    ["alice", "", "Alice", "Liddell", "alice@uni.example", "101", "S1", "alice.l", "Sec A", "N1"],
    ["bob", "Bob Builder", "", "", "Bob@Uni.example", "102", "S2", "", "Sec B", "N2"],
    ["carol", "", "Carol", "Danvers", "carol@uni.example", "103", "", "", "Sec A", "N3"],
    ["dave", "", "Dave", "Grader", "dave@uni.example", "104", "", "", "", "N4"],
    ["erin", "", "Erin", "Crash", "erin@uni.example", "105", "", "", "", "N5"],
    ["gina", "", "Gina", "Absent", "gina@uni.example", "107", "", "", "", "N7"],
    ["mallory", "", "+1", FORMULA, "mallory@uni.example", "108", "", "", "", "N8"],
    ["oscar", "@x", "", "", "", "109", "", "", "", ""],  # no email: Moodle cannot match
    ["nina", "Nina Noid", "", "", "nina@uni.example", "", "", "", "", "N10"],  # no Canvas id
    ["zoe", ODD_NAME, "", "", "zoe@uni.example", "111", "", "", "", "N11"],
]
HEADER = ["student", "name", "first_name", "last_name", "email", "lms_id", "sis_user_id",
          "sis_login_id", "section", "id_number"]


def csv_text(rows: list[list[str]]) -> str:
    buf = io.StringIO()  # "\r\n": the csv module then quotes a cell holding "\r"
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    return buf.getvalue()


def roster(rows=None):
    """The roster of ``rows``: read from its CSV text, except that a name holding a line
    break (which parse_roster refuses: in a file it is an unclosed quote more often than a
    name) is put in as it is, so that the writers are tested with any text."""
    rows = ROSTER_ROWS if rows is None else rows
    plain = [r for r in rows if not any("\n" in c or "\r" in c for c in r)]
    parsed = parse_roster(csv_text([HEADER, *plain]))
    entries = dict(parsed.entries)
    for i, r in enumerate(rows):
        if r not in plain:
            d = dict(zip(HEADER, r, strict=True))
            known = ("student", "name", "first_name", "last_name", "email", "lms_id")
            entries[d["student"]] = RosterEntry(line=i + 2, extra={k: d[k] for k in HEADER
                                                                 if k not in known and d[k]},
                                                **{k: d[k] for k in known})
    order = [r[0] for r in rows]
    return Roster({k: entries[k] for k in order}, parsed.columns)


def record(student: str, q: dict[str, float], *, status: str = "graded", submitted: str = ON_TIME,
           messages=(), **extra) -> dict:
    questions = {k: float(q.get(k, 0.0)) for k in POINTS}
    return {"submission": f"{student}/{A}", "status": status, "score": sum(questions.values()),
            "max_score": 12.0, "questions": questions, "messages": list(messages), "checks": [],
            "file_time": submitted, **extra}


RECORDS = [
    record("alice", {"q1_phi_p3": 3, "q1_phi_p4": 3}),
    record("bob", {"q1_phi_p3": 3}, submitted="2026-12-03T10:00:00+01:00"),  # 2 started days
    record("carol", {"q1_phi_p3": 3, "q1_phi_p4": 3}),  # by-hand question not graded yet
    record("dave", {}, status="crashed", grader_error="the grader's disk is full",
           messages=["the grader failed on this submission, not through any fault of yours "
                     "(the grader's disk is full); it was not graded and will be graded again."]),
    record("erin", {"q1_phi_p3": 3}, status="crashed",
           messages=["the instructor checks this submission's name: it mixes scripts.",
                     "Cell 4 crashed:\nthe kernel died\r\n(the process exited or was killed)"]),
    record("frank", {"q1_phi_p3": 3}),  # not on the roster
    record("mallory", {"q1_phi_p3": 1.5}),
    record("oscar", {"q1_phi_p4": 2}),
    record("nina", {"q1_phi_p3": 3, "q1_phi_p4": 1}),
    record("zoe", {"q1_phi_p3": 3, "q1_phi_p4": 3}, status="timeout",
           messages=["It ran past the time limit. " * 30]),
]
ADJUSTMENTS = parse_adjustments(csv_text(
    [["row", "question", "points", "score", "reason"],
     [f"alice/{A}", "q2_feature_count", "", "6", "by hand: complete"],
     [f"bob/{A}", "q2_feature_count", "", "3", "by hand: half the argument"],
     [f"bob/{A}", "", "+1", "", "a clear write-up"],
     *[[f"{s}/{A}", "q2_feature_count", "", "0", "no answer"]
       for s in ("dave", "erin", "frank", "mallory", "oscar", "nina", "zoe")]]))


def finals_for(records=RECORDS, ros=None):
    ros = roster() if ros is None else ros
    return [finalize(r, POINTS, policy=POLICY, adjustments=ADJUSTMENTS, roster=ros)
            for r in records]


def by_row(records=RECORDS):
    return {r["submission"]: r for r in records}


def parse(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def rid(student: str) -> str:
    return f"{student}/{A}"


# --------------------------------------------------------------------------- the finals
def test_the_finals_are_what_the_policy_says():
    f = {x.student: x for x in finals_for()}
    assert f["alice"].score == 12 and not f["alice"].pending
    # bob: 3 + 3 (by hand) + 1 (whole) = 7, two started days late: -20% = -1.4
    assert (f["bob"].subtotal, f["bob"].penalty, f["bob"].score) == (7, 1.4, 5.6)
    assert f["carol"].pending == ("q2_feature_count",) and f["carol"].score == 6
    assert f["erin"].score == 3


# --------------------------------------------------------------------------- plain CSV
def test_plain_csv_lists_every_row_and_every_missing_student():
    finals = finals_for()
    out = ex.plain_csv(finals, by_row(), roster(), POINTS)
    rows = parse(out.text)
    assert rows[0] == ["student", "name", "email", "lms_id", "submission", "status", "score",
                       "max_score", *POINTS, "auto_score", "penalty", "late", "days_late",
                       "submitted", "due", "adjustments", "pending", "message"]
    table = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert out.rows == len(table) == len(finals) + 1
    assert [t["submission"] for t in table[:len(finals)]] == [f.row for f in finals]
    for f, t in zip(finals, table, strict=False):
        if f.row == rid("dave"):
            continue
        assert t["score"] == format_points(f.score)
        assert [t[q] for q in POINTS] == [format_points(f.questions[q]) for q in POINTS]
    got = {t["student"]: t for t in table}
    assert got["alice"]["name"] == "Alice Liddell" and got["alice"]["lms_id"] == "101"
    assert got["alice"]["email"] == "alice@uni.example" and got["alice"]["late"] == "no"
    assert got["bob"]["score"] == "5.6" and got["bob"]["penalty"] == "1.4"
    assert (got["bob"]["late"], got["bob"]["days_late"]) == ("yes", "2")
    assert got["bob"]["submitted"] == "2026-12-03T10:00:00+01:00"
    assert got["bob"]["due"] == "2026-12-01T23:59:00+01:00"
    assert got["bob"]["adjustments"] == "q2_feature_count = 3; whole +1"
    assert got["bob"]["auto_score"] == "3" and got["bob"]["message"] == ""
    assert got["carol"]["pending"] == "q2_feature_count"
    # the missing student: a line of their own, status missing, no score
    gina = got["gina"]
    assert gina["status"] == "missing" and gina["score"] == "" and gina["submission"] == ""
    assert gina["name"] == "Gina Absent" and gina["email"] == "gina@uni.example"
    assert all(v == "" for k, v in gina.items()
               if k not in ("student", "name", "email", "lms_id", "status"))
    # the extra student: in the file, and reported
    assert got["frank"]["name"] == "" and got["frank"]["score"] == "3"
    assert out.unmatched == [rid("frank")] and out.absent == ["gina"]
    assert out.pending == [rid("carol")]
    assert out.held == [rid("dave")] and out.duplicates == []


def test_plain_csv_messages():
    out = ex.plain_csv(finals_for(), by_row(), roster(), POINTS)
    got = {r[0]: r for r in parse(out.text)[1:]}
    message = parse(out.text)[0].index("message")
    dave = got["dave"]
    assert dave[message] == "grader failure: the grader's disk is full"
    assert dave[6] == ""  # its 0 is not a grade
    erin = got["erin"][message]
    assert erin == "Cell 4 crashed: the kernel died (the process exited or was killed)"
    zoe = got["zoe"][message]
    assert len(zoe) <= 300 and "\n" not in zoe and zoe.endswith("...")
    assert got["alice"][message] == ""


def test_plain_csv_without_roster_and_without_late_policy():
    finals = [finalize(r, POINTS, adjustments=ADJUSTMENTS) for r in RECORDS]
    out = ex.plain_csv(finals, by_row(), None, POINTS)
    rows = parse(out.text)
    late = rows[0].index("late")
    assert out.rows == len(RECORDS) and out.absent == [] and out.unmatched == []
    assert all(r[late] == "" for r in rows[1:])
    assert rows[1][rows[0].index("submitted")] == ON_TIME  # from the record
    assert all(r[1] == r[2] == r[3] == "" for r in rows[1:])


def test_plain_csv_unknown_submission_time():
    rec = record("alice", {"q1_phi_p3": 3}, submitted="")
    out = ex.plain_csv(finals_for([rec]), by_row([rec]), roster(), POINTS)
    rows = parse(out.text)
    line = dict(zip(rows[0], rows[1], strict=True))
    assert line["late"] == "unknown" and line["days_late"] == "" and line["submitted"] == ""
    assert line["due"] == "2026-12-01T23:59:00+01:00"


# --------------------------------------------------------------------------- Canvas
def canvas(**kw):
    args = {"column": "Homework 1 (123456)", "points_possible": 12, "records": by_row()}
    args.update(kw)
    return ex.canvas_csv(finals_for(), roster(), **args)


def test_canvas_header_and_points_possible_row_as_published():
    rows = parse(canvas().text)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "Homework 1 (123456)"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "12"]
    assert all(len(r) == 6 for r in rows)


def test_canvas_rows_scores_ids_and_what_is_left_out():
    finals = {f.row: f for f in finals_for()}
    out = canvas()
    rows = parse(out.text)[2:]
    by_id = {r[1]: r for r in rows}
    assert out.rows == len(rows) == 7
    assert by_id["101"] == ["Liddell, Alice", "101", "S1", "alice.l", "Sec A", "12"]
    assert by_id["102"] == ["Bob Builder", "102", "S2", "", "Sec B", "5.6"]
    assert by_id["103"][5] == "6"  # pending: exported with its current score
    assert by_id["105"][5] == "3"  # the student's own crash: a grade
    for r in rows:
        student = {"101": "alice", "102": "bob", "103": "carol", "105": "erin",
                   "108": "mallory", "109": "oscar", "111": "zoe"}[r[1]]
        assert r[5] == format_points(finals[rid(student)].score)
    assert "104" not in by_id and out.held == [rid("dave")]  # the grader's failure
    assert out.unmatched == [rid("frank"), rid("nina")]  # no roster entry; no Canvas id
    assert out.absent == ["gina"]
    assert out.pending == [rid("carol")] and out.duplicates == []


def test_canvas_without_records_holds_every_crash():
    out = ex.canvas_csv(finals_for(), roster(), column="HW 1 (1)", points_possible=12)
    assert out.held == [rid("dave"), rid("erin")]
    assert {r[1] for r in parse(out.text)[2:]}.isdisjoint({"104", "105"})


def test_canvas_line_ends_and_a_name_that_reads_as_the_points_row():
    rows = [*ROSTER_ROWS]
    rows[0] = ["alice", "Points Possible", "", "", "a@x.example", "101", "", "", "", ""]
    out = ex.canvas_csv(finals_for(ros=roster(rows)), roster(rows), column="HW (1)",
                        points_possible=12.5, records=by_row())
    assert out.text.endswith("\r\n") and "\r\n" in out.text.split("12.5", 1)[0]
    parsed = parse(out.text)
    assert parsed[1][5] == "12.5"
    assert [r for r in parsed[2:] if r[1] == "101"] == [["", "101", "", "", "", "12"]]


@pytest.mark.parametrize("column", ["", "   ", "HW\n1", " HW 1", "=HW", "-1 (12)", "+HW",
                                    "@HW", "Student", "Section", "Final Score",
                                    "HW Current Grade (3)", "HW\u200b1"])
def test_canvas_refuses_a_column_it_cannot_import(column):
    with pytest.raises(ValueError):
        canvas(column=column)


@pytest.mark.parametrize("pp", [-1, float("nan"), float("inf"), True, "12"])
def test_canvas_refuses_bad_points_possible(pp):
    with pytest.raises(ValueError, match="points_possible"):
        canvas(points_possible=pp)


def test_lms_exports_need_a_roster():
    with pytest.raises(ValueError, match="roster"):
        ex.canvas_csv(finals_for(), None, column="HW (1)", points_possible=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="roster"):
        ex.moodle_csv(finals_for(), None, column="Assignment: HW (Real)")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- Moodle
COLUMN = f"Assignment: {A} (Real)"


def moodle(**kw):
    args = {"column": COLUMN, "records": by_row()}
    args.update(kw)
    return ex.moodle_csv(finals_for(), roster(), **args)


def test_moodle_header_as_its_export_writes_it():
    rows = parse(moodle().text)
    assert rows[0] == ["First name", "Last name", "ID number", "Institution", "Department",
                       "Email address", COLUMN]
    assert all(len(r) == 7 for r in rows)
    rows = parse(moodle(feedback={}).text)
    assert rows[0][-1] == f"Assignment: {A} (Feedback)" and all(len(r) == 8 for r in rows)
    assert ex.moodle_feedback_column("Quiz 3") == "Quiz 3 (Feedback)"


def test_moodle_rows_scores_emails_and_what_is_left_out():
    finals = {f.row: f for f in finals_for()}
    out = moodle()
    rows = parse(out.text)[1:]
    by_email = {r[5]: r for r in rows}
    assert out.rows == len(rows) == 7
    assert by_email["alice@uni.example"] == ["Alice", "Liddell", "N1", "", "", "alice@uni.example",
                                             "12"]
    assert by_email["Bob@Uni.example"][:2] == ["Bob Builder", ""]  # the email as the roster has it
    assert by_email["Bob@Uni.example"][6] == "5.6"
    for email, student in [("carol@uni.example", "carol"), ("erin@uni.example", "erin"),
                           ("nina@uni.example", "nina"), ("zoe@uni.example", "zoe")]:
        assert by_email[email][6] == format_points(finals[rid(student)].score)
    assert "dave@uni.example" not in by_email and out.held == [rid("dave")]
    assert out.unmatched == [rid("frank"), rid("oscar")]  # no roster entry; no email
    assert out.absent == ["gina"] and out.pending == [rid("carol")]
    assert all(r[5] for r in rows)  # never a blank identifier (Moodle would reuse the last)


def test_moodle_id_number_only_when_every_student_has_one():
    assert all(r[2] for r in parse(moodle().text)[1:])
    rows = [r if r[0] != "nina" else [*r[:9], ""] for r in ROSTER_ROWS]
    out = ex.moodle_csv(finals_for(ros=roster(rows)), roster(rows), column=COLUMN,
                        records=by_row())
    assert out.rows == 7 and all(r[2] == "" for r in parse(out.text)[1:])


def test_moodle_feedback_is_one_line_per_student():
    finals = finals_for()
    feedback = {f.row: ex.summary_line(f) for f in finals}
    feedback[rid("alice")] = "=SUM(A1)\nsecond line"
    out = moodle(feedback=feedback)
    assert out.text.endswith("\r\n")
    got = {r[5]: r[7] for r in parse(out.text)[1:]}
    assert got["alice@uni.example"] == "'=SUM(A1) second line"
    assert got["Bob@Uni.example"] == ("q2_feature_count = 3 (by hand: half the argument); "
                                      "whole +1 (a clear write-up); late 2 days: -20% (1.4 point(s) off)")
    assert got["carol@uni.example"] == "not graded yet: q2_feature_count"
    assert "nina@uni.example" in got


@pytest.mark.parametrize("column", ["", "Email address", "=A1", "A\r\nB"])
def test_moodle_refuses_a_column_it_cannot_import(column):
    with pytest.raises(ValueError):
        moodle(column=column)


# --------------------------------------------------------------------------- all formats
def all_exports():
    finals, records, ros = finals_for(), by_row(), roster()
    return {"plain": ex.plain_csv(finals, records, ros, POINTS),
            "canvas": ex.canvas_csv(finals, ros, column="HW (1)", points_possible=12,
                                    records=records),
            "moodle": ex.moodle_csv(finals, ros, column=COLUMN, records=records,
                                    feedback={f.row: ex.summary_line(f) for f in finals})}


@pytest.mark.parametrize("kind", ["plain", "canvas", "moodle"])
def test_formula_like_names_are_neutralised(kind):
    rows = parse(all_exports()[kind].text)
    cells = [c for r in rows for c in r]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r", "\n")]
    if kind == "canvas":
        assert f"'{FORMULA}, +1" in cells and "'@x" in cells
    elif kind == "moodle":
        assert "'+1" in cells and f"'{FORMULA}" in cells  # oscar (@x) has no email
    else:
        assert f"'+1 {FORMULA}" in cells and "'@x" in cells


@pytest.mark.parametrize("kind", ["plain", "canvas", "moodle"])
def test_odd_names_round_trip(kind):
    rows = parse(all_exports()[kind].text)
    assert [ODD_NAME] == [c for r in rows for c in r if c.startswith("Zoë")]


def test_a_carriage_return_in_a_name_quotes_the_whole_line():
    rows = [*ROSTER_ROWS, ["cr", "Carriage\rReturn", "", "", "cr@x.example", "200", "", "", "", "N"]]
    ros = roster(rows)
    recs = [*RECORDS, record("cr", {"q1_phi_p3": 3})]
    finals = finals_for(recs, ros)
    for text in (ex.plain_csv(finals, by_row(recs), ros, POINTS).text,
                 ex.canvas_csv(finals, ros, column="HW (1)", points_possible=12).text,
                 ex.moodle_csv(finals, ros, column=COLUMN).text):
        line = next(x for x in text.split("\n") if "Carriage" in x)
        assert line.startswith('"')
        assert "Carriage\rReturn" in [c for r in parse(text) for c in r]


def test_deterministic_and_independent_of_roster_order():
    first, again = all_exports(), all_exports()
    assert {k: v.text for k, v in first.items()} == {k: v.text for k, v in again.items()}
    shuffled = roster(list(reversed(ROSTER_ROWS)))
    finals = finals_for(ros=shuffled)
    assert ex.canvas_csv(finals, shuffled, column="HW (1)", points_possible=12,
                         records=by_row()).text == first["canvas"].text
    assert ex.moodle_csv(finals, shuffled, column=COLUMN, records=by_row(),
                         feedback={f.row: ex.summary_line(f) for f in finals}
                         ).text == first["moodle"].text


def test_a_student_with_two_rows_is_not_exported_to_an_lms():
    recs = [*RECORDS, {**record("alice", {"q1_phi_p3": 1}), "submission": "alice/other"}]
    finals = finals_for(recs)
    for out in (ex.canvas_csv(finals, roster(), column="HW (1)", points_possible=12,
                              records=by_row(recs)),
                ex.moodle_csv(finals, roster(), column=COLUMN, records=by_row(recs))):
        assert out.duplicates == [rid("alice"), "alice/other"]
        assert "alice" not in out.text.lower()
    plain = ex.plain_csv(finals, by_row(recs), roster(), POINTS)
    assert plain.duplicates == [rid("alice"), "alice/other"] and plain.rows == len(recs) + 1


def test_summary_line():
    f = {x.student: x for x in finals_for()}
    assert ex.summary_line(f["alice"]) == "q2_feature_count = 6 (by hand: complete)"
    unknown = finalize(record("alice", {}, submitted=""), POINTS, policy=POLICY)
    assert ex.summary_line(unknown) == ("submission time unknown: no late penalty; "
                                        "not graded yet: q2_feature_count")
    assert ex.summary_line(finalize(record("x", {}), POINTS)) == ""


# --------------------------------------------------------------------------- the roster
def roster_error(text: str) -> str:
    with pytest.raises(RosterError) as info:
        parse_roster(text, "roster.csv")
    return str(info.value)


def test_roster_duplicate_student():
    why = roster_error("student,email\nalice,a@x\nbob,b@x\nalice,c@x\n")
    assert "student 'alice' is on line 2 and line 4" in why


def test_roster_duplicate_email_ignores_case():
    why = roster_error("student,email\nalice,A@X.example\nbob,b@x\ncarol,a@x.EXAMPLE\n")
    assert "line 2 and line 4" in why and "email" in why


def test_roster_duplicate_lms_id():
    why = roster_error("student,LMS ID\nalice,7\nbob,8\ncarol,7\n")
    assert "lms_id '7' is on line 2 and line 4" in why


def test_roster_without_student_column():
    why = roster_error("name,email\nAlice,a@x\n")
    assert "no `student` column" in why and "'name', 'email'" in why


def test_roster_more_cells_than_the_header():
    why = roster_error("student,name\nalice,Liddell, Alice\nbob,Bob\n")
    assert "line 2 has 3 cells but the header has 2" in why


def test_roster_reports_every_problem_at_once():
    why = roster_error("student,email\nalice,a@x\nalice,a@x\n,c@x\n")
    assert "student 'alice' is on line 2 and line 3" in why
    assert "email 'a@x' is on line 2 and line 3" in why and "line 4 has no `student`" in why
