"""Adversarial suite: hostile submissions against a sandboxed ``kpca-course grade``.

One batch (graded once, by a module-scoped fixture, with the documented flags
``--timeout 30 --jobs 2 --memory 2048`` and the default sandbox) holds one submission
per attack class (tests/attack_catalog.py) with honest neighbours, a full and a blank
submission after every few attacks. The grader runs in a hostile world
(tests/attack_world.py): a fake HOME with canaries, a canary grading secret in its
environment and in ~/.config, an instructor folder, a canary copy of solutions/, and
per-student submission folders.

For every attack: its own row has the status and score it deserves; honest rows are
exactly the honest grades; nothing outside the output folder changes; no canary
reaches the gradebook or the CLI's output; no process started by a submission
outlives the grader; the gradebook is valid CSV and JSON and is not edited after the
grader returns. Attacks on the grader process itself (SIGKILL, SIGSTOP, kill(-1),
special files as exports) have their own small batch. The second review's attacks
that need more than one grader run, other flags or a chunk of their own are in
tests/test_grading_attacks_2.py, with the same machinery (``grade_batch`` and the checks).

No assertion depends on timing: the only waits are a hang guard (a failure) and a
bounded number of polls for processes to be gone.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import attack_catalog as C
import attack_world as W
import nbformat
import pytest
from attack_prelude import PRELUDE

from kpca_lib.course.grading.record.gradebook import CSV_EXTRA, csv_cell, problem

DUMMY = {"pids": "/nonexistent", "soldirs": []}
ATTACKS = C.catalog(DUMMY)
KILLERS = C.killer_catalog(DUMMY)
FOLDER = {"csv_injection": "=1+2-csv_injection"}  # a row id that starts like a formula
GROUP = 5  # a full and a blank neighbour before every GROUP attacks


def folder_of(name: str, prefix: str = "") -> str:
    return prefix + FOLDER.get(name, name)


def attack_notebook(world: W.World, attack: C.Attack):
    """The submission of one attack: a notebook, or raw bytes."""
    if attack.raw is not None and attack.raw != b"deep":
        return None, attack.raw  # written specially by write_submission
    if attack.raw == b"deep":
        depth = 100_000
        return None, ('{"cells": [], "metadata": {"x": ' + "[" * depth + "]" * depth
                      + '}, "nbformat": 4, "nbformat_minor": 5}').encode()
    nb = W.blank() if attack.mutate == "blank" else W.student_copy()
    if attack.mutate == "full":
        return nb, None
    if attack.mutate == "object_id":
        data = json.loads(nbformat.writes(nb))
        for c in data["cells"]:
            if c.get("id") == "q1-p3-answer":
                c["id"] = {"$ref": "q1-p3-answer", "nested": {"a": [1, 2]}}
        return None, json.dumps(data).encode()
    if attack.mutate == "blank_q2":
        W.cell(nb, "q2-answer").source = W.cell(W.EXERCISE, "q2-answer").source
    body = attack.body.replace("__HONEST_P3__", W.honest("q1-p3-answer"))
    src = PRELUDE.replace("__CONFIG__", repr(world.config(attack.name))) + body
    W.cell(nb, attack.cell).source = src
    return nb, None


def honest_full(world: W.World):
    nb = W.student_copy()
    for c in nb.cells:
        if c.id in ("q1-p3-answer", "q1-p4-answer", "q1-general-answer", "q2-answer"):
            c.source = f"# {world.canaries['classmate']}\n" + c.source
    return nb


@dataclass
class Batch:
    world: W.World
    run: W.GraderRun
    attacks: dict[str, C.Attack]
    honest: dict[str, str]  # folder -> "full" | "blank"
    paths: list[Path]
    before: dict[str, dict]
    csv_at_return: bytes | None
    out: Path  # this run's --out
    prefix: str = ""  # of every student folder of this batch (several runs in one world)

    def gradebook(self) -> W.Gradebook:
        """The gradebook, even after a failed run if it was written (the exit code is checked
        by its own test)."""
        assert (self.out / "grades.csv").exists() and (self.out / "grades.json").exists(), (
            f"no gradebook: exit code {self.run.rc}, stopped={self.run.stopped}, "
            f"hung={self.run.hung}; output tail:\n{self.run.output[-3000:]}")
        return W.read_gradebook(self.out, self.world.subs)

    def folder(self, name: str) -> str:
        return folder_of(name, self.prefix)

    def row(self, name: str) -> dict:
        """An attack's row in grades.json."""
        return self.gradebook().by_student[self.folder(name)]

    def feedback(self, name: str) -> str:
        """An attack's feedback file."""
        rel = self.row(name).get("feedback")
        assert isinstance(rel, str) and rel.startswith("feedback/"), f"{name}: no feedback file ({rel!r})"
        return (self.out / rel).read_text(encoding="utf-8")


