"""Exact kernel PCA, kpca_lib against scikit-learn, on a quiet machine and on a busy one.

Every fit runs in its own fresh Python process, so that its peak memory
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``: the whole process, interpreter,
imports and data included) is measured separately; the parent process only starts
workers (and ``stress-ng``), compares their outputs and writes the report.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_kernel_pca.py                 # the full grid (~25 min)
    .venv/bin/python benchmarks/bench_kernel_pca.py --baseline 79c6e3d   # and today's code (~30 min)
    .venv/bin/python benchmarks/bench_kernel_pca.py --quick         # a small grid (~2 min)
    .venv/bin/python benchmarks/bench_kernel_pca.py --load quiet    # without stress-ng
    .venv/bin/python benchmarks/bench_kernel_pca.py --sections approx agreement

The report is printed and written to ``benchmarks/kernel_pca_results.md``
(``--out`` to change it; ``--quick`` writes to the temporary folder). Sections:

``exact`` (the default)
    RBF kernel PCA of two moons (``make_moons(n, noise=0.05, random_state=0)``,
    ``kernel="rbf"`` and the same explicit ``gamma`` for both libraries),
    ``fit_transform``, for every ``n`` of ``--sizes`` (default 500, 1000, 2000, 4000,
    8000, 12 000) and ``k`` of ``--components`` (default 2, 10, 50): ours
    (``eigen_solver="auto"``) against
    ``sklearn.decomposition.KernelPCA`` with ``eigen_solver="arpack"``,
    ``"randomized"`` and ``"dense"``. Wall time (min, median, max of ``--repeat``
    runs, all configurations of a point alternating), peak memory, and ours
    against scikit-learn's *best* solver at that point (smallest median time),
    including the spread (max/min) of the repeats. Run twice: on the machine as
    it is ("quiet") and beside ``stress-ng --cpu 4`` ("loaded": four processes that
    keep the CPUs busy), which this script starts and stops itself (``--load``).

    ``--baseline REF`` adds a third contender, "today's code": the same estimator with
    kpca_lib of commit REF, from a detached git worktree of it outside the repository
    (``<tmp>/kpca-baseline-<sha>``, created with ``git worktree add --detach`` on the
    first run and reused afterwards; ``git worktree remove PATH`` removes it). Only that
    worker gets the worktree on its ``PYTHONPATH`` (and as its working directory); every
    worker checks that ``kpca_lib.__file__`` lies under the checkout it should use (this
    repository for ours) and the report lists the files seen. Each point then shows
    ours / scikit-learn's best and ours / today's code, each as the ratio of the medians
    with its best and worst case (our fastest run over the other's slowest, our slowest
    over its fastest). A point is **slower** when the best case is above 1 (every run of
    ours took longer than every run of the other: slower beyond the spread of the
    repeats); the summary gives, per condition and anchor, the worst ratio of the medians
    and the points that are slower.
``approx``
    approximate kernel PCA of ``--approx-n`` points: ours (Nyström, random
    Fourier features) against scikit-learn's ``Nystroem``/``RBFSampler`` + ``PCA``.
``agreement``
    agreement of the approximations with exact kernel PCA on a subsample as ``J`` grows.
``device`` (``--device cuda`` alone selects it)
    exact kernel PCA on an Array API device (``--namespace torch``, the default, or
    ``cupy``; ``array_api_strict`` for a dry run on the CPU) against ours on the CPUs and
    scikit-learn on the CPUs, one machine, one run: n = 12 000, 24 000, 48 000, k = 50,
    float32 and float64, with the subspace agreement of the device and the CPU::

        .venv/bin/python benchmarks/bench_kernel_pca.py --device cuda --out gpu.md
        .venv/bin/python benchmarks/bench_kernel_pca.py --device device1 \\
            --namespace array_api_strict --sizes 1000 2000 --device-components 5

To keep a full run practical on 2 cores, scikit-learn's ``"dense"`` solver (O(n³)
time: minutes at n = 12 000) runs only up to ``--dense-max-n``, and a scikit-learn
solver whose first run took more than ``--rerun-ratio`` times the fastest scikit-learn
solver's first run at the same point is not repeated (it cannot be the best; its single
time is shown). Ours and today's code are always repeated.

How long (2-core build machine, estimated from ``--quick --baseline``, 2.3 min for 55
worker runs, and the per-run times of the 6-point grid, 12.6 min): the default grid is
18 points per condition, about 11–13 fresh workers per point with ``--baseline`` (3 ours,
3 today's code, 3 arpack, 1–3 randomized, 1–3 dense up to n = 4000), each paying about
1.3 s of interpreter, imports and data beside its fit: about 460 workers, ~10 min of
start-up; fits ~5–6 min quiet and ~10–11 min loaded (scikit-learn's arpack and
randomized at n = 8000–12 000, and its dense at n = 2000–4000 beside stress-ng: one run of
7–45 s each). So **about 30 min with ``--baseline``** (about 25 min without it, the
quiet half alone about 12 min), longer when others use the machine.

On Linux with autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``),
CPU time is first shared between sessions: ``stress-ng`` started in a session of its
own (``--stress-session own``, the default, like another user's program) then takes
about one of two CPUs whatever its ``--cpu``; ``--stress-session same`` keeps it in
the benchmark's session, so that its four workers compete with every thread of the
fit (a harder case, and a longer run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "kernel_pca_results.md"
SECTIONS = ("exact", "approx", "agreement", "device")
SK_SOLVERS = ("arpack", "randomized", "dense")
#: Extra environment variables of every worker (``--worker-env``), e.g. OPENBLAS_CORETYPE.
WORKER_ENV: dict[str, str] = {}


# -- worker side --------------------------------------------------------------------


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def _rss_mb() -> float:
    """The process's resident memory now (Linux ``/proc/self/statm``), in MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def _moons(n: int, seed: int = 0) -> np.ndarray:
    from sklearn.datasets import make_moons

    return make_moons(n, noise=0.05, random_state=seed)[0]


