"""A gradebook you can repair: ``kpca-course gradebook list|remove|restore|rename|reroot|replace``,
and ``grade`` given a folder or rows of another root (issue 38, item 3).

End to end through :func:`kpca_lib.course.cli.main` on real gradebooks, graded with
``--sandbox none``; most submissions are files that are not notebooks (``invalid`` rows: no
kernel runs), so a test costs about one kernel (the canary) per ``grade``. No test depends
on timing.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from test_gradebook import (
    ASSIGNMENT,
    add,
    assert_valid_gradebook,
    book,
    full_copy,
    garbage,
    new_book,
    save,
)

from kpca_lib.course.cli import EXIT_USAGE, main
from kpca_lib.course.grading.record import gradebook as gb

NB = f"{ASSIGNMENT}.ipynb"
ROSTER = """\
student,name,email,lms_id
alice,Alice Liddell,alice@uni.example,1001
bob,Bob Marley,bob@uni.example,1002
"""


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret")


def grade(out: Path, files, *extra: str) -> int:
    return main(
        [
            "grade",
            "--assignment",
            ASSIGNMENT,
            "--out",
            str(out),
            "--jobs",
            "1",
            "--timeout",
            "60",
            "--sandbox",
            "none",
            *extra,
            *[str(f) for f in files],
        ]
    )


def repair(out: Path, action: str, *args: str) -> int:
    return main(["gradebook", action, "--out", str(out), *args])


def ids(out: Path) -> list[str]:
    return [r["submission"] for r in book(out)["submissions"]]


def csv_ids(out: Path) -> list[str]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        return [r["submission"] for r in csv.DictReader(fh)]


def consistent(out: Path) -> None:
    """grades.json and grades.csv hold the same rows, each with its feedback file; no leftovers
    (scores: assert_valid_gradebook, where no adjustment applies)."""
    assert csv_ids(out) == ids(out)
    for r in book(out)["submissions"]:
        assert f"(status: {r['status']})" in (out / r["feedback"]).read_text(encoding="utf-8")
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]


def log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "trash" / "log.jsonl").read_text().splitlines()]


def instructor_files(out: Path, roster: Path) -> dict[str, tuple[bytes, int]]:
    paths = [out / "policy.toml", out / "adjustments.csv", roster]
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in paths}


# --------------------------------------------------------------------------- grade FOLDER
def test_a_folder_is_graded_as_the_notebooks_in_it(tmp_path, capsys):
    subs = tmp_path / "submissions"
    garbage(subs / "alice" / NB)
    garbage(subs / "bob" / NB)
    garbage(subs / "carol" / f"{ASSIGNMENT}.py")  # handed in the wrong file: named, not graded
    garbage(subs / ".ipynb_checkpoints" / NB)
    out = tmp_path / "grades"
    assert grade(out, [subs]) == 0
    said = capsys.readouterr().out
    assert ids(out) == [f"alice/{ASSIGNMENT}", f"bob/{ASSIGNMENT}"]
    assert book(out)["root"] == str(
        subs
    )  # not its parent: later rows are alice/..., not submissions/...
    assert f"is a folder: grading the 2 {NB} in it" in said
    assert f"not graded, no {NB} in: carol ({ASSIGNMENT}.py)" in said
    # a later merge of the same folder adds the newcomer with the same kind of id
    garbage(subs / "dave" / NB)
    assert grade(out, [subs], "--merge") == 0
    assert ids(out)[-1] == f"dave/{ASSIGNMENT}"
    # a folder with none of the assignment's notebooks: refused with the command to use
    empty = tmp_path / "elsewhere"
    garbage(empty / "alice" / "homework.ipynb")
    before = (out / "grades.json").read_bytes()
    assert grade(out, [empty], "--merge") == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"holds no {NB}" in err and f"kpca-course grade --assignment {ASSIGNMENT}" in err
    assert (out / "grades.json").read_bytes() == before


def test_merge_into_a_gradebook_pinned_to_a_wrong_root_is_refused_then_repaired(tmp_path, capsys):
    """What the folder slip left before this fix: one invalid row for the folder itself, and
    row ids relative to the folder above. A merge is refused (not silently `submissions/...`);
    remove + reroot repair it."""
    subs = tmp_path / "submissions"
    alice = garbage(subs / "alice" / NB)
    out = tmp_path / "grades"
    with new_book(out) as b:
        b.start(tmp_path, "none")
        add(b, "submissions")
    before = (out / "grades.json").read_bytes()
    assert grade(out, [alice], "--merge") == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"would be rows 'submissions/alice/{ASSIGNMENT}'" in err
    assert f"kpca-course gradebook reroot --out {out} --root DIR" in err and "--root" in err
    # another --root than the gradebook's is checked too (rows alice/... beside 'submissions')
    assert grade(out, [alice], "--merge", "--root", str(subs)) == EXIT_USAGE
    assert "gradebook reroot" in capsys.readouterr().err
    assert (out / "grades.json").read_bytes() == before
    # reroot refuses while the folder's own row is there, and names the fix
    assert repair(out, "reroot", "--root", str(subs)) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "'submissions'" in err and f"kpca-course gradebook remove --out {out} submissions" in err
    assert repair(out, "remove", "submissions", "--why", "the folder graded by mistake") == 0
    assert repair(out, "reroot", "--root", str(subs)) == 0
    assert f"row ids are now relative to {subs}" in capsys.readouterr().out
    assert grade(out, [alice], "--merge") == 0
    assert ids(out) == [f"alice/{ASSIGNMENT}"]
    assert [e["action"] for e in log(out)] == ["remove", "reroot"]


def test_reroot_a_gradebook_pinned_to_the_folder_above(tmp_path, capsys):
    subs = tmp_path / "submissions"
    files = [garbage(subs / s / NB) for s in ("alice", "bob")]
    out = tmp_path / "grades"
    assert grade(out, files, "--root", str(tmp_path)) == 0  # pinned one folder too high
    old = {r["submission"]: r for r in book(out)["submissions"]}
    assert list(old) == [f"submissions/alice/{ASSIGNMENT}", f"submissions/bob/{ASSIGNMENT}"]
    pages = sorted(p.relative_to(out) for p in (out / "students").rglob("*.html"))
    assert repair(out, "reroot", "--root", str(subs)) == 0
    said = capsys.readouterr().out
    assert f"renamed row 'submissions/alice/{ASSIGNMENT}' to 'alice/{ASSIGNMENT}'" in said
    data = book(out)
    assert data["root"] == str(subs)
    assert csv_ids(out) == ids(out) == [f"alice/{ASSIGNMENT}", f"bob/{ASSIGNMENT}"]
    for r in data["submissions"]:  # the feedback is kept, the file it came from too
        was = old[f"submissions/{r['submission']}"]
        assert (r["feedback"], r["file"]) == (was["feedback"], was["file"])
        assert r["handed_in_as"] == f"{r['submission']}.ipynb"
    assert_valid_gradebook(out)
    # the old hand-back pages went into the trash; the new ones are in students/
    for page in pages:
        assert not (out / page).exists()
        assert list((out / "trash").glob(f"*/{page}"))
    index = json.loads((out / "students" / "index.json").read_text())
    assert set(index) == {f"alice/{ASSIGNMENT}", f"bob/{ASSIGNMENT}"}
    # a root that does not hold every row is refused
    before = (out / "grades.json").read_bytes()
    assert repair(out, "reroot", "--root", str(subs / "alice")) == EXIT_USAGE
    assert "are not inside" in capsys.readouterr().err
    assert (out / "grades.json").read_bytes() == before


# --------------------------------------------------------------------------- .py, then .ipynb
def test_a_py_then_the_notebook_ends_with_one_row_per_student_in_the_lms_file(tmp_path, capsys):
    subs = tmp_path / "submissions"
    wrong = subs / "alice" / f"{ASSIGNMENT}.py"
    wrong.parent.mkdir(parents=True)
    wrong.write_text("def phi_3(x):\n    return x\n")
    out = tmp_path / "grades"
    assert grade(out, [wrong, garbage(subs / "bob" / NB)]) == 0
    right = save(subs / "alice" / NB, full_copy())
    assert grade(out, [right], "--merge") == 0
    assert ids(out) == [f"alice/{ASSIGNMENT}.py", f"bob/{ASSIGNMENT}", f"alice/{ASSIGNMENT}"]
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    capsys.readouterr()
    main(["export", "--out", str(out), "--format", "canvas", "--roster", str(roster)])
    assert "several rows" in capsys.readouterr().err  # alice is left out of the LMS file
    # the graded row cannot be replaced by the invalid one
    assert repair(out, "replace", f"alice/{ASSIGNMENT}", "--by", f"alice/{ASSIGNMENT}.py") == 2
    assert "kpca-course gradebook remove" in capsys.readouterr().err
    assert repair(out, "replace", f"alice/{ASSIGNMENT}.py", "--by", f"alice/{ASSIGNMENT}") == 0
    said = capsys.readouterr().out
    assert f"kept 'alice/{ASSIGNMENT}' (graded, 12/12" in said and "removed row" in said
    assert ids(out) == [f"bob/{ASSIGNMENT}", f"alice/{ASSIGNMENT}"]
    assert_valid_gradebook(out)
    assert main(["export", "--out", str(out), "--format", "canvas", "--roster", str(roster)]) == 0
    assert "several rows" not in capsys.readouterr().err
    text = (out / "export" / "canvas-import.csv").read_text(encoding="utf-8")
    lines = {r["ID"]: r for r in csv.DictReader(io.StringIO(text))}
    assert float(lines["1001"][ASSIGNMENT]) == 12.0 and float(lines["1002"][ASSIGNMENT]) == 0.0
    entry = log(out)[-1]
    assert (entry["action"], entry["rows"]) == ("remove", [f"alice/{ASSIGNMENT}.py"])
    assert "replaced by" in entry["why"]


# --------------------------------------------------------------------------- remove, list, restore
@pytest.fixture
def two_rows(tmp_path) -> tuple[Path, Path]:
    """A gradebook of alice and bob (invalid rows) with the instructor's files."""
    subs = tmp_path / "submissions"
    garbage(subs / "alice" / NB)
    garbage(subs / "bob" / NB)
    out = tmp_path / "grades"
    out.mkdir()
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    (out / "policy.toml").write_text('roster = "../roster.csv"\n')
    (out / "adjustments.csv").write_text(
        f"row,question,points,score,reason\nalice/{ASSIGNMENT},,+2,,resubmitted by mail\n"
    )
    assert grade(out, [subs]) == 0
    return out, roster


