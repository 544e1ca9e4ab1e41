"""``kpca-course grade``: a gradebook and student feedback for a batch of submissions.

For each submission:

1. read it defensively (size, JSON, nbformat ≥ 4, the right assignment); otherwise
   its row says ``invalid`` and why;
2. take only its answer cells (:func:`~kpca_lib.course.grading.judge.notebooks.extract_answers`)
   and rebuild the notebook from the trusted ``solutions/`` source: set-up cells,
   the answers, and an export cell after each question;
3. run it through nbval in a child process (:mod:`kpca_lib.course.grading.run.runner`), in a
   scratch folder that holds only that notebook and the grader's inputs;
4. in *this* process, verify each export's HMAC, decode it as plain data, and run
   the public checks (:mod:`kpca_lib.course.grading.judge.questions`) and the hidden checks (read
   from ``solutions/``) against the grader's own computations. Student code never
   runs here, and nothing from the kernel is unpickled or imported.

5. write its row into the gradebook at once (:mod:`kpca_lib.course.grading.record.gradebook`):
   ``grades.json``, ``grades.csv`` and its ``feedback/`` file, each replaced
   atomically, so a grader killed at any moment leaves a valid partial gradebook,
   and, with ``progress``, a line on stderr (``[k/N] name status score run elapsed ETA``).

At the end of the batch, ``summary.md`` and ``summary.png`` are rebuilt from the whole
gradebook (:mod:`kpca_lib.course.grading.record.summary`).

Any error while reading or grading one submission makes its row ``invalid`` (not a
readable notebook of this assignment) or ``crashed`` (the grader failed: full disk,
a bug; ``Row.grader_error`` says so) with the reason, and the batch goes on.

A question whose cell times out or crashes the kernel scores 0; the notebook then runs
again without the questions already done, so later questions still count. The
status of the row is ``timeout`` or ``crashed`` accordingly.

Inputs are drawn from a seed derived from a secret and the answer's source, so
students cannot predict them and a re-run of the same submission gives the same grade.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .handback.feedback import feedback_markdown
from .judge.dependencies import references
from .judge.evaluate import CheckResult, decode_payload, make_inputs, run_checks
from .judge.notebooks import (
    GradingNotebook,
    Solution,
    extract_answers,
    grading_notebook,
    meta,
    read_solution,
    release_notebook,
    with_answers,
)
from .judge.plain import encode, loads
from .judge.questions import Question
from .record.gradebook import (
    STATUSES,
    Gradebook,
    GradebookWriteError,
    common_root,
    format_points,
    lookalike_groups,
    problem,
    row_ids,
    submission_paths,
    suspicious_name,
    visible,
)
from .record.policy import (
    ADJUSTMENTS_FILE,
    check_adjustments,
    format_time,
    load_adjustments,
    load_policy,
)
from .record.summary import Summary, format_duration
from .record.text import markdown_text, one_line
from .run.handed_in import NotHandedIn, link_counts, open_handed_in
from .run.runner import Run, run_all

__all__ = ["Row", "Batch", "CanaryFailed", "grade_batch", "MAX_SUBMISSION_BYTES", "STATUSES", "SANDBOXES"]

MAX_SUBMISSION_BYTES = 20_000_000
SANDBOXES = ("bwrap", "none")
MAX_RESUMES = 3
MIN_MEMORY_MB = 256

PREAMBLE = """\
# Added by the grader.
from kpca_lib.course.grading.run.kernel_side import install as _kpca_install
_kpca_export = _kpca_install(globals())
del _kpca_install
"""


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

    @property
    def score(self) -> float:
        return float(sum(self.questions.values()))


# --------------------------------------------------------------------------- reading
def _read_submission(path: Path, assignment: str, *, root: Path | None = None,
                     batch: Counter[tuple[int, int]] | None = None,
                     facts: dict[str, Any] | None = None) -> tuple[Any | None, str]:
    """The notebook as a dict, or ``(None, reason)``; never raises for a bad file.

    The file is opened as :func:`~kpca_lib.course.grading.run.handed_in.open_handed_in` does:
    no symbolic link (of the file or of a folder below ``root``), no hard link from
    outside the ``batch``, only a regular file. ``facts`` receives what was read: the
    file's ``mtime`` and the ``sha256`` of its bytes.
    """
    try:
        fd, st = open_handed_in(path, root, batch)
    except NotHandedIn as exc:
        return None, str(exc)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return None, "this is a folder, not a notebook file."
        return None, f"the file cannot be read ({exc.strerror})."
    try:
        with os.fdopen(fd, "rb") as fh:
            size = st.st_size
            if size == 0:
                return None, "the file is empty."
            if size > MAX_SUBMISSION_BYTES:
                return None, (f"the file is {size / 1e6:.0f} MB, more than the "
                              f"{MAX_SUBMISSION_BYTES / 1e6:.0f} MB allowed; clear the outputs "
                              "and submit again.")
            data = fh.read(MAX_SUBMISSION_BYTES + 1)
    except OSError as exc:
        return None, f"the file cannot be read ({exc.strerror or exc})."
    if len(data) > MAX_SUBMISSION_BYTES:
        return None, "the file grew past the size allowed while it was read."
    if facts is not None:
        facts.update(mtime=st.st_mtime, sha256=hashlib.sha256(data).hexdigest())
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return None, "the file is not text (UTF-8): is it a notebook?"
    except RecursionError:
        return None, "the file's JSON is nested too deeply; it is not a readable notebook."
    except ValueError as exc:
        if path.suffix and path.suffix.lower() != ".ipynb":
            return None, (f"this is a {path.suffix} file, not a "
                          "Jupyter notebook (.ipynb): hand in the notebook itself (in JupyterLab: "
                          "the File menu, Download).")
        return None, f"the file is not valid JSON ({str(exc)[:200]}); it is not a readable notebook."
    if not isinstance(nb, dict) or not isinstance(nb.get("cells", None), list):
        if isinstance(nb, dict) and isinstance(nb.get("worksheets"), list):
            old = nb.get("nbformat", 3)
            return None, (f"this is an nbformat {old if isinstance(old, int) else 3} notebook (an "
                          "old format); open and save it in JupyterLab to convert it to nbformat 4.")
        return None, "the file is JSON but not a Jupyter notebook (no list of cells)."
    version = nb.get("nbformat")
    if not isinstance(version, int) or isinstance(version, bool) or version < 4:
        shown = version if isinstance(version, int) else "unknown"
        return None, (f"this is an nbformat {shown} notebook (an old or unknown format); open and "
                      "save it in JupyterLab to convert it to nbformat 4.")
    md = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    kpca = md.get("kpca") if isinstance(md.get("kpca"), dict) else {}
    other = kpca.get("assignment")
    if other is not None and other != assignment:
        shown = visible(other[:100]) if isinstance(other, str) else "(malformed)"
        return None, f"this is a notebook of assignment {shown!r}, not {assignment!r}."
    return nb, ""


def _secret(seed: str | None) -> bytes:
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


def _question_seed(secret: bytes, assignment: str, qid: str, sources: list[str]) -> int:
    digest = hmac.new(secret, "\0".join([assignment, qid, *sources]).encode(), hashlib.sha256)
    return int.from_bytes(digest.digest()[:8], "big")


# --------------------------------------------------------------------------- one submission
@dataclass
class _Job:
    row: Row
    solution: Solution
    submission: Any  # the notebook as read (a dict; hostile structure tolerated)
    inputs: dict[str, dict[str, Any]]
    scratch: Path  # this submission's private folder (0700) in the grader's work folder
    key: bytes
    done: set[str] = field(default_factory=set)  # questions exported or given up
    failures: dict[str, str] = field(default_factory=dict)  # question -> why it scored 0
    zeroed: set[str] = field(default_factory=set)  # questions that ran out of time or memory
    attempts: int = 0
    built: GradingNotebook | None = None
    skip: set[int] = field(default_factory=set)  # cells that ran out of time or memory before
    #: Cells that raised: index -> (label, exception name, message), from every attempt.
    errors: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    timeout: float = 30.0
    memory_mb: int = 2048
    answers: dict[str, Any] = field(default_factory=dict)  # question -> exported payload
    resume: bool = False
    finished: bool = False


def _prepare(job: _Job) -> Run:
    """Write the notebook (without the questions already done) and the kernel's inputs.

    Every attempt gets a fresh folder with an unpredictable name; nothing in it is
    visible to the kernel except ``config.json``, which its sandbox gets a read-only copy of.
    """
    job.attempts += 1
    folder = job.scratch / secrets.token_hex(16)
    folder.mkdir(mode=0o700)
    if job.built is None or job.skip or job.done:  # the first attempt runs what _start built
        job.built = grading_notebook(job.solution, job.submission, PREAMBLE, skip=job.skip, done=job.done)
    built = job.built
    nb = built.nb
    (folder / "submission.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    config = {
        "key": job.key.hex(),
        "inputs": {q: {k: encode(v) for k, v in inp.items()} for q, inp in job.inputs.items()},
    }
    fd = os.open(folder / "config.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(config))
    return Run(folder / "submission.ipynb", n_cells=len(nb["cells"]))


def _classify(run: Run, owners: list[str | None]) -> tuple[str, int | None, str]:
    """``(status, cell, message)`` of the first cell that ran out of time or memory, or crashed.

    Decided from facts the trusted side recorded (which limit fired: the grader's
    wall-clock killer, nbval's cell timeout, the output cap, the cgroup's OOM kills, limit
    hits and refused forks, a process's peak address space at its limit, whether the kernel
    was still alive), never from timing, and never from the name of an exception alone: the
    kernel is the student's, and any cell can ``raise MemoryError``. An exception in a cell,
    a ``MemoryError`` that no limit counter saw included (an allocation larger than the
    limit fails without the peak reaching it), is not a failure here: the question's checks
    and the cell's note (with the limit, as a possibility) report it.
    """
    for cell in sorted(run.cells):
        out = run.cells[cell]
        if out.outcome not in ("failed", "error"):
            continue
        facts = out.facts or {}
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.text)
        if out.alive is None:  # no kernel: the sandbox (or the kernel in it) did not start
            return "crashed", cell, "the kernel did not start"
        # Facts that do not depend on the machine's load first (a limit that was hit),
        # then the clocks.
        if facts.get("oom_kills", 0) > 0:
            return "crashed", cell, "it ran out of memory (the memory limit killed a process)"
        if facts.get("memory_hits", 0) > 0 and (out.alive is False or _memory_error(facts.get("ename"))):
            return "crashed", cell, "it ran out of memory (it reached the memory limit)"
        if facts.get("address_space_hit") and (out.alive is False or _memory_error(facts.get("ename"))):
            # No cgroup: the trusted side saw a process's VmPeak reach its RLIMIT_AS.
            return "crashed", cell, "it ran out of memory (a process reached the memory limit)"
        if facts.get("killed") == "memory":  # no cgroup: the grader's watchdog summed them
            return "crashed", cell, ("it ran out of memory (its processes together held more "
                                     "than the memory limit)")
        if facts.get("killed") == "output":
            return "crashed", cell, "it produced more output than the grader reads"
        if facts.get("pids_refused", 0) > 0:
            return "crashed", cell, "it started more processes than allowed"
        if facts.get("killed") == "wallclock":
            return "timeout", cell, "it ran past the time limit (the grader stopped it)"
        if facts.get("nbval_timeout") and "exceeded waiting for output" in text:
            return "crashed", cell, "its output could not be read (too large a message?)"
        if facts.get("nbval_timeout"):
            return "timeout", cell, "it ran past the time limit per cell"
        if out.alive is False:
            return "crashed", cell, "the kernel died (the process exited or was killed)"
    if not run.finished:
        return "crashed", None, run.note or "the notebook run did not finish"
    return "graded", None, ""


def _limit_words(message: str, job: _Job) -> str:
    """The limit a stopped cell ran into, with its value."""
    if "time limit" in message:
        return f"it ran past the time limit of {job.timeout:g} s per cell"
    if "the memory limit" in message:
        return message.replace("the memory limit", f"the memory limit of {job.memory_mb} MB", 1)
    if "out of memory" in message:
        return f"{message} (the limit is {job.memory_mb} MB)"
    return message


def _cell_errors(job: _Job, run: Run) -> None:
    """Record the cells that raised an exception: the student's, the assignment's, and the
    exports (where the grader calls the student's functions: only an exception the probe lets
    through, a ``MemoryError``, gets there); not the grader's preamble or question cells."""
    built = job.built
    assert built is not None
    for cell, out in run.cells.items():
        if out.outcome not in ("failed", "error") or cell >= len(built.kinds):
            continue
        facts = out.facts or {}
        if not facts.get("ename") or built.kinds[cell] not in (
                "answer", "student", "setup", "demo", "export"):
            continue
        job.errors.setdefault(cell, (built.labels[cell], str(facts.get("ename"))[:100],
                                     str(facts.get("evalue") or "")[:300]))


