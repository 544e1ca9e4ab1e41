"""The canary: the instructor's own solution, graded first under the batch's settings."""

from __future__ import annotations

import dataclasses
import errno
import json
import re
import shutil
import tempfile
from pathlib import Path

from ..config import GradeConfig
from ..judge.notebooks import Solution, release_notebook, with_answers
from ..record.gradebook import format_points
from ..record.rows import Row
from ..text import visible
from .progress import Progress
from .submission import Runner, run_submissions, start

__all__ = ["CanaryFailed", "run_canary"]


class CanaryFailed(RuntimeError):
    """The instructor's own solution did not score full marks under the batch's settings."""


def run_canary(solution: Solution, runner: Runner, config: GradeConfig, secret: bytes) -> None:
    """Grade the instructor's solution under the batch's limits first; raise
    :class:`CanaryFailed`, naming the setting to change, unless it scores full marks.

    A limit that no notebook can meet (``--memory 50``, ``--memory 2`` meant as GB, a
    ``--timeout`` shorter than the solution's slowest cell, a sandbox that cannot run
    the course) would otherwise make every row ``crashed`` or ``timeout`` and charge
    each student for the setting; this stops before any row is written.
    """
    work = None
    try:
        work = Path(tempfile.mkdtemp(prefix="kpca-canary-"))
        sub = work / f"{solution.assignment}.ipynb"
        sub.write_text(json.dumps(with_answers(release_notebook(solution), solution.nb)),
                       encoding="utf-8")
    except OSError as exc:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return  # no scratch space: every row becomes a grader failure (see scratch_full)
        raise
    try:
        row = Row("the instructor's solution", str(sub), max_score=solution.max_score,
                  questions={q: 0.0 for q in solution.questions}, sandbox=config.sandbox)
        submission = start(row, sub, 0, solution, secret, work, root=work)
        if submission is not None:
            run_submissions([submission], work, dataclasses.replace(config, jobs=1),
                            Progress(1, False), runner)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if row.status != "graded" or row.score < row.max_score:
        raise CanaryFailed(_failure(row, config))


def _failure(row: Row, config: GradeConfig) -> str:
    """What the canary's row says, and the setting to change."""
    said = " ".join([*row.messages, *(m for q in row.notes.values() for m in q)])[:600]
    plain = re.sub(r"\\(.)", r"\1", said)  # the terminal shows text, not Markdown escapes
    if row.grader_error:
        fix = (f"the grader itself could not run it ({row.grader_error}): fix that (the "
               "cluster, the disk, the installation) and grade again")
    elif row.status == "timeout" or "time limit" in said:
        fix = (f"--timeout {config.timeout:g} (seconds per cell) is too short for the solution's "
               "slowest cell: raise it")
    elif "memory" in said or "did not start" in said or row.status == "crashed":
        fix = (f"--memory {config.memory_mb} (MB per submission) is too small for the solution, "
               f"or the sandbox ({config.sandbox}) cannot run it: raise --memory (2048 is the "
               "default; the unit is MB) and check `--sandbox`")
    else:
        fix = ("the solution itself does not pass its checks here: run `kpca-course release "
               "--check` and the solutions notebook, and check --timeout, --memory and --sandbox")
    return (f"the instructor's solution scored {format_points(row.score)} / "
            f"{format_points(row.max_score)} (status {row.status}) under these settings, so no "
            f"submission was graded and nothing was written: {fix}. What the grader saw: "
            f"{visible(plain) or 'no message'}")
