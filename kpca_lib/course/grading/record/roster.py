"""The course roster: which student a submission folder belongs to, and their LMS ids.

A roster is a CSV file the instructor keeps (exported from the LMS, or typed), one row per
student, with a header. Column names are read without case, spaces or dashes
(``Student``, ``student``, ``LMS ID``, ``lms_id`` are the same). The columns:

* ``student`` (required): the student's folder among the submissions, i.e. the row id
  without its last part (``alice`` for the row ``alice/01_feature_maps``; see
  :func:`student_of`), or the row id itself for a flat folder of notebooks;
* ``name``, or ``first_name`` and ``last_name``; ``email``; ``lms_id`` (the LMS's
  numeric user id, e.g. Canvas's ``ID``); any other column (``sis_user_id``,
  ``sis_login_id``, ``section``, ``username``, ``id_number``, ``submitted_at``...) is
  kept as it is, for the exports and the late-work policy.

:func:`load_roster` refuses a roster that cannot identify students unambiguously (no
``student`` column, an empty or duplicate ``student``, a duplicate ``email`` or
``lms_id``), naming the lines, and changes nothing.

Rosters as the LMSs export them are recognised by their headers (:data:`LAYOUTS`), with no
``student`` column needed; the student's folder name is then taken from the LMS's own ids,
never from a display name (two students can share a name, and a name can change):

* **Canvas's gradebook export** (Grades → Export → CSV): ``Student, ID, SIS User ID, SIS
  Login ID, [Integration ID,] Section`` then one column per assignment. ``Student`` is the
  sortable name (``Last, First``), ``ID`` Canvas's user id (``lms_id``, which names the
  student in Canvas's submission download). Rows whose first cell holds ``Points
  Possible`` (and the ``Manual Posting``/``Read Only`` rows of newer exports) are not
  students. Folder: the SIS login id when it is a plain name, else the Canvas ``ID``.
* **Moodle's grading worksheet** (Assignment → Submissions → "Download grading worksheet"):
  ``Identifier, Full name, Email address, Status, Grade, ..., Last modified (submission),
  ...``. ``Identifier`` is ``Participant 123456``: the participant number that Moodle's
  submission download puts in each folder name (``participant_id``). Folder: the email.
* **Moodle's grade export** (Grades → Export → Plain text file) or **participants list**
  (Participants → download table data as CSV): ``First name, Last name, [ID number, ...]
  Email address, ...``. Folder: the email. (Neither names the participant number, so they
  serve ``export`` but cannot match a Moodle download: give the worksheet for ``collect``.)
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RosterError", "RosterEntry", "Roster", "load_roster", "parse_roster", "student_of",
           "column_key", "UNIQUE_COLUMNS", "LAYOUTS", "safe_folder"]

#: Columns whose values must be unique when given (each names one student).
UNIQUE_COLUMNS = ("student", "email", "lms_id", "sis_user_id", "sis_login_id", "id_number",
                  "username", "participant_id")
#: Other names LMS exports give a column (after :func:`column_key`).
ALIASES = {"e_mail": "email", "email_address": "email", "mail": "email",
           "first_names": "first_name", "firstname": "first_name", "given_name": "first_name",
           "lastname": "last_name", "surname": "last_name", "family_name": "last_name",
           "idnumber": "id_number", "sis_id": "sis_user_id"}
MAX_ROSTER_BYTES = 20_000_000
#: How each recognised layout is described in messages (which columns were used).
LAYOUTS = {
    "plain": "a roster with a `student` column (the students' folder names)",
    "canvas": "Canvas's gradebook export (student folder from SIS Login ID, else ID; Canvas's "
              "ID as lms_id)",
    "moodle-worksheet": "Moodle's grading worksheet (student folder from Email address; "
                        "Identifier as the participant number)",
    "moodle": "Moodle's grade export or participants list (student folder from Email address)",
}
#: First cells of Canvas export rows that are not students.
_CANVAS_NOT_STUDENTS = ("Points Possible", "Manual Posting", "Read Only")
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")


class RosterError(ValueError):
    """The roster cannot be used; the message names the line(s) and the fix."""


def safe_folder(name: str) -> bool:
    """Whether ``name`` can be a student's folder as it is: letters, digits and ``. _ @ + -``,
    not starting with a dot or dash, at most 100 characters (every file system takes it)."""
    return bool(_SAFE.fullmatch(name))


def student_of(row_id: str) -> str:
    """The student a row belongs to: the row id without its last part (``alice`` for
    ``alice/01_feature_maps``, ``sec1/alice`` for ``sec1/alice/01``), or the whole id for a
    notebook that is not in a folder of its own (``alice`` for ``alice``)."""
    return row_id.rsplit("/", 1)[0] if "/" in row_id else row_id


def column_key(name: str) -> str:
    """A header as the roster reads it: ``LMS ID`` → ``lms_id``, ``First-Name`` → ``first_name``."""
    key = re.sub(r"[\s\-]+", "_", name.strip().lower()).strip("_")
    return ALIASES.get(key, key)


@dataclass(frozen=True)
class RosterEntry:
    """One student of the roster (``line``: its line in the file, for messages)."""

    student: str
    name: str = ""
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_id: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def display_name(self) -> str:
        """``name``, else ``first_name last_name``, else ``""``."""
        return self.name or " ".join(p for p in (self.first_name, self.last_name) if p)

    def get(self, column: str) -> str:
        """The value of any column (``""`` if the roster has no such column)."""
        key = column_key(column)
        if key in ("student", "name", "first_name", "last_name", "email", "lms_id"):
            return str(getattr(self, key))
        return self.extra.get(key, "")


@dataclass(frozen=True)
class Roster:
    """The students, by ``student`` key, in the file's order; ``columns``: the header as read."""

    entries: dict[str, RosterEntry]
    columns: tuple[str, ...]
    source: str = ""
    #: Which layout the file was read as (a key of :data:`LAYOUTS`).
    layout: str = "plain"

    @property
    def described(self) -> str:
        """The file and how it was read, for messages."""
        return f"{self.source} (read as {LAYOUTS.get(self.layout, self.layout)})"

    def by(self, column: str, value: str) -> RosterEntry | None:
        """The student whose ``column`` is ``value`` (ids compared as written, emails without
        case), or ``None``."""
        key = column_key(column)
        want = value.strip().casefold() if key == "email" else value.strip()
        for entry in self.entries.values():
            have = entry.get(key).strip()
            if (have.casefold() if key == "email" else have) == want and have:
                return entry
        return None

    def __contains__(self, student: object) -> bool:
        return student in self.entries

    def __getitem__(self, student: str) -> RosterEntry:
        return self.entries[student]

    def get(self, student: str) -> RosterEntry | None:
        return self.entries.get(student)

    def match(self, row_ids: Iterable[str]) -> tuple[list[str], list[str]]:
        """``(rows without a roster entry, students without a row)``, each in order."""
        ids = list(row_ids)
        students = {student_of(r) for r in ids}
        unknown = [r for r in ids if student_of(r) not in self.entries]
        absent = [s for s in self.entries if s not in students]
        return unknown, absent


