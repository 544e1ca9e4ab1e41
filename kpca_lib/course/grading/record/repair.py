"""Repairing a gradebook (``kpca-course gradebook``), and keeping its root right.

An instructor's slip must be undoable without deleting the gradebook:

* :func:`list_rows`: the rows, the folder their ids are relative to, what is in the trash;
* :func:`remove_rows`: rows out of the gradebook into ``trash/<time>/`` (the rows as
  ``rows.json``, their ``feedback/`` files and hand-back pages), with a line in
  ``trash/log.jsonl``: never silently gone; :func:`restore_rows` brings them back;
* :func:`rename_row`: a row id (a misspelt folder); :func:`reroot`: every id again, relative
  to another folder (a gradebook pinned to a wrong root); :func:`replace_row`: an invalid row
  out for the same student's good row.

Each change is checked whole before anything is written; the tables are then rewritten
atomically by :meth:`~.gradebook.Gradebook.rewrite` under the instructor's policy and
adjustments. The instructor's files (``policy.toml``, ``adjustments.csv``, the roster) are
never written: an adjustment that names a row no longer there is reported with its line.

For ``kpca-course grade``: :func:`expand_folders` turns a folder given as a submission into
the assignment's notebooks in it, and :func:`check_fit` refuses a ``--merge`` whose rows would
not look like the gradebook's (relative to another folder) unless ``--root`` says so.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..text import visible
from .gradebook import (
    INDEX,
    INDEX_SIG,
    STATUSES,
    STUDENTS,
    TRASH,
    Gradebook,
    feedback_name,
    format_points,
    peek,
)
from .policy import (
    ADJUSTMENTS_FILE,
    Adjustment,
    Policy,
    check_adjustments,
    finalize,
    load_adjustments,
    load_policy,
)
from .roster import Roster, student_of
from .seal import seal_key, sealed

__all__ = [
    "RepairError",
    "Rules",
    "Repaired",
    "open_book",
    "list_rows",
    "trash_rows",
    "remove_rows",
    "restore_rows",
    "rename_row",
    "reroot",
    "replace_row",
    "expand_folders",
    "check_fit",
    "LOG",
]

#: One JSON object a line: what was taken out, renamed or restored, when and why.
LOG = f"{TRASH}/log.jsonl"
INDEX_PATH = f"{STUDENTS}/{INDEX}"  # the hand-back tree's names, sealed as such


class RepairError(ValueError):
    """A repair refused before anything was written; the message names the fix."""


@dataclass(frozen=True)
class Rules:
    """The instructor's files the tables apply (read, never written)."""

    policy: Policy
    roster: Roster | None
    adjustments: Sequence[Adjustment]


@dataclass
class Repaired:
    """What a repair did (``done``) and what the instructor should look at (``warnings``)."""

    done: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def open_book(out: Path) -> tuple[Gradebook, Rules]:
    """The gradebook in ``out``, opened to change rows, and the instructor's files in it.
    ``ValueError`` (a gradebook, policy or roster error) before anything is written."""
    assignment, points = peek(Path(out))
    policy = load_policy(Path(out))
    policy.check(points)
    rules = Rules(policy, policy.load_roster(), load_adjustments(Path(out)))
    return Gradebook(Path(out), assignment=assignment, points=points, mode="merge"), rules


def _describe(r: dict[str, Any]) -> str:
    return (
        f"{r.get('status')}, {format_points(float(r.get('score', 0)))}/"
        f"{format_points(float(r.get('max_score', 0)))}; graded from "
        f"{visible(str(r.get('file', '?')))!r}"
    )


def _known(book: Gradebook, ids: Sequence[str]) -> None:
    missing = [i for i in ids if i not in book.rows]
    if missing:
        raise RepairError(
            f"no row {', '.join(repr(visible(m)) for m in missing[:5])} in "
            f"{book.out}; `kpca-course gradebook list --out {book.out}` shows the "
            "rows. Nothing was changed."
        )


def _check(
    book: Gradebook, rules: Rules, ids: Sequence[str], renamed: dict[str, str]
) -> tuple[list[Adjustment], list[str]]:
    """The adjustments that still name a row (checked), and a warning for each that does not."""
    kept, warnings, present = [], [], set(ids)
    for a in rules.adjustments:
        if a.row in present:
            kept.append(a)
            continue
        now = renamed.get(a.row)
        what = (
            f"which is now {now!r}: change the row there"
            if now
            else "which is not in the gradebook now: delete the line, or restore the row"
        )
        warnings.append(
            f"{ADJUSTMENTS_FILE} line {a.line} names {a.row!r}, {what}. The file was "
            "not changed; `grade --merge` and `export` refuse it until it is."
        )
    check_adjustments(
        kept, list(ids), book.points, str(book.out / ADJUSTMENTS_FILE), by_hand=rules.policy.by_hand
    )
    return kept, warnings


