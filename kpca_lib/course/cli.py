"""The ``kpca-course`` command: release homework and grade submissions.

::

    kpca-course release [--check] [--solutions DIR] [--exercises DIR]
    kpca-course release --student-edition DIR [--git] [--solutions DIR]
    kpca-course scan [--solutions DIR] [--secret TEXT] PATH...
    kpca-course grade --assignment NAME [--out DIR] [--resume | --merge [--row-id ID] |
                      --regrade QUESTION] [--root DIR]
                      [--sandbox {bwrap,none}] [--timeout SECONDS] [--jobs N]
                      [--cluster {local:N,tcp://HOST:PORT,SCHEDULER.json}]
                      [--memory MB] SUBMISSION...
    kpca-course export --out DIR [--roster FILE] [--format {plain,canvas,moodle,all}]...
                       [--archives] [--canvas-column TITLE] [--moodle-column TITLE]

Exit codes of ``release --student-edition`` and ``scan``: 0 written / nothing found; 1 the
leak scan found something (the edition is left for inspection and, with ``--git``, not
committed); 2 nothing was written or scanned (a folder that is not a student edition...).

Exit codes of ``export``: 0 written, every row and roster student in every LMS file (or
``--allow-missing``); 2 nothing was written (not a gradebook, a bad policy, adjustments or
roster, a roster that matches no row); 3 a file could not be written; 4 written, but rows or
roster students are left out of an LMS file (listed); 5 an LMS file would hold no student and
was not written (an existing file with students is never replaced by an empty one).

Exit codes of ``collect``: 0 every file of the download was taken; 1 collected, but some
files were not (listed: unmatched ids, not notebooks, older files, kept files that differ);
2 nothing was collected (bad arguments, download, roster or ``--out``).

Exit codes of ``grade``: 0 every submission has a row; 1 some rows are ``crashed`` by the
grader's fault (e.g. a full disk): grade them again with ``--merge``; 2 nothing was
graded (bad arguments, missing submission, unusable ``--out``, no sandbox); 3 the
gradebook could not be written completely: what it holds is valid, run again with
``--resume``; 130 interrupted: likewise.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "EXIT_OK", "EXIT_GRADER_FAILURE", "EXIT_USAGE", "EXIT_INCOMPLETE",
           "EXIT_INTERRUPTED", "EXIT_LEFT_OUT", "EXIT_EMPTY"]

#: ``grade``: every submission has a row in the gradebook (whatever its status).
EXIT_OK = 0
#: ``grade``: every row is written, but some are ``crashed`` by the grader's fault (full disk...).
EXIT_GRADER_FAILURE = 1
#: Nothing was graded: bad arguments, unknown assignment, missing submission, unusable
#: ``--out``, sandbox unavailable.
EXIT_USAGE = 2
#: ``grade``: the gradebook could not be written completely (disk full...); it is valid, resume it.
EXIT_INCOMPLETE = 3
#: ``grade``: interrupted (Ctrl-C); the gradebook is valid, resume it.
EXIT_INTERRUPTED = 130
#: ``export``: written, but rows or roster students are left out of an LMS file.
EXIT_LEFT_OUT = 4
#: ``export``: an LMS file would hold no student; it was not written.
EXIT_EMPTY = 5


def _report_scan(findings: list[Any], fps: Any, where: str) -> int:
    """Print the scan's findings; 1 if any is a leak (not allowed), else 0."""
    leaks = [f for f in findings if not f.allowed]
    for note in fps.notes:
        _say(f"WARNING leak scan: {note}", sys.stderr)
    for finding in leaks:
        _say(str(finding), sys.stderr)
    looked = ", ".join(f"{n} {k}" for k, n in sorted(fps.counts().items()))
    per_file: dict[str, int] = {}
    for finding in findings:
        if finding.allowed:
            per_file[finding.file] = per_file.get(finding.file, 0) + 1
    allowed = ", ".join(f"{n} in {name}" for name, n in per_file.items()) or "none"
    if leaks:
        _say(f"LEAK SCAN FAILED: {len(leaks)} finding(s) in {where} (looked for {looked}). "
             "Do not publish it.", sys.stderr)
        return 1
    _say(f"leak scan: nothing found in {where} (looked for {looked}; allowed by "
         f"edition/leak-allow.txt: {allowed}).")
    return 0