def _explain(job: _Job) -> None:
    """The run's facts about each question's cells, in the student's words, into ``row.notes``:
    cells that raised (with the real exception), and cells that read a widget or figure.

    Notes and messages are plain text (:func:`_feedback` escapes them): the exception's name
    and message and a cell's first line come from the student's code.
    """
    built = job.built
    if built is None:
        return
    for cell in sorted(job.errors):
        label, ename, evalue = job.errors[cell]
        qid = built.owners[cell] if cell < len(built.owners) else None
        kind = built.kinds[cell]
        where = f"{label}, where the grader checks {qid}," if kind == "export" else label
        text = f"{where} raised {ename}" + (f": {evalue}" if evalue else "")
        if kind in ("setup", "demo"):
            text += " (a cell of the assignment: did a cell above it change a name it uses?)"
        hint = "" if cell in job.skip else _memory_hint(ename, job)  # skip: the limit was seen
        if qid is None:
            job.row.messages.append(f"{text} (after the last check cell; no question depends on it)."
                                    + hint)
        elif kind == "export":
            job.row.notes.setdefault(qid, []).append(
                text + ". It ran your functions on the grader's inputs there, so no answer of this "
                "question could be recorded." + hint)
        else:
            job.row.notes.setdefault(qid, []).append(
                text + ". The grader ran your notebook from the top, as Restart & Run All does; "
                "what this cell defines was missing when the question was checked." + hint)
    for cell, names in sorted(built.widget_reads.items()):
        qid = built.owners[cell]
        if qid is None:
            continue
        shown = ", ".join(f"`{n}`" for n in names)
        job.row.notes.setdefault(qid, []).append(
            f"{built.labels[cell]} reads {shown}, made by a widget or figure cell of the assignment. "
            "The grader runs that cell too, but nobody moves its sliders there: they keep their "
            "starting values. Write the value you chose into the answer cell (the line shown under "
            "the slider) instead of reading the widget.")


