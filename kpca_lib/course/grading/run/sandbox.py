"""One sandbox per submission: a bubblewrap jail around the student's kernel, and its limits.

The grader's nbval worker (trusted, outside) starts each notebook's kernel through
:func:`launch` (``python -m kpca_lib.course.grading.run.sandbox launch CONNECTION_FILE``),
run with the submission's private folder as working directory. The launcher reads
``sandbox.json`` there (written by :mod:`kpca_lib.course.grading.run.runner`), joins the
submission's cgroups (memory and pids, when the machine lets us create them), sets
its rlimits and ``exec``\\ s:

* ``--sandbox bwrap``: ``bwrap`` with new user, PID, IPC, UTS, network and cgroup
  namespaces, ``--die-with-parent``, ``--new-session``, uid/gid 65534 inside, its own
  ``/proc`` and ``/dev``, read-only binds of the system (``/usr``, the ``/lib*`` dirs, a
  few ``/etc`` files), of the Python installation, the virtualenv and the ``kpca_lib``
  package, and a size-limited tmpfs on ``/tmp`` (``HOME``, ``IPYTHONDIR``,
  ``MPLCONFIGDIR`` and the kernel's ZMQ ``ipc`` sockets live there) as the only
  writable place. The kernel's connection file and the grader's inputs are bound
  read-only under ``/run/kpca``. The grader reaches the sockets through
  ``/proc/<pid>/root`` of the sandbox's first process (``bwrap --info-fd``), so no
  host folder is writable from inside;
* ``--sandbox none``: ``ipykernel`` directly, with the same limits and environment.

The environment is a fixed allow-list (never the grader's: no secret leaks). Answers
leave the kernel only as display messages on the kernel's own IOPub channel, read and
size-capped by the trusted nbval process (:mod:`kpca_lib.course.grading.run.report_plugin`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "SandboxUnavailableError",
    "MODES",
    "Limits",
    "check_sandbox",
    "cgroup_roots",
    "create_cgroups",
    "cgroup_facts",
    "destroy_cgroups",
    "write_spec",
    "launch",
    "INSIDE_IPC",
    "INSIDE_CONFIG",
]

MODES = ("bwrap", "none")
SANDBOX_UID = 65534
INSIDE_RUN = "/run/kpca"
INSIDE_CONFIG = f"{INSIDE_RUN}/config.json"
INSIDE_CONNECTION = f"{INSIDE_RUN}/kernel.json"
INSIDE_IPC = "/tmp/.kpca-ipc/k"
INSIDE_HOME = "/tmp/home"
SPEC = "sandbox.json"
FILTER = "seccomp.bpf"
INFO = "bwrap-info.json"
CONTROLLERS = ("memory", "pids")
CGROUP_FS = Path("/sys/fs/cgroup")
FIX = (
    "Install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: "
    "`sudo dnf install bubblewrap`) and make sure unprivileged user namespaces are allowed "
    "(Ubuntu 24.04: `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or an "
    "AppArmor profile for /usr/bin/bwrap; Debian before 11: `sudo sysctl "
    "kernel.unprivileged_userns_clone=1`). To grade WITHOUT isolation (student code then "
    "runs with your rights and can read your files), pass `--sandbox none` explicitly."
)


class SandboxUnavailableError(RuntimeError):
    """The sandbox cannot run on this machine; the message says how to fix it."""


@dataclass(frozen=True)
class Limits:
    """Per-submission limits (sizes in MB).

    The two writable places, ``/tmp`` (``tmpfs_mb``) and ``/dev/shm`` (``shm_mb``), are
    memory: with a memory cgroup what is written there is charged to it; without one the
    address-space limit of every process is what is left of ``memory_mb`` after them, so
    files plus one process never hold more than ``memory_mb``. :meth:`for_memory` sizes
    them from the memory budget.
    """

    memory_mb: int = 2048
    pids: int = 64
    tmpfs_mb: int = 256
    shm_mb: int = 64
    fsize_mb: int = 512
    nofile: int = 1024

    @classmethod
    def for_memory(cls, memory_mb: int) -> Limits:
        """The limits of a ``--memory memory_mb`` run: /tmp a quarter, /dev/shm a sixteenth."""
        memory_mb = int(memory_mb)
        return cls(memory_mb=memory_mb, tmpfs_mb=max(1, min(256, memory_mb // 4)),
                   shm_mb=max(1, min(64, memory_mb // 16)),
                   fsize_mb=max(1, min(512, memory_mb // 4)))

    def address_space_mb(self, cgroup: bool) -> int:
        """``RLIMIT_AS`` per process.

        Under a memory cgroup (which counts every process and the tmpfs files) twice the
        budget: memory actually used then meets the cgroup's limit first, which the grader
        observes; the rlimit only bounds reservations that are never touched. Without
        one: the budget less what the tmpfs files may hold (the grader observes a process
        reaching it through its ``VmPeak``, see ``report_plugin``).
        """
        if cgroup:
            return 2 * self.memory_mb
        return max(1, self.memory_mb - self.tmpfs_mb - self.shm_mb)


# --------------------------------------------------------------------------- set-up check
#: Run in the test sandbox (``{keyctl}``: the native syscall number): its uid, and what a
#: new user namespace and the keyring (keyctl GET_KEYRING_ID of the session keyring) answer.
_SELF_TEST = (
    "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
    "u = libc.unshare(0x10000000); e1 = ctypes.get_errno(); "
    "k = libc.syscall({keyctl}, 0, -3, 0, 0, 0); e2 = ctypes.get_errno(); "
    "print(os.getuid(), u, e1, k, e2)"
)
_SELF_TEST_OK = [str(SANDBOX_UID), "-1", "1", "-1", "1"]  # unshare and keyctl: EPERM
def _bwrap() -> str | None:
    return shutil.which("bwrap") or ("/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None)


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def check_sandbox(sandbox: str) -> None:
    """Raise :class:`SandboxUnavailableError` unless ``sandbox`` can run here.

    ``"none"`` always can. ``"bwrap"`` needs the ``bwrap`` program and a trivial sandbox
    (the same namespaces and binds as a kernel's) that actually starts Python.
    """
    if sandbox not in MODES:
        raise ValueError(f"sandbox must be one of {MODES}, got {sandbox!r}; use 'bwrap' "
                         "(the default) or, to grade without isolation, 'none'.")
    if sandbox == "none":
        return
    exe = _bwrap()
    if exe is None:
        raise SandboxUnavailableError(f"bubblewrap (`bwrap`) is not installed, so student code "
                                      f"cannot be isolated. {FIX}")
    from .syscalls import filter_unavailable, number

    missing = filter_unavailable()
    if missing:
        raise SandboxUnavailableError(f"the sandbox's syscall filter cannot be built: {missing}. "
                                      "To grade WITHOUT isolation, pass `--sandbox none`.")
    uid = throwaway_uid()
    sources = _ro_sources(uid)
    seccomp = _filter_fd()
    argv = _bwrap_argv(exe, Limits(tmpfs_mb=16, shm_mb=1), config=None, connection=None,
                       info_fd=None, ro=sources, seccomp=seccomp)

    def enter() -> None:  # in the child, before bwrap: what launch() does
        if uid is not None:
            _private_view(sources)
            _become(uid)

    try:
        proc = subprocess.run([*argv, sys.executable, "-I", "-c",
                               _SELF_TEST.format(keyctl=number("keyctl"))],
                              env=_kernel_env(Path("/nonexistent"), "bwrap"), capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL, pass_fds=[seccomp],
                              cwd="/", preexec_fn=enter)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailableError(f"a test sandbox did not start ({exc}). {FIX}") from None
    finally:
        os.close(seccomp)
    if proc.returncode == 0 and proc.stdout.split() != _SELF_TEST_OK:
        raise SandboxUnavailableError(
            f"a test sandbox started but is not what the grader needs (uid, nested namespaces "
            f"and the syscall filter: got {proc.stdout.split()!r}, expected {_SELF_TEST_OK!r}); "
            "please report this with your bubblewrap version (`bwrap --version`).")
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no error message"])[-1]
        hints = []
        if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
            hints.append("kernel.apparmor_restrict_unprivileged_userns is 1 (AppArmor blocks "
                         "user namespaces)")
        if _sysctl("kernel.unprivileged_userns_clone") == "0":
            hints.append("kernel.unprivileged_userns_clone is 0")
        if _sysctl("user.max_user_namespaces") == "0":
            hints.append("user.max_user_namespaces is 0 (`sudo sysctl user.max_user_namespaces=10000`)")
        found = f" ({'; '.join(hints)})" if hints else ""
        raise SandboxUnavailableError(
            f"bubblewrap is installed ({exe}) but a test sandbox failed: {why}{found}. {FIX}")


# --------------------------------------------------------------------------- cgroups (v1 or v2)
_ROOTS: dict[str, dict[str, Path]] = {}


def _own_cgroups() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctrl in parts[1].split(",") if parts[1] else ["unified"]:
            out[ctrl] = parts[2]
    return out


def _probe(parent: Path) -> bool:
    probe = parent / f"kpca-probe-{secrets.token_hex(4)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        probe.rmdir()
    except OSError:
        pass
    return True


def cgroup_roots() -> dict[str, Path]:
    """Where this process may create child cgroups: ``{"memory": dir, "pids": dir}``.

    cgroup v1 (one hierarchy per controller, under our own cgroup of each) is tried
    first, then v2 (one hierarchy, with the controllers enabled for children). Empty
    when neither works (no permission, not mounted): the launcher then falls back to
    per-process rlimits. Cached for the process; ``KPCA_SANDBOX_NO_CGROUPS=1`` forces
    the fallback (for tests).
    """
    forced = os.environ.get("KPCA_SANDBOX_NO_CGROUPS") == "1"
    if str(forced) in _ROOTS:
        return _ROOTS[str(forced)]
    roots: dict[str, Path] = {}
    if not forced:
        own = _own_cgroups()
        for ctrl in CONTROLLERS:
            mount = CGROUP_FS / ctrl
            if ctrl in own and (mount / "cgroup.procs").exists():
                parent = mount / own[ctrl].lstrip("/")
                if parent.is_dir() and _probe(parent):
                    roots[ctrl] = parent
        if not roots and "unified" in own:
            for base in (CGROUP_FS, CGROUP_FS / "unified"):
                parent = _v2_parent(base / own["unified"].lstrip("/"))
                if parent is not None:
                    roots = {c: parent for c in CONTROLLERS}
                    break
    _ROOTS[str(forced)] = roots
    return roots


LEADER = "kpca-grader-"


def _v2_parent(own: Path) -> Path | None:
    """cgroup v2: a cgroup under which this process may create children with the memory
    and pids controllers, or None.

    * Our cgroup already enables both for its children (a delegated subtree set up so,
      or the leaf the grader moved itself into: its parent is used).
    * We may write our own cgroup (a systemd unit with ``Delegate=yes``, a container's
      root, ``systemd-run --user --scope -p Delegate=yes``) and both controllers are
      available: v2 allows controllers for children only in a cgroup without processes
      of its own, so the grader moves itself into a leaf ``kpca-grader-<pid>`` first,
      then enables them (the standard way to use a delegated subtree). This is refused,
      and undone, when other processes share our cgroup.
    """
    def enabled(p: Path) -> list[str]:
        try:
            return [c.lstrip("+") for c in (p / "cgroup.subtree_control").read_text().split()]
        except OSError:
            return []

    if own.name.startswith(LEADER) and all(c in enabled(own.parent) for c in CONTROLLERS):
        return own.parent if _probe(own.parent) else None
    if all(c in enabled(own) for c in CONTROLLERS):
        return own if _probe(own) else None
    try:
        available = (own / "cgroup.controllers").read_text().split()
        others = [x for x in (own / "cgroup.procs").read_text().split() if x != str(os.getpid())]
    except OSError:
        return None
    if others or not all(c in available for c in CONTROLLERS) or not os.access(own, os.W_OK):
        return None
    leader = own / f"{LEADER}{os.getpid()}"
    try:
        leader.mkdir(exist_ok=True)
        (leader / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        with contextlib.suppress(OSError):
            leader.rmdir()
        return None
    if _write(own / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS)) \
            and all(c in enabled(own) for c in CONTROLLERS):
        return own
    with contextlib.suppress(OSError):  # undo: back where we were
        (own / "cgroup.procs").write_text(str(os.getpid()))
        leader.rmdir()
    return None


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def create_cgroups(name: str, limits: Limits) -> dict[str, str]:
    """Create this submission's cgroups with their limits; ``{controller: path}``."""
    made: dict[str, str] = {}
    for ctrl, parent in cgroup_roots().items():
        path = parent / name
        if str(path) in made.values():
            made[ctrl] = str(path)
            continue
        path.mkdir(mode=0o700)
        made[ctrl] = str(path)
    mem = limits.memory_mb * 1024 * 1024
    if "memory" in made:
        p = Path(made["memory"])
        if (p / "memory.limit_in_bytes").exists():  # v1
            ok = _write(p / "memory.limit_in_bytes", str(mem))
            _write(p / "memory.memsw.limit_in_bytes", str(mem))  # no swap around the limit
        else:  # v2
            ok = _write(p / "memory.max", str(mem))
            _write(p / "memory.swap.max", "0")
        if not ok:
            raise OSError(f"cannot set the memory limit of cgroup {p}")
    if "pids" in made and not _write(Path(made["pids"]) / "pids.max", str(limits.pids)):
        raise OSError(f"cannot set the process limit of cgroup {made['pids']}")
    return made


def _read_kv(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                out[k] = int(v)
    except OSError:
        pass
    return out


def cgroup_facts(cgroups: dict[str, str]) -> dict[str, int]:
    """Counters the kernel keeps for us: OOM kills, memory-limit hits, refused forks."""
    facts = {"oom_kills": 0, "memory_hits": 0, "pids_refused": 0}
    if "memory" in cgroups:
        p = Path(cgroups["memory"])
        if (p / "memory.oom_control").exists():  # v1
            facts["oom_kills"] = _read_kv(p / "memory.oom_control").get("oom_kill", 0)
            try:
                facts["memory_hits"] = int((p / "memory.failcnt").read_text())
            except (OSError, ValueError):
                pass
        else:
            ev = _read_kv(p / "memory.events")
            facts["oom_kills"] = ev.get("oom_kill", 0)
            facts["memory_hits"] = ev.get("max", 0)
    if "pids" in cgroups:
        facts["pids_refused"] = _read_kv(Path(cgroups["pids"]) / "pids.events").get("max", 0)
    return facts


def _procs(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill_cgroups(cgroups: dict[str, str]) -> None:
    """SIGKILL every process in the submission's cgroups (new ones cannot escape them)."""
    for path in {Path(p) for p in cgroups.values()}:
        for _ in range(50):
            pids = _procs(path)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)


def cgroup_paths(name: str) -> dict[str, str]:
    """The paths :func:`create_cgroups` uses for ``name`` (whether or not they exist)."""
    return {ctrl: str(parent / name) for ctrl, parent in cgroup_roots().items()}


def sweep_stale_cgroups(min_age: float = 300.0) -> int:
    """Remove empty ``kpca-*`` cgroups left by a grader that was killed; return how many.

    A live grader's cgroup is empty only for the instant between its creation and the
    launcher joining it, and ``rmdir`` refuses a cgroup that holds a process, so removing
    empty ones older than ``min_age`` seconds cannot disturb another grader.
    """
    removed = 0
    now = time.time()
    for parent in set(cgroup_roots().values()):
        try:
            children = [p for p in parent.iterdir() if p.name.startswith("kpca-") and p.is_dir()]
        except OSError:
            continue
        for child in children:
            try:
                if now - child.stat().st_mtime < min_age or _procs(child):
                    continue
                child.rmdir()
                removed += 1
            except OSError:
                pass
    return removed


def kill_tagged(token: str) -> None:
    """SIGKILL every process whose environment has ``KPCA_RUN=token`` (``--sandbox none``
    without cgroups: the kernel and whatever it started, even in a new session)."""
    needle = f"KPCA_RUN={token}".encode()
    me = os.getpid()
    for _ in range(5):
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
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGKILL)
        if not found:
            return
        time.sleep(0.02)


def destroy_cgroups(cgroups: dict[str, str]) -> None:
    """Kill what is left in the cgroups and remove them."""
    kill_cgroups(cgroups)
    for path in {Path(p) for p in cgroups.values()}:
        for _ in range(100):
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                kill_cgroups({"x": str(path)})
                time.sleep(0.02)


# --------------------------------------------------------------------------- the spec a launch reads
def write_spec(folder: Path, *, mode: str, limits: Limits, cgroups: dict[str, str],
               uid: int | None = None) -> None:
    """Write ``sandbox.json`` in a submission's private folder (read by :func:`launch`).

    ``uid``: the throw-away uid a root grader's sandbox runs as. With ``mode="bwrap"`` the
    compiled syscall filter is written beside it (``FILTER``), compiled once per grader
    process, so that no launcher pays for libseccomp.
    """
    spec = {"mode": mode, "limits": asdict(limits), "cgroups": cgroups, "uid": uid}
    if mode == "bwrap":
        from .syscalls import program

        (folder / FILTER).write_bytes(program())
    (folder / SPEC).write_text(json.dumps(spec))


def read_spec(folder: Path) -> dict[str, Any]:
    """The ``sandbox.json`` of a submission's private folder."""
    spec: dict[str, Any] = json.loads((folder / SPEC).read_text())
    return spec


def throwaway_uid() -> int | None:
    """A fresh uid that owns nothing, to run a root grader's sandbox as; else None.

    bwrap maps the sandbox's uid to the uid that runs it: run by root, a sandboxed
    process would be host uid 0 and pass every owner check on the host (root-only
    ``/proc`` files, root's sysctls). So a root grader's launcher becomes a random uid
    far above any system, user or ``/etc/subuid`` range before it starts bwrap; what the
    sandbox must read is handed to bwrap as fds the grader opened (``--ro-bind-fd``), so
    that uid needs no right to traverse, say, a 0700 ``/root``. A grader that is not
    root already runs the sandbox as an ordinary user: its own uid.
    """
    if os.getuid() != 0:
        return None
    return 1_500_000_000 + secrets.randbelow(500_000_000)


def _alive(pid: str) -> bool:
    """Whether ``/proc/<pid>`` is a process that can still run: not a zombie (a leader
    that exited while other threads of it run is still alive)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X") or len(os.listdir(f"/proc/{pid}/task")) > 1
    except (OSError, IndexError):
        return False


def kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is ``uid`` (a root grader's throw-away uid).

    Zombies (killed, not yet reaped by their parent) are done: they run nothing more.
    """
    for _ in range(20):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                st = os.stat(f"/proc/{entry}")
            except OSError:
                continue
            if st.st_uid == uid and _alive(entry):
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.02)