def _make_estimator(cfg: dict):
    """The estimator a worker times, from its JSON configuration (always rbf, explicit gamma)."""
    gamma, lib, k = cfg["gamma"], cfg["lib"], cfg["k"]
    params = cfg.get("params", {})
    if lib == "ours" and "method" in params:
        from kpca_lib import ApproximateKernelPCA

        return ApproximateKernelPCA(k, kernel="rbf", gamma=gamma, **params)
    if lib == "ours":
        from kpca_lib import KernelPCA

        return KernelPCA(k, kernel="rbf", gamma=gamma, **params)
    if lib == "sklearn":
        from sklearn.decomposition import KernelPCA

        return KernelPCA(k, kernel="rbf", gamma=gamma, random_state=0, **params)
    if lib in ("sklearn-nystroem", "sklearn-rbfsampler"):
        from sklearn.decomposition import PCA
        from sklearn.kernel_approximation import Nystroem, RBFSampler
        from sklearn.pipeline import make_pipeline

        J = params["n_features"]
        fmap = (
            Nystroem(kernel="rbf", gamma=gamma, n_components=J, random_state=0)
            if lib == "sklearn-nystroem"
            else RBFSampler(gamma=gamma, n_components=J, random_state=0)
        )
        return make_pipeline(fmap, PCA(k))
    raise ValueError(f"unknown lib {lib!r}")


def _to_device(X: np.ndarray, namespace: str, device: str | None):
    """``X`` as an array of ``namespace`` on ``device``; and a function that waits for it."""
    import importlib

    xp = importlib.import_module(namespace)
    if namespace == "torch":
        Xd = xp.as_tensor(X, device=device or "cuda")
        sync = xp.cuda.synchronize if Xd.is_cuda else (lambda: None)
        return Xd, sync
    if namespace == "cupy":
        return xp.asarray(X), (lambda: xp.cuda.Device().synchronize())
    dev = xp.Device(device) if device and hasattr(xp, "Device") else None
    return (xp.asarray(X, device=dev) if dev is not None else xp.asarray(X)), (lambda: None)


def _device_peak_mb(namespace: str) -> float | None:
    if namespace == "torch":
        import torch

        return torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
    if namespace == "cupy":
        import cupy

        return cupy.get_default_memory_pool().total_bytes() / 2**20
    return None


def device_worker(cfg: dict) -> dict:
    """Time ours on an Array API device (``SCIPY_ARRAY_API=1`` is set by the parent)."""
    import importlib

    import sklearn
    from sklearn.utils._array_api import _convert_to_numpy

    from kpca_lib import KernelPCA

    X = _moons(cfg["n"]).astype(cfg["dtype"])
    namespace, device = cfg["namespace"], cfg.get("device")
    xp = importlib.import_module(namespace)
    with sklearn.config_context(array_api_dispatch=True):
        # warm-up on 1000 points: the device's context, libraries and kernels load once
        small, sync = _to_device(X[:1000], namespace, device)
        KernelPCA(min(cfg["k"], 10), kernel="rbf", gamma=cfg["gamma"]).fit(small)
        sync()
        Xd, sync = _to_device(X, namespace, device)
        sync()
        est = KernelPCA(cfg["k"], kernel="rbf", gamma=cfg["gamma"])
        start = time.perf_counter()
        Zd = est.fit_transform(Xd)
        sync()
        seconds = time.perf_counter() - start
        Z = _convert_to_numpy(Zd, xp)
        eigenvalues = _convert_to_numpy(est.eigenvalues_, xp)
    np.save(cfg["z_path"], np.asarray(Z, dtype=np.float64))
    return {
        "seconds": seconds,
        "cpu_seconds": float("nan"),
        "peak_mb": _peak_mb(),
        "device_peak_mb": _device_peak_mb(namespace),
        "fit_mb": float("nan"),
        "eigenvalues": [float(v) for v in eigenvalues],
        "solver": est.eigen_solver_,
        "blas": [],
    }


def worker(cfg: dict) -> dict:
    """Time one ``fit_transform`` in this (fresh) process; save the projection."""
    if cfg.get("namespace"):
        return device_worker(cfg)
    where = _check_kpca_lib(cfg) if cfg["lib"] == "ours" else None
    X = _moons(cfg["n"])
    if cfg.get("dtype"):
        X = X.astype(cfg["dtype"])
    est = _make_estimator(cfg)
    baseline, before = _peak_mb(), _rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    Z = est.fit_transform(X)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = _peak_mb()
    np.save(cfg["z_path"], Z)
    eigenvalues = getattr(est, "eigenvalues_", None)
    if eigenvalues is None and hasattr(est, "steps"):
        eigenvalues = est.steps[-1][1].explained_variance_ * cfg["n"]
    from threadpoolctl import threadpool_info

    return {
        "blas": sorted({f"{i['internal_api']} {i.get('architecture')}" for i in threadpool_info()}),
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_mb": peak,
        "baseline_mb": baseline,
        "fit_mb": peak - before,
        "eigenvalues": [float(v) for v in eigenvalues],
        "solver": getattr(est, "eigen_solver_", None),
        "kpca_lib": where,
    }


