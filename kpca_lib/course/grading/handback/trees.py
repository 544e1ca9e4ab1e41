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
from typing import Any

from ..record.gradebook import ARCHIVES, EXPORT, INDEX, INDEX_SIG, STUDENTS, Gradebook, peek
from ..record.policy import (
    ADJUSTMENTS_FILE,
    POLICY_FILE,
    Final,
    PolicyError,
    check_adjustments,
    file_time_warnings,
    load_adjustments,
    load_policy,
    unknown_extensions,
)
from ..record.roster import Roster, RosterError, load_roster, student_of
from ..record.seal import seal_key, sealed, signature
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


#: ``students/index.json`` (:data:`~..record.gradebook.INDEX`): read back at the next refresh,
#: so that names handed back once stay (a newcomer whose name clashes gets the ``~hash``).
#: ``index.json.sig`` seals it under a key drawn from the grading secret (which lives outside
#: the gradebook folder). An index whose seal does not hold was edited (or written with
#: another secret): its names are not used, and the refresh says so.


def _index_key() -> bytes | None:
    """The key that seals ``students/index.json`` (:func:`~..record.seal.seal_key`)."""
    return seal_key(f"{STUDENTS}/{INDEX}")


def _signature(data: bytes, key: bytes) -> bytes:
    return signature(data, key)


def _signed_index(data: bytes | None, sig: bytes | None) -> tuple[bytes | None, str]:
    """``students/index.json``'s bytes if they are the ones kpca-course signed, else
    ``(None, why)`` (``why`` empty when there is no index yet)."""
    if data is None:
        return None, ""
    key = _index_key()
    if key is None:
        return None, (f"{STUDENTS}/{INDEX} cannot be verified (no grading secret: "
                      "$KPCA_GRADING_SECRET or ~/.config/kpca-course/grading-secret)")
    why = sealed(data, sig, key)
    if why:
        return None, (f"{STUDENTS}/{INDEX} was changed outside kpca-course ({why}, "
                      f"{STUDENTS}/{INDEX_SIG}; or it was written with another grading secret, "
                      "or by an older kpca-course): its names were not used, every row's "
                      "feedback was placed after its row id again, and the index was rewritten")
    return data, ""


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
    out.warnings += book.warnings  # e.g. a grades.json changed outside kpca-course
    try:
        rows = book.saved_rows()
        nobody = unknown_extensions(book.policy, {student_of(str(r["submission"])) for r in rows},
                                    book.roster)
        if nobody:
            out.warnings.append(f"{book.policy.source}: late.extensions names "
                                f"{', '.join(repr(s) for s in nobody)}, who has no submission "
                                "and no roster entry (a misspelt student folder?)")
        out.warnings += file_time_warnings(book.policy, rows)
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
        index_data, why = _signed_index(book.read_tree(STUDENTS, INDEX),
                                        book.read_tree(STUDENTS, INDEX_SIG))
        if why:
            out.warnings.append(why)
        names = student_paths([str(r["submission"]) for r in rows], book.assignment,
                              previous=_index(index_data), reserved=[INDEX, INDEX_SIG])
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
        key = _index_key()
        if key is not None:
            tree[("", INDEX_SIG)] = _signature(tree[("", INDEX)], key)
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
    #: Rows whose roster entry lacks the id one LMS file needs: ``export/<file>`` -> row ids.
    unidentified: dict[str, list[str]] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    refreshed: Refreshed = field(default_factory=Refreshed)
    adjustments: int = 0
    late: int = 0
    errors: list[str] = field(default_factory=list)
    #: LMS files not written because they would hold no student: name -> why.
    empty: dict[str, str] = field(default_factory=dict)


