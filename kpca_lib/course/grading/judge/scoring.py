"""From a run's exports to scores: the judge's steps for one submission.

Everything here reads plain data: the exports' signed JSON text, the notebook the grader built
(:class:`~kpca_lib.course.grading.judge.notebooks.GradingNotebook`) and the cells that raised,
as ``(label, exception name, message)``. Nothing comes from the kernel as an object, and
nothing here imports the runner.

* :func:`draw_inputs`: each question's inputs, seeded by a secret and the answer's source;
* :func:`accept_exports`: each question's export from its own export cell, signature checked;
* :func:`score_questions`: the public and hidden checks of every question;
* :func:`explain`: what the run showed about each question's cells, in the student's words.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .dependencies import top_binds
from .evaluate import CheckResult, decode_payload, make_inputs, run_checks
from .method import grader_names, unverifiable
from .notebooks import GradingNotebook, Solution
from .plain import loads
from .questions import Question

__all__ = ["draw_inputs", "accept_exports", "score_questions", "forbidden_mentions", "explain",
           "memory_error", "memory_hint"]

#: The notes of a cell that reads a widget's value instead of writing its answer down.
WIDGET_NOTE = (
    "{label} reads {names}, made by a widget or figure cell of the assignment. The grader runs "
    "that cell too, but nobody moves its sliders there: they keep their starting values. Write "
    "the value you chose into the answer cell (the line shown under the slider) instead of "
    "reading the widget.")


def question_seed(secret: bytes, assignment: str, qid: str, sources: list[str]) -> int:
    """The seed of a question's inputs: the secret's HMAC of the assignment, the question and
    the sources the student wrote (the same submission always gets the same inputs)."""
    digest = hmac.new(secret, "\0".join([assignment, qid, *sources]).encode(), hashlib.sha256)
    return int.from_bytes(digest.digest()[:8], "big")


def draw_inputs(solution: Solution, built: GradingNotebook, secret: bytes) -> dict[str, dict[str, Any]]:
    """Each question's inputs for this submission (question -> name -> value)."""
    written = [c.source for c, kind in zip(built.nb.cells, built.kinds, strict=True)
               if kind in ("answer", "student")]
    return {qid: make_inputs(solution.question(qid),
                             question_seed(secret, solution.assignment, qid, written),
                             solution.hidden.get(qid, ()))
            for qid in solution.questions}