def _collect_exports(job: _Job, run: Run, failed_cell: int | None = None) -> None:
    """Accept each question's export from its own export cell only, and only when no cell
    before it ran out of time or memory (answers exported after that are discarded)."""
    assert job.built is not None
    for qid, cell in job.built.exports.items():
        if qid in job.done or (failed_cell is not None and cell >= failed_cell):
            continue
        records = run.exports.get(cell) or []
        if not records:
            continue
        job.done.add(qid)
        try:
            record = records[-1]
            if not isinstance(record, dict):
                raise ValueError("it is not a record")
            payload_text = record["payload"]
            if not isinstance(payload_text, str):
                raise ValueError("its payload is not text")
            mac = hmac.new(job.key, payload_text.encode(), hashlib.sha256).hexdigest()
            if not hmac.compare_digest(mac, str(record["mac"])):
                raise ValueError("its signature does not match")
            payload = loads(payload_text)
            if not isinstance(payload, dict) or payload.get("question") != qid:
                raise ValueError("it is for another question")
            job.answers[qid] = payload.get("answers")
        except Exception as exc:
            job.failures[qid] = f"the exported answers could not be read ({exc})"


def _score(job: _Job) -> None:
    row, solution = job.row, job.solution
    row.checks = []
    for qid in solution.questions:
        question: Question = solution.question(qid)
        hidden = solution.hidden.get(qid, [])
        mentioned = _forbidden_mentions(job, question)
        if qid in job.answers and qid not in job.zeroed and not mentioned:
            answers = decode_payload(job.answers[qid])
        elif mentioned:
            answers = decode_payload({"__probe__": {"__error__": mentioned}})
        else:
            reason = job.failures.get(qid, "no answer was recorded")
            answers = decode_payload({"__probe__": {"__error__": reason}})
        results = run_checks(question, answers, job.inputs.get(qid, {}), hidden)
        if qid in job.zeroed:  # ran out of time or memory: the question scores 0, as said
            why = job.failures.get(qid, "it did not finish")
            results = [CheckResult(r.id, r.question, r.description, r.points, False,
                                   why if k == 0 else "(the same stop as above: nothing could be checked)",
                                   r.hidden)
                       for k, r in enumerate(results)]
        row.checks.extend(results)
        row.questions[qid] = float(sum(r.score for r in results))


