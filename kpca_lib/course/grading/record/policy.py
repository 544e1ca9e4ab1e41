"""The instructor's grading policy: by-hand questions, overrides and late work.

Two files the instructor writes, in the gradebook folder (kpca-course reads them and never
writes, replaces or deletes them):

``policy.toml`` (optional)::

    roster = "../roster.csv"            # relative to this file (used by `export` and late work)

    [questions]
    by_hand = ["q2_feature_count"]      # points only from adjustments.csv

    [late]
    deadline = 2026-12-01T23:59:00+01:00
    submitted = "lms"                   # "lms" (default), "file", "name", "roster"
    grace_minutes = 15                  # not late before the deadline plus this
    penalty_per_day = 10                # percent, per started day after the deadline
    max_penalty = 100                   # percent (100: a very late submission scores 0)
    penalty_of = "score"                # "score" (what it earned) or "max_score"
    # submitted = "lms": the LMS's time that `kpca-course collect` recorded, else the LMS's late
    # mark (Canvas's download has no times: a file it marks late is at least 1 day late),
    # else the time collect received the file.
    # submitted = "file": the file's modification time, which a student can set (a zip keeps
    # the times its maker gave); warned about when implausible. released = 2026-11-20T09:00:00Z
    # (optional) adds "before the release" to those warnings.
    # submitted = "name": a regular expression whose first group is the time in the path
    # (relative to the submissions' folder), read with `format`; e.g. Blackboard's archives:
    # pattern = '_attempt_(\\d{4}-\\d\\d-\\d\\d-\\d\\d-\\d\\d-\\d\\d)'
    # format = "%Y-%m-%d-%H-%M-%S"
    # submitted = "roster": the roster's column `column` (ISO 8601 times)
    # column = "submitted_at"
    # timezone = "Europe/Berlin"        # for times written without an offset

    [late.extensions]                   # per student (folder name): a new deadline or extra time
    alice = 2026-12-03T23:59:00+01:00
    bob = "2d"                          # "36h", "2d", "1d12h"

``adjustments.csv`` (optional), one line per change, applied in order::

    row,question,points,score,reason
    alice/01_feature_maps,q2_feature_count,,3,by hand: clear argument       (a score)
    bob/01_feature_maps,q1_phi_p3,+1,,the check missed an equivalent form    (points added)
    carol/01_feature_maps,,-1,,late header fix                               (whole submission)

``row`` is the row id of ``grades.csv``; ``question`` a question id, or empty for the
whole submission; exactly one of ``points`` (added, may be negative) or ``score`` (the
new score). The reason is shown to the student in their feedback.

:func:`finalize` turns one gradebook row (its automatic scores, which stay recorded)
into the :class:`Final` grade: adjustments, by-hand questions, then the late penalty.
Everything here is pure: the same inputs give the same grades; nothing is written.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any

from .roster import Roster, RosterError, load_roster, student_of

__all__ = [
    "POLICY_FILE", "ADJUSTMENTS_FILE", "INSTRUCTOR_FILES", "ADJUSTMENTS_HEADER",
    "PolicyError", "LatePolicy", "Policy", "Adjustment", "Late", "Final",
    "parse_policy", "load_policy", "parse_adjustments", "load_adjustments",
    "check_adjustments", "finalize", "submission_time", "parse_time", "format_time",
    "unknown_extensions", "file_time_warnings", "MARKED",
]

POLICY_FILE = "policy.toml"
ADJUSTMENTS_FILE = "adjustments.csv"
#: Files of the instructor that a gradebook folder may hold; kpca-course only reads them.
INSTRUCTOR_FILES = (POLICY_FILE, ADJUSTMENTS_FILE)
ADJUSTMENTS_HEADER = ("row", "question", "points", "score", "reason")
SOURCES = ("lms", "file", "name", "roster")
#: What :func:`submission_time` says of a row with the LMS's late mark and no time.
MARKED = "the LMS's late mark, no time"
#: ``submitted = "file"``: this many rows with the same file time, to the second, are implausible.
SAME_SECOND = 3
MAX_FILE_BYTES = 5_000_000
DAY = 86400.0


class PolicyError(ValueError):
    """``policy.toml``, ``adjustments.csv`` or the roster cannot be used; nothing was changed."""


# --------------------------------------------------------------------------- times
def parse_time(value: Any, tz: tzinfo | None, what: str) -> datetime:
    """An aware datetime from a TOML datetime or an ISO 8601 text; ``PolicyError`` otherwise.

    A time without an offset is read in ``tz`` (``late.timezone``); without one it is refused.
    """
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime.combine(value, time(23, 59, 59))
    elif isinstance(value, str):
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            raise PolicyError(f"{what} {value!r} is not a time kpca-course can read; write it as "
                              "ISO 8601 with its offset, e.g. 2026-12-01T23:59:00+01:00.") from None
    else:
        raise PolicyError(f"{what} must be a time like 2026-12-01T23:59:00+01:00; got {value!r}.")
    if moment.tzinfo is None:
        if tz is None:
            raise PolicyError(f"{what} {value!s} has no time zone, so it is ambiguous; write its "
                              "offset (2026-12-01T23:59:00+01:00) or set late.timezone "
                              "(e.g. \"Europe/Berlin\") in policy.toml.")
        moment = moment.replace(tzinfo=tz)
    return moment


def format_time(moment: datetime | None) -> str:
    """``2026-12-01T23:59:00+01:00`` (seconds, with the offset); ``""`` for ``None``."""
    return "" if moment is None else moment.isoformat(timespec="seconds")


_SPAN = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*$", re.I)


def _extension(value: Any, deadline: datetime, tz: tzinfo | None, who: str) -> datetime:
    if isinstance(value, str):
        m = _SPAN.match(value)
        if m and (m.group(1) or m.group(2)):  # real hours, across a change of offset too
            later = deadline.astimezone(timezone.utc) + timedelta(
                days=float(m.group(1) or 0), hours=float(m.group(2) or 0))
            return later.astimezone(deadline.tzinfo)
        if not re.match(r"^\s*\d{4}-", value):
            raise PolicyError(f"late.extensions.{who} = {value!r} is neither a time nor a span; "
                              "write a new deadline (2026-12-03T23:59:00+01:00) or extra time "
                              "(\"36h\", \"2d\", \"1d12h\").")
    return parse_time(value, tz, f"late.extensions.{who}")


# --------------------------------------------------------------------------- the policy
@dataclass(frozen=True)
class LatePolicy:
    """``[late]`` of ``policy.toml`` (see the module's docstring)."""

    deadline: datetime
    submitted: str = "lms"
    extensions: Mapping[str, datetime] = field(default_factory=dict)
    grace: timedelta = timedelta(0)
    penalty_per_day: float = 0.0
    max_penalty: float = 100.0
    penalty_of: str = "score"
    pattern: re.Pattern[str] | None = None
    format: str = ""
    column: str = ""
    timezone: tzinfo | None = None
    released: datetime | None = None

    def due(self, student: str) -> datetime:
        """The student's deadline: their extension, else the course's."""
        return self.extensions.get(student, self.deadline)


@dataclass(frozen=True)
class Policy:
    """``policy.toml``: by-hand questions, the late-work rule and the roster's path."""

    by_hand: tuple[str, ...] = ()
    late: LatePolicy | None = None
    roster: Path | None = None
    source: str = ""

    def check(self, points: Mapping[str, float]) -> None:
        """``PolicyError`` if a by-hand question is not a question of the assignment."""
        unknown = [q for q in self.by_hand if q not in points]
        if unknown:
            raise PolicyError(f"{self.source}: questions.by_hand names {', '.join(unknown)}, "
                              f"which the assignment does not have (its questions: "
                              f"{', '.join(points)}).")

    def load_roster(self) -> Roster | None:
        if self.roster is None:
            return None
        try:
            return load_roster(self.roster)
        except RosterError as exc:
            raise PolicyError(str(exc)) from None


def _number(value: Any, what: str, low: float = 0.0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PolicyError(f"{what} must be a number; got {value!r}.")
    if not low <= value <= high:
        raise PolicyError(f"{what} must be between {low:g} and {high:g}; got {value!r}.")
    return float(value)


def _toml(source: str) -> Any:
    """The TOML reader: the standard library's ``tomllib`` (Python >= 3.11), else ``tomli``."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:  # pragma: no cover - Python 3.10
        import tomli

        return tomli
    except ImportError:  # pragma: no cover
        raise PolicyError(f"reading {source} needs Python >= 3.11 (tomllib) or the tomli "
                          "package on Python 3.10: pip install tomli.") from None


def parse_policy(text: str, source: str = POLICY_FILE, base: Path | None = None) -> Policy:
    """A :class:`Policy` from ``policy.toml``'s text; ``PolicyError`` naming the key to fix."""
    toml = _toml(source)
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise PolicyError(f"{source} is not valid TOML ({exc}).") from None
    known = {"roster", "questions", "late"}
    extra = sorted(set(data) - known)
    if extra:
        raise PolicyError(f"{source}: unknown key(s) {', '.join(extra)} (known: roster, "
                          "[questions], [late]); a misspelt key would be ignored otherwise.")
    roster = data.get("roster")
    if roster is not None and not (isinstance(roster, str) and roster.strip()):
        raise PolicyError(f"{source}: roster must be a file name; got {roster!r}.")
    roster_path = None if roster is None else (base or Path(".")) / roster
    questions = data.get("questions", {})
    if not isinstance(questions, dict) or set(questions) - {"by_hand"}:
        raise PolicyError(f"{source}: [questions] takes only by_hand = [\"q...\", ...].")
    by_hand = questions.get("by_hand", [])
    if not (isinstance(by_hand, list) and all(isinstance(q, str) and q for q in by_hand)):
        raise PolicyError(f"{source}: questions.by_hand must be a list of question ids.")
    late = None if data.get("late") is None else _late(data["late"], source)
    if late is not None and late.submitted == "roster" and roster_path is None:
        raise PolicyError(f"{source}: late.submitted = \"roster\" needs the roster in this file: "
                          "roster = \"../roster.csv\" (every command reads the times from it).")
    return Policy(tuple(dict.fromkeys(by_hand)), late, roster_path, source)


def _late(late: Any, source: str) -> LatePolicy:
    try:
        return _late_table(late, source)
    except PolicyError as exc:
        text = str(exc)
        raise PolicyError(text if text.startswith(source) else f"{source}: {text}") from None


def _late_table(late: Any, source: str) -> LatePolicy:
    if not isinstance(late, dict):
        raise PolicyError(f"{source}: [late] must be a table.")
    keys = {"deadline", "submitted", "extensions", "grace_minutes", "penalty_per_day",
            "max_penalty", "penalty_of", "pattern", "format", "column", "timezone", "released"}
    extra = sorted(set(late) - keys)
    if extra:
        raise PolicyError(f"{source}: unknown key(s) in [late]: {', '.join(extra)} (known: "
                          f"{', '.join(sorted(keys))}).")
    tz = None
    if "timezone" in late:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            tz = ZoneInfo(str(late["timezone"]))
        except (ZoneInfoNotFoundError, ValueError):
            raise PolicyError(f"{source}: late.timezone {late['timezone']!r} is not a time zone "
                              "name (e.g. \"Europe/Berlin\", \"UTC\").") from None
    if "deadline" not in late:
        raise PolicyError(f"{source}: [late] needs a deadline, e.g. deadline = "
                          "2026-12-01T23:59:00+01:00.")
    deadline = parse_time(late["deadline"], tz, "late.deadline")
    submitted = late.get("submitted", "lms")
    if submitted not in SOURCES:
        raise PolicyError(f"{source}: late.submitted must be one of {', '.join(SOURCES)}; got "
                          f"{submitted!r}.")
    pattern, fmt, column = None, str(late.get("format", "")), str(late.get("column", ""))
    if submitted == "name":
        if "pattern" not in late or not fmt:
            raise PolicyError(f"{source}: late.submitted = \"name\" needs late.pattern (a "
                              "regular expression whose first group is the time) and late.format "
                              "(its strptime format, e.g. \"%Y-%m-%d-%H-%M-%S\").")
        try:
            pattern = re.compile(str(late["pattern"]))
        except re.error as exc:
            raise PolicyError(f"{source}: late.pattern is not a regular expression ({exc}).") from None
        if pattern.groups < 1:
            raise PolicyError(f"{source}: late.pattern needs a group around the time: (...).")
    if submitted == "roster" and not column:
        raise PolicyError(f"{source}: late.submitted = \"roster\" needs late.column, the roster's "
                          "column with each submission's time.")
    extensions_in = late.get("extensions", {})
    if not isinstance(extensions_in, dict):
        raise PolicyError(f"{source}: [late.extensions] must be a table: student = time or span.")
    extensions = {str(k).strip("/"): _extension(v, deadline, tz, str(k))
                  for k, v in extensions_in.items()}
    penalty_of = late.get("penalty_of", "score")
    if penalty_of not in ("score", "max_score"):
        raise PolicyError(f"{source}: late.penalty_of must be \"score\" or \"max_score\"; got "
                          f"{penalty_of!r}.")
    released = (parse_time(late["released"], tz, "late.released") if "released" in late
                else None)
    return LatePolicy(
        deadline=deadline, submitted=submitted, extensions=extensions, released=released,
        grace=timedelta(minutes=_number(late.get("grace_minutes", 0), "late.grace_minutes")),
        penalty_per_day=_number(late.get("penalty_per_day", 0), "late.penalty_per_day", 0, 100),
        max_penalty=_number(late.get("max_penalty", 100), "late.max_penalty", 0, 100),
        penalty_of=penalty_of, pattern=pattern, format=fmt, column=column, timezone=tz)


def _read_text(path: Path, what: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PolicyError(f"{path} cannot be read ({exc.strerror or exc}).") from None
    if len(data) > MAX_FILE_BYTES:
        raise PolicyError(f"{path} is larger than {MAX_FILE_BYTES // 1_000_000} MB; is it {what}?")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PolicyError(f"{path} is not UTF-8 text; save it as UTF-8.") from None


def load_policy(folder: Path) -> Policy:
    """``folder/policy.toml`` (an empty :class:`Policy` when there is none)."""
    path = Path(folder) / POLICY_FILE
    text = _read_text(path, "a policy")
    return Policy() if text is None else parse_policy(text, str(path), path.parent)


# --------------------------------------------------------------------------- adjustments
@dataclass(frozen=True)
class Adjustment:
    """One line of ``adjustments.csv`` (``question`` ``""``: the whole submission)."""

    row: str
    question: str
    points: float | None
    score: float | None
    reason: str
    line: int = 0

    def describe(self) -> str:
        """``+1`` or ``= 3``, as the reports show it."""
        if self.score is not None:
            return f"= {self.score:g}"
        assert self.points is not None
        return f"{self.points:+g}"


def _cell_number(text: str, what: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text.replace(",", ".") if text.count(",") == 1 and "." not in text else text)
    except ValueError:
        raise PolicyError(f"{what} {text!r} is not a number.") from None
    if not math.isfinite(value):
        raise PolicyError(f"{what} {text!r} is not a finite number.")
    return value


def parse_adjustments(text: str, source: str = ADJUSTMENTS_FILE) -> list[Adjustment]:
    """The adjustments of ``adjustments.csv``; ``PolicyError`` naming every bad line."""
    lines = [r for r in csv.reader(io.StringIO(text.lstrip("\ufeff")))]
    out: list[Adjustment] = []
    problems: list[str] = []
    header: list[str] | None = None
    for n, cells in enumerate(lines, start=1):
        if not any(c.strip() for c in cells):
            continue
        if header is None:
            header = [c.strip().lower() for c in cells]
            missing = [c for c in ADJUSTMENTS_HEADER if c not in header]
            if missing:
                raise PolicyError(f"{source}: line {n} must be the header "
                                  f"{','.join(ADJUSTMENTS_HEADER)}; {', '.join(missing)} missing.")
            continue
        values = {k: (cells[i] if i < len(cells) else "") for i, k in enumerate(header)}
        where = f"line {n}"
        try:
            if len(cells) > len(header) and any(c.strip() for c in cells[len(header):]):
                raise PolicyError(f"{where} has {len(cells)} cells but the header has "
                                  f"{len(header)} (a decimal comma or a comma in the reason "
                                  "needs quotes: \"2,5\")")
            row = values["row"].strip()
            if not row:
                raise PolicyError(f"{where} has no row")
            points = _cell_number(values["points"], f"{where}: points")
            score = _cell_number(values["score"], f"{where}: score")
            if (points is None) == (score is None):
                raise PolicyError(f"{where} needs exactly one of points (added) and score "
                                  "(a new score)")
            reason = values["reason"].strip()
            if not reason:
                raise PolicyError(f"{where} has no reason (the student reads it in their feedback)")
            out.append(Adjustment(row, values["question"].strip(), points, score, reason, n))
        except PolicyError as exc:
            problems.append(str(exc).rstrip("."))
    if problems:
        raise PolicyError(f"{source} cannot be used: {'; '.join(problems[:10])}"
                          f"{' and more' if len(problems) > 10 else ''}. Nothing was changed.")
    return out


def load_adjustments(folder: Path) -> list[Adjustment]:
    """``folder/adjustments.csv`` (none when there is no such file)."""
    path = Path(folder) / ADJUSTMENTS_FILE
    text = _read_text(path, "a list of adjustments")
    return [] if text is None else parse_adjustments(text, str(path))


def check_adjustments(adjustments: Sequence[Adjustment], rows: Iterable[str],
                      points: Mapping[str, float], source: str = ADJUSTMENTS_FILE,
                      by_hand: Iterable[str] = ()) -> None:
    """``PolicyError`` naming each adjustment whose row or question does not exist, whose
    new score is outside the question's (or the assignment's) points, or that adds points
    to a by-hand question before a ``score`` graded it (there is nothing to add to)."""
    hand = set(by_hand)
    scored: set[tuple[str, str]] = set()
    known = list(dict.fromkeys(rows))
    present = set(known)
    total = float(sum(points.values()))
    problems = []
    for a in adjustments:
        where = f"line {a.line}"
        if a.row not in present:
            near = difflib.get_close_matches(a.row, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"{where}: there is no row {a.row!r} in the gradebook{hint}")
        if a.question and a.question not in points:
            problems.append(f"{where}: {a.question!r} is not a question of the assignment "
                            f"({', '.join(points)}; empty for the whole submission)")
            continue
        top = points[a.question] if a.question else total
        if a.score is not None and not 0 <= a.score <= top:
            problems.append(f"{where}: score {a.score:g} is outside 0..{top:g}")
        if a.score is not None:
            scored.add((a.row, a.question))
        elif a.question in hand and (a.row, a.question) not in scored:
            problems.append(f"{where}: {a.question} is graded by hand, so it has no score to add "
                            f"{a.describe()} to; give its score (the score column) first")
    if problems:
        raise PolicyError(f"{source}: {'; '.join(problems[:10])}"
                          f"{' and more' if len(problems) > 10 else ''}. Fix it; nothing was "
                          "graded, written or exported.")


def unknown_extensions(policy: Policy, students: Iterable[str],
                       roster: Roster | None = None) -> list[str]:
    """Students with an extension in ``policy.toml`` who have no row and no roster entry
    (a misspelt name would otherwise extend nobody's deadline, silently)."""
    if policy.late is None:
        return []
    known = set(students) | (set(roster.entries) if roster is not None else set())
    return [s for s in policy.late.extensions if s not in known]


def file_time_warnings(policy: Policy, records: Sequence[Mapping[str, Any]],
                       now: datetime | None = None) -> list[str]:
    """With ``late.submitted = "file"``: the file times that cannot be when a student handed
    in (a student can set a file's time, and a zip restores it): in the future, before
    ``late.released``, or the same to the second for :data:`SAME_SECOND` or more rows (copied
    or unpacked with one time). ``[]`` for any other source."""
    late = policy.late
    if late is None or late.submitted != "file":
        return []
    now = now or datetime.now(timezone.utc)
    future, early, by_second = [], [], {}
    for r in records:
        text, rid = r.get("file_time"), str(r.get("submission", ""))
        if not isinstance(text, str) or not text:
            continue
        moment, _ = _read_moment(text, late, "the file time")
        if moment is None:
            continue
        if moment > now + timedelta(minutes=5):
            future.append(rid)
        if late.released is not None and moment < late.released:
            early.append(rid)
        by_second.setdefault(moment.replace(microsecond=0), []).append(rid)
    out = []
    said = "late.submitted = \"file\" reads each file's modification time, which a student can set"
    if future:
        out.append(f"{said}; these are in the future: {', '.join(future[:10])}")
    if early:
        out.append(f"{said}; these are before late.released: {', '.join(early[:10])}")
    for moment, ids in by_second.items():
        if len(ids) >= SAME_SECOND:
            out.append(f"{said}; {len(ids)} files have the same time to the second "
                       f"({format_time(moment)}: {', '.join(ids[:5])}...), as an unpacked or "
                       "copied download has: use the LMS's times (kpca-course collect, "
                       "late.submitted = \"lms\")")
    return out


# --------------------------------------------------------------------------- the final grade
@dataclass(frozen=True)
class Late:
    """A row's lateness: ``submitted`` (``None``: unknown, then ``problem`` says why)."""

    due: datetime
    submitted: datetime | None
    late: bool
    days: int
    percent: float
    problem: str = ""
    #: Decided by the LMS's late mark, without a time (``submitted`` is ``None``; ``days``
    #: is the least it can be).
    marked: bool = False


@dataclass(frozen=True)
class Final:
    """A row's final grade: the automatic scores (kept), adjusted, then the late penalty.

    ``questions`` are the questions' final points (a by-hand question without a grade yet
    counts 0 and is listed in ``pending``); ``subtotal`` their sum plus whole-submission
    adjustments; ``score`` the subtotal minus ``penalty``. ``notes``: what was applied
    (for the reports), ``warnings``: what was clamped or is unknown.
    """

    row: str
    student: str
    status: str
    max_score: float
    auto: dict[str, float]
    auto_score: float
    questions: dict[str, float]
    subtotal: float
    penalty: float
    score: float
    late: Late | None
    applied: tuple[Adjustment, ...] = ()
    pending: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def adjusted(self) -> bool:
        return bool(self.applied) or bool(self.penalty)


def _r(x: float) -> float:
    return round(x, 6) + 0.0  # no -0.0, no 10.799999999999999


def _read_moment(value: Any, late: LatePolicy, what: str) -> tuple[datetime | None, str]:
    """The moment in the deadline's time zone (as the reports show it), or ``(None, why)``."""
    zone = late.timezone or late.deadline.tzinfo
    try:
        return parse_time(value, zone, what).astimezone(zone), ""
    except PolicyError as exc:
        return None, str(exc)


def submission_time(record: Mapping[str, Any], late: LatePolicy,
                    roster: Roster | None = None) -> tuple[datetime | None, str]:
    """When the row's submission was handed in, from the policy's source, or ``(None, why)``.

    Read from what the grader recorded of the file (``file_time``: its modification time;
    ``handed_in_as``: its path relative to the submissions' folder), so a source or pattern
    changed after grading applies to every row at the next ``grade`` or ``export``.
    """
    student = student_of(str(record.get("submission", "")))
    if late.submitted == "roster":
        if roster is None:
            return None, "no roster to read the submission time from"
        entry = roster.get(student)
        if entry is None:
            return None, f"the roster has no student {student!r}"
        value = entry.get(late.column)
        if not value:
            return None, f"the roster's {late.column} is empty for {student!r}"
        return _read_moment(value, late, f"the roster's {late.column} for {student!r}")
    if late.submitted == "name":
        assert late.pattern is not None
        relative = record.get("handed_in_as")
        if not isinstance(relative, str) or not relative:
            return None, "the gradebook did not record the file's name for this row"
        m = late.pattern.search(relative)
        if not m:
            return None, f"its path does not match late.pattern ({late.pattern.pattern})"
        try:
            moment = datetime.strptime(m.group(1), late.format)
        except ValueError:
            return None, f"{m.group(1)!r} in its path does not read as {late.format}"
        return _read_moment(moment, late, "the time in its name")
    if late.submitted == "lms":
        return _lms_time(record, late)
    text = record.get("file_time")
    if not isinstance(text, str) or not text:
        return None, "the gradebook has no file time for this row"
    return _read_moment(text, late, "the file time")


def _lms_time(record: Mapping[str, Any], late: LatePolicy) -> tuple[datetime | None, str]:
    """``late.submitted = "lms"``: the LMS's time, else (without a late mark) the time
    ``kpca-course collect`` received the file."""
    got = record.get("collected")
    if not isinstance(got, dict) or not got:
        return None, ("it was not collected with `kpca-course collect`, so no LMS time was "
                      "recorded (collect the LMS's download, or set late.submitted = \"file\" "
                      "for file times, which a student can set)")
    if got.get("changed"):
        return None, "the file changed after it was collected, so the LMS's time is not its own"
    if got.get("lms_time"):
        return _read_moment(got["lms_time"], late, "the LMS's time")
    if isinstance(got.get("lms_late"), bool):
        return None, MARKED
    if got.get("received"):
        return _read_moment(got["received"], late, "the time it was collected")
    return None, "collect recorded no time for it"


def _marked(record: Mapping[str, Any], due: datetime, late: LatePolicy,
            student: str) -> Late:
    """Lateness from the LMS's mark alone (Canvas): on time, or late by at least one started
    day. An extension in ``policy.toml`` cannot be weighed against the LMS's own due date."""
    mark = bool(record["collected"]["lms_late"])
    if student in late.extensions and mark:
        return Late(due, None, False, 0, 0.0, "the LMS marks it late, but it has an extension "
                    "here and the LMS's download has no time to compare; grade it by hand")
    lms = {"canvas": "Canvas", "moodle": "Moodle"}.get(
        str(record["collected"].get("lms")), "the LMS")
    if not mark:
        return Late(due, None, False, 0, 0.0, f"on time by {lms}'s late mark", marked=True)
    percent = min(late.max_penalty, late.penalty_per_day)
    return Late(due, None, True, 1, percent, f"late by {lms}'s late mark; its download has no "
                "submission time, so the penalty is for 1 started day, the least it can be",
                marked=True)


def finalize(record: Mapping[str, Any], points: Mapping[str, float], *,
             policy: Policy | None = None, adjustments: Sequence[Adjustment] = (),
             roster: Roster | None = None) -> Final:
    """The final grade of one gradebook row (an entry of ``grades.json``); pure.

    Order: each question starts from its automatic score (a by-hand question from nothing),
    the row's adjustments apply in file order (``score`` replaces, ``points`` add; a
    question stays within ``0..points``, the whole within ``0..max``, and what was clamped
    is in ``warnings``), then the late penalty (``penalty_per_day`` percent per started day
    after the student's deadline, at most ``max_penalty``, of the subtotal or of the
    maximum score). Adjustments must have been checked (:func:`check_adjustments`).
    """
    policy = policy or Policy()
    rid = str(record["submission"])
    student = student_of(rid)
    total = float(sum(points.values()))
    auto = {q: float(record["questions"].get(q, 0.0)) for q in points}
    mine = [a for a in adjustments if a.row == rid]
    warnings: list[str] = []
    final: dict[str, float] = {}
    pending = []
    for q in points:
        value: float | None = None if q in policy.by_hand else auto[q]
        for a in mine:
            if a.question != q:
                continue
            value = a.score if a.score is not None else (value or 0.0) + (a.points or 0.0)
            if value > points[q] or value < 0:
                clamped = min(max(value, 0.0), points[q])
                warnings.append(f"{q}: line {a.line} of the adjustments gives {value:g}, outside "
                                f"0..{points[q]:g}; counted as {clamped:g}")
                value = clamped
        if value is None:
            pending.append(q)
            value = 0.0
        final[q] = _r(value)
    subtotal = sum(final.values())
    for a in mine:
        if a.question:
            continue
        subtotal = a.score if a.score is not None else subtotal + (a.points or 0.0)
        if not 0 <= subtotal <= total:
            clamped = min(max(subtotal, 0.0), total)
            warnings.append(f"line {a.line} of the adjustments gives the submission {subtotal:g}, "
                            f"outside 0..{total:g}; counted as {clamped:g}")
            subtotal = clamped
    subtotal = _r(subtotal)
    late_info: Late | None = None
    penalty = 0.0
    if policy.late is not None:
        lp = policy.late
        due = lp.due(student)
        moment, problem = submission_time(record, lp, roster)
        if moment is None and problem == MARKED:
            late_info = _marked(record, due, lp, student)
            if late_info.late:
                warnings.append(late_info.problem)
            base = subtotal if lp.penalty_of == "score" else total
            penalty = _r(min(subtotal, base * late_info.percent / 100.0))
        elif moment is None:
            late_info = Late(due, None, False, 0, 0.0, problem)
            warnings.append(f"submission time unknown ({problem}): no late penalty applied")
        else:  # in UTC: one time zone object's wall clocks would ignore a change of offset
            over = (moment.astimezone(timezone.utc) - due.astimezone(timezone.utc)).total_seconds()
            is_late = over > lp.grace.total_seconds()
            days = math.ceil(over / DAY) if is_late else 0
            percent = min(lp.max_penalty, lp.penalty_per_day * days) if is_late else 0.0
            late_info = Late(due, moment, is_late, days, percent)
            base = subtotal if lp.penalty_of == "score" else total
            penalty = _r(min(subtotal, base * percent / 100.0))
    return Final(
        row=rid, student=student, status=str(record.get("status", "")), max_score=total,
        auto=auto, auto_score=_r(sum(auto.values())), questions=final, subtotal=subtotal,
        penalty=penalty, score=_r(subtotal - penalty), late=late_info,
        applied=tuple(mine), pending=tuple(pending), warnings=tuple(warnings))
