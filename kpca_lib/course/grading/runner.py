"""Run rebuilt notebooks through nbval in child processes, with time and memory limits.

One ``pytest --nbval-lax`` child runs a *chunk* of submissions (pytest and nbval start
once; every notebook still gets its own fresh kernel), in its own session, with
``RLIMIT_AS`` set before ``exec`` (the kernels inherit it), a per-cell timeout, and a
watchdog for the whole chunk. After the child ends, every process that carries the
run's token in its environment (the kernels, anything they started) is killed.
A notebook whose run did not finish (the child died or was killed) is run again
alone; if that fails too, it is reported as crashed.
"""

from __future__ import annotations

import json
import os
import queue
import re
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

__all__ = ["Run", "CellOutcome", "run_all"]

CHUNK = 8
STARTUP = 60.0


@dataclass
class CellOutcome:
    cell: int
    outcome: str
    alive: bool | None
    text: str


@dataclass
class Run:
    """One notebook to run (``notebook`` inside its own scratch folder) and what happened."""

    notebook: Path
    n_cells: int
    #: Called before every attempt (a notebook whose chunk died is run again alone, and
    #: its first attempt may have consumed files it needs, such as the grader's config).
    setup: Callable[[], None] | None = None
    cells: dict[int, CellOutcome] = field(default_factory=dict)
    finished: bool = False
    note: str = ""


def _limits(memory_mb: int) -> Callable[[], None]:
    def apply() -> None:
        limit = int(memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _kill_tagged(token: str) -> None:
    """SIGKILL every process of ours whose environment carries ``token``."""
    needle = f"KPCA_GRADE_RUN={token}".encode()
    me = os.getpid()
    for _ in range(3):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    env = fh.read()
            except OSError:
                continue
            if needle in env.split(b"\0"):
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.05)


def _child_env(token: str, report: Path, scratch: Path) -> dict[str, str]:
    keep = (
        "PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH",
        # Some processors need these for OpenBLAS to compute correctly (see the machine notes).
        "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
    )
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({
        "KPCA_GRADE_RUN": token,
        "KPCA_REPORT_FILE": str(report),
        "HOME": str(scratch),
        "IPYTHONDIR": str(scratch / ".ipython"),
        "JUPYTER_RUNTIME_DIR": str(scratch / ".runtime"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(scratch / ".mpl"),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    return env


_CELL = re.compile(r"Cell (\d+)")


def _run_chunk(runs: list[Run], workdir: Path, timeout: float, memory_mb: int) -> None:
    for r in runs:
        if r.setup is not None:
            r.setup()
    token = secrets.token_hex(8)
    report = workdir / f"report-{token}.jsonl"
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\n")
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-c", str(ini), "--rootdir", str(workdir),
        "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:hypothesispytest",
        "-p", "no:randomly", "-p", "kpca_lib.course.grading.report_plugin",
        "--nbval-lax", "--nbval-current-env",
        f"--nbval-cell-timeout={timeout:g}", f"--nbval-kernel-startup-timeout={STARTUP:g}",
        *[str(r.notebook) for r in runs],
    ]
    budget = sum(STARTUP + r.n_cells * (timeout + 6.0) for r in runs) + 30.0
    env = _child_env(token, report, workdir)
    for sub in (".ipython", ".runtime", ".mpl"):
        (workdir / sub).mkdir(exist_ok=True)
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, preexec_fn=_limits(memory_mb), start_new_session=True,
    )
    try:
        proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        for r in runs:
            r.note = "the grader's watchdog stopped this run"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        _kill_tagged(token)
    by_file = {str(r.notebook): r for r in runs}
    if report.exists():
        for line in report.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            run = by_file.get(rec.get("file"))
            cell = rec.get("cell")
            if run is None or not isinstance(cell, int):
                continue
            previous = run.cells.get(cell)
            if previous is None or previous.outcome == "passed":
                run.cells[cell] = CellOutcome(cell, str(rec.get("outcome")), rec.get("alive"),
                                              str(rec.get("text", ""))[-8000:])
    for r in runs:
        r.finished = len(r.cells) >= r.n_cells


def run_all(
    runs: list[Run],
    workdir: Path,
    *,
    timeout: float,
    memory_mb: int,
    jobs: int,
    on_done: Callable[[Run], None] | None = None,
) -> None:
    """Run every notebook; ``jobs`` children at a time, each over a chunk of notebooks."""
    pending: queue.Queue[list[Run]] = queue.Queue()
    size = max(1, min(CHUNK, -(-len(runs) // max(1, jobs))))
    for i in range(0, len(runs), size):
        pending.put(runs[i : i + size])
    lock = threading.Lock()

    def worker(k: int) -> None:
        n = 0
        while True:
            try:
                chunk = pending.get_nowait()
            except queue.Empty:
                return
            n += 1
            chunk_dir = workdir / f"job{k}-{n}"
            chunk_dir.mkdir(parents=True, exist_ok=True)
            _run_chunk(chunk, chunk_dir, timeout, memory_mb)
            unfinished = [r for r in chunk if not r.finished]
            if len(chunk) > 1 and unfinished:
                for r in unfinished:  # the child died: run those again, alone
                    r.cells.clear()
                    pending.put([r])
            for r in chunk:
                if r.finished or len(chunk) == 1:
                    if on_done is not None:
                        with lock:
                            on_done(r)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
