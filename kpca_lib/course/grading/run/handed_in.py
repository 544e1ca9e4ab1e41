"""Submissions are files the student handed in: opened without following anything.

An archive from a learning platform, or a hostile student, can put into the submissions
folder a symbolic link (to the instructor's ``solutions/``, or to a classmate's notebook),
a hard link to a file elsewhere, a FIFO (which would block a reader) or a device. The
grader reads none of them: :func:`open_handed_in` walks from the submissions' root to the
file one component at a time with ``O_NOFOLLOW``, so neither the file nor a folder on its
way may be a link, and checks what it opened (``fstat`` of the open file, so nothing can
be swapped in between the check and the read).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..text import visible

__all__ = ["NotHandedIn", "open_handed_in", "link_counts", "read_submission", "MAX_SUBMISSION_BYTES",
           "MAX_CELLS"]

MAX_SUBMISSION_BYTES = 20_000_000
#: Cells a handed-in notebook may have (the assignment's own are about 40): past it the row is
#: ``invalid`` before anything runs. With the whole-notebook wall clock (``--notebook-timeout``,
#: :mod:`.report_plugin`) it bounds a notebook of many cheap cells.
MAX_CELLS = 2000


class NotHandedIn(ValueError):
    """The path is not a plain file the student handed in; the message says why."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def link_counts(paths: Iterable[Path], root: Path) -> Counter[tuple[int, int]]:
    """How many of ``paths`` are each file (device, inode); a path with a link on its way
    below ``root`` is no name of a handed-in file and is not counted."""
    counts: Counter[tuple[int, int]] = Counter()
    real_root = os.path.realpath(root)
    for p in paths:
        p = Path(os.path.abspath(p))
        if not p.is_relative_to(root):
            continue
        if os.path.realpath(p.parent) != os.path.join(real_root, *p.parent.relative_to(root).parts):
            continue
        try:
            st = os.lstat(p)
        except OSError:
            continue
        counts[(st.st_dev, st.st_ino)] += 1
    return counts


def open_handed_in(path: Path, root: Path | None = None,
                   batch: Counter[tuple[int, int]] | None = None) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading, following no link; ``(fd, stat)`` of a regular file.

    ``root``: the submissions' common folder; every component of ``path`` below it must
    be a real folder (above it, the instructor's own layout is trusted). ``batch``: the
    :func:`link_counts` of the batch's submissions; a file with more hard links than the
    batch holds is linked from outside the submissions. Raises :class:`NotHandedIn`
    (with the reason, for the student and the instructor) or ``OSError``.
    """
    path = Path(os.path.abspath(path))
    base = Path(os.path.abspath(root)) if root is not None else path.parent
    if not path.is_relative_to(base) or path == base:
        base = path.parent
    parts = path.relative_to(base).parts
    fd = os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(base / name):
                    raise NotHandedIn(
                        f"the folder {name!r} on the way to this file is a symbolic link; the "
                        "grader follows no links: hand in the notebook file itself.") from None
                raise
            os.close(fd)
            fd = nxt
            base = base / name
        try:
            file_fd = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotHandedIn(
                    "this is a symbolic link, not a notebook file; the grader follows no links: "
                    "hand in the notebook file itself.") from None
            raise
    finally:
        os.close(fd)
    st = os.fstat(file_fd)
    why = ""
    if not stat.S_ISREG(st.st_mode):
        why = f"this is {_kind(st.st_mode)}, not a notebook file."
    elif st.st_nlink > 1 and st.st_nlink > (batch or Counter())[(st.st_dev, st.st_ino)]:
        why = ("this file is a hard link to a file outside the submissions (it has "
               f"{st.st_nlink} names); hand in a copy of your own notebook.")
    if why:
        os.close(file_fd)
        raise NotHandedIn(why)
    return file_fd, st


def read_submission(path: Path, assignment: str, *, root: Path | None = None,
                     batch: Counter[tuple[int, int]] | None = None,
                     facts: dict[str, Any] | None = None) -> tuple[Any | None, str]:
    """The notebook as a dict, or ``(None, reason)``; never raises for a bad file.

    The file is opened as :func:`open_handed_in` does:
    no symbolic link (of the file or of a folder below ``root``), no hard link from
    outside the ``batch``, only a regular file. ``facts`` receives what was read: the
    file's ``mtime`` and the ``sha256`` of its bytes.
    """
    try:
        fd, st = open_handed_in(path, root, batch)
    except NotHandedIn as exc:
        return None, str(exc)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return None, "this is a folder, not a notebook file."
        return None, f"the file cannot be read ({exc.strerror})."
    try:
        with os.fdopen(fd, "rb") as fh:
            size = st.st_size
            if size == 0:
                return None, "the file is empty."
            if size > MAX_SUBMISSION_BYTES:
                return None, (f"the file is {size / 1e6:.0f} MB, more than the "
                              f"{MAX_SUBMISSION_BYTES / 1e6:.0f} MB allowed; clear the outputs "
                              "and submit again.")
            data = fh.read(MAX_SUBMISSION_BYTES + 1)
    except OSError as exc:
        return None, f"the file cannot be read ({exc.strerror or exc})."
    if len(data) > MAX_SUBMISSION_BYTES:
        return None, "the file grew past the size allowed while it was read."
    if facts is not None:
        facts.update(mtime=st.st_mtime, sha256=hashlib.sha256(data).hexdigest())
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return None, "the file is not text (UTF-8): is it a notebook?"
    except RecursionError:
        return None, "the file's JSON is nested too deeply; it is not a readable notebook."
    except ValueError as exc:
        if path.suffix and path.suffix.lower() != ".ipynb":
            return None, (f"this is a {path.suffix} file, not a "
                          "Jupyter notebook (.ipynb): hand in the notebook itself (in JupyterLab: "
                          "the File menu, Download).")
        return None, f"the file is not valid JSON ({str(exc)[:200]}); it is not a readable notebook."
    if not isinstance(nb, dict) or not isinstance(nb.get("cells", None), list):
        if isinstance(nb, dict) and isinstance(nb.get("worksheets"), list):
            old = nb.get("nbformat", 3)
            return None, (f"this is an nbformat {old if isinstance(old, int) else 3} notebook (an "
                          "old format); open and save it in JupyterLab to convert it to nbformat 4.")
        return None, "the file is JSON but not a Jupyter notebook (no list of cells)."
    if len(nb["cells"]) > MAX_CELLS:
        return None, (f"the notebook has {len(nb['cells'])} cells, more than the {MAX_CELLS} the "
                      "grader runs; merge or delete cells and submit again.")
    version = nb.get("nbformat")
    if not isinstance(version, int) or isinstance(version, bool) or version < 4:
        shown = version if isinstance(version, int) else "unknown"
        return None, (f"this is an nbformat {shown} notebook (an old or unknown format); open and "
                      "save it in JupyterLab to convert it to nbformat 4.")
    md = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    kpca = md.get("kpca") if isinstance(md.get("kpca"), dict) else {}
    other = kpca.get("assignment")
    if other is not None and other != assignment:
        shown = visible(other[:100]) if isinstance(other, str) else "(malformed)"
        return None, f"this is a notebook of assignment {shown!r}, not {assignment!r}."
    return nb, ""
