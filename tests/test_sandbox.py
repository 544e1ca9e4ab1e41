"""The grading sandbox, tested directly: what a kernel sees, and every limit with its status.

No test depends on timing: each attack is classified from facts the trusted side
records (which limit fired), so the suite passes on a loaded machine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import uuid
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.grading.pipeline import grade_batch
from kpca_lib.course.grading.run import sandbox as sb
from kpca_lib.course.grading.run.runner import Run, run_all

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from test_grading import ASSIGNMENT, Q, cell, student_copy  # noqa: E402


def _bwrap_or_fail() -> None:
    try:
        sb.check_sandbox("bwrap")
    except sb.SandboxUnavailableError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the grading sandbox must run in CI: {exc}")
        pytest.skip(f"no sandbox on this machine: {exc}")


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret-do-not-leak")


def test_unknown_mode_and_missing_bwrap_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="sandbox must be one of"):
        sb.check_sandbox("docker")
    sb.check_sandbox("none")
    monkeypatch.setattr(sb, "_bwrap", lambda: None)
    with pytest.raises(sb.SandboxUnavailableError, match="apt-get install bubblewrap") as info:
        sb.check_sandbox("bwrap")
    assert "--sandbox none" in str(info.value)
    monkeypatch.setattr(sb, "_bwrap", lambda: "/bin/false")  # installed, but cannot start
    monkeypatch.setattr(sb, "_sysctl", lambda name: "1" if "apparmor" in name else None)
    with pytest.raises(sb.SandboxUnavailableError, match="a test sandbox failed") as info:
        sb.check_sandbox("bwrap")
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in str(info.value)


def _notebook(cells: list[str]) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, id=f"c{i}") for i, src in enumerate(cells)]
    return nb


def test_what_a_sandboxed_kernel_sees(tmp_path):
    """Each cell asserts one property from inside; all must pass."""
    _bwrap_or_fail()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    work = Path(tempfile.mkdtemp(prefix="kpca-sbtest-"))
    try:
        folder = work / uuid.uuid4().hex
        folder.mkdir(mode=0o700)
        (folder / "config.json").write_text("{}")
        allowed = set(sb._kernel_env(folder, "bwrap")) | {"PWD"}  # PWD: set by bwrap --chdir
        cells = [
            "import os, socket, sys\nassert os.getuid() == 65534 and os.getgid() == 65534",
            f"assert not os.path.exists({str(ROOT / 'solutions')!r})",
            f"assert not os.path.exists({str(work)!r})",
            f"assert not os.path.exists({str(tmp_path)!r})",
            "assert not os.path.exists('/root/.config') and not os.path.exists('/home')",
            "env = dict(v.split(b'=', 1) for v in open('/proc/self/environ', 'rb').read().split(b'\\0') if v)\n"
            f"assert {{k.decode() for k in env}} <= set({sorted(allowed)!r}), sorted(env)",
            "assert 'test-secret-do-not-leak' not in repr(dict(os.environ))",
            "pids = [p for p in os.listdir('/proc') if p.isdigit()]\nassert len(pids) < 10, pids",
            "assert not any(b'test-secret' in open(f'/proc/{p}/environ', 'rb').read() for p in pids)",
            f"s = socket.socket()\ntry:\n    s.connect(('127.0.0.1', {port}))\n    ok = False\n"
            "except OSError:\n    ok = True\nassert ok",
            "for p in ('/usr/x', '/etc/x', '/x', sys.prefix + '/x', '/run/kpca/config.json'):\n"
            "    try:\n        open(p, 'w')\n        raise AssertionError(p)\n    except OSError:\n        pass",
            "open('/tmp/scratch', 'w').write('ok')",
            "def target(fd):\n    try:\n        return os.readlink(f'/proc/self/fd/{fd}')\n"
            "    except OSError:\n        return ''\n"
            "held = [target(fd) for fd in os.listdir('/proc/self/fd')]\n"
            "assert not [t for t in held if 'bwrap-info' in t or t.endswith('.json')], held",
            "import kpca_lib.course.grading.run.kernel_side, numpy",
        ]
        (folder / "submission.ipynb").write_text(json.dumps(_notebook(cells)))
        run = Run(folder / "submission.ipynb", n_cells=len(cells))
        run_all([run], work, timeout=60, memory_mb=1024, jobs=1, sandbox="bwrap")
        assert run.finished
        bad = {c: o.text[-600:] for c, o in run.cells.items() if o.outcome != "passed"}
        assert not bad, bad
    finally:
        listener.close()
        shutil.rmtree(work, ignore_errors=True)


MARK = "kpca-stray-" + uuid.uuid4().hex[:8]

ATTACKS = {
    # name: (q2 answer cell source, expected status, message fragment)
    "memory_in_children": (
        "import subprocess, sys, time\n"
        "code = 'b = bytearray(300_000_000)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n"
        "import time; time.sleep(600)'\n"
        "ps = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(4)]\n"
        "while all(p.poll() is None for p in ps):  # together they exceed the limit\n"
        "    time.sleep(0.05)\n"
        "codes = [p.poll() for p in ps]\nfor p in ps:\n    p.kill()\nassert None not in codes, codes\n",
        "crashed", "out of memory"),
    "fork_bomb": (
        "import subprocess\nps = [subprocess.Popen(['sleep', '60']) for _ in range(300)]\n",
        "crashed", "more processes"),
    "output_flood": (
        "from IPython.display import display\n"
        "for i in range(400):\n    display({'text/plain': 'x' * 1_000_000}, raw=True)\n",
        "crashed", None),  # the output cap or, first, the kernel dying of its own queue
    "sigint_ignored": (
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",
        "timeout", "time limit"),
    "disk_fill": (
        "chunk = b'x' * 1_000_000\nwith open('/tmp/fill', 'wb') as fh:\n"
        "    for _ in range(2000):\n        fh.write(chunk)\n",
        "graded", None),
    "setsid_double_fork": (
        "import os, subprocess, sys\n"
        f"code = 'import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(600)  # {MARK}'\n"
        f"subprocess.Popen([sys.executable, '-c', code, {MARK!r}], start_new_session=True)\n",
        "graded", None),
}


def _strays() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if MARK.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def test_limits_and_statuses_in_one_batch(tmp_path):
    """Every limit, with honest neighbours whose grades must not move."""
    _bwrap_or_fail()
    expect = {}
    files = []
    for name, (source, status, _) in ATTACKS.items():
        nb = student_copy()
        cell(nb, "q2-answer").source = source
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        files.append(tmp_path / f"{name}.ipynb")
        expect[name] = status
    for k in range(2):
        nbformat.write(student_copy(), tmp_path / f"honest{k}.ipynb")
        files.insert(2 * k + 1, tmp_path / f"honest{k}.ipynb")
    free_before = shutil.disk_usage(tmp_path).free
    rows = {r.submission: r for r in grade_batch(
        assignment=ASSIGNMENT, submissions=files, out=tmp_path / "out", solutions=ROOT / "solutions",
        timeout=5, jobs=2, memory_mb=1024)}
    assert not _strays(), "a process of a submission outlived the grader"
    assert free_before - shutil.disk_usage(tmp_path).free < 200_000_000
    for k in range(2):
        assert (rows[f"honest{k}"].status, rows[f"honest{k}"].score) == ("graded", 12.0)
    problems = []
    for name, (_, status, fragment) in ATTACKS.items():
        row = rows[name]
        got = (row.status, row.score, row.questions["q2_feature_count"])
        if got != (status, 9.0, 0.0) or (fragment and fragment not in " ".join(row.messages)):
            problems.append(f"{name}: {got} {row.messages}")
    assert not problems, "\n".join(problems)
    for q in Q[:3]:
        assert rows["output_flood"].questions[q] == 3.0


def test_no_cgroup_fallback_still_limits_memory(tmp_path, monkeypatch):
    """Without cgroups (forced), RLIMIT_AS still stops a memory bomb in the kernel."""
    _bwrap_or_fail()
    monkeypatch.setenv("KPCA_SANDBOX_NO_CGROUPS", "1")
    nb = student_copy()
    cell(nb, "q2-answer").source = "blocks = []\nwhile True:\n    blocks.append(b'x' * 50_000_000)\n"
    nbformat.write(nb, tmp_path / "bomb.ipynb")
    nb = student_copy()  # each child within its own RLIMIT_AS, together over the budget
    cell(nb, "q2-answer").source = ATTACKS["memory_in_children"][0]
    nbformat.write(nb, tmp_path / "children.ipynb")
    nb = student_copy()  # pages shared after fork count once: no false "out of memory"
    cell(nb, "q2-answer").source = (
        "import multiprocessing, time\nimport numpy as np\nbig = np.ones(300_000_000 // 8)\n"
        "def f(i):\n    time.sleep(1.5)\n    return float(big[i::400].sum())\n"
        "with multiprocessing.get_context('fork').Pool(2) as pool:\n"
        "    assert pool.map(f, range(2))\n")
    nbformat.write(nb, tmp_path / "shared.ipynb")
    nbformat.write(student_copy(), tmp_path / "honest.ipynb")
    rows = {r.submission: r for r in grade_batch(
        assignment=ASSIGNMENT, out=tmp_path / "out", solutions=ROOT / "solutions", timeout=20,
        submissions=[tmp_path / f"{n}.ipynb" for n in ("bomb", "children", "shared", "honest")],
        jobs=1, memory_mb=1024)}
    assert (rows["shared"].status, rows["shared"].score) == ("graded", 9.0), rows["shared"].messages
    assert (rows["honest"].status, rows["honest"].score) == ("graded", 12.0)
    assert (rows["bomb"].status, rows["bomb"].score) == ("crashed", 9.0)
    assert "out of memory" in " ".join(rows["bomb"].messages)
    assert (rows["children"].status, rows["children"].score) == ("crashed", 9.0)
    assert "processes together held more than the memory limit of 1024 MB" in " ".join(
        rows["children"].messages)


def test_sandbox_none_keeps_the_limits_and_one_failure_never_stops_the_batch(tmp_path, monkeypatch):
    """``--sandbox none`` (only when asked) still limits memory; an error while preparing
    one submission (a full disk) makes that row ``crashed``, never ``graded`` with 0, and
    ``on_job_done`` is called once per job, after its row is scored."""
    import dataclasses
    import errno

    from kpca_lib.course.grading.pipeline import batch as batch_module
    from kpca_lib.course.grading.pipeline import canary as canary_module
    from kpca_lib.course.grading.pipeline import submission as grade_module

    nb = student_copy()
    cell(nb, "q2-answer").source = "blocks = []\nwhile True:\n    blocks.append(b'x' * 50_000_000)\n"
    nbformat.write(nb, tmp_path / "bomb.ipynb")
    for name in ("honest", "enospc"):
        nbformat.write(student_copy(), tmp_path / f"{name}.ipynb")
    prepare = grade_module.attempt

    def full_disk(job):
        if job.row.submission == "enospc":
            raise OSError(errno.ENOSPC, "No space left on device")
        return prepare(job)

    calls = []

    def on_done(job):
        calls.append((job.row.submission, job.row.status, job.row.score))

    monkeypatch.setattr(grade_module, "attempt", full_disk)
    run_jobs = grade_module.run_submissions

    def run_unsandboxed(subs, work, config, progress, runner, theirs=None):
        def both(job):
            on_done(job)
            if theirs is not None:
                theirs(job)

        return run_jobs(subs, work, dataclasses.replace(config, sandbox="none"), progress, runner,
                        both)

    for module in (batch_module, canary_module):  # the batch's rows and the canary's
        monkeypatch.setattr(module, "run_submissions", run_unsandboxed)
    rows = {r.submission: r for r in grade_batch(
        assignment=ASSIGNMENT, submissions=[tmp_path / f"{n}.ipynb" for n in ("bomb", "honest", "enospc")],
        out=tmp_path / "out", solutions=ROOT / "solutions", timeout=20, jobs=2, memory_mb=1024)}
    assert (rows["honest"].status, rows["honest"].score) == ("graded", 12.0)
    assert (rows["bomb"].status, rows["bomb"].score) == ("crashed", 9.0)
    assert "out of memory" in " ".join(rows["bomb"].messages)
    assert (rows["enospc"].status, rows["enospc"].score) == ("crashed", 0.0)
    assert "No space left" in " ".join(rows["enospc"].messages)
    # The canary (the instructor's solution, graded first under the same limits) and every job.
    assert sorted(calls) == [("bomb", "crashed", 9.0), ("enospc", "crashed", 0.0), ("honest", "graded", 12.0),
                             ("the instructor's solution", "graded", 12.0)]


def test_stale_cgroups_of_a_killed_grader_are_removed_and_live_ones_kept():
    roots = sb.cgroup_roots()
    if "pids" not in roots:
        pytest.skip("this machine gives the grader no cgroups (the rlimit fallback is tested above)")
    import subprocess

    stale = sb.create_cgroups(f"kpca-{uuid.uuid4().hex}", sb.Limits())
    live = sb.create_cgroups(f"kpca-{uuid.uuid4().hex}", sb.Limits())
    proc = subprocess.Popen(["sleep", "60"])
    try:
        Path(live["pids"], "cgroup.procs").write_text(str(proc.pid))
        sb.sweep_stale_cgroups(min_age=0)
        assert not any(Path(p).exists() for p in stale.values())
        assert Path(live["pids"]).exists()
    finally:
        proc.kill()
        proc.wait()
        sb.destroy_cgroups(live)
    assert not any(Path(p).exists() for p in live.values())


# --------------------------------------------------------------------------- cgroup v2 (a fake tree)
# This machine mounts cgroup v1 for memory and pids, so v2 delegation is tested on a fake
# cgroup tree: the files the kernel would show, and what the grader writes into them.
def _fake_v2(tmp_path, monkeypatch, procs):
    own = tmp_path / "grader"
    own.mkdir()
    (own / "cgroup.controllers").write_text("cpu io memory pids\n")
    (own / "cgroup.subtree_control").write_text("\n")
    (own / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs))
    monkeypatch.setattr(sb, "CGROUP_FS", tmp_path)
    monkeypatch.setattr(sb, "_own_cgroups", lambda: {"unified": "/grader"})
    monkeypatch.delenv("KPCA_SANDBOX_NO_CGROUPS", raising=False)
    monkeypatch.setattr(sb, "_ROOTS", {})
    return own


def test_cgroup_v2_delegated_subtree_moves_the_grader_into_a_leaf(tmp_path, monkeypatch):
    own = _fake_v2(tmp_path, monkeypatch, [os.getpid()])
    roots = sb.cgroup_roots()
    assert roots == {"memory": own, "pids": own}
    leader = own / f"{sb.LEADER}{os.getpid()}"
    assert (leader / "cgroup.procs").read_text() == str(os.getpid())
    assert (own / "cgroup.subtree_control").read_text().split() == ["+memory", "+pids"]
    made = sb.create_cgroups("kpca-x", sb.Limits.for_memory(1024))
    assert made == {"memory": str(own / "kpca-x"), "pids": str(own / "kpca-x")}
    assert (own / "kpca-x" / "memory.max").read_text() == str(1024 * 1024 * 1024)
    assert (own / "kpca-x" / "memory.swap.max").read_text() == "0"
    assert (own / "kpca-x" / "pids.max").read_text() == "64"
    (own / "kpca-x" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert sb.cgroup_facts(made)["oom_kills"] == 1 and sb.cgroup_facts(made)["memory_hits"] == 3
    # A worker started from the leaf finds the same parent, not a leaf of its own.
    monkeypatch.setattr(sb, "_ROOTS", {})
    monkeypatch.setattr(sb, "_own_cgroups", lambda: {"unified": f"/grader/{leader.name}"})
    assert sb.cgroup_roots() == {"memory": own, "pids": own}


def test_cgroup_v2_shared_cgroup_is_left_alone(tmp_path, monkeypatch):
    """Another process in our cgroup: v2 cannot enable controllers there; nothing changes
    and the grader falls back to per-process limits."""
    own = _fake_v2(tmp_path, monkeypatch, [1, os.getpid()])
    assert sb.cgroup_roots() == {}
    assert (own / "cgroup.subtree_control").read_text() == "\n"
    assert not list(own.glob(f"{sb.LEADER}*"))


def test_a_root_graders_sandbox_is_a_throwaway_uid_seen_from_the_host():
    """Seen from the host, every process of a root grader's sandbox is the throw-away uid
    (inside, /proc/self/uid_map shows bwrap's nested namespace, not the host)."""
    _bwrap_or_fail()
    if os.getuid() != 0:
        pytest.skip("the grader is not root here: the sandbox is this user's uid (CI runs as root)")
    import subprocess
    import sys

    uid = sb.throwaway_uid()
    sources = sb._ro_sources(uid)
    fd = sb._filter_fd()
    argv = sb._bwrap_argv(sb._bwrap(), sb.Limits(), config=None, connection=None, info_fd=None,
                          ro=sources, seccomp=fd)

    def enter():
        sb._private_view(sources)
        sb._become(uid)

    code = "import os, sys; sys.stdout.write(str(os.getpid())); sys.stdout.flush(); sys.stdin.read()"
    proc = subprocess.Popen([*argv, sys.executable, "-I", "-c", code], pass_fds=[fd], preexec_fn=enter,
                            cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=sb._kernel_env(Path("/nonexistent"), "bwrap"))
    os.close(fd)
    try:
        assert proc.stdout.read(1)  # the sandboxed Python runs
        seen = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                    status = Path(f"/proc/{entry}/status").read_text()
                except OSError:
                    continue
                if code.encode() in cmd:
                    seen[int(entry)] = [int(x) for x in status.split("Uid:")[1].split()[:4]]
        assert len(seen) >= 2, seen  # bwrap and the Python inside
        assert all(ids == [uid] * 4 for ids in seen.values()), (uid, seen)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
