"""Kernel PCA at scale: kpca_lib against scikit-learn, side by side, in one run.

Every fit runs in its own fresh Python process, so that its peak memory
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``: the whole process, interpreter
and imports included) is measured separately; the parent process only starts
workers, compares their outputs and writes the report.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_kernel_pca.py                 # the full report (~15 min)
    .venv/bin/python benchmarks/bench_kernel_pca.py --quick         # smoke test, small sizes
    .venv/bin/python benchmarks/bench_kernel_pca.py --largest 60000:float64 85000:float32

The report is printed and written to ``benchmarks/kernel_pca_results.md``
(``--out`` to change it). Sections:

1. exact kernel PCA, ours (float64 and float32 kernel) vs ``sklearn.decomposition.KernelPCA``
   (``eigen_solver="auto"``), over ``n``: median wall time of ``fit_transform``, peak
   memory, and agreement of the projections (smallest cosine of the principal angles
   between the two column spans) and of the eigenvalues, and the cost of verifying our
   eigenpairs (time, matrix–vector products);
2. the largest ``n`` that fits in this machine's memory: a fit of peak memory
   against ``n²`` extrapolated to ``MemTotal``, plus real runs (``--largest``);
3. approximate kernel PCA of ``--approx-n`` points with ``J`` features: ours
   (Nyström, random Fourier features) vs scikit-learn's ``Nystroem``/``RBFSampler``
   followed by ``PCA``;
4. agreement of the approximations with exact kernel PCA on a subsample as ``J`` grows.

The machine may be shared: times are medians of ``--repeat`` runs, ours and
scikit-learn's alternating, and the load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "kernel_pca_results.md"
SECTIONS = ("exact", "largest", "approx", "agreement")
#: Extra environment variables of every worker (``--worker-env``), e.g. OPENBLAS_CORETYPE.
WORKER_ENV: dict[str, str] = {}


# -- worker side --------------------------------------------------------------------


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def _moons(n: int, seed: int = 0) -> np.ndarray:
    from sklearn.datasets import make_moons

    return make_moons(n, noise=0.05, random_state=seed)[0]


def _make_estimator(cfg: dict):
    """The estimator a worker times, from its JSON configuration."""
    gamma = 1.0 / (2.0 * cfg["sigma"] ** 2)
    lib, k = cfg["lib"], cfg["k"]
    if lib == "ours":
        from kpca_lib import KernelPCA

        return KernelPCA(k, kernel="rbf", sigma=cfg["sigma"], **cfg.get("params", {}))
    if lib == "sklearn":
        from sklearn.decomposition import KernelPCA

        return KernelPCA(k, kernel="rbf", gamma=gamma, **cfg.get("params", {}))
    if lib in ("sklearn-nystroem", "sklearn-rbfsampler"):
        from sklearn.decomposition import PCA
        from sklearn.kernel_approximation import Nystroem, RBFSampler
        from sklearn.pipeline import make_pipeline

        J = cfg["params"]["n_features"]
        fmap = (
            Nystroem(kernel="rbf", gamma=gamma, n_components=J, random_state=0)
            if lib == "sklearn-nystroem"
            else RBFSampler(gamma=gamma, n_components=J, random_state=0)
        )
        return make_pipeline(fmap, PCA(k))
    raise ValueError(f"unknown lib {lib!r}")


def worker(cfg: dict) -> dict:
    """Time one ``fit_transform`` in this (fresh) process; save the projection."""
    X = _moons(cfg["n"])
    est = _make_estimator(cfg)
    baseline = _peak_mb()
    with _solver_reports(cfg["lib"]) as reports:
        start = time.perf_counter()
        Z = est.fit_transform(X)
        seconds = time.perf_counter() - start
    peak = _peak_mb()
    np.save(cfg["z_path"], Z)
    eigenvalues = getattr(est, "eigenvalues_", None)
    if eigenvalues is None and hasattr(est, "steps"):
        eigenvalues = est.steps[-1][1].explained_variance_ * cfg["n"]
    from threadpoolctl import threadpool_info

    return {
        "blas": sorted({f"{i['internal_api']} {i.get('architecture')}" for i in threadpool_info()}),
        "seconds": seconds,
        "peak_mb": peak,
        "baseline_mb": baseline,
        "eigenvalues": [float(v) for v in eigenvalues],
        "solver": getattr(est, "eigen_solver_", None),
        "verify": _verification_summary(reports),
    }


def _solver_reports(lib: str):
    """Record kpca_lib's eigensolver reports (attempts, verification cost) during a fit."""
    import contextlib

    if lib != "ours":
        return contextlib.nullcontext([])
    from kpca_lib._eigen import record_solver_reports

    return record_solver_reports()