def export_gradebook(out: Path, *, formats: Sequence[str] = ("plain",),
                     roster_path: Path | None = None, archives: bool = False,
                     canvas_column: str | None = None, moodle_column: str | None = None,
                     allow_missing: bool = False) -> Exported:
    """Write the gradebook in ``out`` as the LMS files of ``formats`` (``export/``), after
    rewriting its tables, summary and hand-back trees under the current ``policy.toml``
    and ``adjustments.csv``.

    Raises ``ValueError`` (a :class:`~kpca_lib.course.grading.record.gradebook.GradebookError`,
    :class:`~kpca_lib.course.grading.record.policy.PolicyError` or
    :class:`~kpca_lib.course.grading.record.roster.RosterError`) before writing anything when
    the gradebook, the policy, the adjustments or the roster cannot be used, or when a
    format needs a roster and none is given; the roster given here replaces the policy's;
    also when the roster matches none of the gradebook's rows (the message says how the roster
    was read).

    An LMS file that would hold no student is not written (``empty`` says why): a file with
    students is never replaced by an empty one, and without ``allow_missing`` no empty one is
    written at all.
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
        _check_roster_matches(roster, list(book.rows.values()))
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
            _take(done, book, EXPORT_FILES[fmt], result, allow_missing and fmt != "plain",
                  roster, written)
        if written:
            done.errors += book.write_tree(EXPORT, written)
        done.adjustments = sum(len(f.applied) for f in finals)
        done.late = sum(1 for f in finals if f.late is not None and f.late.late)
    return done


def _take(done: Exported, book: Gradebook, name: str, result: Any, allow_missing: bool,
          roster: Roster | None, written: dict[tuple[str, str], bytes]) -> None:
    """Add one export file to what is written (an LMS file with no student only as
    :func:`_empty_file` allows) and what it left out to ``done``'s lists: a row without a
    roster entry to ``unmatched``, one whose entry lacks this file's id to ``unidentified``."""
    why = None if name == EXPORT_FILES["plain"] or result.rows else _empty_file(
        book, name, allow_missing)
    if why is not None:
        done.empty[f"export/{name}"] = why
    else:
        written[("", name)] = result.text.encode("utf-8")
        done.files[f"export/{name}"] = result.rows
    nobody = [r for r in result.unmatched if roster is None or student_of(r) not in roster]
    lacking = [r for r in result.unmatched if r not in nobody]
    if lacking:
        done.unidentified[f"export/{name}"] = lacking
    for mine, theirs in ((done.unmatched, nobody), (done.absent, result.absent),
                         (done.pending, result.pending), (done.held, result.held),
                         (done.duplicates, result.duplicates)):
        mine.extend(x for x in theirs if x not in mine)


def _check_roster_matches(roster: Roster | None, rows: Sequence[dict]) -> None:
    """``PolicyError`` when the roster names none of the gradebook's students (a roster of
    display names, or of another course): every LMS file would be empty."""
    if roster is None or not rows or not roster.entries:
        return
    students = [student_of(str(r["submission"])) for r in rows]
    if any(s in roster for s in students):
        return
    theirs = ", ".join(repr(s) for s in list(roster.entries)[:3])
    ours = ", ".join(repr(s) for s in dict.fromkeys(students[:3]))
    raise PolicyError(f"the roster {roster.described} matches none of the gradebook's "
                      f"{len(rows)} row(s): its students are {theirs}..., the gradebook's "
                      f"folders {ours}.... The student column must hold each student's folder "
                      "name among the submissions (kpca-course collect names them after the "
                      "roster); nothing was written.")


def _empty_file(book: Gradebook, name: str, allow_missing: bool) -> str | None:
    """Why an LMS file with no student is not written (``None``: write it)."""
    old = book.read_tree(EXPORT, name)
    lines = [ln for ln in (old or b"").decode("utf-8", "replace").splitlines()[1:]
             if ln.strip() and "Points Possible" not in ln]
    if lines:
        return (f"it would hold no student; the existing file, with {len(lines)} student "
                "line(s), was kept")
    if not allow_missing:
        return "it would hold no student (nobody matched the roster); not written"
    return None
