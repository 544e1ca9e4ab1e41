"""Our own eigensolvers side by side: does each one earn its place?

``kpca_lib.KernelPCA(n_components=k, kernel="rbf", gamma=0.5, eigen_solver=s)`` for
``s`` in ``"dense"``, ``"lanczos"``, ``"arpack"``, ``"randomized"`` and ``"auto"``,
``fit_transform`` of the main benchmark's two moons (``make_moons(n, noise=0.05,
random_state=0)``), for every ``n`` of ``--sizes`` and ``k`` of ``--components``. Every fit
runs in a fresh Python process (the workers and helpers of ``bench_kernel_pca.py``), all
solvers of a point alternating, ``--repeat`` times; ``"dense"`` (O(n³) time, the full n×n
matrix) only up to ``--dense-max-n``.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_solvers.py                       # the full grid
    .venv/bin/python benchmarks/bench_solvers.py --sizes 500 2000 8000 12000 --components 2 50
    .venv/bin/python benchmarks/bench_solvers.py --load stress         # beside stress-ng --cpu 4
    .venv/bin/python benchmarks/bench_solvers.py --ref 79c6e3d         # kpca_lib of a commit

``--ref REF`` times kpca_lib of commit REF from a git worktree outside the repository
(``bench_kernel_pca.py --baseline``'s), for a fixed library while this checkout changes.

The report is printed and written to ``benchmarks/solver_results.md`` (``--out``).

How to read it
--------------

*Times*: one row per (n, k), one column per solver: median wall time of the repeats
(min–max, spread max/min) and the worker's peak memory; ``→ X`` when the solver actually
used (``eigen_solver_``) is not the one asked for (``"auto"`` always says which it chose;
the iterative solvers fall back to ``"dense"`` for k ≥ n). *fastest*: the solver with the
smallest median (``"auto"`` left out, it is one of the others); *within spread*: the
solvers whose fastest run beat the fastest solver's slowest run (they cannot be told
apart from it with these repeats). *auto / fastest*: ratio of the medians (best–worst
case). A solver earns its place if it is the fastest, beyond the spread, somewhere on
the grid, or is needed for something no other solver does (``"dense"`` for k close to
n, where the iterative ones cannot go); ``"auto"`` is right where the solver it picks is
the fastest or within the spread of it.

*Agreement*: each solver's first run against a reference, ``"dense"`` where it ran
(n ≤ ``--dense-max-n``), otherwise ``"arpack"`` (scipy's ARPACK, an implementation
independent of ours). *Δλ/λ₁*: the largest difference of the k eigenvalues relative to
the largest one, the solvers' own contract (residuals within ``tol·‖K_c‖``,
``tol = 1e-10``); ✗ marks more than ``1e-9``. *rel.*: the largest difference relative to
each eigenvalue itself; *1−cos*: one minus the smallest cosine of the principal angles
between the two projections' column spans (0 = the same subspace), over the components
neither returned as zero. With k = 50 the smallest eigenvalues of this kernel are about
``1e-10·λ₁``, at the tolerance: there *rel.* and *1−cos* may be large while Δλ/λ₁ is
within the contract (those directions are not determined at that tolerance). *zeroed*:
components returned with eigenvalue 0 (the solver judged them zero within its
tolerance) where the reference has a positive one.

Each full-grid point runs 3 × 5 fresh processes (about 1 s each of interpreter, imports
and data); the reduced grid of ``solver_results.md`` took the time stated there.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import bench_kernel_pca as bk
import numpy as np

SOLVERS = ("dense", "lanczos", "arpack", "randomized", "auto")
DEFAULT_OUT = bk.ROOT / "benchmarks" / "solver_results.md"
#: Δλ/λ₁ above this is marked ✗ (the solvers' tolerance is 1e-10·‖K_c‖).
EIG_OK = 1e-9
#: ``kpca_lib.__file__`` as the workers saw it.
IMPORTED: set[str] = set()


def _configs(n: int, k: int, args: argparse.Namespace) -> dict[str, dict]:
    base = {"n": n, "k": k, "gamma": args.gamma, "lib": "ours"}
    if args.ref_info:  # kpca_lib of that commit's worktree (the worker checks __file__)
        base["kpca_root"] = args.ref_info["path"]
    return {
        s: dict(base, params={"eigen_solver": s})
        for s in args.solvers
        if not (s == "dense" and n > args.dense_max_n)
    }


def measure_point(n: int, k: int, args: argparse.Namespace, tmp: Path) -> dict[str, list[dict]]:
    """Every solver at one (n, k), ``--repeat`` times, alternating; a solver whose first run
    took more than ``--rerun-ratio`` times the fastest first run is not repeated."""
    cfgs = _configs(n, k, args)
    runs: dict[str, list[dict]] = {s: [] for s in cfgs}
    for rep in range(args.repeat):
        for s, cfg in cfgs.items():
            if rep and args.rerun_ratio:
                fastest = min(rs[0]["seconds"] for rs in runs.values())
                if runs[s][0]["seconds"] > args.rerun_ratio * fastest:
                    continue
            r = bk.run_worker(cfg, tmp)
            runs[s].append(r)
            IMPORTED.add(r["kpca_lib"])
            print(
                f"  n={n} k={k} {s:<10} (used {r['solver']:<10}) run {rep + 1}: "
                f"{r['seconds']:7.3f} s, {r['peak_mb']:6.0f} MiB, load {bk._load()}",
                flush=True,
            )
    return runs


def _time_cell(s: str, st: dict | None, rs: list[dict]) -> str:
    if st is None:
        return "– (skipped: n > --dense-max-n)" if s == "dense" else "–"
    used = {r["solver"] for r in rs}
    arrow = f" → {'/'.join(sorted(used))}" if used != {s} else ""
    return bk._cell(st) + arrow


def _agree_cell(r: dict, ref: dict) -> str:
    a, b = np.asarray(r["eigenvalues"]), np.asarray(ref["eigenvalues"])
    if a.shape != b.shape:
        return f"{a.size} of {b.size} components"
    d1 = float(np.max(np.abs(a - b)) / b[0])
    zeroed = int(np.sum((a == 0) & (b > 0)))
    both = (a > 0) & (b > 0)  # a zeroed component's projection is 0: no direction to compare
    cos = bk.agreement(r["Z"][:, both], ref["Z"][:, both]) if both.any() else float("nan")
    cell = f"Δλ/λ₁ {d1:.0e}{' ✗' if d1 > EIG_OK else ''}; rel. {bk.eig_rel_diff(a, b):.0e}; "
    cell += f"1−cos {max(1.0 - cos, 0.0):.0e}"
    return cell + (f"; {zeroed} zeroed" if zeroed else "")


def condition(args: argparse.Namespace, tmp: Path, lines: list[str], title: str) -> list[str]:
    """The grid under the current conditions: a time table, an agreement table; summary lines."""
    times = [
        "| n | k | " + " | ".join(args.solvers) + " | fastest | within spread | auto / fastest |"
    ]
    times.append("|---:|---:|" + "---|" * (len(args.solvers) + 3))
    agree = ["| n | k | reference | " + " | ".join(args.solvers) + " |"]
    agree.append("|---:|---:|---|" + "---|" * len(args.solvers))
    lines += [f"### {title}", "", f"Load average (1, 5, 15 min) at start: {bk._load()}.", ""]
    fastest_at: dict[str, list[str]] = {s: [] for s in args.solvers}
    close_at: dict[str, list[str]] = {s: [] for s in args.solvers}
    auto_right = auto_points = 0
    auto_worst: tuple[float, str] = (0.0, "")
    for n in args.sizes:
        for k in args.components:
            runs = measure_point(n, k, args, tmp)
            st = {s: bk._stats(rs) for s, rs in runs.items()}
            cands = {s: v for s, v in st.items() if s != "auto"}
            repeated = {s: v for s, v in cands.items() if v["runs"] > 1} or cands
            best = min(repeated, key=lambda s: repeated[s]["median"])
            b = st[best]
            close = [s for s, v in cands.items() if s != best and v["min"] <= b["max"]]
            point = f"n = {n}, k = {k}"
            fastest_at[best].append(point)
            for s in close:
                close_at[s].append(point)
            cells = [str(n), str(k)]
            cells += [_time_cell(s, st.get(s), runs.get(s, [])) for s in args.solvers]
            cells += [best, ", ".join(close) or "none"]
            if "auto" in st:
                r = bk._ratio(st["auto"], b)
                picked = runs["auto"][0]["solver"]
                ok = picked == best or picked in close or r["best"] <= 1
                auto_points += 1
                auto_right += ok
                auto_worst = max(auto_worst, (r["median"], point))
                cells.append(f"{bk._ratio_cell(r)}, picked {picked}")
            else:
                cells.append("–")
            times.append("| " + " | ".join(cells) + " |")
            print(times[-1], flush=True)
            ref_name = "dense" if "dense" in runs else "arpack"
            ref = runs.get(ref_name, [None])[0]
            cells = [str(n), str(k), ref_name]
            for s in args.solvers:
                if s not in runs:
                    cells.append("–")
                elif s == ref_name or ref is None:
                    cells.append("(reference)" if s == ref_name else "–")
                else:
                    cells.append(_agree_cell(runs[s][0], ref))
            agree.append("| " + " | ".join(cells) + " |")
            print(agree[-1], flush=True)
    lines += ["Times:", "", *times, "", "Agreement:", "", *agree, ""]
    lines += [f"Load average at end: {bk._load()}.", ""]
    summary = [f"- {title}:"]
    for s in args.solvers:
        if s == "auto":
            continue
        where = "; ".join(fastest_at[s]) or "nowhere"
        summary.append(
            f"  - `{s}`: fastest (median) at {len(fastest_at[s])} point(s) ({where}); within the "
            f"spread of the fastest at {len(close_at[s])} more."
        )
    if auto_points:
        summary.append(
            f"  - `auto`: picked the fastest solver or one within its spread (or was itself no "
            f"slower beyond the spread) at {auto_right} of {auto_points} points; largest ratio "
            f"of the medians to the fastest {auto_worst[0]:.2f} ({auto_worst[1]})."
        )
    return summary


def _local_changes() -> str:
    """`` with local changes (…)``: the changed files of kpca_lib and a digest of them."""
    names = sorted(
        bk._git("diff", "--name-only", "HEAD", "--", "kpca_lib").split()
        + bk._git("ls-files", "--others", "--exclude-standard", "kpca_lib").split()
    )
    if not names:
        return ""
    digest = hashlib.sha1(bk._git("diff", "HEAD", "--", "kpca_lib").encode())
    for name in names:
        path = bk.ROOT / name
        if path.is_file():
            digest.update(path.read_bytes())
    return f" with local changes ({', '.join(names)}; digest {digest.hexdigest()[:10]})"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 4000, 8000, 12000])
    p.add_argument("--components", type=int, nargs="+", default=[2, 10, 50])
    p.add_argument("--solvers", nargs="+", choices=SOLVERS, default=list(SOLVERS))
    p.add_argument("--repeat", type=int, default=3, help="runs of every solver")
    p.add_argument("--gamma", type=float, default=0.5)
    p.add_argument("--dense-max-n", type=int, default=4000, help="largest n for dense")
    p.add_argument(
        "--rerun-ratio",
        type=float,
        default=3.0,
        help="do not repeat a solver this many times slower than the fastest (0: repeat all)",
    )
    p.add_argument("--load", choices=("quiet", "stress", "both"), default="quiet")
    p.add_argument("--stress-cpus", type=int, default=4, help="stress-ng --cpu N")
    p.add_argument(
        "--ref",
        metavar="REF",
        default=None,
        help="time kpca_lib of this commit (a git worktree outside the repository, as "
        "bench_kernel_pca.py --baseline) instead of this checkout's",
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    args.ref_info = bk.baseline_worktree(args.ref) if args.ref else None
    info = args.ref_info
    origin = (
        f"- kpca_lib of commit {info['sha']} ({info['subject']}), from the worktree "
        f"`{info['path']}`"
        if info
        else f"- kpca_lib of this checkout ({bk.ROOT}), commit "
        f"{bk._git('rev-parse', '--short', 'HEAD')}{_local_changes()}"
    )

    command = " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        "# Our eigensolvers side by side",
        "",
        f"Generated by `benchmarks/bench_solvers.py {command}` on "
        f"{time.strftime('%Y-%m-%d %H:%M')} (took {{minutes}} min).",
        "",
        *bk.environment(),
        origin,
        "",
        f"RBF kernel PCA of two moons (`make_moons(n, noise=0.05, random_state=0)`), `gamma = "
        f'{args.gamma:g}`, `fit_transform`: `KernelPCA(k, kernel="rbf", gamma=..., '
        f"eigen_solver=s)`; median of {args.repeat} runs (min–max, ×max/min) and the worker's "
        f"peak memory, each run in a fresh process, all solvers of a point alternating; "
        f"`dense` only up to n = {args.dense_max_n}."
        + (
            f" A solver whose first run took more than {args.rerun_ratio:g}× the fastest first "
            "run is not repeated (1 run)."
            if args.rerun_ratio
            else ""
        ),
        "",
    ]
    how = __doc__.split("--------------\n", 1)[1].split("\nEach full-grid point")[0]
    lines += ["## How to read it", "", how.replace("``", "`").strip(), ""]
    started = time.monotonic()
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.load in ("quiet", "both"):
            summary += condition(args, tmp, lines, "Quiet (the machine as it is)")
        if args.load in ("stress", "both"):
            title = f"Loaded: beside `stress-ng --cpu {args.stress_cpus}` (its own session)"
            with bk.stress(args.stress_cpus, "own"):
                summary += condition(args, tmp, lines, title)
    lines += ["Summary:", "", *summary, ""]
    lines += [f"`kpca_lib.__file__` in the workers: {', '.join(sorted(IMPORTED))}.", ""]
    lines[2] = lines[2].replace("{minutes}", f"{(time.monotonic() - started) / 60:.1f}")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
