"""Gradebook exports: a plain CSV for the instructor, and the import files of Canvas and Moodle.

Pure writers: each function takes the final grades (:func:`~.policy.finalize`) and the
roster (:mod:`~.roster`) and returns an :class:`Export` whose ``text`` the caller writes
(UTF-8; no byte-order mark is needed by either LMS), with the lists of what did not go into
the file, so that nobody is dropped silently:

* ``unmatched``: gradebook rows the LMS could not attribute to a student (no roster entry,
  or the entry lacks the identifier the format needs);
* ``absent``: roster students without a gradebook row (the plain CSV lists them with status
  ``missing``; the LMS files leave them out, and the LMS leaves their grade as it is);
* ``held``: rows ``crashed`` by the grader's fault (``grader_error`` in ``grades.json``).
  Their 0 is not a grade: they are held out of every LMS file until they are regraded;
* ``pending``: rows with a by-hand question not graded yet. They *are* exported, with their
  current score (the by-hand question counting 0), so the instructor knows to export again;
* ``duplicates``: rows of a student with more than one gradebook row (two notebooks in one
  folder). An LMS file holds one grade per student, so none of them is exported and the
  instructor decides.

Every cell goes through :func:`~.gradebook.csv_cell` (a cell starting with ``= + - @`` or a
tab or line break gets a leading ``'``, so no spreadsheet runs it as a formula). A name that
is guarded so no longer equals the name the LMS has, which matters for neither format: both
match students by an identifier (below). An *identifier* the guard would change (an email
or id starting with ``+``, ``-``...) could not match anything; it is left out (Canvas), or
the row is ``unmatched`` (Moodle).

Canvas (:func:`canvas_csv`)
---------------------------
Followed: Instructure's guide "How do I import grades in the Gradebook?"
(https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807;
the page itself was not in the sources searched: its columns as summarised by ucfopen/Materia
issue #1071, Ohio State's "Import CSV File for Carmen Grades" page and PrairieLearn issue
#4547), the Canvas export as the VCU "Gradebook Action Menu" page describes it, and above all
the importer itself, canvas-lms ``app/models/gradebook_importer.rb`` (and its specs, which
upload this very layout):

* header ``Student,ID,SIS User ID,SIS Login ID,Section,<assignment>``: the importer requires
  ``Student`` then ``ID`` first, reads ``SIS User ID`` + ``SIS Login ID`` (or ``SIS Login ID``
  alone) next, and requires the last student column to be ``Section``. Every further column
  is an assignment, titled ``Name (assignment_id)`` as Canvas's export writes it. The
  importer finds the assignment by that id, else by a title equal to the whole header,
  else it offers to *create a new assignment* with that title. Columns named like the
  export's computed columns (``Current Score``, ``Final Grade``, ``Override Score``...) are
  dropped by the importer, so such a ``column`` is refused here;
* second row ``    Points Possible`` (the export's spelling; the importer recognises any first
  cell containing ``Points Possible``) with the assignment's points: the importer reads it and
  a new assignment takes it; whether it changes an existing assignment's points possible
  could not be confirmed, so give the assignment's current points possible;
* a student is found by ``ID`` (Canvas's numeric user id, the roster's ``lms_id``), else by
  ``SIS User ID``, else by ``SIS Login ID`` (the login's unique id, which is *not* always the
  email: only the roster's ``sis_login_id`` goes there, never a guessed email), else by a name
  equal to the user's name or sortable name (``Last, First``). A name alone can match a
  namesake, so a roster entry with none of the three ids is ``unmatched`` here;
* students not in the file: the importer only touches the rows it is given; their grades in
  Canvas stay as they are (they are reported in ``absent``). A blank or ``-`` grade is "no
  score": we never write one;
* the parser detects ``,`` or ``;`` and reads ``\\r\\n`` or ``\\n`` (Ruby's CSV, row separator
  ``:auto``); a decimal comma is accepted. We write ``,`` and ``\\r\\n`` (what Excel writes).

Moodle (:func:`moodle_csv`)
---------------------------
Followed: MoodleDocs "Grade import" (https://docs.moodle.org/311/en/Grade_import and the
same page for 2.6 and 2.7), and Moodle's code: ``grade/import/csv/classes/load_data.php``,
``grade/import/grade_import_form.php``, ``lib/csvlib.class.php``, ``grade/export/lib.php``
(``format_column_name``, with the string ``gradeexportcolumntype`` = ``{name} ({extra})``)
and the ``grade_export_userprofilefields`` default ``firstname,lastname,idnumber,
institution,department,email``:

* Moodle's own export has ``First name,Last name,ID number,Institution,Department,Email
  address`` then one column per grade item, ``<Module>: <name> (Real)`` (``Assignment:
  01_feature_maps (Real)``) and, with feedback, ``<Module>: <name> (Feedback)``; the import
  "file format is the same as the corresponding export format". We write that layout; the
  export's ``Last downloaded from this course`` column is left out (when present, the
  import refuses rows graded since that time unless forced);
* the import does not read the header names: on its preview page the instructor maps one
  column to the user (``Map from`` *Email address* ``Map to`` *Email address*, or *ID
  number*; by default it is *First name* to *user id*, which fails loudly), the grade
  column to the grade item, and the feedback column to "feedback for" that item;
* a user not found aborts the *whole* import; a row whose identifying cell is blank is
  skipped without resetting the student, so its grade would go to the *previous* row's
  student (``load_data.php`` keeps ``studentid`` across rows). So no row is written without
  an email (``unmatched``), and ``ID number`` is filled only when every exported student has
  one (else it is empty on every row, and mapping by it fails loudly). Emails are written as
  the roster has them: the docs warn that the import compares them case-sensitively;
* every row must have as many cells as the header (``csvweirdcolumns``); quoted cells may
  hold commas, quotes and line breaks (``fgetcsv``); ``\\r\\n`` is turned into ``\\n`` first;
* importing feedback also overwrites the item's grades, so the grade column is always in the
  same file (the docs' "Note 3"); an empty feedback cell writes empty feedback;
* a grade above 100 is refused unless the site allows it (``unlimitedgrades`` and
  ``gradepointmax``, "Note 2"): not checked here.

Not confirmed (the safest reading was taken): Canvas's handling of the Points Possible row
for an existing assignment (above); whether a current Moodle guesses the mapping from the
header names (the code read maps nothing by default: map by hand).
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..record.gradebook import csv_cell, format_points, problem
from ..record.policy import Final, format_time
from ..record.roster import Roster, RosterEntry, student_of
from ..text import visible

__all__ = [
    "Export", "plain_csv", "canvas_csv", "moodle_csv", "summary_line",
    "PLAIN_COLUMNS", "CANVAS_COLUMNS", "CANVAS_POINTS_POSSIBLE", "MOODLE_COLUMNS",
    "moodle_feedback_column", "moodle_text",
]

#: The plain CSV's columns, the questions' final points going between ``max_score`` and
#: ``auto_score``.
PLAIN_COLUMNS = ("student", "name", "email", "lms_id", "submission", "status", "score",
                 "max_score", "auto_score", "penalty", "late", "days_late", "submitted", "due",
                 "adjustments", "pending", "message")
#: Canvas's student columns, in the order of its gradebook export; the assignment follows.
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
#: The first cell of the second row of Canvas's export.
CANVAS_POINTS_POSSIBLE = "    Points Possible"
#: Moodle's user columns (``grade_export_userprofilefields``' default); the grade follows.
MOODLE_COLUMNS = ("First name", "Last name", "ID number", "Institution", "Department",
                  "Email address")

#: Headers that Canvas's importer treats as student columns (``GRADEBOOK_IMPORTER_RESERVED_NAMES``).
_CANVAS_RESERVED = ("Student", "LastName", "FirstName", "ID", "SIS User ID", "SIS Login ID",
                    "Section", "Integration ID", "Root Account")
#: Substrings of headers that Canvas's importer drops (``NON_ASSIGNMENT_COLUMN_HEADERS``).
_CANVAS_COMPUTED = ("Current Score", "Current Points", "Current Grade", "Final Score",
                    "Final Points", "Final Grade", "Override Score", "Override Grade",
                    "Override Status")
MAX_MESSAGE = 300


@dataclass(frozen=True)
class Export:
    """A file to write and what did not go into it (see the module's docstring).

    Attributes
    ----------
    text : str
        The CSV text; the caller writes it as UTF-8.
    rows : int
        Student lines in ``text`` (header and ``Points Possible`` row not counted).
    unmatched : list of str
        Row ids that the LMS cannot attribute to a student (no roster entry, or none of the
        identifiers the format needs); not in an LMS file.
    absent : list of str
        Roster students (``student`` keys) without a gradebook row, in roster order.
    pending : list of str
        Row ids with a by-hand question not graded yet (exported with the current score).
    held : list of str
        Row ids ``crashed`` by the grader's fault: never in an LMS file until regraded.
    duplicates : list of str
        Row ids of students with more than one row: none of them is in an LMS file.
    """

    text: str
    rows: int
    unmatched: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- helpers
class _Writer:
    """CSV lines, every cell through :func:`csv_cell`. A line with a ``\\r`` in a cell is
    written with every cell quoted (with ``\\n`` as terminator the csv module would not quote
    it, and a spreadsheet reads a bare ``\\r`` as a new line, like gradebook.py's ``_csv``)."""

    def __init__(self, terminator: str) -> None:
        self.buf = io.StringIO()
        self.plain = csv.writer(self.buf, lineterminator=terminator)
        self.quoted = csv.writer(self.buf, lineterminator=terminator, quoting=csv.QUOTE_ALL)

    def write(self, cells: Sequence[Any]) -> None:
        texts = [csv_cell(c) for c in cells]
        (self.quoted if any("\r" in t for t in texts) else self.plain).writerow(texts)

    def text(self) -> str:
        return self.buf.getvalue()


def _one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line (runs of white space, line breaks included, as one space; other
    invisible characters shown as ``<U+XXXX>``), at most ``limit`` characters."""
    flat = visible(" ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _is_held(final: Final, record: Mapping[str, Any] | None) -> bool:
    """A row ``crashed`` by the grader's fault. Without its record, a ``crashed`` row is held
    (a student's crash and a grader failure cannot be told apart from the grade alone)."""
    if final.status != "crashed":
        return False
    return record is None or bool(record.get("grader_error"))


def _message(final: Final, record: Mapping[str, Any]) -> str:
    """The row's problem (:func:`~.gradebook.problem`), for a row that is not ``graded``."""
    return problem(dict(record))


def _adjustments(final: Final) -> str:
    """``q2_feature_count = 3; whole +1``: what the instructor's adjustments did, in order."""
    return "; ".join(f"{a.question or 'whole'} {a.describe()}" for a in final.applied)


def summary_line(final: Final) -> str:
    """One short line for a student's LMS feedback: adjustments, late penalty, pending.

    Parameters
    ----------
    final : Final
        The row's final grade.

    Returns
    -------
    str
        E.g. ``"q2_feature_count = 3 (clear argument); late 2 days: -20% (1.2 point(s) off)"``,
        or ``""`` when there is nothing to say. At most 300 characters.
    """
    parts = [f"{a.question or 'whole'} {a.describe()} ({a.reason})" for a in final.applied]
    late = final.late
    if late is not None and late.submitted is None and not late.marked:
        parts.append("submission time unknown: no late penalty")
    elif late is not None and late.late:
        days = "day" if late.days == 1 else "days"
        parts.append(f"late {late.days} {days}: -{late.percent:g}% "
                     f"({format_points(final.penalty)} point(s) off)")
    if final.pending:
        parts.append(f"not graded yet: {', '.join(final.pending)}")
    return _one_line("; ".join(parts))


def _check_column(column: str, what: str) -> str:
    if not isinstance(column, str) or not column.strip():
        raise ValueError(f"{what} must be a non-empty column title.")
    if any(ch in column for ch in "\r\n\t") or visible(column) != column:
        raise ValueError(f"{what} {column!r} holds a line break or an invisible character; "
                         "write the title on one line.")
    if column != column.strip():
        raise ValueError(f"{what} {column!r} starts or ends with spaces, which the LMS trims; "
                         "write it without them.")
    if csv_cell(column) != column:
        raise ValueError(f"{what} {column!r} starts with {column[0]!r}, which a spreadsheet reads "
                         "as a formula (the file would hold it with a ' in front, which no "
                         "longer matches the LMS's column); rename the column.")
    return column


def _ident(value: str) -> str:
    """An identifier as written, or ``""`` when the formula guard would change it (it could
    then match nothing, or something else)."""
    value = value.strip()
    return value if csv_cell(value) == value else ""


def _duplicates(finals: Sequence[Final]) -> set[str]:
    counts = Counter(student_of(f.row) for f in finals)
    return {f.row for f in finals if counts[student_of(f.row)] > 1}


def _absent(finals: Sequence[Final], roster: Roster | None) -> list[str]:
    if roster is None:
        return []
    return roster.match([f.row for f in finals])[1]


# --------------------------------------------------------------------------- plain CSV
def plain_csv(finals: Sequence[Final], records: Mapping[str, Mapping[str, Any]],
              roster: Roster | None, points: Mapping[str, float]) -> Export:
    """The whole gradebook as one CSV for the instructor, roster students without a row included.

    Parameters
    ----------
    finals : sequence of Final
        The final grades, in gradebook order (the file's order).
    records : mapping of str to mapping
        ``grades.json``'s entries by row id (for ``messages``, ``grader_error`` and, without a
        late policy, ``submitted``). A row without a record gets empty cells there.
    roster : Roster or None
        The roster: its ``name``, ``email`` and ``lms_id`` fill those columns, and each of
        its students without a row gets a line with status ``missing`` (every cell but the
        student's own empty). ``None``: those columns are empty and nothing is ``absent``.
    points : mapping of str to float
        The assignment's questions and points; one column per question, in this order.

    Returns
    -------
    Export
        ``text`` with ``\\n`` line ends (like ``grades.csv``); columns ``student, name, email,
        lms_id, submission, status, score, max_score, <question...>, auto_score, penalty,
        late, days_late, submitted, due, adjustments, pending, message``. ``late`` is
        ``yes``, ``no``, ``unknown`` (submission time unknown) or empty (no late policy).
        A grader-failure row is in the file (its ``score`` empty, its ``message`` starting
        ``grader failure:``) and in ``held``; ``unmatched``: rows without a roster entry.
    """
    out = _Writer("\n")
    questions = list(points)
    out.write([*PLAIN_COLUMNS[:8], *questions, *PLAIN_COLUMNS[8:]])
    unmatched, pending, held = [], [], []
    for f in finals:
        record = records.get(f.row)
        rec: Mapping[str, Any] = record if record is not None else {}
        entry = roster.get(f.student) if roster is not None else None
        if roster is not None and entry is None:
            unmatched.append(f.row)
        if f.pending:
            pending.append(f.row)
        is_held = _is_held(f, record)
        if is_held:
            held.append(f.row)
        late = f.late
        if late is None:
            late_cell, days, submitted, due = "", "", str(rec.get("file_time") or ""), ""
        elif late.submitted is None:
            late_cell = ("yes" if late.late else "no") if late.marked else "unknown"
            days = str(late.days) if late.marked else ""
            submitted, due = "", format_time(late.due)
        else:
            late_cell = "yes" if late.late else "no"
            days, submitted, due = str(late.days), format_time(late.submitted), format_time(late.due)
        out.write([
            f.student, entry.display_name if entry else "", entry.email if entry else "",
            entry.lms_id if entry else "", f.row, f.status,
            "" if is_held else format_points(f.score), format_points(f.max_score),
            *[format_points(f.questions[q]) if q in f.questions else "" for q in questions],
            format_points(f.auto_score), format_points(f.penalty), late_cell, days,
            _one_line(submitted), due, _adjustments(f), "; ".join(f.pending), _message(f, rec),
        ])
    absent = _absent(finals, roster)
    blank = [""] * (len(PLAIN_COLUMNS) - 6 + len(questions))
    for student in absent:
        assert roster is not None
        e = roster[student]
        out.write([student, e.display_name, e.email, e.lms_id, "", "missing", *blank])
    dups = _duplicates(finals)
    return Export(out.text(), len(finals) + len(absent), unmatched, absent, pending, held,
                  [f.row for f in finals if f.row in dups])


# --------------------------------------------------------------------------- LMS files
def _lms_rows(finals: Sequence[Final], records: Mapping[str, Mapping[str, Any]] | None,
              roster: Roster) -> tuple[list[tuple[Final, RosterEntry]], Export]:
    """The rows an LMS file may hold, with their roster entries, and what is left out
    (``unmatched`` only for rows without a roster entry; the caller adds its own)."""
    dups = _duplicates(finals)
    rows: list[tuple[Final, RosterEntry]] = []
    unmatched, pending, held, duplicates = [], [], [], []
    for f in finals:
        if _is_held(f, None if records is None else records.get(f.row)):
            held.append(f.row)
            continue
        if f.row in dups:
            duplicates.append(f.row)
            continue
        entry = roster.get(f.student)
        if entry is None:
            unmatched.append(f.row)
            continue
        if f.pending:
            pending.append(f.row)
        rows.append((f, entry))
    return rows, Export("", 0, unmatched, _absent(finals, roster), pending, held, duplicates)


def _finish(text: str, written: int, finals: Sequence[Final], unmatched: list[str],
            left: Export) -> Export:
    """The :class:`Export` of an LMS file: ``unmatched`` in gradebook order, ``pending`` only
    for rows that are in the file."""
    out = set(unmatched)
    return Export(text, written, [f.row for f in finals if f.row in out], left.absent,
                  [r for r in left.pending if r not in out], left.held, left.duplicates)


def _need_roster(roster: Roster | None, what: str) -> Roster:
    if roster is None:
        raise ValueError(f"{what} needs the roster (the students' LMS ids): set roster in "
                         "policy.toml.")
    return roster


def canvas_csv(finals: Sequence[Final], roster: Roster, *, column: str, points_possible: float,
               records: Mapping[str, Mapping[str, Any]] | None = None) -> Export:
    """Canvas's gradebook import file for one assignment (see the module's docstring).

    Parameters
    ----------
    finals : sequence of Final
        The final grades, in gradebook order (the file's order).
    roster : Roster
        The roster: ``lms_id`` is Canvas's ``ID``; the columns ``sis_user_id``,
        ``sis_login_id`` and ``section`` fill those columns; ``first_name`` and
        ``last_name`` give ``Student`` as ``Last, First`` (else ``name``).
    column : str
        The assignment's column title as Canvas's export writes it, ``Name (assignment_id)``,
        e.g. ``"Homework 1 (123456)"``; without the id Canvas matches the title or creates a
        new assignment.
    points_possible : float
        The assignment's points possible, for the ``Points Possible`` row (>= 0).
    records : mapping of str to mapping, optional
        ``grades.json``'s entries by row id, to tell a grader failure (held) from a
        student's crash (exported with its score). Without them every ``crashed`` row is held.

    Returns
    -------
    Export
        ``text`` with ``\\r\\n`` line ends: ``Student,ID,SIS User ID,SIS Login ID,Section,
        <column>``, the ``Points Possible`` row, one line per exportable row (score = final
        score). ``unmatched``: rows without a roster entry or whose entry has none of
        ``lms_id``, ``sis_user_id``, ``sis_login_id``. ``absent`` students are not in the
        file: Canvas leaves their grades alone.

    Raises
    ------
    ValueError
        ``column`` is empty, on several lines, starts like a formula, is a student column
        or a computed column that Canvas ignores; ``points_possible`` is not a number >= 0;
        there is no roster.
    """
    roster = _need_roster(roster, "The Canvas export")
    _check_column(column, "The Canvas column")
    if column in _CANVAS_RESERVED or any(c in column for c in _CANVAS_COMPUTED):
        raise ValueError(f"The Canvas column {column!r} is a name Canvas's importer reads as a "
                         "student or computed column and would ignore; use the assignment's "
                         "title, e.g. 'Homework 1 (123456)'.")
    if (isinstance(points_possible, bool) or not isinstance(points_possible, (int, float))
            or not math.isfinite(points_possible) or points_possible < 0):
        raise ValueError(f"points_possible must be a number >= 0; got {points_possible!r}.")
    rows, left = _lms_rows(finals, records, roster)
    out = _Writer("\r\n")
    out.write([*CANVAS_COLUMNS, column])
    out.write([CANVAS_POINTS_POSSIBLE, "", "", "", "", format_points(points_possible)])
    unmatched, written = list(left.unmatched), 0
    for f, e in rows:
        ids = [_ident(e.lms_id), _ident(e.get("sis_user_id")), _ident(e.get("sis_login_id"))]
        if not any(ids):
            unmatched.append(f.row)
            continue
        if e.first_name and e.last_name:
            name = f"{e.last_name}, {e.first_name}"
        else:
            name = e.display_name
        if "Points Possible" in name:  # the importer would read the line as the points row
            name = ""
        out.write([name, *ids, e.get("section"), format_points(f.score)])
        written += 1
    return _finish(out.text(), written, finals, unmatched, left)


def moodle_text(text: str) -> str:
    """``text`` on one line, as Moodle shows it: Moodle renders its feedback column as HTML
    (the comment is stored and shown formatted), so ``<``, ``>`` and ``&`` are written as
    ``&lt;``, ``&gt;`` and ``&amp;``, which it shows as the characters themselves: a reason
    such as ``<b>x</b>`` or ``<script>`` is read, never run or rendered."""
    return html.escape(_one_line(text), quote=False)


def moodle_feedback_column(column: str) -> str:
    """The feedback column's title for a grade column, as Moodle's export names it:
    ``Assignment: X (Real)`` gives ``Assignment: X (Feedback)``; another title gets
    `` (Feedback)`` appended."""
    suffix = " (Real)"
    base = column[: -len(suffix)] if column.endswith(suffix) else column
    return f"{base} (Feedback)"


def moodle_csv(finals: Sequence[Final], roster: Roster, *, column: str,
               feedback: Mapping[str, str] | None = None,
               records: Mapping[str, Mapping[str, Any]] | None = None) -> Export:
    """Moodle's CSV grade import file for one grade item (see the module's docstring).

    Parameters
    ----------
    finals : sequence of Final
        The final grades, in gradebook order (the file's order).
    roster : Roster
        The roster: ``email`` identifies the student (required); ``id_number`` fills
        ``ID number`` when every exported student has one; ``first_name``, ``last_name``
        (else ``name`` as the first name), ``institution`` and ``department`` are for the
        reader (Moodle ignores unmapped columns).
    column : str
        The grade column's title, as Moodle's export names it:
        ``"Assignment: 01_feature_maps (Real)"``. The instructor maps it to the grade item on
        Moodle's preview page.
    feedback : mapping of str to str, optional
        A feedback text per row id (e.g. :func:`summary_line`), written on one line in a
        column ``moodle_feedback_column(column)`` that the instructor maps to "feedback for"
        the item, through :func:`moodle_text` (Moodle shows that column as HTML). ``None``: no feedback column (Moodle keeps the feedback it has).
    records : mapping of str to mapping, optional
        ``grades.json``'s entries by row id, to tell a grader failure (held) from a
        student's crash. Without them every ``crashed`` row is held.

    Returns
    -------
    Export
        ``text`` with ``\\r\\n`` line ends: ``First name,Last name,ID number,Institution,
        Department,Email address,<column>[,<feedback column>]``, one line per exportable row.
        ``unmatched``: rows without a roster entry or without a usable email.

    Raises
    ------
    ValueError
        ``column`` is empty, on several lines, starts like a formula or is a user column;
        there is no roster.
    """
    roster = _need_roster(roster, "The Moodle export")
    _check_column(column, "The Moodle column")
    if column in MOODLE_COLUMNS:
        raise ValueError(f"The Moodle column {column!r} is one of the user columns; use the "
                         "grade item's name, e.g. 'Assignment: 01_feature_maps (Real)'.")
    note = moodle_feedback_column(column) if feedback is not None else None
    rows, left = _lms_rows(finals, records, roster)
    unmatched = list(left.unmatched)
    usable = []
    for f, e in rows:
        if _ident(e.email):
            usable.append((f, e))
        else:
            unmatched.append(f.row)
    id_numbers = [_ident(e.get("id_number")) for _, e in usable]
    with_ids = bool(usable) and all(id_numbers)
    out = _Writer("\r\n")
    out.write([*MOODLE_COLUMNS, column, *([note] if note else [])])
    for f, e in usable:
        first, last = (e.first_name, e.last_name) if (e.first_name or e.last_name) else (e.name, "")
        cells = [first, last, _ident(e.get("id_number")) if with_ids else "",
                 e.get("institution"), e.get("department"), _ident(e.email),
                 format_points(f.score)]
        if feedback is not None:
            cells.append(moodle_text(feedback.get(f.row, "")))
        out.write(cells)
    return _finish(out.text(), len(usable), finals, unmatched, left)