def _commit(
    book: Gradebook,
    rules: Rules,
    kept: list[Adjustment],
    rows: list[dict[str, Any]],
    root: str | None,
) -> None:
    book.set_policy(rules.policy, kept, rules.roster)
    book.rewrite(rows, root)


# --------------------------------------------------------------------------- the trash
def _stamp(book: Gradebook) -> str:
    base = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    name, k = base, 1
    while book.read_file(f"{TRASH}/{name}/rows.json") is not None:
        k += 1
        name = f"{base}-{k}"
    return name


def _pages(book: Gradebook, ids: Sequence[str], warnings: list[str]) -> list[str]:
    """The hand-back pages (``students/<student>/<row>.html|.md``) of ``ids``, from
    ``students/index.json`` when its seal holds (an edited index could name another
    student's pages); else none, and ``warnings`` says so."""
    data = book.read_file(INDEX_PATH)
    if data is None:
        return []
    why = sealed(data, book.read_file(f"{STUDENTS}/{INDEX_SIG}"), seal_key(INDEX_PATH))
    if why:
        warnings.append(f"{INDEX_PATH} is not verified ({why}): the rows' hand-back pages were "
                        f"left in {STUDENTS}/; remove them by hand")
        return []
    try:
        index = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return []
    pages = []
    for rid in ids:
        entry = index.get(rid) if isinstance(index, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("folder"), str):
            continue
        for kind in ("html", "md"):
            name, folder = entry.get(kind), entry["folder"]
            if (
                isinstance(name, str)
                and name
                and "/" not in name + folder
                and folder
                and not name.startswith(".")
                and not folder.startswith(".")
            ):
                pages.append(f"{STUDENTS}/{folder}/{name}")
    return pages


def _to_trash(
    book: Gradebook,
    stamp: str,
    entry: dict[str, Any],
    records: list[dict[str, Any]],
    files: list[str],
) -> None:
    """Copy ``records`` and ``files`` into ``trash/<stamp>/`` (before the rows go)."""
    head = {**entry, "root": book.root, "rows": records}
    book.write_file(
        f"{TRASH}/{stamp}/rows.json",
        (json.dumps(head, indent=1, ensure_ascii=False) + "\n").encode("utf-8"),
    )
    for path in files:
        data = book.read_file(path)
        if data is not None:
            book.write_file(f"{TRASH}/{stamp}/{path}", data)


def _log(book: Gradebook, entry: dict[str, Any]) -> None:
    line = json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n"
    book.write_file(LOG, (book.read_file(LOG) or b"") + line.encode("utf-8"))


def _entry(action: str, why: str, **more: Any) -> dict[str, Any]:
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {"action": action, "time": when, "why": why, **more}


def _unlink(book: Gradebook, files: list[str], result: Repaired) -> None:
    for path in files:
        try:
            book.unlink_file(path)
        except (OSError, ValueError) as exc:
            result.warnings.append(f"{path} stays (its copy is in the trash): {exc}")