def accept_exports(built: GradingNotebook, records: Mapping[int, list[Any]], key: bytes, *,
                   done: set[str], failed_cell: int | None = None,
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """Each question's export from its own export cell only, and only when no cell before it
    ran out of time or memory (answers exported after ``failed_cell`` are discarded).

    Returns ``(answers, failures)``: question -> its exported answers, and question -> why they
    could not be read. The questions of both are done; those of ``done`` are not looked at.
    """
    answers: dict[str, Any] = {}
    failures: dict[str, str] = {}
    for qid, cell in built.exports.items():
        if qid in done or (failed_cell is not None and cell >= failed_cell):
            continue
        found = records.get(cell) or []
        if not found:
            continue
        try:
            answers[qid] = _signed_answers(found[-1], key, qid)
        except Exception as exc:
            failures[qid] = f"the exported answers could not be read ({exc})"
    return answers, failures


def _signed_answers(record: Any, key: bytes, qid: str) -> Any:
    """The answers of one export record, once its HMAC and question are checked."""
    if not isinstance(record, dict):
        raise ValueError("it is not a record")
    payload_text = record["payload"]
    if not isinstance(payload_text, str):
        raise ValueError("its payload is not text")
    mac = hmac.new(key, payload_text.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, str(record["mac"])):
        raise ValueError("its signature does not match")
    payload = loads(payload_text)
    if not isinstance(payload, dict) or payload.get("question") != qid:
        raise ValueError("it is for another question")
    return payload.get("answers")


def score_questions(solution: Solution, built: GradingNotebook | None, answers: Mapping[str, Any],
                    failures: Mapping[str, str], zeroed: set[str],
                    inputs: Mapping[str, dict[str, Any]]) -> tuple[list[CheckResult], dict[str, float]]:
    """Every check of every question, and each question's score.

    A question that ran out of time or memory (``zeroed``) scores 0 with the reason; a question
    whose cells mention a name it forbids, not seen called, has none of its checks count."""
    checks: list[CheckResult] = []
    scores: dict[str, float] = {}
    for qid in solution.questions:
        question: Question = solution.question(qid)
        mentioned = forbidden_mentions(question, answers.get(qid), built)
        if qid in answers and qid not in zeroed and not mentioned:
            given = decode_payload(answers[qid])
        else:
            why = mentioned or failures.get(qid, "no answer was recorded")
            given = decode_payload({"__probe__": {"__error__": why}})
        results = run_checks(question, given, inputs.get(qid, {}), solution.hidden.get(qid, []))
        if qid in zeroed:  # ran out of time or memory: the question scores 0, as said
            why = failures.get(qid, "it did not finish")
            results = [CheckResult(r.id, r.question, r.description, r.points, False,
                                   why if k == 0 else "(the same stop as above: nothing could be checked)",
                                   r.hidden)
                       for k, r in enumerate(results)]
        if built is not None and qid in built.exports:
            results = [_name_defined_later(r, built, built.exports[qid]) for r in results]
        checks.extend(results)
        scores[qid] = float(sum(r.score for r in results))
    return checks, scores


_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")


def defined_later(built: GradingNotebook, cell: int, name: str) -> str:
    """`` `name` is defined in code cell 9 (`def helper(K):`), below ...``: the first cell after
    ``cell`` that the student wrote and that binds ``name``; ``""`` when none does."""
    for j in range(cell + 1, len(built.kinds)):
        if built.kinds[j] in ("answer", "student") and name in (top_binds(built.nb.cells[j].source) or ()):
            return (f" `{name}` is defined in {built.labels[j]}, below the cell that needs it: the grader runs "
                    "the cells in order, as Restart & Run All does, so move that definition above it.")
    return ""


def _name_defined_later(result: CheckResult, built: GradingNotebook, export: int) -> CheckResult:
    """A failed check whose message is a NameError for a name a later cell defines says which cell."""
    found = None if result.passed else _NAME_ERROR.search(result.message)
    later = defined_later(built, export, found.group(1)) if found else ""
    return replace(result, message=result.message.rstrip() + later) if later else result


def forbidden_mentions(question: Question, payload: Any, built: GradingNotebook | None) -> str:
    """Why none of the question's checks count under its method rule (``forbid``), ``""`` if
    they do: read from the submitted source on this side (:func:`.method.unverifiable`, every
    cell the student wrote before the question's check cell). The kernel's own report of a
    forbidden call (``payload["__forbidden__"]``) only keeps the honest slip's partial credit
    when no cell could have forged it."""
    if not question.forbid or built is None:
        return ""
    end = built.exports.get(question.id, len(built.kinds))
    mine = [c for c, kind in enumerate(built.kinds[:end]) if kind in ("answer", "student")]
    theirs = [built.nb.cells[c].source for c in sorted(set(range(end)) - set(mine))]
    seen = payload.get("__forbidden__") if isinstance(payload, dict) else None
    return unverifiable(question.forbid, [(built.labels[c], built.nb.cells[c].source) for c in mine],
                        reported=isinstance(seen, list) and bool(seen), grader=grader_names(theirs))


def explain(built: GradingNotebook, errors: Mapping[int, tuple[str, str, str]], skip: set[int],
            memory_mb: int) -> tuple[dict[str, list[str]], list[str]]:
    """The run's facts about each question's cells, in the student's words: cells that raised
    (with the real exception), and cells that read a widget or figure.

    Returns ``(notes, messages)``: question -> lines, and lines about no question. They are
    plain text (the feedback escapes them): an exception's name and message and a cell's first
    line come from the student's code. ``skip``: cells that ran into a limit (said already).
    """
    notes: dict[str, list[str]] = {}
    messages: list[str] = []
    for cell in sorted(errors):
        qid = built.owners[cell] if cell < len(built.owners) else None
        text = _raised(built, cell, errors[cell], qid)
        hint = "" if cell in skip else memory_hint(errors[cell][1], memory_mb)  # skip: the limit was seen
        if qid is None:
            messages.append(f"{text} (after the last check cell; no question depends on it)." + hint)
        elif built.kinds[cell] == "export":
            notes.setdefault(qid, []).append(
                text + ". It ran your functions on the grader's inputs there, so no answer of this "
                "question could be recorded." + hint)
        else:
            notes.setdefault(qid, []).append(
                text + ". The grader ran your notebook from the top, as Restart & Run All does; "
                "what this cell defines was missing when the question was checked." + hint)
    for cell, names in sorted(built.widget_reads.items()):
        qid = built.owners[cell]
        if qid is not None:
            shown = ", ".join(f"`{n}`" for n in names)
            notes.setdefault(qid, []).append(WIDGET_NOTE.format(label=built.labels[cell], names=shown))
    return notes, messages


def _raised(built: GradingNotebook, cell: int, error: tuple[str, str, str], qid: str | None) -> str:
    """``code cell 7 (`...`) raised NameError: ...``, saying where the grader checks ``qid``, if
    there."""
    label, ename, evalue = error
    kind = built.kinds[cell]
    where = f"{label}, where the grader checks {qid}," if kind == "export" else label
    text = f"{where} raised {ename}" + (f": {evalue}" if evalue else "")
    found = _NAME_ERROR.search(f"{ename}: {evalue}") if ename == "NameError" else None
    if found:
        text += defined_later(built, cell, found.group(1)).rstrip(".")
    if kind in ("setup", "demo"):
        text += " (a cell of the assignment: did a cell above it change a name it uses?)"
    return text


def memory_error(ename: Any) -> bool:
    """Whether an exception's name (as the kernel reported it: the student's to choose) is a
    memory error: ``MemoryError``, NumPy's ``_ArrayMemoryError``."""
    return isinstance(ename, str) and ename.endswith("MemoryError")


def memory_hint(ename: str, memory_mb: int) -> str:
    """For a cell that raised a memory error that no limit counter saw: the limit it may have
    met, as a possibility (a cell can raise ``MemoryError`` itself); ``""`` otherwise."""
    if not memory_error(ename):
        return ""
    return (f" If this {ename} came from the grader's memory limit rather than from your code, that "
            f"limit is {memory_mb} MB for the whole notebook (its files in /tmp included).")
