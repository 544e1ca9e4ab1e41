"""How many threads to use, and how the library's threads and BLAS's threads share the CPUs.

Three rules keep kernel PCA fast on a machine that other programs share:

1. **Size the parallelism from the CPUs actually available** (:func:`available_cpus`):
   the CPU affinity mask (``os.sched_getaffinity``, e.g. ``taskset`` or a Kubernetes
   cpuset) and the cgroup CPU quota (cgroup v2 ``cpu.max``, cgroup v1
   ``cpu.cfs_quota_us / cpu.cfs_period_us``, e.g. ``docker --cpus``), not
   ``os.cpu_count()``. ``n_jobs`` is clipped to that number (:func:`resolve_threads`).
2. **Never multiply thread counts**: while the library's own worker threads run, BLAS
   uses one thread (:func:`blas_threads`), so workers × BLAS threads never exceed the
   available CPUs.
3. **No multithreaded BLAS for small operations.** OpenBLAS splits every call
   over its threads and waits for all of them at the end of the call, spinning
   (``sched_yield``) meanwhile. A Krylov eigensolver makes thousands of small calls
   (a product with a 256-row panel, the QR of an ``n×12`` block); when another
   program holds one of the cores, every call waits for a descheduled thread, and
   the spinning threads take CPU time from the one that would finish the work.
   Measured on 2 cores beside ``stress-ng --cpu 4``: ``np.linalg.qr`` of a
   12000×12 block took 0.17 s with two OpenBLAS threads and 0.007 s with one; a
   fit went from 1 s to 8–53 s. So an eigensolver's own work runs with one BLAS
   thread (:func:`one_blas_thread_for_solver`), and only the products with the
   matrix use the caller's BLAS threads (:func:`caller_blas_threads`) or, for the
   half-stored kernel, the library's worker threads with a dynamic work queue
   (:func:`parallel_for`): a thread that the scheduler parks does not stall the others,
   which take the remaining tasks.

``threadpoolctl.threadpool_limits`` scans every loaded shared library on each call
(about a millisecond, much more on a busy machine). One
:class:`~threadpoolctl.ThreadpoolController` is made on first use, after NumPy's and
SciPy's BLAS are loaded (the only libraries limited here), and reused (changing a
limit then costs about 16 µs). On Linux it looks only at the loaded libraries whose
file name is a BLAS's (:class:`_BLASController`): threadpoolctl's full scan resolves
the path of every one (about 220 with SciPy and scikit-learn loaded, 8–20 ms in a
fresh process, paid by the first fit).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import numbers
import os
import threading
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from threadpoolctl import ThreadpoolController

__all__ = [
    "available_cpus",
    "cgroup_cpu_limit",
    "resolve_threads",
    "blas_threads",
    "current_blas_threads",
    "one_blas_thread_for_solver",
    "caller_blas_threads",
    "with_caller_blas_threads",
    "parallel_for",
]

F = TypeVar("F", bound=Callable[..., object])

#: Where the cgroup file systems are mounted (cgroup v2 unified, or v1 per controller).
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The cgroups of this process, one ``hierarchy-id:controllers:path`` line each.
PROC_SELF_CGROUP = Path("/proc/self/cgroup")


# -- how many CPUs ---------------------------------------------------------------------


def _affinity_count() -> int:
    """CPUs in this process's affinity mask (``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cgroup_paths(proc_self_cgroup: Path) -> tuple[str | None, str | None]:
    """This process's cgroup v2 path and cgroup v1 ``cpu`` controller path (``None``: unknown)."""
    v2 = v1 = None
    text = _read(proc_self_cgroup) or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _ancestors(root: Path, path: str | None) -> list[Path]:
    """``root/path`` and every folder above it up to ``root`` (limits of parents apply too)."""
    parts = [p for p in (path or "/").split("/") if p]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _v2_limit(folder: Path) -> float | None:
    text = _read(folder / "cpu.max")
    if not text:
        return None
    fields = text.split()
    try:
        if fields[0] == "max":
            return None
        quota, period = float(fields[0]), float(fields[1]) if len(fields) > 1 else 100_000.0
    except (ValueError, IndexError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _v1_limit(folder: Path) -> float | None:
    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
    try:
        q, p = float(quota or "-1"), float(period or "0")
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_cpu_limit(
    root: str | os.PathLike | None = None, proc_self_cgroup: str | os.PathLike | None = None
) -> float | None:
    """The CPU bandwidth this process's cgroup allows, in CPUs (``None``: no limit found).

    cgroup v2: ``cpu.max`` (``"150000 100000"`` is 1.5 CPUs, ``"max 100000"`` no
    limit) of the process's cgroup and of every cgroup above it; cgroup v1 (used
    only when v2 sets no limit): ``cpu.cfs_quota_us / cpu.cfs_period_us`` (a
    quota of -1 is no limit) under ``cpu/`` or ``cpu,cpuacct/``. The smallest
    limit found wins. Inside a container the process's own cgroup is usually
    the root of the mount, which is also searched.

    Parameters
    ----------
    root : path, optional
        Mount point of the cgroup file systems (default ``CGROUP_ROOT``, ``/sys/fs/cgroup``).
    proc_self_cgroup : path, optional
        The file naming this process's cgroups (default ``PROC_SELF_CGROUP``,
        ``/proc/self/cgroup``).

    Returns
    -------
    float or None
        Number of CPUs (may be fractional), or ``None``.
    """
    root = Path(CGROUP_ROOT if root is None else root)
    v2_path, v1_path = _cgroup_paths(
        Path(PROC_SELF_CGROUP if proc_self_cgroup is None else proc_self_cgroup)
    )
    limits = [lim for d in _ancestors(root, v2_path) if (lim := _v2_limit(d)) is not None]
    if not limits:
        for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            folders = _ancestors(root / mount, v1_path)
            limits += [lim for d in folders if (lim := _v1_limit(d)) is not None]
    return min(limits) if limits else None


#: (time.monotonic(), value) of the last :func:`available_cpus` (a fit asks several times).
_CPUS_SEEN: list[tuple[float, int]] = []
#: Seconds an :func:`available_cpus` answer is reused: reading the affinity mask and the
#: cgroup files costs about 0.2 ms, five times in a small fit; a changed quota or mask is
#: seen within this time.
_CPUS_TTL = 1.0


def available_cpus() -> int:
    """Number of CPUs this process may use: affinity mask and cgroup quota, at least 1.

    The quota is rounded up (1.5 CPUs → 2 threads, as joblib/loky do): the
    threads then share the quota, and the dynamic work queue of
    :func:`parallel_for` keeps a throttled thread from stalling the others.
    Answers are reused for :data:`_CPUS_TTL` seconds.
    """
    now = time.monotonic()
    if _CPUS_SEEN and now - _CPUS_SEEN[0][0] < _CPUS_TTL:
        return _CPUS_SEEN[0][1]
    cpus = _affinity_count()
    quota = cgroup_cpu_limit()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    _CPUS_SEEN[:] = [(now, max(1, cpus))]
    return max(1, cpus)


def resolve_threads(n_jobs: int | None, cpus: int | None = None) -> int:
    """Worker threads for ``n_jobs`` (scikit-learn's meaning), clipped to the available CPUs.

    Parameters
    ----------
    n_jobs : int or None
        ``None`` or ``-1``: every available CPU; a positive integer: that many,
        but no more than the available CPUs (more threads than CPUs only make
        the threads wait for each other); ``-2``: all but one, and so on (at least 1).
    cpus : int, optional
        The available CPUs (default :func:`available_cpus`).

    Returns
    -------
    int
        Between 1 and ``cpus``.

    Raises
    ------
    ValueError
        If ``n_jobs`` is 0, a bool or not an integer.
    """
    if isinstance(n_jobs, bool) or (
        n_jobs is not None and (not isinstance(n_jobs, numbers.Integral) or n_jobs == 0)
    ):
        raise ValueError(
            f"n_jobs must be None, a positive number of threads, or -1 for every core "
            f"(-2 for all but one, ...); got {n_jobs!r}."
        )
    cpus = available_cpus() if cpus is None else max(1, int(cpus))
    if n_jobs is None:
        return cpus
    n_jobs = int(n_jobs)
    return min(n_jobs, cpus) if n_jobs > 0 else max(1, cpus + 1 + n_jobs)


# -- BLAS threads ----------------------------------------------------------------------


def _blas_prefixes() -> tuple[str, ...] | None:
    """The file-name prefixes of the BLAS libraries threadpoolctl controls (``None``: unknown)."""
    import threadpoolctl

    controllers = getattr(threadpoolctl, "_ALL_CONTROLLERS", None)
    if not controllers:
        return None
    prefixes = tuple(
        prefix.lower()
        for controller in controllers
        if getattr(controller, "user_api", None) == "blas"
        for prefix in getattr(controller, "filename_prefixes", ())
    )
    return prefixes or None


class _BLASController(ThreadpoolController):
    """A controller of the loaded BLAS libraries only, found without resolving every path.

    ``/proc/self/maps`` names each mapped file by its resolved path, so a library whose
    file name does not start like a BLAS's cannot be one; threadpoolctl is handed only
    the others (and resolves and checks them as usual). Relies on two private names of
    threadpoolctl (``_ALL_CONTROLLERS``, ``_make_controller_from_path``):
    :func:`_controller` falls back to the full scan when they are missing or anything
    fails, and ``tests/test_threads.py`` compares the two.
    """

    def __init__(self, prefixes: tuple[str, ...]):
        self._prefixes = prefixes
        super().__init__()

    def _load_libraries(self) -> None:
        # First the BLAS that NumPy's and SciPy's wheels bundle (numpy.libs/, scipy.libs/),
        # the libraries our own calls use: a directory listing instead of reading the
        # process's memory map (2-3 ms in a fresh process, a third of a fit at n = 500).
        # threadpoolctl opens them with RTLD_NOLOAD, so a file that is not loaded is skipped.
        for path in _bundled_blas(self._prefixes):
            self._make_controller_from_path(path)
        if self.lib_controllers:
            return
        maps = Path("/proc/self/maps").read_bytes()
        paths = {path.decode() for path in self._PATH_RE.findall(maps)}
        for path in sorted(paths):
            if os.path.basename(path).lower().startswith(self._prefixes):
                self._make_controller_from_path(path)


def _bundled_blas(prefixes: tuple[str, ...]) -> list[str]:
    """The BLAS files of the ``numpy.libs`` and ``scipy.libs`` folders of wheels (may be none)."""
    import numpy
    import scipy

    found = []
    for package in (numpy, scipy):
        folder = Path(package.__file__).parent.parent / f"{package.__name__}.libs"
        if folder.is_dir():
            found += [str(p) for p in sorted(folder.iterdir()) if p.name.lower().startswith(prefixes)]
    return found


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    import scipy.linalg  # noqa: F401  (SciPy's BLAS is loaded before the controller looks)

    prefixes = _blas_prefixes()
    if (
        prefixes is not None
        and Path("/proc/self/maps").is_file()
        and hasattr(ThreadpoolController, "_make_controller_from_path")
        and hasattr(ThreadpoolController, "_PATH_RE")
    ):
        try:
            return _BLASController(prefixes)
        except Exception:  # noqa: BLE001 (a private API changed: take the full scan)
            pass
    return ThreadpoolController()


#: The BLAS thread limit a :func:`blas_threads` block of this context set (``None``: none).
_BLAS_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "kpca_blas_limit", default=None
)