def grade_batch(world: W.World, attacks: list[C.Attack], *extra: str, prefix: str = "",
                out: Path | None = None, hang_guard: float | None = None) -> Batch:
    """Write the attacks' submissions with a full and a blank honest neighbour before every
    GROUP attacks and after the last (student folders named with ``prefix``), then grade
    them all in one run of the CLI (``extra`` flags after the documented ones) into ``out``."""
    out = out or world.out
    paths, honest, by_name = [], {}, {}
    k = 0

    def neighbours() -> None:
        nonlocal k
        k += 1
        paths.append(W.write_submission(world, f"{prefix}honest_full_{k}", honest_full(world)))
        honest[f"{prefix}honest_full_{k}"] = "full"
        paths.append(W.write_submission(world, f"{prefix}honest_blank_{k}", W.blank()))
        honest[f"{prefix}honest_blank_{k}"] = "blank"

    for i, attack in enumerate(attacks):
        if i % GROUP == 0:
            neighbours()
        nb, raw = attack_notebook(world, attack)
        paths.append(W.write_submission(world, folder_of(attack.name, prefix), nb, raw))
        by_name[attack.name] = attack
    neighbours()
    world.outs.append(out)
    before = {
        "home": W.snapshot(world.home),
        "course": W.snapshot(world.course, skip=(world.out, *world.outs)),
    }
    run = W.run_grader(world, paths, *extra, out=out, hang_guard=hang_guard)
    csv_path = out / "grades.csv"
    csv_at_return = csv_path.read_bytes() if csv_path.exists() else None
    return Batch(world, run, by_name, honest, paths, before, csv_at_return, out, prefix)


def cleanup(world: W.World) -> None:
    W.kill_marker_processes(world.marker)
    W.kill_marker_processes(f"TMPDIR={world.tmp}")  # a grader killed by the suite leaves children
    W.remove_marker_files(world.marker)
    world.close()


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    world = W.make_world(tmp_path_factory.mktemp("world"))
    try:
        yield grade_batch(world, C.catalog(world.config("")))
    finally:
        cleanup(world)


# --------------------------------------------------------------------------- checks shared by both batches
def check_finished(b: Batch) -> None:
    assert not b.run.stopped, "a submission stopped the grader (SIGSTOP): it would never finish"
    assert not b.run.hung, f"the grader still ran after {W.HANG_GUARD:g} s"
    assert b.run.rc == 0, f"exit code {b.run.rc}; output tail:\n{b.run.output[-3000:]}"


def check_gradebook_valid(b: Batch) -> None:
    g = b.gradebook()
    header = g.csv_text.splitlines()[0].split(",")
    assert header[:4] == ["submission", "status", "score", "max_score"], header
    assert header[4:] == [*C.Q, "run_seconds", *CSV_EXTRA], header
    assert not g.unmapped, f"rows that name no student folder: {g.unmapped}"
    expected = {b.folder(n) for n in b.attacks} | set(b.honest)
    assert set(g.by_student) == expected, (
        f"missing rows: {sorted(expected - set(g.by_student))}; extra: {sorted(set(g.by_student) - expected)}")
    assert len(g.json_data["submissions"]) == len(b.paths) == len(g.csv_rows)
    for s, entry in g.by_student.items():
        assert s in g.csv_by_student, f"{s}: its JSON row {entry['submission']!r} has no CSV row"
        row = g.csv_by_student[s]
        assert row["status"] == entry["status"], s
        assert float(row["score"]) == pytest.approx(entry["score"]), s
        for q in C.Q:
            assert float(row[q]) == pytest.approx(entry["questions"][q]), (s, q)
        assert row["message"] == csv_cell(problem(entry)), s  # why a row is not graded, in the CSV too
    for row in g.csv_rows:
        for value in row.values():
            assert not str(value).startswith(("=", "+", "-", "@")), f"CSV cell not escaped: {value!r}"


