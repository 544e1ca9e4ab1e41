"""After grading at scale: writing a gradebook of N rows, rebuilding its hand-back (summary,
students/ HTML and Markdown, archives) and exporting it, with and without a policy.

    .venv/bin/python benchmarks/bench_handback.py [--n 1000]

The rows are synthetic (12 checks each, as 01_feature_maps has) and no notebook runs: this
measures only what comes after grading. The anchor is the same gradebook without
``policy.toml`` and ``adjustments.csv`` (the automatic grades only), in the same run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kpca_lib.course.grading.handback.trees import export_gradebook, refresh
from kpca_lib.course.grading.judge.evaluate import CheckResult
from kpca_lib.course.grading.record.gradebook import Gradebook
from kpca_lib.course.grading.record.policy import check_adjustments, parse_adjustments, parse_policy
from kpca_lib.course.grading.record.rows import Row
from kpca_lib.course.grading.record.rows import row_record as _record

POINTS = {"q1_phi_p3": 3.0, "q1_phi_p4": 3.0, "q1_phi_general": 3.0, "q2_feature_count": 3.0}
POLICY = """roster = "../roster.csv"
[questions]
by_hand = ["q2_feature_count"]
[late]
deadline = 2026-12-01T23:59:00+01:00
submitted = "file"
penalty_per_day = 10
"""


def rows(n: int) -> list[dict]:
    qs = list(POINTS)
    out = []
    for i in range(n):
        checks = [CheckResult(f"{q}.c{k}", q, f"check {k} of {q}: φ(x)ᵀφ(y)", 1.0, (i + k) % 4 != 0,
                              "expected 10 features, got 9" if (i + k) % 4 == 0 else "", k == 2)
                  for q in qs for k in range(3)]
        row = Row(f"s{i:05d}/01_feature_maps", f"/subs/s{i:05d}/01_feature_maps.ipynb",
                  max_score=12.0, questions={q: float(sum(c.score for c in checks if c.question == q))
                                             for q in qs}, checks=checks,
                  file_time=f"2026-12-0{1 + i % 3}T12:00:00+00:00", sandbox="none")
        out.append(_record(row))
    return out


def run(n: int, ruled: bool) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="kpca-bench-handback-"))
    out = folder / "grades"
    out.mkdir()
    records = rows(n)
    if ruled:
        (out / "policy.toml").write_text(POLICY)
        (folder / "roster.csv").write_text("student,email,lms_id\n" + "".join(
            f"s{i:05d},s{i}@u.example,{1000 + i}\n" for i in range(n)))
        (out / "adjustments.csv").write_text("row,question,points,score,reason\n" + "".join(
            f"s{i:05d}/01_feature_maps,q2_feature_count,,2,by hand\n" for i in range(0, n, 2)))
    times = {}
    with Gradebook(out, assignment="01_feature_maps", points=POINTS, mode="new") as book:
        if ruled:
            policy = parse_policy(POLICY, "policy.toml", out)
            adjustments = parse_adjustments((out / "adjustments.csv").read_text())
            check_adjustments(adjustments, [r["submission"] for r in records], POINTS)
            book.set_policy(policy, adjustments, policy.load_roster())
        book.start(folder, "none")
        t = time.perf_counter()
        for r in records:  # one write of grades.json/.csv per row, as a batch does
            book.add(r, "feedback")
        times["write rows"] = time.perf_counter() - t
        t = time.perf_counter()
        done = refresh(book)
        times["refresh"] = time.perf_counter() - t
        assert not done.errors, done.errors
    t = time.perf_counter()
    export_gradebook(out, formats=("plain", "canvas", "moodle") if ruled else ("plain",),
                     archives=True)
    times["export (+ archives)"] = time.perf_counter() - t
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    plain, ruled = run(args.n, False), run(args.n, True)
    print(f"{args.n} rows; seconds (automatic grades only | with policy, adjustments, roster)")
    for key in plain:
        print(f"  {key:22s} {plain[key]:8.2f} | {ruled[key]:8.2f}")


if __name__ == "__main__":
    main()