@contextlib.contextmanager
def blas_threads(limit: int | None) -> Iterator[None]:
    """Within the block, BLAS uses at most ``limit`` threads (``None``: leave it alone).

    Inside a block that already set the same limit this costs nothing: a solver on one
    BLAS thread calls it around every product (``parallel_for``), and each threadpoolctl
    call costs about 0.1-0.3 ms, a fixed overhead that showed at n = 500.
    """
    if limit is None or _BLAS_LIMIT.get() == int(limit):
        yield
        return
    token = _BLAS_LIMIT.set(int(limit))
    try:
        with _controller().limit(limits=int(limit), user_api="blas"):
            yield
    finally:
        _BLAS_LIMIT.reset(token)


def current_blas_threads() -> int:
    """The largest thread count of the loaded BLAS libraries now (1 if there is none)."""
    counts = [lib.num_threads for lib in _controller().select(user_api="blas").lib_controllers]
    return max([1, *(c for c in counts if c)])


#: BLAS threads the caller of an eigensolver had (``None``: not inside an eigensolver).
_CALLER_BLAS: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "kpca_caller_blas_threads", default=None
)


@contextlib.contextmanager
def caller_blas_threads() -> Iterator[None]:
    """Within an eigensolver (:func:`one_blas_thread_for_solver`): the caller's BLAS threads.

    For the products with the matrix and for LAPACK on the whole matrix, large
    calls that gain from threads. Outside an eigensolver, BLAS is only capped at
    :func:`available_cpus` (OpenBLAS sizes its pool from the affinity mask and
    ignores a cgroup quota).
    """
    outer = _CALLER_BLAS.get()
    if outer is None:
        cpus = available_cpus()
        with blas_threads(cpus if current_blas_threads() > cpus else None):
            yield
        return
    with blas_threads(outer if outer != 1 else None):
        yield


