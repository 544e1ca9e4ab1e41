"""Past one machine: what Dask costs and what it buys, side by side.

    .venv/bin/python benchmarks/bench_dask.py [--n-submissions 200] [--n-memory 1000000]
                                              [--n-cluster 10000000] [--J 500] [--out FILE]

1. Grading: N copies of a full submission (as benchmarks/bench_grading.py builds them),
   ``kpca-course grade --jobs 2`` vs ``--cluster local:2`` (a LocalCluster of 2 worker
   processes, one task per submission; the cluster's start is included).
2. Nyström kernel PCA (``J`` landmarks, 2 components, σ = 1, noisy moons): ``fit`` of
   ``--n-memory`` points in memory (a fresh process, 2 threads) vs ``--n-cluster`` points as
   a Dask array on a LocalCluster of 2 single-threaded workers, generated chunk by chunk on
   the workers by ``dask.array``'s random generator (never materialised). Wall time and
   peak RSS (of the process, of each worker and of the client).

Targets (issue 14): n = 10⁷ in < 3 min with < 2 GB per worker on a 2-core machine.
The load average is printed with the numbers: the machine may be shared.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_feature_maps"
SIGMA = 1.0
CHUNK = 250_000  # rows per Dask chunk: 4 MB of X; the features of 10⁴ rows at a time


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def _cpu_s() -> float:
    """CPU seconds of this process (all threads): what a loaded machine does not inflate."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ----------------------------------------------------------------------------- grading
def make_submissions(n: int, folder: Path) -> list[str]:
    """``n`` full-marks submissions, each with its own comment (bench_grading.py's)."""
    from bench_grading import make_submissions as make

    return make(n, folder, ASSIGNMENT)


def grade(files: list[str], out: Path, extra: list[str]) -> float:
    from kpca_lib.course.cli import main

    start = time.perf_counter()
    rc = main(["grade", "--assignment", ASSIGNMENT, "--out", str(out), *extra, *files])
    elapsed = time.perf_counter() - start
    with open(out / "grades.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    short = [r["submission"] for r in rows if not (r["status"] == "graded"
                                                   and r["score"] == r["max_score"])]
    assert rc == 0 and len(rows) == len(files) and not short, (rc, len(rows), short[:5])
    return elapsed