def _forbidden_mentions(job: _Job, question: Question) -> str:
    """Why none of the question's checks count, when its cells mention a name the question
    forbids that its probe did not see called (a profiler switched off, a branch not taken);
    ``""`` otherwise. Read from the submitted source on this side, never from the kernel."""
    built = job.built
    if not question.forbid or built is None:
        return ""
    payload = job.answers.get(question.id)
    seen = payload.get("__forbidden__") if isinstance(payload, dict) else None
    if isinstance(seen, list) and seen:
        return ""  # the probe reported the calls: the values computed through them are errors already
    found: set[str] = set()
    for cell, kind in enumerate(built.kinds):
        if kind in ("answer", "student") and built.owners[cell] == question.id:
            found |= references(built.nb.cells[cell].source, frozenset(question.forbid))
    if not found:
        return ""
    return (f"your cells for this question use {', '.join(sorted(found))}, which the question asks "
            "you not to call: the answer has to be your own code, so none of its checks count.")


def _crash(job: _Job, why: str) -> None:
    """This submission could not be graded: ``crashed`` with the reason, nothing kept."""
    job.row.status = "crashed"
    job.row.grader_error = why
    job.row.messages.append(f"the grader could not grade this submission: {why}.")
    job.answers.clear()
    job.zeroed.update(job.solution.questions)
    job.resume = False


def _run_jobs(jobs: list[_Job], work: Path, timeout: float, memory_mb: int, n_jobs: int,
              progress: _Progress, *, sandbox: str = "bwrap",
              on_job_done: Callable[[_Job], None] | None = None,
              runner: Callable[..., None] = run_all) -> None:
    """Run every job (re-running a notebook without the questions already done after a
    question ran out of time or memory); score each and call ``on_job_done`` once per job.

    ``runner`` runs the notebooks: :func:`~kpca_lib.course.grading.run.runner.run_all` here,
    or a cluster's (:meth:`kpca_lib.course.grading.run.cluster.ClusterRunner.run_all`).
    An exception while preparing, running or collecting one job makes its row
    ``crashed`` with the reason; the batch goes on.
    """

    def finish(job: _Job) -> None:
        if job.finished:
            return
        job.finished = True
        try:
            _explain(job)
            _score(job)
        except Exception as exc:
            _crash(job, f"{type(exc).__name__}: {exc}")
            for qid in job.solution.questions:
                job.row.questions[qid] = 0.0
        if on_job_done is not None:
            on_job_done(job)
        progress.step(job.row)

    for job in jobs:
        job.timeout, job.memory_mb = timeout, memory_mb
    pending = [job for job in jobs if not job.finished]
    while pending:
        by_run: dict[int, _Job] = {}
        runs: list[Run] = []
        for job in pending:
            job.resume = False
            try:
                run = _prepare(job)
            except Exception as exc:  # e.g. ENOSPC in the work folder
                _crash(job, f"{type(exc).__name__}: {exc}")
                finish(job)
                continue
            by_run[id(run)] = job
            runs.append(run)

        def done(run: Run, by_run: dict[int, _Job] = by_run) -> None:
            job = by_run[id(run)]
            job.row.seconds += run.seconds
            try:
                built = job.built
                assert built is not None
                status, cell, message = _classify(run, built.owners)
                _cell_errors(job, run)
                _collect_exports(job, run, cell if status != "graded" else None)
                run.exports.clear()  # keep only what was accepted (job.answers)
                if status != "graded":
                    inside = cell is not None and cell < len(built.owners)
                    qid = built.owners[cell] if inside else None
                    where = built.labels[cell] if inside else "the notebook"
                    message = _limit_words(message, job)
                    if job.row.status == "graded":
                        job.row.status = status
                    if cell is None or (qid is None and built.kinds[cell] in ("preamble", "question")):
                        job.row.messages.append(f"the notebook could not run: {message}.")
                        job.zeroed.update(q for q in job.solution.questions if q not in job.done)
                    elif qid is None:  # after the last check cell: every answer was read already
                        job.row.messages.append(f"{where}, after the last check cell, stopped: {message}; "
                                                "every question had been checked before it.")
                    else:
                        job.failures[qid] = f"{where} stopped: {message}, so this question scores 0"
                        job.zeroed.add(qid)
                        job.answers.pop(qid, None)
                        job.row.messages.append(f"{qid}: {where} stopped: {message}; the question "
                                                "scores 0 and the grader went on with the next questions.")
                        job.done.add(qid)
                        job.skip.add(cell)
                        job.resume = job.attempts < MAX_RESUMES and any(
                            q not in job.done for q in job.solution.questions)
            except Exception as exc:
                _crash(job, f"{type(exc).__name__}: {exc}")
            if not job.resume:
                finish(job)

        try:
            runner(runs, work, timeout=timeout, memory_mb=memory_mb, jobs=n_jobs,
                   sandbox=sandbox, on_done=done)
        except Exception as exc:
            for job in by_run.values():
                if not job.finished and not job.resume:
                    _crash(job, f"{type(exc).__name__}: {exc}")
                    finish(job)
        for run in runs:  # a run that was never reported cannot stay pending
            job = by_run[id(run)]
            if not job.finished and not job.resume:
                _crash(job, run.note or "its run was lost")
                finish(job)
        pending = [job for job in pending if job.resume and not job.finished]


