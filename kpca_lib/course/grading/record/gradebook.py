"""The gradebook on disk: ``grades.csv``, ``grades.json`` and ``feedback/``, written so nothing is lost.

A gradebook folder (``kpca-course grade --out DIR``) holds:

* ``.kpca-gradebook.json``: the marker that says the folder is a gradebook this tool wrote,
  and for which assignment. A folder without it is never written into (unless it is
  empty), and nothing is ever deleted.
* ``grades.json``: the authoritative record, one entry per submission, each complete
  (its feedback file is written before the entry appears).
* ``grades.csv``: the same rows as a spreadsheet (cells that a spreadsheet would read as
  a formula are prefixed with ``'``); the last column, ``run_seconds``, is empty for
  rows of a gradebook written before run times were recorded.
* ``feedback/<name>.md``: one report per submission.
* ``summary.md`` and ``summary.png`` (:data:`GENERATED`): the gradebook at a glance,
  rebuilt from ``grades.json`` at the end of every batch
  (:mod:`kpca_lib.course.grading.record.summary`).

Every file is replaced atomically (a temporary file in the same folder, ``fsync``,
``os.replace``) after every finished submission, so a grader killed at any moment
leaves a valid partial gradebook, which ``--resume`` completes. Files are opened
relative to the gradebook's own folder descriptors with ``O_NOFOLLOW``: a symbolic
link planted in place of the folder, ``feedback/`` or a gradebook file is refused,
never followed.

Row ids are the submissions' paths relative to their common folder, without
``.ipynb`` (``alice/03_mercer``), with invisible and control characters shown as
``<U+XXXX>``. Names that look alike (Unicode confusables, case, invisible
characters) are reported by :func:`lookalike_groups`.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import re
import secrets
import stat
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..text import one_line, visible
from .policy import INSTRUCTOR_FILES, Adjustment, Final, Policy, finalize, format_time
from .roster import Roster
from .seal import seal_key, sealed, signature

__all__ = [
    "MARKER",
    "STATUSES",
    "GradebookError",
    "GradebookWriteError",
    "Gradebook",
    "submission_paths",
    "common_root",
    "row_ids",
    "feedback_name",
    "csv_cell",
    "lookalike_key",
    "lookalike_groups",
    "suspicious_name",
    "format_points",
    "atomic_write",
    "GENERATED",
    "STUDENTS",
    "INDEX",
    "INDEX_SIG",
    "ARCHIVES",
    "EXPORT",
    "TRASH",
    "problem",
    "peek",
    "CSV_EXTRA",
    "final_cells",
    "final_record",
    "late_word",
    "adjustments_text",
]

MARKER = ".kpca-gradebook.json"
#: ``grades.json.sig``: grades.json's seal (:mod:`.seal`), checked whenever it is read back.
SEAL = "grades.json.sig"
SEAL_PURPOSE = "grades.json"
FORMAT = "kpca-course gradebook"
VERSION = 1
STATUSES = ("graded", "timeout", "crashed", "invalid")
#: Files rebuilt from ``grades.json`` after every batch (replaced like the tables).
GENERATED = ("summary.md", "summary.png")
#: The hand-back tree: ``students/<student>/<row>.md|.html`` (and ``.zip`` archives), rebuilt
#: from ``grades.json`` and the instructor's policy after every batch and export.
STUDENTS = "students"
#: ``students/index.json``: row id -> its folder and files in the hand-back tree, and
#: ``index.json.sig``, its seal (:mod:`.seal`, under the purpose ``students/index.json``).
INDEX = "index.json"
INDEX_SIG = "index.json.sig"
#: ``archives/<student>.zip``: each student's folder of :data:`STUDENTS` as one file to upload.
ARCHIVES = "archives"
#: ``export/<file>.csv``: the final grades in the formats an LMS imports (``kpca-course export``).
EXPORT = "export"
#: ``trash/<time>/``: rows and files ``kpca-course gradebook`` took out, with ``trash/log.jsonl``.
TRASH = "trash"
#: A row's ``message`` (grades.csv, summary.md, progress lines) is cut to this many characters.
MAX_PROBLEM = 300
_NAME_CHECK = "the instructor checks this submission's name"
MODES = ("new", "resume", "merge")
MAX_GRADEBOOK_BYTES = 512_000_000
MAX_NAME_BYTES = 200
_TMP = ".tmp-"
_FLAGS_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class GradebookError(ValueError):
    """The ``--out`` folder cannot be used (not a gradebook, wrong assignment, a symlink...)."""


class GradebookWriteError(OSError):
    """Rows could not be written (disk full, a planted symlink...); what is on disk is valid."""


def format_points(x: float) -> str:
    """Points as the gradebook writes them (``12``, ``2.5``)."""
    return f"{x:g}"


# --------------------------------------------------------------------------- row ids
def submission_paths(submissions: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Absolute paths (symlinks kept as given), duplicates dropped; ``ValueError`` naming missing ones."""
    out: list[Path] = []
    seen: set[str] = set()
    missing = []
    for s in submissions:
        p = os.path.abspath(os.fspath(s))
        if not os.path.lexists(p):
            missing.append(os.fspath(s))
            continue
        if p not in seen:
            seen.add(p)
            out.append(Path(p))
    if missing:
        shown = ", ".join(repr(visible(m)) for m in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise ValueError(f"submission(s) not found: {shown}{more}; nothing was graded. "
                         "Check the paths (a shell pattern that matched nothing stays as written).")
    if not out:
        raise ValueError("no submission given; nothing was graded.")
    return out


def common_root(paths: Sequence[Path]) -> Path:
    """The deepest folder that holds every one of ``paths`` (absolute paths)."""
    return Path(os.path.commonpath([os.path.dirname(os.fspath(p)) for p in paths]))


def row_ids(paths: Sequence[Path], root: Path) -> list[str]:
    """One readable, unique, stable id per submission: its path relative to ``root``.

    ``root/alice/03_mercer.ipynb`` → ``alice/03_mercer``; a clash (``x`` and ``x.ipynb``)
    gets ``~2``, ``~3``. ``ValueError`` if a path is not inside ``root``.
    """
    root_s = os.path.abspath(os.fspath(root))
    ids: list[str] = []
    seen: set[str] = set()
    for p in paths:
        ps = os.path.abspath(os.fspath(p))
        rel = os.path.relpath(ps, root_s)
        if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise ValueError(f"submission {visible(ps)!r} is not inside the folder row ids are "
                             f"relative to ({visible(root_s)!r}); pass --root with a folder that "
                             "holds every submission.")
        rel = rel.replace(os.sep, "/")
        if rel.endswith(".ipynb") and len(rel) > len(".ipynb") and not rel.endswith("/.ipynb"):
            rel = rel[: -len(".ipynb")]
        rid = visible(rel)
        base, k = rid, 1
        while rid in seen:
            k += 1
            rid = f"{base}~{k}"
        seen.add(rid)
        ids.append(rid)
    return ids


_KEEP = frozenset("-_.")


def feedback_name(row_id: str, taken: Iterable[str] = ()) -> str:
    """A safe, unique file name for a row's feedback (``alice%2F03_mercer.md``).

    Letters, digits and ``-_.`` stay; everything else (``/``, spaces, controls) is
    percent-encoded as UTF-8, and so is a leading dot, so the name can neither leave
    ``feedback/`` nor be hidden. Long names are shortened with a hash. A name that
    clashes with one in ``taken`` when case is ignored gets a hash suffix.
    """
    parts = []
    for i, ch in enumerate(row_id):
        if (ch.isalnum() or ch in _KEEP) and not (i == 0 and ch == ".") and ch.isprintable():
            parts.append(ch)
        else:
            parts.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
    stem = "".join(parts) or "%00"
    digest = hashlib.sha256(row_id.encode("utf-8", "surrogatepass")).hexdigest()
    if len(stem.encode()) > MAX_NAME_BYTES:
        cut = stem.encode()[: MAX_NAME_BYTES - 20].decode("utf-8", "ignore")
        while "%" in cut[-2:]:  # never cut an escape in half
            cut = cut[:-1]
        stem = f"{cut}~{digest[:12]}"
    folded = {t.casefold() for t in taken}
    name = f"{stem}.md"
    if name.casefold() in folded:
        name = f"{stem}~{digest[:8]}.md"
    return name


def csv_cell(value: Any) -> str:
    """A CSV cell that a spreadsheet does not run as a formula (OWASP: prefix ``'``)."""
    text = value if isinstance(value, str) else str(value)
    if text and text[0] in "=+-@\t\r\n":
        return "'" + text
    return text


# --------------------------------------------------------------------------- look-alikes
# Latin look-alikes among Cyrillic and Greek letters (after case folding), and the usual
# ASCII ones. NFKC already maps full-width and compatibility forms. A partial table of
# Unicode's confusables (UTS #39), enough for names typed on common keyboards.
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
    "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "l", "ї": "l", "ј": "j", "ԁ": "d",
    "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ɡ": "g", "ɩ": "l", "ı": "l", "ł": "l",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "l", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ζ": "z", "μ": "u", "ω": "w",
    "0": "o", "1": "l", "|": "l", "!": "l", "i": "l",  # I, l, 1 and | look alike in many fonts
})
_ESCAPED = re.compile(r"<U\+[0-9A-F]{4,6}>")


