"""``kpca-course grade --cluster``: the sandboxed runs of a batch on a Dask cluster.

The grader (the *client*) does everything it does without a cluster: it reads each
submission, derives the inputs from the grading secret, rebuilds the notebook from
``solutions/``, verifies the exports' signatures, runs the public and hidden checks and
writes the gradebook. Only the part that runs student code moves: each run of a
rebuilt notebook is **one Dask task** (:func:`run_remote`) that calls the same runner
(:func:`kpca_lib.course.grading.run.runner.run_all`: a trusted nbval process, one bubblewrap
sandbox per kernel) on a worker, in a private temporary folder of the worker's machine.
Results come back as the tasks finish (``as_completed``) and go through the same
``on_done`` as local runs: the same incremental gradebook, progress lines and run times.

What a task carries: the rebuilt notebook (trusted set-up cells and the student's
answer cells), the grader's inputs for this submission and its per-submission export
key, i.e. exactly what this submission's sandboxed kernel sees anyway. What it never
carries: the grading secret (inputs are derived on the client, so workers need neither
the secret nor its file), the hidden checks and ``solutions/`` (the checks run on the
client), other submissions. Task keys are random (``kpca-run-<hex>``), not student names.
Workers need the same ``kpca-course`` installation as the client (checked: a digest of
the ``kpca_lib`` sources) and, for ``--sandbox bwrap``, bubblewrap with user namespaces
(checked on every worker before grading, and again by each task on its worker).

A worker lost mid-batch: the scheduler gives its tasks to another worker (Dask's
resubmission after a worker death); an exception in a task is retried ``retries``
times. Each submission's result is taken from its future once, so nothing is lost or
counted twice; a task that could not run at all (it killed ``allowed-failures`` workers,
or kept failing) leaves its row ``crashed`` by the grader's fault, with the reason.

``distributed`` is imported only here, and this module only with ``--cluster``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .runner import Run, run_all

__all__ = ["ClusterRunner", "parse_cluster", "open_cluster", "run_remote", "source_digest"]

#: Times a task that raised is run again (a worker's death is handled by the scheduler).
RETRIES = 2
_WORKER_PREFIX = "kpca-grade-worker-"


def parse_cluster(spec: str) -> tuple[str, Any]:
    """``("local", N)``, ``("address", "tcp://HOST:PORT")`` or ``("file", path)``.

    ``local:N``: a LocalCluster of N worker processes on this machine; ``tcp://`` or
    ``tls://`` address: a running scheduler; a ``.json`` file: a scheduler file
    (``dask scheduler --scheduler-file``, dask-jobqueue). ``ValueError`` otherwise.
    Does not import Dask.
    """
    text = str(spec).strip()
    match = re.fullmatch(r"local:(\d+)", text)
    if match:
        n = int(match.group(1))
        if n < 1:
            raise ValueError(f"--cluster local:N needs N >= 1 worker; got {text!r}.")
        return "local", n
    if re.fullmatch(r"(tcp|tls)://[^\s/]+:\d+", text):
        return "address", text
    if text.endswith(".json"):
        path = Path(text)
        if not path.is_file():
            raise ValueError(f"--cluster: no scheduler file {text!r}.")
        return "file", path
    raise ValueError(
        f"--cluster must be local:N, tcp://HOST:PORT (or tls://) or a scheduler file (.json); "
        f"got {text!r}."
    )


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 of the ``kpca_lib`` sources (paths and contents): the same grader everywhere."""
    import kpca_lib

    root = Path(kpca_lib.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _sandbox_ok(sandbox: str) -> str:
    """``""`` if ``sandbox`` runs on this machine, else why not (cached per worker process)."""
    from .sandbox import check_sandbox

    try:
        check_sandbox(sandbox)
    except Exception as exc:  # SandboxUnavailableError, or anything the check met
        return str(exc)
    return ""


def check_worker(sandbox: str, digest: str) -> str:
    """Run on a worker: ``""`` if it can grade like the client, else why not."""
    if source_digest() != digest:
        return ("it runs a different kpca_lib than the grader (install the same kpca-course "
                "version on every worker)")
    why = _sandbox_ok(sandbox)
    return f"the sandbox is unavailable: {why}" if why else ""


def _sweep_dead_folders() -> None:
    """Remove this machine's task folders whose worker process is gone (killed mid-task)."""
    base = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for folder in base.glob(f"{_WORKER_PREFIX}*"):
            match = re.match(rf"{_WORKER_PREFIX}(\d+)-", folder.name)
            if not match or folder.stat().st_uid != os.getuid():
                continue
            try:
                os.kill(int(match.group(1)), 0)
            except ProcessLookupError:
                shutil.rmtree(folder, ignore_errors=True)
            except OSError:
                pass


def run_remote(payload: dict[str, Any]) -> dict[str, Any]:
    """One Dask task, on a worker: run one rebuilt notebook with the local runner.

    ``payload``: ``notebook`` and ``config`` (JSON text), ``n_cells``, ``timeout``,
    ``memory_mb``, ``sandbox`` and ``digest`` (the client's :func:`source_digest`).
    Returns the run's cell outcomes and exports (plain data the client verifies) and its
    wall clock on the worker (``seconds``).
    Raises ``RuntimeError`` if this worker cannot grade (then Dask retries elsewhere).
    """
    why = check_worker(payload["sandbox"], payload["digest"])
    if why:
        raise RuntimeError(f"worker on {os.uname().nodename}: {why}")
    _sweep_dead_folders()
    base = Path(tempfile.mkdtemp(prefix=f"{_WORKER_PREFIX}{os.getpid()}-"))  # 0700
    try:
        folder = base / secrets.token_hex(16)
        folder.mkdir(mode=0o700)
        (folder / "submission.ipynb").write_text(payload["notebook"], encoding="utf-8")
        fd = os.open(folder / "config.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(payload["config"])
        run = Run(folder / "submission.ipynb", n_cells=int(payload["n_cells"]))
        run_all([run], base, timeout=float(payload["timeout"]), memory_mb=int(payload["memory_mb"]),
                jobs=1, sandbox=str(payload["sandbox"]),
                notebook_timeout=payload.get("notebook_timeout"))
        return {"cells": run.cells, "exports": run.exports, "finished": run.finished,
                "note": run.note, "seconds": run.seconds}
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class ClusterRunner:
    """Runs notebooks on a Dask cluster through ``client``; :meth:`run_all` has the
    signature of :func:`kpca_lib.course.grading.run.runner.run_all`.

    ``task`` is the function each task calls (default :func:`run_remote`; it must take
    and return what :func:`run_remote` does); ``retries``: runs again after an exception.
    """

    client: Any
    task: Callable[[dict[str, Any]], dict[str, Any]] = run_remote
    retries: int = RETRIES

    def check(self, sandbox: str) -> None:
        """``RuntimeError`` unless every connected worker can grade with ``sandbox``."""
        try:
            answers = self.client.run(check_worker, sandbox, source_digest())
        except Exception as exc:
            raise RuntimeError(f"the cluster's workers could not be checked ({exc})") from exc
        bad = {w: why for w, why in answers.items() if why}
        if bad:
            raise RuntimeError("some workers cannot grade: " + "; ".join(
                f"{w}: {why}" for w, why in sorted(bad.items())))

    def threads(self) -> int:
        """How many tasks the cluster runs at once (its workers' threads; 1 if unknown)."""
        try:
            return max(1, sum(int(n) for n in self.client.nthreads().values()))
        except Exception:
            return 1

    def run_all(self, runs: list[Run], workdir: Path, *, timeout: float, memory_mb: int,
                jobs: int = 1, sandbox: str = "bwrap",
                on_done: Callable[[Run], None] | None = None,
                notebook_timeout: float | None = None) -> None:
        """Run every notebook, one task each; ``on_done(run)`` once per run, as they finish,
        never concurrently. A run whose task failed gets ``note`` and no ``on_done``.
        ``jobs`` is ignored: the cluster's worker threads decide the parallelism."""
        from distributed import as_completed

        digest = source_digest()
        futures: dict[str, Run] = {}
        submitted = []
        for run in runs:
            payload = {
                "notebook": run.notebook.read_text(encoding="utf-8"),
                "config": (run.notebook.parent / "config.json").read_text(encoding="utf-8"),
                "n_cells": run.n_cells, "timeout": timeout, "memory_mb": memory_mb,
                "sandbox": sandbox, "digest": digest, "notebook_timeout": notebook_timeout,
            }
            future = self.client.submit(self.task, payload, key=f"kpca-run-{secrets.token_hex(12)}",
                                        pure=False, retries=self.retries)
            futures[future.key] = run
            submitted.append(future)
        errors: list[BaseException] = []
        for future in as_completed(submitted):
            run = futures[future.key]
            try:
                result = future.result()
            except Exception as exc:  # KilledWorker, or the task raised retries + 1 times
                run.note = f"the cluster could not run it ({type(exc).__name__}: {exc})"[:500]
                run.finished = False
                continue
            finally:
                future.release()
            run.cells = dict(result["cells"])
            run.exports = dict(result["exports"])
            run.finished = bool(result["finished"])
            run.note = str(result["note"])
            run.seconds = float(result.get("seconds", 0.0))
            if on_done is not None:
                try:
                    on_done(run)
                except Exception as exc:  # reported after the batch (Ctrl-C is not held back)
                    errors.append(exc)
        if errors:
            raise errors[0]


@contextlib.contextmanager
def open_cluster(cluster: str | ClusterRunner, *, sandbox: str) -> Iterator[ClusterRunner]:
    """A checked :class:`ClusterRunner` for ``cluster`` (see :func:`parse_cluster`), or
    ``cluster`` itself if it is one; a LocalCluster started here is closed on exit.

    ``local:N``: N worker processes of one thread each, no dashboard, listening on
    127.0.0.1 only, over TLS with certificates made for this cluster (``tls://``). Raises ``ValueError`` (bad spec), ``RuntimeError`` (Dask missing, a
    worker cannot grade) and ``OSError`` (the scheduler cannot be reached).
    """
    if isinstance(cluster, ClusterRunner):
        cluster.check(sandbox)
        yield cluster
        return
    kind, value = parse_cluster(cluster)
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise RuntimeError(
            f"--cluster needs Dask ({exc}); install it with `pip install 'kpca-course[cluster]'`."
        ) from None
    with contextlib.ExitStack() as stack:
        if kind == "local":
            # TLS with throwaway credentials (mutual: the scheduler refuses a client or
            # worker without this cluster's certificate), so another user of this machine
            # cannot reach 127.0.0.1's port and run code as the grader. The scheduler's HTTP
            # server takes a free port (the default, 8787, is taken by a second cluster).
            local = stack.enter_context(LocalCluster(
                n_workers=value, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR, security=True))
            client = stack.enter_context(Client(local))
        elif kind == "address":
            client = stack.enter_context(Client(value, timeout=60))
        else:
            client = stack.enter_context(Client(scheduler_file=str(value), timeout=60))
        runner = ClusterRunner(client)
        runner.check(sandbox)
        yield runner
