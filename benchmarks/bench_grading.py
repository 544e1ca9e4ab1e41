"""Grading speed: N copies of a full submission with `kpca-course grade --jobs J`.

    .venv/bin/python benchmarks/bench_grading.py [--n 100] [--jobs 2] [--assignment 01_feature_maps]

Prints the wall time and seconds per submission. Target: 100 submissions of one
homework notebook in under 3 minutes on two cores.
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import resource
import tempfile
import time
from pathlib import Path

import nbformat

from kpca_lib.course.cli import main
from kpca_lib.course.grading.notebooks import meta

ROOT = Path(__file__).resolve().parents[1]


def run(n: int, jobs: int, assignment: str) -> tuple[float, float]:
    solution = nbformat.read(ROOT / "solutions" / f"{assignment}.ipynb", as_version=4)
    exercise = nbformat.read(ROOT / "exercises" / f"{assignment}.ipynb", as_version=4)
    answers = {c.id: c.source for c in solution.cells if meta(c).get("role") == "answer"}
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(n):
            nb = copy.deepcopy(exercise)
            for c in nb.cells:
                if c.id in answers:
                    c.source = answers[c.id] + f"\n# student {i}"
            path = Path(tmp) / f"student{i:03d}.ipynb"
            nbformat.write(nb, path)
            files.append(str(path))
        os.environ.setdefault("KPCA_GRADING_SECRET", "benchmark")
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        rc = main(["grade", "--assignment", assignment, "--out", str(Path(tmp) / "out"),
                   "--jobs", str(jobs), *files])
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
    elapsed, cpu = run(args.n, args.jobs, args.assignment)
    print(f"{args.assignment}: {args.n} submissions, --jobs {args.jobs}: {elapsed:.1f} s wall, "
          f"{elapsed / args.n:.2f} s per submission (target 1.80); CPU of the children "
          f"{cpu / args.n:.2f} s per submission, so {cpu / args.n / min(args.jobs, os.cpu_count() or 1) * 100:.0f} s "
          f"per 100 on {args.jobs} idle cores. Load average now: {os.getloadavg()[0]:.1f}.")
