"""Adversarial suite for `kpca-course grade`: exact score and status for every attack.

All submissions are built from solutions/01_feature_maps.ipynb (12 points: four
questions of 3) and the released exercise, and graded in ONE batch (--jobs 2), so
the suite costs one pytest start per chunk plus one kernel per submission.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.cli import main
from kpca_lib.course.grading.handback.feedback import _md
from kpca_lib.course.grading.judge.notebooks import meta, with_answers
from kpca_lib.course.grading.judge.plain import AnswerError, decode, dumps, encode, loads

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_feature_maps"
SOLUTION = nbformat.read(ROOT / "solutions" / f"{ASSIGNMENT}.ipynb", as_version=4)
EXERCISE = nbformat.read(ROOT / "exercises" / f"{ASSIGNMENT}.ipynb", as_version=4)
Q = ["q1_phi_p3", "q1_phi_p4", "q1_phi_general", "q2_feature_count"]


def student_copy(nb=SOLUTION):
    """What a student would submit: the exercise layout with these answer cells."""
    return with_answers(EXERCISE, nb)


def cell(nb, cid):
    return next(c for c in nb.cells if c.id == cid)


def blank():
    return copy.deepcopy(EXERCISE)


def build(tmp: Path) -> dict[str, tuple[str, float, dict[str, float]]]:
    """Write the submissions; return name -> (status, score, per-question scores)."""
    full = {q: 3.0 for q in Q}
    zero = {q: 0.0 for q in Q}
    expect = {}

    def save(name, nb, status, score, per):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # duplicate ids are part of the attack
            nbformat.write(nb, tmp / f"{name}.ipynb")
        expect[name] = (status, score, per)

    # A submission that tries to sabotage the next one in its nbval worker: a background
    # process looks for the worker in /proc to kill it. In the sandbox it sees no process
    # of the grader's (own PID namespace) and dies with its sandbox; both keep full marks.
    killer = (
        "import os, signal, sys, time\n"
        "parent = int(sys.argv[1])\n"
        "args = open(f'/proc/{parent}/cmdline', 'rb').read().split(b'\\0')\n"
        "mine = [i for i, a in enumerate(args) if os.getcwd().encode() in a]\n"
        "if mine and mine[0] + 1 < len(args) and args[mine[0] + 1].endswith(b'.ipynb'):\n"
        "    config = os.path.join(os.path.dirname(args[mine[0] + 1].decode()), 'grader-config.json')\n"
        "    deadline = time.time() + 60\n"
        "    while os.path.exists(config) and time.time() < deadline:\n"
        "        time.sleep(0.01)\n"
        "    os.kill(parent, signal.SIGKILL)\n"
    )
    nb = student_copy()
    cell(nb, "q2-answer").source += (
        "\nimport os, subprocess, sys\n"
        f"_killer = {killer!r}\n"
        "subprocess.Popen([sys.executable, '-c', _killer, str(os.getppid())],\n"
        "                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    )
    save("saboteur", nb, "graded", 12, full)
    save("victim", student_copy(), "graded", 12, full)

    save("full", student_copy(), "graded", 12, full)
    save("blank", blank(), "graded", 0, zero)

    nb = student_copy()
    cell(nb, "q1-p4-answer").source = cell(EXERCISE, "q1-p4-answer").source
    save("partial", nb, "graded", 9, {**full, "q1_phi_p4": 0})

    nb = student_copy()
    nb.cells = [c for c in nb.cells if meta(c).get("role") != "check"]
    save("deleted_checks", nb, "graded", 12, full)

    nb = blank()
    for c in nb.cells:
        if meta(c).get("role") == "check":
            c.source = 'print("all checks passed")'
    cell(nb, "setup").source = ""  # emptied set-up too: the trusted one runs
    save("edited_checks", nb, "graded", 0, zero)

    nb = blank()
    cheat = (
        "class Anything(float):\n"
        "    def __eq__(self, other): return True\n"
        "    def __ne__(self, other): return False\n"
        "    def __lt__(self, other): return True\n"
        "    def __gt__(self, other): return True\n"
        "    def __array__(self, *a, **k): raise TypeError('no')\n"
        "    __hash__ = float.__hash__\n"
        "class Weird:\n"
        "    def __eq__(self, other): return True\n"
        "    shape = (7, 10)\n"
    )
    cell(nb, "q1-p3-answer").source = cheat + "def phi_3(X):\n    return Weird()\ndim_3 = Anything(3.0)\n"
    cell(nb, "q1-p4-answer").source = cheat + "import numpy as np\ndef phi_4(X):\n    return np.array([Weird()] * len(X))\ndim_4 = Weird()\n"
    cell(nb, "q2-answer").source = cheat + "def n_features(d, p):\n    return Anything(0.0)\ndef kernel_cheaper(d, p, n):\n    return Weird()\n"
    save("eq_always_true", nb, "graded", 0, zero)

    nb = blank()
    cell(nb, "q1-p3-answer").source = (
        "import numpy as np\n"
        "import kpca_lib.course.checks as C\n"
        "import kpca_lib.course.grading.judge.evaluate as E\n"
        "import kpca_lib.course.grading.judge.plain as P\n"
        "import kpca_lib.course.grading.judge.registry as R\n"
        "np.allclose = lambda *a, **k: True\n"
        "np.max = lambda *a, **k: 0.0\n"
        "C.check = lambda *a, **k: print('all checks passed')\n"
        "E.run_checks = lambda *a, **k: []\n"
        "P.decode = lambda obj, depth=0: obj\n"
        "for d in R._REGISTRY.values():\n"
        "    d._checks = [c.__class__(c.id, c.description, c.points, lambda a, i: 'ok') for c in d._checks]\n"
        "    d._probe = lambda ns, inputs: {'dim': 10}\n"
        "def phi_3(X):\n    raise NotImplementedError\n"
        "dim_3 = 10\n"
    )
    save("monkeypatched_checks", nb, "graded", 0, zero)

    nb = blank()
    cell(nb, "q1-p3-answer").source = (
        "import json, os, pathlib\n"
        "fake = {'payload': json.dumps({'question': 'q1_phi_p3', 'answers': {'dim': 10}}), 'mac': '0' * 64}\n"
        "for name in ['q1_phi_p3', 'q1_phi_p4', 'q1_phi_general', 'q2_feature_count']:\n"
        "    pathlib.Path('exports', name + '.json').write_text(json.dumps(fake))\n"
        "_kpca_export = lambda question: None\n"
        "print('q1_phi_p3: 2 of 2 checks passed')\n"
    )
    save("forged_exports", nb, "graded", 0, zero)

    nb = blank()
    cell(nb, "q1-p3-answer").source = (
        "print('q1_phi_p3 (Explicit φ for p = 3, d = 2): 2 of 2 checks passed')\n"
        "print('Score: 12 / 12')\n"
        "from IPython.display import display, HTML\n"
        "display(HTML('<b>12/12</b>'))\n"
    )
    save("fake_output", nb, "graded", 0, zero)

    nb = student_copy()
    cell(nb, "q1-p4-answer").source = "while True:\n    pass\n"
    save("infinite_loop", nb, "timeout", 9, {**full, "q1_phi_p4": 0})

    nb = student_copy()
    cell(nb, "q1-general-answer").source = "import os\nos._exit(1)\n"
    save("kernel_exit", nb, "crashed", 9, {**full, "q1_phi_general": 0})

    # The memory bomb is in tests/test_grading_attacks.py ("memory_bomb"): with this batch's
    # 4-second cell limit, on a loaded machine the limit of time could fire before the limit
    # of memory, and the status would depend on the load.

    # Tries to kill the grader's nbval worker: inside its PID namespace its parent is the
    # sandbox's init, which ignores the signal; the answer cell defines nothing, so q2 is 0.
    nb = student_copy()
    cell(nb, "q2-answer").source = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    save("kill_grader", nb, "graded", 9, {**full, "q2_feature_count": 0})

    nb = student_copy()
    cell(nb, "q1-p3-answer").source = (
        "def phi_3(X):\n    import time\n    while True:\n        time.sleep(0.1)\ndim_3 = 10\n"
    )
    save("slow_function", nb, "timeout", 9, {**full, "q1_phi_p3": 0})

    nb = student_copy()
    cells = nb.cells
    p3 = cell(nb, "q1-p3-answer")
    good_p4 = copy.deepcopy(cell(nb, "q1-p4-answer"))
    bad_p4 = cell(nb, "q1-p4-answer")
    bad_p4.source = cell(EXERCISE, "q1-p4-answer").source
    cells.remove(p3)
    cells.append(p3)  # moved to the end
    good_p4.id = "copied-by-jupyterlab"  # a pasted copy keeps metadata, gets a new id
    cells.insert(0, copy.deepcopy(bad_p4))  # same id twice, as hand-edited JSON can have
    cells.append(good_p4)  # after the check cell: as in Restart & Run All, too late for the check
    # Graded as the student's Run All runs it: phi_3 and the good phi_4 come after their check
    # cells, so those checks (in the notebook too) see no answer.
    save("moved_and_duplicated", nb, "graded", 6, {**full, "q1_phi_p3": 0, "q1_phi_p4": 0})

    nb = student_copy()
    dup = copy.deepcopy(cell(nb, "q2-answer"))
    dup.id = "another-id"
    dup.source = "def n_features(d, p):\n    return 0\n\ndef kernel_cheaper(d, p, n):\n    return False\n"
    nb.cells.append(dup)  # a wrong copy after the check cell: the check saw the right one
    save("duplicated_last_wrong", nb, "graded", 12, full)

    nb = student_copy()
    c = cell(nb, "q1-general-answer")
    c.id = "renamed-cell"
    c.metadata = {}  # id and metadata gone: it still runs, in its place, as the student ran it
    save("renamed_cell", nb, "graded", 12, full)

    nb = student_copy()
    nb.cells = [c for c in nb.cells if c.id != "q2-answer"]
    save("missing_answer", nb, "graded", 9, {**full, "q2_feature_count": 0})

    nb = student_copy()
    cell(nb, "q1-p3-answer").source += "\nprint('x' * 50_000_000)\nfor _ in range(100_000):\n    print('spam')\n"
    save("huge_output", nb, "graded", 12, full)

    nb = student_copy()
    cell(nb, "q2-answer").source = (
        "def n_features(d, p):\n    return round(__import__('math').factorial(d + p) / "
        "(__import__('math').factorial(d) * __import__('math').factorial(p)))\n"
        "def kernel_cheaper(d, p, n):\n    return n_features(d, p) > n\n"
    )
    save("float_counts", nb, "graded", 11, {**full, "q2_feature_count": 2})

    (tmp / "garbage.ipynb").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage")
    expect["garbage"] = ("invalid", 0, zero)
    (tmp / "empty.ipynb").write_bytes(b"")
    expect["empty"] = ("invalid", 0, zero)
    (tmp / "truncated.ipynb").write_text(nbformat.writes(student_copy())[:500])
    expect["truncated"] = ("invalid", 0, zero)
    (tmp / "old_v3.ipynb").write_text(json.dumps(
        {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": []}]}))
    expect["old_v3"] = ("invalid", 0, zero)
    other = nbformat.read(ROOT / "exercises" / "03_mercer.ipynb", as_version=4)
    nbformat.write(other, tmp / "other_assignment.ipynb")
    expect["other_assignment"] = ("invalid", 0, zero)
    return expect


def grade(files, out, *extra):
    """Grade ``files`` into ``out``; its CSV rows without the run time (not a grade)."""
    rc = main(["grade", "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "2", *extra,
               *[str(f) for f in files]])
    assert rc == 0
    with open(out / "grades.csv", newline="") as fh:
        rows = {r["submission"]: r for r in csv.DictReader(fh)}
    for r in rows.values():
        assert float(r.pop("run_seconds")) >= 0
    return rows


def without_run_times(text: str) -> str:
    """``grades.json``'s text without its ``run_seconds`` lines (the only value that
    depends on the machine's speed)."""
    return re.sub(r'\n *"run_seconds": [0-9.e+-]+,', "", text)


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-secret")