def test_remove_list_restore_and_the_instructors_files_untouched(two_rows, capsys):
    out, roster = two_rows
    mine = instructor_files(out, roster)
    alice = f"alice/{ASSIGNMENT}"
    feedback = out / book(out)["submissions"][0]["feedback"]
    text = feedback.read_text()
    capsys.readouterr()
    assert repair(out, "list") == 0
    said = capsys.readouterr().out
    assert f"row ids relative to {out.parent / 'submissions'}" in said
    assert f"{alice}  invalid  2/12" in said  # the final score: the adjustment applies
    assert repair(out, "remove", alice, "--why", "copied") == 0
    said, err = capsys.readouterr()
    assert f"removed row '{alice}' (invalid, 0/12" in said
    assert f"undo: kpca-course gradebook restore --out {out} {alice}" in said
    assert "adjustments.csv line 2 names" in err and "was not changed" in err
    assert ids(out) == csv_ids(out) == [f"bob/{ASSIGNMENT}"]
    assert not feedback.exists()
    entry = log(out)[0]
    assert (entry["action"], entry["rows"], entry["why"]) == ("remove", [alice], "copied")
    kept = json.loads((out / entry["trash"] / "rows.json").read_text())
    assert [r["submission"] for r in kept["rows"]] == [alice]
    assert (out / entry["trash"] / "feedback" / feedback.name).read_text() == text
    assert "**1 submission**" in (out / "summary.md").read_text()
    assert repair(out, "list") == 0
    said = capsys.readouterr().out
    assert alice not in said.split("in the trash")[0] and f"'{alice}' (trash/" in said
    assert repair(out, "remove", "nobody/x") == EXIT_USAGE
    assert "no row 'nobody/x'" in capsys.readouterr().err
    assert repair(out, "restore", alice) == 0
    assert f"restored row '{alice}'" in capsys.readouterr().out
    assert set(ids(out)) == {alice, f"bob/{ASSIGNMENT}"}
    assert feedback.read_text() == text
    consistent(out)
    assert repair(out, "restore", alice) == EXIT_USAGE  # once only
    assert "no removed row" in capsys.readouterr().err
    assert main(["export", "--out", str(out)]) == 0  # the adjustment names a row again
    assert instructor_files(out, roster) == mine