def _check_kpca_lib(cfg: dict) -> str:
    """Import ``kpca_lib`` and check that it comes from ``cfg["kpca_root"]``; its file."""
    import kpca_lib

    where = Path(kpca_lib.__file__).resolve()
    root = Path(cfg.get("kpca_root") or ROOT).resolve()
    if not where.is_relative_to(root):
        raise RuntimeError(f"kpca_lib was imported from {where}, not from {root}")
    return str(where)


# -- parent side --------------------------------------------------------------------


def run_worker(cfg: dict, tmp: Path, timeout: float = 3600.0) -> dict:
    """Run :func:`worker` in a fresh interpreter and return its measurements and ``Z``."""
    cfg = dict(cfg, z_path=str(tmp / f"z_{os.getpid()}_{time.monotonic_ns()}.npy"))
    env = {**os.environ, **WORKER_ENV, **({"SCIPY_ARRAY_API": "1"} if cfg.get("namespace") else {})}
    cwd = ROOT
    if cfg.get("kpca_root"):  # another checkout's kpca_lib (--baseline): first on the path
        cwd = Path(cfg["kpca_root"])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(cfg)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {cfg} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["Z"] = np.load(cfg["z_path"])
    os.unlink(cfg["z_path"])
    return result


def agreement(A: np.ndarray, B: np.ndarray) -> float:
    """Smallest cosine of the principal angles between the column spans (1 = same subspace)."""
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    return float(np.linalg.svd(qa.T @ qb, compute_uv=False).min())


def eig_rel_diff(a: list[float], b: list[float]) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b) / np.abs(b)))


def _load() -> str:
    return "(" + ", ".join(f"{v:.2f}" for v in os.getloadavg()) + ")"


def environment() -> list[str]:
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    from kpca_lib._threads import available_cpus, cgroup_cpu_limit

    blas = sorted(
        {
            f"{i['internal_api']} {i['version']} ({i.get('architecture')}, "
            f"{i['num_threads']} threads)"
            for i in threadpool_info()
        }
    )
    env = {
        k: v
        for k, v in {**os.environ, **WORKER_ENV}.items()
        if k.startswith(("OPENBLAS", "OMP_", "MKL_"))
    }
    quota = cgroup_cpu_limit()
    return [
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"affinity {len(os.sched_getaffinity(0))} CPUs, cgroup CPU quota "
        f"{'none' if quota is None else f'{quota:g} CPUs'} → kpca_lib uses {available_cpus()} "
        f"threads; MemTotal {_mem_total_bytes() / 1e9:.1f} GB",
        f"- Python {platform.python_version()}, NumPy {np.__version__}, SciPy {scipy.__version__}, "
        f"scikit-learn {sklearn.__version__}; BLAS (parent process): {'; '.join(blas)}",
        f"- BLAS environment variables of the workers: {env if env else 'none set'}",
    ]


def _mem_total_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


# -- stress-ng ------------------------------------------------------------------------


def _autogroup() -> str:
    try:
        enabled = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    except OSError:
        return "unknown"
    return "on" if enabled == "1" else "off"


@contextlib.contextmanager
def stress(cpus: int, session: str = "own") -> Iterator[subprocess.Popen]:
    """``stress-ng --cpu CPUS`` running for the duration of the block.

    ``session="own"``: in a session of its own, like a program started from another
    terminal or by another user; with the kernel's autogroup scheduling
    (``/proc/sys/kernel/sched_autogroup_enabled``) its workers then share one CPU
    share, and the benchmark's workers the other. ``"same"``: in this session (its own
    process group), so that every stress-ng worker competes with every benchmark
    thread (the harder case, as ``stress-ng &`` in the benchmark's shell).
    """
    exe = shutil.which("stress-ng")
    if exe is None:
        raise FileNotFoundError("stress-ng")
    group = {"start_new_session": True} if session == "own" else {"preexec_fn": os.setpgrp}
    proc = subprocess.Popen(
        [exe, "--cpu", str(cpus), "--timeout", "3h", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **group,  # its own process group: its workers are stopped together
    )
    try:
        time.sleep(3.0)  # let the workers start and the load settle
        if proc.poll() is not None:
            raise RuntimeError(f"stress-ng exited at once (status {proc.returncode})")
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# -- the baseline: another commit's kpca_lib --------------------------------------------


def _git(*argv: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *argv], capture_output=True, text=True, check=True
    ).stdout.strip()


def baseline_worktree(ref: str) -> dict:
    """A detached git worktree of ``ref`` outside the repository, created once and reused.

    ``<tmp>/kpca-baseline-<sha>`` (``$KPCA_BASELINE_DIR`` instead of the temporary folder
    if set). It is left in place for the next run (``git worktree remove PATH`` removes
    it). Returns ``{"sha", "short", "path", "subject"}``.
    """
    try:
        sha = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"--baseline {ref}: not a commit of {ROOT}") from None
    short = _git("rev-parse", "--short", sha)
    parent = Path(os.environ.get("KPCA_BASELINE_DIR") or tempfile.gettempdir())
    path = (parent / f"kpca-baseline-{sha[:12]}").resolve()
    if path.is_relative_to(ROOT):
        raise SystemExit(f"the baseline's worktree {path} must lie outside the repository")
    if path.exists():
        head = _git("rev-parse", "HEAD", cwd=path) if (path / ".git").exists() else ""
        if head != sha or not (path / "kpca_lib" / "__init__.py").is_file():
            raise SystemExit(f"{path} exists but is not a worktree of {sha}: remove it")
        print(f"baseline: reusing the worktree {path} ({short})", flush=True)
    else:
        # -f: the folder may be gone (a cleaned /tmp) while git still lists the worktree
        _git("worktree", "add", "-f", "--detach", str(path), sha)
        print(f"baseline: created the worktree {path} ({short})", flush=True)
        # compile it now, not in the first timed fit (lazy imports inside fit)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(path / "kpca_lib")], check=False
        )
    if _git("status", "--porcelain", "--untracked-files=no", cwd=path):
        raise SystemExit(f"the baseline's worktree {path} has local changes: remove it")
    subject = _git("log", "-1", "--format=%cd %s", "--date=format:%Y-%m-%d %H:%M", sha, cwd=path)
    subject = subject if len(subject) <= 90 else subject[:89] + "…"
    return {"sha": sha, "short": short, "path": str(path), "subject": subject}