def parse_roster(text: str, source: str = "roster") -> Roster:
    """A :class:`Roster` from CSV text; :class:`RosterError` naming every problem."""
    rows, lines = _records(text, source)
    while rows and not any(c.strip() for c in rows[0]):
        rows.pop(0)
        lines.pop(0)
    if not rows:
        raise RosterError(f"{source} is empty: it needs a header line with a `student` column "
                          "(the students' folder names), then one line per student.")
    header = [column_key(c) for c in rows[0]]
    layout = _layout(header)
    if layout != "plain":
        header, rows, lines = _from_lms(layout, header, rows, lines)
    if "student" not in header:
        shown = ", ".join(repr(c) for c in rows[0][:12])
        raise RosterError(f"{source} has no `student` column (its header is {shown}); add one "
                          "with each student's folder name among the submissions.")
    dup = sorted({c for c in header if c and header.count(c) > 1})
    if dup:
        raise RosterError(f"{source} has the column(s) {', '.join(dup)} twice; keep one of each.")
    problems: list[str] = []
    entries: dict[str, RosterEntry] = {}
    seen: dict[str, dict[str, int]] = {c: {} for c in UNIQUE_COLUMNS}
    for n, cells in zip(lines[1:], rows[1:], strict=True):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) > len(header) and any(c.strip() for c in cells[len(header):]):
            problems.append(f"line {n} has {len(cells)} cells but the header has {len(header)} "
                            "(a comma inside a name needs quotes)")
            continue
        if any("\n" in c or "\r" in c for c in cells):
            problems.append(f"line {n} has a cell that spans lines (an unclosed quote \"?)")
            continue
        values = {k: (cells[i].strip() if i < len(cells) else "") for i, k in enumerate(header) if k}
        student = values.get("student", "").strip("/")
        if not student:
            problems.append(f"line {n} has no `student`")
            continue
        values["student"] = student
        for column in UNIQUE_COLUMNS:
            v = values.get(column, "")
            key = v.casefold() if column == "email" else v
            if not v:
                continue
            if key in seen[column]:
                problems.append(f"{column} {v!r} is on line {seen[column][key]} and line {n}")
            else:
                seen[column][key] = n
        known = ("student", "name", "first_name", "last_name", "email", "lms_id")
        entries.setdefault(student, RosterEntry(
            line=n, extra={k: v for k, v in values.items() if k not in known},
            **{k: values.get(k, "") for k in known}))
    if problems:
        more = f" and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise RosterError(f"{source} cannot be used: {'; '.join(problems[:10])}{more}. Each "
                          "student must be on one line, with ids no other student has; nothing "
                          "was changed.")
    return Roster(entries, tuple(header), source, layout)


