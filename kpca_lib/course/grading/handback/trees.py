"""What a gradebook hands back, rebuilt from ``grades.json`` and the instructor's policy.

After every ``kpca-course grade`` (also ``--resume``, ``--merge``, ``--regrade``) and every
``kpca-course export``, :func:`refresh` rewrites, from the rows on disk and the final
grades (:func:`~kpca_lib.course.grading.record.policy.finalize`: adjustments, by-hand questions,
late penalties):

* ``summary.md`` and ``summary.png`` (:mod:`~kpca_lib.course.grading.record.summary`);
* ``students/<student>/<row>.html`` and ``.md``: each student's feedback, as a page that
  opens offline and as Markdown (:mod:`~kpca_lib.course.grading.handback.feedback`), named after the
  row id in names every file system accepts;
* with ``archives``, ``archives/<student>.zip``: that student's folder as one file.

``kpca-course export`` (:func:`export_gradebook`) does the same, then writes the final
grades for the LMS into ``export/`` (:mod:`~kpca_lib.course.grading.handback.export`).

The ``feedback/`` files beside ``grades.json`` stay the grader's own record of each run
(automatic scores only); ``students/`` is what goes back to the students.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..record.gradebook import ARCHIVES, EXPORT, STUDENTS, Gradebook, peek
from ..record.policy import (
    ADJUSTMENTS_FILE,
    POLICY_FILE,
    Final,
    PolicyError,
    check_adjustments,
    load_adjustments,
    load_policy,
    unknown_extensions,
)
from ..record.roster import RosterError, load_roster, student_of
from ..record.summary import Summary, summarize, summary_markdown, summary_png
from .feedback import feedback_html, feedback_markdown, student_paths, zip_folder

__all__ = ["Refreshed", "refresh", "Exported", "export_gradebook", "EXPORT_FILES"]


@dataclass
class Refreshed:
    """What :func:`refresh` wrote: the summary (``None`` if it could not be computed), its
    Markdown, the final grades by row id, the hand-back files written (``students``,
    ``archives``: how many students) and what could not be written (``errors``)."""

    summary: Summary | None = None
    text: str = ""
    finals: dict[str, Final] = field(default_factory=dict)
    students: int = 0
    archives: int = 0
    errors: list[str] = field(default_factory=list)
    #: What the instructor should check in their files (an extension for nobody).
    warnings: list[str] = field(default_factory=list)


#: ``students/index.json``: row id → its folder and files. Read back at the next refresh, so
#: that names handed back once stay (a newcomer whose name clashes gets the ``~hash``).
INDEX = "index.json"


def _index(data: bytes | None) -> dict[str, tuple[str, str]]:
    """The names of the previous ``students/index.json`` (``{}`` if absent or not ours)."""
    try:
        raw = json.loads((data or b"{}").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    out = {}
    for rid, entry in raw.items() if isinstance(raw, dict) else ():
        if (isinstance(entry, dict) and isinstance(entry.get("folder"), str)
                and isinstance(entry.get("md"), str) and entry["md"].endswith(".md")):
            out[rid] = (entry["folder"], entry["md"][:-3])
    return out


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def refresh(book: Gradebook, *, archives: bool = False) -> Refreshed:
    """Rebuild the summary and the hand-back trees of ``book`` (started or opened); never
    raises for what it writes: the grades are on disk already, and what went wrong is in
    :attr:`Refreshed.errors`."""
    out = Refreshed()
    try:
        rows = book.saved_rows()
        nobody = unknown_extensions(book.policy, {student_of(str(r["submission"])) for r in rows},
                                    book.roster)
        if nobody:
            out.warnings.append(f"{book.policy.source}: late.extensions names "
                                f"{', '.join(repr(s) for s in nobody)}, who has no submission "
                                "and no roster entry (a misspelt student folder?)")
        out.finals = {str(r["submission"]): book.final(r) for r in rows}
        ruled = bool(book.adjustments or book.policy.late or book.policy.by_hand)
        out.summary = summarize(rows, book.points, assignment=book.assignment,
                                finals=out.finals if ruled else None)  # else the same grades
        out.text = summary_markdown(out.summary)
    except Exception as exc:
        out.errors.append(f"the summary could not be computed ({_describe(exc)})")
        return out
    files = {"summary.md": out.text.encode("utf-8")}
    try:
        files["summary.png"] = summary_png(out.summary)
    except Exception as exc:
        out.errors.append(f"summary.png could not be drawn ({_describe(exc)})")
    try:
        out.errors += book.write_generated(files)
    except Exception as exc:
        out.errors.append(f"the summary could not be written ({_describe(exc)})")
    try:
        tree: dict[tuple[str, str], bytes] = {}
        names = student_paths([str(r["submission"]) for r in rows], book.assignment,
                              previous=_index(book.read_tree(STUDENTS, INDEX)), reserved=[INDEX])
        for r in rows:
            rid = str(r["submission"])
            folder, stem = names[rid]
            kwargs = {"assignment": book.assignment, "points": book.points,
                      "titles": book.titles, "final": out.finals[rid]}
            tree[(folder, f"{stem}.md")] = feedback_markdown(r, **kwargs).encode("utf-8")
            tree[(folder, f"{stem}.html")] = feedback_html(r, **kwargs).encode("utf-8")
        out.students = len({folder for folder, _ in tree})
        index = {rid: {"folder": folder, "html": f"{stem}.html", "md": f"{stem}.md"}
                 for rid, (folder, stem) in sorted(names.items())}
        tree[("", INDEX)] = (json.dumps(index, indent=1, ensure_ascii=False) + "\n").encode()
        out.errors += book.write_tree(STUDENTS, tree)
        if archives:
            by_student: dict[str, dict[str, bytes]] = {}
            for (folder, name), data in tree.items():
                if folder:
                    by_student.setdefault(folder, {})[f"{folder}/{name}"] = data
            zips = {("", f"{folder}.zip"): zip_folder(files)
                    for folder, files in by_student.items()}
            out.errors += book.write_tree(ARCHIVES, zips)
            out.archives = len(zips)
    except Exception as exc:
        out.errors.append(f"the students' feedback could not be written ({_describe(exc)})")
    return out


# --------------------------------------------------------------------------- export
#: ``export/<file>``: the gradebook in each format ``kpca-course export`` writes.
EXPORT_FILES = {"plain": "grades-with-ids.csv", "canvas": "canvas-import.csv",
                "moodle": "moodle-import.csv"}


@dataclass
class Exported:
    """What :func:`export_gradebook` did: the files written (``export/<name>`` → rows in
    it), and, for the instructor to act on, the rows and students each file left out."""

    out: Path
    files: dict[str, int] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    refreshed: Refreshed = field(default_factory=Refreshed)
    adjustments: int = 0
    late: int = 0
    errors: list[str] = field(default_factory=list)


def export_gradebook(out: Path, *, formats: Sequence[str] = ("plain",),
                     roster_path: Path | None = None, archives: bool = False,
                     canvas_column: str | None = None, moodle_column: str | None = None) -> Exported:
    """Write the gradebook in ``out`` as the LMS files of ``formats`` (``export/``), after
    rewriting its tables, summary and hand-back trees under the current ``policy.toml``
    and ``adjustments.csv``.

    Raises ``ValueError`` (a :class:`~kpca_lib.course.grading.record.gradebook.GradebookError`,
    :class:`~kpca_lib.course.grading.record.policy.PolicyError` or
    :class:`~kpca_lib.course.grading.record.roster.RosterError`) before writing anything when
    the gradebook, the policy, the adjustments or the roster cannot be used, or when a
    format needs a roster and none is given; the roster given here replaces the policy's.
    """
    from .export import canvas_csv, moodle_csv, plain_csv, summary_line

    unknown = [f for f in formats if f not in EXPORT_FILES]
    if unknown:
        raise ValueError(f"unknown export format(s) {', '.join(unknown)}; choose among "
                         f"{', '.join(EXPORT_FILES)}.")
    assignment, points = peek(out)
    policy = load_policy(Path(out))
    policy.check(points)
    if roster_path is not None:
        try:
            roster = load_roster(roster_path)
        except RosterError as exc:
            raise PolicyError(str(exc)) from None
    else:
        roster = policy.load_roster()
    needs = [f for f in formats if f != "plain"]
    if needs and roster is None:
        raise PolicyError(f"the {' and '.join(needs)} export needs a roster (the students' ids in "
                          "the LMS): pass --roster FILE or set roster = \"...\" in "
                          f"{Path(out) / POLICY_FILE}.")
    adjustments = load_adjustments(Path(out))
    with Gradebook(Path(out), assignment=assignment, points=points, mode="merge") as book:
        check_adjustments(adjustments, list(book.rows), points,
                          str(Path(out) / ADJUSTMENTS_FILE), by_hand=policy.by_hand)
        book.set_policy(policy, adjustments, roster)
        done = Exported(Path(book.out))
        done.refreshed = refresh(book, archives=archives)
        done.errors += done.refreshed.errors
        rows = book.saved_rows()
        finals = [done.refreshed.finals[str(r["submission"])] for r in rows]
        records = {str(r["submission"]): r for r in rows}
        total = float(sum(points.values()))
        written: dict[tuple[str, str], bytes] = {}
        for fmt in formats:
            if fmt == "plain":
                result = plain_csv(finals, records, roster, points)
            elif fmt == "canvas":
                assert roster is not None
                result = canvas_csv(finals, roster, column=canvas_column or assignment,
                                    points_possible=total, records=records)
            else:
                assert roster is not None
                result = moodle_csv(finals, roster, records=records,
                                    column=moodle_column or f"Assignment: {assignment} (Real)",
                                    feedback={f.row: summary_line(f) for f in finals})
            written[("", EXPORT_FILES[fmt])] = result.text.encode("utf-8")
            done.files[f"export/{EXPORT_FILES[fmt]}"] = result.rows
            for mine, theirs in ((done.unmatched, result.unmatched), (done.absent, result.absent),
                                 (done.pending, result.pending), (done.held, result.held),
                                 (done.duplicates, result.duplicates)):
                mine.extend(x for x in theirs if x not in mine)
        done.errors += book.write_tree(EXPORT, written)
        done.adjustments = sum(len(f.applied) for f in finals)
        done.late = sum(1 for f in finals if f.late is not None and f.late.late)
    return done
