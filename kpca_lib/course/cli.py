"""The ``kpca-course`` command: release homework and grade submissions.

::

    kpca-course release [--check] [--solutions DIR] [--exercises DIR]
    kpca-course grade --assignment NAME [--out DIR] [--timeout SECONDS] [--jobs N]
                      [--memory MB] SUBMISSION...
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _release(args: argparse.Namespace) -> int:
    from .release import default_paths, release

    solutions, exercises = default_paths()
    solutions = Path(args.solutions) if args.solutions else solutions
    exercises = Path(args.exercises) if args.exercises else exercises
    try:
        differing = release(solutions, exercises, check=args.check)
    except (OSError, ValueError) as exc:
        print(f"kpca-course release: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if differing:
            print(
                "exercises/ is out of date with solutions/ (run `kpca-course release`):",
                file=sys.stderr,
            )
            for name in differing:
                print(f"  {name}", file=sys.stderr)
            return 1
        print(f"exercises/ is up to date with {solutions}.")
        return 0
    for name in differing:
        print(f"wrote {name}")
    print(f"exercises/ is up to date ({len(differing)} file(s) changed).")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from .grading.grade import grade_batch
    from .release import default_paths

    solutions = Path(args.solutions) if args.solutions else default_paths()[0]
    try:
        rows = grade_batch(
            assignment=args.assignment,
            submissions=[Path(s) for s in args.submissions],
            out=Path(args.out),
            solutions=solutions,
            timeout=args.timeout,
            jobs=args.jobs,
            memory_mb=args.memory,
            progress=sys.stderr.isatty(),
            seed=args.seed,
        )
    except (OSError, ValueError) as exc:
        print(f"kpca-course grade: {exc}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"graded {len(rows)} submission(s) ({summary}); gradebook in {args.out}/grades.csv")
    return 0 if len(rows) == len(args.submissions) else 1


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0; got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kpca-course", description="Release and grade the Kernel PCA course homework."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    rel = sub.add_parser("release", help="generate exercises/ from solutions/")
    rel.add_argument("--check", action="store_true",
                     help="write nothing; exit 1 naming the files that differ")
    rel.add_argument("--solutions", help="solutions folder (default: the repository's)")
    rel.add_argument("--exercises", help="exercises folder (default: the repository's)")
    rel.set_defaults(func=_release)

    gr = sub.add_parser("grade", help="grade submitted notebooks of one assignment")
    gr.add_argument("--assignment", required=True,
                    help="stem of a notebook in solutions/, e.g. 01_feature_maps")
    gr.add_argument("--out", default="grades", help="output folder (default: grades)")
    gr.add_argument("--timeout", type=_positive_float, default=30.0,
                    help="seconds per cell before it is interrupted (default: 30)")
    gr.add_argument("--jobs", type=_positive_int, default=min(4, os.cpu_count() or 1),
                    help="submissions graded in parallel (default: number of cores, at most 4)")
    gr.add_argument("--memory", type=_positive_int, default=2048,
                    help="memory limit per kernel in MB (address space; default: 2048)")
    gr.add_argument("--solutions", help="solutions folder (default: the repository's)")
    gr.add_argument("--seed", help="secret that seeds the grader's inputs (default: "
                    "$KPCA_GRADING_SECRET, else a random secret kept in ~/.config/kpca-course)")
    gr.add_argument("submissions", nargs="+", metavar="SUBMISSION", help="student .ipynb files")
    gr.set_defaults(func=_grade)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kpca-course``."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
