"""``kpca-course collect``: an LMS download (zip or folder) into the submissions layout.

The download's notebooks become ``OUT/<student>/<assignment>.ipynb``, ready for
``kpca-course grade --assignment <assignment> OUT/*/<assignment>.ipynb``, where ``<student>``
is the roster's folder name of the student the LMS's own id names (:mod:`.lms_names`):
Canvas's user id, Moodle's participant number, or the ``student`` group of a pattern. What
the LMS says of each submission (its time, its late mark, the name it had, the LMS's ids)
and when it was collected go into ``OUT/collected.json``; the grader records them in each
row, and the late-work policy reads the submission time from there (``late.submitted =
"lms"``, the default), never from the file's modification time, which a student controls.

Nothing is lost or replaced silently: files not named as the LMS names them, ids that are
not in the roster, files that are not notebooks, nested archives, unsafe names (a path
outside the download, a link) and a student's older files are each listed; a collected
file that differs from the download is kept unless ``replace`` is asked for (then the old
one is moved to ``OUT/.replaced/<time>/``). ``dry_run`` writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Any

from ..text import visible
from .gradebook import atomic_write
from .lms_names import MOODLE_TIME, Named, guess_lms, parse_lms_time, read_name
from .policy import format_time
from .roster import Roster, safe_folder

__all__ = ["MANIFEST", "CollectOptions", "Candidate", "Collected", "collect",
           "collected_entry", "load_collected", "MAX_FILE_BYTES"]

MANIFEST = "collected.json"
FORMAT = "kpca-course collect"
MAX_FILE_BYTES = 20_000_000  # the grader refuses larger submissions anyway
MAX_TOTAL_BYTES = 4_000_000_000
_ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")


@dataclass(frozen=True)
class CollectOptions:
    """How to read a download: ``lms`` (``canvas``, ``moodle``, ``pattern`` or ``auto``),
    the pattern and which roster column its ``student`` group is (``match``; default the
    folder name), how times are written (``time_format``, ``zone``), and what to do."""

    assignment: str
    lms: str = "auto"
    pattern: Any = None
    match: str = "student"
    time_format: str = "iso"
    zone: tzinfo | None = None
    dry_run: bool = False
    replace: bool = False


@dataclass
class Candidate:
    """One notebook of the download, attributed to a student."""

    source: str
    student: str
    named: Named
    data: bytes
    lms_time: datetime | None = None
    time_problem: str = ""

    @property
    def order(self) -> tuple[float, int]:
        """Newer sorts later: the LMS's time, then its upload id."""
        return (self.lms_time.timestamp() if self.lms_time else float("-inf"), self.named.upload)


@dataclass
class Collected:
    """What :func:`collect` did (or would do, in a dry run), for the report."""

    lms: str = ""
    out: Path = Path(".")
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # differs from the download, not replaced
    replaced: list[str] = field(default_factory=list)
    older: dict[str, list[str]] = field(default_factory=dict)  # student -> files not taken
    unmatched: list[str] = field(default_factory=list)  # named right, id not in the roster
    unnamed: list[str] = field(default_factory=list)  # not named as the LMS names files
    not_notebooks: list[str] = field(default_factory=list)
    archives: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)  # path outside, link, too large...
    times: list[str] = field(default_factory=list)  # times that did not read
    missing: list[str] = field(default_factory=list)  # roster students without a notebook

    @property
    def taken(self) -> int:
        return len(self.written) + len(self.unchanged) + len(self.replaced)


