"""The pipeline: a batch of submissions through the grader's rooms, as a chain of named steps.

``kpca-course grade`` and :func:`grade_batch` build a :class:`~..config.GradeConfig` once and
call :func:`grade`::

    check the settings and the submissions' paths       (config, record.gradebook)
    read the solution and the instructor's files        (judge.notebooks, record.policy)
    open the runner and the gradebook                   (run, record.gradebook)
    plan the rows                                       (pipeline.batch)
    canary: the instructor's solution scores full marks (pipeline.canary)
    grade the rows: read → run (sandboxed) → judge → record, each row at once
    hand back: feedback pages, summary; close the gradebook   (handback, record.summary)

Each submission's own route is in :mod:`.submission`; the batch's steps in :mod:`.batch`.
Nothing below the pipeline imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import GradeConfig, Mode, grading_secret
from ..judge.notebooks import read_solution
from ..record.gradebook import submission_paths
from ..record.repair import expand_folders
from .batch import Batch, grade_rows, hand_back, open_gradebook, open_runner, plan_batch, read_rules
from .canary import CanaryFailed, run_canary

__all__ = ["grade", "grade_batch", "Batch", "CanaryFailed"]


def grade(config: GradeConfig, submissions: Sequence[Path]) -> Batch:
    """Grade ``submissions`` into the gradebook ``config.out``; see :func:`grade_batch`."""
    config.check_submissions(len(submissions))
    regrading_all = config.mode is Mode.REGRADE and not submissions
    paths = [] if regrading_all else submission_paths(submissions)
    paths, folder, notes = expand_folders(paths, config.assignment, Path(config.out))
    config.check_submissions(len(paths) if paths else len(submissions))
    if config.cluster is None:
        from ..run.sandbox import check_sandbox

        check_sandbox(config.sandbox)
    solution = read_solution(config.solution_path)
    config.check_questions(solution.points)
    rules = read_rules(config, solution)
    with open_runner(config) as runner, open_gradebook(config, solution) as book:
        plan = plan_batch(config, book, paths, rules, solution, folder=folder, notes=notes)
        secret = grading_secret(config.seed)
        run_canary(solution, runner, config, secret)
        book.start(plan.base, config.sandbox)
        book.set_order(plan.ids)
        started = grade_rows(config, plan, solution, secret, runner, book)
        hand_back(plan.batch, book, started)
    return plan.batch


def grade_batch(*, assignment: str, submissions: list[Path], out: Path, solutions: Path,
                timeout: float = 30.0, jobs: int = 2, memory_mb: int = 2048,
                progress: bool = False, seed: str | None = None, sandbox: str = "bwrap",
                resume: bool = False, merge: bool = False, root: Path | None = None,
                cluster: Any = None, row_id: str | None = None,
                regrade: str | None = None, notebook_timeout: float | None = None) -> Batch:
    """Grade ``submissions`` of ``assignment`` into the gradebook ``out``.

    Every finished row is written at once (``grades.csv``, ``grades.json``,
    ``feedback/``; see :mod:`kpca_lib.course.grading.record.gradebook`), with its run time, and
    ``summary.md``/``summary.png`` are rebuilt from the whole gradebook at the end.
    ``progress``: a start line and a line per finished row on stderr. ``resume`` grades only
    the submissions missing from an existing gradebook, ``merge`` adds or replaces rows
    and keeps the others; without either, ``out`` must be new or empty. Row ids are
    paths relative to ``root`` (default: the existing gradebook's, else the
    submissions' common folder).

    Raises ``ValueError`` (unknown assignment, missing submission, unusable ``out``)
    and ``RuntimeError`` (sandbox unavailable) before grading anything, and
    :class:`~kpca_lib.course.grading.record.gradebook.GradebookWriteError` after grading if
    rows could not be written (its ``batch`` attribute holds the rows).

    ``cluster`` (``local:N``, ``tcp://HOST:PORT``, a scheduler file, or a
    :class:`~kpca_lib.course.grading.run.cluster.ClusterRunner`) runs the notebooks on a
    Dask cluster instead of ``jobs`` local workers (:mod:`kpca_lib.course.grading.run.cluster`);
    everything else, the secret and the checks included, stays in this process. Without
    it Dask is not imported.

    ``row_id`` (with ``merge`` and one submission): the row the submission fills, wherever
    the file is (late work kept elsewhere). ``regrade`` (a question id): grade that question
    again for ``submissions`` (default: every row of the gradebook, from the file it was
    graded from) and keep everything else of each row.

    The instructor's ``policy.toml`` and ``adjustments.csv`` in ``out`` (see
    :mod:`~kpca_lib.course.grading.record.policy`) are read first, checked against the assignment
    and the gradebook's rows (a :class:`~kpca_lib.course.grading.record.policy.PolicyError`
    stops before anything is graded), and applied to every table written.

    A thin wrapper: the keywords make one :class:`~kpca_lib.course.grading.config.GradeConfig`
    (checked there) for :func:`grade`.
    """
    config = GradeConfig.of(assignment=assignment, solutions=Path(solutions), out=Path(out),
                            timeout=timeout, jobs=jobs, memory_mb=memory_mb, progress=progress,
                            seed=seed, sandbox=sandbox, resume=resume, merge=merge, root=root,
                            cluster=cluster, row_id=row_id, regrade=regrade,
                            notebook_timeout=notebook_timeout)
    return grade(config, submissions)