def lookalike_key(name: str) -> str:
    """A skeleton of ``name``: equal for names a reader could take for one another.

    Invisible characters (also as ``<U+XXXX>``) and accents are dropped, compatibility
    forms folded (NFKC: full-width letters), case folded, and common Cyrillic and Greek
    look-alikes of Latin letters mapped to them, as are ``I l 1 |`` and ``0 O``.
    """
    s = _ESCAPED.sub("", name)
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if unicodedata.category(ch) not in ("Mn", "Me", "Cf", "Cc", "Zs"))
    s = unicodedata.normalize("NFKC", s.casefold()).translate(_CONFUSABLES)
    return s.replace("rn", "m").replace("vv", "w")


def lookalike_groups(ids: Iterable[str]) -> list[list[str]]:
    """Groups of two or more distinct ids that look alike (see :func:`lookalike_key`)."""
    by_key: dict[str, list[str]] = {}
    for rid in ids:
        group = by_key.setdefault(lookalike_key(rid), [])
        if rid not in group:
            group.append(rid)
    return [g for g in by_key.values() if len(g) > 1]


def _script(ch: str) -> str | None:
    try:
        first = unicodedata.name(ch).split()[0]
    except ValueError:
        return None
    return first if first in ("LATIN", "CYRILLIC", "GREEK") else None


def suspicious_name(row_id: str) -> str:
    """Why ``row_id`` alone is suspicious (invisible characters, mixed scripts), or ``""``."""
    reasons = []
    if "<U+" in row_id:
        reasons.append("it contains invisible, control or direction-changing characters "
                       "(shown as <U+XXXX>)")
    for part in row_id.split("/"):
        scripts = {s for s in map(_script, part) if s}
        if len(scripts) > 1:
            reasons.append(f"it mixes {' and '.join(sorted(s.title() for s in scripts))} letters")
            break
    return "; ".join(reasons)


# --------------------------------------------------------------------------- low-level I/O
def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _check_replaceable(name: str, dir_fd: int, where: str) -> None:
    st = _lstat(name, dir_fd)
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise GradebookWriteError(
            errno.ELOOP if stat.S_ISLNK(st.st_mode) else errno.EEXIST,
            f"{where}/{name} is {kind}, which kpca-course never writes; it was not touched. "
            "Remove it (someone else put it there) and run again with --resume")