def sandbox_or_skip() -> str:
    """``"bwrap"`` if the grading sandbox works here; under CI a missing sandbox fails, and
    elsewhere the test says why it skips."""
    from kpca_lib.course.grading.run.sandbox import SandboxUnavailableError, check_sandbox

    try:
        check_sandbox("bwrap")
    except SandboxUnavailableError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the grading sandbox must run in CI: {exc}")
        pytest.skip(f"no sandbox on this machine: {exc}")
    return "bwrap"


def test_adversarial_batch(tmp_path):
    """Every attack in one batch (one test, so xdist never grades the batch twice)."""
    sandbox_or_skip()
    expect = build(tmp_path)
    out = tmp_path / "out"
    rows = grade([tmp_path / f"{name}.ipynb" for name in expect], out, "--timeout", "4",
                 "--memory", "2048")
    header = (out / "grades.csv").read_text().splitlines()[0]
    assert header == ("submission,status,score,max_score," + ",".join(Q) + ",run_seconds,"
                      "auto_score,late,penalty,submitted,adjustments,message")
    assert list(rows) == list(expect)
    mismatches = []
    for name, (status, score, per) in expect.items():
        row = rows[name]
        got = (row["status"], float(row["score"]), float(row["max_score"]),
               {q: float(row[q]) for q in Q})
        if got != (status, score, 12.0, per):
            mismatches.append(f"{name}: expected {(status, score, per)}, got {got}")
    assert not mismatches, "\n".join(mismatches)

    data = json.loads((out / "grades.json").read_text())
    subs = {s["submission"]: s for s in data["submissions"]}
    assert subs["full"]["score"] == 12 and all(c["passed"] for c in subs["full"]["checks"])
    assert any(c["hidden"] for c in subs["blank"]["checks"])
    assert "ran past the time limit" in " ".join(subs["infinite_loop"]["messages"])
    assert "kernel died" in " ".join(subs["kernel_exit"]["messages"])
    assert "not valid JSON" in subs["truncated"]["messages"][0]
    assert "empty" in subs["empty"]["messages"][0]
    assert "nbformat 3" in subs["old_v3"]["messages"][0]
    assert "03_mercer" in subs["other_assignment"]["messages"][0]
    assert "missing" in " ".join(subs["missing_answer"]["messages"])
    for name in expect:
        assert (out / "feedback" / f"{name}.md").exists()
    text = (out / "feedback" / "blank.md").read_text()
    assert "hidden check" in text and "large coordinates" in text
    for line in cell(SOLUTION, "q1-p3-hidden").source.splitlines():
        if len(line.strip()) > 25 and "import" not in line:
            assert line.strip() not in text  # no hidden check code in feedback
            assert _md(line.strip()) not in text  # not even escaped
    assert "is not implemented yet" in text  # public check messages are shown


