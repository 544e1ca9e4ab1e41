"""One submission on its way through the rooms: read, run (sandboxed, re-run after a stop),
judged.

:func:`start` reads a handed-in file and builds the notebook the grader runs;
:func:`run_submissions` runs every submission's notebook (``config.jobs`` at a time, or on a
cluster) and, after a question ran out of time or memory, runs it again without the questions
already done; :func:`judge` scores it from what its exports said. Each step here is a short
function over a :class:`Submission`; the rooms' own functions do the work.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..config import GradeConfig
from ..judge.notebooks import GradingNotebook, Solution, extract_answers, grading_notebook, meta
from ..judge.scoring import accept_exports, draw_inputs, explain, score_questions
from ..record.policy import format_time
from ..record.rows import Row
from ..run.handed_in import read_submission
from ..run.kernel_side import PREAMBLE
from ..run.outcome import cell_errors, classify, limit_words, never_started
from ..run.runner import Run, write_attempt
from .progress import Progress

__all__ = ["Submission", "start", "run_submissions", "MAX_RESUMES"]

MAX_RESUMES = 3


@dataclass
class Submission:
    """One submission's state between the steps (its :class:`Row` is what is recorded)."""

    row: Row
    solution: Solution
    notebook: Any  # the notebook as read (a dict; hostile structure tolerated)
    inputs: dict[str, dict[str, Any]]
    scratch: Path  # this submission's private folder (0700) in the grader's work folder
    key: bytes
    built: GradingNotebook
    done: set[str] = field(default_factory=set)  # questions exported or given up
    failures: dict[str, str] = field(default_factory=dict)  # question -> why it scored 0
    zeroed: set[str] = field(default_factory=set)  # questions that ran out of time or memory
    attempts: int = 0
    skip: set[int] = field(default_factory=set)  # cells that ran out of time or memory before
    #: Cells that raised: index -> (label, exception name, message), from every attempt.
    errors: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)  # question -> exported payload
    resume: bool = False
    finished: bool = False


# --------------------------------------------------------------------------- read
def start(row: Row, path: Path, index: int, solution: Solution, secret: bytes, work: Path, *,
          root: Path | None = None, batch: Counter[tuple[int, int]] | None = None,
          ) -> Submission | None:
    """Read one submission: a submission to run, or ``None`` with the row ``invalid``."""
    facts: dict[str, Any] = {}
    nb, reason = read_submission(path, solution.assignment, root=root, batch=batch, facts=facts)
    if "mtime" in facts:
        row.file_time = format_time(datetime.fromtimestamp(facts["mtime"], timezone.utc))
        row.sha256 = facts["sha256"]
    if nb is None:
        row.status = "invalid"
        row.messages.append(reason)
        return None
    sources, notes = extract_answers(nb, solution)
    if not sources and not any(meta(c) for c in nb["cells"]):
        row.status = "invalid"
        row.messages.append(f"no answer cell of assignment {solution.assignment!r} was found: "
                            "is this the right notebook?")
        return None
    row.messages.extend(notes)
    built = grading_notebook(solution, nb, PREAMBLE)
    scratch = work / f"s{index:04d}"
    scratch.mkdir(mode=0o700)
    return Submission(row, solution, nb, draw_inputs(solution, built, secret), scratch,
                      os.urandom(32), built)


# --------------------------------------------------------------------------- run
def attempt(sub: Submission) -> Run:
    """Write the next attempt: the notebook without the questions already done."""
    sub.attempts += 1
    if sub.skip or sub.done:  # the first attempt runs what start built
        sub.built = grading_notebook(sub.solution, sub.notebook, PREAMBLE, skip=sub.skip,
                                     done=sub.done)
    return write_attempt(sub.scratch, sub.built.nb, sub.key, sub.inputs)


def after_run(sub: Submission, run: Run, config: GradeConfig) -> None:
    """Take what one attempt showed: the cells that raised, the answers exported before any
    stop, and the cell that ran out of time or memory (its question scores 0; the notebook
    runs again without it while questions are left and :data:`MAX_RESUMES` allows).

    An attempt whose kernel never started ran nothing of the student's: it is run again as it
    was, charging nothing, while :data:`MAX_RESUMES` allows."""
    sub.row.seconds += run.seconds
    if never_started(run) and sub.attempts < MAX_RESUMES:
        sub.resume = True
        return
    built = sub.built
    status, cell, message = classify(run)
    for k, error in cell_errors(run, built).items():
        sub.errors.setdefault(k, error)
    answers, failures = accept_exports(built, run.exports, sub.key, done=sub.done,
                                       failed_cell=cell if status != "graded" else None)
    sub.done |= answers.keys() | failures.keys()
    sub.answers.update(answers)
    sub.failures.update(failures)
    run.exports.clear()  # keep only what was accepted (sub.answers)
    if status != "graded":
        _stopped(sub, status, cell, limit_words(message, config.timeout, config.memory_mb))


def _stopped(sub: Submission, status: str, cell: int | None, message: str) -> None:
    """A cell (or the whole notebook, ``cell is None``) stopped with ``status``."""
    built, row = sub.built, sub.row
    inside = cell is not None and cell < len(built.owners)
    qid = built.owners[cell] if inside else None
    where = built.labels[cell] if inside else "the notebook"
    if row.status == "graded":
        row.status = status
    if cell is None or (qid is None and built.kinds[cell] in ("preamble", "question")):
        row.messages.append(f"the notebook could not run: {message}.")
        sub.zeroed.update(q for q in sub.solution.questions if q not in sub.done)
    elif qid is None:  # after the last check cell: every answer was read already
        row.messages.append(f"{where}, after the last check cell, stopped: {message}; "
                            "every question had been checked before it.")
    else:
        sub.failures[qid] = f"{where} stopped: {message}, so this question scores 0"
        sub.zeroed.add(qid)
        sub.answers.pop(qid, None)
        row.messages.append(f"{qid}: {where} stopped: {message}; the question "
                            "scores 0 and the grader went on with the next questions.")
        sub.done.add(qid)
        sub.skip.add(cell)
        sub.resume = sub.attempts < MAX_RESUMES and any(
            q not in sub.done for q in sub.solution.questions)


# --------------------------------------------------------------------------- judge
def judge(sub: Submission, config: GradeConfig) -> None:
    """Score every question and explain each question's cells into the row."""
    notes, messages = explain(sub.built, sub.errors, sub.skip, config.memory_mb)
    for qid, lines in notes.items():
        sub.row.notes.setdefault(qid, []).extend(lines)
    sub.row.messages.extend(messages)
    sub.row.checks, scores = score_questions(sub.solution, sub.built, sub.answers, sub.failures,
                                             sub.zeroed, sub.inputs)
    sub.row.questions.update(scores)


def crash(sub: Submission, why: str) -> None:
    """This submission could not be graded: ``crashed`` with the reason, nothing kept."""
    sub.row.status = "crashed"
    sub.row.grader_error = why
    sub.row.messages.append(f"the grader could not grade this submission: {why}.")
    sub.answers.clear()
    sub.zeroed.update(sub.solution.questions)
    sub.resume = False


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- the loop
Runner = Callable[..., None]


def run_submissions(subs: list[Submission], work: Path, config: GradeConfig, progress: Progress,
                    runner: Runner, on_done: Callable[[Submission], None] | None = None) -> None:
    """Run every submission (again, without the questions already done, after a question ran
    out of time or memory); judge each and call ``on_done`` once per submission.

    ``runner`` runs the notebooks: :func:`~kpca_lib.course.grading.run.runner.run_all`, or a
    cluster's (:meth:`kpca_lib.course.grading.run.cluster.ClusterRunner.run_all`), with
    ``config.jobs`` workers. An exception while preparing, running or reading one submission
    makes its row ``crashed`` with the reason; the batch goes on.
    """

    def finish(sub: Submission) -> None:
        if sub.finished:
            return
        sub.finished = True
        try:
            judge(sub, config)
        except Exception as exc:
            crash(sub, _why(exc))
            for qid in sub.solution.questions:
                sub.row.questions[qid] = 0.0
        if on_done is not None:
            on_done(sub)
        progress.step(sub.row)

    pending = [sub for sub in subs if not sub.finished]
    while pending:
        _one_round(pending, work, config, runner, finish)
        pending = [sub for sub in pending if sub.resume and not sub.finished]


def _one_round(pending: list[Submission], work: Path, config: GradeConfig, runner: Runner,
               finish: Callable[[Submission], None]) -> None:
    """Run one attempt of every pending submission; finish those that need no other."""
    by_run: dict[int, Submission] = {}
    runs: list[Run] = []
    for sub in pending:
        sub.resume = False
        try:
            run = attempt(sub)
        except Exception as exc:  # e.g. ENOSPC in the work folder
            crash(sub, _why(exc))
            finish(sub)
            continue
        by_run[id(run)] = sub
        runs.append(run)

    def done(run: Run) -> None:
        sub = by_run[id(run)]
        try:
            after_run(sub, run, config)
        except Exception as exc:
            crash(sub, _why(exc))
        if not sub.resume:
            finish(sub)

    try:
        runner(runs, work, timeout=config.timeout, memory_mb=config.memory_mb, jobs=config.jobs,
               sandbox=config.sandbox, on_done=done, notebook_timeout=config.notebook_timeout)
    except Exception as exc:
        for sub in by_run.values():
            if not sub.finished and not sub.resume:
                crash(sub, _why(exc))
                finish(sub)
    for run in runs:  # a run that was never reported cannot stay pending
        sub = by_run[id(run)]
        if not sub.finished and not sub.resume:
            crash(sub, run.note or "its run was lost")
            finish(sub)