def atomic_write(dir_fd: int, name: str, data: bytes, *, where: str = ".",
                 sync_dir: bool = True) -> None:
    """Replace ``name`` in the folder ``dir_fd`` by ``data`` atomically and durably.

    Refuses (:class:`GradebookWriteError`) when ``name`` exists and is not a regular
    file, e.g. a symbolic link. On any error the old file is intact and the temporary
    file is removed. ``sync_dir=False`` leaves the folder's ``fsync`` (which makes the
    rename itself durable) to the caller, for several files at once.
    """
    _check_replaceable(name, dir_fd, where)
    tmp = f".{name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _check_replaceable(name, dir_fd, where)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    if sync_dir:
        os.fsync(dir_fd)


def _read_small(name: str, dir_fd: int, limit: int, where: str) -> bytes | None:
    """A regular file's bytes (``None`` if absent); ``GradebookError`` if it is anything else."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GradebookError(f"{where}/{name} is a symbolic link; kpca-course never follows "
                                 "links in a gradebook. Remove it or choose another --out.") from None
        raise GradebookError(f"{where}/{name} cannot be read ({exc.strerror}).") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise GradebookError(f"{where}/{name} is not a regular file; choose another --out.")
        if st.st_size > limit:
            raise GradebookError(f"{where}/{name} is {st.st_size} bytes, more than a gradebook "
                                 "this tool writes; choose another --out.")
        return fh.read(limit + 1)


def _parse_json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise GradebookError(f"{what} is not valid JSON ({type(exc).__name__}); it was not "
                             "written by kpca-course or it was edited. Choose another --out.") from None


def _open_dir(name: str, dir_fd: int | None, where: str) -> int:
    try:
        return os.open(name, _FLAGS_DIR | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        st = _lstat(name, dir_fd) if dir_fd is not None else _lstat_path(Path(name))
        if exc.errno == errno.ELOOP or (st is not None and stat.S_ISLNK(st.st_mode)):
            raise GradebookError(f"{where} is a symbolic link; kpca-course never writes through "
                                 "links. Give the real folder as --out, or another one.") from None
        if exc.errno == errno.ENOTDIR:
            raise GradebookError(f"{where} is a file, not a folder; choose another --out.") from None
        raise


def _open_out(out: Path, create: bool) -> int:
    """A descriptor of ``out``: existing ancestors are followed, the folders it creates
    and ``out`` itself must not be symbolic links."""
    path = os.path.abspath(os.fspath(out))
    parts = Path(path).parts
    fd = os.open(parts[0], _FLAGS_DIR)
    created = False
    try:
        for i, part in enumerate(parts[1:], start=1):
            last = i == len(parts) - 1
            where = os.path.join(*parts[: i + 1])
            if _lstat(part, fd) is None:
                if not create:
                    raise GradebookError(f"{where} does not exist.")
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    created = True
                except FileExistsError:
                    pass
            if last or created:
                nfd = _open_dir(part, fd, where)
            else:
                try:
                    nfd = os.open(part, _FLAGS_DIR, dir_fd=fd)
                except NotADirectoryError:
                    raise GradebookError(f"{where} is a file, not a folder; choose another "
                                         "--out.") from None
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_tmp(name: str) -> bool:
    return name.startswith(".") and _TMP in name


# --------------------------------------------------------------------------- the gradebook
def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class Gradebook:
    """A gradebook folder, opened for a new batch, ``resume`` or ``merge``.

    Parameters
    ----------
    out : Path
        The ``--out`` folder.
    assignment : str
        The assignment; an existing gradebook of another assignment is refused.
    points : dict
        Question id → points, in column order; an existing gradebook must have the same.
    mode : {"new", "resume", "merge"}
        ``new`` needs a missing or empty folder; ``resume`` and ``merge`` need a gradebook
        this tool wrote.

    Nothing is created before :meth:`start`. Use as a context manager (closes the
    folder descriptors). Thread-safe.
    """

    def __init__(self, out: Path, *, assignment: str, points: dict[str, float], mode: str,
                 titles: dict[str, str] | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
        self.out = Path(os.path.abspath(os.fspath(out)))
        self.assignment, self.points, self.mode = assignment, dict(points), mode
        #: Question id -> title (for the feedback); kept in ``grades.json`` for ``export``.
        self.titles: dict[str, str] = dict(titles or {})
        self.rows: dict[str, dict[str, Any]] = {}
        self.root: str | None = None
        self.sandbox: str | None = None
        self.errors: list[str] = []
        #: What the instructor should know of the gradebook as read (an unsealed grades.json).
        self.warnings: list[str] = []
        self._pending: dict[str, tuple[dict[str, Any], str]] = {}
        self._dirty = False
        self._order: dict[str, int] = {}
        self._encoded: dict[str, str] = {}  # row id -> its JSON text (each row encoded once)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._fb: int | None = None
        #: The instructor's policy, adjustments and roster (:meth:`set_policy`): every table
        #: written shows the final grades they give; the rows keep the automatic scores.
        self.policy = Policy()
        self.adjustments: list[Adjustment] = []
        self.roster: Roster | None = None
        # row id -> (the record it was computed from, its Final, its "final" entry in
        # grades.json, its line of grades.csv once made)
        self._finals: dict[str, tuple[dict[str, Any], Final, str, str | None]] = {}
        if mode == "new":
            self._check_new()
            return
        self._fd = self._open_existing()

    def _check_new(self) -> None:
        """Refuse the folder for a new gradebook unless it is missing or empty (but for the
        instructor's files)."""
        where = str(self.out)
        st = _lstat_path(self.out)
        if st is None:
            return
        if stat.S_ISLNK(st.st_mode):
            raise GradebookError(f"--out {where} is a symbolic link; kpca-course never writes "
                                 "through links. Give the real folder, or another one.")
        if not stat.S_ISDIR(st.st_mode):
            raise GradebookError(f"--out {where} is a file, not a folder; choose another --out.")
        fd = _open_out(self.out, create=False)
        try:
            entries = [e for e in os.listdir(fd) if not _is_tmp(e) and e not in INSTRUCTOR_FILES]
            if MARKER in entries:
                info = self._read_marker(fd)
                raise GradebookError(
                    f"--out {where} already holds a gradebook of {info!r}. Use --resume to grade "
                    "only the submissions missing from it, --merge to add or replace rows and "
                    "keep the others, or choose another --out.")
            if entries:
                shown = ", ".join(repr(visible(e)) for e in sorted(entries)[:3])
                raise GradebookError(
                    f"--out {where} exists and is not a gradebook written by kpca-course (it has "
                    f"{shown}{'...' if len(entries) > 3 else ''} and no {MARKER}); nothing in it "
                    "was touched. Choose another --out (a new or empty folder, or one that "
                    f"holds only {' and '.join(INSTRUCTOR_FILES)}).")
        finally:
            os.close(fd)

    def _open_existing(self) -> int:
        """Open the gradebook to ``--resume`` or ``--merge``: check its marker, load its rows,
        open ``feedback/`` and remove the leftovers of a killed grader. Returns the folder's
        descriptor."""
        where, mode, assignment = str(self.out), self.mode, self.assignment
        flag = f"--{mode}"
        if _lstat_path(self.out) is None:
            raise GradebookError(f"{flag}: {where} does not exist, so there is nothing to "
                                 f"{mode}; run without {flag} to start a gradebook there.")
        fd = _open_out(self.out, create=False)
        try:
            if MARKER not in os.listdir(fd):
                raise GradebookError(f"{flag}: {where} is not a gradebook written by kpca-course "
                                     f"(no {MARKER}); nothing in it was touched. Run without "
                                     f"{flag} into a new folder.")
            other = self._read_marker(fd)
            if other != assignment:
                raise GradebookError(f"{flag}: {where} is the gradebook of assignment {other!r}, "
                                     f"not {assignment!r}; choose the right --out.")
            self._load(fd)
            for name in ("grades.csv", *GENERATED):
                _check_replaceable_or_fail(fd, name, where)
            st = _lstat("feedback", fd)
            if st is None:
                os.mkdir("feedback", 0o755, dir_fd=fd)
            self._fb = _open_dir("feedback", fd, f"{where}/feedback")
            for d, name in [(fd, e) for e in os.listdir(fd)] + [(self._fb, e) for e in os.listdir(self._fb)]:
                st = _lstat(name, d)
                if _is_tmp(name) and st is not None and stat.S_ISREG(st.st_mode):
                    os.unlink(name, dir_fd=d)  # our own leftovers of a killed grader
        except BaseException:
            os.close(fd)
            if self._fb is not None:
                os.close(self._fb)
                self._fb = None
            raise
        return fd

    # ----------------------------------------------------------------- reading
    def _read_marker(self, fd: int) -> str:
        where = str(self.out)
        data = _read_small(MARKER, fd, 1_000_000, where)
        info = _parse_json(data or b"", f"{where}/{MARKER}")
        if not (isinstance(info, dict) and info.get("format") == FORMAT
                and isinstance(info.get("assignment"), str)):
            raise GradebookError(f"{where}/{MARKER} is not a kpca-course marker; choose another --out.")
        if info.get("version") != VERSION:
            raise GradebookError(f"{where} was written by another version of kpca-course (format "
                                 f"{info.get('version')!r}, this one writes {VERSION}); choose "
                                 "another --out.")
        return info["assignment"]

    def _load(self, fd: int) -> None:
        where = f"{self.out}/grades.json"
        data = _read_small("grades.json", fd, MAX_GRADEBOOK_BYTES, str(self.out))
        if data is None:  # killed before the first write: an empty gradebook
            return
        why = sealed(data, _read_small(SEAL, fd, 1000, str(self.out)), seal_key(SEAL_PURPOSE))
        if why:
            self.warnings.append(
                f"{where} was changed outside kpca-course, or written with another grading "
                f"secret or an older version ({why}, {SEAL}): its rows are used as they are; "
                "check them (kpca-course gradebook list) and re-grade any you doubt with --merge")
        book = _parse_json(data, where)

        def bad(why: str) -> GradebookError:
            return GradebookError(f"{where} is not a gradebook this version can read ({why}); it "
                                  "was edited or damaged. Choose another --out.")

        if not isinstance(book, dict) or not isinstance(book.get("submissions"), list):
            raise bad("no list of submissions")
        if book.get("assignment") != self.assignment:
            raise bad(f"assignment {book.get('assignment')!r}")
        questions = book.get("questions")
        if not isinstance(questions, dict) or list(questions) != list(self.points):
            raise GradebookError(
                f"{where} has the questions {list(questions or [])}, but {self.assignment} now has "
                f"{list(self.points)}; grade into a new --out.")
        root = book.get("root")
        self.root = root if isinstance(root, str) else None
        titles = book.get("titles")
        if not self.titles and isinstance(titles, dict):
            self.titles = {str(k): str(v) for k, v in titles.items()}
        for i, r in enumerate(book["submissions"]):
            if not isinstance(r, dict):
                raise bad(f"entry {i} is not an object")
            rid = r.get("submission")
            if not isinstance(rid, str) or not rid:
                raise bad(f"entry {i} has no submission id")
            if rid in self.rows:
                raise bad(f"the submission {rid!r} appears twice")
            if r.get("status") not in STATUSES:
                raise bad(f"entry {rid!r} has status {r.get('status')!r}")
            qs = r.get("questions")
            if not (isinstance(qs, dict) and set(qs) == set(self.points)
                    and all(_number(v) for v in qs.values())
                    and _number(r.get("score")) and _number(r.get("max_score"))):
                raise bad(f"entry {rid!r} has malformed scores")
            if "run_seconds" in r and not (_number(r["run_seconds"]) and r["run_seconds"] >= 0):
                raise bad(f"entry {rid!r} has a malformed run time")  # absent: an older gradebook
            if not all(isinstance(r.get(k, ""), str) for k in ("file_time", "handed_in_as", "sha256")):
                raise bad(f"entry {rid!r} has a malformed file time, name or hash")
            if not isinstance(r.get("collected", {}), dict):
                raise bad(f"entry {rid!r} has a malformed collect record")
            if not isinstance(r.get("regraded", []), list):
                raise bad(f"entry {rid!r} has a malformed list of regrades")
            fb = r.get("feedback")
            if not (isinstance(fb, str) and fb.startswith("feedback/") and fb.endswith(".md")
                    and "/" not in fb[len("feedback/"):] and not fb[len("feedback/"):].startswith(".")):
                raise bad(f"entry {rid!r} has no valid feedback file name")
            self.rows[rid] = r
            self._encoded[rid] = _encode_row(r)

    def set_policy(self, policy: Policy, adjustments: Sequence[Adjustment],
                   roster: Roster | None) -> None:
        """The grading policy, adjustments and roster that the tables apply from now on
        (checked by the caller: :func:`~kpca_lib.course.grading.record.policy.check_adjustments`)."""
        with self._lock:
            self.policy, self.adjustments, self.roster = policy, list(adjustments), roster
            self._finals.clear()
            self._dirty = True

    def final(self, record: dict[str, Any]) -> Final:
        """A row's final grade under the current policy and adjustments (computed once per
        row and policy: a batch costs O(rows), not O(rows²))."""
        rid = record["submission"]
        cached = self._finals.get(rid)
        if cached is not None and cached[0] is record:
            return cached[1]
        final = finalize(record, self.points, policy=self.policy, adjustments=self.adjustments,
                         roster=self.roster)
        text = json.dumps(final_record(final), indent=1, ensure_ascii=False).replace("\n", "\n  ")
        self._finals[rid] = (record, final, f"{json.dumps(rid, ensure_ascii=False)}: {text}", None)
        return final

    def set_order(self, ids: Sequence[str]) -> None:
        """Rows of ``ids`` are listed in this order (after rows not among them), whatever
        order they finish in; with ``merge``, a replaced row keeps its place instead."""
        with self._lock:
            self._order = {rid: i for i, rid in enumerate(ids)}

    def _ordered(self) -> list[dict[str, Any]]:
        rows = list(self.rows.values())
        if self.mode == "merge" or not self._order:
            return rows
        return sorted(rows, key=lambda r: (1, self._order[r["submission"]])
                      if r["submission"] in self._order else (0, 0))

    def __contains__(self, row_id: object) -> bool:
        return row_id in self.rows

    def saved_rows(self) -> list[dict[str, Any]]:
        """The rows on disk (in ``grades.json``'s order), after writing what is pending once more."""
        with self._lock:
            if self._fd is not None and self._fb is not None and (self._pending or self._dirty):
                self._flush()
            return list(self._ordered())

    # ----------------------------------------------------------------- writing
    def start(self, root: Path, sandbox: str) -> None:
        """Create the folder (``new``) with its marker and an empty gradebook; record ``root``."""
        self.sandbox = sandbox
        if self.mode != "new":
            if self.root is None:
                self.root = str(root)
            return
        self.root = str(root)
        try:
            self._fd = _open_out(self.out, create=True)
        except OSError as exc:
            raise GradebookError(f"the gradebook folder {self.out} cannot be created "
                                 f"({exc.strerror}); choose another --out.") from None
        where = str(self.out)
        if [e for e in os.listdir(self._fd) if not _is_tmp(e) and e not in INSTRUCTOR_FILES]:
            raise GradebookError(f"--out {where} was filled by something else while starting; "
                                 "choose another --out.")
        marker = {"format": FORMAT, "version": VERSION, "assignment": self.assignment}
        atomic_write(self._fd, MARKER, (json.dumps(marker, indent=1) + "\n").encode(), where=where)
        if _lstat("feedback", self._fd) is None:
            os.mkdir("feedback", 0o755, dir_fd=self._fd)
        self._fb = _open_dir("feedback", self._fd, f"{where}/feedback")
        self._dirty = True
        self._write_tables()

    def feedback_path(self, row_id: str) -> str:
        """``feedback/<name>.md`` for ``row_id``: the existing row's, else a new unique one."""
        with self._lock:
            return self._feedback_path(row_id)

    def _feedback_path(self, row_id: str) -> str:
        if row_id in self.rows:
            return str(self.rows[row_id]["feedback"])
        if row_id in self._pending:
            return str(self._pending[row_id][0]["feedback"])
        taken = [str(r["feedback"])[len("feedback/"):]
                 for r in [*self.rows.values(), *(p[0] for p in self._pending.values())]]
        return "feedback/" + feedback_name(row_id, taken)

    def add(self, record: dict[str, Any], feedback: str) -> None:
        """Add or replace a row (``record["submission"]`` is its id) and write the gradebook.

        ``record["feedback"]`` is set to the row's feedback file when it is empty. Never
        raises for I/O: a failed write is kept in :attr:`errors`, the row stays pending
        and every later call tries again (so a disk that frees up loses nothing).
        """
        with self._lock:
            if not record.get("feedback"):
                record["feedback"] = self._feedback_path(record["submission"])
            self._pending[record["submission"]] = (record, feedback)
            if self._fd is not None and self._fb is not None:  # else closed: stays unsaved
                self._flush()

    @property
    def unsaved(self) -> list[str]:
        """Ids of finished rows not yet in the gradebook on disk."""
        with self._lock:
            return list(self._pending)

    def _flush(self) -> None:
        if self._fd is None or self._fb is None:
            raise RuntimeError("Gradebook.start() was not called.")
        written = []
        for rid, (record, text) in list(self._pending.items()):
            name = str(record["feedback"])[len("feedback/"):]
            try:
                atomic_write(self._fb, name, text.encode("utf-8"), where=f"{self.out}/feedback",
                             sync_dir=False)
            except OSError as exc:
                self._error(f"feedback for {rid}", exc)
                continue
            written.append(rid)
        if written:
            try:  # the feedback files are durable before any row that names them
                os.fsync(self._fb)
            except OSError as exc:
                self._error("feedback/", exc)
                return
        for rid in written:
            record = self._pending.pop(rid)[0]
            self.rows[rid] = record
            self._encoded[rid] = _encode_row(record)
            self._dirty = True
        if self._dirty:
            self._write_tables()

    def _error(self, what: str, exc: OSError) -> None:
        msg = exc.strerror or str(exc)
        self.errors.append(f"{what}: {msg}" + (f" [{errno.errorcode.get(exc.errno, exc.errno)}]"
                                               if exc.errno else ""))

    def _write_tables(self) -> None:
        assert self._fd is not None
        where = str(self.out)
        try:
            data = self._json().encode("utf-8")
            atomic_write(self._fd, "grades.json", data, where=where, sync_dir=False)
            key = seal_key(SEAL_PURPOSE)
            if key is not None:  # grades.json.sig: an edit of grades.json is named when read
                atomic_write(self._fd, SEAL, signature(data, key), where=where, sync_dir=False)
            atomic_write(self._fd, "grades.csv", self._csv().encode("utf-8"), where=where,
                         sync_dir=False)
            os.fsync(self._fd)
        except OSError as exc:
            self._error("grades.json/grades.csv", exc)
            return
        self._dirty = False

    def write_generated(self, files: dict[str, bytes]) -> list[str]:
        """Replace files of :data:`GENERATED` (``summary.md``...) atomically; the errors.

        Never raises for I/O: a file that cannot be written (a planted symbolic link, a
        full disk) keeps its old version and is named in the returned list.
        """
        errors = []
        with self._lock:
            if self._fd is None:
                raise RuntimeError("Gradebook.start() was not called.")
            for name, data in files.items():
                if name not in GENERATED:
                    raise ValueError(f"{name!r} is not a file the gradebook generates.")
                try:
                    atomic_write(self._fd, name, data, where=str(self.out), sync_dir=False)
                except OSError as exc:
                    errors.append(f"{name}: {exc.strerror or exc}")
            try:
                os.fsync(self._fd)
            except OSError as exc:
                errors.append(f"{self.out}: {exc.strerror or exc}")
        return errors

    def write_tree(self, tree: str, files: dict[tuple[str, str], bytes]) -> list[str]:
        """Write a hand-back tree (:data:`STUDENTS` or :data:`ARCHIVES`): ``(folder, name)
        -> bytes`` becomes ``<tree>/<folder>/<name>`` (``folder`` ``""``: ``<tree>/<name>``),
        each file replaced atomically, a file whose bytes are unchanged left as it is. Names
        are one path part each, not hidden. Never raises for I/O: what could not be written
        is returned."""
        if tree not in (STUDENTS, ARCHIVES, EXPORT):
            raise ValueError(f"{tree!r} is not a tree the gradebook generates.")
        for folder, name in files:
            for part in (folder, name) if folder else (name,):
                if not part or "/" in part or "\0" in part or part.startswith("."):
                    raise ValueError(f"{part!r} is not a name the hand-back tree uses.")
        errors: list[str] = []
        with self._lock:
            if self._fd is None:
                raise RuntimeError("Gradebook.start() was not called.")
            where = f"{self.out}/{tree}"
            try:
                top = self._subdir(self._fd, tree, where)
            except (OSError, GradebookError) as exc:
                return [f"{tree}/: {getattr(exc, 'strerror', None) or exc}"]
            opened: dict[str, int] = {"": top}
            try:
                for (folder, name), data in sorted(files.items()):
                    try:
                        if folder not in opened:
                            opened[folder] = self._subdir(top, folder, f"{where}/{folder}")
                        fd = opened[folder]
                        if _same_bytes(fd, name, data):
                            continue
                        atomic_write(fd, name, data, where=f"{where}/{folder}".rstrip("/"),
                                     sync_dir=False)
                    except (OSError, GradebookError) as exc:
                        errors.append(f"{tree}/{folder + '/' if folder else ''}{name}: "
                                      f"{getattr(exc, 'strerror', None) or exc}")
                for fd in opened.values():
                    os.fsync(fd)
            finally:
                for fd in opened.values():
                    os.close(fd)
        return errors

    def read_tree(self, tree: str, name: str, limit: int = 50_000_000) -> bytes | None:
        """A file at the top of a hand-back tree (``None`` if absent or unreadable); no link
        is followed."""
        if tree not in (STUDENTS, ARCHIVES, EXPORT) or "/" in name:
            raise ValueError(f"{tree}/{name} is not a file of a hand-back tree.")
        with self._lock:
            if self._fd is None:
                raise RuntimeError("Gradebook.start() was not called.")
            if _lstat(tree, self._fd) is None:
                return None
            try:
                fd = _open_dir(tree, self._fd, f"{self.out}/{tree}")
            except (OSError, GradebookError):
                return None
            try:
                return _read_small(name, fd, limit, f"{self.out}/{tree}")
            except (OSError, GradebookError):
                return None
            finally:
                os.close(fd)

    # ----------------------------------------------------------------- repair
    def rewrite(self, rows: Sequence[dict[str, Any]], root: str | None) -> None:
        """Replace every row (in this order) and the root, and write ``grades.json`` and
        ``grades.csv`` atomically (``kpca-course gradebook``). Feedback files are the
        caller's. :class:`GradebookWriteError` if the tables could not be written."""
        ids = [str(r["submission"]) for r in rows]
        if len(set(ids)) != len(ids):
            raise ValueError("two rows would have the same id.")
        with self._lock:
            if self._fd is None or self._fb is None:
                raise RuntimeError("the gradebook is not open.")
            if self._pending:
                raise RuntimeError("rows are pending; close the batch first.")
            old = (self.rows, self._encoded, self.root)
            self.rows = {str(r["submission"]): r for r in rows}
            self._encoded = {rid: _encode_row(r) for rid, r in self.rows.items()}
            self.root, self._order, self._dirty = root, {}, True
            self._finals.clear()
            seen = len(self.errors)
            self._write_tables()
            if self._dirty:  # not written: the old rows stay (close() writes them back)
                self.rows, self._encoded, self.root = old
                self._finals.clear()
                raise GradebookWriteError(
                    errno.EIO, f"the gradebook in {self.out} could not be written "
                    f"({'; '.join(self.errors[seen:])}); it holds its old rows.")

    def _walk(self, parts: Sequence[str], create: bool) -> int:
        """A descriptor of the folder ``parts`` inside the gradebook; no link followed."""
        assert self._fd is not None
        for part in parts:
            if not part or part in (".", "..") or "/" in part or "\0" in part:
                raise ValueError(f"{part!r} is not a folder name of a gradebook.")
        fd = os.dup(self._fd)
        try:
            for i, part in enumerate(parts):
                where = f"{self.out}/{'/'.join(parts[: i + 1])}"
                nfd = self._subdir(fd, part, where) if create else _open_dir(part, fd, where)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_file(self, path: str, limit: int = MAX_GRADEBOOK_BYTES) -> bytes | None:
        """A file of the gradebook (``feedback/x.md``, ``trash/log.jsonl``); ``None`` if it or
        its folder is absent. Never follows a link (:class:`GradebookError`)."""
        *folders, name = path.split("/")
        with self._lock:
            if self._fd is None:
                raise RuntimeError("the gradebook is not open.")
            try:
                fd = self._walk(folders, create=False)
            except FileNotFoundError:
                return None
            except GradebookError as exc:
                if "does not exist" in str(exc):
                    return None
                raise
            try:
                return _read_small(name, fd, limit, f"{self.out}/{'/'.join(folders)}")
            finally:
                os.close(fd)

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file of ``feedback/`` or ``trash/`` atomically (folders made as needed)."""
        *folders, name = path.split("/")
        if not folders or folders[0] not in ("feedback", TRASH) or name.startswith("."):
            raise ValueError(f"{path!r} is not a file kpca-course gradebook writes.")
        with self._lock:
            if self._fd is None:
                raise RuntimeError("the gradebook is not open.")
            fd = self._walk(folders, create=True)
            try:
                atomic_write(fd, name, data, where=f"{self.out}/{'/'.join(folders)}")
            finally:
                os.close(fd)

    def unlink_file(self, path: str) -> bool:
        """Remove a regular file of ``feedback/`` or ``students/`` (after it was copied into
        ``trash/``); ``False`` if it was not there. A link or folder is left alone (raises)."""
        *folders, name = path.split("/")
        if not folders or folders[0] not in ("feedback", STUDENTS):
            raise ValueError(f"{path!r} is not a file kpca-course gradebook removes.")
        with self._lock:
            if self._fd is None:
                raise RuntimeError("the gradebook is not open.")
            try:
                fd = self._walk(folders, create=False)
            except (FileNotFoundError, GradebookError):
                return False
            try:
                st = _lstat(name, fd)
                if st is None:
                    return False
                if not stat.S_ISREG(st.st_mode):
                    raise GradebookWriteError(errno.EEXIST, f"{self.out}/{path} is not a regular "
                                              "file; it was left alone.")
                os.unlink(name, dir_fd=fd)
                os.fsync(fd)
                return True
            finally:
                os.close(fd)

    @staticmethod
    def _subdir(parent: int, name: str, where: str) -> int:
        if _lstat(name, parent) is None:
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        return _open_dir(name, parent, where)

    def _sandbox_summary(self) -> str | None:
        modes = {r.get("sandbox") for r in self.rows.values()} or {self.sandbox}
        return modes.pop() if len(modes) == 1 else "mixed"

    def _json(self) -> str:
        """``grades.json``: each row's text encoded once (a batch costs O(rows), not O(rows²))."""
        head = {
            "assignment": self.assignment,
            "max_score": float(sum(self.points.values())),
            "questions": self.points,
            "titles": self.titles,
            "root": self.root,
            "sandbox": self._sandbox_summary(),
        }
        ordered = self._ordered()
        for r in ordered:
            self.final(r)
        text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]  # without "\n}"
        finals = ",".join("\n  " + self._finals[r["submission"]][2] for r in ordered)
        rows = ",".join("\n  " + self._encoded[r["submission"]] for r in ordered)
        return f'{text},\n "final": {{{finals}\n }},\n "submissions": [{rows}\n ]\n}}\n'


    def _csv(self) -> str:
        """``grades.csv``: every cell through :func:`csv_cell`, the header (question ids)
        included; each row's line made once per row and policy (:meth:`_line`)."""
        head = _csv_line(["submission", "status", "score", "max_score", *self.points,
                          "run_seconds", *CSV_EXTRA])
        return head + "".join(self._line(r) for r in self._ordered())

    def _line(self, r: dict[str, Any]) -> str:
        final = self.final(r)
        entry = self._finals[r["submission"]]
        if entry[3] is None:
            seconds = r.get("run_seconds")  # absent in a row of an older gradebook
            line = _csv_line([r["submission"], r["status"], format_points(final.score),
                              format_points(r["max_score"]),
                              *[format_points(final.questions[q]) for q in self.points],
                              "" if seconds is None else f"{seconds:.2f}",
                              *final_cells(final, r)])
            self._finals[r["submission"]] = (*entry[:3], line)
            return line
        return entry[3]

    def close(self) -> None:
        """Write what is pending once more; :class:`GradebookWriteError` if rows are still unsaved."""
        try:
            with self._lock:
                if self._fd is not None and self._fb is not None and (self._pending or self._dirty):
                    self._flush()
                unsaved = list(self._pending)
                dirty = self._dirty
        finally:
            for fd in (self._fb, self._fd):
                if fd is not None:
                    os.close(fd)
            self._fb = self._fd = None
        if unsaved or dirty:
            n = len(unsaved)
            raise GradebookWriteError(
                errno.EIO, f"the gradebook in {self.out} could not be written completely "
                f"({'; '.join(dict.fromkeys(self.errors))}); {n} finished row(s) are not in it"
                f"{'' if not dirty else ' (and grades.json/grades.csv lag behind)'}. "
                "What is in it is valid: fix the problem and run the same command with --resume.")

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
            return
        try:
            self.close()
        except GradebookWriteError:
            pass  # the first error wins


