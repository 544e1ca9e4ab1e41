"""Run rebuilt notebooks through nbval: trusted workers outside, one sandbox per submission.

A worker is one ``pytest --nbval-lax`` process (trusted: it runs no student code) that
runs a chunk of notebooks in sequence; pytest and nbval start once per chunk. Each
notebook lives in its own private folder (``Run.notebook.parent``, unpredictable name,
0700, inside the grader's private work folder) with:

* ``submission.ipynb``: the notebook nbval runs (read by the worker only);
* ``config.json``: the grader's inputs and the submission's HMAC key, copied read-only
  into that submission's sandbox only;
* ``sandbox.json``: the mode and limits the kernel launcher applies
  (:mod:`kpca_lib.course.grading.run.sandbox`).

The worker's plugin (:mod:`kpca_lib.course.grading.run.report_plugin`) starts every kernel in
its own sandbox, enforces the wall clock and output caps, and writes a JSON line per
cell (outcome, facts, exports) to a report file in the worker's private folder, which
no kernel can see. A notebook whose worker died before it finished is run again alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import resource
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judge.plain import encode
from . import sandbox as sb

__all__ = ["Run", "CellOutcome", "run_all", "worker_command", "write_attempt"]

CHUNK = 16
STARTUP = 60.0
GRACE = 10.0  # report_plugin.GRACE: the watchdog's margin over the cell timeout
POLL = 0.2  # seconds between two reads of a worker's report (runs are delivered as they end)
#: The trusted worker's own bounds: its address space, and how long it may go without a
#: report line once the sandbox's watchdog should have acted (a cell: timeout + GRACE;
#: a kernel's start: STARTUP) before the runner kills it as stuck.
WORKER_MEMORY_MB = 3072
STALL_SLACK = 20.0
#: Held while a worker is forked and while ``on_done`` runs (the judge, in a worker thread):
#: OpenBLAS shuts its thread pool down at every fork, and a BLAS call running in another
#: thread at that moment then waits forever for threads that are gone (seen once: the judge's
#: ``eigh`` spinning in ``exec_blas`` for 20 minutes while a neighbour's worker started).
FORK_LOCK = threading.Lock()
#: The whole notebook's wall clock when none is given: this many times the per-cell limit.
NOTEBOOK_FACTOR = 10


def notebook_limit(timeout: float, notebook_timeout: float | None = None) -> float:
    """Seconds one notebook (one attempt) may run from its kernel's start: ``notebook_timeout``,
    else :data:`NOTEBOOK_FACTOR` times the per-cell ``timeout``."""
    return float(notebook_timeout) if notebook_timeout else NOTEBOOK_FACTOR * float(timeout)


@dataclass
class CellOutcome:
    cell: int
    outcome: str
    alive: bool | None
    text: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """One notebook to run (``notebook`` inside its own private folder) and what happened."""

    notebook: Path
    n_cells: int
    #: Called before every attempt (a notebook whose worker died is run again alone).
    setup: Callable[[], None] | None = None
    cells: dict[int, CellOutcome] = field(default_factory=dict)
    exports: dict[int, list[Any]] = field(default_factory=dict)  # cell -> export records
    finished: bool = False
    note: str = ""
    #: Wall clock in the worker from the kernel's start to the notebook's last cell,
    #: summed over attempts (seconds).
    seconds: float = 0.0


# The worker's first lines: jsonschema (imported by nbformat, imported by nbval) builds an
# IRI grammar with lark at import time (1.4 s, ~10 s on a loaded machine) for a format
# notebooks never use; without ``rfc3987_syntax`` jsonschema just skips that format.
_BOOT = (
    "import sys; sys.modules.setdefault('rfc3987_syntax', None); import pytest; "
    "sys.exit(pytest.main(sys.argv[1:]))"
)


def worker_command(notebooks: list[Path], rootdir: Path, timeout: float) -> list[str]:
    """The argv of one trusted nbval worker over ``notebooks``."""
    return [
        sys.executable, "-c", _BOOT, "-q", "-c", str(rootdir / "pytest.ini"), "--rootdir", str(rootdir),
        "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:hypothesispytest", "-p", "no:randomly",
        "-p", "no:cov", "-p", "kpca_lib.course.grading.run.report_plugin",
        "--nbval-lax", f"--nbval-cell-timeout={timeout:g}", f"--nbval-kernel-startup-timeout={STARTUP:g}",
        *[str(n) for n in notebooks],
    ]


def _worker_env(report: Path, timeout: float, sandbox: str,
                notebook: float | None = None) -> dict[str, str]:
    """The worker's environment (trusted, but it needs nothing of the grader's: no secret)."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "OPENBLAS_CORETYPE",
            "OPENBLAS_L2_SIZE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({
        "KPCA_REPORT_FILE": str(report),
        "KPCA_CELL_TIMEOUT": f"{timeout:g}",
        "KPCA_SANDBOX": sandbox,
        "KPCA_NOTEBOOK_TIMEOUT": f"{notebook_limit(timeout, notebook):g}",
        "HOME": str(report.parent),
        "JUPYTER_PLATFORM_DIRS": "1",
        "JUPYTER_RUNTIME_DIR": str(report.parent / "runtime"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    })
    if os.environ.get("KPCA_SANDBOX_NO_CGROUPS"):
        env["KPCA_SANDBOX_NO_CGROUPS"] = os.environ["KPCA_SANDBOX_NO_CGROUPS"]
    return env