def with_caller_blas_threads(func: F) -> F:
    """Decorator: ``func`` runs inside :func:`caller_blas_threads`."""

    @functools.wraps(func)
    def wrapper(*args: object, **kwargs: object) -> object:
        with caller_blas_threads():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def one_blas_thread_for_solver(func: F) -> F:
    """Decorator of an eigensolver: its own BLAS work runs on one thread.

    The caller's BLAS thread count (capped at :func:`available_cpus`) is
    remembered for :func:`caller_blas_threads`, which the products with the
    matrix and dense LAPACK calls use. Nested calls keep the outermost count.
    """

    @functools.wraps(func)
    def wrapper(*args: object, **kwargs: object) -> object:
        if _CALLER_BLAS.get() is not None:
            return func(*args, **kwargs)
        token = _CALLER_BLAS.set(min(current_blas_threads(), available_cpus()))
        try:
            with blas_threads(1):
                return func(*args, **kwargs)
        finally:
            _CALLER_BLAS.reset(token)

    return wrapper  # type: ignore[return-value]


# -- the library's own threads -----------------------------------------------------------


class _TaskQueue:
    """Task indices ``0, 1, ...`` handed out one at a time; counts the tasks in progress."""

    def __init__(self, n_tasks: int) -> None:
        self.n_tasks = n_tasks
        self.next = 0
        self.busy = 0
        self.error: BaseException | None = None
        self.cond = threading.Condition()

    def take(self) -> int | None:
        with self.cond:
            if self.next >= self.n_tasks or self.error is not None:
                return None
            i = self.next
            self.next += 1
            self.busy += 1
            return i

    def done(self, error: BaseException | None = None) -> None:
        with self.cond:
            self.busy -= 1
            if error is not None and self.error is None:
                self.error = error
            if self.busy == 0:
                self.cond.notify_all()

    def run(self, fn: Callable[[int], None]) -> None:
        while (i := self.take()) is not None:
            try:
                fn(i)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the caller
                self.done(exc)
                return
            self.done()

    def wait(self) -> None:
        """Until no task is in progress (tasks not yet taken will not be taken)."""
        with self.cond:
            while self.busy:
                self.cond.wait()