def trash_rows(book: Gradebook) -> dict[str, str]:
    """Rows in the trash that can be restored: row id → the ``trash/<time>`` holding it."""
    out: dict[str, str] = {}
    for line in (book.read_file(LOG) or b"").decode("utf-8", "replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if not isinstance(e, dict) or not isinstance(e.get("rows"), list):
            continue
        for rid in map(str, e["rows"]):
            if e.get("action") == "remove":
                out[rid] = str(e.get("trash"))
            elif e.get("action") == "restore":
                out.pop(rid, None)
    return out


# --------------------------------------------------------------------------- the commands
def list_rows(book: Gradebook, rules: Rules) -> tuple[list[dict[str, Any]], list[str]]:
    """One entry per row (``row``, ``status``, ``score``: the final score under the
    instructor's files, ``max_score``, ``file``, ``handed_in_as``) and the adjustments that
    name no row; nothing is written."""
    ids = list(book.rows)
    kept, warnings = _check(book, rules, ids, {})
    rows = [
        {
            "row": rid,
            "status": r.get("status"),
            "score": finalize(
                r, book.points, policy=rules.policy, adjustments=kept, roster=rules.roster
            ).score,
            "max_score": r.get("max_score"),
            "file": r.get("file", ""),
            "handed_in_as": r.get("handed_in_as", ""),
        }
        for rid, r in book.rows.items()
    ]
    return rows, warnings


def remove_rows(book: Gradebook, rules: Rules, ids: Sequence[str], why: str = "") -> Repaired:
    """Move the rows ``ids`` and their feedback into ``trash/<time>/``."""
    ids = list(dict.fromkeys(ids))
    _known(book, ids)
    rows = [r for rid, r in book.rows.items() if rid not in ids]
    result = Repaired()
    kept, result.warnings = _check(book, rules, [str(r["submission"]) for r in rows], {})
    stamp, taken = _stamp(book), [book.rows[i] for i in ids]
    files = [str(r["feedback"]) for r in taken] + _pages(book, ids, result.warnings)
    _to_trash(book, stamp, _entry("remove", why), taken, files)
    _commit(book, rules, kept, rows, book.root)
    _unlink(book, files, result)
    _log(book, _entry("remove", why, rows=ids, trash=f"{TRASH}/{stamp}"))
    for r in taken:
        result.done.append(
            f"removed row {r['submission']!r} ({_describe(r)}): it and its "
            f"feedback are in {book.out}/{TRASH}/{stamp}/"
        )
    result.done.append(
        f"undo: kpca-course gradebook restore --out {book.out} {' '.join(_quote(i) for i in ids)}"
    )
    return result


def _quote(text: str) -> str:
    safe = all(c.isalnum() or c in "-_./~%+" for c in text)
    return text if safe and text else "'" + text.replace("'", "'\\''") + "'"


def _restorable(book: Gradebook, rid: str, stamp: str) -> dict[str, Any]:
    data = book.read_file(f"{stamp}/rows.json")
    try:
        rows = json.loads((data or b"{}").decode("utf-8")).get("rows", [])
    except (UnicodeDecodeError, ValueError, AttributeError):
        rows = []
    found = [r for r in rows if isinstance(r, dict) and r.get("submission") == rid]
    r = found[-1] if found else None
    if not (
        r
        and r.get("status") in STATUSES
        and isinstance(r.get("questions"), dict)
        and set(r["questions"]) == set(book.points)
        and str(r.get("feedback", "")).startswith("feedback/")
    ):
        raise RepairError(
            f"the trash copy of {rid!r} ({stamp}/rows.json) is missing or was "
            "edited; it cannot be restored. Nothing was changed."
        )
    return r


def restore_rows(book: Gradebook, rules: Rules, ids: Sequence[str]) -> Repaired:
    """Bring rows taken out by :func:`remove_rows` back, with their feedback."""
    ids, trash = list(dict.fromkeys(ids)), trash_rows(book)
    for rid in ids:
        if rid not in trash:
            raise RepairError(
                f"no removed row {rid!r} in {book.out}/{TRASH}/ "
                f"(`kpca-course gradebook list --out {book.out}` lists them). "
                "Nothing was changed."
            )
        if rid in book.rows:
            raise RepairError(
                f"a row {rid!r} is in the gradebook now; rename it (kpca-course "
                "gradebook rename) or remove it first. Nothing was changed."
            )
    records = {rid: dict(_restorable(book, rid, trash[rid])) for rid in ids}
    texts = {}
    taken = [str(r["feedback"])[len("feedback/") :] for r in book.rows.values()]
    for rid, r in records.items():
        texts[rid] = book.read_file(f"{trash[rid]}/{r['feedback']}") or b""
        name = str(r["feedback"])[len("feedback/") :]
        if (
            name.casefold() in {t.casefold() for t in taken}
            or book.read_file(f"feedback/{name}") is not None
        ):
            name = feedback_name(rid, [*taken, name])
        r["feedback"] = f"feedback/{name}"
        taken.append(name)
    rows = [*book.rows.values(), *records.values()]
    result = Repaired()
    kept, result.warnings = _check(book, rules, [str(r["submission"]) for r in rows], {})
    for rid, r in records.items():
        book.write_file(str(r["feedback"]), texts[rid])
    _commit(book, rules, kept, rows, book.root)
    _log(book, _entry("restore", "", rows=ids, trash=sorted({trash[i] for i in ids})))
    result.done += [
        f"restored row {rid!r} ({_describe(r)}) from {book.out}/{trash[rid]}/"
        for rid, r in records.items()
    ]
    return result


def _valid_id(new: str) -> None:
    parts = new.split("/")
    if (
        not new
        or visible(new) != new
        or new != new.strip()
        or len(new) > 300
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise RepairError(
            f"{new!r} is not a row id: give a path like alice/01_feature_maps "
            "(no empty, '.' or '..' part, no control character). Nothing was "
            "changed."
        )


def rename_row(book: Gradebook, rules: Rules, old: str, new: str) -> Repaired:
    """Give the row ``old`` the id ``new`` (its feedback file is kept)."""
    _known(book, [old])
    _valid_id(new)
    if new in book.rows:
        raise RepairError(
            f"there is a row {new!r} already; renaming {old!r} would merge two "
            f"rows. Remove one first (kpca-course gradebook remove --out {book.out} "
            f"{_quote(new)}, or replace --by). Nothing was changed."
        )
    return _rename(book, rules, {old: new}, book.root, "rename")


def _rename(
    book: Gradebook, rules: Rules, mapping: dict[str, str], root: str | None, action: str
) -> Repaired:
    rows = []
    for rid, r in book.rows.items():
        new = mapping.get(rid, rid)
        moved_row = r if new == rid else {**r, "submission": new}
        if new != rid and root != book.root and "handed_in_as" in r:
            moved_row["handed_in_as"] = _handed_in_as(r, root)
        rows.append(moved_row)
    result = Repaired()
    moved = {o: n for o, n in mapping.items() if o != n}
    kept, result.warnings = _check(book, rules, [str(r["submission"]) for r in rows], moved)
    pages = _pages(book, list(moved), result.warnings)
    stamp = _stamp(book) if pages else ""
    if pages:
        _to_trash(book, stamp, _entry(action, "hand-back pages under the old ids"), [], pages)
    old_root = book.root
    _commit(book, rules, kept, rows, root)
    _unlink(book, pages, result)
    _log(
        book,
        _entry(
            action,
            "",
            renamed=moved,
            root=[old_root, root],
            trash=f"{TRASH}/{stamp}" if stamp else None,
        ),
    )
    result.done += [f"renamed row {o!r} to {n!r}" for o, n in moved.items()]
    if root != old_root:
        result.done.append(f"row ids are now relative to {root} (were: {old_root})")
    return result


def _handed_in_as(r: dict[str, Any], root: str | None) -> Any:
    """The file's path relative to ``root`` where it is inside it, else as it was."""
    file, old = r.get("file"), r.get("handed_in_as", "")
    if not (root and isinstance(file, str) and os.path.isabs(file)):
        return old
    rel = os.path.relpath(file, root)
    return old if rel == os.curdir or rel.startswith(os.pardir) else rel.replace(os.sep, "/")


def reroot(book: Gradebook, rules: Rules, root: Path) -> Repaired:
    """Every row id again, relative to ``root`` instead of the gradebook's folder."""
    new_root, old_root = os.path.abspath(os.fspath(root)), book.root
    if old_root is None:
        raise RepairError(
            f"{book.out} records no folder its row ids are relative to; rename "
            "the rows one by one (kpca-course gradebook rename)."
        )
    if new_root == old_root:
        raise RepairError(
            f"the row ids of {book.out} are relative to {new_root} already; nothing was changed."
        )
    mapping, outside = {}, []
    for rid in book.rows:
        rel = os.path.relpath(os.path.join(old_root, rid), new_root).replace(os.sep, "/")
        if rel in (os.curdir, os.pardir) or rel.startswith("../"):
            outside.append(rid)
        mapping[rid] = rel
    if outside:
        raise RepairError(
            f"row(s) {', '.join(repr(o) for o in outside[:5])} are not inside {new_root}; take "
            f"them out first (kpca-course gradebook remove --out {book.out} "
            f"{' '.join(_quote(o) for o in outside[:5])}) or give a --root that holds every row. "
            "Nothing was changed."
        )
    by_new: dict[str, list[str]] = {}
    for old, new in mapping.items():
        by_new.setdefault(new, []).append(old)
    clashes = [olds for olds in by_new.values() if len(olds) > 1]
    if clashes:
        raise RepairError(
            "re-rooting would merge rows "
            + "; ".join(" and ".join(repr(o) for o in c) for c in clashes[:5])
            + ": remove or rename one of each first. Nothing was changed."
        )
    return _rename(book, rules, mapping, new_root, "reroot")


def replace_row(book: Gradebook, rules: Rules, row: str, by: str) -> Repaired:
    """Take out the row ``row`` (not graded) for ``by``, the same student's other row."""
    _known(book, [row, by])
    old, new = book.rows[row], book.rows[by]
    if row == by or student_of(row) != student_of(by):
        raise RepairError(
            f"{row!r} and {by!r} are not two rows of one student (the row id's "
            f"folder: {student_of(row)!r}, {student_of(by)!r}); to take a row out, "
            f"use kpca-course gradebook remove. Nothing was changed."
        )
    if old.get("status") == "graded" or new.get("status") == "invalid":
        raise RepairError(
            f"replace takes out a row that is not graded for one that is usable: "
            f"{row!r} is {old.get('status')}, {by!r} is {new.get('status')}. To "
            f"take out a graded row: kpca-course gradebook remove --out {book.out} "
            f"{_quote(row)}. Nothing was changed."
        )
    result = remove_rows(book, rules, [row], why=f"replaced by {by!r}")
    result.done.insert(0, f"kept {by!r} ({_describe(new)}) as {student_of(by)!r}'s row")
    return result


# --------------------------------------------------------------------------- grade's root
def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _in_folder(folder: Path, name: str) -> tuple[list[Path], list[str]]:
    """``folder/name`` and ``folder/*/name`` (no hidden folder), as the shell pattern finds
    them (a linked folder too: the grader then judges the link); the folders without one,
    with what they hold."""
    found = [folder / name] if os.path.lexists(folder / name) and not _is_dir(folder / name) else []
    without = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith(".") or not (entry.is_dir() or entry.is_symlink()):
            continue
        path = Path(entry.path) / name
        if os.path.lexists(path) and not _is_dir(path):
            found.append(path)
            continue
        try:
            held = sorted(e.name for e in os.scandir(entry.path) if not e.name.startswith("."))
        except OSError as exc:
            held = [f"unreadable: {exc.strerror or exc}"]
        shown = ", ".join(visible(h) for h in held[:3]) + (", ..." if len(held) > 3 else "")
        without.append(f"{visible(entry.name)} ({shown or 'empty'})")
    return found, without


def expand_folders(
    paths: Sequence[Path], assignment: str, out: Path
) -> tuple[list[Path], Path | None, list[str]]:
    """A folder given as a submission stands for the assignment's notebooks in it
    (``FOLDER/<assignment>.ipynb`` and ``FOLDER/*/<assignment>.ipynb``), as the shell pattern
    would (a folder named ``*.ipynb`` stays a submission: an ``invalid`` row). Returns the files, the folder the row ids are relative to when one folder
    was given alone (else ``None``), and notes on what was not taken. ``ValueError`` if a
    folder holds no such notebook."""
    name = f"{assignment}.ipynb"
    files: list[Path] = []
    folders, notes = [], []
    for p in paths:
        if not _is_dir(p) or p.name.endswith(".ipynb"):  # a folder posing as a notebook: invalid
            files.append(p)
            continue
        found, without = _in_folder(p, name)
        if not found:
            raise ValueError(
                f"{visible(str(p))} is a folder and holds no {name} (nor */{name}); nothing was "
                f"graded. Give the notebooks themselves: kpca-course grade --assignment "
                f"{assignment} --out {out} {_quote(str(p))}/*/FILE.ipynb"
            )
        folders.append(p)
        files.extend(f for f in found if f not in files)
        notes.append(f"{visible(str(p))} is a folder: grading the {len(found)} {name} in it")
        if without:
            notes.append(
                f"not graded, no {name} in: {'; '.join(without[:10])}"
                + (f" and {len(without) - 10} more" if len(without) > 10 else "")
                + " (a file of another name: grade it with --merge --row-id)"
            )
    alone = len(folders) == 1 and len(files) == len(_in_folder(folders[0], name)[0])
    return files, (folders[0] if alone else None), notes


def check_fit(ids: Sequence[str], book: Gradebook, flag: str) -> None:
    """Refuse (``ValueError``) new rows whose ids do not look like the gradebook's (another
    depth of folders): they are relative to another folder than its rows were."""
    old = list(book.rows)
    depths = {rid.count("/") for rid in old}
    odd = [i for i in ids if old and i not in book.rows and i.count("/") not in depths]
    if not odd:
        return
    raise ValueError(
        f"{flag}: these submissions would be rows {', '.join(repr(o) for o in odd[:3])}, unlike "
        f"the gradebook's rows ({', '.join(repr(o) for o in old[:3])}), whose ids are relative "
        f"to {book.root}; nothing was graded. If that folder is wrong: kpca-course gradebook "
        f"reroot --out {book.out} --root DIR, then grade again. If these ids are right, say so "
        f"with --root {_quote(str(book.root))}; for one file, --row-id names its row."
    )
