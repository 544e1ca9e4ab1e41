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
import os
import stat
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

__all__ = ["NotHandedIn", "open_handed_in", "link_counts"]


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