class _Progress:
    """Progress on stderr, one line at a time (a terminal, a pipe or a log file alike).

    ``begin`` says what the batch is; ``step(row)`` is called once per finished row:
    ``[k/N] name status score/max run 1.2s elapsed mm:ss ETA mm:ss``. The ETA is the
    mean run time of the notebooks finished so far times the notebooks still to run,
    divided by the runs done at once (``ETA --`` until a notebook has finished).
    """

    def __init__(self, total: int, enabled: bool, parallel: int = 1) -> None:
        self.total, self.n, self.enabled = total, 0, enabled
        self.parallel = max(1, parallel)
        self.start = time.monotonic()
        self.durations: list[float] = []
        self.lock = threading.Lock()

    def _write(self, line: str) -> None:
        if self.enabled:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def begin(self, text: str) -> None:
        self.start = time.monotonic()
        self._write(text)

    def eta(self) -> float | None:
        """Seconds still needed, or ``None`` before the first notebook finished."""
        left = self.total - self.n
        if left <= 0:
            return 0.0
        if not self.durations:
            return None
        return sum(self.durations) / len(self.durations) * left / min(self.parallel, left)

    def step(self, row: Row) -> None:
        with self.lock:
            self.n += 1
            if row.seconds > 0:
                self.durations.append(row.seconds)
            status = f"{row.status} (grader failure)" if row.grader_error else row.status
            why = problem({"status": row.status, "messages": row.messages,
                           "grader_error": row.grader_error})
            self._write(f"[{self.n}/{self.total}] {one_line(row.submission)} {status} "
                        f"{format_points(row.score)}/{format_points(row.max_score)} "
                        f"run {row.seconds:.1f}s "
                        f"elapsed {format_duration(time.monotonic() - self.start)} "
                        f"ETA {format_duration(self.eta())}" + (f" | why: {why}" if why else ""))


# --------------------------------------------------------------------------- output
def _memory_error(ename: Any) -> bool:
    """Whether an exception's name (as the kernel reported it: the student's to choose) is a
    memory error: ``MemoryError``, NumPy's ``_ArrayMemoryError``."""
    return isinstance(ename, str) and ename.endswith("MemoryError")


def _memory_hint(ename: str, job: _Job) -> str:
    """For a cell that raised a memory error that no limit counter saw: the limit it may have
    met, as a possibility (a cell can raise ``MemoryError`` itself); ``""`` otherwise."""
    if not _memory_error(ename):
        return ""
    return (f" If this {ename} came from the grader's memory limit rather than from your code, that "
            f"limit is {job.memory_mb} MB for the whole notebook (its files in /tmp included).")


def _md(text: str) -> str:
    """``text`` shown literally in Markdown, on one line: no heading, link, image, HTML, list,
    table or emphasis from a file name, a message or a repr (see
    :func:`~kpca_lib.course.grading.record.text.markdown_text`; escaping twice changes nothing)."""
    return markdown_text(text)


def _md_trusted(text: str) -> str:
    """The instructor's plain text (an assignment, a question's title, a check's description)
    in Markdown: as :func:`_md`, but ``phi_poly`` keeps its underscore (never emphasis)."""
    return markdown_text(text, identifiers=True)


def _feedback(row: Row, solution: Solution) -> str:
    """``feedback/<name>.md``: the row's automatic feedback
    (:func:`~kpca_lib.course.grading.handback.feedback.feedback_markdown` of its record)."""
    return _feedback_of(_record(row), solution)


def _feedback_of(record: dict[str, Any], solution: Solution) -> str:
    return feedback_markdown(record, assignment=solution.assignment, points=solution.points,
                             titles={q: solution.question(q).title for q in solution.questions})


def _record(row: Row) -> dict[str, Any]:
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
    for key in ("file_time", "handed_in_as", "sha256"):
        if getattr(row, key):
            data[key] = getattr(row, key)
    return data


def _grader_failure(row: Row, reason: str) -> None:
    """The row is ``crashed`` by the grader's fault: no score is kept, the reason is shown."""
    row.status = "crashed"
    row.grader_error = reason
    row.questions = {q: 0.0 for q in row.questions}
    row.checks = []
    row.messages.append(f"the grader failed on this submission, not through any fault of "
                        f"yours ({reason}); it was not graded and will be graded again.")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the grader's disk is full ({exc.strerror})"
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