def check_honest(b: Batch) -> None:
    g = b.gradebook()
    wrong = []
    for s, kind in b.honest.items():
        e = g.by_student[s]
        want = C.FULL if kind == "full" else C.ZERO
        got = (e["status"], float(e["score"]), {q: float(e["questions"][q]) for q in C.Q})
        if got != ("graded", sum(want.values()), want):
            wrong.append(f"{s}: {got} (messages: {e.get('messages')})")
    assert not wrong, "honest neighbours' grades moved:\n" + "\n".join(wrong)


def won_flags(b: Batch, name: str) -> str:
    """What an attack wrote into its flag file when it got through (``_won``), if anything."""
    try:
        return (b.world.pids / f"{name}.won").read_text(errors="replace")[:2000]
    except OSError:
        return ""


def check_attack_row(b: Batch, name: str) -> None:
    attack = b.attacks[name]
    e = b.gradebook().by_student[b.folder(name)]
    got = (e["status"], float(e["score"]), {q: float(e["questions"][q]) for q in C.Q})
    flags = won_flags(b, name)
    assert e["status"] in attack.status and got[1:] == (attack.score, attack.per), (
        f"{name} ({attack.why}): expected status {attack.status}, score {attack.score:g} "
        f"{attack.per}; got {got}; messages: {e.get('messages')}; notes: {e.get('notes')}"
        + (f"; the attack got through: {flags}" if flags else ""))
    if attack.says:
        text = " ".join(map(str, e.get("messages") or [])).lower()
        assert any(s.lower() in text for s in attack.says), (
            f"{name}: the row's messages do not name the reason (one of {attack.says}): {e.get('messages')}")


def check_world_intact(b: Batch) -> None:
    w = b.world
    assert W.snapshot(w.home) == b.before["home"], "the fake HOME changed: " + str(
        _diff(b.before["home"], W.snapshot(w.home)))
    after = W.snapshot(w.course, skip=(w.out, *w.outs))
    assert after == b.before["course"], "the course folder changed: " + str(_diff(b.before["course"], after))
    assert (w.teaching / "notes.txt").read_text().endswith(w.canaries["notes"] + "\n")
    assert not w.out.is_symlink(), "the output folder is a symlink"
    flags = sorted(p.name for p in w.pids.iterdir())
    assert not flags, f"attacks left flags (planted code ran, an attack won, a survivor wrote): {flags}"
    left = W.marker_files(w.marker)
    assert not left, f"files written by submissions into shared places: {left}"
    planted = [str(p) for p in w.tmp.rglob("*") if w.marker in p.name or p.suffix in (".py", ".pth")]
    assert not planted, f"files planted in the grader's TMPDIR survived: {planted[:20]}"


def _diff(a: dict, b: dict) -> dict:
    keys = set(a) | set(b)
    return {k: (a.get(k), b.get(k)) for k in sorted(keys) if a.get(k) != b.get(k)}


def check_no_canary(b: Batch) -> None:
    blobs = W.tree_blobs(b.out)
    blobs["CLI output"] = b.run.output.encode()
    hits = W.find_canaries(b.world, blobs)
    assert not hits, f"canaries leaked: {hits[:20]}"
    assert f"{b.world.marker}-tiocsti" not in b.run.output, "keystrokes were pushed into the terminal"


def check_no_survivors(b: Batch) -> None:
    alive = W.wait_for_no_survivors(b.world.marker)
    assert not alive, f"processes started by submissions outlived the grader: {alive[:10]}"


# --------------------------------------------------------------------------- set-up
def test_bwrap_is_installed_and_works():
    """The sandbox needs bubblewrap and user namespaces: missing means failing, never skipping."""
    assert shutil.which("bwrap"), "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    r = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                        "--proc", "/proc", "--dev", "/dev", "true"], capture_output=True, text=True)
    assert r.returncode == 0, f"bwrap cannot create a sandbox here: {r.stderr}"


# --------------------------------------------------------------------------- the big batch
def test_grader_finished(batch):
    check_finished(batch)


def test_gradebook_is_valid(batch):
    check_gradebook_valid(batch)


def test_row_ids_name_the_student(batch):
    g = batch.gradebook()
    wrong = [(s, e["submission"]) for s, e in g.by_student.items()
             if s not in e["submission"] and s.lstrip("=+-@") not in e["submission"]]
    assert not wrong, f"row ids that lose the student's folder: {wrong[:10]}"