# -- section: exact --------------------------------------------------------------------


OURS, BASE = "ours", "baseline"
#: Where each contender's workers imported kpca_lib from (``kpca_lib.__file__``).
IMPORTED: dict[str, set[str]] = {}


def _configs(n: int, k: int, args: argparse.Namespace) -> dict[str, dict]:
    base = {"n": n, "k": k, "gamma": args.gamma}
    cfgs = {OURS: dict(base, lib="ours", params={})}
    if args.baseline_info:  # the same estimator, kpca_lib from the baseline's worktree
        cfgs[BASE] = dict(base, lib="ours", params={}, kpca_root=args.baseline_info["path"])
    for solver in args.solvers:
        if solver == "dense" and n > args.dense_max_n:
            continue
        cfgs[f"sklearn {solver}"] = dict(base, lib="sklearn", params={"eigen_solver": solver})
    return cfgs


def measure_point(n: int, k: int, args: argparse.Namespace, tmp: Path) -> dict[str, list[dict]]:
    """Every configuration of one (n, k), ``--repeat`` times, alternating."""
    cfgs = _configs(n, k, args)
    runs: dict[str, list[dict]] = {name: [] for name in cfgs}
    for rep in range(args.repeat):
        for name, cfg in cfgs.items():
            if rep and name.startswith("sklearn"):
                firsts = [rs[0]["seconds"] for nm, rs in runs.items() if nm.startswith("sklearn")]
                if runs[name][0]["seconds"] > args.rerun_ratio * min(firsts):
                    continue  # far slower than scikit-learn's fastest: cannot be the best
            r = run_worker(cfg, tmp)
            runs[name].append(r)
            if r.get("kpca_lib"):
                IMPORTED.setdefault(_label(name, args), set()).add(r["kpca_lib"])
            print(
                f"  n={n} k={k} {_label(name, args):<20} run {rep + 1}: {r['seconds']:7.2f} s "
                f"(CPU {r['cpu_seconds']:6.2f} s), {r['peak_mb']:6.0f} MiB, load {_load()}",
                flush=True,
            )
    return runs


def _stats(rs: list[dict]) -> dict:
    t = np.array([r["seconds"] for r in rs])
    return {
        "min": float(t.min()),
        "median": float(np.median(t)),
        "max": float(t.max()),
        "spread": float(t.max() / t.min()),
        "cpu": float(np.median([r["cpu_seconds"] for r in rs])),
        "peak": float(max(r["peak_mb"] for r in rs)),
        "fit": float(max(r["fit_mb"] for r in rs)),
        "runs": len(rs),
    }


def _label(name: str, args: argparse.Namespace) -> str:
    return f"today {args.baseline_info['short']}" if name == BASE else name


def _ratio(a: dict, b: dict) -> dict:
    """``a``'s time over ``b``'s: of the medians, best case (a's fastest over b's slowest)
    and worst case (a's slowest over b's fastest). Slower beyond the spread: best > 1,
    i.e. every run of ``a`` took longer than every run of ``b``."""
    return {
        "median": a["median"] / b["median"],
        "best": a["min"] / b["max"],
        "worst": a["max"] / b["min"],
    }


def _ratio_cell(r: dict) -> str:
    flag = " **slower**" if r["best"] > 1 else ""
    return f"{r['median']:.2f} ({r['best']:.2f}–{r['worst']:.2f}){flag}"


def _anchor_summary(anchor: str, ratios: list[tuple[int, int, dict]]) -> str:
    """Worst ratio against one anchor over the grid, and how many points are slower."""
    n, k, worst = max(ratios, key=lambda t: t[2]["median"])
    above = sum(r["median"] > 1 for _, _, r in ratios)
    slower = [(nn, kk) for nn, kk, r in ratios if r["best"] > 1]
    where = "; ".join(f"n = {nn}, k = {kk}" for nn, kk in slower)
    verdict = f"**at {len(slower)} points** ({where})" if slower else "**at no point**"
    return (
        f"against {anchor}: worst ratio of the medians {worst['median']:.2f} at n = {n}, "
        f"k = {k} (best–worst case {worst['best']:.2f}–{worst['worst']:.2f}); ratio of the "
        f"medians above 1 at {above} of {len(ratios)} points; slower beyond the spread "
        f"(every run of ours slower than every run of it) {verdict}"
    )


def _t(seconds: float) -> str:
    """A time with 3 decimals below 0.1 s (the small sizes), else 2."""
    return f"{seconds:.3f}" if seconds < 0.1 else f"{seconds:.2f}"


