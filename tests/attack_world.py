"""The hostile world the attack suite grades in, and how it looks at the result.

``make_world`` lays out, below one folder: a fake HOME with a canary ``~/.bashrc``,
``~/.config/kpca-course/grading-secret`` and an instructor folder ``~/teaching``;
a course folder (the grader's working directory) with a copy of ``solutions/``
whose answer and hidden-check cells carry a canary line; per-student submission
folders; a TMPDIR for the grader; and ``pids/``, where attacks try to leave flags.
The grader runs as ``python -m kpca_lib.course.cli grade`` in a subprocess with
HOME, TMPDIR and ``KPCA_GRADING_SECRET`` (a canary) of that world, on a pty
(an instructor's terminal).

It also plants and removes keys in the test process's own kernel keyrings (the
instructor's keys that no sandbox may read), and writes submissions that are not
plain files (symbolic and hard links, a symlinked folder, a FIFO, a device).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import csv
import ctypes
import errno
import hashlib
import io
import json
import os
import pty
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from kpca_lib.course.grading.judge.notebooks import meta, with_answers

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_feature_maps"
SOLUTION = nbformat.read(ROOT / "solutions" / f"{ASSIGNMENT}.ipynb", as_version=4)
EXERCISE = nbformat.read(ROOT / "exercises" / f"{ASSIGNMENT}.ipynb", as_version=4)
FILE = f"{ASSIGNMENT}.ipynb"
#: A hang guard only: a grader still running after this long has failed (the suite
#: never passes because something was fast).
HANG_GUARD = float(os.environ.get("KPCA_ATTACK_HANG_GUARD", "1200"))
#: Only to check that the attacks bite (``none``: they must fail the suite); the suite
#: itself always grades with the grader's default sandbox.
SANDBOX_FLAGS = ["--sandbox", os.environ["KPCA_ATTACK_SANDBOX"]] if os.environ.get("KPCA_ATTACK_SANDBOX") else []


def cell(nb, cid):
    return next(c for c in nb.cells if c.id == cid)


def student_copy(nb=SOLUTION):
    """The exercise layout with the solution's answer cells (a full honest submission)."""
    return with_answers(EXERCISE, nb)


def blank():
    return copy.deepcopy(EXERCISE)


def honest(cid: str) -> str:
    return cell(SOLUTION, cid).source


