"""``GradeConfig``: what a batch is graded with, checked in one place before anything is read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kpca_lib.course.cli import main
from kpca_lib.course.grading.config import GradeConfig, Mode, grading_secret

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"


def config(**settings) -> GradeConfig:
    return GradeConfig.of(assignment="01_feature_maps", solutions=SOLUTIONS,
                          out=Path("grades"), **settings)


def test_defaults_and_frozen():
    c = config()
    assert (c.mode, c.timeout, c.memory_mb, c.jobs, c.sandbox) == (Mode.NEW, 30.0, 2048, 2, "bwrap")
    assert c.solution_path == SOLUTIONS / "01_feature_maps.ipynb"
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.timeout = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("flags, mode, gradebook_mode", [
    ({"resume": True}, Mode.RESUME, "resume"),
    ({"merge": True}, Mode.MERGE, "merge"),
    ({"regrade": "q1_phi_p3"}, Mode.REGRADE, "merge"),
    ({}, Mode.NEW, "new"),
])
def test_the_flags_make_one_mode(flags, mode, gradebook_mode):
    c = config(**flags)
    assert c.mode is mode and c.mode.gradebook_mode == gradebook_mode


@pytest.mark.parametrize("settings, message", [
    ({"resume": True, "merge": True}, "cannot be used together"),
    ({"merge": True, "regrade": "q1"}, "cannot be used together"),
    ({"row_id": "alice/x"}, "--row-id goes with --merge"),
    ({"merge": True, "row_id": "alice/../x"}, "is not a row id"),
    ({"merge": True, "row_id": "alice/\u202ex"}, "is not a row id"),
    ({"memory_mb": 2}, "for 2 GB pass --memory 2048"),
    ({"timeout": 0.0}, "--timeout must be > 0"),
    ({"timeout": float("nan")}, "--timeout must be > 0"),
    ({"jobs": 0}, "--jobs must be >= 1"),
    ({"sandbox": "docker"}, "sandbox must be one of"),
    ({"assignment": "99_nope"}, "no assignment '99_nope'"),
])
def test_every_bad_setting_is_refused_by_name(settings, message):
    base = {"assignment": "01_feature_maps", "solutions": SOLUTIONS, "out": Path("grades")}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("?", r"\?")):
        GradeConfig.of(**{**base, **settings})


def test_checks_that_need_the_batch_or_the_solution():
    with pytest.raises(ValueError, match="names one row, but 2 submissions"):
        config(merge=True, row_id="alice/x").check_submissions(2)
    config(merge=True, row_id="alice/x").check_submissions(1)
    with pytest.raises(ValueError, match="'q9' is not a question of 01_feature_maps"):
        config(regrade="q9").check_questions({"q1": 3.0})


def test_the_command_line_builds_the_config_and_reports_its_errors(tmp_path, capsys):
    out = tmp_path / "grades"
    for flags, said in ((["--timeout", "0"], "--timeout must be > 0"),
                        (["--jobs", "0"], "--jobs must be >= 1"),
                        (["--memory", "100"], "less than the 256 MB")):
        code = main(["grade", "--assignment", "01_feature_maps", "--out", str(out), *flags,
                     str(tmp_path / "x.ipynb")])
        assert code == 2 and said in capsys.readouterr().err
        assert not out.exists()  # nothing read, nothing written


def test_the_secret(monkeypatch, tmp_path):
    assert grading_secret("given") == b"given"
    monkeypatch.setenv("KPCA_GRADING_SECRET", "from-env")
    assert grading_secret(None) == b"from-env"
    monkeypatch.delenv("KPCA_GRADING_SECRET")
    monkeypatch.setenv("HOME", str(tmp_path))
    made = grading_secret(None)
    kept = tmp_path / ".config" / "kpca-course" / "grading-secret"
    assert len(made) == 64 and kept.stat().st_mode & 0o777 == 0o600
    assert grading_secret(None) == made  # kept for the next batch