def test_honest_neighbours_keep_their_grades(batch):
    check_honest(batch)


@pytest.mark.parametrize("name", [a.name for a in ATTACKS])
def test_attack_gets_what_it_deserves(batch, name):
    check_attack_row(batch, name)


def test_nothing_outside_the_gradebook_changed(batch):
    check_world_intact(batch)


def test_no_canary_in_gradebook_or_output(batch):
    check_no_canary(batch)


def test_no_connection_reached_the_host(batch):
    seen = sorted({str(c) for c in batch.world.connections})
    assert not seen, f"connections reached the suite's host sockets ({len(batch.world.connections)}): {seen}"


def test_no_submission_process_survives(batch):
    check_no_survivors(batch)


QUESTION_HEADING = re.compile(r"## (" + "|".join(C.Q) + r"): ")
#: Lines of the markup attack's message (tests/attack_catalog.py, MARKUP).
MARKUP_LINES = (C.MARKUP_TOKEN, "Score: 12 / 12", "inside a fence of its own", "q2_feature_count: 3 / 3")


def check_inert(text: str, where: str, *, feedback: bool) -> list[str]:
    """Why ``text`` (Markdown the grader wrote) shows student text as anything but inert
    text: a heading or bold score line not the grader's own, an image, HTML, an event
    handler, a terminal escape. Read both as lines (the contract) and as rendered HTML."""
    import mistune

    problems = []
    for ch in ("\x1b", "\x9b", "\x07"):
        if ch in text:
            problems.append(f"{where}: a raw control character {ch!r} (terminal escape)")
    lines = text.splitlines()
    own_h = {0} if feedback and lines and lines[0].startswith("# Feedback: ") else set()
    scores = [i for i, line in enumerate(lines) if line.startswith("**Score")]
    for i, line in enumerate(lines):
        if not line.startswith(("#", "**Score")):
            continue
        # feedback.md: only the grader's own headings; summary.md (headings of its own, no
        # student text): no line of the student's text
        if feedback and line.startswith("#") and i not in own_h and not QUESTION_HEADING.match(line):
            problems.append(f"{where}: line {i + 1} is a heading that is not the grader's: {line[:120]!r}")
        elif not feedback and any(s in line for s in MARKUP_LINES):
            problems.append(f"{where}: line {i + 1} is the student's text as a heading: {line[:120]!r}")
    if feedback and len(scores) != 1:
        problems.append(f"{where}: {len(scores)} lines start with '**Score' (the grader writes one): "
                        + "; ".join(repr(lines[i][:80]) for i in scores))
    html = mistune.create_markdown(escape=False)(text)
    low = html.lower()
    for tag in ("<img", "<script", "<iframe", "<svg"):
        if tag in low:
            problems.append(f"{where}: rendered HTML has {tag}: {html[low.index(tag):][:120]!r}")
    if re.search(r"<[a-z][^>]*\son[a-z]+\s*=", low):
        problems.append(f"{where}: rendered HTML has an event handler attribute")
    heads = re.findall(r"<h([1-6])[^>]*>(.*?)</h\1>", html, flags=re.S)
    if feedback:
        want = [("1", "Feedback:")] + [("2", q) for q in C.Q]
        got = [(level, body.strip()) for level, body in heads]
        if len(got) != len(want) or any(g[0] != w[0] or not g[1].startswith(w[1]) for g, w in zip(got, want, strict=True)):
            problems.append(f"{where}: rendered headings are not only the grader's: {got}")
    strong = [b for b in re.findall(r"<strong>(.*?)</strong>", html, flags=re.S) if "Score" in b]
    if len(strong) > (1 if feedback else 0):
        problems.append(f"{where}: bold score lines in the rendered HTML: {strong}")
    for _, body in heads:
        if C.MARKUP_TOKEN in body or "12 / 12" in body:
            problems.append(f"{where}: student text became a heading: {body[:120]!r}")
    return problems