def _cell(s: dict | None) -> str:
    if s is None:
        return "–"
    if s["runs"] == 1:
        return f"{_t(s['median'])} s (1 run), {s['peak']:.0f} MiB"
    return (
        f"{_t(s['median'])} s ({_t(s['min'])}–{_t(s['max'])}, ×{s['spread']:.2f}), "
        f"{s['peak']:.0f} MiB"
    )


def exact_condition(
    args: argparse.Namespace, tmp: Path, lines: list[str], title: str, summary: list[str]
) -> None:
    """The whole grid under the current conditions: one table."""
    base = args.baseline_info
    head = ["n", "k", "ours"]
    head += [f"today's code ({base['short']})"] if base else []
    head += [f"scikit-learn {s}" for s in args.solvers]
    head += ["best scikit-learn", "time ours / best"]
    head += [f"time ours / {base['short']}"] if base else []
    head += ["memory ours / best", "fit memory ours / best"]
    head += ["spread ours / best", "max − min ours / best", "CPU s ours / best"]
    tail = [f"solver ours / {base['short']}", f"eig. diff best / {base['short']}"] if base else []
    head += tail or ["solver ours", "eig. diff"]
    lines += [f"### {title}", "", f"Load average (1, 5, 15 min) at start: {_load()}.", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---:|" * 2 + "---|" * (len(head) - 2)]
    wins = steadier = tighter = points = 0
    vs_best: list[tuple[int, int, dict]] = []
    vs_base: list[tuple[int, int, dict]] = []
    for n in args.sizes:
        for k in args.components:
            runs = measure_point(n, k, args, tmp)
            stats = {name: _stats(rs) for name, rs in runs.items()}
            ours = stats[OURS]
            sk_all = {name: s for name, s in stats.items() if name.startswith("sklearn")}
            sk = {name: s for name, s in sk_all.items() if s["runs"] > 1} or sk_all
            best = min(sk, key=lambda name: sk[name]["median"])
            b = stats[best]
            eig = eig_rel_diff(runs[OURS][0]["eigenvalues"], runs[best][0]["eigenvalues"])
            points += 1
            wins += ours["median"] <= b["median"]
            steadier += ours["spread"] <= b["spread"]
            tighter += ours["max"] - ours["min"] <= b["max"] - b["min"]
            vs_best.append((n, k, _ratio(ours, b)))
            cells = [str(n), str(k), _cell(ours)]
            cells += [_cell(stats[BASE])] if base else []
            cells += [_cell(stats.get(f"sklearn {s}")) for s in args.solvers]
            cells += [best.removeprefix("sklearn "), _ratio_cell(vs_best[-1][2])]
            if base:
                vs_base.append((n, k, _ratio(ours, stats[BASE])))
                cells.append(_ratio_cell(vs_base[-1][2]))
            cells += [
                f"{ours['peak'] / b['peak']:.2f}",
                f"{ours['fit'] / b['fit']:.2f} ({ours['fit']:.0f} / {b['fit']:.0f} MiB)",
                f"×{ours['spread']:.2f} / ×{b['spread']:.2f}",
                f"{ours['max'] - ours['min']:.2f} s / {b['max'] - b['min']:.2f} s",
                f"{ours['cpu']:.2f} / {b['cpu']:.2f}",
            ]
            if base:
                eig_base = eig_rel_diff(runs[OURS][0]["eigenvalues"], runs[BASE][0]["eigenvalues"])
                cells += [
                    f"{runs[OURS][0]['solver']} / {runs[BASE][0]['solver']}",
                    f"{eig:.0e} / {eig_base:.0e}",
                ]
            else:
                cells += [str(runs[OURS][0]["solver"]), f"{eig:.0e}"]
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    lines += ["", f"Load average at end: {_load()}.", ""]
    summary.append(
        f"- {title}: ours no slower than scikit-learn's best solver (median time) at "
        f"{wins} of {points} points; spread of the repeats no larger than that solver's at "
        f"{steadier} of {points} points as a ratio (max/min) and at {tighter} of {points} "
        "in seconds (max − min)."
    )
    summary.append("  - " + _anchor_summary("scikit-learn's best solver", vs_best) + ".")
    if base:
        summary.append("  - " + _anchor_summary(f"today's code ({base['short']})", vs_base) + ".")


def exact_section(args: argparse.Namespace, tmp: Path, lines: list[str]) -> None:
    lines += [
        "## Exact kernel PCA: ours vs scikit-learn, quiet and beside `stress-ng`",
        "",
        "RBF kernel PCA of two moons (`make_moons(n, noise=0.05, random_state=0)`), "
        f'`kernel="rbf", gamma={args.gamma:g}` for both libraries, `fit_transform`. Ours: '
        '`KernelPCA(k, kernel="rbf", gamma=...)` (`eigen_solver="auto"`; *solver*: the one '
        "it used, `eigen_solver_`), kpca_lib of this checkout; "
        + (
            f"*today's code ({args.baseline_info['short']})*: the same estimator, kpca_lib of "
            f"commit {args.baseline_info['sha']} ({args.baseline_info['subject']}), "
            "imported from a git worktree of that commit (`--baseline`; the worker checks "
            "`kpca_lib.__file__`), everything else (Python, NumPy, SciPy, this script) the "
            "same; "
            if args.baseline_info
            else ""
        )
        + 'scikit-learn: `KernelPCA(k, kernel="rbf", gamma=..., '
        "eigen_solver=...)` with each of "
        + ", ".join(f'`"{s}"`' for s in args.solvers)
        + f' (`"dense"` only up to n = {args.dense_max_n}: O(n³) time). '
        f"Cells: median wall time of {args.repeat} runs (min–max, and the spread max/min), "
        "and the peak RSS of the worker process (interpreter, imports and data included); "
        "*fit memory*: that peak minus the process's RSS just before `fit_transform` (what "
        "the fit itself adds, without the interpreter and imports both libraries share); "
        "each run in a fresh process, all configurations of a point alternating. "
        f"A scikit-learn solver whose first run took more than {args.rerun_ratio:g}× the "
        "fastest one's is not repeated (1 run). *Best scikit-learn*: smallest median among "
        "the repeated solvers. *time ours / best*"
        + (f" and *time ours / {args.baseline_info['short']}*" if args.baseline_info else "")
        + ": ratio of the medians (best case: our fastest run over its slowest – worst case: "
        "our slowest run over its fastest); **slower** marks a point where ours is slower "
        "beyond the spread of the repeats (best case above 1: every run of ours took longer "
        "than every run of the other). *CPU s*: median CPU time of the process (all threads). "
        "*max − min*: the spread in seconds (a run of 0.2 s that a busy machine delays by "
        "0.1 s has a ratio of ×1.5; one of 5 s delayed by the same 0.1 s, ×1.02). "
        "*eig. diff*: largest relative difference of our eigenvalues from the best solver's"
        + (" (and from today's code's)" if args.baseline_info else "")
        + ".",
        "",
    ]
    summary: list[str] = []
    if args.load in ("both", "quiet"):
        exact_condition(args, tmp, lines, "Quiet (the machine as it is)", summary)
    if args.load in ("both", "stress"):
        where = "its own session" if args.stress_session == "own" else "the benchmark's session"
        title = (
            f"Loaded: beside `stress-ng --cpu {args.stress_cpus}` (started in {where}; "
            f"autogroup scheduling {_autogroup()})"
        )
        try:
            with stress(args.stress_cpus, args.stress_session):
                exact_condition(args, tmp, lines, title, summary)
        except FileNotFoundError:
            msg = (
                f"**stress-ng is not installed: the loaded half (beside `stress-ng --cpu "
                f"{args.stress_cpus}`) was not run.** Install it (e.g. `apt-get install "
                "stress-ng`) and run again."
            )
            print("\n" + msg.replace("**", "") + "\n", file=sys.stderr, flush=True)
            lines += [f"### {title}", "", msg, ""]
            summary.append(f"- {title}: not run, stress-ng is missing.")
    seen = "; ".join(f"{name}: {', '.join(sorted(files))}" for name, files in IMPORTED.items())
    lines += ["Summary:", "", *summary, "", f"`kpca_lib.__file__` in the workers: {seen}.", ""]


# -- section: device ----------------------------------------------------------------------


def device_section(args: argparse.Namespace, tmp: Path, lines: list[str]) -> None:
    """Ours on the device, ours on the CPUs, scikit-learn on the CPUs: one table, one machine."""
    k = args.device_components
    where = f"`{args.namespace}`" + (f" on `{args.device}`" if args.device else "")
    lines += [
        f"## Exact kernel PCA on a device: {where}",
        "",
        f"RBF kernel PCA of two moons, `fit_transform`, k = {k}, `gamma = {args.gamma:g}`. "
        "*ours, device*: `KernelPCA(k, kernel=\"rbf\", gamma=...)` with scikit-learn's "
        "`array_api_dispatch` on and X on the device (block subspace iteration, verified on "
        "the device), timed after a warm-up fit on 1000 points and up to the device's "
        "synchronisation, the transfer of X excluded; *ours, CPU*: the same on NumPy X of the "
        "same dtype; *scikit-learn*: the faster of its `arpack` and `randomized` on NumPy X "
        f"(float64 rows only). Median of {args.repeat} runs (min–max). *agreement*: smallest "
        "cosine of the principal angles between the device's and the CPU's projections "
        "(1 = same subspace); *eig. diff*: largest relative difference of the eigenvalues.",
        "",
        "| n | dtype | ours, device | device peak | ours, CPU | scikit-learn (CPU) | device / CPU "
        "| device / scikit-learn | agreement | eig. diff |",
        "|---:|---|---|---|---|---|---|---|---|---|",
    ]
    for n in args.sizes:
        for dtype in args.dtypes:
            base = {"n": n, "k": k, "gamma": args.gamma, "dtype": dtype}
            cfgs = {
                "device": dict(base, lib="ours", namespace=args.namespace, device=args.device),
                "cpu": dict(base, lib="ours", params={}),
            }
            if not args.no_sklearn and dtype == "float64":
                for solver in ("arpack", "randomized"):
                    cfgs[solver] = dict(base, lib="sklearn", params={"eigen_solver": solver})
            runs: dict[str, list[dict]] = {name: [] for name in cfgs}
            for _ in range(args.repeat):
                for name, cfg in cfgs.items():
                    runs[name].append(run_worker(cfg, tmp))
            st = {name: _stats(rs) for name, rs in runs.items()}
            sk = [name for name in ("arpack", "randomized") if name in st]
            best = min(sk, key=lambda nm: st[nm]["median"]) if sk else None
            dev, cpu = st["device"], st["cpu"]
            peak = runs["device"][0].get("device_peak_mb")
            cells = [
                str(n), dtype,
                f"{dev['median']:.3f} s ({dev['min']:.3f}–{dev['max']:.3f})",
                "–" if peak is None else f"{peak:.0f} MiB",
                f"{cpu['median']:.2f} s",
                "–" if best is None else f"{st[best]['median']:.2f} s ({best})",
                f"{dev['median'] / cpu['median']:.3f}",
                "–" if best is None else f"{dev['median'] / st[best]['median']:.3f}",
                f"{agreement(runs['device'][0]['Z'], runs['cpu'][0]['Z']):.12f}",
                f"{eig_rel_diff(runs['device'][0]['eigenvalues'], runs['cpu'][0]['eigenvalues']):.0e}",
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    lines.append("")


# -- sections: approximations ---------------------------------------------------------


def approx_section(args: argparse.Namespace, tmp: Path, lines: list[str]) -> dict:
    n, J, k = args.approx_n, args.approx_J, args.components[0]
    lines += [
        f"## Approximate kernel PCA of n = {n:,} points, J = {J}",
        "",
        f"Same data, `gamma = {args.gamma:g}`, {k} components, `fit_transform`, one run each. "
        "scikit-learn: `make_pipeline(Nystroem(n_components=J) or RBFSampler(n_components=J), "
        "PCA(k))`, which materialises the n×J features.",
        "",
        "| method | time | peak memory | top eigenvalues / n |",
        "|---|---|---|---|",
    ]
    base = {"gamma": args.gamma, "k": k, "n": n}
    approx = {"n_features": J, "random_state": 0}
    results = {}
    for name, cfg in (
        ("ours, Nyström", dict(base, lib="ours", params={"method": "nystroem", **approx})),
        ("ours, random Fourier features", dict(base, lib="ours", params={"method": "rff", **approx})),
        ("scikit-learn Nystroem + PCA", dict(base, lib="sklearn-nystroem", params={"n_features": J})),
        ("scikit-learn RBFSampler + PCA", dict(base, lib="sklearn-rbfsampler", params={"n_features": J})),
    ):  # fmt: skip
        r = run_worker(cfg, tmp)
        results[name] = r
        eig = ", ".join(f"{v / n:.5f}" for v in r["eigenvalues"])
        lines.append(f"| {name} | {r['seconds']:.1f} s | {r['peak_mb']:.0f} MiB | {eig} |")
        print(lines[-1], flush=True)
    lines.append("")
    return results


def agreement_section(args: argparse.Namespace, big: dict, lines: list[str]) -> None:
    from kpca_lib import ApproximateKernelPCA, KernelPCA

    m, k, gamma = args.agreement_n, args.components[0], args.gamma
    X = _moons(m, seed=1)
    exact = KernelPCA(k + 1, kernel="rbf", gamma=gamma).fit(X)
    K_c = exact.kernel_matrix_c()
    lam = exact.eigenvalues_
    Z_exact = exact.transform(X)[:, :k]
    lines += [
        f"## Agreement with exact kernel PCA as J grows (subsample of n = {m})",
        "",
        f"Both fitted on the same {m} points (`make_moons(..., random_state=1)`), "
        f"{k} components, `gamma = {gamma:g}`; mean over {args.seeds} seeds. Exact eigenvalues / n: "
        f"{', '.join(f'{v / m:.5f}' for v in lam)} (the next one is shown because a small gap "
        f"λ_{k} − λ_{k + 1} makes the {k}-dimensional subspace itself sensitive). Columns: "
        "largest relative eigenvalue error; subspace agreement (smallest cosine of the "
        "principal angles, 1 = same); captured variance tr(QᵀK_cQ)/Σλ with Q an orthonormal "
        "basis of the approximate projections (1 = as good as exact, insensitive to "
        "near-equal eigenvalues); kernel error ‖Φ_cΦ_cᵀ − K_c‖_F/‖K_c‖_F (centred, as PCA "
        "sees it).",
        "",
        "| J | Nyström: eig. error | agreement | captured | kernel error "
        "| RFF: eig. error | agreement | captured | kernel error |",
        "|---:|---|---|---|---|---|---|---|---|",
    ]
    for J in args.agreement_J:
        cells = []
        for method in ("nystroem", "rff"):
            if method == "nystroem" and J > m:
                cells.append("– | – | – | –")
                continue
            stats = []
            for seed in range(args.seeds):
                kp = ApproximateKernelPCA(
                    k, kernel="rbf", gamma=gamma, method=method, n_features=J,
                    random_state=seed,
                )  # fmt: skip
                Z = kp.fit_transform(X)
                Phi = kp.feature_map_.transform(X)
                Phi -= kp.feature_mean_
                Q, _ = np.linalg.qr(Z)
                stats.append(
                    (
                        eig_rel_diff(kp.eigenvalues_, lam[:k]),
                        agreement(Z, Z_exact),
                        float(np.trace(Q.T @ K_c @ Q) / lam[:k].sum()),
                        float(np.linalg.norm(Phi @ Phi.T - K_c) / np.linalg.norm(K_c)),
                    )
                )
            s = np.mean(stats, axis=0)
            cells.append(f"{s[0]:.1e} | {s[1]:.6f} | {s[2]:.6f} | {s[3]:.1e}")
        lines.append(f"| {J} | {cells[0]} | {cells[1]} |")
        print(lines[-1], flush=True)
    lines.append("")
    if big:
        lines += [
            f"The models of the previous section (fitted on all {args.approx_n:,} points) "
            "projecting this subsample, against exact kernel PCA of the subsample (the two "
            "estimate the same population components from different samples):",
            "",
        ]
        for name, method in (
            ("ours, Nyström", "nystroem"),
            ("ours, random Fourier features", "rff"),
        ):
            kp = ApproximateKernelPCA(
                k, kernel="rbf", gamma=gamma, method=method, n_features=args.approx_J,
                random_state=0,
            ).fit(_moons(args.approx_n))  # fmt: skip
            Z = kp.transform(X)
            Q, _ = np.linalg.qr(Z)
            lines.append(
                f"- {name}: agreement {agreement(Z, Z_exact):.6f}, captured variance "
                f"{np.trace(Q.T @ K_c @ Q) / lam[:k].sum():.6f}"
            )
        lines.append("")


# -- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=["exact"])
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=None,
        help="n (default 500 1000 2000 4000 8000 12000; the device section: 12000 24000 48000)",
    )
    p.add_argument("--components", type=int, nargs="+", default=[2, 10, 50])
    p.add_argument(
        "--baseline",
        metavar="REF",
        default=None,
        help="exact section: also time kpca_lib of this commit (a git worktree outside the "
        "repository, created once and reused), as \"today's code\"",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs of every configuration")
    p.add_argument("--gamma", type=float, default=0.5, help="RBF gamma of both libraries")
    p.add_argument(
        "--load",
        choices=("both", "quiet", "stress"),
        default="both",
        help="quiet, beside stress-ng, or both (default)",
    )
    p.add_argument("--stress-cpus", type=int, default=4, help="stress-ng --cpu N")
    p.add_argument(
        "--stress-session",
        choices=("own", "same"),
        default="own",
        help="stress-ng in a session of its own (another program), or in this one (harder)",
    )
    p.add_argument("--solvers", nargs="+", choices=SK_SOLVERS, default=list(SK_SOLVERS))
    p.add_argument(
        "--dense-max-n",
        type=int,
        default=4000,
        help="largest n for scikit-learn's O(n³) dense solver",
    )
    p.add_argument(
        "--rerun-ratio",
        type=float,
        default=3.0,
        help="do not repeat a scikit-learn solver this many times slower than its fastest",
    )
    p.add_argument(
        "--device",
        default=None,
        help="the device section's device (torch: 'cuda', the default; array_api_strict: "
        "'device1'); --device alone means --sections device",
    )
    p.add_argument(
        "--namespace",
        default="torch",
        choices=("torch", "cupy", "array_api_strict"),
        help="the device section's Array API library (array_api_strict: a dry run on the CPU)",
    )
    p.add_argument("--device-components", type=int, default=50)
    p.add_argument(
        "--dtypes", nargs="+", choices=("float32", "float64"), default=["float32", "float64"]
    )
    p.add_argument(
        "--no-sklearn",
        action="store_true",
        help="device section: skip scikit-learn (it needs two to three n×n float64 matrices)",
    )
    p.add_argument("--approx-n", type=int, default=1_000_000)
    p.add_argument("--approx-J", type=int, default=500)
    p.add_argument("--agreement-n", type=int, default=4000)
    p.add_argument(
        "--agreement-J", type=int, nargs="+", default=[10, 20, 50, 100, 200, 500, 1000, 2000]
    )
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument(
        "--quick",
        action="store_true",
        help="small grid (n = 2000; k = 2, 10), 3 runs each; report to the temporary folder",
    )
    p.add_argument(
        "--worker-env",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="environment variables for every worker, e.g. OPENBLAS_CORETYPE=Haswell",
    )
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.device is not None and args.sections == ["exact"]:
        args.sections = ["device"]
    if args.sizes is None:
        args.sizes = (
            [12000, 24000, 48000]
            if args.sections == ["device"]
            else [500, 1000, 2000, 4000, 8000, 12000]
        )
    if args.quick:
        args.sizes, args.components, args.dense_max_n = [2000], [2, 10], 2000
        args.approx_n, args.approx_J = 20_000, 100
        args.agreement_n, args.agreement_J, args.seeds = 500, [10, 50], 1
    if "exact" in args.sections and args.load in ("both", "stress") and shutil.which("stress-ng") is None:
        print(
            "stress-ng is not installed: the loaded half of the benchmark cannot run "
            "(install it, e.g. `apt-get install stress-ng`, or pass --load quiet).",
            file=sys.stderr,
            flush=True,
        )
        if args.load == "stress":
            sys.exit(2)
    default = Path(tempfile.gettempdir()) / "kernel_pca_quick.md" if args.quick else DEFAULT_OUT
    out = args.out or default
    WORKER_ENV.update(kv.split("=", 1) for kv in args.worker_env)
    args.baseline_info = None
    if args.baseline:
        if "exact" not in args.sections:
            p.error("--baseline applies to the exact section only")
        args.baseline_info = baseline_worktree(args.baseline)

    command = " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        "# Kernel PCA benchmark: kpca_lib vs scikit-learn",
        "",
        f"Generated by `benchmarks/bench_kernel_pca.py {command}` on "
        f"{time.strftime('%Y-%m-%d %H:%M')} (took {{minutes}} min).",
        "",
        *environment(),
        *(
            [
                f"- today's code: commit {args.baseline_info['sha']} "
                f"({args.baseline_info['subject']}), from the worktree "
                f"`{args.baseline_info['path']}`"
            ]
            if args.baseline_info
            else []
        ),
        "",
    ]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "exact" in args.sections:
            exact_section(args, tmp, lines)
        if "device" in args.sections:
            device_section(args, tmp, lines)
        big = approx_section(args, tmp, lines) if "approx" in args.sections else {}
        if "agreement" in args.sections:
            agreement_section(args, big, lines)
    lines[2] = lines[2].replace("{minutes}", f"{(time.monotonic() - started) / 60:.1f}")
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