#: The columns of ``grades.csv`` after ``run_seconds``: the automatic score (``score`` and the
#: question columns are the final grade), the late flag, the penalty in points, the
#: submission time, the adjustments applied, what a by-hand question waits for, the problem.
CSV_EXTRA = ("auto_score", "late", "penalty", "submitted", "adjustments", "message")


def late_word(final: Final) -> str:
    """``yes``, ``no``, ``unknown`` (no submission time), ``""`` (no deadline set)."""
    if final.late is None:
        return ""
    if final.late.submitted is None and not final.late.marked:
        return "unknown"
    return "yes" if final.late.late else "no"


def adjustments_text(final: Final) -> str:
    """The adjustments applied and by-hand questions pending, in a few words:
    ``q2 = 3; whole +1; q5 by hand: not graded yet``."""
    parts = [f"{a.question or 'whole'} {a.describe()}" for a in final.applied]
    parts += [f"{q} by hand: not graded yet" for q in final.pending]
    return "; ".join(parts)


def problem(record: dict[str, Any]) -> str:
    """Why a row is not ``graded`` (its reasons, on one line, at most :data:`MAX_PROBLEM`
    characters); ``""`` for a graded row. A grader failure says so first."""
    if record.get("status") == "graded":
        return ""
    said = [str(m) for m in record.get("messages") or [] if not str(m).startswith(_NAME_CHECK)]
    if record.get("grader_error"):
        said = [f"grader failure: {record['grader_error']}"]
    text = one_line(" ".join(said)) or f"{record.get('status')} (no reason recorded)"
    return text if len(text) <= MAX_PROBLEM else text[: MAX_PROBLEM - 3].rstrip() + "..."