def grading_section(n: int) -> list[str]:
    os.environ.setdefault("KPCA_GRADING_SECRET", "benchmark")
    lines = [f"## 1. Grading {n} submissions (full marks each), sandboxed (bwrap)", "",
             "| run | wall time | per submission | load average (1/5/15 min) before |",
             "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        files = make_submissions(n, Path(tmp))
        results = {}
        for label, extra in (("--jobs 2", ["--jobs", "2"]), ("--cluster local:2", ["--cluster", "local:2"])):
            load = _load()
            elapsed = grade(files, Path(tmp) / label.replace(" ", "_").strip("-"), extra)
            results[label] = elapsed
            line = f"| `{label}` | {elapsed:.1f} s | {elapsed / n:.2f} s | {load} |"
            print(line, flush=True)
            lines.append(line)
        # the same but for the run times (the machine's speed, not grades)
        a, b = (re.sub(r'\n *"run_seconds": [0-9.e+-]+,', "", (Path(tmp) / name / "grades.json")
                       .read_text()) for name in ("jobs_2", "cluster_local:2"))
    same = "identical" if a == b else "DIFFERENT"
    ratio = results["--cluster local:2"] / results["--jobs 2"]
    lines += ["", f"Gradebooks: {same}. Dask's overhead: ×{ratio:.2f} wall time (includes starting "
              "the LocalCluster and one nbval start per submission, which the local runner "
              "shares between up to 16 submissions)."]
    print(lines[-1], flush=True)
    return lines


# ----------------------------------------------------------------------------- kernel PCA
def moons_numpy(n: int, seed: int) -> np.ndarray:
    """Noisy moons (random angles): the distribution moons_dask draws from."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, np.pi, n)
    inner = rng.integers(0, 2, n).astype(bool)
    X = np.column_stack([np.where(inner, 1.0 - np.cos(t), np.cos(t)),
                         np.where(inner, 0.5 - np.sin(t), np.sin(t))])
    return X + rng.normal(0.0, 0.05, size=(n, 2))


def moons_dask(n: int, seed: int, chunk: int = CHUNK):  # noqa: ANN201 - dask.array.Array
    import dask.array as da

    rng = da.random.default_rng(seed)
    t = rng.uniform(0.0, np.pi, size=n, chunks=chunk)
    inner = rng.integers(0, 2, size=n, chunks=chunk).astype(bool)
    X = da.stack([da.where(inner, 1.0 - da.cos(t), da.cos(t)),
                  da.where(inner, 0.5 - da.sin(t), da.sin(t))], axis=1)
    return X + rng.normal(0.0, 0.05, size=(n, 2), chunks=(chunk, 2))


def in_memory(n: int, J: int) -> dict:
    """Run in a fresh process: fit n points in memory; wall time and peak RSS."""
    from kpca_lib.approximate_kernel_pca import ApproximateKernelPCA

    X = moons_numpy(n, 0)
    start, cpu = time.perf_counter(), _cpu_s()
    model = ApproximateKernelPCA(2, method="nystroem", n_features=J, sigma=SIGMA,
                                 random_state=0, n_jobs=2).fit(X)
    seconds, cpu = time.perf_counter() - start, _cpu_s() - cpu
    return {"seconds": seconds, "cpu": cpu, "peak_mb": _peak_mb(),
            "eig_n": (model.eigenvalues_ / n).tolist()}


def on_cluster(n: int, J: int) -> dict:
    """Run in a fresh process: a LocalCluster of 2 workers, fit an n-point Dask array."""
    from distributed import Client, LocalCluster

    from kpca_lib.approximate_kernel_pca import ApproximateKernelPCA

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        client.run(lambda: __import__("kpca_lib.approximate_kernel_pca"))  # not the benchmark
        base = client.run(_peak_mb)
        cpu0 = client.run(_cpu_s)
        X = moons_dask(n, 0)
        start = time.perf_counter()
        model = ApproximateKernelPCA(2, method="nystroem", n_features=J, sigma=SIGMA,
                                     random_state=0).fit(X)
        seconds = time.perf_counter() - start
        peaks = client.run(_peak_mb)
        cpu = sum(client.run(_cpu_s).values()) - sum(cpu0.values())
        head = model.transform(X[:5]).compute()
    return {"seconds": seconds, "cpu": cpu, "worker_peak_mb": sorted(peaks.values()),
            "worker_start_mb": sorted(base.values()), "client_peak_mb": _peak_mb(),
            "eig_n": (model.eigenvalues_ / n).tolist(), "chunks": len(X.chunks[0]),
            "head_finite": bool(np.isfinite(head).all())}


def _subprocess(kind: str, n: int, J: int) -> dict:
    proc = subprocess.run([sys.executable, __file__, f"--_{kind}", str(n), "--J", str(J)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def kpca_section(n_memory: int, n_cluster: int, J: int) -> list[str]:
    lines = [f"## 2. Nyström kernel PCA, J = {J}, 2 components, σ = {SIGMA}: `fit`", "",
             "| run | n | wall time | CPU time | peak memory | top eigenvalues / n "
             "| load average before |",
             "|---|---|---|---|---|---|---|"]
    load = _load()
    mem = _subprocess("memory", n_memory, J)
    line = (f"| in memory (1 process, 2 threads) | {n_memory:,} | {mem['seconds']:.1f} s | "
            f"{mem['cpu']:.1f} s | "
            f"{mem['peak_mb']:.0f} MiB (process) | "
            f"{', '.join(f'{e:.5f}' for e in mem['eig_n'])} | {load} |")
    print(line, flush=True)
    lines.append(line)
    load = _load()
    dsk = _subprocess("cluster", n_cluster, J)
    workers = " / ".join(f"{p:.0f}" for p in dsk["worker_peak_mb"])
    line = (f"| Dask array on LocalCluster (2 workers × 1 thread, {dsk['chunks']} chunks of "
            f"{CHUNK:,} rows) | {n_cluster:,} | {dsk['seconds']:.1f} s | {dsk['cpu']:.1f} s "
            f"(workers) | {workers} MiB per worker "
            f"(client {dsk['client_peak_mb']:.0f} MiB) | "
            f"{', '.join(f'{e:.5f}' for e in dsk['eig_n'])} | {load} |")
    print(line, flush=True)
    lines.append(line)
    assert dsk["head_finite"]
    ok = dsk["seconds"] < 180 and max(dsk["worker_peak_mb"]) < 2048
    lines += ["", f"Target n = {n_cluster:,} in < 3 min with < 2 GB per worker: "
              f"{'met' if ok else 'NOT met'} ({dsk['seconds']:.0f} s, "
              f"{max(dsk['worker_peak_mb']):.0f} MiB; a worker's peak RSS at start, imports "
              f"done: {' / '.join(f'{p:.0f}' for p in dsk['worker_start_mb'])} MiB). "
              f"Throughput: {n_memory / mem['seconds'] / 1e3:.0f}k points/s in memory, "
              f"{n_cluster / dsk['seconds'] / 1e3:.0f}k points/s on the cluster; per CPU second "
              f"{n_memory / mem['cpu'] / 1e3:.0f}k and {n_cluster / dsk['cpu'] / 1e3:.0f}k "
              f"(on 2 idle cores the cluster's fit would take about {dsk['cpu'] / 2:.0f} s)."]
    print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-submissions", type=int, default=200)
    parser.add_argument("--n-memory", type=int, default=1_000_000)
    parser.add_argument("--n-cluster", type=int, default=10_000_000)
    parser.add_argument("--J", type=int, default=500)
    parser.add_argument("--skip-grading", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the tables to this Markdown file")
    parser.add_argument("--_memory", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--_cluster", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._memory:
        print(json.dumps(in_memory(args._memory, args.J)))
        return
    if args._cluster:
        print(json.dumps(on_cluster(args._cluster, args.J)))
        return
    lines = ["# Dask benchmarks (benchmarks/bench_dask.py)", "",
             f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}; Python "
             f"{sys.version.split()[0]}; load average (1/5/15 min) at start {_load()} "
             "(the machine is shared with other jobs: wall times are upper bounds).", ""]
    if not args.skip_grading:
        lines += grading_section(args.n_submissions) + [""]
    lines += kpca_section(args.n_memory, args.n_cluster, args.J)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
