"""The gradebook at a glance: ``summary.md`` and ``summary.png``, rebuilt after every batch.

:func:`summarize` is a pure function of the gradebook's rows (the entries of
``grades.json``) and the assignment's points: status counts, a score histogram, mean
and median overall and per question, the checks failed most often and the run times.
:func:`summary_markdown` renders it as Markdown that also reads as plain text on a
terminal (aligned tables), :func:`summary_png` as a figure (matplotlib's ``Figure``
with the Agg canvas: no pyplot, no global state). Writing the files is the
gradebook's job (:meth:`kpca_lib.course.grading.record.gradebook.Gradebook.write_generated`).

Rows from an older gradebook may lack ``run_seconds``; they are counted as such. With
the final grades (:func:`~kpca_lib.course.grading.record.policy.finalize`: adjustments, by-hand
questions, late penalties), the scores are the final ones and the late work, adjustments
and pending by-hand grades are counted. Text a student controls appears only in the
"Problems" list (the row id and why it is not ``graded``), one line each. Every text
read from ``grades.json`` (a file on disk) is escaped
(:func:`~kpca_lib.course.grading.text.markdown_text`, with the underscores inside
identifiers left as they are, so that the tables still read as plain text).
"""

from __future__ import annotations

import io
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..text import markdown_text
from .gradebook import STATUSES, format_points, problem
from .policy import Final

__all__ = ["Bin", "QuestionStats", "CheckStats", "Summary", "summarize", "score_bins",
           "summary_markdown", "summary_png", "format_duration", "MAX_PER_POINT_BINS",
           "TOP_CHECKS", "COMPACT_DESCRIPTION"]

#: Up to this many points (an integer), the histogram has one bin per point and one for
#: full marks; above, ten bins of a tenth of the maximum each.
MAX_PER_POINT_BINS = 20
#: How many of the most-failed checks the Markdown lists (half as many when compact).
TOP_CHECKS = 10
#: A check's description is cut to this many characters in the compact summary.
COMPACT_DESCRIPTION = 50


@dataclass(frozen=True)
class Bin:
    """Scores ``low <= s < high`` (``low <= s <= high`` for the last bin) and how many rows."""

    low: float
    high: float
    count: int
    last: bool = False

    @property
    def label(self) -> str:
        if self.low == self.high:
            return format_points(self.low)
        close = "]" if self.last else ")"
        return f"[{format_points(self.low)}, {format_points(self.high)}{close}"


@dataclass(frozen=True)
class QuestionStats:
    """A question's points and its mean and median score over the rows (``None``: no rows)."""

    id: str
    points: float
    mean: float | None
    median: float | None


@dataclass(frozen=True)
class CheckStats:
    """A check and how many of the rows where it ran failed it."""

    question: str
    id: str
    description: str
    hidden: bool
    points: float
    failed: int
    rows: int

    @property
    def share(self) -> float:
        return self.failed / self.rows if self.rows else 0.0


@dataclass(frozen=True)
class Summary:
    """What :func:`summarize` finds in a gradebook's rows."""

    assignment: str
    max_score: float
    n: int
    #: status -> number of rows, every status of :data:`STATUSES` (0 if none).
    counts: dict[str, int]
    #: rows ``crashed`` by the grader's fault (a subset of ``counts["crashed"]``).
    grader_failures: int
    mean: float | None
    median: float | None
    bins: list[Bin]
    questions: list[QuestionStats]
    #: checks failed at least once: most failed first, then in the assignment's order.
    checks: list[CheckStats]
    #: rows whose checks ran (the denominator of a check's share).
    checked: int
    #: rows with a recorded run time, and those among them that ran a notebook (> 0 s).
    timed: int
    ran: int
    total_seconds: float
    median_seconds: float | None
    #: Rows that are not ``graded``: ``(row id, status, why)``, in the gradebook's order.
    problems: tuple[tuple[str, str, str], ...] = ()
    #: With final grades: rows late, with an unknown submission time, adjusted by hand,
    #: waiting for a by-hand grade; the points deducted for lateness in all.
    late: int = 0
    late_unknown: int = 0
    adjusted: int = 0
    pending: int = 0
    penalties: float = 0.0
    #: Whether the final grades were given (else the scores are the automatic ones).
    final: bool = False
    warnings: tuple[str, ...] = ()


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def score_bins(max_score: float) -> list[tuple[float, float]]:
    """The histogram's bins ``(low, high)`` for scores out of ``max_score``.

    One per point and one for full marks when ``max_score`` is an integer up to
    :data:`MAX_PER_POINT_BINS` (``[0, 1), ..., [11, 12), 12``), else ten equal bins
    (the last one closed).
    """
    if max_score <= 0:
        return [(0.0, 0.0)]
    if float(max_score).is_integer() and max_score <= MAX_PER_POINT_BINS:
        top = int(max_score)
        return [(float(k), float(k + 1)) for k in range(top)] + [(float(top), float(top))]
    step = max_score / 10
    return [(round(k * step, 10), round((k + 1) * step, 10) if k < 9 else float(max_score))
            for k in range(10)]