def package_dir() -> Path:
    """The trusted ``kpca_lib`` package folder (bound read-only into every sandbox)."""
    import kpca_lib

    return Path(kpca_lib.__file__).resolve().parent


def _kernel_env(folder: Path, mode: str) -> dict[str, str]:
    """The kernel's whole environment: a fixed allow-list, never the grader's."""
    home = INSIDE_HOME if mode == "bwrap" else str(folder / "home")
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": "/tmp" if mode == "bwrap" else str(folder / "home"),
        "IPYTHONDIR": f"{home}/.ipython",
        "MPLCONFIGDIR": f"{home}/.mpl",
        "MPLBACKEND": "Agg",
        "JUPYTER_PLATFORM_DIRS": "1",
        "JUPYTER_RUNTIME_DIR": f"{home}/.runtime",
        "JUPYTER_CONFIG_DIR": f"{home}/.jupyter",
        "JUPYTER_DATA_DIR": f"{home}/.jupyter-data",
        # glibc reserves 64 MB of address space per thread's arena: with ipykernel's
        # threads that alone would eat a fallback's RLIMIT_AS (see Limits).
        "MALLOC_ARENA_MAX": "2",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PYTHONPATH": str(package_dir().parent),
        "KPCA_GRADER_CONFIG": INSIDE_CONFIG if mode == "bwrap" else str(folder / "config.json"),
        "KPCA_RUN": folder.name,  # not a secret: lets the grader find strays with --sandbox none
    }
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # machine facts some CPUs need
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _ro_paths() -> list[Path]:
    """What the kernel needs to read: the Python installation, virtualenv and package."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package_dir()}
    exe = Path(sys.executable)
    paths.add(exe.parent)
    paths.add(exe.resolve().parent)
    for entry in sys.path:  # e.g. a user site or an editable install outside the prefix
        p = Path(entry or ".").resolve()
        if "site-packages" in p.parts or "dist-packages" in p.parts:
            paths.add(p)
    out = []
    for p in sorted(paths, key=lambda q: len(q.parts)):
        if str(p).startswith(("/usr/", "/proc", "/sys", "/dev")) or p == Path("/"):
            continue
        if not any(p.is_relative_to(q) for q in out):
            out.append(p)
    return out


def _bwrap_argv(exe: str, limits: Limits, *, config: int | None, connection: int | None,
                info_fd: int | None, ro: dict[str, str], seccomp: int | None) -> list[str]:
    """bwrap's arguments.

    ``config`` and ``connection`` are fds bwrap copies in read-only; ``ro`` maps each of
    :func:`_ro_paths` to where bwrap finds it (:func:`_ro_sources`); ``seccomp`` is an fd
    holding the compiled syscall filter (:mod:`kpca_lib.course.grading.run.syscalls`).
    """
    argv = [exe, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-net", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "sandbox",
            # /tmp first: what is bound later may live under /tmp (a checkout, a venv).
            "--size", str(limits.tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp",
            "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for etc in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf",
                "passwd", "group", "fonts", "mime.types", "alternatives"):
        argv += ["--ro-bind-try", f"/etc/{etc}", f"/etc/{etc}"]
    for path, source in ro.items():
        argv += ["--ro-bind", source, path]
    # /dev: bwrap's own (null, zero, random, pts...), read-only but for a sized /dev/shm.
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(limits.shm_mb * 1024 * 1024), "--tmpfs", "/dev/shm",
             "--remount-ro", "/dev"]
    # Keyrings are global: a grader that is not root shares its uid with its sandboxes, and
    # /proc/keys would list that user's key descriptions (payloads need keyctl: filtered).
    for keys in ("keys", "key-users"):
        argv += ["--ro-bind-try", "/dev/null", f"/proc/{keys}"]
    # Host-wide file-system counters and locks (docs/security.md, "a sandbox observes nothing
    # another sandbox does"): /proc/sys/fs counts every open file, inode, dentry and AIO
    # context of the host (aio-nr, file-nr, inode-nr...), /proc/locks lists every lock.
    argv += ["--ro-bind-try", "/dev/null", "/proc/locks",
             "--size", "4096", "--perms", "0555", "--tmpfs", "/proc/sys/fs"]
    # Nothing in /proc is written: not root's sysctls, not even /proc/self/mem.
    argv += ["--remount-ro", "/proc", "--remount-ro", "/proc/sys/fs"]
    argv += ["--dir", INSIDE_HOME, "--dir", os.path.dirname(INSIDE_IPC)]
    if config is not None:
        argv += ["--ro-bind-data", str(config), INSIDE_CONFIG]
    if connection is not None:
        argv += ["--ro-bind-data", str(connection), INSIDE_CONNECTION]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    if seccomp is not None:
        argv += ["--seccomp", str(seccomp)]
    argv += ["--remount-ro", "/", "--chdir", INSIDE_HOME, "--"]  # only /tmp, /dev/shm writable
    return argv


#: Where a root grader's launcher re-binds what the sandbox reads (see _private_view).
_VIEW = "/tmp/.kpca-view"


def _ro_sources(uid: int | None) -> dict[str, str]:
    """Each of :func:`_ro_paths` -> the path bwrap binds it from.

    A grader that is not root binds them from where they are. A root grader's sandbox
    runs as a throw-away uid, which may not traverse the installation (Python under a
    0700 ``/root``): :func:`_private_view` binds each one, with root's rights, under a
    0755 tmpfs in the launcher's own mount namespace, and bwrap binds them from there.
    """
    paths = [str(p) for p in _ro_paths()]
    if uid is None:
        return {p: p for p in paths}
    return {p: f"{_VIEW}/{i}" for i, p in enumerate(paths)}


def _private_view(sources: dict[str, str]) -> None:
    """As root, in the launcher: a private mount namespace where ``sources`` are bound.

    Only the launcher (and the bwrap it becomes) sees it; the host's mounts are untouched.
    """
    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    # Held open first: the tmpfs below covers /tmp, where a checkout or a venv may live.
    held = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path, source in sources.items()
            if source != path}
    parent = os.path.dirname(_VIEW)
    check(libc.mount(b"tmpfs", parent.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                     b"mode=0755,size=64k"), f"mount tmpfs {parent}")
    os.mkdir(_VIEW, 0o755)
    for path, fd in held.items():
        source = sources[path]
        os.mkdir(source, 0o755)
        check(libc.mount(f"/proc/self/fd/{fd}".encode(), source.encode(), None,
                         _MS_BIND | _MS_REC, None), f"bind {path}")
        os.close(fd)


_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18


def _filter_fd(folder: Path | None = None) -> int:
    """An inheritable fd from which bwrap reads the compiled syscall filter: the grader's
    copy in the submission's ``folder`` (see :func:`write_spec`), else compiled here."""
    if folder is not None:
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(folder / FILTER, os.O_RDONLY)
            os.set_inheritable(fd, True)
            return fd
    from .syscalls import write_program

    with tempfile.TemporaryFile() as fh:  # unnamed; the fd outlives the file object
        fd = os.dup(fh.fileno())
    write_program(fd)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