def parallel_for(fn: Callable[[int], None], n_tasks: int, n_threads: int) -> None:
    """Call ``fn(i)`` for every ``i < n_tasks`` on up to ``n_threads`` threads, BLAS on one.

    A dynamic work queue: each thread (the calling thread is one of them) takes
    the next task when it has finished one, so a thread that the scheduler
    parks (the machine is busy) delays only the task it holds, and the others
    take the rest. The caller waits only for tasks in progress, not for helper
    threads that never got a CPU. ``fn`` must write its results to places of
    its own (results then do not depend on which thread ran which task, nor on
    ``n_threads``). BLAS is limited to one thread throughout, also with
    ``n_threads = 1``, so that every task computes the same numbers.

    Parameters
    ----------
    fn : callable
        ``fn(i)``; NumPy and BLAS release the GIL, so tasks run in parallel.
    n_tasks : int
    n_threads : int
        Threads, the caller included (use :func:`resolve_threads`).

    Raises
    ------
    BaseException
        The first exception raised by a task (the remaining tasks are not started).
    """
    n_threads = max(1, min(int(n_threads), n_tasks))
    queue = _TaskQueue(n_tasks)
    with blas_threads(1):
        helpers = [
            threading.Thread(target=queue.run, args=(fn,), daemon=True, name=f"kpca-worker-{t}")
            for t in range(1, n_threads)
        ]
        for thread in helpers:
            thread.start()
        queue.run(fn)
        queue.wait()
    if queue.error is not None:
        raise queue.error
