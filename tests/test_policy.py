"""The instructor's policy (policy.toml), adjustments (adjustments.csv) and the final grade.

Pure functions: every rule of :func:`kpca_lib.course.grading.record.policy.finalize` against a
grade computed by hand, and every bad input against its message.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpca_lib.course.grading.record.policy import (
    PolicyError,
    check_adjustments,
    finalize,
    parse_adjustments,
    parse_policy,
    submission_time,
)
from kpca_lib.course.grading.record.roster import RosterError, parse_roster, student_of

POINTS = {"q1": 3.0, "q2": 3.0, "q3": 4.0}
CET = timezone(timedelta(hours=1))
DEADLINE = datetime(2026, 12, 1, 23, 59, tzinfo=CET)


def record(rid="alice/01", q=(3.0, 2.0, 4.0), status="graded", submitted=None, **extra):
    r = {"submission": rid, "status": status, "questions": dict(zip(POINTS, q, strict=True)),
         "score": sum(q), "max_score": 10.0, "messages": [], "checks": [], **extra}
    if submitted is not None:  # what the grader records: the file's time, in UTC
        r["file_time"] = submitted.astimezone(timezone.utc).isoformat()
    return r


LATE = """
[late]
deadline = 2026-12-01T23:59:00+01:00
submitted = "file"
grace_minutes = 10
penalty_per_day = 10
max_penalty = 30
[late.extensions]
bob = "2d"
carol = 2026-12-05T12:00:00+01:00
"""


def test_no_policy_keeps_the_automatic_grade():
    f = finalize(record(), POINTS)
    assert (f.score, f.auto_score, f.questions, f.late, f.penalty) == (
        9.0, 9.0, {"q1": 3.0, "q2": 2.0, "q3": 4.0}, None, 0.0)
    assert not f.adjusted and f.student == "alice"


@pytest.mark.parametrize("after, late, days, percent", [
    (timedelta(minutes=-1), False, 0, 0),
    (timedelta(minutes=9), False, 0, 0),  # within the grace period
    (timedelta(minutes=11), True, 1, 10),  # any part of a day counts as a day
    (timedelta(days=1), True, 1, 10),
    (timedelta(days=1, seconds=1), True, 2, 20),
    (timedelta(days=9), True, 9, 30),  # capped at max_penalty
])
def test_late_penalty_per_started_day(after, late, days, percent):
    policy = parse_policy(LATE)
    f = finalize(record(submitted=DEADLINE + after), POINTS, policy=policy)
    assert (f.late.late, f.late.days, f.late.percent) == (late, days, percent)
    assert f.penalty == pytest.approx(9.0 * percent / 100)
    assert f.score == pytest.approx(9.0 - 9.0 * percent / 100)
    assert f.auto_score == 9.0  # the automatic grade stays as it was


def test_extensions_as_a_span_and_as_a_new_deadline():
    policy = parse_policy(LATE)
    assert policy.late.due("bob") == DEADLINE + timedelta(days=2)
    assert policy.late.due("carol") == datetime(2026, 12, 5, 12, 0, tzinfo=CET)
    assert policy.late.due("alice") == DEADLINE
    bob = finalize(record("bob/01", submitted=DEADLINE + timedelta(days=1)), POINTS, policy=policy)
    assert not bob.late.late and bob.score == 9.0
    alice = finalize(record("alice/01", submitted=DEADLINE + timedelta(days=1)), POINTS,
                     policy=policy)
    assert alice.late.late and alice.score == pytest.approx(8.1)


def test_penalty_of_the_maximum_never_below_zero():
    policy = parse_policy(LATE.replace("max_penalty = 30",
                                       'max_penalty = 100\npenalty_of = "max_score"'))
    f = finalize(record(q=(1.0, 0.0, 0.0), submitted=DEADLINE + timedelta(days=3)), POINTS,
                 policy=policy)
    assert f.late.percent == 30 and f.penalty == 1.0 and f.score == 0.0  # 30 % of 10 > 1


def test_unknown_submission_time_is_reported_not_penalised():
    policy = parse_policy(LATE)
    f = finalize(record(), POINTS, policy=policy)
    assert f.late.submitted is None and f.penalty == 0 and f.score == 9.0
    assert any("submission time unknown" in w for w in f.warnings)


def test_adjustments_scores_points_whole_and_by_hand():
    policy = parse_policy('[questions]\nby_hand = ["q2"]\n')
    adjustments = parse_adjustments(
        "row,question,points,score,reason\n"
        "alice/01,q2,,2.5,clear argument\n"
        "alice/01,q1,-1,,sign error the check missed\n"
        "alice/01,,+0.5,,neat plots\n"
        "bob/01,q3,,4,regraded by hand\n")
    check_adjustments(adjustments, ["alice/01", "bob/01"], POINTS)
    alice = finalize(record(), POINTS, policy=policy, adjustments=adjustments)
    assert alice.questions == {"q1": 2.0, "q2": 2.5, "q3": 4.0}
    assert alice.subtotal == alice.score == 9.0 and alice.auto_score == 9.0
    assert [a.describe() for a in alice.applied] == ["= 2.5", "-1", "+0.5"]
    assert alice.pending == ()
    bob = finalize(record("bob/01"), POINTS, policy=policy, adjustments=adjustments)
    assert bob.pending == ("q2",) and bob.questions["q2"] == 0.0  # by hand: no automatic points
    assert bob.score == 7.0


def test_added_points_are_clamped_with_a_warning():
    adjustments = parse_adjustments("row,question,points,score,reason\nalice/01,q1,+2,,bonus\n"
                                    "alice/01,,+5,,bonus\n")
    f = finalize(record(), POINTS, adjustments=adjustments)
    assert f.questions["q1"] == 3.0 and f.score == 10.0
    assert len(f.warnings) == 2 and "counted as 3" in f.warnings[0]


@pytest.mark.parametrize("text, needle", [
    ("row,question,points,score,reason\nalice/01,q1,1,2,x\n", "exactly one of points"),
    ("row,question,points,score,reason\nalice/01,q1,,,x\n", "exactly one of points"),
    ("row,question,points,score,reason\nalice/01,q1,1,,\n", "no reason"),
    ("row,question,points,score,reason\nalice/01,q1,one,,x\n", "not a number"),
    ("row,question,points,score,reason\nalice/01,q1,nan,,x\n", "not a finite number"),
    ("row,question,score,reason\nalice/01,q1,1,x\n", "points missing"),
    ("row,question,points,score,reason\n,q1,1,,x\n", "has no row"),
])
def test_malformed_adjustments_name_the_line(text, needle):
    with pytest.raises(PolicyError, match=needle) as info:
        parse_adjustments(text, "adjustments.csv")
    assert "adjustments.csv" in str(info.value)


def test_adjustments_for_rows_or_questions_that_do_not_exist():
    adjustments = parse_adjustments("\nrow,question,points,score,reason\n"
                                    "alice/01_feature_map,q1,1,,x\nalice/01,q9,1,,x\n"
                                    "alice/01,q1,,3.5,x\nalice/01,,,11,x\n")
    with pytest.raises(PolicyError) as info:
        check_adjustments(adjustments, ["alice/01_feature_maps", "alice/01"], POINTS)
    text = str(info.value)
    assert "line 3: there is no row 'alice/01_feature_map'" in text
    assert "did you mean 'alice/01_feature_maps'" in text
    assert "line 4: 'q9' is not a question" in text
    assert "line 5: score 3.5 is outside 0..3" in text
    assert "line 6: score 11 is outside 0..10" in text


@pytest.mark.parametrize("text, needle", [
    ("[late]\ndeadline = \"next friday\"\n", "not a time kpca-course can read"),
    ("[late]\ndeadline = 2026-12-01T23:59:00\n", "no time zone"),
    ("[late]\nsubmitted = \"file\"\n", "needs a deadline"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\nsubmitted = \"mail\"\n", "one of lms, file, name, roster"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\nsubmitted = \"name\"\n", "needs late.pattern"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\nsubmitted = \"roster\"\n", "needs late.column"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\nsubmitted = \"file\"\npenalty_per_day = 150\n",
     "between 0 and 100"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\nsubmitted = \"roster\"\ncolumn = \"t\"\n",
     "needs the roster in this file"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\ndeadlne = 1\n", "unknown key"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\ntimezone = \"Mars/Olympus\"\n", "not a time zone"),
    ("[late]\ndeadline = 2026-12-01T23:59:00Z\nsubmitted = \"file\"\n[late.extensions]\n"
     "bob = \"soon\"\n", "neither a time nor a span"),
    ("[questions]\nby_hand = \"q1\"\n", "list of question ids"),
    ("grace = 3\n", "unknown key"),
    ("[late\n", "not valid TOML"),
])
def test_bad_policies_name_the_key_and_the_fix(text, needle):
    with pytest.raises(PolicyError, match=needle) as info:
        parse_policy(text, "policy.toml")
    assert str(info.value).startswith("policy.toml")  # the file is named


def test_local_deadline_with_a_time_zone_and_by_hand_question_check():
    policy = parse_policy('[questions]\nby_hand = ["q7"]\n[late]\ndeadline = 2026-07-01T12:00:00\n'
                          'timezone = "Europe/Berlin"\nsubmitted = "file"\n')
    assert policy.late.deadline.utcoffset() == timedelta(hours=2)  # summer time
    with pytest.raises(PolicyError, match="q7"):
        policy.check(POINTS)


def test_submission_time_from_names_and_from_the_roster():
    policy = parse_policy("[late]\ndeadline = 2026-12-01T23:59:00+01:00\nsubmitted = \"name\"\n"
                          "pattern = '_attempt_(\\d{4}-\\d\\d-\\d\\d-\\d\\d-\\d\\d-\\d\\d)'\n"
                          "format = \"%Y-%m-%d-%H-%M-%S\"\n")
    named = record(handed_in_as="HW1_alice_attempt_2026-12-02-10-00-00_hw.ipynb")
    when, why = submission_time(named, policy.late)
    assert (when.isoformat(), why) == ("2026-12-02T10:00:00+01:00", "")
    when, why = submission_time(record(handed_in_as="alice/hw.ipynb"), policy.late)
    assert when is None and "does not match late.pattern" in why
    # The source is the policy's now, not the one at grading time: the file time recorded is
    # not used by a "name" policy.
    f = finalize(record(submitted=DEADLINE + timedelta(days=3), handed_in_as="alice/hw.ipynb"),
                 POINTS, policy=policy)
    assert f.late.submitted is None and f.penalty == 0

    policy = parse_policy("roster = \"roster.csv\"\n[late]\ndeadline = 2026-12-01T23:59:00+01:00\n"
                          "submitted = \"roster\"\ncolumn = \"Submitted at\"\ntimezone = \"UTC\"\n")
    roster = parse_roster("student,email,submitted_at\nalice,a@x.org,2026-12-02T00:30:00\n"
                          "bob,b@x.org,\n")
    late = finalize(record("alice/01"), POINTS, policy=policy, roster=roster)
    assert late.late.late and late.late.days == 1  # 00:30 UTC is 01:30 CET: 1h31 late
    unknown = finalize(record("bob/01"), POINTS, policy=policy, roster=roster)
    assert unknown.late.submitted is None and "empty" in unknown.late.problem
    missing = finalize(record("zoe/01"), POINTS, policy=policy, roster=roster)
    assert "no student 'zoe'" in missing.late.problem


def test_lateness_is_counted_in_real_hours_across_a_change_of_offset():
    """Europe/Berlin moves to summer time on 2026-03-29: 12:30 local that day is 23.5 hours
    after 12:00 local the day before, and "36h" of extension are 36 real hours."""
    policy = parse_policy("roster = \"r.csv\"\n[late]\ndeadline = 2026-03-28T12:00:00\n"
                          "timezone = \"Europe/Berlin\"\nsubmitted = \"roster\"\ncolumn = \"t\"\n"
                          "penalty_per_day = 10\n[late.extensions]\nbob = \"36h\"\n")
    roster = parse_roster("student,t\nalice,2026-03-29T12:30:00\ndave,2026-03-29T10:30:00Z\n"
                          "bob,2026-03-30T00:30:00\n")
    alice = finalize(record("alice/01"), POINTS, policy=policy, roster=roster)
    dave = finalize(record("dave/01"), POINTS, policy=policy, roster=roster)
    assert (alice.late.days, dave.late.days) == (1, 1)  # the same instant, 23.5 h late
    due = policy.late.due("bob")
    utc = timezone.utc
    assert (due.astimezone(utc) - policy.late.deadline.astimezone(utc)).total_seconds() == 36 * 3600
    assert due.isoformat() == "2026-03-30T01:00:00+02:00"
    bob = finalize(record("bob/01"), POINTS, policy=policy, roster=roster)
    assert not bob.late.late  # 00:30 +02:00 is 35.5 real hours after the deadline


def test_extensions_for_nobody_are_named():
    from kpca_lib.course.grading.record.policy import unknown_extensions

    policy = parse_policy(LATE.replace('bob = "2d"', 'bob = "2d"\nalcie = "1d"'))
    roster = parse_roster("student\ncarol\n")
    assert unknown_extensions(policy, ["alice", "bob"], roster) == ["alcie"]


def test_adjustment_lines_are_all_read_and_by_hand_points_need_a_score_first():
    with pytest.raises(PolicyError, match="line 2 has 6 cells but the header has 5"):
        parse_adjustments("row,question,points,score,reason\nalice/01,q1,,2,5,decimal comma\n")
    adjustments = parse_adjustments("row,question,points,score,reason\n#eve/01,q1,,0,copied\n")
    assert [a.row for a in adjustments] == ["#eve/01"]  # no comment lines: a row may start with #
    bad = parse_adjustments("row,question,points,score,reason\nalice/01,q2,+1,,x\n"
                            "bob/01,q2,,2,x\nbob/01,q2,+1,,y\n")
    with pytest.raises(PolicyError) as info:
        check_adjustments(bad, ["alice/01", "bob/01"], POINTS, by_hand=["q2"])
    assert "line 2: q2 is graded by hand" in str(info.value)
    assert "line 4" not in str(info.value)  # bob's q2 has a score first


def test_student_of_row_ids():
    assert student_of("alice/01_feature_maps") == "alice"
    assert student_of("sec1/alice/01") == "sec1/alice"
    assert student_of("alice") == "alice"


@settings(max_examples=200, deadline=None)
@given(q=st.tuples(*[st.floats(0, p) for p in POINTS.values()]),
       late_s=st.integers(-10**6, 10**7),
       adds=st.lists(st.tuples(st.sampled_from(["q1", "q2", "q3", ""]),
                               st.floats(-5, 5, allow_nan=False)), max_size=4))
def test_final_grades_stay_in_range_and_keep_the_automatic_ones(q, late_s, adds):
    policy = parse_policy(LATE)
    text = "row,question,points,score,reason\n" + "".join(
        f"alice/01,{qid},{p!r},,r\n" for qid, p in adds)
    adjustments = parse_adjustments(text)
    r = record(q=q, submitted=DEADLINE + timedelta(seconds=late_s))
    f = finalize(r, POINTS, policy=policy, adjustments=adjustments)
    assert all(0 <= f.questions[k] <= POINTS[k] for k in POINTS)
    assert 0 <= f.score <= f.subtotal <= 10
    assert f.auto == dict(zip(POINTS, q, strict=True))  # recorded, never changed
    assert f.penalty == pytest.approx(f.subtotal * f.late.percent / 100, abs=1e-6)
    assert f.late.late == (late_s > 600)


def test_roster_ids_aliases_and_cells_that_span_lines():
    with pytest.raises(RosterError, match="sis_user_id 'S1' is on line 2 and line 3"):
        parse_roster("student,SIS User ID\nalice,S1\nbob,S1\n")
    with pytest.raises(RosterError, match="line 2 has a cell that spans lines"):
        parse_roster('student,name,email\nalice,"Alice,alice@x.org\nbob,Bob,bob@x.org\n')
    r = parse_roster("Student,E-Mail,Surname,Given name\nalice,a@x.org,Liddell,Alice\n")
    assert (r["alice"].email, r["alice"].display_name) == ("a@x.org", "Alice Liddell")
    assert parse_roster("student,Email address\nalice,a@x.org\n")["alice"].email == "a@x.org"


def test_the_readmes_examples_parse():
    """The policy.toml and adjustments.csv the README shows are what the code reads."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    toml = re.search(r"```toml\n(# grades/01/policy.toml\n.*?)```", readme, re.S).group(1)
    policy = parse_policy(toml)
    assert policy.by_hand == ("q2_feature_count",) and policy.late.penalty_per_day == 10
    assert policy.late.due("bob") == policy.late.deadline + timedelta(days=2)
    text = re.search(r"```text\n# grades/01/adjustments.csv[^\n]*\n(.*?)```", readme, re.S).group(1)
    adjustments = parse_adjustments(text)
    assert [a.describe() for a in adjustments] == ["= 3", "+1", "-1"]
