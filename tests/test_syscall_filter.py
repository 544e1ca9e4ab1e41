"""The sandbox's syscall filter (:mod:`kpca_lib.course.grading.run.syscalls`), run for real.

Real processes run in bubblewrap with the filter loaded (``bwrap --seccomp FD``), as the
grader runs a student's kernel. Each denied call is tried in its own forked child, and
reported as the errno it got (or the signal that killed it). The same probes run once
in the same sandbox WITHOUT the filter, so a probe whose unfiltered result differs proves
that the filter, not a missing capability, refused the call. The numerical stack,
threads, processes and ipykernel's ZMQ sockets are then exercised under the filter.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_grading import sandbox_or_skip  # noqa: E402

from kpca_lib.course.grading.run import sandbox as sb  # noqa: E402
from kpca_lib.course.grading.run import syscalls  # noqa: E402

X86_64 = platform.machine() == "x86_64"
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000

#: name -> (code run in a forked child (raises OSError or returns), expected result under
#: the filter, whether the unfiltered sandbox must get something else). ``sc(name, ...)`` is
#: a raw system call through ctypes; "SIGSYS" means the child is killed by the filter.
PROBES: dict[str, tuple[str, int | str, bool]] = {
    "keyctl": ("sc('keyctl', 9999, 0, 0)", errno.EPERM, True),  # an unknown command
    "add_key": ("sc('add_key', b'kpca-no-such-type', b'd', None, 0, 0)", errno.EPERM, True),
    "unshare_newuser": (f"sc('unshare', {CLONE_NEWUSER})", errno.EPERM, True),
    # Unfiltered, the sandbox's uid has no CAP_SYS_ADMIN either: unshare(0) is the proof.
    "unshare_newns": (f"sc('unshare', {CLONE_NEWNS})", errno.EPERM, False),
    "unshare_nothing": ("sc('unshare', 0)", errno.EPERM, True),
    "clone_newuser": (f"r = sc('clone', {CLONE_NEWUSER | signal.SIGCHLD}, 0, 0, 0, 0)\n"
                      "if r == 0: os._exit(0)\nos.waitpid(r, 0)", errno.EPERM, True),
    "clone3": ("sc('clone3', None, 0)", errno.ENOSYS, True),
    "setns": ("sc('setns', -1, 0)", errno.EPERM, True),
    "mount_tmpfs": ("sc('mount', b'none', b'/tmp', b'tmpfs', 0, None)", errno.EPERM, False),
    "mount_null_target": ("sc('mount', b'none', None, b'tmpfs', 0, None)", errno.EPERM, True),
    "ptrace_traceme": ("sc('ptrace', 0, 0, 0, 0)", errno.EPERM, True),
    # bpf and io_uring may be off for unprivileged users anyway (sysctls): EPERM either way.
    "bpf": ("sc('bpf', 1000, None, 0)", errno.EPERM, False),
    "perf_event_open": ("sc('perf_event_open', None, 0, -1, -1, 0)", errno.EPERM, True),
    "userfaultfd": ("sc('userfaultfd', 1)", errno.EPERM, True),  # UFFD_USER_MODE_ONLY
    "io_uring_setup": ("sc('io_uring_setup', 1, None)", errno.EPERM, False),
    "memfd_create": ("os.memfd_create('kpca')", errno.EPERM, True),
    "shmget": ("sc('shmget', 0, 4096, 0o1600)", errno.EPERM, True),  # IPC_PRIVATE, IPC_CREAT
    "socket_packet": ("socket.socket(socket.AF_PACKET, socket.SOCK_RAW)", errno.EAFNOSUPPORT,
                      True),
    # AF_ALG is refused anyway where the kernel lacks it.
    "socket_alg": ("socket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET)", errno.EAFNOSUPPORT,
                   False),
    "personality_no_aslr": ("sc('personality', 0x0040000)", errno.EPERM, True),
    # Inode-level and host-wide state (issue 39): locks, watches, AIO, kernel memory.
    "flock": ("import fcntl\nfcntl.flock(os.open('/usr', os.O_RDONLY), fcntl.LOCK_SH)",
              errno.ENOLCK, True),
    "fcntl_setlk": ("import fcntl, struct\nfd = os.open('/tmp', os.O_RDONLY)\n"
                    "fcntl.fcntl(os.open('/tmp/l', os.O_RDWR | os.O_CREAT), fcntl.F_SETLK, "
                    "struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0, 0, 0))", errno.ENOLCK, True),
    "fcntl_ofd_getlk": ("import fcntl, struct\nfcntl.fcntl(os.open('/usr', os.O_RDONLY), "
                        "fcntl.F_OFD_GETLK, struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0, 0, 0))",
                        errno.ENOLCK, True),
    "fcntl_notify": ("import fcntl\nfcntl.fcntl(os.open('/tmp', os.O_RDONLY), fcntl.F_NOTIFY, "
                     "fcntl.DN_CREATE)", errno.ENOLCK, True),
    "fcntl_setlease": ("import fcntl\nfcntl.fcntl(os.open('/tmp/l2', os.O_RDONLY | os.O_CREAT), "
                       "fcntl.F_SETLEASE, fcntl.F_RDLCK)", errno.ENOLCK, True),
    "fcntl_setpipe_sz": ("import fcntl\nr, w = os.pipe()\nfcntl.fcntl(w, 1031, 1 << 20)",
                         errno.EPERM, True),
    "setsockopt_sndbuf": ("s = socket.socket(socket.AF_UNIX)\n"
                          "s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)",
                          errno.EPERM, True),
    "inotify_init1": ("sc('inotify_init1', 0)", errno.ENOSYS, True),
    "fanotify_init": ("sc('fanotify_init', 0x200, 0)", errno.ENOSYS, True),
    "io_setup": ("ctx = ctypes.c_ulong(0)\nsc('io_setup', 16, ctypes.byref(ctx))", errno.ENOSYS,
                 True),
}
#: getpid through x86_64's foreign ABIs: x32 and the 32-bit ``int 0x80`` entry.
X86_64_ONLY = {
    "x32_abi": ("libc.syscall(0x40000000 | 39)", "SIGSYS", True),
    "int80_abi": (
        "buf = mmap.mmap(-1, mmap.PAGESIZE, prot=7)\n"
        "buf.write(b'\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3')  # mov eax,20; int 0x80; ret\n"
        "ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()",
        "SIGSYS", True),
}
PROBES |= X86_64_ONLY

PROBE_SCRIPT = r"""
import ctypes, json, mmap, os, resource, socket, sys
NR = json.loads(sys.argv[1])
PROBES = json.loads(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def sc(name, *args):
    r = libc.syscall(ctypes.c_long(NR[name]),
                     *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

out = {}
for name, code in PROBES.items():
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: a SIGSYS leaves no core dump
        try:
            exec(code)
        except OSError as exc:
            os._exit(exc.errno)
        except BaseException:
            os._exit(255)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    out[name] = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
                 else os.WEXITSTATUS(status))
print(json.dumps(out))
"""

#: name -> code run in the sandboxed (filtered) process; it must not raise.
WORKS: dict[str, str] = {
    "numpy_matmul_eigh": (
        "import numpy as np\n"
        "a = np.random.default_rng(0).standard_normal((300, 300)); s = a @ a.T\n"
        "w, v = np.linalg.eigh(s)\n"
        "assert np.allclose(v @ np.diag(w) @ v.T, s)"),
    "scipy_eigh_eigsh": (
        "import numpy as np, scipy.linalg, scipy.sparse, scipy.sparse.linalg\n"
        "s = np.diag(np.arange(1.0, 101.0))\n"
        "assert np.isclose(scipy.linalg.eigh(s, eigvals_only=True)[-1], 100.0)\n"
        "w = scipy.sparse.linalg.eigsh(scipy.sparse.csr_matrix(s), k=3)[0]\n"
        "assert np.allclose(sorted(w), [98.0, 99.0, 100.0])"),
    "sklearn_kernel_pca": (
        "import numpy as np\nfrom sklearn.decomposition import KernelPCA\n"
        "x = np.random.default_rng(1).standard_normal((120, 4))\n"
        "assert KernelPCA(3, kernel='rbf').fit_transform(x).shape == (120, 3)"),
    "threads": (
        "import threading\nres = []\n"
        "ts = [threading.Thread(target=lambda i=i: res.append(sum(range(i * 1000)))) "
        "for i in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\nassert len(res) == 8"),
    "fork_waitpid": (
        "import os\npid = os.fork()\nif pid == 0: os._exit(7)\n"
        "assert os.WEXITSTATUS(os.waitpid(pid, 0)[1]) == 7"),
    "subprocess_true": (
        "import subprocess\nassert subprocess.run(['/bin/true'], timeout=60).returncode == 0"),
    "multiprocessing_pool": (
        "import multiprocessing\n"
        "with multiprocessing.Pool(2) as pool:\n"
        "    assert pool.map(abs, [-1, -2, -3]) == [1, 2, 3]"),
    "socketpair": (
        "import socket\na, b = socket.socketpair()\na.sendall(b'ping')\n"
        "assert b.recv(4) == b'ping'"),
    "socket_families_a_kernel_needs": (
        "import socket\nfor fam, kind, proto in [(socket.AF_UNIX, socket.SOCK_STREAM, 0),\n"
        "        (socket.AF_INET, socket.SOCK_STREAM, 0), (socket.AF_NETLINK, socket.SOCK_RAW, 0)]:\n"
        "    socket.socket(fam, kind, proto).close()"),
    "ipykernel_zmq_ipc": (
        "import ipykernel.kernelapp, zmq\nctx = zmq.Context()\n"
        "a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)\n"
        "a.bind('ipc:///tmp/kpca-pair'); b.connect('ipc:///tmp/kpca-pair')\n"
        "a.send(b'hello'); assert b.recv() == b'hello'\n"
        "a.close(); b.close(); ctx.term()"),
    "fcntl_flags_and_pipes": (
        "import fcntl, os\nr, w = os.pipe()\n"
        "fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
        "fcntl.fcntl(w, fcntl.F_SETFD, fcntl.FD_CLOEXEC)\nos.dup2(r, 100)\n"
        "assert fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, 10) >= 10\n"
        "assert fcntl.fcntl(w, 1032) > 0  # F_GETPIPE_SZ"),
    "setsockopt_other_options": (
        "import socket\ns = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n"
        "assert s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) > 0"),
    "personality_query_and_default": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "assert libc.personality(ctypes.c_ulong(0xFFFFFFFF)) != -1\n"
        "assert libc.personality(ctypes.c_ulong(0)) != -1"),
}

WORKS_SCRIPT = r"""
import json, sys, traceback
out = {}
for name, code in json.loads(sys.argv[1]).items():
    try:
        exec(code, {})
        out[name] = "ok"
    except BaseException:
        out[name] = traceback.format_exc()
print(json.dumps(out))
"""


def _bwrap(script: str, args: list[str], *, filtered: bool) -> dict:
    """Run ``python -c script *args`` in a minimal grading-like bwrap sandbox; its JSON."""
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--uid", "65534", "--gid", "65534", "--ro-bind", "/", "/",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp"]
    for path in sb._ro_paths():  # Python, the venv, the package: a checkout may be in /tmp
        if str(path).startswith("/tmp/"):
            argv += ["--ro-bind", str(path), str(path)]
    pass_fds: tuple[int, ...] = ()
    with tempfile.TemporaryFile() as program:
        if filtered:
            syscalls.write_program(program.fileno())
            program.seek(0)
            argv += ["--seccomp", str(program.fileno())]
            pass_fds = (program.fileno(),)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": "/tmp",
               "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "2", "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run([*argv, "--", sys.executable, "-c", script, *args], env=env,
                              pass_fds=pass_fds, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _filter_or_skip() -> None:
    problem = syscalls.filter_unavailable()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the syscall filter must build in CI: {problem}")
        pytest.skip(problem)


def _probe(filtered: bool) -> dict:
    sandbox_or_skip()
    _filter_or_skip()
    names = {"keyctl", "add_key", "unshare", "clone", "clone3", "setns", "mount", "ptrace",
             "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "shmget", "personality",
             "inotify_init1", "fanotify_init", "io_setup"}
    nr = {n: syscalls.number(n) for n in names}
    code = {name: p[0] for name, p in PROBES.items() if X86_64 or name not in X86_64_ONLY}
    return _bwrap(PROBE_SCRIPT, [json.dumps(nr), json.dumps(code)], filtered=filtered)


@pytest.fixture(scope="module")
def denied() -> dict:
    return _probe(filtered=True)


@pytest.fixture(scope="module")
def unfiltered() -> dict:
    return _probe(filtered=False)


@pytest.fixture(scope="module")
def works() -> dict:
    sandbox_or_skip()
    _filter_or_skip()
    return _bwrap(WORKS_SCRIPT, [json.dumps(WORKS)], filtered=True)


def _describe(result: int | str) -> str:
    return result if isinstance(result, str) else (errno.errorcode.get(result, str(result))
                                                   if result else "success")


@pytest.mark.parametrize("name", list(PROBES))
def test_the_filter_denies(name, denied, unfiltered):
    if name in X86_64_ONLY and not X86_64:
        pytest.skip(f"an x86_64 ABI probe; this machine is {platform.machine()}")
    _, expected, distinct = PROBES[name]
    want = f"signal {signal.SIGSYS.value}" if expected == "SIGSYS" else expected
    got = denied[name]
    assert got == want, f"{name}: {_describe(got)} under the filter, expected {_describe(want)}"
    if distinct:
        assert unfiltered[name] != want, (
            f"{name}: {_describe(unfiltered[name])} also without the filter: the probe proves "
            "nothing")


@pytest.mark.parametrize("name", list(WORKS))
def test_still_works_under_the_filter(name, works):
    assert works[name] == "ok", works[name]


# --------------------------------------------------------------------------- the module itself
def test_program_is_deterministic_bpf_and_every_group_is_explained():
    _filter_or_skip()
    prog = syscalls.program()
    assert prog == syscalls.program() and len(prog) % 8 == 0 and 0 < len(prog) // 8 <= 4096
    code = ("from kpca_lib.course.grading.run import syscalls; import sys; "
            "sys.stdout.buffer.write(syscalls.program())")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    assert fresh == prog
    names = [n for d in syscalls.DENIED for n in d.syscalls]
    always = [n for d in syscalls.DENIED if not d.when for n in d.syscalls]
    assert len(always) == len(set(always)) and not set(always) & {
        n for d in syscalls.DENIED if d.when for n in d.syscalls}, (
        "a system call is listed twice (only groups with conditions may share a call)")
    assert all(d.why and d.errno in (errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT, errno.ENOLCK)
               for d in syscalls.DENIED)
    for name, why in syscalls.skipped():
        assert name in names and why in ("unknown to the installed libseccomp",
                                         "not on this architecture"), (name, why)


def test_unknown_syscalls_are_skipped_and_listed(monkeypatch):
    _filter_or_skip()
    bogus = syscalls.Denial(("kpca_no_such_call",), errno.EPERM, "a test")
    monkeypatch.setattr(syscalls, "DENIED", (*syscalls.DENIED, bogus))
    syscalls._compile.cache_clear()
    try:
        assert ("kpca_no_such_call", "unknown to the installed libseccomp") in syscalls.skipped()
        assert len(syscalls.program()) > 0
    finally:
        monkeypatch.undo()
        syscalls._compile.cache_clear()


def test_a_missing_pyseccomp_is_reported_with_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import pyseccomp -> ImportError
    syscalls._compile.cache_clear()
    try:
        assert "pip install pyseccomp" in syscalls.filter_unavailable()
    finally:
        monkeypatch.undo()
        syscalls._compile.cache_clear()
