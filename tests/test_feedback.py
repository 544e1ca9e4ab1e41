"""Feedback diagnoses the mistake: every catalogued mistake (tests/feedback_mistakes.py), graded
by the real grader and run through the public checks as a student would.

(a) ``kpca-course grade`` (sandboxed, ``--jobs 2``, one batch per assignment) fails exactly the
    expected checks of the mistake's question, with messages that name the slip, gives the
    expected score, and full marks to every other question (one slip never costs another
    question; right answers written differently keep full marks);
(b) the released exercise run in-process (code cells, demos skipped) prints the diagnosis in the
    check cell of every public check the mistake fails;
(c) a check the grader fails is never ✔ in the student's notebook.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from feedback_mistakes import (
    ASSIGNMENTS,
    CATALOGUE,
    FULL,
    ROOT,
    get_question,
    grade_all,
    public_ids,
    public_run,
    submission,
)
from test_grading import sandbox_or_skip

from kpca_lib.course.grading.handback.feedback import _md
from kpca_lib.course.grading.judge.notebooks import read_solution
from kpca_lib.course.grading.judge.questions import call, call_with


def _points() -> dict[str, float]:
    """Check id -> points, public and hidden."""
    out = {c.id: c.points for q in FULL for c in get_question(q).checks}
    for assignment in ASSIGNMENTS:
        for checks in read_solution(ROOT / "solutions" / f"{assignment}.ipynb").hidden.values():
            out.update({c.id: c.points for c in checks})
    return out


def test_catalogue_is_well_formed():
    mistakes = [m for m in CATALOGUE if m.fails]
    right = [m for m in CATALOGUE if not m.fails]
    assert len(mistakes) >= 40 and len(right) >= 5
    assert len({m.id for m in CATALOGUE}) == len(CATALOGUE)
    points = _points()
    for m in CATALOGUE:
        submission(m)  # the replacement applies exactly once
        assert m.fails <= set(points), (m.id, m.fails - set(points))
        assert all(c.startswith(m.question + ".") for c in m.fails), m.id
        assert set(m.messages) <= m.fails and (m.messages or not m.fails), m.id
        # the expected score is the question's points minus those of the failing checks
        assert math.isclose(m.points, FULL[m.question] - sum(points[c] for c in m.fails)), m.id
    assert {m.question for m in mistakes} == set(FULL)  # every question has mistakes


def test_call_with_restores_the_namespace():
    """The q5 probe runs the student's functions with the library's centring bound to the names
    center and center_new, and leaves the student's own bindings as they were."""
    ns = {"center": 1, "f": lambda: 10 * ns["center"] + ns.get("center_new", 0)}
    assert call_with(ns, {"center": 2, "center_new": 3}, "f") == 23
    assert ns["center"] == 1 and "center_new" not in ns
    ns["g"] = lambda: 1 / 0
    assert "ZeroDivisionError" in call_with(ns, {"center": 5}, "g")["__error__"]
    assert ns["center"] == 1 and call(ns, "f") == 10


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """grades.json record of every catalogue submission, graded by the real grader."""
    sandbox_or_skip()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KPCA_GRADING_SECRET", "test-feedback-secret")
        return grade_all(tmp_path_factory.mktemp("feedback"), jobs=2)


@pytest.fixture(scope="module")
def public():
    """Mistake id -> (check id -> (mark, message)) from the student's own notebook run."""
    return {m.id: public_run(submission(m)) for m in CATALOGUE}


def test_grader_diagnoses_each_mistake(graded):
    problems = []
    for m in CATALOGUE:
        rec = graded[m.id]
        if rec["status"] != "graded":
            problems.append(f"{m.id}: status {rec['status']} {rec['messages']}")
            continue
        checks = {c["id"]: c for c in rec["checks"]}
        failed = {cid for cid, c in checks.items() if not c["passed"] and c["question"] == m.question}
        if failed != m.fails:
            problems.append(f"{m.id}: failed {sorted(failed)}, expected {sorted(m.fails)}: "
                            + " | ".join(checks[c]["message"] for c in sorted(failed)))
        for cid, pattern in m.messages.items():
            if cid in checks and not re.search(pattern, checks[cid]["message"]):
                problems.append(f"{m.id}: {cid} says {checks[cid]['message']!r}, not /{pattern}/")
        if rec["questions"][m.question] != m.points:
            problems.append(f"{m.id}: {m.question} scored {rec['questions'][m.question]}, expected {m.points}")
        for q in ASSIGNMENTS[m.assignment]:
            if q != m.question and rec["questions"][q] != FULL[q]:
                problems.append(f"{m.id}: {q} lost points ({rec['questions'][q]} of {FULL[q]}): "
                                + " | ".join(c["message"] for c in rec["checks"]
                                             if c["question"] == q and not c["passed"]))
    assert not problems, "\n".join(problems)


def test_public_checks_show_the_diagnosis(public):
    problems = []
    for m in CATALOGUE:
        report, text = public[m.id]
        for q in ASSIGNMENTS[m.assignment]:
            missing = public_ids(q) - set(report)
            if missing:
                problems.append(f"{m.id}: no report line for {sorted(missing)}:\n{text[-1500:]}")
        for cid, (mark, message) in report.items():
            expected = cid in m.fails
            if expected and mark != "✘" or not expected and mark != "✔":
                problems.append(f"{m.id}: {cid} is {mark} in the notebook ({message})")
            if expected and cid in m.messages and not re.search(m.messages[cid], message):
                problems.append(f"{m.id}: the notebook's {cid} says {message!r}, not /{m.messages[cid]}/")
        for cid in m.fails & public_ids(m.question):
            if cid not in report:
                problems.append(f"{m.id}: the notebook shows nothing for {cid}")
    assert not problems, "\n".join(problems)


def test_never_a_public_tick_for_a_check_the_grader_fails(graded, public):
    problems = []
    for m in CATALOGUE:
        report, _ = public[m.id]
        for c in graded[m.id]["checks"]:
            if not c["passed"] and not c["hidden"] and report.get(c["id"], ("?", ""))[0] == "✔":
                problems.append(f"{m.id}: {c['id']} is ✔ in the notebook but fails in the grader "
                                f"({c['message']})")
    assert not problems, "\n".join(problems)


def test_the_grader_names_the_later_cell_that_defines_a_missing_name(graded):
    """A NameError for a name that a cell below the check cell defines: the grader, which knows
    the notebook's cells, names that cell (the notebook's check can only ask)."""
    later = [m for m in CATALOGUE if m.extra]
    assert later
    for m in later:
        first = next(c for c in graded[m.id]["checks"] if c["id"] in m.fails)
        assert re.search(r"` is defined in code cell \d+ \(`", first["message"]), (m.id, first["message"])
        assert first["message"].endswith("move that definition above it."), first["message"]


def test_feedback_file_shows_the_public_diagnosis(graded, tmp_path_factory):
    """The student's feedback file carries the grader's message of every failed public check."""
    base = Path(next(iter(graded.values()))["file"]).parents[2]
    for m in CATALOGUE:
        rec = graded[m.id]
        text = (base / "grades" / m.assignment / rec["feedback"]).read_text()
        for c in rec["checks"]:
            if not c["passed"] and not c["hidden"]:
                assert _md(c["message"]) in text, (m.id, c["id"])  # as inert text