def _bin_index(score: float, edges: Sequence[tuple[float, float]]) -> int:
    for i, (low, high) in enumerate(edges):
        if low == high and score >= low:
            return i
        if score < high:
            return i
    return len(edges) - 1  # above the maximum (cannot happen in a valid gradebook)


def summarize(rows: Iterable[Mapping[str, Any]], points: Mapping[str, float], *,
              assignment: str = "", finals: Mapping[str, Final] | None = None) -> Summary:
    """The summary of a gradebook's ``rows`` (entries of ``grades.json``).

    Parameters
    ----------
    rows : iterable of mapping
        Each with ``status``, ``score``, ``questions`` and ``checks`` as
        :mod:`~kpca_lib.course.grading.record.rows` writes them; ``grader_error`` and
        ``run_seconds`` when present. Every row counts in the scores (an ``invalid`` row
        scores 0, as do the questions of a row the grader failed on).
    points : mapping
        Question id -> points, in the assignment's order.
    assignment : str
        Its name, shown in the title.
    finals : mapping, optional
        Row id -> its :class:`~kpca_lib.course.grading.record.policy.Final` grade: the scores
        counted are then the final ones.

    Returns
    -------
    Summary
        Pure: the same rows give the same summary; no file is read or written.
    """
    rows = list(rows)
    max_score = float(sum(points.values()))
    counts = {s: 0 for s in STATUSES}
    scores: list[float] = []
    per_question: dict[str, list[float]] = {q: [] for q in points}
    seconds: list[float] = []
    checks: dict[tuple[str, str], dict[str, Any]] = {}
    failures = checked = 0
    problems = []
    for r in rows:
        r = _with_final(r, finals)
        status = r.get("status")
        why = problem(dict(r))
        if why:
            problems.append((str(r.get("submission", "")), str(status), why))
        counts[status] = counts.get(status, 0) + 1
        if r.get("grader_error"):
            failures += 1
        score = r.get("score")
        scores.append(float(score) if _number(score) else 0.0)
        _add_question_scores(per_question, r.get("questions"))
        t = r.get("run_seconds")
        if _number(t) and t >= 0:
            seconds.append(float(t))
        results = r.get("checks") if isinstance(r.get("checks"), list) else []
        if results:
            checked += 1
        _add_checks(checks, results)
    ran = [t for t in seconds if t > 0]
    return Summary(
        assignment=assignment,
        max_score=max_score,
        n=len(rows),
        counts=counts,
        grader_failures=failures,
        mean=statistics.fmean(scores) if scores else None,
        median=statistics.median(scores) if scores else None,
        bins=_histogram(scores, max_score),
        questions=[QuestionStats(q, float(p),
                                 statistics.fmean(per_question[q]) if rows else None,
                                 statistics.median(per_question[q]) if rows else None)
                   for q, p in points.items()],
        checks=_most_failed(checks, points),
        checked=checked,
        timed=len(seconds),
        ran=len(ran),
        total_seconds=float(sum(seconds)),
        median_seconds=statistics.median(ran) if ran else None,
        problems=tuple(problems),
        **_final_counts(finals),
    )


