"""Adversarial suite, part 2: attacks of the sandbox's second review that need runs of their own.

The big batch of tests/test_grading_attacks.py holds one submission per attack class,
those of the second review included (forbidden system calls, nested namespaces, sized
writable places, the host uid and host-only /proc files, student text in the feedback,
a plain ``MemoryError``, symlinked, hard-linked and special submission files). Here are
the attacks that need something else, each in a small batch with a full and a blank
honest neighbour before and after it, in the same hostile world (tests/attack_world.py):

* the kernel keyring across two grader runs: run 1 leaves question 2's answer in every
  keyring a submission reaches, a blank classmate in the same run and a blank submission
  in a *later* run (another ``--out``) read it back; keys the test process planted in its
  own user and session keyrings (the instructor's) must be neither read nor changed;
* the trusted side bounded: display messages cheap in bytes and dear to decode, sent by a
  kernel between honest neighbours in the same worker chunk (``--jobs 1``);
* every writable place sized without cgroups (``KPCA_SANDBOX_NO_CGROUPS=1``,
  ``--memory 1024``);
* a canary before the class: a setting under which the instructor's own solution cannot
  score (``--memory 50``, ``--memory 2``, ``--timeout 0.05``) stops the grader before any
  row is written, with a message naming the setting.

No assertion depends on timing: the only waits are hang guards (failures).
"""

from __future__ import annotations

import re
import secrets
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.grading.judge.notebooks import meta

sys.path.insert(0, str(Path(__file__).parent))
import attack_catalog as C  # noqa: E402
import attack_world as W  # noqa: E402
from test_grading_attacks import (  # noqa: E402
    Batch,
    BatchChecks,
    check_attack_row,
    check_finished,
    check_gradebook_valid,
    check_honest,
    check_no_canary,
    check_no_survivors,
    check_world_intact,
    cleanup,
    grade_batch,
    won_flags,
)

#: Hang guard of the flood's batch (five notebooks): a grader still running after this
#: long has let a submission hold its trusted side.
FLOOD_GUARD = 480.0
#: Hang guard of a CLI run refused before grading.
CANARY_GUARD = 600.0


def complaint(check, b: Batch) -> str:
    """What ``check(b)`` asserts, as text ("" when it passes): for a check that must run
    between two grader runs in one world."""
    try:
        check(b)
    except AssertionError as exc:
        return str(exc)
    return ""


# --------------------------------------------------------------------------- the keyring across runs
@dataclass
class KeyRuns:
    first: Batch
    second: Batch
    planted: dict[str, int]  # keyring -> id of the instructor's key the test planted there
    not_planted: dict[str, str]  # keyring -> why the host refused the key
    planted_after: dict[str, bytes | None]  # what the planted keys hold after both runs
    left: list[tuple[int, str]]  # keys with the marker the host's keyrings hold after both runs
    first_intact: str  # check_world_intact's complaint right after the first run ("" if none)

    @property
    def batches(self) -> list[Batch]:
        return [self.first, self.second]


@pytest.fixture(scope="class")
def keyruns(tmp_path_factory):
    world = W.make_world(tmp_path_factory.mktemp("keyring"))
    world.canaries["keyring"] = f"kpcacanary-keyring-{secrets.token_hex(8)}"
    planted, refused = {}, {}
    try:
        for name, ring in (("user", W.KEY_SPEC_USER), ("session", W.KEY_SPEC_SESSION)):
            kid, why = W.plant_key(f"{world.marker}-instructor", world.canaries["keyring"], ring)
            if kid is None:
                refused[name] = why
            else:
                planted[name] = kid
        W.link_user_keyring()  # an instructor's login session: its user keyring is possessed
        first = grade_batch(world, [C.keyring_writer(), C.keyring_reader("keyring_reader_same_run")],
                            "--jobs", "1", prefix="r1_", out=world.course / "grades-run1")
        first_intact = complaint(check_world_intact, first)  # before the second run adds its files
        second = grade_batch(world, [C.keyring_reader("keyring_reader_next_run")],
                             "--jobs", "1", prefix="r2_", out=world.course / "grades-run2")
        after = {name: W.read_key(kid) for name, kid in planted.items()}
        left = [(kid, d) for kid, _, d in W.visible_keys()
                if world.marker in d and kid not in planted.values()]
        yield KeyRuns(first, second, planted, refused, after, left, first_intact)
    finally:
        W.drop_marker_keys(world.marker)
        cleanup(world)


KEY_ROWS = [("first", "keyring_writer"), ("first", "keyring_reader_same_run"),
            ("second", "keyring_reader_next_run")]