@dataclass
class World:
    base: Path
    token: str
    marker: str
    canaries: dict[str, str]
    home: Path
    course: Path
    solutions: Path
    subs: Path
    out: Path
    tmp: Path
    pids: Path
    port: int
    listener: socket.socket
    connections: list = field(default_factory=list)
    sockdir: Path | None = None
    unix_listeners: list = field(default_factory=list)
    #: ``--memory`` of the batches graded in this world (the attacks size their probes by it).
    memory_mb: int = 2048
    #: Variables added to the grader's environment (e.g. ``KPCA_SANDBOX_NO_CGROUPS``).
    extra_env: dict = field(default_factory=dict)
    #: Every ``--out`` graded into in this world so far (left out of its snapshots).
    outs: list = field(default_factory=list)

    def close(self) -> None:
        for sock in [self.listener, *self.unix_listeners]:
            sock.close()

    @property
    def teaching(self) -> Path:
        return self.home / "teaching"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KPCA_", "PYTEST_"))}
        env.update({
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "KPCA_GRADING_SECRET": self.canaries["secret_env"],
            "PYTHONPATH": str(ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            # The grader draws summary.png with matplotlib, which keeps its font cache in
            # ~/.cache/matplotlib like any matplotlib program (an instructor's HOME has one
            # already): here it goes beside the world, so the fake HOME stays a pure canary.
            "MPLCONFIGDIR": str(self.base / "mplconfig"),
        })
        env.update(self.extra_env)
        return env

    def config(self, name: str) -> dict:
        return {
            "marker": self.marker, "name": name, "pids": str(self.pids), "world": str(self.base),
            "home": str(self.home), "solutions": str(self.solutions), "subs": str(self.subs),
            "out": str(self.out), "port": self.port, "test_pid_ns": os.readlink("/proc/self/ns/pid"),
            "honest_q2": honest("q2-answer"), "sockdir": str(self.sockdir), "soldirs": [str(self.solutions), str(ROOT / "solutions")],
            "memory_mb": self.memory_mb,
        }


def make_world(base: Path) -> World:
    token = secrets.token_hex(6)
    marker = "kpcaatk" + secrets.token_hex(4)  # 15 characters: fits a process's comm
    canaries = {k: f"kpcacanary-{k}-{secrets.token_hex(8)}" for k in
                ("secret_env", "secret_file", "bashrc", "notes", "solutions", "classmate")}
    home = base / "home"
    (home / ".config" / "kpca-course").mkdir(parents=True)
    (home / ".config" / "kpca-course" / "grading-secret").write_text(canaries["secret_file"] + "\n")
    (home / ".bashrc").write_text(f"# {canaries['bashrc']}\nexport PS1='$ '\n")
    (home / "teaching").mkdir()
    (home / "teaching" / "notes.txt").write_text(f"exam ideas: {canaries['notes']}\n")
    course = base / "course"
    solutions = course / "solutions"
    shutil.copytree(ROOT / "solutions", solutions)
    nb = nbformat.read(solutions / FILE, as_version=4)
    for c in nb.cells:
        if meta(c).get("role") in ("hidden-check", "answer"):
            c.source = f"# {canaries['solutions']}\n" + c.source
    nbformat.write(nb, solutions / FILE)
    subs = course / "submissions"
    subs.mkdir()
    tmp = base / "tmp"
    tmp.mkdir()
    pids = base / "pids"
    pids.mkdir()
    pids.chmod(0o777)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    world = World(base, token, marker, canaries, home, course, solutions, subs,
                  course / "grades", tmp, pids, listener.getsockname()[1], listener)

    def accept():
        while True:
            try:
                conn, addr = listener.accept()
            except OSError:
                return
            world.connections.append(addr)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    # Unix sockets named like a kernel's ipc endpoints (k-1, k-2, ...): a trusted process
    # that follows a sandbox's symlink out of it connects here.
    world.sockdir = base / "sockets"
    world.sockdir.mkdir()
    for i in range(1, 21):
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(str(world.sockdir / f"k-{i}"))
        unix.listen(16)
        world.unix_listeners.append(unix)

        def accept_unix(sock=unix, i=i):
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                world.connections.append(f"unix k-{i}")
                conn.close()

        threading.Thread(target=accept_unix, daemon=True).start()
    return world


def write_submission(world: World, student: str, nb=None, raw: bytes | None = None) -> Path:
    """Write ``student``'s submission: a notebook, raw bytes, or (``raw`` names it) a file
    that is not a plain file the student handed in:

    * ``symlink-secret``: a symlink to the instructor's grading secret;
    * ``symlink-solution``: a relative symlink ``../../solutions/<file>`` (the canary copy
      of the instructor's solution, as the README lays the course out);
    * ``symlink-classmate``: a relative symlink to ``honest_full_1``'s notebook;
    * ``symlinked-folder``: the student's folder is a symlink to a folder outside the
      submissions that holds a full notebook;
    * ``hardlink-solution``: a hard link to the canary solution;
    * ``fifo``: a named pipe; ``device``: a character device with ``/dev/null``'s numbers
      (a FIFO when the suite is not root and cannot make one).
    """
    folder = world.subs / student
    path = folder / FILE
    if raw == b"symlinked-folder":
        elsewhere = world.base / f"outside-{student}"
        elsewhere.mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.write(student_copy(), elsewhere / FILE)
        folder.symlink_to(elsewhere, target_is_directory=True)
        return path
    folder.mkdir()
    if raw == b"symlink-secret":
        path.symlink_to(world.home / ".config" / "kpca-course" / "grading-secret")
    elif raw == b"symlink-solution":
        path.symlink_to(Path("..", "..", world.solutions.name, FILE))
    elif raw == b"symlink-classmate":
        path.symlink_to(Path("..", "honest_full_1", FILE))
    elif raw == b"hardlink-solution":
        os.link(world.solutions / FILE, path)
    elif raw == b"device":
        if os.geteuid() == 0:
            os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 3))
        else:  # only root makes device nodes: the same rule covers a FIFO
            os.mkfifo(path)
    elif raw == b"fifo":
        os.mkfifo(path)
    elif raw is not None:
        path.write_bytes(raw)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.write(nb, path)
    return path


# --------------------------------------------------------------------------- running
@dataclass
class GraderRun:
    rc: int | None
    output: str
    stopped: bool = False  # the grader was found stopped (SIGSTOP) and killed
    hung: bool = False