def final_cells(final: Final, record: dict[str, Any]) -> list[str]:
    """The cells of :data:`CSV_EXTRA` for one row."""
    if final.late is not None:  # the policy's source (empty: unknown, as `late` says)
        shown = format_time(final.late.submitted)
    else:  # no deadline: the file's time, for the record
        shown = str(record.get("file_time") or "")
    return [format_points(final.auto_score), late_word(final),
            format_points(final.penalty) if final.late is not None else "", shown,
            adjustments_text(final), problem(record)]


def final_record(final: Final) -> dict[str, Any]:
    """A row's final grade as ``grades.json`` shows it (under ``"final"``; recomputed from
    the rows, the policy and the adjustments each time, never read back)."""
    out: dict[str, Any] = {"score": final.score, "questions": dict(final.questions),
                           "auto_score": final.auto_score}
    if final.applied:
        out["adjustments"] = [{"question": a.question, "change": a.describe(), "reason": a.reason,
                               "line": a.line} for a in final.applied]
    if final.pending:
        out["by_hand_pending"] = list(final.pending)
    if final.late is not None:
        late = final.late
        out["late"] = {"due": format_time(late.due), "submitted": format_time(late.submitted),
                       "late": late.late, "days": late.days, "percent": late.percent,
                       "penalty": final.penalty}
        if late.problem:
            out["late"]["problem"] = late.problem
    if final.warnings:
        out["warnings"] = list(final.warnings)
    return out