def _verification_summary(reports: list) -> dict | None:
    """Time and matrix–vector products spent verifying eigenpairs, against solving them."""
    if not reports:
        return None
    return {
        "seconds": sum(r.verify_seconds for r in reports),
        "products": sum(r.verify_products for r in reports),
        "solve_seconds": sum(r.seconds for r in reports) - sum(r.verify_seconds for r in reports),
        "solve_products": sum(r.solve_products for r in reports),
        "attempts": [a.describe() for r in reports for a in r.attempts],
    }


# -- parent side --------------------------------------------------------------------


def run_worker(cfg: dict, tmp: Path, timeout: float = 3600.0) -> dict:
    """Run :func:`worker` in a fresh interpreter and return its measurements and ``Z``."""
    cfg = dict(cfg, z_path=str(tmp / f"z_{os.getpid()}_{time.monotonic_ns()}.npy"))
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(cfg)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **WORKER_ENV},
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


def median_runs(cfgs: list[dict], repeat: int, tmp: Path) -> list[dict]:
    """Run every configuration ``repeat`` times, interleaved; keep the median time."""
    runs: list[list[dict]] = [[] for _ in cfgs]
    for _ in range(repeat):
        for i, cfg in enumerate(cfgs):
            runs[i].append(run_worker(cfg, tmp))
    out = []
    for rs in runs:
        rs.sort(key=lambda r: r["seconds"])
        best = dict(rs[len(rs) // 2])
        best["all_seconds"] = [r["seconds"] for r in rs]
        best["peak_mb"] = max(r["peak_mb"] for r in rs)
        out.append(best)
    return out


def environment() -> list[str]:
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    blas = sorted({f"{i['internal_api']} {i['version']} ({i.get('architecture')}, "
                   f"{i['num_threads']} threads)" for i in threadpool_info()})
    env = {k: v for k, v in {**os.environ, **WORKER_ENV}.items()
           if k.startswith(("OPENBLAS", "OMP_", "MKL_"))}
    mem = _mem_total_bytes()
    return [
        f"- machine: {platform.processor() or platform.machine()}, "
        f"{len(os.sched_getaffinity(0))} cores, MemTotal {mem / 1e9:.1f} GB",
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


def exact_section(args: argparse.Namespace, tmp: Path, lines: list[str]) -> list[dict]:
    lines += [
        "## 1. Exact kernel PCA: ours vs scikit-learn",
        "",
        "RBF kernel PCA of two moons (`make_moons(n, noise=0.05, random_state=0)`), "
        f"{args.components} components, `fit_transform`, default solvers (`eigen_solver=\"auto\"`; "
        "ours picks `\"lanczos\"`, scikit-learn `\"arpack\"`). "
        f"Time: median of {args.repeat} runs (all runs in brackets); memory: peak RSS of the "
        "worker process (interpreter, imports and data included). Agreement: smallest cosine "
        "of the principal angles between our and scikit-learn's projections; "
        "eig. diff: largest relative difference of the eigenvalues; verification: time our "
        "eigensolver spent verifying its eigenpairs (residuals, orthonormality, deflation check "
        "for missed eigenvalues; included in the time) and the matrix–vector products it used, "
        "of all the products of the eigensolver.",
        "",
    ]
    rows = []
    for i, sigma in enumerate(args.sigma):
        note = " (scikit-learn's default `gamma = 1/n_features` for 2-D data)" if sigma == 1.0 else ""
        lines += [
            f"### σ = {sigma}: scikit-learn `gamma = {1 / (2 * sigma**2):g}`{note}",
            "",
        ]
        table = exact_table(args, sigma, tmp, lines)
        if i == 0:
            rows = table
    seen = sorted({b for r in rows for key in ("sk", "o64", "o32") for b in r[key]["blas"]})
    lines += [f"BLAS kernels used by the workers: {', '.join(seen)}.", ""]
    return rows


def exact_table(args: argparse.Namespace, sigma: float, tmp: Path, lines: list[str]) -> list[dict]:
    """One table of section 1; returns its rows (for the memory model of section 2)."""
    base = {"sigma": sigma, "k": args.components}
    rows = []
    lines += [
        "| n | scikit-learn (auto) | ours float64 (auto) | ours float32 | time ratio f64 / f32 "
        "| memory ratio f64 / f32 | agreement f64 / f32 | eig. diff f64 / f32 "
        "| verification f64 / f32 |",
        "|---:|---|---|---|---|---|---|---|---|",
    ]
    for n in args.sizes:
        cfgs = [
            dict(base, n=n, lib="sklearn", params={"eigen_solver": "auto"}),
            dict(base, n=n, lib="ours", params={}),
            dict(base, n=n, lib="ours", params={"kernel_dtype": "float32"}),
        ]
        sk, o64, o32 = median_runs(cfgs, args.repeat, tmp)

        def verify_cell(r: dict) -> str:
            v = r.get("verify")
            if not v:
                return "–"
            retried = "" if len(v["attempts"]) == 1 else f", {len(v['attempts'])} attempts"
            return (f"{v['seconds']:.3f} s, {v['products']} of {v['products'] + v['solve_products']} "
                    f"products{retried}")

        def cell(r: dict) -> str:
            runs = ", ".join(f"{s:.2f}" for s in r["all_seconds"])
            return f"{r['seconds']:.2f} s [{runs}], {r['peak_mb']:.0f} MiB"

        row = {
            "n": n,
            "sk": sk,
            "o64": o64,
            "o32": o32,
            "agree64": agreement(o64["Z"], sk["Z"]),
            "agree32": agreement(o32["Z"], sk["Z"]),
            "eig64": eig_rel_diff(o64["eigenvalues"], sk["eigenvalues"]),
            "eig32": eig_rel_diff(o32["eigenvalues"], sk["eigenvalues"]),
        }
        rows.append(row)
        lines.append(
            f"| {n} | {cell(sk)} | {cell(o64)} | {cell(o32)} "
            f"| {o64['seconds'] / sk['seconds']:.2f} / {o32['seconds'] / sk['seconds']:.2f} "
            f"| {o64['peak_mb'] / sk['peak_mb']:.2f} / {o32['peak_mb'] / sk['peak_mb']:.2f} "
            f"| {row['agree64']:.10f} / {row['agree32']:.10f} "
            f"| {row['eig64']:.1e} / {row['eig32']:.1e} "
            f"| {verify_cell(o64)} / {verify_cell(o32)} |"
        )
        print(lines[-1], flush=True)
    lines.append("")
    return rows


def largest_section(
    args: argparse.Namespace, rows: list[dict], tmp: Path, lines: list[str]
) -> None:
    budget_mb = _mem_total_bytes() / 2**20
    lines += [
        "## 2. The largest n that fits in memory",
        "",
        f"Memory budget: this machine's MemTotal, {budget_mb / 1024:.1f} GiB "
        f"({budget_mb * 2**20 / 1e9:.1f} GB; the OS and other processes need some of it). Model: "
        "peak RSS = a + b·n², fitted (least squares) to the peaks of section 1 and "
        "extrapolated; the exact method needs no other n-dependent memory (O(n) vectors).",
        "",
        "| method | fitted peak (MiB) | n at MemTotal (extrapolated) |",
        "|---|---|---:|",
    ]
    n2 = np.array([r["n"] for r in rows], dtype=float) ** 2
    for key, name in (("sk", "scikit-learn"), ("o64", "ours, float64"), ("o32", "ours, float32")):
        peaks = np.array([r[key]["peak_mb"] for r in rows])
        b, a = np.polyfit(n2, peaks, 1)
        n_max = np.sqrt(max(budget_mb - a, 0.0) / b)
        lines.append(
            f"| {name} | {a:.0f} + {b * 1e6:.3f}·(n/1000)² | {n_max:,.0f} |"
        )
    lines.append("")
    if args.largest:
        lines += [
            "Real runs of ours at large n (one run each; agreement is not measured here, "
            "scikit-learn cannot fit these sizes):",
            "",
            "| n | kernel dtype | time | peak memory | predicted peak | top eigenvalues / n |",
            "|---:|---|---|---|---|---|",
        ]
        for spec in args.largest:
            n_str, _, dtype = spec.partition(":")
            n, dtype = int(n_str), dtype or "float64"
            key = "o64" if dtype == "float64" else "o32"
            peaks = np.array([r[key]["peak_mb"] for r in rows])
            b, a = np.polyfit(n2, peaks, 1)
            cfg = {"sigma": args.sigma[0], "k": args.components, "n": n, "lib": "ours",
                   "params": {"kernel_dtype": dtype}}
            r = run_worker(cfg, tmp, timeout=7200)
            eig = ", ".join(f"{v / n:.5f}" for v in r["eigenvalues"])
            lines.append(
                f"| {n} | {dtype} | {r['seconds']:.1f} s | {r['peak_mb']:.0f} MiB "
                f"| {a + b * n * n:.0f} MiB | {eig} |"
            )
            print(lines[-1], flush=True)
        lines.append("")


def approx_section(args: argparse.Namespace, tmp: Path, lines: list[str]) -> dict:
    n, J = args.approx_n, args.approx_J
    lines += [
        f"## 3. Approximate kernel PCA of n = {n:,} points, J = {J}",
        "",
        f"Same data, σ = {args.sigma[0]}, {args.components} components, `fit_transform`, one run each. "
        "scikit-learn: `make_pipeline(Nystroem(n_components=J) or RBFSampler(n_components=J), "
        "PCA(k))`, which materialises the n×J features.",
        "",
        "| method | time | peak memory | top eigenvalues / n |",
        "|---|---|---|---|",
    ]
    base = {"sigma": args.sigma[0], "k": args.components, "n": n}
    results = {}
    for name, cfg in (
        ("ours, Nyström", dict(base, lib="ours", params={"approximation": "nystroem", "n_features": J, "random_state": 0})),
        ("ours, random Fourier features", dict(base, lib="ours", params={"approximation": "rff", "n_features": J, "random_state": 0})),
        ("scikit-learn Nystroem + PCA", dict(base, lib="sklearn-nystroem", params={"n_features": J})),
        ("scikit-learn RBFSampler + PCA", dict(base, lib="sklearn-rbfsampler", params={"n_features": J})),
    ):
        r = run_worker(cfg, tmp)
        results[name] = r
        eig = ", ".join(f"{v / n:.5f}" for v in r["eigenvalues"])
        lines.append(f"| {name} | {r['seconds']:.1f} s | {r['peak_mb']:.0f} MiB | {eig} |")
        print(lines[-1], flush=True)
    lines.append("")
    return results


def agreement_section(args: argparse.Namespace, big: dict, lines: list[str]) -> None:
    from kpca_lib import KernelPCA

    m, k, sigma = args.agreement_n, args.components, args.sigma[0]
    X = _moons(m, seed=1)
    exact = KernelPCA(k + 1, kernel="rbf", sigma=sigma).fit(X)
    K_c = exact.kernel_matrix_c()
    lam = exact.eigenvalues_
    Z_exact = exact.transform(X)[:, :k]
    lines += [
        f"## 4. Agreement with exact kernel PCA as J grows (subsample of n = {m})",
        "",
        f"Both fitted on the same {m} points (`make_moons(..., random_state=1)`), "
        f"{k} components, σ = {sigma}; mean over {args.seeds} seeds. Exact eigenvalues / n: "
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
                kp = KernelPCA(k, kernel="rbf", sigma=sigma, approximation=method,
                               n_features=J, random_state=seed)
                Z = kp.fit_transform(X)
                Phi = kp.feature_map_.transform(X)
                Phi -= kp.feature_mean_
                Q, _ = np.linalg.qr(Z)
                stats.append((
                    eig_rel_diff(kp.eigenvalues_, lam[:k]),
                    agreement(Z, Z_exact),
                    float(np.trace(Q.T @ K_c @ Q) / lam[:k].sum()),
                    float(np.linalg.norm(Phi @ Phi.T - K_c) / np.linalg.norm(K_c)),
                ))
            s = np.mean(stats, axis=0)
            cells.append(f"{s[0]:.1e} | {s[1]:.6f} | {s[2]:.6f} | {s[3]:.1e}")
        lines.append(f"| {J} | {cells[0]} | {cells[1]} |")
        print(lines[-1], flush=True)
    lines.append("")
    if big:
        lines += [
            f"The models of section 3 (fitted on all {args.approx_n:,} points) projecting "
            f"this subsample, against exact kernel PCA of the subsample (the two estimate "
            f"the same population components from different samples):",
            "",
        ]
        ours_big = {
            "ours, Nyström": "nystroem",
            "ours, random Fourier features": "rff",
        }
        for name, method in ours_big.items():
            kp = KernelPCA(k, kernel="rbf", sigma=sigma, approximation=method,
                           n_features=args.approx_J, random_state=0).fit(_moons(args.approx_n))
            Z = kp.transform(X)
            Q, _ = np.linalg.qr(Z)
            lines.append(
                f"- {name}: agreement {agreement(Z, Z_exact):.6f}, captured variance "
                f"{np.trace(Q.T @ K_c @ Q) / lam[:k].sum():.6f}"
            )
        lines.append("")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--sizes", type=int, nargs="+", default=[4000, 8000, 12000, 16000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sigma", type=float, nargs="+", default=[1.0, 0.2],
                   help="RBF bandwidths of section 1; the first one is used everywhere else")
    p.add_argument("--components", type=int, default=2)
    p.add_argument("--largest", nargs="*", default=[],
                   help="real runs of ours, as n:dtype (e.g. 60000:float64 85000:float32)")
    p.add_argument("--approx-n", type=int, default=1_000_000)
    p.add_argument("--approx-J", type=int, default=500)
    p.add_argument("--agreement-n", type=int, default=4000)
    p.add_argument("--agreement-J", type=int, nargs="+",
                   default=[10, 20, 50, 100, 200, 500, 1000, 2000])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--worker-env", nargs="*", default=[], metavar="KEY=VALUE",
                   help="environment variables for every worker, e.g. OPENBLAS_CORETYPE=Haswell")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.quick:
        args.sizes, args.repeat, args.largest = [1000, 2000], 1, []
        args.approx_n, args.approx_J = 20_000, 100
        args.agreement_n, args.agreement_J, args.seeds = 500, [10, 50], 1
    out = args.out or (Path(tempfile.gettempdir()) / "kernel_pca_quick.md" if args.quick else DEFAULT_OUT)
    WORKER_ENV.update(kv.split("=", 1) for kv in args.worker_env)

    started = time.strftime("%Y-%m-%d %H:%M")
    load_before = os.getloadavg()
    lines = [
        "# Kernel PCA benchmark: kpca_lib vs scikit-learn",
        "",
        f"Generated by `benchmarks/bench_kernel_pca.py {' '.join(argv if argv is not None else sys.argv[1:])}` "
        f"on {started}.",
        "",
        *environment(),
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = exact_section(args, tmp, lines) if "exact" in args.sections else []
        if "largest" in args.sections and rows:
            largest_section(args, rows, tmp, lines)
        big = approx_section(args, tmp, lines) if "approx" in args.sections else {}
        if "agreement" in args.sections:
            agreement_section(args, big, lines)
    load_after = os.getloadavg()
    lines.insert(
        7,
        f"- load average (1, 5, 15 min) at start {tuple(round(v, 2) for v in load_before)}, "
        f"at end {tuple(round(v, 2) for v in load_after)} (2 cores: above 2 the machine was shared)",
    )
    out.write_text("\n".join(lines) + "\n")
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