def test_regrading_gives_the_same_grades(tmp_path):
    build(tmp_path)
    files = [tmp_path / f"{n}.ipynb" for n in ("full", "float_counts", "eq_always_true", "garbage")]
    first = grade(files, tmp_path / "first")
    assert grade(files, tmp_path / "again") == first
    assert first["float_counts"]["score"] == "11" and first["full"]["score"] == "12"
    first_json = (tmp_path / "first" / "grades.json").read_text()
    assert without_run_times(first_json) != first_json  # every row has its run time
    assert without_run_times(first_json) == without_run_times(
        (tmp_path / "again" / "grades.json").read_text())


def test_output_folder_of_someone_else_is_never_touched(tmp_path):
    from kpca_lib.course.grading import pipeline as grade_module

    target = tmp_path / "grades"
    target.mkdir()
    (target / "grades.csv").write_text("old\n")
    (tmp_path / "garbage.ipynb").write_text("not json")
    with pytest.raises(ValueError, match="not a gradebook written by kpca-course"):
        grade_module.grade_batch(assignment=ASSIGNMENT, submissions=[tmp_path / "garbage.ipynb"],
                                 out=target, solutions=ROOT / "solutions", sandbox="none")
    assert (target / "grades.csv").read_text() == "old\n"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.ipynb", "grades"]


