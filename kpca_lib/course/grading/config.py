"""What a batch is graded with: one frozen :class:`GradeConfig`, checked in one place.

``kpca-course grade`` builds it once from its arguments (:meth:`GradeConfig.from_args`), and
:func:`kpca_lib.course.grading.pipeline.grade_batch` builds it from its keywords; every check
of the settings (the mode, ``--row-id``, ``--memory``, ``--timeout``, ``--jobs``, the sandbox's
name, the assignment's solutions notebook) is made in :meth:`GradeConfig.__post_init__`, before
anything is read or graded. The steps of the pipeline receive the object whole.

This module imports nothing else of the grader: every room may read a configuration.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from .text import visible

__all__ = ["GradeConfig", "Mode", "SANDBOXES", "MIN_MEMORY_MB", "grading_secret"]

SANDBOXES = ("bwrap", "none")
MIN_MEMORY_MB = 256


class Mode(Enum):
    """How a batch meets an existing gradebook."""

    #: ``out`` is new or empty.
    NEW = "new"
    #: Grade only the submissions missing from the gradebook (``--resume``).
    RESUME = "resume"
    #: Add or replace rows, keep the others (``--merge``).
    MERGE = "merge"
    #: Grade one question again, keep everything else of each row (``--regrade``).
    REGRADE = "regrade"

    @property
    def gradebook_mode(self) -> str:
        """The gradebook's own mode: a regrade replaces rows as a merge does."""
        return "merge" if self is Mode.REGRADE else self.value