def _worker_preexec() -> None:
    """In the worker, before exec: die when the grader dies (so do its sandboxes), and
    bound its address space (what a kernel's messages can make it allocate)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    size = WORKER_MEMORY_MB * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    with contextlib.suppress(ValueError, OSError):  # the soft limit: the launcher of each
        # kernel (trusted, started by the worker) then sets the kernel's own limits
        resource.setrlimit(resource.RLIMIT_AS, (min(size, hard) if hard >= 0 else size, hard))


def _sweep(run: Run) -> None:
    """Whatever the worker left of this submission's sandbox: kill it, remove its cgroups."""
    folder = run.notebook.parent
    try:
        spec = sb.read_spec(folder)
    except (OSError, ValueError):
        return
    cgroups = spec.get("cgroups") or {}
    sb.destroy_cgroups(cgroups)
    sb.destroy_cgroups(sb.cgroup_paths(f"kpca-{folder.name}"))
    if spec.get("uid") is not None:
        sb.kill_uid(int(spec["uid"]))
    if not cgroups:  # a cgroup holds every process of the submission; otherwise search
        sb.kill_tagged(folder.name)


class _Report:
    """Reads a worker's report file as it grows: cell outcomes, exports and clocks per run.

    A worker runs its notebooks one after the other, so a record of another notebook
    (its kernel starting) means the previous one is over, teardown included.
    """

    def __init__(self, path: Path, runs: list[Run]) -> None:
        self.path = path
        self.by_file = {str(r.notebook): r for r in runs}
        self.by_folder = {str(r.notebook.parent): r for r in runs}
        self.offset = 0
        self.current: Run | None = None
        self.span: dict[int, list[float]] = {}  # id(run) -> [first t, last t] of this attempt
        self.last = time.monotonic()  # the worker's clock at its last line (same clock as ours)
        self.running: int | None = None  # the cell that began and has not ended

    def read(self) -> list[Run]:
        """Apply the complete lines written since the last call; the runs now over."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1  # a line being written waits for the next call
        self.offset += end
        over: list[Run] = []
        for raw in data[:end].splitlines():
            try:
                rec = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            run = self.by_file.get(rec.get("file")) or self.by_folder.get(rec.get("folder"))
            if run is None:
                continue
            if run is not self.current:
                if self.current is not None:
                    over.append(self.current)
                self.current = run
            t = rec.get("t")
            if isinstance(t, (int, float)) and not isinstance(t, bool):
                span = self.span.setdefault(id(run), [float(t), float(t)])
                span[1] = max(span[1], float(t))
                self.last = max(self.last, float(t))
            begun = rec.get("begin")
            self.running = begun if isinstance(begun, int) and not isinstance(begun, bool) else None
            cell = rec.get("cell")
            if rec.get("file") is None or not isinstance(cell, int):
                continue
            previous = run.cells.get(cell)
            if previous is None or previous.outcome == "passed":
                facts = rec.get("facts") if isinstance(rec.get("facts"), dict) else {}
                run.cells[cell] = CellOutcome(cell, str(rec.get("outcome")), rec.get("alive"),
                                              str(rec.get("text", ""))[-8000:], facts)
            if rec.get("when") == "call" and isinstance(rec.get("exports"), list):
                run.exports.setdefault(cell, []).extend(rec["exports"])
        return over

    def stalled(self, timeout: float) -> str:
        """Why the worker looks stuck (no line for longer than a limit allows), or ``""``."""
        allowed = (timeout + GRACE if self.running is not None else STARTUP) + STALL_SLACK
        quiet = time.monotonic() - self.last
        if quiet <= allowed:
            return ""
        where = f"cell {self.running}" if self.running is not None else "between cells"
        return (f"the grader's worker stopped responding ({where}, {quiet:.0f} s without "
                f"progress against a bound of {allowed:.0f} s) and was stopped")

    def close(self, run: Run) -> None:
        """Add this attempt's wall clock (kernel start to its last record) to ``run.seconds``."""
        span = self.span.pop(id(run), None)
        if span is not None:
            run.seconds += max(0.0, span[1] - span[0])