def _with_final(row: Mapping[str, Any], finals: Mapping[str, Final] | None) -> Mapping[str, Any]:
    """``row`` with its final score and question scores, when ``finals`` has a grade for it."""
    final = finals.get(str(row.get("submission"))) if finals is not None else None
    if final is not None:
        return {**row, "score": final.score, "questions": final.questions}
    return row


def _add_question_scores(per_question: dict[str, list[float]], qs: Any) -> None:
    """Append a row's score of each question (0 if missing or not a number) to ``per_question``,
    from its ``questions`` entry ``qs`` (a mapping, else no score at all)."""
    qs = qs if isinstance(qs, Mapping) else {}
    for q, scores in per_question.items():
        v = qs.get(q)
        scores.append(float(v) if _number(v) else 0.0)


def _add_checks(checks: dict[tuple[str, str], dict[str, Any]], results: list[Any]) -> None:
    """Count a row's check ``results`` in ``checks``: (question, check id) -> its description,
    points, rows where it ran, rows that failed it and the order in which it was first seen."""
    for c in results:
        if not isinstance(c, Mapping):
            continue
        key = (str(c.get("question", "")), str(c.get("id", "")))
        entry = checks.get(key)
        if entry is None:
            p = c.get("points")
            entry = checks[key] = {
                "description": str(c.get("description", "")), "hidden": bool(c.get("hidden")),
                "points": float(p) if _number(p) else 0.0, "failed": 0, "rows": 0,
                "order": len(checks)}
        entry["rows"] += 1
        if not c.get("passed"):
            entry["failed"] += 1


def _histogram(scores: Sequence[float], max_score: float) -> list[Bin]:
    """The ``scores`` counted in the bins of :func:`score_bins`."""
    edges = score_bins(max_score)
    tally = [0] * len(edges)
    for s in scores:
        tally[_bin_index(s, edges)] += 1
    return [Bin(low, high, n, last=i == len(edges) - 1)
            for i, ((low, high), n) in enumerate(zip(edges, tally, strict=True))]


def _most_failed(checks: Mapping[tuple[str, str], Mapping[str, Any]],
                 points: Mapping[str, float]) -> list[CheckStats]:
    """The checks failed at least once: most failed first, then in the order of the questions
    (``points``) and in the order first seen."""
    order = {q: i for i, q in enumerate(points)}
    failed = sorted(((k, e) for k, e in checks.items() if e["failed"]),
                    key=lambda ke: (-ke[1]["failed"], order.get(ke[0][0], len(order)),
                                    ke[1]["order"]))
    return [CheckStats(q, cid, e["description"], e["hidden"], e["points"], e["failed"], e["rows"])
            for (q, cid), e in failed]


def _final_counts(finals: Mapping[str, Final] | None) -> dict[str, Any]:
    if finals is None:
        return {}
    fs = list(finals.values())
    return {
        "final": True,
        "late": sum(1 for f in fs if f.late is not None and f.late.late),
        "late_unknown": sum(1 for f in fs if f.late is not None and f.late.submitted is None
                                and not f.late.marked),
        "adjusted": sum(1 for f in fs if f.applied),
        "pending": sum(1 for f in fs if f.pending),
        "penalties": float(sum(f.penalty for f in fs)),
        "warnings": tuple(f"{f.row}: {w}" for f in fs for w in f.warnings),
    }