def _student_edition(args: argparse.Namespace, solutions: Path) -> int:
    from .edition import EditionError, build_student_edition, commit_edition, fingerprints, scan

    dest, root = Path(args.student_edition), solutions.resolve().parent
    try:
        files = build_student_edition(root, dest, git=False)
        fps = fingerprints(solutions, instructor_root=root)
        status = _report_scan(scan(dest, fps), fps, str(dest))
        if status:
            return status
        if args.git:
            new = commit_edition(root, dest)
            status = _report_scan(scan(dest, fps), fps, f"{dest} with its git history")
            print(f"git: {'committed' if new else 'nothing changed; no commit'} in {dest}")
    except (OSError, ValueError, EditionError) as exc:
        _say(f"kpca-course release: {exc}", sys.stderr)
        return 2
    print(f"wrote the student edition: {len(files)} files in {dest}")
    return status


def _scan(args: argparse.Namespace) -> int:
    from .edition import EditionError, fingerprints, scan
    from .release import default_paths

    solutions = Path(args.solutions) if args.solutions else default_paths()[0]
    try:
        fps = fingerprints(solutions, secrets=args.secret or ())
        status = 0
        for target in args.paths:
            if not Path(target).exists():
                raise EditionError(f"{target} does not exist")
            status = max(status, _report_scan(scan(Path(target), fps), fps, target))
    except (OSError, ValueError, EditionError) as exc:
        _say(f"kpca-course scan: {exc}", sys.stderr)
        return 2
    return status