def _run_chunk(runs: list[Run], workdir: Path, timeout: float, limits: sb.Limits, sandbox: str,
               deliver: Callable[[Run], None] | None = None,
               delivered: set[int] | None = None, notebook: float | None = None) -> None:
    """Run ``runs`` in one worker; ``deliver(run)`` each run as soon as it is over and
    finished (the worker went on to the next notebook), adding ``id(run)`` to
    ``delivered`` first. The other runs are left to the caller."""
    for r in runs:
        if r.setup is not None:
            r.setup()
        sb.write_spec(r.notebook.parent, mode=sandbox, limits=limits, cgroups={},
                      uid=sb.throwaway_uid() if sandbox == "bwrap" else None)
    report = workdir / f"report-{secrets.token_hex(8)}.jsonl"
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "runtime").mkdir(mode=0o700, exist_ok=True)
    cmd = worker_command([r.notebook for r in runs], workdir, timeout)
    whole = notebook_limit(timeout, notebook) + GRACE + 10.0  # then its cells fail at once
    budget = sum(STARTUP + min(r.n_cells * (timeout + GRACE + 10.0), whole + r.n_cells)
                 for r in runs) + 60.0
    reader = _Report(report, runs)
    delivered = set() if delivered is None else delivered

    def over(done: list[Run]) -> None:
        for r in done:
            reader.close(r)
            r.finished = len(r.cells) >= r.n_cells
            if deliver is not None and r.finished and id(r) not in delivered:
                delivered.add(id(r))
                deliver(r)

    with FORK_LOCK:  # never while another thread judges (OpenBLAS stops its threads at fork)
        proc = subprocess.Popen(
            cmd, cwd=workdir, env=_worker_env(report, timeout, sandbox, notebook),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_worker_preexec,
        )
    try:
        deadline = time.monotonic() + budget
        while True:
            try:
                proc.wait(timeout=POLL)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() >= deadline:
                for r in runs:
                    if id(r) not in delivered:
                        r.note = "the grader's watchdog stopped this run"
                break
            over(reader.read())
            stuck = reader.stalled(timeout)
            if stuck:  # the run it was on is retried alone; alone, it ends with this note
                if reader.current is not None and id(reader.current) not in delivered:
                    reader.current.note = stuck
                break
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for r in runs:
            _sweep(r)
    reader.read()
    for r in runs:
        if id(r) not in delivered:
            reader.close(r)
            r.finished = len(r.cells) >= r.n_cells


#: Said once per batch when kernel memory is not bounded per sandbox (see
#: :func:`kernel_memory_bounded`).
KERNEL_MEMORY_WARNING = (
    "warning: no memory cgroup, and this grader may not read its sandboxes' socket memory (it "
    "is not root): the kernel memory a submission holds (socket buffers, pipes) is not bounded "
    "per submission, so the submissions are graded one at a time (--jobs 1). Grade as root, or "
    "with a memory cgroup (docs/security.md), to grade them in parallel.")


