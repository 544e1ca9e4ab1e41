"""Adversarial suite, part 3 (issue 39): two submissions graded at the same time share nothing.

A writer and a reader, graded at the same moment by ``kpca-course grade --jobs 2`` in the
hostile world of tests/attack_world.py: each is the first notebook of its worker's chunk
(the batch is ``writer, full, blank, reader, full, blank``, so the two chunks are
``writer, full, blank`` and ``reader, full, blank``), so their sandboxes run side by side,
each for 20 s. The writer (honest question 1) leaves marks on what every sandbox shares:
flock, POSIX and OFD locks on the installation's files, opens that an inotify or fanotify
watcher sees, AIO contexts that move ``/proc/sys/fs/aio-nr``. The blank reader answers
question 2 as soon as one mark reaches it. The reader must score 0, the writer 9, and the
honest neighbours (in the same chunks) exactly their grades.

Per channel, with a control run without the filter that shows each channel would carry the
mark, see tests/test_sandbox_channels.py. ``KPCA_ATTACK_SANDBOX=none`` runs this batch
unsandboxed: the reader then scores (the suite fails), which shows that it bites.

No assertion depends on timing: a hang guard only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import attack_catalog as C  # noqa: E402
import attack_world as W  # noqa: E402
from test_grading_attacks import (  # noqa: E402
    Batch,
    BatchChecks,
    attack_notebook,
    check_attack_row,
    cleanup,
    honest_full,
)


def _side_by_side(world: W.World) -> Batch:
    """``writer, full, blank, reader, full, blank`` in one ``--jobs 2`` run."""
    writer, reader = C.concurrent_writer(), C.concurrent_reader()
    paths, honest = [], {}
    for k, attack in enumerate((writer, reader), start=1):
        nb, raw = attack_notebook(world, attack)
        paths.append(W.write_submission(world, attack.name, nb, raw))
        paths.append(W.write_submission(world, f"honest_full_{k}", honest_full(world)))
        honest[f"honest_full_{k}"] = "full"
        paths.append(W.write_submission(world, f"honest_blank_{k}", W.blank()))
        honest[f"honest_blank_{k}"] = "blank"
    world.outs.append(world.out)
    before = {
        "home": W.snapshot(world.home),
        "course": W.snapshot(world.course, skip=(world.out, *world.outs)),
    }
    run = W.run_grader(world, paths, "--jobs", "2")
    csv = world.out / "grades.csv"
    return Batch(
        world,
        run,
        {a.name: a for a in (writer, reader)},
        honest,
        paths,
        before,
        csv.read_bytes() if csv.exists() else None,
        world.out,
    )


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory):
    world = W.make_world(tmp_path_factory.mktemp("concurrent"))
    try:
        yield _side_by_side(world)
    finally:
        cleanup(world)


class TestConcurrentSandboxesShareNothing(BatchChecks):
    @pytest.fixture(scope="class")
    @classmethod
    def batch(cls, side_by_side):
        return side_by_side

    @pytest.mark.parametrize("name", ["concurrent_writer", "concurrent_reader"])
    def test_attack_gets_what_it_deserves(self, batch, name):
        check_attack_row(batch, name)

    def test_the_pair_ran_side_by_side(self, batch):
        """Each of the two opened its worker's chunk (the batch's order is the runner's)."""
        names = [p.parent.name for p in batch.paths]
        assert names.index("concurrent_writer") == 0 and names.index("concurrent_reader") == 3


def test_the_attacks_are_well_formed(tmp_path):
    world = W.make_world(tmp_path / "w")
    try:
        for attack in (C.concurrent_writer(), C.concurrent_reader()):
            nb, _ = attack_notebook(world, attack)
            compile(W.cell(nb, attack.cell).source, attack.name, "exec")
    finally:
        cleanup(world)
