"""A sandbox observes nothing another sandbox does: two real sandboxes at the same time.

Each channel class of issue 39 is tried by a pair of processes in two grading sandboxes
(the real bubblewrap arguments, binds, throw-away uids and syscall filter of
:mod:`kpca_lib.course.grading.run.sandbox`) that are alive at the same time: one leaves a
mark on what every sandbox shares (the read-only installation's inodes, host-wide
counters), the other looks for it. The order is the test's, not the clock's: the first
process says ``ready`` once its mark is made (or its watch is set), the second runs to
the end, and only then is the first let go. So no assertion depends on timing.

Every pair runs twice: with the filter (the mark must not reach the other sandbox) and,
as the control, in the same sandbox WITHOUT the syscall filter and the /proc masks (the
mark must reach it there, or the test would prove nothing). A control that the host
itself refuses (unprivileged fanotify on an older kernel) is reported as a skip of the
control only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_grading import sandbox_or_skip  # noqa: E402

from kpca_lib.course.grading.run import sandbox as sb  # noqa: E402
from kpca_lib.course.grading.run import syscalls  # noqa: E402

#: A hang guard only (a failure): the processes never wait on the clock otherwise.
GUARD = 180.0

COMMON = r"""
import ctypes, errno, fcntl, json, os, struct, sys
import kpca_lib
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SHARED = os.path.realpath(kpca_lib.__file__)  # the installation: bound into every sandbox
FOLDER = os.path.dirname(SHARED)
def err(e):
    return errno.errorcode.get(e, str(e))
def say(obj):
    print(json.dumps(obj), flush=True)
def hold():
    say("ready")
    sys.stdin.readline()  # the test lets go once the other sandbox is done
def flock_struct(kind):
    return struct.pack("hhqqi4x", kind, 0, 0, 0, 0)
"""


def _record_lock(set_lock: str, get_lock: str) -> tuple[str, str]:
    """A record lock's pair: the first takes a read lock with ``fcntl.<set_lock>``; the second
    asks ``fcntl.<get_lock>`` whether a write lock would conflict (POSIX and OFD locks)."""
    first = f"""
fd = os.open(SHARED, os.O_RDONLY)
try:
    fcntl.fcntl(fd, fcntl.{set_lock}, flock_struct(fcntl.F_RDLCK))
except OSError as e:
    say({{"first": err(e.errno)}})
hold()
"""
    second = f"""
fd = os.open(SHARED, os.O_RDONLY)
try:
    out = fcntl.fcntl(fd, fcntl.{get_lock}, flock_struct(fcntl.F_WRLCK))
    say({{"seen": struct.unpack("hhqqi4x", out)[0] != fcntl.F_UNLCK, "got": "answered"}})
except OSError as e:
    say({{"seen": False, "got": err(e.errno)}})
"""
    return first, second


#: channel -> (first: makes its mark, then ``hold()``; second: looks and ``say``\s what it saw).
#: What the second says: ``{"seen": bool, ...}``.
CHANNELS: dict[str, tuple[str, str]] = {
    "flock": (
        r"""
fd = os.open(SHARED, os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX)
except OSError as e:
    say({"first": err(e.errno)})
hold()
""",
        r"""
fd = os.open(SHARED, os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    say({"seen": False, "got": "free"})
except OSError as e:
    say({"seen": e.errno in (errno.EWOULDBLOCK, errno.EAGAIN), "got": err(e.errno)})
""",
    ),
    "posix_lock": _record_lock("F_SETLK", "F_GETLK"),
    "ofd_lock": _record_lock("F_OFD_SETLK", "F_OFD_GETLK"),
    # The watcher goes first (its watch must exist before the other sandbox opens the file).
    "inotify": (
        r"""
fd = libc.inotify_init1(os.O_NONBLOCK)
wd = libc.inotify_add_watch(fd, FOLDER.encode(), 0x20 | 0x1) if fd >= 0 else -1  # OPEN|ACCESS
e = ctypes.get_errno()
hold()
names = []
if wd >= 0:
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        data = b""
    while data:
        _, _, _, n = struct.unpack("iIII", data[:16])
        names.append(data[16:16 + n].rstrip(b"\0").decode())
        data = data[16 + n:]
say({"seen": os.path.basename(SHARED) in names, "got": "watched" if wd >= 0 else err(e)})
""",
        r"""
with open(SHARED, "rb") as fh:
    fh.read()
say({"done": True})
""",
    ),
    "fanotify": (
        r"""
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                               ctypes.c_char_p]
fd = libc.fanotify_init(0x200 | 0x2, os.O_RDONLY)  # FAN_REPORT_FID | FAN_NONBLOCK, notify class
e = ctypes.get_errno()
ok = fd >= 0 and libc.fanotify_mark(fd, 0x1, 0x20 | 0x1, -100, SHARED.encode()) == 0
e = e if fd < 0 else ctypes.get_errno()
hold()
data = b""
if ok:
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        pass
say({"seen": len(data) > 0, "got": "watched" if ok else err(e)})
""",
        r"""
with open(SHARED, "rb") as fh:
    fh.read()
say({"done": True})
""",
    ),
    "aio_and_host_counters": (
        r"""
ctx = ctypes.c_ulong(0)
r = libc.syscall(206, 4096, ctypes.byref(ctx))  # io_setup (x86_64), as an AIO user would
if r != 0:
    say({"first": err(ctypes.get_errno())})
hold()
""",
        r"""
found = {}
for name in ("aio-nr", "file-nr", "inode-nr"):
    try:
        found[name] = open("/proc/sys/fs/" + name).read().split()[0]
    except OSError as e:
        found[name] = err(e.errno)
try:
    found["locks"] = len(open("/proc/locks").read())