def kernel_memory_bounded(sandbox: str) -> bool:
    """Whether a sandbox's kernel memory is bounded: a memory cgroup counts it, or the
    watchdog reads its sockets' memory (:mod:`.sockmem`; root). ``--sandbox none`` runs
    trusted submissions only and is not held to it."""
    from . import sockmem

    return sandbox != "bwrap" or "memory" in sb.cgroup_roots() or sockmem.measurable()


def _bounded_jobs(jobs: int, sandbox: str) -> int:
    """``jobs``, or 1 (said on stderr) where kernel memory is not bounded per sandbox."""
    if jobs > 1 and not kernel_memory_bounded(sandbox):
        print(KERNEL_MEMORY_WARNING, file=sys.stderr, flush=True)
        return 1
    return jobs


def run_all(
    runs: list[Run],
    workdir: Path,
    *,
    timeout: float,
    memory_mb: int,
    jobs: int,
    sandbox: str = "bwrap",
    on_done: Callable[[Run], None] | None = None,
    notebook_timeout: float | None = None,
) -> None:
    """Run every notebook; ``jobs`` workers at a time, each over chunks of notebooks.

    ``notebook_timeout``: seconds a whole notebook may run (see :func:`notebook_limit`).

    ``on_done(run)`` is called once per run, from worker threads but never concurrently,
    as soon as the run is over (while its worker goes on with the next notebooks of its
    chunk), or after its chunk when it did not finish.
    """
    if sandbox not in sb.MODES:
        raise ValueError(f"sandbox must be one of {sb.MODES}, got {sandbox!r}.")
    limits = sb.Limits.for_memory(int(memory_mb))
    sb.sweep_stale_cgroups()
    jobs = _bounded_jobs(jobs, sandbox)
    pending: queue.Queue[list[Run]] = queue.Queue()
    size = max(1, min(CHUNK, -(-len(runs) // max(1, jobs))))
    for i in range(0, len(runs), size):
        pending.put(runs[i : i + size])
    lock = threading.Lock()
    errors: list[BaseException] = []

    def deliver(r: Run) -> None:
        if on_done is not None:
            with lock, FORK_LOCK:
                try:
                    on_done(r)
                except BaseException as exc:  # noqa: BLE001 - reported after join
                    errors.append(exc)

    def worker(k: int) -> None:
        n = 0
        while True:
            try:
                chunk = pending.get_nowait()
            except queue.Empty:
                return
            n += 1
            chunk_dir = workdir / f"w{k}-{n}-{secrets.token_hex(8)}"
            chunk_dir.mkdir(mode=0o700)
            failed = False
            delivered: set[int] = set()
            try:
                _run_chunk(chunk, chunk_dir, timeout, limits, sandbox, deliver, delivered,
                           notebook_timeout)
            except Exception as exc:  # e.g. ENOSPC in the scratch: those runs did not finish
                failed = True
                for r in chunk:
                    if id(r) not in delivered:
                        r.note = f"the grader could not run it ({type(exc).__name__}: {exc})"
                        r.finished = False
            alone = len(chunk) == 1
            chunk = [r for r in chunk if id(r) not in delivered]  # on_done was called already
            unfinished = [r for r in chunk if not r.finished]
            retry = not alone and bool(unfinished) and not failed
            if retry:
                for r in unfinished:  # the worker died: run those again, alone
                    r.cells.clear()
                    r.exports.clear()
                    pending.put([r])
            for r in chunk:
                if r.finished or not retry:
                    deliver(r)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def write_attempt(scratch: Path, nb: Any, key: bytes, inputs: dict[str, dict[str, Any]]) -> Run:
    """Write one attempt's notebook and the kernel's inputs into a fresh folder of ``scratch``.

    Every attempt gets a fresh folder with an unpredictable name; nothing in it is
    visible to the kernel except ``config.json``, which its sandbox gets a read-only copy of.
    """
    folder = scratch / secrets.token_hex(16)
    folder.mkdir(mode=0o700)
    (folder / "submission.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    config = {
        "key": key.hex(),
        "inputs": {q: {k: encode(v) for k, v in inp.items()} for q, inp in inputs.items()},
    }
    fd = os.open(folder / "config.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(config))
    return Run(folder / "submission.ipynb", n_cells=len(nb["cells"]))