# --------------------------------------------------------------------------- Markdown
def format_duration(seconds: float | None) -> str:
    """``mm:ss`` (``h:mm:ss`` from an hour on); ``--`` for ``None``."""
    if seconds is None:
        return "--"
    total = max(0, int(round(seconds)))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _num(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    return format_points(round(x, digits))


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _text(text: Any) -> str:
    """Text read from the gradebook (ids, descriptions, a status), as literal Markdown."""
    return markdown_text(str(text), identifiers=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """A Markdown table padded so that it is aligned as plain text too. Its cells are
    Markdown already: the summary's own words and numbers, or text through :func:`_text`."""
    cells = [list(header), *[list(r) for r in rows]]
    widths = [max(3, *(len(r[i]) for r in cells)) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if a else c.ljust(w)
                                 for c, w, a in zip(r, widths, right, strict=True)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if a else ("-" * (w + 2))
                          for w, a in zip(widths, right, strict=True)) + "|"
    return [line(cells[0]), rule, *[line(r) for r in cells[1:]]]


def _statuses(s: Summary) -> str:
    parts = []
    for status in STATUSES:
        text = f"{s.counts.get(status, 0)} {status}"
        if status == "crashed" and s.grader_failures:
            text += f" ({s.grader_failures} by the grader's fault)"
        parts.append(text)
    extra = [f"{n} {_text(k)}" for k, n in s.counts.items() if k not in STATUSES]
    return ", ".join(parts + extra)


def summary_markdown(s: Summary, *, compact: bool = False) -> str:
    """``summary.md``: the summary as Markdown that reads as plain text too.

    ``compact`` (for a terminal): without the note on the file, the five most-failed
    checks only, descriptions cut to :data:`COMPACT_DESCRIPTION` characters.
    """
    title = f"# Summary: {_text(s.assignment)}" if s.assignment else "# Summary"
    lines = [title, ""]
    if not compact:
        lines += ["Written by `kpca-course grade` from `grades.json` after every batch (this "
                  "file and `summary.png` are replaced each time).", ""]
    lines += [f"**{s.n} submission{'s' if s.n != 1 else ''}**: {_statuses(s)}.", ""]
    lines += [f"## Scores (out of {format_points(s.max_score)})", ""]
    if not s.n:
        lines += ["No submission yet.", ""]
    else:
        lines.append(f"Mean {_num(s.mean)}, median {_num(s.median)} over all {s.n} "
                     "submissions (an invalid submission scores 0)"
                     + (" of the final grades: adjustments, by-hand questions and late "
                        "penalties applied." if s.final else "."))
        if s.final:
            lines.append(f"Late: {s.late} submission(s), {format_points(round(s.penalties, 2))} "
                         f"point(s) deducted in all; submission time unknown: {s.late_unknown}; "
                         f"adjusted by hand: {s.adjusted}; waiting for a by-hand grade: "
                         f"{s.pending}.")
        if s.grader_failures:
            lines.append(f"{s.grader_failures} row(s) the grader failed on count as 0 until "
                         "they are graded again (`--merge`).")
        lines.append("")
        peak = max(b.count for b in s.bins) or 1
        lines += _table(["score", "submissions", ""],
                        [[b.label, str(b.count), "#" * math.ceil(30 * b.count / peak)]
                         for b in s.bins], [False, True, False])
        lines.append("")
    lines += ["## Questions", ""]
    lines += _table(["question", "points", "mean", "median", "mean %"],
                    [[_text(q.id), format_points(q.points), _num(q.mean), _num(q.median),
                      _percent(None if q.mean is None or not q.points else q.mean / q.points)]
                     for q in s.questions], [False, True, True, True, True])
    lines += ["", "## Most-failed checks", ""]
    if not s.checks:
        lines.append("No check failed." if s.checked else "No checks ran.")
    else:
        shown = s.checks[:TOP_CHECKS // 2 if compact else TOP_CHECKS]

        def describe(text: str) -> str:
            if compact and len(text) > COMPACT_DESCRIPTION:
                return text[:COMPACT_DESCRIPTION - 3].rstrip() + "..."
            return text

        lines += _table(["check", "question", "description", "kind", "failed", "share"],
                        [[_text(c.id), _text(c.question), _text(describe(c.description)),
                          "hidden" if c.hidden else "public", str(c.failed), _percent(c.share)]
                         for c in shown],
                        [False, False, False, False, True, True])
        lines.append("")
        more = len(s.checks) - len(shown)
        lines.append(f"Share: of the {s.checked} submission(s) whose checks ran (not invalid "
                     "ones, nor those the grader failed on)."
                     + (f" {more} more check(s) failed at least once (see grades.json)."
                        if more > 0 else ""))
    lines += ["", "## Run time", ""]
    if not s.timed:
        lines.append("No run time recorded.")
    else:
        median = "-" if s.median_seconds is None else f"{s.median_seconds:.1f} s"
        lines.append(f"Total {format_duration(s.total_seconds)} (mm:ss) of notebook runs, median "
                     f"{median} per submission that ran ({s.ran} of {s.timed}; an invalid "
                     "submission runs nothing).")
    if s.n > s.timed:
        lines.append(f"{s.n - s.timed} row(s) have no run time (graded by an older kpca-course).")
    lines += _problems(s, compact)
    return "\n".join(lines) + "\n"


def _problems(s: Summary, compact: bool) -> list[str]:
    """"Problems": each row that is not ``graded`` with why, then what the final grades
    could not apply exactly (clamped adjustments, unknown submission times)."""
    lines = ["", "## Problems", ""]
    if not s.problems and not s.warnings:
        return [*lines, "None: every submission was graded."]
    shown = s.problems[:TOP_CHECKS] if compact else s.problems
    for rid, status, why in shown:
        lines.append(f"- {_text(rid)} ({_text(status)}): {_text(why)}")
    if len(shown) < len(s.problems):
        lines.append(f"- ... and {len(s.problems) - len(shown)} more (see summary.md)")
    warnings = s.warnings[:TOP_CHECKS] if compact else s.warnings
    for w in warnings:
        lines.append(f"- grade: {_text(w)}")
    if len(warnings) < len(s.warnings):
        lines.append(f"- ... and {len(s.warnings) - len(warnings)} more (see summary.md)")
    return lines


# --------------------------------------------------------------------------- figure
def summary_png(s: Summary, *, dpi: int = 100) -> bytes:
    """``summary.png``: the score histogram, each question's mean and median as a
    fraction of its points, and the status counts, side by side."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.8), dpi=dpi)  # fixed margins: a layout engine doubles the time
    FigureCanvasAgg(fig)
    ax_hist, ax_q, ax_status = fig.subplots(1, 3, width_ratios=[1.3, 1.2, 0.8], gridspec_kw={
        "left": 0.05, "right": 0.99, "bottom": 0.2, "top": 0.86, "wspace": 0.22})
    title = f"{s.assignment}: " if s.assignment else ""
    fig.suptitle(f"{title}{s.n} submission{'s' if s.n != 1 else ''}, mean {_num(s.mean)}, "
                 f"median {_num(s.median)} / {format_points(s.max_score)}")

    x = list(range(len(s.bins)))
    ax_hist.bar(x, [b.count for b in s.bins], color="#4c72b0")
    ax_hist.set_xticks(x, [b.label for b in s.bins], rotation=60 if len(x) > 6 else 0,
                       fontsize=8)
    ax_hist.set_xlabel("score")
    ax_hist.set_ylabel("submissions")
    ax_hist.set_title("Score histogram")
    ax_hist.yaxis.get_major_locator().set_params(integer=True)

    qx = list(range(len(s.questions)))
    width = 0.38

    def frac(v: float | None, q: QuestionStats) -> float:
        return (v or 0.0) / q.points if q.points else 0.0

    ax_q.bar([i - width / 2 for i in qx], [frac(q.mean, q) for q in s.questions], width,
             label="mean", color="#55a868")
    ax_q.bar([i + width / 2 for i in qx], [frac(q.median, q) for q in s.questions], width,
             label="median", color="#c44e52")
    ax_q.set_xticks(qx, [f"{q.id}\n({format_points(q.points)} pt)" for q in s.questions],
                    rotation=30 if len(qx) > 5 else 0, fontsize=8)
    ax_q.set_ylim(0, 1.05)
    ax_q.set_ylabel("fraction of the question's points")
    ax_q.set_title("Per question")
    ax_q.legend(loc="upper right", fontsize=8)

    names = [*STATUSES, "grader failure"]
    values = [s.counts.get(k, 0) for k in STATUSES] + [s.grader_failures]
    colors = ["#55a868", "#dd8452", "#c44e52", "#8c8c8c", "#8172b3"]
    bars = ax_status.bar(names, values, color=colors)
    ax_status.bar_label(bars, fontsize=8)
    ax_status.tick_params(axis="x", labelrotation=30, labelsize=8)
    ax_status.set_title("Status")
    ax_status.yaxis.get_major_locator().set_params(integer=True)
    ax_status.set_ylim(0, max(1, *values) * 1.15)

    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
