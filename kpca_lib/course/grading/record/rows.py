"""One graded row: what the grader found for one submission, and the record the gradebook keeps.

:class:`Row` is filled step by step as a submission is read, run and judged;
:func:`row_record` is what ``grades.json`` stores of it. A row the grader could not grade by
its own fault is :func:`grader_failure`; :func:`regraded_record` merges a regrade of one
question into the old record.
"""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..judge.evaluate import CheckResult
from ..judge.notebooks import Solution
from .policy import format_time

__all__ = ["Row", "row_record", "grader_failure", "describe", "restore", "regraded_record",
           "status_counts"]


@dataclass
class Row:
    """One submission's result."""

    submission: str
    file: str
    status: str = "graded"
    max_score: float = 0.0
    questions: dict[str, float] = field(default_factory=dict)
    checks: list[CheckResult] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    #: ``"bwrap"`` or ``"none"``: how the submission's code was run.
    sandbox: str = "bwrap"
    #: Set when the row is ``crashed`` by the grader's fault (full disk, a grader bug), not the student's.
    grader_error: str = ""
    #: Other row ids this one's name looks like (Unicode look-alikes, case, invisible characters).
    lookalikes: list[str] = field(default_factory=list)
    #: ``feedback/<name>.md`` inside the gradebook.
    feedback: str = ""
    #: Wall clock of its notebook run(s) in seconds (0 when none ran: ``invalid``).
    seconds: float = 0.0
    #: What the run showed about each question's cells (a cell that raised, a widget read):
    #: question -> lines for the feedback.
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: What the grader read: the file's modification time (ISO 8601, UTC), its path relative
    #: to the submissions' folder and its SHA-256 (the late-work policy's sources; a regrade
    #: checks the file is still the one graded). ``""`` when not read.
    file_time: str = ""
    handed_in_as: str = ""
    sha256: str = ""
    #: What ``kpca-course collect`` recorded of the file (the LMS's time and late mark, when
    #: it was received): the late-work policy's default source. ``{}`` when not collected.
    collected: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return float(sum(self.questions.values()))


def row_record(row: Row) -> dict[str, Any]:
    """The row as ``grades.json`` stores it."""
    data: dict[str, Any] = {
        "submission": row.submission, "file": row.file, "feedback": row.feedback,
        "sandbox": row.sandbox, "status": row.status, "score": row.score,
        "max_score": row.max_score, "run_seconds": round(row.seconds, 3),
        "questions": dict(row.questions), "messages": list(row.messages),
        "checks": [c.to_dict() for c in row.checks],
    }
    if row.notes:
        data["notes"] = {q: list(v) for q, v in row.notes.items()}
    if row.grader_error:
        data["grader_error"] = row.grader_error
    if row.lookalikes:
        data["lookalikes"] = list(row.lookalikes)
    for key in ("file_time", "handed_in_as", "sha256", "collected"):
        if getattr(row, key):
            data[key] = getattr(row, key)
    return data


def grader_failure(row: Row, reason: str) -> None:
    """The row is ``crashed`` by the grader's fault: no score is kept, the reason is shown."""
    row.status = "crashed"
    row.grader_error = reason
    row.questions = {q: 0.0 for q in row.questions}
    row.checks = []
    row.messages.append(f"the grader failed on this submission, not through any fault of "
                        f"yours ({reason}); it was not graded and will be graded again.")


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the grader's disk is full ({exc.strerror})"
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def restore(row: Row, data: dict[str, Any]) -> None:
    """Show ``data`` (the row as the gradebook now holds it) in ``row`` for the progress line."""
    row.status = data["status"]
    row.questions = dict(data["questions"])
    row.grader_error = str(data.get("grader_error", ""))


def regraded_record(old: dict[str, Any], new: dict[str, Any], qid: str,
                     solution: Solution) -> dict[str, Any]:
    """``old`` with question ``qid``'s score, checks, notes and messages from ``new`` (a run
    that checked only ``qid``), and the regrade recorded; everything else kept."""
    data = json.loads(json.dumps(old))
    data["questions"][qid] = new["questions"][qid]
    data["score"] = float(sum(data["questions"].values()))
    order = {q: i for i, q in enumerate(solution.questions)}
    checks = [c for c in old.get("checks", []) if c.get("question") != qid]
    checks += [c for c in new.get("checks", []) if c.get("question") == qid]
    data["checks"] = sorted(checks, key=lambda c: order.get(c.get("question"), len(order)))
    notes = {q: v for q, v in (old.get("notes") or {}).items() if q != qid}
    if (new.get("notes") or {}).get(qid):
        notes[qid] = new["notes"][qid]
    data.pop("notes", None)
    if notes:
        data["notes"] = {q: notes[q] for q in sorted(notes, key=lambda q: order.get(q, len(order)))}
    mine = f"{qid}: "
    data["messages"] = ([m for m in old.get("messages", []) if not m.startswith(mine)]
                        + [m for m in new.get("messages", []) if m.startswith(mine)])
    others_stopped = any(m.startswith(f"{q}: ") and " stopped: " in m
                         for q in solution.questions if q != qid for m in data["messages"]) or any(
        m.startswith("the notebook could not run") for m in data["messages"])
    if new["status"] != "graded":
        data["status"] = new["status"]
    elif old["status"] != "graded" and not others_stopped:
        data["status"] = "graded"
    data.setdefault("regraded", []).append({
        "question": qid, "at": format_time(datetime.now(timezone.utc)),
        "before": old["questions"][qid], "after": new["questions"][qid]})
    return data


def status_counts(records: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts
