"""The batch's own steps around the submissions: the instructor's files, the plan, the record
of each row, the hand-back.

* :func:`read_rules`: ``policy.toml``, the roster and ``adjustments.csv``, checked first;
* :func:`plan_batch`: the row ids and which files fill them, checked against the gradebook;
* :class:`Recorder`: each finished row into the gradebook at once (a regrade keeps the rest
  of the old row);
* :func:`grade_rows`: read each submission, run and judge them, record each row;
* :func:`hand_back`: the feedback pages, the summary, and the gradebook closed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import GradeConfig, Mode
from ..handback.feedback import crash_feedback, record_feedback, row_feedback
from ..judge.notebooks import Solution
from ..record.collect import collected_entry, load_collected
from ..record.gradebook import (
    Gradebook,
    GradebookWriteError,
    common_root,
    lookalike_groups,
    problem,
    row_ids,
    suspicious_name,
)
from ..record.policy import (
    ADJUSTMENTS_FILE,
    Adjustment,
    Policy,
    check_adjustments,
    load_adjustments,
    load_policy,
)
from ..record.repair import check_fit
from ..record.roster import Roster
from ..record.rows import (
    Row,
    describe,
    grader_failure,
    regraded_record,
    restore,
    row_record,
    status_counts,
)
from ..record.summary import Summary
from ..run.handed_in import link_counts
from ..run.runner import run_all
from ..text import visible
from .progress import Progress
from .submission import Runner, Submission, run_submissions, start

__all__ = ["Batch", "Rules", "Plan", "read_rules", "open_runner", "open_gradebook", "plan_batch",
           "grade_rows", "hand_back"]

MIN_FREE_BYTES = 1 << 20


class Batch(list):  # type: ignore[type-arg]
    """The rows graded in this run (a list of :class:`Row`, in submission order), and:

    * ``skipped``: ids already in the gradebook that ``resume`` left alone;
    * ``lookalikes``: groups of row ids (this run's and the gradebook's) that look alike;
    * ``suspicious``: row id → why its name alone is suspicious (invisible characters, mixed scripts);
    * ``counts``: status → number of rows in the whole gradebook;
    * ``summary``: the whole gradebook's :class:`~kpca_lib.course.grading.record.summary.Summary`
      (``None`` if it could not be computed), ``summary_text``: ``summary.md``'s text
      (``""`` if none),
      ``summary_errors``: why ``summary.md``/``summary.png`` could not be written;
    * ``elapsed``: this run's wall clock in seconds;
    * ``sandbox``, ``out``;
    * ``not_regraded``: with ``regrade``, row id → why it was kept as it was;
    * ``replaced``, ``added``: with ``merge``, the rows replaced and the new rows;
    * ``warnings``: what to check in the instructor's files (an extension for nobody);
    * ``finals``: row id → its final grade (policy, adjustments) in the whole gradebook;
    * ``notes``: what the instructor should know of the plan (a folder given as a
      submission, the folder a new gradebook's row ids are relative to).
    """

    skipped: list[str]
    not_regraded: dict[str, str]
    replaced: list[str]
    added: list[str]
    warnings: list[str]
    finals: dict[str, Any]
    notes: list[str]
    lookalikes: list[list[str]]
    suspicious: dict[str, str]
    counts: dict[str, int]
    summary: Summary | None
    summary_text: str
    summary_errors: list[str]
    elapsed: float
    sandbox: str
    out: Path


# --------------------------------------------------------------------------- the instructor's files
@dataclass(frozen=True)
class Rules:
    """The instructor's files that every table applies: policy, roster, adjustments."""

    policy: Policy
    roster: Roster | None
    adjustments: Sequence[Adjustment]


def read_rules(config: GradeConfig, solution: Solution) -> Rules:
    """``policy.toml`` (checked against the assignment's questions), the roster and
    ``adjustments.csv`` of the gradebook folder."""
    policy = load_policy(Path(config.out))
    policy.check(solution.points)
    roster = policy.load_roster()
    return Rules(policy, roster, load_adjustments(Path(config.out)))


def open_runner(config: GradeConfig) -> contextlib.AbstractContextManager[Runner]:
    """The function that runs the notebooks: local workers, or a Dask cluster's."""
    if config.cluster is None:
        return contextlib.nullcontext(run_all)
    from ..run.cluster import open_cluster  # imports Dask

    @contextlib.contextmanager
    def runner() -> Iterator[Runner]:
        with open_cluster(config.cluster, sandbox=config.sandbox) as on_cluster:
            yield on_cluster.run_all

    return runner()


def open_gradebook(config: GradeConfig, solution: Solution) -> Gradebook:
    """The gradebook ``config.out`` in the batch's mode."""
    return Gradebook(Path(config.out), assignment=config.assignment, points=solution.points,
                     mode=config.mode.gradebook_mode,
                     titles={q: solution.question(q).title for q in solution.questions})


# --------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    """Which files fill which rows, relative to which folder, and the batch they make."""

    paths: list[Path]
    ids: list[str]
    base: Path
    batch: Batch


def plan_batch(config: GradeConfig, book: Gradebook, paths: list[Path], rules: Rules,
               solution: Solution, *, folder: Path | None = None,
               notes: Sequence[str] = ()) -> Plan:
    """The rows to grade, checked against the gradebook and ``adjustments.csv``; the tables
    apply ``rules`` from now on. ``folder``: the one folder given as the submissions
    (:func:`~..record.repair.expand_folders`), the row ids' folder of a new gradebook."""
    not_regraded: dict[str, str] = {}
    given_ids = [config.row_id] if config.row_id is not None else None
    if config.mode is Mode.REGRADE and not paths:
        paths, given_ids, not_regraded = _regrade_targets(book)
    base = Path(os.path.abspath(config.root)) if config.root is not None else (
        Path(book.root) if book.root else folder or _default_root(paths, config.assignment))
    ids = given_ids if given_ids is not None else row_ids(paths, base)
    said = config.root is not None and str(base) == book.root  # --root: the gradebook's own
    if not said and given_ids is None and config.mode in (Mode.MERGE, Mode.RESUME):
        check_fit(ids, book, f"--{config.mode.gradebook_mode}")
    if config.mode is Mode.REGRADE:
        absent = [i for i in ids if i not in book]
        if absent:
            raise ValueError(f"--regrade: {', '.join(repr(a) for a in absent[:5])} "
                             f"{'is' if len(absent) == 1 else 'are'} not in the gradebook "
                             f"{book.out}; add new submissions with --merge.")
    check_adjustments(rules.adjustments, [*book.rows, *ids], solution.points,
                      str(Path(config.out) / ADJUSTMENTS_FILE), by_hand=rules.policy.by_hand)
    book.set_policy(rules.policy, rules.adjustments, rules.roster)
    batch = _new_batch(config, book, ids, not_regraded)
    batch.notes = list(notes)
    if not book.root:
        batch.notes.append(f"row ids are relative to {base} (kept in the gradebook; "
                           "`kpca-course gradebook reroot` changes it)")
    return Plan(paths, ids, base, batch)


def _new_batch(config: GradeConfig, book: Gradebook, ids: list[str],
               not_regraded: dict[str, str]) -> Batch:
    batch = Batch()
    batch.sandbox, batch.out = config.sandbox, book.out
    resume, merge = config.mode is Mode.RESUME, config.mode is Mode.MERGE
    batch.skipped = [i for i in ids if resume and i in book]
    batch.replaced = [i for i in ids if merge and i in book]
    batch.added = [i for i in ids if merge and i not in book]
    batch.not_regraded = not_regraded
    batch.lookalikes = lookalike_groups([*book.rows, *ids])
    batch.suspicious = {}
    return batch


def _default_root(paths: list[Path], assignment: str) -> Path:
    """The folder row ids are relative to: the submissions' common folder; for one file named
    after the assignment (``alice/01_feature_maps.ipynb``), the folder above, so that the row
    keeps the student's folder name (``alice/01_feature_maps``)."""
    base = common_root(paths)
    if len(paths) == 1 and paths[0].stem == assignment and base.parent != base:
        return base.parent
    return base


def _regrade_targets(book: Gradebook) -> tuple[list[Path], list[str], dict[str, str]]:
    """Every row of the gradebook that can be graded again: the files they were graded
    from, their ids, and the rows left as they are with the reason."""
    paths, ids, kept = [], [], {}
    for rid, rec in book.rows.items():
        if rec.get("status") == "invalid":
            kept[rid] = "kept as it was: invalid (no question of it ran)"
        elif rec.get("grader_error"):
            kept[rid] = "kept as it was: the grader failed on it; grade it with --merge"
        elif not os.path.lexists(str(rec.get("file", ""))):
            kept[rid] = f"kept as it was: its file {visible(str(rec.get('file')))!r} is gone"
        else:
            paths.append(Path(str(rec["file"])))
            ids.append(rid)
    if not ids:
        raise ValueError(f"--regrade: no row of {book.out} can be graded again "
                         f"({len(kept)} kept as they are: invalid, grader failures or missing "
                         "files).")
    return paths, ids, kept


# --------------------------------------------------------------------------- record
class Recorder:
    """Writes each finished row into the gradebook at once; never raises (a row is always
    recorded), and a row is recorded once."""

    def __init__(self, config: GradeConfig, book: Gradebook, batch: Batch,
                 solution: Solution) -> None:
        self.config, self.book, self.batch, self.solution = config, book, batch, solution
        self.recorded: set[int] = set()

    def __call__(self, row: Row) -> None:
        self.recorded.add(id(row))
        if self.config.regrade is not None:
            self._regraded(row, self.config.regrade)
            return
        try:
            text = row_feedback(row, self.solution)
        except Exception as exc:
            grader_failure(row, describe(exc))
            text = crash_feedback(row, self.config.assignment)
        data = row_record(row)
        self.book.add(data, text)
        row.feedback = data["feedback"]

    def _regraded(self, row: Row, qid: str) -> None:
        """Only ``regrade``'s results replace the old row's; a row the grader could not
        grade again keeps its old grade and is reported."""
        old = self.book.rows[row.submission]
        kept = self.batch.not_regraded
        if old.get("sha256") and row.sha256 and row.sha256 != old["sha256"]:
            kept[row.submission] = (
                "kept as it was: its file changed since it was graded (a new version: grade "
                "it with --merge, which replaces the whole row)")
            restore(row, old)
            return
        if row.grader_error or row.status == "invalid":
            kept[row.submission] = f"kept as it was: {row.grader_error or problem(row_record(row))}"
            restore(row, old)
            return
        try:
            data = regraded_record(old, row_record(row), qid, self.solution)
            text = record_feedback(data, self.solution)
        except Exception as exc:
            kept[row.submission] = f"kept as it was: {describe(exc)}"
            restore(row, old)
            return
        self.book.add(data, text)
        restore(row, data)


# --------------------------------------------------------------------------- grade the rows
def grade_rows(config: GradeConfig, plan: Plan, solution: Solution, secret: bytes,
               runner: Runner, book: Gradebook) -> float:
    """Read, run, judge and record every row to grade; the batch's start on the clock."""
    todo = [(i, p, rid) for i, (p, rid) in enumerate(zip(plan.paths, plan.ids, strict=True))
            if not (config.mode is Mode.RESUME and rid in book)]
    parallel = _parallelism(runner, config.jobs)
    progress = Progress(len(todo), config.progress, parallel)
    progress.begin(_opening_line(config, len(todo), parallel, plan.batch, book))
    record = Recorder(config, book, plan.batch, solution)
    work = Path(tempfile.mkdtemp(prefix="kpca-grade-"))
    try:
        subs = _read_all(config, plan, todo, solution, secret, work, record, progress)

        def on_done(sub: Submission) -> None:
            if id(sub.row) not in record.recorded:
                _check_scratch(sub.row, work)
                record(sub.row)

        lost = "the grader lost this submission's result"
        try:
            run_submissions(subs, work, config, progress, runner, on_done)
        except Exception as exc:
            lost = describe(exc)
        for sub in subs:
            if id(sub.row) not in record.recorded:
                grader_failure(sub.row, lost)
                record(sub.row)
                progress.step(sub.row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return progress.start


def _read_all(config: GradeConfig, plan: Plan, todo: list[tuple[int, Path, str]],
              solution: Solution, secret: bytes, work: Path, record: Recorder,
              progress: Progress) -> list[Submission]:
    """A row for each submission to grade; those that cannot run are recorded at once."""
    similar = {rid: [o for o in g if o != rid] for g in plan.batch.lookalikes for rid in g}
    links = link_counts(plan.paths, plan.base)
    collected = load_collected(plan.base)  # what kpca-course collect recorded, read once
    subs = []
    for i, path, rid in todo:
        row = _new_row(config, plan, solution, path, rid, similar)
        try:
            sub = start(row, path, i, solution, secret, work, root=plan.base, batch=links)
        except Exception as exc:  # a grader-side failure on this submission only
            grader_failure(row, describe(exc))
            sub = None
        if row.sha256:
            row.collected = collected_entry(collected, row.handed_in_as, row.sha256) or {}
        if sub is not None and config.regrade is not None:  # only its export cell runs
            sub.done.update(q for q in solution.questions if q != config.regrade)
        if sub is None:
            record(row)
            progress.step(row)
        else:
            subs.append(sub)
    return subs


def _new_row(config: GradeConfig, plan: Plan, solution: Solution, path: Path, rid: str,
             similar: dict[str, list[str]]) -> Row:
    """The row of one submission, with its name checked (look-alikes, suspicious names)."""
    row = Row(rid, str(path), max_score=solution.max_score,
              questions={q: 0.0 for q in solution.questions}, sandbox=config.sandbox)
    plan.batch.append(row)
    row.lookalikes = similar.get(rid, [])
    why = suspicious_name(rid)
    if why:
        plan.batch.suspicious[rid] = why
    if row.lookalikes or why:
        row.messages.append(
            "the instructor checks this submission's name: "
            + (why or "it looks like another submission's name (look-alike letters, "
               "case or invisible characters)") + ".")
    row.handed_in_as = _handed_in_as(path, plan.base)
    return row


def _opening_line(config: GradeConfig, n: int, parallel: int, batch: Batch, book: Gradebook) -> str:
    cluster = config.cluster
    where = ((f"on the Dask cluster {cluster}" if isinstance(cluster, str) else "on a Dask cluster")
             + f" ({parallel} worker thread{'s' if parallel != 1 else ''})"
             if cluster is not None else f"{config.jobs} parallel job{'s' if config.jobs != 1 else ''}")
    what = f"regrading {config.regrade} in" if config.regrade else "grading"
    return (f"{what} {n} submission{'s' if n != 1 else ''} of {config.assignment}: "
            f"{where}, sandbox {config.sandbox}"
            + (f"; {len(batch.skipped)} already in the gradebook (--resume)"
               if batch.skipped else "") + f"; gradebook {book.out}")


def _parallelism(runner: Runner, jobs: int) -> int:
    """How many notebooks run at once: ``jobs`` locally, a cluster's worker threads."""
    threads = getattr(getattr(runner, "__self__", None), "threads", None)
    return threads() if callable(threads) else max(1, jobs)


def _handed_in_as(sub: Path, base: Path) -> str:
    """The submission's path relative to the submissions' folder (its name, for a file from
    elsewhere): what ``late.submitted = "name"`` reads."""
    relative = os.path.relpath(sub, base) if Path(sub).is_relative_to(base) else Path(sub).name
    return relative.replace(os.sep, "/")


def _check_scratch(row: Row, work: Path) -> None:
    """A row finished while the scratch folder's disk was full is a grader failure."""
    try:
        full = scratch_full(work)
        if full:
            grader_failure(row, full)
    except Exception as exc:
        grader_failure(row, describe(exc))


def scratch_full(work: Path) -> str:
    """Why the scratch folder's disk is (nearly) full, or ``""``."""
    try:
        st = os.statvfs(work)
    except OSError:
        return ""
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES or (st.f_files and st.f_favail == 0):
        return (f"the grader's disk is full: {free // 1024} KB free for its scratch folder in "
                f"{work.parent}, so answers may have been lost")
    return ""


# --------------------------------------------------------------------------- hand back
def hand_back(batch: Batch, book: Gradebook, started: float) -> None:
    """Rebuild the feedback pages and the summary, close the gradebook and count its rows.

    A gradebook that could not be written raises
    :class:`~kpca_lib.course.grading.record.gradebook.GradebookWriteError` with ``batch``."""
    from ..handback.trees import refresh  # the feedback pages and the summary's figure

    done = refresh(book)
    batch.summary, batch.summary_text, batch.summary_errors = done.summary, done.text, done.errors
    batch.finals, batch.warnings = done.finals, done.warnings
    batch.elapsed = time.monotonic() - started
    try:
        book.close()
    except GradebookWriteError as exc:
        exc.batch = batch  # type: ignore[attr-defined]
        batch.counts = status_counts(book.rows.values())
        raise
    batch.counts = status_counts(book.rows.values())