class TestKeyringHandOver:
    """One student cannot hand answers to another through the kernel keyring, in one run
    or across runs, and no submission reads or changes the instructor's keys."""

    def test_graders_finished(self, keyruns):
        for b in keyruns.batches:
            check_finished(b)

    def test_gradebooks_are_valid(self, keyruns):
        for b in keyruns.batches:
            check_gradebook_valid(b)

    def test_honest_neighbours_keep_their_grades(self, keyruns):
        for b in keyruns.batches:
            check_honest(b)

    @pytest.mark.parametrize("run,name", KEY_ROWS)
    def test_attack_gets_what_it_deserves(self, keyruns, run, name):
        check_attack_row(getattr(keyruns, run), name)

    def test_the_instructors_keys_are_neither_read_nor_changed(self, keyruns):
        if keyruns.not_planted and not keyruns.planted:
            warnings.warn(f"this host refuses keyring calls to the test itself ({keyruns.not_planted}): "
                          "no instructor's key could be planted, so only the hand-over was tried",
                          stacklevel=1)
        canary = keyruns.first.world.canaries["keyring"].encode()
        changed = {ring: data for ring, data in keyruns.planted_after.items() if data != canary}
        assert not changed, f"a submission changed (or removed) the instructor's keys: {changed}"
        for b in keyruns.batches:
            for name in b.attacks:
                flags = won_flags(b, name)
                assert "instructor" not in flags, f"{name} read the instructor's key: {flags}"

    def test_nothing_is_left_in_the_host_keyrings(self, keyruns):
        assert not keyruns.left, (
            f"keys a submission left in keyrings the grader's user keeps (they outlive the run): {keyruns.left}")

    def test_nothing_outside_the_gradebooks_changed(self, keyruns):
        assert not keyruns.first_intact, f"after the first run: {keyruns.first_intact}"
        check_world_intact(keyruns.second)
        first = keyruns.first
        assert first.csv_at_return == (first.out / "grades.csv").read_bytes(), (
            "the first run's grades.csv changed after it returned (during the second run)")

    def test_no_canary_in_gradebook_or_output(self, keyruns):
        for b in keyruns.batches:
            check_no_canary(b)

    def test_no_submission_process_survives(self, keyruns):
        check_no_survivors(keyruns.second)


# --------------------------------------------------------------------------- the trusted side
@pytest.fixture(scope="class")
def flood(tmp_path_factory):
    world = W.make_world(tmp_path_factory.mktemp("flood"))
    try:
        # --jobs 1: the five notebooks (full, blank, flood, full, blank) run in one worker,
        # in that order, so the flood's neighbours share the worker it floods.
        yield grade_batch(world, [C.json_flood()], "--jobs", "1", hang_guard=FLOOD_GUARD)
    finally:
        cleanup(world)


class TestTrustedSideBounded(BatchChecks):
    """A kernel that floods the trusted nbval worker with messages that are cheap to send
    and dear to decode ends ``crashed`` with the reason; its chunk-mates (in the same
    worker) are graded exactly."""

    @pytest.fixture(scope="class")
    @classmethod
    def batch(cls, flood):
        return flood

    def test_the_flood_is_crashed_with_the_reason(self, flood):
        e = flood.row("json_flood")
        per = {q: float(e["questions"][q]) for q in C.Q}
        messages = " ".join(map(str, e.get("messages") or []))
        assert e["status"] == "crashed", (
            f"json_flood: status {e['status']!r} (score {e['score']}), not crashed; messages: {messages}")
        assert per in (C.NO_Q2, C.ZERO), f"json_flood: points {per} (question 2 flooded; question 1 is honest)"
        assert re.search(r"output|limit", messages, flags=re.I), (
            f"json_flood: the messages do not say which limit stopped it: {messages}")


# --------------------------------------------------------------------------- sized places without cgroups
@pytest.fixture(scope="class")
def no_cgroups(tmp_path_factory):
    world = W.make_world(tmp_path_factory.mktemp("nocgroups"))
    world.memory_mb = 1024
    world.extra_env = {"KPCA_SANDBOX_NO_CGROUPS": "1"}
    try:
        yield grade_batch(world, [C.sized_places()], "--memory", "1024")
    finally:
        cleanup(world)


class TestSizedPlacesWithoutCgroups(BatchChecks):
    """Without cgroups (an ordinary user on cgroup v1), /tmp and /dev/shm still hold at most
    their sizes under ``--memory 1024``, and nothing else is writable."""

    @pytest.fixture(scope="class")
    @classmethod
    def batch(cls, no_cgroups):
        return no_cgroups

    def test_attack_gets_what_it_deserves(self, batch):
        check_attack_row(batch, "sized_places")


# --------------------------------------------------------------------------- a canary before the class
def _slow_setup(path: Path, seconds: float) -> None:
    """Make the solution's set-up cell (trusted: it runs in every graded notebook) sleep."""
    nb = nbformat.read(path, as_version=4)
    setup = next(c for c in nb.cells if meta(c).get("role") == "setup")
    setup.source = f"import time\ntime.sleep({seconds})\n" + setup.source
    nbformat.write(nb, path)


@pytest.mark.parametrize(("flags", "names"), [
    (("--memory", "50"), "--memory"),
    (("--memory", "2"), "--memory"),  # meant as GB
    (("--timeout", "0.5"), "--timeout"),
], ids=["memory_50", "memory_2_meant_as_GB", "timeout_too_short"])
def test_a_setting_the_solution_fails_stops_before_grading(tmp_path_factory, flags, names):
    """A limit no notebook meets stops the command before any row: non-zero exit, a message
    on stderr naming the setting, and no gradebook in --out; so no student is charged.

    For the time limit, the course's set-up cell sleeps 2 s in this world's solutions: a
    ``--timeout`` shorter than the solution's slowest cell on any machine (the real cells can
    all finish within a short limit on a fast machine, which made the case depend on timing)."""
    world = W.make_world(tmp_path_factory.mktemp("canary"))
    if "--timeout" in flags:
        _slow_setup(world.solutions / W.FILE, seconds=2)
    try:
        paths = [W.write_submission(world, "honest_full_1", W.student_copy()),
                 W.write_submission(world, "honest_blank_1", W.blank())]
        out = world.base / "canary-out"
        run = W.run_cli(world, paths, *flags, "--jobs", "2", out=out, hang_guard=CANARY_GUARD)
        assert not run.hung, f"{flags}: the grader did not stop"
        assert run.rc not in (0, None), (flags, run.rc, run.stderr[-2000:])
        assert names in run.stderr, (flags, run.stderr[-2000:])
        assert not (out / "grades.csv").exists() and not (out / "grades.json").exists(), (
            f"{flags}: a gradebook was written")
    finally:
        cleanup(world)