def run_grader(world: World, paths: list[Path], *extra: str, out: Path | None = None,
               hang_guard: float | None = None) -> GraderRun:
    """Run the CLI on a pty; return its exit code and everything it printed.

    ``extra`` comes after the documented flags, so ``--memory 1024`` there wins;
    ``hang_guard`` (default :data:`HANG_GUARD`): seconds after which the grader has hung.
    """
    out = out or world.out
    guard = HANG_GUARD if hang_guard is None else hang_guard
    cmd = [sys.executable, "-m", "kpca_lib.course.cli", "grade", "--assignment", ASSIGNMENT,
           "--timeout", "30", "--jobs", "2", "--memory", "2048", "--out", str(out),
           "--solutions", str(world.solutions), *SANDBOX_FLAGS, *extra, *[str(p) for p in paths]]
    master, slave = pty.openpty()

    def controlling_tty() -> None:
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(cmd, cwd=world.course, env=world.env(), stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True, preexec_fn=controlling_tty)
    os.close(slave)
    chunks: list[bytes] = []

    def reader() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    run = GraderRun(None, "")
    start = time.monotonic()
    while True:
        try:
            run.rc = proc.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            pass
        state = _state(proc.pid)
        if state == "T":  # stopped by a submission: a grader that never finishes
            run.stopped = True
        elif time.monotonic() - start > guard:
            run.hung = True
        if run.stopped or run.hung:
            proc.kill()
            run.rc = proc.wait()
            break
    t.join(timeout=30)
    os.close(master)
    run.output = b"".join(chunks).decode("utf-8", "replace")
    return run


@dataclass
class CliRun:
    rc: int | None
    stdout: str
    stderr: str
    hung: bool = False


def run_cli(world: World, paths: list[Path], *flags: str, out: Path, hang_guard: float = 600.0) -> CliRun:
    """``kpca-course grade`` with ``flags`` (they replace the documented ``--timeout``,
    ``--memory`` and ``--jobs``), stdout and stderr apart, no terminal."""
    cmd = [sys.executable, "-m", "kpca_lib.course.cli", "grade", "--assignment", ASSIGNMENT,
           "--out", str(out), "--solutions", str(world.solutions), *SANDBOX_FLAGS, *flags,
           *[str(p) for p in paths]]
    proc = subprocess.Popen(cmd, cwd=world.course, env=world.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=hang_guard)
        return CliRun(proc.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return CliRun(proc.returncode, stdout, stderr, hung=True)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


# --------------------------------------------------------------------------- looking
@dataclass
class Gradebook:
    csv_text: str
    csv_rows: list[dict]
    json_data: dict
    by_student: dict[str, dict]  # student folder -> JSON row
    csv_by_student: dict[str, dict]
    unmapped: list[str]


def student_of(entry: dict, subs: Path) -> str | None:
    """The student folder a gradebook row belongs to (by its file path as given, never
    through a symlink, else its row id)."""
    for key in ("file", "path"):
        value = entry.get(key)
        if isinstance(value, str) and value:
            p = Path(value)
            for resolve in (False, True):
                try:
                    if resolve:
                        return p.resolve().relative_to(subs.resolve()).parts[0]
                    return Path(os.path.abspath(p)).relative_to(os.path.abspath(subs)).parts[0]
                except (ValueError, IndexError, OSError):
                    pass
    sub = entry.get("submission")
    if isinstance(sub, str) and "/" in sub:
        return sub.split("/")[0].lstrip("'")
    return None


def read_gradebook(out: Path, subs: Path) -> Gradebook:
    text = (out / "grades.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    data = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    by_student, unmapped = {}, []
    for entry in data["submissions"]:
        s = student_of(entry, subs)
        if s is None:
            unmapped.append(str(entry.get("submission")))
        else:
            by_student[s] = entry
    id_to_student = {e["submission"]: s for s, e in by_student.items()}
    csv_by_student = {}
    for r in rows:
        rid = r["submission"]
        for candidate in (rid, rid[1:] if rid[:1] in ("'", "\t") else rid):
            if candidate in id_to_student:
                csv_by_student[id_to_student[candidate]] = r
                break
    return Gradebook(text, rows, data, by_student, csv_by_student, unmapped)


def canary_forms(value: str) -> list[bytes]:
    raw = value.encode()
    return [raw, raw.hex().encode(), raw[::-1], base64.b64encode(raw)]


def find_canaries(world: World, blobs: dict[str, bytes]) -> list[str]:
    """Which canary (or its hex, reversed, base64 form) appears in which blob."""
    hits = []
    for where, blob in blobs.items():
        for name, value in world.canaries.items():
            if any(form in blob for form in canary_forms(value)):
                hits.append(f"{name} in {where}")
    return hits


def tree_blobs(folder: Path) -> dict[str, bytes]:
    out = {}
    if not folder.exists():
        return out
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p)] = os.readlink(p).encode()
        elif p.is_file():
            out[str(p)] = p.read_bytes()
    return out