MIN_FREE_BYTES = 1 << 20


def _scratch_full(work: Path) -> str:
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


def _check_sandbox(sandbox: str) -> None:
    if sandbox not in SANDBOXES:
        raise ValueError(f"sandbox must be one of {SANDBOXES}; got {sandbox!r}.")
    from .run.sandbox import check_sandbox

    check_sandbox(sandbox)


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
    * ``finals``: row id → its final grade (policy, adjustments) in the whole gradebook.
    """

    skipped: list[str]
    not_regraded: dict[str, str]
    replaced: list[str]
    added: list[str]
    warnings: list[str]
    finals: dict[str, Any]
    lookalikes: list[list[str]]
    suspicious: dict[str, str]
    counts: dict[str, int]
    summary: Summary | None
    summary_text: str
    summary_errors: list[str]
    elapsed: float
    sandbox: str
    out: Path


# --------------------------------------------------------------------------- entry point
def grade_batch(
    *,
    assignment: str,
    submissions: list[Path],
    out: Path,
    solutions: Path,
    timeout: float = 30.0,
    jobs: int = 2,
    memory_mb: int = 2048,
    progress: bool = False,
    seed: str | None = None,
    sandbox: str = "bwrap",
    resume: bool = False,
    merge: bool = False,
    root: Path | None = None,
    cluster: Any = None,
    row_id: str | None = None,
    regrade: str | None = None,
) -> Batch:
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
    """
    if sum(map(bool, (resume, merge, regrade))) > 1:
        raise ValueError("--resume, --merge and --regrade cannot be used together.")
    if row_id is not None:
        if not merge:
            raise ValueError("--row-id goes with --merge (it names the row a late submission fills).")
        if len(submissions) != 1:
            raise ValueError(f"--row-id names one row, but {len(submissions)} submissions were "
                             "given; merge them one at a time.")
        _check_row_id(row_id)
    path = Path(solutions) / f"{assignment}.ipynb"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in Path(solutions).glob("*.ipynb"))) or "none"
        raise ValueError(f"no assignment {assignment!r} in {solutions} (known: {known}).")
    paths = submission_paths(submissions) if submissions or not regrade else []
    if memory_mb < MIN_MEMORY_MB:
        raise ValueError(f"--memory {memory_mb} is in MB ({memory_mb} MB per submission), less than "
                         f"the {MIN_MEMORY_MB} MB any Python kernel needs; for {memory_mb} GB pass "
                         f"--memory {memory_mb * 1024}. Nothing was graded.")
    if cluster is None:
        _check_sandbox(sandbox)
    elif sandbox not in SANDBOXES:
        raise ValueError(f"sandbox must be one of {SANDBOXES}; got {sandbox!r}.")
    solution = read_solution(path)
    if regrade is not None and regrade not in solution.points:
        raise ValueError(f"--regrade {regrade!r} is not a question of {assignment} (its questions: "
                         f"{', '.join(solution.points)}).")
    mode = "resume" if resume else "merge" if merge or regrade else "new"
    policy = load_policy(Path(out))
    policy.check(solution.points)
    roster = policy.load_roster()
    adjustments = load_adjustments(Path(out))
    with _open_runner(cluster, sandbox) as runner, \
            Gradebook(Path(out), assignment=assignment, points=solution.points, mode=mode,
                      titles={q: solution.question(q).title for q in solution.questions}) as book:
        not_regraded: dict[str, str] = {}
        given_ids: list[str] | None = [row_id] if row_id is not None else None
        if regrade is not None and not paths:
            paths, given_ids, not_regraded = _regrade_targets(book)
        base = Path(os.path.abspath(root)) if root is not None else (
            Path(book.root) if book.root else _default_root(paths, assignment))
        ids = given_ids if given_ids is not None else row_ids(paths, base)
        if regrade is not None:
            absent = [i for i in ids if i not in book]
            if absent:
                raise ValueError(f"--regrade: {', '.join(repr(a) for a in absent[:5])} "
                                 f"{'is' if len(absent) == 1 else 'are'} not in the gradebook "
                                 f"{book.out}; add new submissions with --merge.")
        check_adjustments(adjustments, [*book.rows, *ids], solution.points,
                          str(Path(out) / ADJUSTMENTS_FILE), by_hand=policy.by_hand)
        book.set_policy(policy, adjustments, roster)
        secret = _secret(seed)
        _canary(solution, runner, timeout=timeout, memory_mb=memory_mb, sandbox=sandbox,
                secret=secret)
        book.start(base, sandbox)
        book.set_order(ids)
        batch = Batch()
        batch.sandbox, batch.out = sandbox, book.out
        batch.skipped = [i for i in ids if resume and i in book]
        batch.replaced = [i for i in ids if merge and i in book]
        batch.added = [i for i in ids if merge and i not in book]
        batch.not_regraded = not_regraded
        groups = lookalike_groups([*book.rows, *ids])
        batch.lookalikes = groups
        batch.suspicious = {}
        similar = {rid: [o for o in g if o != rid] for g in groups for rid in g}

        def finish(row: Row) -> None:  # never raises: a row is always recorded
            if regrade is not None:
                _finish_regrade(row)
                return
            try:
                text = _feedback(row, solution)
            except Exception as exc:
                _grader_failure(row, _describe(exc))
                text = (f"# Feedback: {_md(row.submission)} ({assignment})\n\n"
                        f"Status: crashed. {_md(' '.join(row.messages))}\n")
            data = _record(row)
            book.add(data, text)
            row.feedback = data["feedback"]

        def _finish_regrade(row: Row) -> None:
            """Only ``regrade``'s results replace the old row's; a row the grader could not
            grade again keeps its old grade and is reported."""
            old = book.rows[row.submission]
            if old.get("sha256") and row.sha256 and row.sha256 != old["sha256"]:
                batch.not_regraded[row.submission] = (
                    "kept as it was: its file changed since it was graded (a new version: grade "
                    "it with --merge, which replaces the whole row)")
                _restore(row, old)
                return
            if row.grader_error or row.status == "invalid":
                why = row.grader_error or problem(_record(row))
                batch.not_regraded[row.submission] = f"kept as it was: {why}"
                _restore(row, old)
                return
            try:
                data = _regraded_record(old, _record(row), regrade, solution)
                text = _feedback_of(data, solution)
            except Exception as exc:
                batch.not_regraded[row.submission] = f"kept as it was: {_describe(exc)}"
                _restore(row, old)
                return
            book.add(data, text)
            _restore(row, data)

        todo = [(i, p, rid) for i, (p, rid) in enumerate(zip(paths, ids, strict=True))
                if not (resume and rid in book)]
        parallel = _parallelism(runner, jobs)
        bar = _Progress(len(todo), progress, parallel)
        where = ((f"on the Dask cluster {cluster}" if isinstance(cluster, str) else "on a Dask cluster")
                 + f" ({parallel} worker thread{'s' if parallel != 1 else ''})"
                 if cluster is not None else f"{jobs} parallel job{'s' if jobs != 1 else ''}")
        what = f"regrading {regrade} in" if regrade else "grading"
        bar.begin(f"{what} {len(todo)} submission{'s' if len(todo) != 1 else ''} of {assignment}: "
                  f"{where}, sandbox {sandbox}"
                  + (f"; {len(batch.skipped)} already in the gradebook (--resume)"
                     if batch.skipped else "") + f"; gradebook {book.out}")
        jobs_list: list[_Job] = []
        links = link_counts(paths, base)
        work = Path(tempfile.mkdtemp(prefix="kpca-grade-"))
        try:
            for i, sub, rid in todo:
                row = Row(rid, str(sub), max_score=solution.max_score,
                          questions={q: 0.0 for q in solution.questions}, sandbox=sandbox)
                batch.append(row)
                row.lookalikes = similar.get(rid, [])
                why = suspicious_name(rid)
                if why:
                    batch.suspicious[rid] = why
                if row.lookalikes or why:
                    row.messages.append(
                        "the instructor checks this submission's name: "
                        + (why or "it looks like another submission's name (look-alike letters, "
                           "case or invisible characters)") + ".")
                row.handed_in_as = _handed_in_as(sub, base)
                try:
                    job = _start(row, sub, i, solution, secret, work, root=base, batch=links)
                except Exception as exc:  # a grader-side failure on this submission only
                    _grader_failure(row, _describe(exc))
                    job = None
                if job is not None and regrade is not None:  # only its export cell runs
                    job.done.update(q for q in solution.questions if q != regrade)
                if job is None:
                    finish(row)
                    bar.step(row)
                else:
                    jobs_list.append(job)
            delivered: set[int] = set()

            def on_job_done(job: _Job) -> None:
                if id(job) in delivered:
                    return
                delivered.add(id(job))
                try:
                    full = _scratch_full(work)
                    if full:
                        _grader_failure(job.row, full)
                except Exception as exc:
                    _grader_failure(job.row, _describe(exc))
                finish(job.row)

            lost = "the grader lost this submission's result"
            try:
                _run_jobs(jobs_list, work, timeout, memory_mb, jobs, bar, sandbox=sandbox,
                          on_job_done=on_job_done, runner=runner)
            except Exception as exc:
                lost = _describe(exc)
            for job in jobs_list:
                if id(job) not in delivered:
                    delivered.add(id(job))
                    _grader_failure(job.row, lost)
                    finish(job.row)
                    bar.step(job.row)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        from .handback.trees import refresh  # the feedback pages and the summary's figure

        done = refresh(book)
        batch.summary, batch.summary_text, batch.summary_errors = done.summary, done.text, done.errors
        batch.finals, batch.warnings = done.finals, done.warnings
        batch.elapsed = time.monotonic() - bar.start
        try:
            book.close()
        except GradebookWriteError as exc:
            exc.batch = batch  # type: ignore[attr-defined]
            batch.counts = _counts(book.rows.values())
            raise
        batch.counts = _counts(book.rows.values())
    return batch