def test_rename_refuses_a_clash_and_warns_for_the_adjustment(two_rows, capsys):
    out, roster = two_rows
    mine = instructor_files(out, roster)
    before = {p: (out / p).read_bytes() for p in ("grades.json", "grades.csv")}
    alice, bob = f"alice/{ASSIGNMENT}", f"bob/{ASSIGNMENT}"
    capsys.readouterr()
    assert repair(out, "rename", alice, bob) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"there is a row '{bob}' already" in err and "gradebook remove" in err
    assert repair(out, "rename", alice, "../x") == EXIT_USAGE
    assert "is not a row id" in capsys.readouterr().err
    assert {p: (out / p).read_bytes() for p in before} == before
    feedback = book(out)["submissions"][0]["feedback"]
    assert repair(out, "rename", alice, f"alicia/{ASSIGNMENT}") == 0
    said, err = capsys.readouterr()
    assert f"renamed row '{alice}' to 'alicia/{ASSIGNMENT}'" in said
    assert f"adjustments.csv line 2 names '{alice}', which is now 'alicia/{ASSIGNMENT}'" in err
    assert ids(out) == csv_ids(out) == [f"alicia/{ASSIGNMENT}", bob]
    assert book(out)["submissions"][0]["feedback"] == feedback
    consistent(out)
    assert (out / "students" / "alicia").is_dir()
    assert instructor_files(out, roster) == mine