def snapshot(folder: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """Every path below ``folder`` (not following symlinks) with its content hash."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        d = Path(dirpath)
        dirnames[:] = [n for n in dirnames if d / n not in skip]
        for n in dirnames + filenames:
            p = d / n
            if p in skip:
                continue
            rel = str(p.relative_to(folder))
            if p.is_symlink():
                snap[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                snap[rel] = ("dir",)
            elif p.is_file():
                snap[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            else:  # a FIFO or socket: never opened
                snap[rel] = ("special", p.lstat().st_mode)
    return snap


def marker_processes(marker: str) -> list[str]:
    """Processes whose argv, environment or thread names carry the marker."""
    needle = marker.encode()
    found = []
    me = os.getpid()
    for e in os.listdir("/proc"):
        if not e.isdigit() or int(e) == me:
            continue
        try:
            argv = Path(f"/proc/{e}/cmdline").read_bytes()
            env = Path(f"/proc/{e}/environ").read_bytes()
            comms = [Path(t, "comm").read_bytes() for t in Path(f"/proc/{e}/task").iterdir()]
        except OSError:
            continue
        if _state(int(e)) in ("Z", "X", ""):
            continue
        if needle in argv or needle in env.split(b"\0") or needle in env or any(needle[:15] in c for c in comms):
            shown = argv.replace(b"\0", b" ")[:120]
            found.append(f"pid {e}: {shown!r}")
    return found


def wait_for_no_survivors(marker: str, checks: int = 100) -> list[str]:
    """Poll a bounded number of times for processes with the marker to be gone."""
    alive = marker_processes(marker)
    for _ in range(checks):
        if not alive:
            return []
        time.sleep(0.1)
        alive = marker_processes(marker)
    return alive


def kill_marker_processes(marker: str) -> None:
    """Clean-up after a failing run: SIGKILL, by pid, the processes the attacks started."""
    for _ in range(5):
        pids = [int(s.split()[1].rstrip(":")) for s in marker_processes(marker)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)


def shared_places() -> list[Path]:
    import site

    places = {Path("/tmp"), Path("/dev/shm"), Path("/var/tmp"), ROOT}
    for p in [*sys.path, *site.getsitepackages()]:
        if p and Path(p).is_dir():
            places.add(Path(p))
    return sorted(places)


def marker_files(marker: str) -> list[Path]:
    found = []
    for d in shared_places():
        try:
            found += [d / n for n in os.listdir(d) if marker in n]
        except OSError:
            pass
    return found


def remove_marker_files(marker: str) -> None:
    for p in marker_files(marker):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                p.unlink()
            except OSError:
                pass


# --------------------------------------------------------------------------- the test process's keyrings
ADD_KEY, KEYCTL = 248, 250  # x86_64 syscall numbers
KEYCTL_LINK, KEYCTL_READ, KEYCTL_INVALIDATE = 8, 11, 21
KEY_SPEC_SESSION, KEY_SPEC_USER = -3, -4
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


def _syscall(nr: int, *args) -> tuple[int, int]:
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    result = _LIBC.syscall(ctypes.c_long(nr), *conv)
    return result, ctypes.get_errno()


def plant_key(description: str, payload: str, ring: int) -> tuple[int | None, str]:
    """Add a ``user`` key to one of this process's keyrings: ``(key id, "")`` or
    ``(None, why)`` (a host whose own seccomp profile blocks the keyring calls)."""
    data = payload.encode()
    kid, err = _syscall(ADD_KEY, b"user", description.encode(), data, len(data), ring)
    if kid < 0:
        return None, errno.errorcode.get(err, str(err))
    return kid, ""


def link_user_keyring() -> None:
    """Link the user keyring into the session keyring, as pam_keyinit does at a login: this
    process (and what it starts) then possesses its user keyring's keys."""
    _syscall(KEYCTL, KEYCTL_LINK, KEY_SPEC_USER, KEY_SPEC_SESSION)


def read_key(kid: int) -> bytes | None:
    buf = ctypes.create_string_buffer(65536)
    n, _ = _syscall(KEYCTL, KEYCTL_READ, kid, buf, len(buf))
    return buf.raw[:n] if n >= 0 else None


def visible_keys() -> list[tuple[int, str, str]]:
    """``(id, type, description)`` of every key this process may view (``/proc/keys``)."""
    try:
        text = Path("/proc/keys").read_text()
    except OSError:
        return []
    keys = []
    for line in text.splitlines():
        parts = line.split(None, 8)
        if len(parts) == 9:
            keys.append((int(parts[0], 16), parts[7], parts[8].rsplit(":", 1)[0]))
    return keys


def drop_marker_keys(marker: str) -> None:
    """Invalidate every key this process can see whose description carries the marker
    (a few rounds: the kernel removes invalidated keys lazily). The user keyring is linked
    first: a key there is only this process's to remove when it possesses it."""
    link_user_keyring()
    for _ in range(5):
        left = [kid for kid, _, description in visible_keys() if marker in description]
        if not left:
            return
        for kid in left:
            _syscall(KEYCTL, KEYCTL_INVALIDATE, kid)
        time.sleep(0.2)