# --------------------------------------------------------------------------- reading
def _zip_items(path: Path, out: Collected) -> Iterator[tuple[str, bytes]]:
    total = 0
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            name = info.filename.replace("\\", "/")
            if info.is_dir():
                continue
            parts = name.split("/")
            mode = info.external_attr >> 16
            if name.startswith("/") or ".." in parts or (len(parts[0]) > 1 and parts[0][1] == ":"):
                out.unsafe.append(f"{visible(name)} (a path outside the download: not extracted)")
            elif stat.S_ISLNK(mode):
                out.unsafe.append(f"{visible(name)} (a symbolic link: not extracted)")
            elif info.flag_bits & 0x1:
                out.unsafe.append(f"{visible(name)} (encrypted: not extracted)")
            elif info.file_size > MAX_FILE_BYTES or total + info.file_size > MAX_TOTAL_BYTES:
                out.unsafe.append(f"{visible(name)} (larger than {MAX_FILE_BYTES // 1_000_000} MB)")
            else:
                with zf.open(info) as fh:
                    data = fh.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:  # the header lied about the size
                    out.unsafe.append(f"{visible(name)} (larger than {MAX_FILE_BYTES // 1_000_000} MB)")
                    continue
                total += len(data)
                yield name, data


def _folder_items(root: Path, out: Collected) -> Iterator[tuple[str, bytes]]:
    for here, dirs, files in os.walk(root, followlinks=False):
        for d in list(dirs):
            if os.path.islink(os.path.join(here, d)):
                dirs.remove(d)
                out.unsafe.append(f"{visible(os.path.relpath(os.path.join(here, d), root))} "
                                  "(a symbolic link: not followed)")
        for f in sorted(files):
            full = os.path.join(here, f)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode):
                out.unsafe.append(f"{visible(rel)} (not a regular file: not read)")
            elif st.st_size > MAX_FILE_BYTES:
                out.unsafe.append(f"{visible(rel)} (larger than {MAX_FILE_BYTES // 1_000_000} MB)")
            else:
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as fh:
                    yield rel, fh.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]


def _items(download: Path, out: Collected) -> list[tuple[str, bytes]]:
    if download.is_dir():
        return list(_folder_items(download, out))
    if not zipfile.is_zipfile(download):
        raise ValueError(f"{download} is neither a folder nor a zip file; give the LMS's "
                         "download as it came (the .zip), or the folder it was unpacked into.")
    return list(_zip_items(download, out))


# --------------------------------------------------------------------------- attributing
def _roster_column(lms: str, options: CollectOptions) -> str:
    return {"canvas": "lms_id", "moodle": "participant_id"}.get(lms, options.match)


def _student(lms: str, named: Named, roster: Roster | None, options: CollectOptions) -> str | None:
    """The roster's folder name for the id in a file's name (``None``: not in the roster)."""
    if roster is None:
        return named.key if safe_folder(named.key) else None
    column = _roster_column(lms, options)
    entry = roster.get(named.key) if column == "student" else roster.by(column, named.key)
    return entry.student if entry is not None else None


def _check_roster(lms: str, roster: Roster | None, options: CollectOptions) -> None:
    if lms in ("canvas", "moodle") and roster is None:
        raise ValueError(f"a {lms.capitalize()} download names students by the LMS's ids; give "
                         "the roster (--roster) as the LMS exports it: " + _WHICH[lms])
    column = _roster_column(lms, options)
    if roster is not None and column not in roster.columns:
        raise ValueError(f"the roster {roster.described} has no {column} column, which a "
                         f"{lms} download needs to tell who is who: " + _WHICH.get(
                             lms, f"name a roster column with --match (it has "
                             f"{', '.join(roster.columns)})."))


_WHICH = {
    "canvas": "Canvas's gradebook export (Grades → Export → Export Entire Gradebook, CSV), "
              "whose ID column is the user id in the download's file names.",
    "moodle": "Moodle's grading worksheet (the assignment's Submissions page → Actions → "
              "Download grading worksheet), whose Identifier is the participant number in the "
              "download's folder names; a grade export or participants list has no such number.",
}