def test_student_text_is_inert(batch):
    """An exception's name and message (a heading, a bold score, an image, HTML, a fence,
    ANSI escapes, a formula) appear in feedback.md and summary.md only as inert text."""
    text = batch.feedback("markup_in_messages")
    assert C.MARKUP_TOKEN in text, (
        "the exception's message does not reach the feedback at all (the suite expects it, escaped):\n"
        + text[:3000])
    problems = check_inert(text, "feedback.md", feedback=True)
    summary = batch.out / "summary.md"
    assert summary.exists(), "no summary.md"
    problems += check_inert(summary.read_text(encoding="utf-8"), "summary.md", feedback=False)
    if "\x1b[2J" in batch.run.output:
        problems.append("the student's terminal escapes reached the grader's terminal")
    assert not problems, "\n".join(problems) + "\n--- feedback.md ---\n" + text[:4000]


def test_gradebook_not_edited_after_the_grader_returned(batch):
    """Last in the module: processes left behind had all the suite's run time to act."""
    W.wait_for_no_survivors(batch.world.marker)
    assert batch.csv_at_return is not None, "no grades.csv"
    now = (batch.out / "grades.csv").read_bytes()
    assert now == batch.csv_at_return, "grades.csv changed after the grader returned"
    check_gradebook_valid(batch)  # CSV still agrees with the JSON


# --------------------------------------------------------------------------- attacks on the grader process
@pytest.fixture(scope="class")
def killers(tmp_path_factory):
    world = W.make_world(tmp_path_factory.mktemp("killers"))
    try:
        yield grade_batch(world, C.killer_catalog(world.config("")))
    finally:
        cleanup(world)


class BatchChecks:
    """What every small batch must show; a ``Test*`` subclass provides the ``batch`` fixture."""

    def test_grader_finished(self, batch):
        check_finished(batch)

    def test_gradebook_is_valid(self, batch):
        check_gradebook_valid(batch)

    def test_honest_neighbours_keep_their_grades(self, batch):
        check_honest(batch)

    def test_nothing_outside_the_gradebook_changed(self, batch):
        check_world_intact(batch)

    def test_no_canary_in_gradebook_or_output(self, batch):
        check_no_canary(batch)

    def test_no_submission_process_survives(self, batch):
        check_no_survivors(batch)


class TestGraderProcessAttacks(BatchChecks):
    """SIGKILL, SIGSTOP, kill(-1), special files: a batch of their own (a class, so that
    ``--dist loadscope`` may grade it beside the big batch)."""

    @pytest.fixture(scope="class")
    @classmethod
    def batch(cls, killers):
        return killers

    @pytest.mark.parametrize("name", [a.name for a in KILLERS])
    def test_attack_gets_what_it_deserves(self, batch, name):
        check_attack_row(batch, name)


# --------------------------------------------------------------------------- the instructor's --out
def _one_blank(world: W.World) -> list[Path]:
    return [W.write_submission(world, "honest_blank_1", W.blank())]


def test_out_symlink_to_instructor_folder_is_refused(tmp_path):
    world = W.make_world(tmp_path / "w")
    try:
        before = W.snapshot(world.teaching)
        link = world.course / "grades-link"
        link.symlink_to(world.teaching)
        run = W.run_grader(world, _one_blank(world), out=link)
        assert run.rc not in (0, None), f"--out through a symlink was accepted:\n{run.output[-2000:]}"
        assert W.snapshot(world.teaching) == before, "the instructor's folder changed"
        assert link.is_symlink()
    finally:
        cleanup(world)


def test_out_on_a_folder_that_is_not_a_gradebook_keeps_it(tmp_path):
    world = W.make_world(tmp_path / "w")
    try:
        before = W.snapshot(world.teaching)
        run = W.run_grader(world, _one_blank(world), out=world.teaching)
        assert (world.teaching / "notes.txt").exists(), "the instructor's notes were deleted"
        if run.rc == 0:  # allowed only if it added a gradebook beside what was there
            now = W.snapshot(world.teaching)
            assert {k: v for k, v in now.items() if k in before} == before
        else:
            assert W.snapshot(world.teaching) == before
    finally:
        cleanup(world)


def test_attack_notebooks_are_well_formed(tmp_path):
    """Guard for the suite itself: every attack cell compiles, so a 0 is the grader's doing."""
    world = W.make_world(tmp_path / "w")
    try:
        extra = [C.keyring_writer(), C.keyring_reader("keyring_reader"), C.json_flood(), C.sized_places()]
        for attack in [*C.catalog(world.config("")), *C.killer_catalog(world.config("")), *extra]:
            nb, raw = attack_notebook(world, attack)
            if nb is not None:
                compile(W.cell(nb, attack.cell).source, attack.name, "exec")
    finally:
        cleanup(world)