def _become(uid: int) -> None:
    """Drop every group and become ``uid`` (real, effective and saved): a root grader's
    sandbox then owns nothing on the host and ``RLIMIT_NPROC`` counts only its processes."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _set_limits(limits: Limits, cgroups: dict[str, Any], *, spec_uid: int | None) -> None:
    """rlimits of the launcher (inherited by everything the kernel starts).

    Without a pids cgroup the process count is ``RLIMIT_NPROC``, which counts every
    process of the real uid; so a root grader's sandbox first becomes its throw-away uid
    (``--sandbox bwrap`` only). With ``--sandbox none`` and no pids cgroup, root's process
    count is not limited.
    """
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_mb * mb, limits.fsize_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # POSIX queues: unsized memory
    # Every process: a bounded address space (a reservation that is never touched does not
    # count in the cgroup, and would otherwise grow until the timeout); the memory cgroup,
    # when there is one, caps the sum over all the sandbox's processes and files.
    space = limits.address_space_mb("memory" in cgroups) * mb
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    space = space if hard == resource.RLIM_INFINITY else min(space, hard)
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    uid = spec_uid
    if uid is not None and os.getuid() == 0:
        _become(uid)
        # The uid's own process count; under a pids cgroup only a backstop, above the
        # cgroup's limit, so that the cgroup refuses first and the grader sees it.
        n = limits.pids if "pids" not in cgroups else 2 * limits.pids
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
        return
    if "pids" in cgroups:
        return
    n = limits.pids + _threads()  # RLIMIT_NPROC counts the uid's threads, not its processes
    resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


def _threads() -> int:
    """Threads on the host (what ``RLIMIT_NPROC`` counts, per uid; all of them: an upper bound)."""
    n = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                n += len(os.listdir(f"/proc/{p}/task"))
            except OSError:
                pass
    return n


def launch(connection_file: str) -> None:
    """Entry point of the kernelspec: become the sandboxed kernel of this folder's submission."""
    folder = Path.cwd()
    spec = read_spec(folder)
    mode, limits, cgroups = spec["mode"], Limits(**spec["limits"]), spec["cgroups"]
    for path in dict.fromkeys(cgroups.values()):
        Path(path, "cgroup.procs").write_text(str(os.getpid()))
    env = _kernel_env(folder, mode)
    kernel = [sys.executable, "-m", "ipykernel_launcher", "--HistoryManager.enabled=False"]
    if mode == "none":
        home = folder / "home"
        for sub in ("", ".ipython", ".mpl", ".runtime"):
            (home / sub).mkdir(exist_ok=True)
        os.chdir(home)
        _set_limits(limits, cgroups, spec_uid=None)
        os.execve(sys.executable, [*kernel, "-f", connection_file], env)
    exe = _bwrap()
    if exe is None:
        raise SandboxUnavailableError(f"bwrap is missing. {FIX}")
    info = os.open(folder / INFO, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    config = os.open(folder / "config.json", os.O_RDONLY)
    connection = os.open(connection_file, os.O_RDONLY)
    for fd in (info, config, connection):
        os.set_inheritable(fd, True)
    uid = spec.get("uid") if os.getuid() == 0 else None
    sources = _ro_sources(uid)
    argv = _bwrap_argv(exe, limits, config=config, connection=connection, info_fd=info,
                       ro=sources, seccomp=_filter_fd(folder))
    os.chdir("/")  # the submission's 0700 folder is not the throw-away uid's to enter
    if uid is not None:
        _private_view(sources)
    _set_limits(limits, cgroups, spec_uid=uid)
    os.execve(exe, [*argv, *kernel, "-f", INSIDE_CONNECTION], env)


def kernel_argv() -> list[str]:
    """The kernelspec's argv (``{connection_file}`` is filled in by jupyter_client)."""
    return [sys.executable, "-m", "kpca_lib.course.grading.run.sandbox", "launch", "{connection_file}"]


if __name__ == "__main__":  # pragma: no cover - run by jupyter_client, see kernel_argv()
    if len(sys.argv) == 3 and sys.argv[1] == "launch":
        launch(sys.argv[2])
    else:
        sys.exit("usage: python -m kpca_lib.course.grading.run.sandbox launch CONNECTION_FILE")
