"""How learning platforms name the files of a submissions download, and how to read the names.

Each download names a student by the LMS's own ids, which :mod:`.collect` matches against the
roster (never a display name: two students can share one, and a name can change).

Canvas ("Download Submissions": one flat zip)
    canvas-lms ``app/models/content_zipper.rb`` (``add_submission``, ``get_filename``,
    ``add_upload_submission``, ``sanitize_file_name``, ``sanitize_user_name``): each uploaded
    file becomes ``<name>[_LATE]_<user id>_<attachment id>_<file name>``, the first part
    lowercased with every non-word character removed, so ``Smith-Jones, Ana`` handing in
    late is ``smithjonesana_late_1001_55501_01_feature_maps.ipynb``. ``<name>`` is the
    sortable name (left out under anonymous grading), ``LATE`` is Canvas's own late mark,
    the user id is the ``ID`` column of Canvas's gradebook export (the roster's ``lms_id``),
    and the attachment id grows with every upload (so the highest is the newest file). The
    download holds no submission time.

Moodle ("Download all submissions": a zip, one folder per participant)
    Moodle ``mod/assign/locallib.php`` (``download_submissions``, ``get_uniqueid_for_user``)
    and ``mod/assign/feedback/file/importziplib.php``, whose tests spell the flat form
    ``StudentName_StudentID_PluginType_Plugin_FilePathAndName``: a file is
    ``<Full name>_<participant number>_assignsubmission_file/<file name>`` (folders, the
    default since Moodle 3.x) or ``<Full name>_<participant number>_assignsubmission_file_
    <file name>`` (flat). The participant number is Moodle's per-assignment id of the
    student, the ``Identifier`` column of the grading worksheet (``Participant 4021``);
    online text comes as ``..._assignsubmission_onlinetext_onlinetext.html``. The
    submission time is the worksheet's ``Last modified (submission)``, written in the
    downloading user's time zone as ``Monday, 30 November 2026, 11:02 PM``.

Anything else
    A regular expression with named groups, like nbgrader's ``zip_collect``:
    ``student`` (required: the student's folder name, or the value of ``--match`` in the
    roster), and optionally ``timestamp`` (read with ``--time-format``, ISO 8601 by
    default) and ``late`` (any text there marks the file late). It is matched against the
    file's path inside the download, folders joined with ``/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo

__all__ = ["Named", "CANVAS", "MOODLE", "read_name", "parse_lms_time", "MOODLE_TIME",
           "check_pattern", "guess_lms"]

CANVAS = re.compile(r"^(?:(?P<name>[^/]*?)_)??(?:(?P<late>late)_)?(?P<user_id>\d+)_"
                    r"(?P<attachment_id>\d+)_(?P<filename>[^/]+)$", re.IGNORECASE)
MOODLE = re.compile(r"^(?:.*/)?(?P<name>[^/]+?)_(?P<participant>\d+)_assign"
                    r"submission_(?P<plugin>[a-z]+)(?:/|_)(?P<filename>.+)$")
#: Moodle's ``strftimedatetime`` (English), as its grading worksheet writes times.
MOODLE_TIME = "%A, %d %B %Y, %I:%M %p"


@dataclass(frozen=True)
class Named:
    """What a file's name in a download says: the LMS's id of the student (``key``; which
    roster column it is depends on the LMS), the late mark (``None``: not given), a time in
    the name, the LMS's id of the upload (higher is newer) and the file's own name."""

    key: str
    late: bool | None = None
    time: str = ""
    upload: int = 0
    filename: str = ""


def read_name(lms: str, path: str, pattern: re.Pattern[str] | None = None) -> Named | None:
    """What ``path`` (inside the download, ``/``-separated) says under ``lms`` (``canvas``,
    ``moodle`` or ``pattern`` with ``pattern``); ``None`` when it is not named that way."""
    if lms == "canvas":
        base = path.rsplit("/", 1)[-1]
        m = CANVAS.match(base)
        if not m:
            return None
        return Named(m["user_id"], bool(m["late"]), "", int(m["attachment_id"]), m["filename"])
    if lms == "moodle":
        m = MOODLE.match(path)
        if not m or m["plugin"] != "file":
            return None
        return Named(m["participant"], None, "", 0, m["filename"].rsplit("/", 1)[-1])
    assert pattern is not None
    m = pattern.search(path)
    if not m or not m["student"]:
        return None
    groups = m.groupdict()
    late = groups.get("late")
    return Named(m["student"], None if "late" not in pattern.groupindex else bool(late),
                 groups.get("timestamp") or "", 0, path.rsplit("/", 1)[-1])


def check_pattern(text: str) -> re.Pattern[str]:
    """``--pattern`` compiled; ``ValueError`` naming the fix when it is not a regular
    expression or lacks the ``student`` group."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ValueError(f"--pattern {text!r} is not a regular expression ({exc}).") from None
    if "student" not in pattern.groupindex:
        raise ValueError(f"--pattern {text!r} has no group named student; write e.g. "
                         r"'(?P<student>[^/_]+)_(?P<timestamp>\d{8}T\d{6})' (Python's "
                         "(?P<name>...) groups).")
    return pattern


def guess_lms(paths: list[str]) -> str | None:
    """``moodle`` or ``canvas`` when most notebooks of the download are named that way."""
    notebooks = [p for p in paths if p.lower().endswith(".ipynb")] or paths
    if not notebooks:
        return None
    for lms in ("moodle", "canvas"):
        hits = sum(read_name(lms, p) is not None for p in notebooks)
        if hits and hits * 2 >= len(notebooks):
            return lms
    return None


def parse_lms_time(text: str, fmt: str, zone: tzinfo | None) -> datetime | None:
    """A time as the LMS wrote it (``fmt``; ``"iso"`` for ISO 8601), in ``zone`` when it has
    no offset; ``None`` for an empty cell or Moodle's ``-``. ``ValueError`` when it does not
    read."""
    text = text.strip()
    if not text or text == "-":
        return None
    if fmt == "iso":
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    else:
        moment = datetime.strptime(text, fmt)
    if moment.tzinfo is None and zone is None:
        raise ValueError("it has no time zone: give --timezone, the zone of the LMS account "
                         "that downloaded it (e.g. Europe/Berlin)")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)
