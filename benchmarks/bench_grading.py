"""Grading speed: N copies of a full submission, sandboxed and with `--sandbox none`, side by side.

    .venv/bin/python benchmarks/bench_grading.py [--n 100] [--jobs 2] [--assignment 01_feature_maps]

Runs the same batch twice in one process, each student's kernel in its own bubblewrap
sandbox (`--sandbox bwrap`, the default) and unsandboxed (`--sandbox none`, still with
limits), and prints wall time, CPU of the children and the load average for both.
Target: 100 submissions in <= 60 s sandboxed on 2 cores, isolation costing < 10 %.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import tempfile
import time
from pathlib import Path

import nbformat

from kpca_lib.course.cli import main
from kpca_lib.course.grading.judge.notebooks import meta, with_answers

ROOT = Path(__file__).resolve().parents[1]


def _grade(argv: list[str], sandbox: str) -> int:
    """``kpca-course grade ... --sandbox MODE``."""
    return main([*argv[:1], "--sandbox", sandbox, *argv[1:]])


def make_submissions(n: int, folder: Path, assignment: str) -> list[str]:
    """``n`` full-marks submissions of ``assignment`` in ``folder``, each with its own comment
    (so no two are the same file)."""
    solution = nbformat.read(ROOT / "solutions" / f"{assignment}.ipynb", as_version=4)
    exercise = nbformat.read(ROOT / "exercises" / f"{assignment}.ipynb", as_version=4)
    files = []
    for i in range(n):
        nb = with_answers(exercise, solution)
        for c in nb.cells:
            if meta(c).get("role") == "answer":
                c.source += f"\n# student {i}"
        path = folder / f"student{i:03d}.ipynb"
        nbformat.write(nb, path)
        files.append(str(path))
    return files


def run(n: int, jobs: int, assignment: str, sandbox: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        files = make_submissions(n, Path(tmp), assignment)
        os.environ.setdefault("KPCA_GRADING_SECRET", "benchmark")
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        rc = _grade(["grade", "--assignment", assignment, "--out", str(Path(tmp) / "out"),
                     "--jobs", str(jobs), *files], sandbox)
        elapsed = time.perf_counter() - start
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        with open(Path(tmp) / "out" / "grades.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        short = [r for r in rows if not (r["status"] == "graded" and r["score"] == r["max_score"])]
        for r in short:
            feedback = (Path(tmp) / "out" / "feedback" / f"{r['submission']}.md").read_text()
            print(f"{r['submission']}: {r['status']} {r['score']}/{r['max_score']}\n{feedback}")
        assert rc == 0 and not short, f"{n - len(short)} of {n} got full marks"
    return elapsed, cpu


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--assignment", default="01_feature_maps")
    args = parser.parse_args()
    results = {}
    for mode in ("bwrap", "none"):
        load = os.getloadavg()[0]
        elapsed, _cpu = run(args.n, args.jobs, args.assignment, mode)
        results[mode] = elapsed
        # (CPU of the children is not printed: a sandboxed kernel is reaped inside its PID
        # namespace, so the grader's RUSAGE_CHILDREN misses it and the figures would not compare.)
        print(f"--sandbox {mode:5s}: {args.n} submissions, --jobs {args.jobs}: {elapsed:6.1f} s wall "
              f"({elapsed / args.n:.2f} s each); load average {load:.1f} before, "
              f"{os.getloadavg()[0]:.1f} after", flush=True)
    cost = results["bwrap"] / results["none"] - 1
    print(f"isolation costs {cost * 100:+.0f} % wall (target < 10 %; sandboxed target <= 60 s "
          f"for 100 on 2 idle cores)")