def _release(args: argparse.Namespace) -> int:
    from .release import default_paths, release

    solutions, exercises = default_paths()
    if args.git and not args.student_edition:
        print("kpca-course release: --git goes with --student-edition", file=sys.stderr)
        return 2
    if args.student_edition:
        if args.check or args.exercises:
            print("kpca-course release: --student-edition takes neither --check nor --exercises",
                  file=sys.stderr)
            return 2
        return _student_edition(args, Path(args.solutions) if args.solutions else solutions)
    solutions = Path(args.solutions) if args.solutions else solutions
    exercises = Path(args.exercises) if args.exercises else exercises
    try:
        differing = release(solutions, exercises, check=args.check)
    except (OSError, ValueError) as exc:
        print(f"kpca-course release: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if differing:
            print(
                "exercises/ is out of date with solutions/ (run `kpca-course release`):",
                file=sys.stderr,
            )
            for name in differing:
                print(f"  {name}", file=sys.stderr)
            return 1
        print(f"exercises/ is up to date with {solutions}.")
        return 0
    for name in differing:
        print(f"wrote {name}")
    print(f"exercises/ is up to date ({len(differing)} file(s) changed).")
    return 0


def _say(text: str, stream: Any = None) -> None:
    """Print ``text`` even where the terminal cannot show some of its characters."""
    stream = stream or sys.stdout
    enc = getattr(stream, "encoding", None) or "utf-8"
    print(text.encode(enc, "backslashreplace").decode(enc, "replace"), file=stream)


def _grade(args: argparse.Namespace) -> int:
    from .grading.config import GradeConfig
    from .grading.pipeline import grade
    from .grading.record.gradebook import GradebookWriteError
    from .grading.record.summary import format_duration, summary_markdown
    from .grading.text import visible
    from .release import default_paths

    solutions = Path(args.solutions) if args.solutions else default_paths()[0]
    write_error = None
    try:
        config = GradeConfig.from_args(args, solutions)
        batch = grade(config, [Path(s) for s in args.submissions])
    except GradebookWriteError as exc:
        batch = getattr(exc, "batch", None)
        write_error = exc
        if batch is None:
            _say(f"kpca-course grade: {exc.strerror or exc}", sys.stderr)
            return EXIT_INCOMPLETE
    except (OSError, ValueError, RuntimeError) as exc:
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _say(f"kpca-course grade: {text}", sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say(f"kpca-course grade: interrupted. The gradebook in {args.out} holds every row finished "
             "so far; run the same command with --resume to grade the rest.", sys.stderr)
        return EXIT_INTERRUPTED
    counts: dict[str, int] = {}
    for row in batch:
        counts[row.status] = counts.get(row.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing to grade"
    total = sum(batch.counts.values())
    book = ", ".join(f"{n} {s}" for s, n in sorted(batch.counts.items()))
    sandbox = "bwrap" if batch.sandbox == "bwrap" else "NONE (student code ran with your rights)"
    if batch.summary is not None:
        _say(summary_markdown(batch.summary, compact=True))
    for note in getattr(batch, "notes", ()):
        _say(note)
    _say(f"graded {len(batch)} submission(s) in {format_duration(batch.elapsed)} ({summary}); "
         f"sandbox: {sandbox}")
    if batch.skipped:
        _say(f"skipped {len(batch.skipped)} submission(s) already in the gradebook (--resume)")
    for rid, why in batch.not_regraded.items():
        _say(f"not regraded {rid!r}: {why}", sys.stderr)
    if batch.replaced:
        _say(f"--merge replaced {len(batch.replaced)} existing row(s): "
             + ", ".join(repr(r) for r in batch.replaced[:20])
             + " (adjustments.csv lines for them now apply to the new files)")
    if batch.added:
        _say(f"--merge added {len(batch.added)} new row(s): "
             + ", ".join(repr(r) for r in batch.added[:20])
             + (" (no such row before: check the --row-id)" if args.row_id else ""))
    for why in batch.warnings:
        _say(f"WARNING: {why}", sys.stderr)
    _say(f"gradebook: {batch.out}/grades.csv, {total} row(s) ({book or 'none'})")
    finals = list(batch.finals.values())
    if any(f.applied or f.late is not None or f.pending for f in finals):
        _say(f"final grades: {sum(len(f.applied) for f in finals)} adjustment(s) of "
             f"adjustments.csv applied, {sum(1 for f in finals if f.late and f.late.late)} late, "
             f"{sum(1 for f in finals if f.late and f.late.submitted is None and not f.late.marked)} "
             "with no submission "
             f"time, {sum(1 for f in finals if f.pending)} waiting for a by-hand grade")
    if batch.summary_text:
        _say(f"summary: {batch.out}/summary.md, {batch.out}/summary.png")
        _say(f"feedback to hand back: {batch.out}/students/<student>/ (.html, .md); for the "
             "LMS: kpca-course export")
    for why in batch.summary_errors:
        _say(f"WARNING not written (the grades are): {why}", sys.stderr)
    for group in batch.lookalikes:
        _say("WARNING look-alike names (check which student is which): "
             + " / ".join(repr(g) for g in group), sys.stderr)
    for rid, why in batch.suspicious.items():
        _say(f"WARNING suspicious name {rid!r}: {why}", sys.stderr)
    failed = [row for row in batch if row.grader_error]
    for row in failed:
        _say(f"GRADER FAILURE {row.submission!r}: {visible(row.grader_error)}", sys.stderr)
    if failed:
        _say(f"{len(failed)} row(s) are `crashed` by the grader's fault, not the students': fix "
             "the problem and grade them again with --merge.", sys.stderr)
    if write_error is not None:
        _say(f"kpca-course grade: {write_error.strerror or write_error}", sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_GRADER_FAILURE if failed else EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from .grading.handback.trees import export_gradebook

    formats = ["plain", "canvas", "moodle"] if "all" in args.format else list(
        dict.fromkeys(args.format))
    try:
        done = export_gradebook(Path(args.out), formats=formats,
                                roster_path=Path(args.roster) if args.roster else None,
                                archives=args.archives, canvas_column=args.canvas_column,
                                moodle_column=args.moodle_column,
                                allow_missing=args.allow_missing)
    except (OSError, ValueError) as exc:
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _say(f"kpca-course export: {text}", sys.stderr)
        return EXIT_USAGE
    for name, n in done.files.items():
        _say(f"wrote {done.out}/{name}: {n} row(s)")
    for name, why in done.empty.items():
        _say(f"NOT WRITTEN {done.out}/{name}: {why}", sys.stderr)
    _say(f"feedback: {done.out}/students/ ({done.refreshed.students} student folder(s), .html "
         "and .md)" + (f"; archives: {done.out}/archives/ ({done.refreshed.archives} .zip)"
                       if args.archives else ""))
    _say(f"final grades: {done.adjustments} adjustment(s) applied, {done.late} late "
         "submission(s)")
    lists = [
        (done.unmatched, "submission(s) with no roster entry (not in the LMS files; add them "
         "to the roster)"),
        (done.absent, "student(s) of the roster with no submission (not in the LMS files: the "
         "LMS keeps their grade; the plain file lists them as missing)"),
        (done.pending, "row(s) wait for a by-hand grade (exported with the points so far; add "
         "them to adjustments.csv)"),
        (done.held, "row(s) the grader failed on (held back from the LMS files until graded "
         "again with --merge)"),
        (done.duplicates, "row(s) of a student with several rows (left out of the LMS files, "
         "which hold one grade per student: keep one row per student)"),
    ]
    for name, rows in done.unidentified.items():
        lists.append((rows, f"row(s) left out of {name}: their roster entry lacks the id it "
                      "needs (Canvas: ID, SIS User ID or SIS Login ID; Moodle: an email)"))
    for items, what in lists:
        if items:
            shown = ", ".join(repr(i) for i in items[:20])
            more = f" and {len(items) - 20} more" if len(items) > 20 else ""
            _say(f"WARNING {len(items)} {what}: {shown}{more}", sys.stderr)
    for why in done.refreshed.warnings:
        _say(f"WARNING: {why}", sys.stderr)
    for final in done.refreshed.finals.values():
        for why in final.warnings:
            _say(f"WARNING grade {final.row!r}: {why}", sys.stderr)
    for why in done.errors:
        _say(f"ERROR not written: {why}", sys.stderr)
    if args.summary and done.refreshed.summary is not None:
        _say(summary_compact(done.refreshed.summary))
    return _export_status(args, done)


def _export_status(args: argparse.Namespace, done: Any) -> int:
    """The exit code of ``export`` (see the module's docstring), with the line that says why."""
    if done.errors:
        return EXIT_INCOMPLETE
    if done.empty and not args.allow_missing:
        _say("kpca-course export: an LMS file would hold no student (see above); check the "
             "roster (--roster) against the gradebook's student folders.", sys.stderr)
        return EXIT_EMPTY
    lms = any(not name.endswith("grades-with-ids.csv") for name in done.files)
    left = lms and (done.unmatched or done.unidentified or done.absent or done.held
                    or done.duplicates)
    if left and not args.allow_missing:
        _say("kpca-course export: the LMS file(s) leave out the rows or students listed above "
             "(exit 4); fix them, or pass --allow-missing when that is intended.", sys.stderr)
        return EXIT_LEFT_OUT
    return EXIT_OK


def summary_compact(summary: Any) -> str:
    from .grading.record.summary import summary_markdown

    return summary_markdown(summary, compact=True)


def _collect(args: argparse.Namespace) -> int:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from .grading.record.collect import CollectOptions, collect
    from .grading.record.lms_names import check_pattern
    from .grading.record.roster import RosterError, load_roster

    try:
        zone = ZoneInfo(args.timezone) if args.timezone else None
    except (ZoneInfoNotFoundError, ValueError):
        _say(f"kpca-course collect: --timezone {args.timezone!r} is not a time zone name; write "
             "it like Europe/Berlin or America/New_York.", sys.stderr)
        return EXIT_USAGE
    try:
        roster = load_roster(args.roster) if args.roster else None
        pattern = check_pattern(args.pattern) if args.pattern else None
        lms = "pattern" if pattern is not None else args.lms
        options = CollectOptions(args.assignment, lms, pattern, args.match, args.time_format,
                                 zone, args.dry_run, args.replace)
        done = collect(Path(args.download), Path(args.out), roster, options)
    except (OSError, ValueError, RosterError) as exc:
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _say(f"kpca-course collect: {text}", sys.stderr)
        return EXIT_USAGE
    return _report_collect(args, done)


def _report_collect(args: argparse.Namespace, done: Any) -> int:
    verb = "would collect" if args.dry_run else "collected"
    _say(f"{verb} {done.taken + len(done.kept)} student(s)' {args.assignment} from "
         f"{args.download} (named as {done.lms} names them) into {done.out}: "
         f"{len(done.written)} new, {len(done.unchanged)} unchanged, {len(done.replaced)} "
         f"replaced, {len(done.kept)} kept as they were")
    lists = [
        (done.kept, "collected file(s) differ from the download and were kept (run again with "
         "--replace to take the download's; the old ones go to .replaced/)"),
        (done.unmatched, "file(s) name an id that is not in the roster (a student who joined "
         "late? export the roster again)"),
        (done.unnamed, "file(s) are not named as the LMS names submissions (not taken)"),
        (done.not_notebooks, "file(s) are not notebooks (not taken; a .py or .pdf is not "
         "graded)"),
        (done.archives, "archive(s) inside the download"),
        (done.unsafe, "file(s) were refused"),
        (done.times, "submission time(s) could not be read (late work will say 'unknown')"),
    ]
    for student, files in done.older.items():
        lists.append((files, f"other file(s) of {student} (the newest was taken)"))
    for items, what in lists:
        if items:
            shown = "; ".join(items[:20]) + (f"; and {len(items) - 20} more" if len(items) > 20 else "")
            _say(f"WARNING {len(items)} {what}: {shown}", sys.stderr)
    if done.missing:
        _say(f"{len(done.missing)} roster student(s) handed in no notebook: "
             + ", ".join(done.missing[:20]) + (" ..." if len(done.missing) > 20 else ""))
    if done.taken and not args.dry_run:
        _say(f"next: kpca-course grade --assignment {args.assignment} --out "
             f"grades/{args.assignment} --root {done.out} {done.out}/*/{args.assignment}.ipynb")
    left = (done.kept or done.unmatched or done.unnamed or done.not_notebooks or done.archives
            or done.unsafe or done.times or done.older)
    if not done.taken and not done.kept:
        return EXIT_USAGE
    return EXIT_GRADER_FAILURE if left else EXIT_OK


def _gradebook(args: argparse.Namespace) -> int:
    """``kpca-course gradebook ACTION``: list or repair the rows of a gradebook."""
    from .grading.record import repair
    from .grading.record.gradebook import GradebookWriteError

    where = f"kpca-course gradebook {args.action}"
    try:
        book, rules = repair.open_book(Path(args.out))
    except (OSError, ValueError) as exc:
        _say(f"{where}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}",
             sys.stderr)
        return EXIT_USAGE
    with book:
        if args.action == "list":
            return _gradebook_list(book, rules)
        try:
            done = _gradebook_change(args, book, rules)
        except GradebookWriteError as exc:
            _say(f"{where}: {exc.strerror or exc}", sys.stderr)
            return EXIT_INCOMPLETE
        except (OSError, ValueError) as exc:
            _say(f"{where}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}",
                 sys.stderr)
            return EXIT_USAGE
        for line in done.done:
            _say(line)
        for why in done.warnings:
            _say(f"WARNING {why}", sys.stderr)
        return _gradebook_refresh(book)


def _gradebook_change(args: argparse.Namespace, book: Any, rules: Any) -> Any:
    from .grading.record import repair

    if args.action == "remove":
        return repair.remove_rows(book, rules, args.rows, why=args.why)
    if args.action == "restore":
        return repair.restore_rows(book, rules, args.rows)
    if args.action == "rename":
        return repair.rename_row(book, rules, args.old, args.new)
    if args.action == "reroot":
        return repair.reroot(book, rules, Path(args.root))
    return repair.replace_row(book, rules, args.row, args.by)


def _gradebook_refresh(book: Any) -> int:
    """The summary and the hand-back pages rebuilt as after ``grade``."""
    from .grading.handback.trees import refresh

    done = refresh(book)
    _say(f"gradebook: {book.out}/grades.csv, {len(book.rows)} row(s); summary and students/ "
         "rebuilt")
    for why in done.warnings:
        _say(f"WARNING: {why}", sys.stderr)
    for why in done.errors:
        _say(f"ERROR not written: {why}", sys.stderr)
    stale = [d for d in ("export", "archives") if os.path.lexists(book.out / d)]
    if stale:
        _say(f"{' and '.join(f'{d}/' for d in stale)} still hold the rows as they were: run "
             f"kpca-course export --out {book.out} (with your options) again", sys.stderr)
    return EXIT_INCOMPLETE if done.errors else EXIT_OK


def _gradebook_list(book: Any, rules: Any) -> int:
    from .grading.record import repair
    from .grading.record.gradebook import format_points
    from .grading.text import visible

    rows, warnings = repair.list_rows(book, rules)
    _say(f"gradebook {book.out}: {book.assignment}, {len(rows)} row(s), row ids relative to "
         f"{book.root}")
    table = [("ROW", "STATUS", "SCORE", "HANDED IN AS", "FILE")] + [
        (visible(r["row"]), str(r["status"]),
         f"{format_points(r['score'])}/{format_points(float(r['max_score']))}",
         visible(str(r["handed_in_as"])), visible(str(r["file"]))) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(4)]
    for line in table:
        _say("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=False))
             + "  " + line[4])
    trash = repair.trash_rows(book)
    if trash:
        _say(f"in the trash ({len(trash)}; kpca-course gradebook restore --out {book.out} ROW): "
             + ", ".join(f"{visible(r)!r} ({t})" for r, t in trash.items()))
    for why in warnings:
        _say(f"WARNING {why}", sys.stderr)
    return EXIT_OK


def _cluster(text: str) -> str:
    from .grading.run.cluster import parse_cluster  # does not import Dask

    try:
        parse_cluster(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kpca-course", description="Release and grade the Kernel PCA course homework."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    rel = sub.add_parser("release", help="generate exercises/ from solutions/")
    rel.add_argument("--check", action="store_true",
                     help="write nothing; exit 1 naming the files that differ")
    rel.add_argument("--solutions", help="solutions folder (default: the repository's)")
    rel.add_argument("--exercises", help="exercises folder (default: the repository's)")
    rel.add_argument("--student-edition", metavar="DIR",
                     help="write the student edition (lectures, exercises, library, student tests, "
                     "README, Makefile, lock file; no solutions) into DIR: a new or empty folder, "
                     "or a previous student edition, whose files are replaced; then run the leak "
                     "scan on it")
    rel.add_argument("--git", action="store_true",
                     help="with --student-edition: make DIR a fresh git repository with one commit "
                     "(no history), or add a commit if it is one already")
    rel.set_defaults(func=_release)

    sc = sub.add_parser("scan", help="look for solution code, hidden checks, the grading secret "
                        "and solutions/ paths in every file of a folder or archive")
    sc.add_argument("--solutions", help="solutions folder (default: the repository's)")
    sc.add_argument("--secret", action="append",
                    help="also look for this text (a canary); repeatable")
    sc.add_argument("paths", nargs="+", metavar="PATH",
                    help="a student edition, a wheel, an sdist, any folder or file")
    sc.set_defaults(func=_scan)

    gr = sub.add_parser("grade", help="grade submitted notebooks of one assignment")
    gr.add_argument("--assignment", required=True,
                    help="stem of a notebook in solutions/, e.g. 01_feature_maps")
    gr.add_argument("--out", default="grades",
                    help="gradebook folder: new or empty, or a gradebook of this assignment with "
                    "--resume/--merge; nothing that kpca-course did not write is ever replaced "
                    "or deleted (default: grades)")
    mode = gr.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true",
                      help="grade only the submissions missing from the gradebook in --out "
                      "(after an interrupted run)")
    mode.add_argument("--merge", action="store_true",
                      help="add or replace the rows of these submissions (late or regraded) in "
                      "the gradebook in --out, keeping every other row")
    gr.add_argument("--row-id", metavar="ID",
                    help="with --merge and one submission: the row it fills (e.g. "
                    "alice/01_feature_maps), wherever the file is (late work kept elsewhere)")
    mode.add_argument("--regrade", metavar="QUESTION",
                      help="grade one question again in the gradebook in --out (after its check "
                      "changed), for the SUBMISSIONs given or, without any, every row from the "
                      "file it was graded from; everything else of each row is kept")
    gr.add_argument("--root",
                    help="folder the row ids are relative to (default: the gradebook's, else the "
                    "submissions' common folder): submissions/alice/03.ipynb is row alice/03")
    gr.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap",
                    help="run each submission in a bubblewrap sandbox (default), or 'none': "
                    "unsandboxed, with your rights (only for submissions you trust)")
    gr.add_argument("--timeout", type=float, default=30.0,
                    help="seconds per cell before it is interrupted (default: 30)")
    gr.add_argument("--notebook-timeout", type=float, default=None, metavar="SECONDS",
                    help="seconds one notebook may run in all, from its kernel's start (default: "
                    "10 times --timeout); past it the row is `timeout` and the questions not "
                    "yet checked score 0")
    gr.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                    help="submissions graded in parallel (default: number of cores, at most 4)")
    gr.add_argument("--cluster", type=_cluster, default=None,
                    help="run the submissions on a Dask cluster (needs the `cluster` extra), one "
                    "task per submission, instead of --jobs local workers: local:N starts N "
                    "worker processes on this machine; tcp://HOST:PORT or a scheduler file "
                    "(.json) uses a running scheduler. The secret and the checks stay here")
    gr.add_argument("--memory", type=int, default=2048,
                    help="memory limit per kernel in MB (address space; default: 2048)")
    gr.add_argument("--solutions", help="solutions folder (default: the repository's)")
    gr.add_argument("--seed", help="secret that seeds the grader's inputs (default: "
                    "$KPCA_GRADING_SECRET, else a random secret kept in ~/.config/kpca-course)")
    gr.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="student .ipynb files (a missing path stops before grading; an "
                    "unreadable file becomes an `invalid` row); a FOLDER stands for the "
                    "assignment's notebooks in it: FOLDER/ASSIGNMENT.ipynb and "
                    "FOLDER/*/ASSIGNMENT.ipynb")
    gr.set_defaults(func=_grade)

    co = sub.add_parser("collect", help="turn an LMS download (Canvas, Moodle, or any named by "
                        "--pattern) into submissions/<student>/<assignment>.ipynb, recording the "
                        "LMS's submission times for the late-work policy")
    co.add_argument("--assignment", required=True, help="the assignment (each notebook is saved "
                    "as <student>/<assignment>.ipynb)")
    co.add_argument("--out", default="submissions", help="where the submissions go: a new "
                    "folder, or one collect wrote before (default: submissions)")
    co.add_argument("--roster", help="the roster as the LMS exports it: Canvas's gradebook "
                    "export, Moodle's grading worksheet, or a CSV with a student column")
    co.add_argument("--lms", choices=("auto", "canvas", "moodle"), default="auto",
                    help="how the download names files (default: recognised from the names)")
    co.add_argument("--pattern", help="for any other platform: a regular expression matched "
                    "against each file's path in the download, with a group (?P<student>...) "
                    "and optionally (?P<timestamp>...) and (?P<late>...)")
    co.add_argument("--match", default="student", metavar="COLUMN",
                    help="with --pattern: the roster column the student group holds "
                    "(default: student, the folder name)")
    co.add_argument("--time-format", default="iso", help="with --pattern: how the timestamp "
                    "group is written, for strptime, e.g. %%Y%%m%%d%%H%%M%%S (default: iso)")
    co.add_argument("--timezone", help="the time zone of times written without an offset "
                    "(Moodle's worksheet: the zone of the account that downloaded it)")
    co.add_argument("--dry-run", action="store_true", help="say what would be collected; "
                    "write nothing")
    co.add_argument("--replace", action="store_true", help="take the download's file where a "
                    "collected one differs (the old one is moved to OUT/.replaced/)")
    co.add_argument("download", metavar="DOWNLOAD", help="the LMS's .zip, or the folder it "
                    "was unpacked into")
    co.set_defaults(func=_collect)

    ex = sub.add_parser("export", help="write the final grades for an LMS (plain CSV with ids, "
                        "Canvas, Moodle) and each student's feedback (HTML and Markdown)")
    ex.add_argument("--out", default="grades", help="the gradebook folder (grade --out; "
                    "default: grades); the files go into its export/, students/, archives/")
    ex.add_argument("--roster", help="CSV of the students: student (folder name), name or "
                    "first_name/last_name, email, lms_id, ... (default: roster in policy.toml)")
    ex.add_argument("--format", action="append", choices=("plain", "canvas", "moodle", "all"),
                    help="repeatable (default: plain)")
    ex.add_argument("--archives", action="store_true",
                    help="also write archives/<student>.zip of each student's feedback folder")
    ex.add_argument("--canvas-column", metavar="TITLE",
                    help="the Canvas assignment column, as Canvas's own export titles it, e.g. "
                    "'Homework 1 (123456)' (default: the assignment's name)")
    ex.add_argument("--moodle-column", metavar="TITLE",
                    help="the grade column of the Moodle file (default: 'Assignment: NAME "
                    "(Real)', as Moodle's own export titles it)")
    ex.add_argument("--allow-missing", action="store_true",
                    help="exit 0 although rows or roster students are left out of an LMS file "
                    "(e.g. students who handed in nothing)")
    ex.add_argument("--summary", action="store_true",
                    help="also print the gradebook's summary after the files written")
    ex.set_defaults(func=_export, format=None)

    gb = sub.add_parser("gradebook", help="list a gradebook's rows and repair them: remove "
                        "(into its trash/), restore, rename, reroot, replace")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--out", default="grades",
                       help="the gradebook folder (grade --out; default: grades)")
    acts = gb.add_subparsers(dest="action", required=True)
    acts.add_parser("list", parents=[where], help="the rows: id, status, final score, the "
                    "file each was graded from; the folder the ids are relative to; the trash")
    rm = acts.add_parser("remove", parents=[where], help="take rows out: each row and its "
                         "feedback go into trash/<time>/, logged in trash/log.jsonl")
    rm.add_argument("rows", nargs="+", metavar="ROW", help="row id, e.g. alice/01_feature_maps")
    rm.add_argument("--why", default="", help="the reason, kept in trash/log.jsonl")
    rs = acts.add_parser("restore", parents=[where], help="bring removed rows back from trash/")
    rs.add_argument("rows", nargs="+", metavar="ROW", help="row id of a removed row")
    rn = acts.add_parser("rename", parents=[where], help="give a row another id (e.g. after a "
                         "misspelt folder); its feedback is kept; a clash is refused")
    rn.add_argument("old", metavar="OLD")
    rn.add_argument("new", metavar="NEW")
    rr = acts.add_parser("reroot", parents=[where], help="make every row id relative to another "
                         "folder (a gradebook pinned to a wrong one: submissions/alice/01 -> "
                         "alice/01); refused if two rows would merge")
    rr.add_argument("--root", required=True, help="the folder the row ids become relative to")
    rp = acts.add_parser("replace", parents=[where], help="take out a row that is not graded "
                         "(e.g. a .py handed in) for the same student's other row (the right "
                         "notebook, merged later)")
    rp.add_argument("row", metavar="ROW", help="the row to take out (into trash/)")
    rp.add_argument("--by", required=True, metavar="ROW", help="the student's row to keep")
    gb.set_defaults(func=_gradebook)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kpca-course``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "grade" and not args.submissions and not args.regrade:
        parser.error("grade: give the SUBMISSION files (only --regrade can go without them)")
    if args.command == "export" and not args.format:
        args.format = ["plain"]
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