def _layout(header: list[str]) -> str:
    """Which LMS export a header is (``plain`` when none, or when it has a ``student``
    column of folder names and no LMS ids)."""
    has = set(header)
    if {"student", "id"} <= has and has & {"sis_login_id", "sis_user_id", "section"}:
        return "canvas"
    if "student" in has:
        return "plain"
    if {"identifier", "full_name", "email"} <= has:
        return "moodle-worksheet"
    if {"first_name", "last_name", "email"} <= has:
        return "moodle"
    return "plain"


def _from_lms(layout: str, header: list[str], rows: list[list[str]],
              lines: list[int]) -> tuple[list[str], list[list[str]], list[int]]:
    """An LMS export as a roster with a ``student`` column: the header renamed (the display
    name as ``name``, the LMS's ids as ``lms_id``/``participant_id``), rows that are not
    students dropped, and each student's folder name from the LMS's ids."""
    rename = {"canvas": {"student": "name", "id": "lms_id"},
              "moodle-worksheet": {"full_name": "name", "identifier": "participant_id"},
              "moodle": {}}[layout]
    header = [rename.get(c, c) for c in header]
    out_rows, out_lines = [header + ["student"]], [lines[0]]
    for n, cells in zip(lines[1:], rows[1:], strict=True):
        first = cells[0].strip() if cells else ""
        if layout == "canvas" and any(word in first for word in _CANVAS_NOT_STUDENTS):
            continue
        values = dict(zip(header, (c.strip() for c in cells), strict=False))
        if layout == "moodle-worksheet":
            number = re.sub(r"\D", "", values.get("participant_id", ""))
            cells = [number if k == "participant_id" else c
                     for k, c in zip(header, cells, strict=False)]
            values["participant_id"] = number
        out_rows.append([*cells, *[""] * (len(header) - len(cells)), _folder(layout, values)])
        out_lines.append(n)
    return header + ["student"], out_rows, out_lines


def _folder(layout: str, values: Mapping[str, str]) -> str:
    """A student's folder name from the LMS's ids (``""`` when it has none)."""
    if layout == "canvas":
        login = values.get("sis_login_id", "")
        return login if safe_folder(login) else values.get("lms_id", "")
    email = values.get("email", "")
    if safe_folder(email):
        return email
    number = values.get("participant_id", "")
    return f"participant_{number}" if number else ""


def _records(text: str, source: str) -> tuple[list[list[str]], list[int]]:
    """The CSV records of ``text`` and the file line each starts on (a quoted line break
    inside a cell makes a record span lines)."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    rows, lines, start = [], [], 1
    try:
        for cells in reader:
            rows.append(cells)
            lines.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise RosterError(f"{source} is not valid CSV near line {reader.line_num} ({exc}); save "
                          "it again as CSV (UTF-8).") from None
    return rows, lines


def load_roster(path: str | Path) -> Roster:
    """Read a roster file (UTF-8, with or without a byte-order mark); see :func:`parse_roster`."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read(MAX_ROSTER_BYTES + 1)
    except OSError as exc:
        raise RosterError(f"the roster {p} cannot be read ({exc.strerror or exc}).") from None
    if len(data) > MAX_ROSTER_BYTES:
        raise RosterError(f"the roster {p} is larger than {MAX_ROSTER_BYTES // 1_000_000} MB; is "
                          "it a roster?")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RosterError(f"the roster {p} is not UTF-8 text; save it as CSV UTF-8.") from None
    return parse_roster(text, str(p))