# --------------------------------------------------------------------------- the Gradebook's part
def test_gradebook_rewrites_rows_and_moves_files_without_following_links(tmp_path):
    out = tmp_path / "out"
    with new_book(out) as b:
        b.start(tmp_path, "none")
        add(b, "alice")
        add(b, "bob")
    victim = tmp_path / "victim.md"
    victim.write_text("keep me")
    with new_book(out, "merge") as b:
        alice, bob = b.rows["alice"], b.rows["bob"]
        with pytest.raises(ValueError, match="same id"):
            b.rewrite([alice, {**bob, "submission": "alice"}], b.root)
        b.rewrite([bob, {**alice, "submission": "carol"}], "/elsewhere")
        assert b.read_file(alice["feedback"]).startswith(b"**Score")
        with pytest.raises(ValueError, match="not a file"):
            b.write_file("grades.json", b"forged")
        with pytest.raises(ValueError, match="not a file"):
            b.unlink_file("policy.toml")
        b.write_file("trash/t1/feedback/x.md", b"copy")
        (out / "feedback" / "planted.md").symlink_to(victim)
        with pytest.raises(gb.GradebookError, match="symbolic link"):
            b.read_file("feedback/planted.md")
        with pytest.raises(gb.GradebookWriteError, match="not a regular file"):
            b.unlink_file("feedback/planted.md")
        assert b.unlink_file("feedback/absent.md") is False
        assert b.read_file("trash/none/rows.json") is None
    assert victim.read_text() == "keep me"
    assert (out / "trash" / "t1" / "feedback" / "x.md").read_bytes() == b"copy"
    data = book(out)
    assert (data["root"], ids(out), csv_ids(out)) == (
        "/elsewhere",
        ["bob", "carol"],
        ["bob", "carol"],
    )


def test_refusals_name_the_fix(two_rows, capsys):
    out, _ = two_rows
    capsys.readouterr()
    assert repair(out.parent / "nowhere", "list") == EXIT_USAGE
    assert "does not exist" in capsys.readouterr().err
    alice, bob = f"alice/{ASSIGNMENT}", f"bob/{ASSIGNMENT}"
    assert repair(out, "replace", alice, "--by", bob) == EXIT_USAGE
    assert "not two rows of one student" in capsys.readouterr().err
    assert repair(out, "reroot", "--root", str(out.parent / "submissions")) == EXIT_USAGE
    assert "already" in capsys.readouterr().err
    assert not (out / "trash").exists()
