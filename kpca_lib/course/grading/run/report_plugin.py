"""A pytest plugin loaded in the grader's nbval worker (trusted, outside every sandbox).

It runs in the worker process, so student code can neither see nor forge what it writes.
It does four things:

1. **Starts each notebook's kernel in that submission's sandbox.** nbval's
   ``start_new_kernel`` is replaced: the kernelspec's argv is the trusted launcher
   (:func:`kpca_lib.course.grading.run.sandbox.launch`), the ZMQ transport is ``ipc`` (the
   sandbox has no network), the submission's cgroups are created just before and
   removed (with anything left in them) after the notebook.
2. **Caps what the kernel can send**: at most :data:`MAX_MESSAGE` bytes per ZMQ message
   (larger ones are refused by ZMQ before they are read), and per notebook
   :data:`OUTPUT_BUDGET` bytes of messages on every channel and :data:`CONTAINER_BUDGET`
   JSON containers, counted before a message is decoded; past either the sandbox is
   killed. (The worker's own memory and time are bounded by the runner.)
3. **Enforces the wall clocks**: a watchdog kills the whole sandbox when a cell runs
   ``timeout + GRACE`` seconds, whatever the cell does with SIGINT, and when the notebook
   has run ``$KPCA_NOTEBOOK_TIMEOUT`` seconds since its kernel started (the later cells then
   fail at once: their kernel is dead). Without a memory
   cgroup it also sums the resident memory of the sandbox's processes every
   :data:`MEMORY_POLL` seconds and kills the sandbox past the budget (each process's
   ``RLIMIT_AS`` cannot bound a sum).
4. **Writes JSON lines** to ``$KPCA_REPORT_FILE``: one as each cell begins, one as it finishes:
   notebook, cell number (nbval's ``Cell N``), outcome, error text, the worker's
   monotonic clock ``t`` (and one line when a notebook's kernel starts, so the runner
   knows each notebook's wall clock), and the *facts*
   the status is decided from: whether nbval's own timeout fired, whether the
   watchdog or the output cap killed the sandbox, the cgroup's OOM kills and refused
   forks during the cell, whether the kernel was still alive, and the answers the
   kernel exported (display messages of type :data:`EXPORT_MIME`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from . import sandbox as sb
from . import sockmem

__all__ = ["EXPORT_MIME", "OUTPUT_BUDGET", "MAX_MESSAGE", "GRACE"]

EXPORT_MIME = "application/vnd.kpca.export+json"
MAX_MESSAGE = 8 * 1024 * 1024
RCV_HWM = 64
OUTPUT_BUDGET = 32 * 1024 * 1024
#: JSON containers (``[`` and ``{``) the worker decodes per notebook: a message cheap in
#: bytes (``[[],[],...]``) costs the worker about 60 bytes of memory per container.
CONTAINER_BUDGET = 2_000_000
GRACE = 10.0
_FILE = os.environ.get("KPCA_REPORT_FILE")
_TIMEOUT = float(os.environ.get("KPCA_CELL_TIMEOUT", "30"))
_MODE = os.environ.get("KPCA_SANDBOX", "bwrap")
#: Seconds a whole notebook may run, from its kernel's start (0: no such limit).
_NOTEBOOK = float(os.environ.get("KPCA_NOTEBOOK_TIMEOUT", "0") or 0)


def _write(record: dict[str, Any]) -> None:
    if not _FILE:
        return
    record["t"] = time.monotonic()
    with open(_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


# --------------------------------------------------------------------------- per-notebook state
class _Box:
    """One submission's sandbox as the trusted side sees it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.spec = sb.read_spec(folder)
        self.limits = sb.Limits(**self.spec["limits"])
        self.cgroups: dict[str, str] = {}
        self.km: Any = None
        self.ctx: Any = None
        #: "wallclock", "notebook", "output" or "memory", set by us only
        self.killed: str | None = None
        self.started = time.monotonic()  # the kernel's start: the notebook's clock
        self.output = 0  # bytes of every message the kernel sent (all channels)
        self.containers = 0  # JSON containers in those messages
        self.exported = 0
        self.lock = threading.Lock()
        self.fds: list[int] = []  # the kernel's sockets, pinned (see _pin_sockets)
        #: The sandbox's network namespace (an fd), where its sockets' memory is read
        #: (see :mod:`.sockmem`); None with ``--sandbox none``.
        self.netns: int | None = None
        self.socket_mb = 0.0  # the most kernel memory its sockets held at one look (MB)
        self.enames: list[str] = []  # exception names of the current cell's error messages
        self.evalues: list[str] = []  # and their messages (shown to the student, as text)

    def kill(self, why: str) -> None:
        """Kill the whole sandbox, recording why (the first reason wins)."""
        with self.lock:
            if self.killed is None:
                self.killed = why
        self._terminate()

    def _terminate(self) -> None:
        km = self.km
        proc = getattr(getattr(km, "provisioner", None), "process", None)
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # launcher's group: bwrap, or the kernel
            except OSError:
                pass
        sb.kill_cgroups(self.cgroups)
        if self.spec.get("uid") is not None:
            sb.kill_uid(int(self.spec["uid"]))

    def close(self) -> None:
        """After the notebook: nothing of the submission may outlive it."""
        try:
            self._terminate()
        finally:
            sb.destroy_cgroups(self.cgroups)
            if self.ctx is not None:
                self.ctx.destroy(linger=0)
                self.ctx = None
            for fd in self.fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.fds.clear()
            if self.netns is not None:
                sockmem.forget(self.netns)
                with contextlib.suppress(OSError):
                    os.close(self.netns)
                self.netns = None