def _time(cand: Candidate, lms: str, roster: Roster | None, options: CollectOptions) -> None:
    text, fmt = cand.named.time, options.time_format
    if lms == "moodle" and roster is not None:
        text, fmt = roster[cand.student].get("last_modified_(submission)"), MOODLE_TIME
    try:
        cand.lms_time = parse_lms_time(text, fmt, options.zone) if text else None
    except ValueError as exc:
        why = str(exc) if "time zone" in str(exc) else f"it does not read as {fmt}"
        cand.time_problem = f"the LMS's time {text!r}: {why}"


def _attribute(items: list[tuple[str, bytes]], lms: str, roster: Roster | None,
               options: CollectOptions, out: Collected) -> dict[str, list[Candidate]]:
    by_student: dict[str, list[Candidate]] = {}
    for name, data in items:
        lower = name.lower()
        if lower.endswith(_ARCHIVES):
            out.archives.append(f"{visible(name)} (an archive inside the download: not opened)")
            continue
        named = read_name(lms, name, options.pattern)
        if named is None:
            out.unnamed.append(visible(name))
            continue
        student = _student(lms, named, roster, options)
        if student is None:
            out.unmatched.append(f"{visible(name)} (id {visible(named.key)!r})")
            continue
        if not lower.endswith(".ipynb"):
            out.not_notebooks.append(f"{visible(name)} ({student})")
            continue
        cand = Candidate(name, student, named, data)
        _time(cand, lms, roster, options)
        if cand.time_problem:
            out.times.append(f"{visible(name)}: {cand.time_problem}")
        by_student.setdefault(student, []).append(cand)
    return by_student


def _choose(cands: list[Candidate], assignment: str) -> tuple[Candidate, list[Candidate]]:
    """The notebook to grade: the newest (LMS time, then upload id) among those named after
    the assignment, else among all; and the others."""
    named = [c for c in cands if assignment.lower() in c.named.filename.lower()] or cands
    best = max(named, key=lambda c: (c.order, -cands.index(c)))
    return best, [c for c in cands if c is not best]


# --------------------------------------------------------------------------- writing
def _entry(cand: Candidate, lms: str, received: str) -> dict[str, Any]:
    return {"student": cand.student, "lms": lms, "source": cand.source,
            "sha256": hashlib.sha256(cand.data).hexdigest(),
            "lms_time": format_time(cand.lms_time) or None, "lms_late": cand.named.late,
            "lms_id": cand.named.key, "upload_id": cand.named.upload or None,
            "received": received}


def _read_manifest(out: Path) -> dict[str, Any]:
    try:
        data = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{out / MANIFEST} cannot be read ({exc}); it is collect's record of "
                         "what it took. Move it away to start over.") from None
    if not (isinstance(data, dict) and data.get("format") == FORMAT
            and isinstance(data.get("entries"), dict)):
        raise ValueError(f"{out / MANIFEST} is not kpca-course collect's record; choose another "
                         "--out.")
    return data


def _check_out(out: Path, assignment: str) -> dict[str, Any]:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ValueError(f"--out {out} is not a folder; choose a new folder.")
    manifest = _read_manifest(out) if out.exists() else {}
    if out.exists() and not manifest and any(out.iterdir()):
        raise ValueError(f"--out {out} holds files that kpca-course collect did not write (no "
                         f"{MANIFEST}); nothing was touched. Choose a new or empty folder.")
    other = manifest.get("assignment")
    if other not in (None, assignment):
        raise ValueError(f"--out {out} holds the submissions of {other!r}, not {assignment!r}; "
                         "choose another --out.")
    return manifest


def _put(out: Path, rel: str, data: bytes, replace: bool, stamp: str) -> str:
    """Write ``out/rel``: ``written``, ``unchanged``, ``kept`` (differs, not replaced) or
    ``replaced`` (the old file moved to ``.replaced/<stamp>/``)."""
    target = out / rel
    folder = target.parent
    if folder.is_symlink() or target.is_symlink():
        raise ValueError(f"{target} is a symbolic link; kpca-course never writes through links.")
    folder.mkdir(parents=True, exist_ok=True)
    moved = False
    if target.exists():
        if target.read_bytes() == data:
            return "unchanged"
        if not replace:
            return "kept"
        keep = out / ".replaced" / stamp / rel
        keep.parent.mkdir(parents=True, exist_ok=True)
        os.replace(target, keep)
        moved = True
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        atomic_write(fd, target.name, data, where=str(folder))
    finally:
        os.close(fd)
    return "replaced" if moved else "written"