def _csv_line(cells: list[Any]) -> str:
    """One line of ``grades.csv``. With ``\\n`` as line terminator, the csv module quotes a
    cell that holds ``\\n`` but not one that holds ``\\r``, which a spreadsheet reads as a
    new line (whose first cell could then be a formula): such a line has every cell quoted."""
    texts = [csv_cell(c) for c in cells]
    buf = io.StringIO()
    quoting = csv.QUOTE_ALL if any("\r" in t for t in texts) else csv.QUOTE_MINIMAL
    csv.writer(buf, lineterminator="\n", quoting=quoting).writerow(texts)
    return buf.getvalue()


def _same_bytes(dir_fd: int, name: str, data: bytes) -> bool:
    """Whether the regular file ``name`` already holds exactly ``data`` (never follows a link)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        return stat.S_ISREG(st.st_mode) and st.st_size == len(data) and fh.read() == data


def _encode_row(record: dict[str, Any]) -> str:
    """A row's JSON text, indented for its place in ``grades.json``'s list of submissions
    (JSON strings hold no raw newline, so indenting every line is safe)."""
    return json.dumps(record, indent=1, ensure_ascii=False).replace("\n", "\n  ")


def peek(out: Path) -> tuple[str, dict[str, float]]:
    """The assignment and question points of the gradebook in ``out`` (to open it without
    ``solutions/``); :class:`GradebookError` if ``out`` is not a gradebook of this version."""
    where = str(out)
    if _lstat_path(Path(out)) is None:
        raise GradebookError(f"{where} does not exist; give the gradebook folder (grade --out).")
    fd = _open_out(Path(out), create=False)
    try:
        if MARKER not in os.listdir(fd):
            raise GradebookError(f"{where} is not a gradebook written by kpca-course (no {MARKER}).")
        probe = Gradebook.__new__(Gradebook)
        probe.out = Path(os.path.abspath(out))
        assignment = probe._read_marker(fd)
        data = _read_small("grades.json", fd, MAX_GRADEBOOK_BYTES, where)
    finally:
        os.close(fd)
    book = _parse_json(data or b"{}", f"{where}/grades.json")
    points = book.get("questions") if isinstance(book, dict) else None
    if not isinstance(points, dict) or not all(_number(v) for v in points.values()):
        raise GradebookError(f"{where}/grades.json has no questions; was anything graded there?")
    return assignment, {str(q): float(v) for q, v in points.items()}


def _lstat_path(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # e.g. a parent that is a file
        raise GradebookError(f"--out {path} cannot be used ({exc.strerror}); choose another "
                             "--out.") from None


def _check_replaceable_or_fail(fd: int, name: str, where: str) -> None:
    try:
        _check_replaceable(name, fd, where)
    except GradebookWriteError as exc:
        raise GradebookError(str(exc)) from None