_BOXES: dict[str, _Box] = {}  # notebook folder -> box


def _start_new_kernel(startup_timeout: float = 60, kernel_name: str = "python", **kwargs: Any) -> Any:
    """nbval's ``start_new_kernel``, sandboxed (``kwargs["cwd"]`` is the submission's folder)."""
    import zmq
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    folder = Path(kwargs.pop("cwd"))
    kwargs.pop("stderr", None)
    _write({"folder": str(folder), "when": "start"})  # this notebook's clock starts
    box = _Box(folder)
    _BOXES[str(folder)] = box
    if _NOTEBOOK > 0:  # the notebook's clock runs while its kernel starts, too
        _start_dog().arm(box, _NOTEBOOK, "notebook")
    box.cgroups = sb.create_cgroups(f"kpca-{folder.name}", box.limits)
    spec = dict(box.spec)
    spec["cgroups"] = box.cgroups
    (folder / sb.SPEC).write_text(json.dumps(spec))

    class Specs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(argv=sb.kernel_argv(), display_name="sandboxed Python",
                              language="python", interrupt_mode="message", env={})

    sandboxed = _MODE == "bwrap"

    class Manager(KernelManager):  # type: ignore[misc]
        async def _async_post_start_kernel(self, **kw: Any) -> None:
            if sandboxed:  # reach the sockets through the sandbox's own root
                pid = _child_pid(folder, self, startup_timeout)
                with contextlib.suppress(OSError):
                    box.netns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                self.ip = f"/proc/{pid}/root{sb.INSIDE_IPC}"
            _await_sockets(self, startup_timeout)
            if sandboxed:
                urls = _pin_sockets(pid, self, box)
                self._make_url = urls.__getitem__
            await super()._async_post_start_kernel(**kw)

        async def _async_wait(self, pollinterval: float = 0.1) -> None:
            # The sandbox dies within milliseconds of SIGKILL: poll often (0.1 s by
            # default, paid once per notebook).
            await super()._async_wait(pollinterval=0.005)

    ctx = zmq.Context()
    ctx.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
    ctx.setsockopt(zmq.RCVHWM, RCV_HWM)
    # No send may block the worker (a DEALER with no live peer would block forever).
    # ZMQ reconnects as usual, to the same pinned socket inodes (see _pin_sockets): a
    # kernel that replaces its socket files by symlinks redirects nothing.
    ctx.setsockopt(zmq.SNDTIMEO, 10_000)
    ctx.setsockopt(zmq.LINGER, 0)  # never wait to deliver to a kernel that was killed
    box.ctx = ctx
    (folder / "ipc").mkdir(mode=0o700, exist_ok=True)
    km = Manager(kernel_name=kernel_name, kernel_spec_manager=Specs(), transport="ipc",
                 ip=sb.INSIDE_IPC if sandboxed else str(folder / "ipc" / "k"),
                 connection_file=str(folder / "ipc" / "kernel.json"), context=ctx)
    box.km = km
    launcher_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                    "PYTHONPATH": str(sb.package_dir().parent)}
    for key in ("KPCA_SANDBOX_NO_CGROUPS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if key in os.environ:
            launcher_env[key] = os.environ[key]
    km.start_kernel(cwd=str(folder), env=launcher_env,
                    stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    kc = km.client(context=ctx)
    _meter(kc.session, box)
    if "_make_url" in vars(km):
        kc._make_url = km._make_url  # the pinned sockets, for every channel
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc


def _child_pid(folder: Path, km: Any, timeout: float) -> int:
    """The sandbox's first process, from ``bwrap --info-fd``."""
    deadline = time.monotonic() + timeout
    path = folder / sb.INFO
    while time.monotonic() < deadline:
        try:
            return int(json.loads(path.read_text())["child-pid"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        proc = getattr(km.provisioner, "process", None)
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the sandbox did not start (exit status {proc.returncode})")
        time.sleep(0.01)
    raise RuntimeError("the sandbox did not start in time")


def _pin_sockets(pid: int, km: Any, box: _Box) -> dict[str, str]:
    """ZMQ URLs of the kernel's sockets that no later change inside the sandbox can redirect.

    The sandbox owns its ``/tmp``: a path through ``/proc/<pid>/root`` is walked again at
    every (re)connect, and an absolute symlink planted there would resolve on the
    *host*. So each socket is opened once, now (before any student code ran), component
    by component without following symlinks (``O_PATH | O_NOFOLLOW``), checked to be a
    socket, and reached from then on as ``/proc/self/fd/N``: the same inode for the
    life of the kernel, wherever its name points later.
    """
    import stat

    parts = [p for p in sb.INSIDE_IPC.split("/") if p]
    directory = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY)
    try:
        for name in parts[:-1]:
            nxt = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=directory)
            os.close(directory)
            directory = nxt
        urls = {}
        for channel in ("shell", "iopub", "stdin", "control", "hb"):
            port = getattr(km, f"{channel}_port")
            fd = os.open(f"{parts[-1]}-{port}", os.O_PATH | os.O_NOFOLLOW, dir_fd=directory)
            box.fds.append(fd)
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise RuntimeError("the kernel's socket is not a socket")
            urls[channel] = f"ipc:///proc/self/fd/{fd}"
        return urls
    finally:
        os.close(directory)


def _await_sockets(km: Any, timeout: float) -> None:
    """Wait until the kernel listens on all its sockets (real sockets, not symlinks).

    A test connection proves the socket listens. No student code has run yet, so the
    grader's first connections reach the kernel's own sockets.
    """
    import socket
    import stat

    deadline = time.monotonic() + timeout
    ports = [km.shell_port, km.iopub_port, km.stdin_port, km.control_port, km.hb_port]
    while True:
        ok = True
        for port in ports:
            try:
                mode = os.lstat(f"{km.ip}-{port}").st_mode
            except OSError:
                ok = False
                break
            if not stat.S_ISSOCK(mode):
                raise RuntimeError("the kernel's socket is not a socket")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(f"{km.ip}-{port}")
            except OSError:
                ok = False
                break
            finally:
                probe.close()
        if ok:
            return
        proc = getattr(km.provisioner, "process", None)
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the sandbox stopped while starting (exit status {proc.returncode})")
        if time.monotonic() > deadline:
            raise RuntimeError("the kernel did not start in time")
        time.sleep(0.01)


class OutputBudgetExceeded(RuntimeError):
    """The kernel sent more than the worker reads; its sandbox was killed."""


def _meter(session: Any, box: _Box) -> None:
    """Count what the kernel sends *before* the worker decodes it (every channel).

    Every message's frames count toward :data:`OUTPUT_BUDGET` as the bytes they are, and
    the brackets of its JSON frames toward :data:`CONTAINER_BUDGET` (decoding is what
    costs the worker memory and time). Past either budget the sandbox is killed and the
    message is not decoded at all.
    """
    original = session.deserialize

    def deserialize(msg_list: Any, content: bool = True, copy: bool = True) -> Any:
        frames = [f if isinstance(f, bytes) else bytes(getattr(f, "bytes", f)) for f in msg_list]
        with box.lock:
            box.output += sum(len(f) for f in frames)
            box.containers += sum(f.count(b"[") + f.count(b"{") for f in frames[1:5])
            over = box.output > OUTPUT_BUDGET or box.containers > CONTAINER_BUDGET
        if over or box.killed == "output":
            box.kill("output")
            raise OutputBudgetExceeded("the kernel sent more output than the grader reads")
        try:
            return original(frames, content=content, copy=True)
        except (MemoryError, RecursionError):
            box.kill("output")
            raise OutputBudgetExceeded("the kernel sent a message the grader cannot read") from None

    session.deserialize = deserialize


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (through ``/proc/*/task/*/children``)."""
    found, todo = [], [pid]
    while todo and len(found) < 4096:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            pass
    return found


def _sandbox_mb(box: _Box, file: str, key: str) -> list[float]:
    """``key`` (a ``kB`` line of ``/proc/<pid>/<file>``) in MB for each of the sandbox's live
    processes that has it."""
    proc = getattr(getattr(box.km, "provisioner", None), "process", None)
    if proc is None:
        return []
    found = []
    for pid in _descendants(proc.pid):
        try:
            with open(f"/proc/{pid}/{file}") as fh:
                kb = next((int(line.split()[1]) for line in fh if line.startswith(key)), None)
        except (OSError, ValueError, IndexError):
            continue
        if kb is not None:
            found.append(kb / 1024)
    return found


def _vm_peak_mb(box: _Box) -> float:
    """The largest ``VmPeak`` (MB) among the sandbox's live processes (0 if none is seen)."""
    return max(_sandbox_mb(box, "status", "VmPeak:"), default=0.0)


def _address_space_hit(box: _Box, before: float) -> bool:
    """Without a memory cgroup: did a process of the sandbox reach its ``RLIMIT_AS``
    during the cell (its ``VmPeak`` rose to within 64 MB of the limit)?"""
    if "memory" in box.cgroups:
        return False
    near = box.limits.address_space_mb(False) - 64
    return before < near <= _vm_peak_mb(box)


def _box_of(item: Any) -> _Box | None:
    return _BOXES.get(str(Path(str(getattr(item, "fspath", ""))).parent))


def _size(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, dict):
        return sum(len(str(k)) + _size(v) for k, v in content.items())
    if isinstance(content, (list, tuple)):
        return sum(_size(v) for v in content)
    return 8


def _patch_nbval() -> None:
    """Sandboxed kernels, a dead kernel noticed at once, and a cap on what is read."""
    from queue import Empty

    import nbval.kernel as nbkernel

    nbkernel.start_new_kernel = _start_new_kernel
    RunningKernel = nbkernel.RunningKernel
    original_reply = RunningKernel.await_reply
    original_get = RunningKernel.get_message

    def await_reply(self: Any, msg_id: str, timeout: float | None = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
            try:
                return original_reply(self, msg_id, timeout=step)
            except Empty:
                if not self.is_alive():
                    raise KernelDied("the kernel died while running this cell") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def get_message(self: Any, stream: str, timeout: float | None = None) -> Any:
        msg = original_get(self, stream, timeout=timeout)
        box = next((b for b in _BOXES.values() if b.km is getattr(self, "km", None)), None)
        if box is not None and stream == "iopub":
            if msg.get("msg_type") == "error" and isinstance(msg.get("content"), dict):
                box.enames.append(str(msg["content"].get("ename", ""))[:100])
                box.evalues.append(str(msg["content"].get("evalue", ""))[:300])
        return msg

    RunningKernel.await_reply = await_reply
    RunningKernel.get_message = get_message


class KernelDied(RuntimeError):
    """The kernel process ended while a cell was running (os._exit, segfault, OOM kill)."""


# --------------------------------------------------------------------------- watchdog
class _Watchdog:
    def __init__(self) -> None:
        self.armed: tuple[float, _Box, str] | None = None
        self.cv = threading.Condition()
        threading.Thread(target=self._loop, daemon=True, name="kpca-watchdog").start()

    def arm(self, box: _Box, seconds: float, why: str = "wallclock") -> None:
        """Kill ``box`` in ``seconds`` (``why`` recorded), or when its notebook's own time is
        up, whichever comes first."""
        deadline = time.monotonic() + seconds
        if _NOTEBOOK > 0 and box.started + _NOTEBOOK < deadline:
            deadline, why = box.started + _NOTEBOOK, "notebook"
        with self.cv:
            self.armed = (deadline, box, why)
            self.cv.notify()

    def disarm(self) -> None:
        with self.cv:
            self.armed = None

    def _loop(self) -> None:
        while True:
            with self.cv:
                if self.armed is None:
                    self.cv.wait()
                    continue
                deadline, box, why = self.armed
                left = deadline - time.monotonic()
                if left > 0:
                    self.cv.wait(min(left, MEMORY_POLL))
                    expired = False
                else:
                    self.armed = None
                    expired = True
            if expired:
                box.kill(why)
            elif "memory" not in box.cgroups and _held_mb(box) + _socket_mb(box) \
                    > box.limits.address_space_mb(False):
                box.kill("memory")


#: Seconds between two looks at a sandbox's memory when no cgroup counts it.
MEMORY_POLL = 0.25


def _socket_mb(box: _Box) -> float:
    """Kernel memory (MB) in the buffers of the sandbox's sockets (Unix, TCP, UDP), which no
    process's ``Pss`` shows and ``RLIMIT_AS`` does not bound; read through ``sock_diag`` in
    the sandbox's own network namespace (every socket it can make lives there). 0 when it
    cannot be read (see :func:`.sockmem.measurable`)."""
    if box.netns is None:
        return 0.0
    mb = sockmem.socket_bytes(box.netns) / (1024 * 1024)
    box.socket_mb = max(box.socket_mb, mb)
    return mb


def _held_mb(box: _Box) -> float:
    """Memory (MB) that all the sandbox's live processes hold together: the per-process
    rlimit cannot bound a sum, so without a cgroup the watchdog does. Each process counts
    its proportional share (``Pss``): pages shared after a ``fork`` count once in all."""
    return sum(_sandbox_mb(box, "smaps_rollup", "Pss:"))


_DOG: _Watchdog | None = None


def _start_dog() -> _Watchdog:
    global _DOG
    if _DOG is None:
        _DOG = _Watchdog()
    return _DOG


_BEFORE: dict[int, tuple[dict[str, int], bool, str | None]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    box = _box_of(item)
    parent = getattr(item, "parent", None)
    if box is not None:
        # The runner's watchdog over this worker: a cell began (see runner._Report).
        _write({"file": str(getattr(item, "fspath", "")), "begin": getattr(item, "cell_num", None)})
        _BEFORE[id(item)] = (sb.cgroup_facts(box.cgroups), bool(getattr(parent, "timed_out", False)),
                             box.killed, 0.0 if "memory" in box.cgroups else _vm_peak_mb(box))
        _start_dog().arm(box, _TIMEOUT + GRACE)
    try:
        yield
    finally:
        if _DOG is not None:
            _DOG.disarm()


EXPORT_BUDGET = 8 * 1024 * 1024  # bytes of exports recorded per notebook


def _exports(item: Any, box: _Box | None) -> list[Any]:
    """The cell's last export record (the grader reads one per export cell), within budget."""
    found = []
    outs = getattr(item, "test_outputs", None) or []
    for out in outs:
        data = out.get("data") if isinstance(out, dict) else None
        if isinstance(data, dict) and EXPORT_MIME in data:
            found = [data[EXPORT_MIME]]
    if outs:
        outs.clear()  # nbval keeps every item; do not keep their outputs for the whole run
    if found and box is not None:
        box.exported += _size(found[0])
        if box.exported > EXPORT_BUDGET:
            return []
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup" and report.passed:
        return
    if report.when == "teardown" and report.passed:
        return
    parent = getattr(item, "parent", None)
    kernel = getattr(parent, "kernel", None)
    try:
        alive = bool(kernel.is_alive()) if kernel is not None else None
    except Exception:
        alive = False
    text = ""
    if report.failed:
        try:
            full = str(report.longrepr)
            text = full if len(full) <= 6000 else full[:1500] + "\n...\n" + full[-4000:]
        except Exception:
            text = "(no text)"
    box = _box_of(item)
    facts: dict[str, Any] = {}
    if box is not None and report.when == "call":
        before, timed_out_before, killed_before, peak_before = _BEFORE.pop(
            id(item), ({}, False, None, 0.0))
        after = sb.cgroup_facts(box.cgroups)
        facts = {k: after[k] - before.get(k, 0) for k in after}
        facts["address_space_hit"] = _address_space_hit(box, peak_before)
        facts["killed"] = box.killed if box.killed != killed_before else None
        if facts["killed"] == "memory" and box.socket_mb >= 1:
            facts["socket_mb"] = round(box.socket_mb)
        if facts["killed"] == "notebook":
            facts["notebook_limit"] = _NOTEBOOK
        facts["nbval_timeout"] = bool(getattr(parent, "timed_out", False)) and not timed_out_before
        # The exception's type as the kernel reported it (not a line of text it printed).
        facts["ename"] = box.enames[-1] if box.enames else None
        facts["evalue"] = box.evalues[-1] if box.evalues else None
        box.enames.clear()
        box.evalues.clear()
    _write({
        "file": str(getattr(item, "fspath", "")),
        "cell": getattr(item, "cell_num", None),
        "when": report.when,
        "outcome": "xfailed" if hasattr(report, "wasxfail") else report.outcome,
        "alive": alive,
        "text": text,
        "facts": facts,
        "exports": _exports(item, box) if report.when == "call" else [],
    })


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: Any, nextitem: Any) -> Any:
    yield
    if nextitem is None or getattr(nextitem, "parent", None) is not getattr(item, "parent", None):
        box = _BOXES.pop(str(Path(str(getattr(item, "fspath", ""))).parent), None)
        if box is not None:
            box.close()


_patch_nbval()