def _write(out: Path, chosen: list[Candidate], lms: str, options: CollectOptions,
           manifest: dict[str, Any], done: Collected) -> None:
    now = datetime.now(timezone.utc)
    received, stamp = format_time(now), now.strftime("%Y%m%dT%H%M%SZ")
    entries = dict(manifest.get("entries", {}))
    for cand in chosen:
        rel = f"{cand.student}/{options.assignment}.ipynb"
        what = "written" if options.dry_run else _put(out, rel, cand.data, options.replace, stamp)
        getattr(done, what).append(rel)
        if what in ("written", "replaced") or (what == "unchanged" and rel not in entries):
            entries[rel] = _entry(cand, lms, received)
    if options.dry_run:
        return
    record = {"format": FORMAT, "version": 1, "assignment": options.assignment, "entries": entries}
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        atomic_write(fd, MANIFEST, (json.dumps(record, indent=1, ensure_ascii=False) + "\n")
                     .encode("utf-8"), where=str(out))
    finally:
        os.close(fd)


def collect(download: Path, out: Path, roster: Roster | None, options: CollectOptions) -> Collected:
    """Collect ``download`` (a zip or folder) into ``out`` (see the module's docstring).

    Raises ``ValueError`` before writing anything when the download, the roster or ``out``
    cannot be used (the message names the fix)."""
    done = Collected(out=out)
    if not download.exists():
        raise ValueError(f"{download} does not exist.")
    manifest = _check_out(out, options.assignment)
    items = _items(download, done)
    lms = options.lms if options.lms != "auto" else guess_lms([n for n, _ in items])
    if lms is None:
        raise ValueError(f"the files of {download} are named neither as Canvas nor as Moodle "
                         "names them; give --lms canvas|moodle, or --pattern with a group "
                         "(?P<student>...) for any other platform.")
    done.lms = lms
    _check_roster(lms, roster, options)
    by_student = _attribute(items, lms, roster, options, done)
    chosen = []
    for student, cands in by_student.items():
        best, others = _choose(cands, options.assignment)
        chosen.append(best)
        if others:
            done.older[student] = [visible(c.source) for c in others]
    if roster is not None:
        done.missing = [s for s in roster.entries if s not in by_student]
    _write(out, chosen, lms, options, manifest, done)
    return done


# --------------------------------------------------------------------------- grading
def load_collected(root: Path) -> dict[str, Any]:
    """The entries ``collect`` recorded in ``root`` (read once per batch): handed-in path ->
    entry; ``{}`` when ``root`` holds no collect record (or one that cannot be read)."""
    try:
        manifest = _read_manifest(root)
    except ValueError:
        return {}
    return dict(manifest.get("entries", {}))


def collected_entry(entries: dict[str, Any], handed_in_as: str,
                    sha256: str) -> dict[str, Any] | None:
    """What ``collect`` recorded of the file ``handed_in_as`` (:func:`load_collected`'s
    ``entries``), for the gradebook row: ``None`` when it was not collected. A file changed
    since it was collected gets ``{"changed": True}``: its LMS time is not its own."""
    entry = entries.get(handed_in_as)
    if not isinstance(entry, dict):
        return None
    if entry.get("sha256") != sha256:
        return {"changed": True, "source": str(entry.get("source", ""))}
    keys = ("lms", "source", "lms_time", "lms_late", "received", "lms_id")
    return {k: entry.get(k) for k in keys if entry.get(k) is not None}