def test_unknown_assignment_is_a_clear_error(tmp_path, capsys):
    assert main(["grade", "--assignment", "99_nope", "--out", str(tmp_path / "o"), "x.ipynb"]) == 2
    assert "no assignment '99_nope'" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [
    {"__array__": {"shape": [2], "data": [1, "x"]}},
    {"__array__": {"shape": [3], "data": [1, 2]}},
    {"__array__": {"shape": [2], "data": [True, 1]}},
    {"__array__": {"shape": [10**9], "data": []}},
    {"__pickle__": "gASV"},
    {"a": 1, "b": 2},
    [1, 2, 3],
])
def test_decode_rejects_anything_but_plain_data(bad):
    assert isinstance(decode(bad), AnswerError)


def test_plain_data_roundtrip_and_strictness():
    import numpy as np

    x = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(decode(loads(dumps(encode(x)))), x)
    assert decode(encode({"a": True, "b": 2})) == {"a": True, "b": 2}
    assert isinstance(decode(encode(object())), AnswerError)
    with pytest.raises(ValueError):
        loads('{"a": NaN}')


def test_batch_summary_progress_and_run_times(tmp_path, capsys):
    """A small sandboxed batch, its output captured (not a terminal): a start line and one
    progress line per submission with an ETA, the run time of every row, summary.md (the
    pure summary of grades.json) and summary.png, and the summary on stdout."""
    from kpca_lib.course.grading.record.summary import summarize, summary_markdown

    sandbox_or_skip()
    (tmp_path / "garbage.ipynb").write_bytes(b"not a notebook")
    nbformat.write(student_copy(), tmp_path / "full.ipynb")
    nbformat.write(blank(), tmp_path / "blank.ipynb")
    nb = student_copy()
    cell(nb, "q1-p4-answer").source = cell(EXERCISE, "q1-p4-answer").source
    nbformat.write(nb, tmp_path / "partial.ipynb")
    names = ["garbage", "full", "blank", "partial"]
    out = tmp_path / "out"
    assert not sys.stderr.isatty() and not sys.stdout.isatty()
    assert main(["grade", "--assignment", ASSIGNMENT, "--out", str(out), "--jobs", "2",
                 *[str(tmp_path / f"{n}.ipynb") for n in names]]) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[0] == (f"grading 4 submissions of {ASSIGNMENT}: 2 parallel jobs, sandbox bwrap; "
                      f"gradebook {out}")
    progress = [re.fullmatch(r"\[(\d+)/4\] (\S+) (\w+) (\S+)/12 run (\d+\.\d)s "
                             r"elapsed (\d\d):(\d\d) ETA (--|\d\d:\d\d)( \| why: .+)?", line)
                for line in err[1:]]
    assert all(progress), err
    assert [int(m[1]) for m in progress] == [1, 2, 3, 4]
    assert sorted(m[2] for m in progress) == sorted(names)
    expected = {"garbage": ("invalid", "0"), "full": ("graded", "12"), "blank": ("graded", "0"),
                "partial": ("graded", "9")}
    assert {m[2]: (m[3], m[4]) for m in progress} == expected
    why = {m[2]: m[9] for m in progress}  # the reason of a row that is not graded, on its line
    assert why.pop("garbage").startswith(" | why: the file is not valid JSON")
    assert set(why.values()) == {None}
    assert progress[0][2] == "garbage" and progress[0][8] == "--"  # no notebook has run yet
    assert progress[-1][8] == "00:00"
    elapsed = [int(m[6]) * 60 + int(m[7]) for m in progress]
    assert elapsed == sorted(elapsed)

    data = json.loads((out / "grades.json").read_text())
    rows = {r["submission"]: r for r in data["submissions"]}
    assert rows["garbage"]["run_seconds"] == 0
    assert all(r["run_seconds"] >= 0 for r in rows.values())
    with open(out / "grades.csv", newline="") as fh:
        table = {r["submission"]: r for r in csv.DictReader(fh)}
    assert {n: float(table[n]["run_seconds"]) for n in names} == pytest.approx(
        {n: rows[n]["run_seconds"] for n in names}, abs=0.006)

    text = (out / "summary.md").read_text(encoding="utf-8")
    summary = summarize(data["submissions"], data["questions"], assignment=ASSIGNMENT)
    assert text == summary_markdown(summary)
    assert (summary.n, summary.counts["graded"], summary.counts["invalid"]) == (4, 3, 1)
    assert (summary.mean, summary.median) == (21 / 4, 4.5)
    assert summary.checks[0].question == "q1_phi_p4" and summary.checks[0].failed == 2
    assert "**4 submissions**: 3 graded, 0 timeout, 0 crashed, 1 invalid." in text
    assert (out / "summary.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert summary_markdown(summary, compact=True) in captured.out
    assert f"summary: {out}/summary.md, {out}/summary.png" in captured.out


def test_report_reader_hands_over_each_notebook_when_the_next_one_starts(tmp_path):
    """The runner reads a worker's report as it grows: a notebook is over (and handed to
    the grader) once the next one's kernel starts; its run time is the worker's clock from
    its kernel's start to its last cell. A line still being written waits."""
    from kpca_lib.course.grading.run.runner import Run, _Report

    runs = [Run(tmp_path / name / "submission.ipynb", n_cells=2) for name in ("a", "b")]
    report = tmp_path / "report.jsonl"
    reader = _Report(report, runs)
    assert reader.read() == []  # the worker has not written anything yet

    def line(run, t, cell=None, outcome="passed", exports=()):
        if cell is None:
            rec = {"folder": str(run.notebook.parent), "when": "start", "t": t}
        else:
            rec = {"file": str(run.notebook), "cell": cell, "when": "call", "outcome": outcome,
                   "alive": True, "text": "", "facts": {}, "exports": list(exports), "t": t}
        return json.dumps(rec) + "\n"

    a, b = runs
    report.write_text(line(a, 10.0) + line(a, 11.0, 0, exports=[{"x": 1}])
                      + line(a, 12.5, 1)[:20])  # the last line is not complete yet
    assert reader.read() == [] and sorted(a.cells) == [0] and a.exports == {0: [{"x": 1}]}
    with open(report, "a") as fh:
        fh.write(line(a, 12.5, 1)[20:] + "not json\n" + line(b, 13.0))
    assert reader.read() == [a]  # b's kernel started: a is over
    assert sorted(a.cells) == [0, 1] and a.exports[0] == [{"x": 1}]  # each line read once
    reader.close(a)
    assert a.seconds == 2.5
    with open(report, "a") as fh:
        fh.write(line(b, 14.0, 0) + line(b, 16.0, 1, outcome="failed"))
    assert reader.read() == []  # the last notebook is over when its worker exits
    reader.close(b)
    assert b.seconds == 3.0 and b.cells[1].outcome == "failed"