except OSError as e:
    found["locks"] = err(e.errno)
aio = found["aio-nr"]
say({"seen": aio.isdigit() and int(aio) >= int(sys.argv[1]) + 4096, "got": found})
""",
    ),
}
#: The process that goes first, per channel: the one that makes the mark, or the watcher.
WATCHERS = {"inotify", "fanotify"}


def _command(code: str, args: list[str], *, filtered: bool) -> tuple[list[str], dict]:
    """argv and ``Popen`` keywords of a grading sandbox that runs ``python -c code``."""
    exe = sb._bwrap()
    uid = sb.throwaway_uid()
    sources = sb._ro_sources(uid)
    seccomp = sb._filter_fd() if filtered else None
    argv = sb._bwrap_argv(
        exe,
        sb.Limits(tmpfs_mb=16, shm_mb=1),
        config=None,
        connection=None,
        info_fd=None,
        ro=sources,
        seccomp=seccomp,
    )
    if not filtered:  # the control: the same sandbox without the masks of /proc
        drop = {"/proc/locks", "/proc/sys/fs"}
        keep: list[str] = []
        i = 0
        while i < len(argv):
            if argv[i] == "--ro-bind-try" and argv[i + 2] in drop:
                i += 3
            elif argv[i] == "--size" and argv[i + 2 : i + 5] == ["--perms", "0555", "--tmpfs"]:
                i += 6  # --size N --perms 0555 --tmpfs /proc/sys/fs
            elif argv[i] == "--remount-ro" and argv[i + 1] in drop:
                i += 2
            else:
                keep.append(argv[i])
                i += 1
        argv = keep

    def enter() -> None:
        if uid is not None:
            sb._private_view(sources)
            sb._become(uid)

    env = sb._kernel_env(Path("/nonexistent"), "bwrap")
    kw = {
        "env": env,
        "pass_fds": [seccomp] if seccomp is not None else [],
        "cwd": "/",
        "preexec_fn": enter,
        "stdin": subprocess.PIPE,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "text": True,
        "_seccomp": seccomp,
    }
    return [*argv, sys.executable, "-I", "-c", COMMON + code, *args], kw


def _start(code: str, args: list[str], *, filtered: bool) -> subprocess.Popen:
    argv, kw = _command(code, args, filtered=filtered)
    seccomp = kw.pop("_seccomp")
    try:
        return subprocess.Popen(argv, **kw)
    finally:
        if seccomp is not None:
            os.close(seccomp)


def _line(proc: subprocess.Popen) -> object:
    """The process's next JSON line (a hang guard, never a timing assumption)."""
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(GUARD)
    if not box or not box[0]:
        proc.kill()
        raise AssertionError(f"no answer from a sandbox: {proc.stderr.read()[-2000:]}")
    return json.loads(box[0])


def _aio_nr() -> int:
    try:
        return int(Path("/proc/sys/fs/aio-nr").read_text())
    except (OSError, ValueError):
        return 0


def _pair(channel: str, *, filtered: bool) -> dict:
    """Run the channel's two sandboxes at the same time; what the second one saw."""
    first_code, second_code = CHANNELS[channel]
    base = [str(_aio_nr())]
    first = _start(first_code, base, filtered=filtered)
    second = None
    try:
        notes = []
        msg = _line(first)
        while msg != "ready":
            notes.append(msg)
            msg = _line(first)
        second = _start(second_code, base, filtered=filtered)
        seen = _line(second)
        second.wait(GUARD)
        first.stdin.write("go\n")
        first.stdin.flush()
        if channel in WATCHERS:  # the watcher says what it saw after the other acted
            seen = _line(first)
        first.wait(GUARD)
        assert isinstance(seen, dict), seen
        return {**seen, "first": notes}
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stdin.close()
                    p.stdout.close()
                    p.stderr.close()


def _setup() -> None:
    sandbox_or_skip()
    problem = syscalls.filter_unavailable()
    if problem is not None:
        pytest.fail(f"the syscall filter must build where bwrap runs: {problem}")


@pytest.mark.parametrize("channel", list(CHANNELS))
def test_a_sandbox_observes_nothing_another_sandbox_does(channel):
    _setup()
    closed = _pair(channel, filtered=True)
    assert closed["seen"] is False, f"{channel}: the mark crossed between two sandboxes: {closed}"
    control = _pair(channel, filtered=False)
    if channel == "fanotify" and not control["seen"] and control.get("got") in ("EPERM", "EINVAL"):
        pytest.skip(
            f"this kernel refuses unprivileged fanotify anyway ({control}); the filter's "
            f"answer was {closed}"
        )
    assert control["seen"] is True, (
        f"{channel}: even without the filter the mark did not cross ({control}): the pair proves "
        "nothing"
    )


def test_the_filter_refuses_with_its_own_errno():
    """What each first process was told: the filter's errno, distinct from the kernel's own
    refusals (ENOSYS for watches and AIO, ENOLCK for locks)."""
    _setup()
    want = {
        "flock": "ENOLCK",
        "posix_lock": "ENOLCK",
        "ofd_lock": "ENOLCK",
        "aio_and_host_counters": "ENOSYS",
    }
    for channel, name in want.items():
        got = _pair(channel, filtered=True)["first"]
        assert got == [{"first": name}], (channel, got)
    for channel in ("inotify", "fanotify"):
        assert _pair(channel, filtered=True)["got"] == "ENOSYS", channel
    counters = _pair("aio_and_host_counters", filtered=True)["got"]
    assert counters["aio-nr"] == counters["file-nr"] == "ENOENT", counters
    assert counters["locks"] in (0, "EACCES"), counters  # /dev/null over it: empty or closed
    assert errno.ENOLCK == syscalls._ENOLCK