class CanaryFailed(RuntimeError):
    """The instructor's own solution did not score full marks under the batch's settings."""


def _canary(solution: Solution, runner: Callable[..., None], *, timeout: float, memory_mb: int,
            sandbox: str, secret: bytes) -> None:
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
        nb = with_answers(release_notebook(solution), solution.nb)
        sub = work / f"{solution.assignment}.ipynb"
        sub.write_text(json.dumps(nb), encoding="utf-8")
    except OSError as exc:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return  # no scratch space: every row becomes a grader failure (see _scratch_full)
        raise
    try:
        row = Row("the instructor's solution", str(sub), max_score=solution.max_score,
                  questions={q: 0.0 for q in solution.questions}, sandbox=sandbox)
        job = _start(row, sub, 0, solution, secret, work, root=work)
        if job is not None:
            _run_jobs([job], work, timeout, memory_mb, 1, _Progress(1, False), sandbox=sandbox,
                      runner=runner)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if row.status == "graded" and row.score >= row.max_score:
        return
    said = " ".join([*row.messages, *(m for q in row.notes.values() for m in q)])[:600]
    plain = re.sub(r"\\(.)", r"\1", said)  # the terminal shows text, not Markdown escapes
    if row.grader_error:
        fix = (f"the grader itself could not run it ({row.grader_error}): fix that (the "
               "cluster, the disk, the installation) and grade again")
    elif row.status == "timeout" or "time limit" in said:
        fix = (f"--timeout {timeout:g} (seconds per cell) is too short for the solution's "
               "slowest cell: raise it")
    elif "memory" in said or "did not start" in said or row.status == "crashed":
        fix = (f"--memory {memory_mb} (MB per submission) is too small for the solution, or the "
               f"sandbox ({sandbox}) cannot run it: raise --memory (2048 is the default; the unit "
               "is MB) and check `--sandbox`")
    else:
        fix = ("the solution itself does not pass its checks here: run `kpca-course release "
               "--check` and the solutions notebook, and check --timeout, --memory and --sandbox")
    raise CanaryFailed(
        f"the instructor's solution scored {format_points(row.score)} / "
        f"{format_points(row.max_score)} (status {row.status}) under these settings, so no "
        f"submission was graded and nothing was written: {fix}. What the grader saw: "
        f"{visible(plain) or 'no message'}")