@dataclass(frozen=True)
class GradeConfig:
    """Everything a batch is graded with (not the submissions themselves).

    Parameters
    ----------
    assignment : str
        The assignment's name: ``solutions/<assignment>.ipynb`` must exist.
    solutions : Path
        The folder of solutions notebooks.
    out : Path
        The gradebook folder.
    timeout : float
        Seconds per cell.
    memory_mb : int
        Memory per submission, in MB (at least :data:`MIN_MEMORY_MB`).
    jobs : int
        Submissions run at once on this machine.
    notebook_timeout : float, optional
        Seconds one notebook may run in all (``--notebook-timeout``; default 10 times
        ``timeout``, :func:`~kpca_lib.course.grading.run.runner.notebook_limit`).
    sandbox : {"bwrap", "none"}
    cluster : str or ClusterRunner, optional
        Run the notebooks on a Dask cluster instead of ``jobs`` local workers.
    seed : str, optional
        The secret that seeds the grader's inputs (default: :func:`grading_secret`'s).
    mode : Mode
    regrade : str, optional
        The question a :attr:`Mode.REGRADE` batch grades again.
    row_id : str, optional
        With :attr:`Mode.MERGE` and one submission: the row it fills.
    root : Path, optional
        The folder row ids are relative to.
    progress : bool
        A start line and a line per finished row on stderr.

    Raises
    ------
    ValueError
        A setting that cannot grade anything, with the fix; nothing has been read then.
    """

    assignment: str
    solutions: Path
    out: Path
    timeout: float = 30.0
    memory_mb: int = 2048
    jobs: int = 2
    sandbox: str = "bwrap"
    cluster: Any = None
    seed: str | None = None
    mode: Mode = Mode.NEW
    regrade: str | None = None
    row_id: str | None = None
    root: Path | None = None
    progress: bool = False
    notebook_timeout: float | None = None

    def __post_init__(self) -> None:
        if (self.mode is Mode.REGRADE) != (self.regrade is not None):
            raise ValueError("--regrade names the question to grade again (mode regrade).")
        if self.row_id is not None:
            if self.mode is not Mode.MERGE:
                raise ValueError("--row-id goes with --merge (it names the row a late submission "
                                 "fills).")
            check_row_id(self.row_id)
        if not self.solution_path.is_file():
            known = ", ".join(sorted(p.stem for p in Path(self.solutions).glob("*.ipynb"))) or "none"
            raise ValueError(f"no assignment {self.assignment!r} in {self.solutions} (known: "
                             f"{known}).")
        if self.memory_mb < MIN_MEMORY_MB:
            m = self.memory_mb
            raise ValueError(f"--memory {m} is in MB ({m} MB per submission), less than the "
                             f"{MIN_MEMORY_MB} MB any Python kernel needs; for {m} GB pass "
                             f"--memory {m * 1024}. Nothing was graded.")
        if not self.timeout > 0:
            raise ValueError(f"--timeout must be > 0 seconds per cell; got {self.timeout!r}.")
        if self.jobs < 1:
            raise ValueError(f"--jobs must be >= 1; got {self.jobs!r}.")
        if self.notebook_timeout is not None and not self.notebook_timeout >= self.timeout:
            raise ValueError(f"--notebook-timeout ({self.notebook_timeout!r} s for the whole "
                             f"notebook) must be at least --timeout ({self.timeout:g} s per cell).")
        if self.sandbox not in SANDBOXES:
            raise ValueError(f"sandbox must be one of {SANDBOXES}; got {self.sandbox!r}.")

    @classmethod
    def from_args(cls, args: argparse.Namespace, solutions: Path) -> GradeConfig:
        """The configuration of ``kpca-course grade``'s parsed arguments."""
        return cls.of(assignment=args.assignment, solutions=solutions, out=Path(args.out),
                      timeout=args.timeout, memory_mb=args.memory, jobs=args.jobs,
                      sandbox=args.sandbox, cluster=args.cluster, seed=args.seed,
                      resume=args.resume, merge=args.merge, regrade=args.regrade,
                      row_id=args.row_id, root=Path(args.root) if args.root else None,
                      notebook_timeout=getattr(args, "notebook_timeout", None),
                      progress=True)

    @classmethod
    def of(cls, *, resume: bool = False, merge: bool = False, regrade: str | None = None,
           **settings: Any) -> GradeConfig:
        """The configuration of :func:`~kpca_lib.course.grading.pipeline.grade_batch`'s
        keywords: the flags ``resume``, ``merge`` and ``regrade`` become one :class:`Mode`."""
        if sum(map(bool, (resume, merge, regrade))) > 1:
            raise ValueError("--resume, --merge and --regrade cannot be used together.")
        mode = (Mode.RESUME if resume else Mode.MERGE if merge
                else Mode.REGRADE if regrade is not None else Mode.NEW)
        return cls(mode=mode, regrade=regrade, **settings)

    @property
    def solution_path(self) -> Path:
        """``solutions/<assignment>.ipynb``."""
        return Path(self.solutions) / f"{self.assignment}.ipynb"

    def check_submissions(self, n: int) -> None:
        """``ValueError`` unless ``n`` submissions can be graded with these settings."""
        if self.row_id is not None and n != 1:
            raise ValueError(f"--row-id names one row, but {n} submissions were given; merge "
                             "them one at a time.")

    def check_questions(self, questions: Any) -> None:
        """``ValueError`` unless the question to regrade is one of ``questions``."""
        if self.regrade is not None and self.regrade not in questions:
            raise ValueError(f"--regrade {self.regrade!r} is not a question of {self.assignment} "
                             f"(its questions: {', '.join(questions)}).")


def check_row_id(row_id: str) -> None:
    """``ValueError`` unless ``row_id`` reads like a row id: visible characters, parts
    separated by single ``/``, none of them ``.`` or ``..``."""
    parts = row_id.split("/")
    if (not row_id or visible(row_id) != row_id or row_id != row_id.strip()
            or any(p in ("", ".", "..") for p in parts)):
        raise ValueError(f"--row-id {visible(row_id)!r} is not a row id: write it as grades.csv "
                         "does, e.g. alice/01_feature_maps (visible characters, parts separated "
                         "by one /).")


def grading_secret(seed: str | None) -> bytes:
    """The secret that seeds the inputs: ``seed``, else ``$KPCA_GRADING_SECRET``, else the one
    kept in ``~/.config/kpca-course/grading-secret`` (made at the first use, mode 0600)."""
    if seed:
        return seed.encode()
    env = os.environ.get("KPCA_GRADING_SECRET")
    if env:
        return env.encode()
    path = Path.home() / ".config" / "kpca-course" / "grading-secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(os.urandom(32).hex())
    return path.read_text().strip().encode()