def _open_runner(cluster: Any, sandbox: str) -> contextlib.AbstractContextManager[Callable[..., None]]:
    """The function that runs the notebooks: local workers, or a Dask cluster's."""
    if cluster is None:
        return contextlib.nullcontext(run_all)
    from .run.cluster import open_cluster  # imports Dask

    @contextlib.contextmanager
    def runner() -> Iterator[Callable[..., None]]:
        with open_cluster(cluster, sandbox=sandbox) as on_cluster:
            yield on_cluster.run_all

    return runner()


def _parallelism(runner: Callable[..., None], jobs: int) -> int:
    """How many notebooks run at once: ``jobs`` locally, a cluster's worker threads."""
    threads = getattr(getattr(runner, "__self__", None), "threads", None)
    return threads() if callable(threads) else max(1, jobs)


def _counts(records: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


def _check_row_id(row_id: str) -> None:
    """``ValueError`` unless ``row_id`` reads like a row id: visible characters, parts
    separated by single ``/``, none of them ``.`` or ``..``."""
    parts = row_id.split("/")
    if (not row_id or visible(row_id) != row_id or row_id != row_id.strip()
            or any(p in ("", ".", "..") for p in parts)):
        raise ValueError(f"--row-id {visible(row_id)!r} is not a row id: write it as grades.csv "
                         "does, e.g. alice/01_feature_maps (visible characters, parts separated "
                         "by one /).")


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


def _handed_in_as(sub: Path, base: Path) -> str:
    """The submission's path relative to the submissions' folder (its name, for a file from
    elsewhere): what ``late.submitted = "name"`` reads."""
    relative = os.path.relpath(sub, base) if Path(sub).is_relative_to(base) else Path(sub).name
    return relative.replace(os.sep, "/")


def _restore(row: Row, data: dict[str, Any]) -> None:
    """Show ``data`` (the row as the gradebook now holds it) in ``row`` for the progress line."""
    row.status = data["status"]
    row.questions = dict(data["questions"])
    row.grader_error = str(data.get("grader_error", ""))


def _regraded_record(old: dict[str, Any], new: dict[str, Any], qid: str,
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


def _start(row: Row, sub: Path, i: int, solution: Solution, secret: bytes, work: Path, *,
           root: Path | None = None, batch: Counter[tuple[int, int]] | None = None) -> _Job | None:
    """Read one submission: a job to run, or ``None`` with the row ``invalid``."""
    facts: dict[str, Any] = {}
    nb, reason = _read_submission(sub, solution.assignment, root=root, batch=batch, facts=facts)
    if "mtime" in facts:
        row.file_time = format_time(datetime.fromtimestamp(facts["mtime"], timezone.utc))
        row.sha256 = facts["sha256"]
    if nb is None:
        row.status = "invalid"
        row.messages.append(reason)
        return None
    sources, notes = extract_answers(nb, solution)
    has_meta = any(meta(c) for c in nb["cells"])
    if not sources and not has_meta:
        row.status = "invalid"
        row.messages.append(f"no answer cell of assignment {solution.assignment!r} was found: "
                            "is this the right notebook?")
        return None
    row.messages.extend(notes)
    built = grading_notebook(solution, nb, PREAMBLE)
    written = [c.source for c, kind in zip(built.nb.cells, built.kinds, strict=True)
               if kind in ("answer", "student")]
    inputs = {}
    for qid in solution.questions:
        inputs[qid] = make_inputs(solution.question(qid),
                                  _question_seed(secret, solution.assignment, qid, written),
                                  solution.hidden.get(qid, ()))
    scratch = work / f"s{i:04d}"
    scratch.mkdir(mode=0o700)
    return _Job(row, solution, nb, inputs, scratch, os.urandom(32), built=built)
