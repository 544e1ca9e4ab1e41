"""Method rules that hold (issue 39, item 4): a question's ``forbid`` enforced from the grader's side.

The in-kernel profiler is a teaching guard; the rule is held by reading every cell the student
wrote before the question's check cell (``judge.method``). Here:

* each evasion the issue names (a new thread, ``sys.setprofile(None)``, ``sys.settrace``, an
  ``exec`` of a base64 string that builds a copy under another name) and the ways around the
  scan (a computed ``getattr``, an alias made in another question's cell, a star import, a
  module the notebook wrote itself, replacing the grader's export, the grader's reference
  helpers) is refused by the scan;
* no honest submission trips it: the solutions and every submission of the feedback catalogue
  (tests/feedback_mistakes.py: real slips and right answers written differently);
* the real grader, with a full and a blank neighbour in the same batch, gives question 4 no
  point for each evasion (nor question 5, checked after the evading cell), and question 3 its
  honest points.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from pathlib import Path

import nbformat
import pytest

from kpca_lib.course.grading.judge.method import hidden_calls, unverifiable
from kpca_lib.course.grading.judge.notebooks import grading_notebook, read_solution, with_answers
from kpca_lib.course.grading.judge.scoring import forbidden_mentions
from kpca_lib.course.grading.pipeline.canary import release_notebook
from kpca_lib.course.grading.run.kernel_side import PREAMBLE

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
import feedback_mistakes as FM  # noqa: E402
from test_grading import sandbox_or_skip  # noqa: E402

A2 = "02_pca_and_centering"
Q4_FORBID = (
    "kpca_lib.centering.center_kernel",
    "kpca_lib.centering.center_test_kernel",
    "kpca_lib.centering.center_test_kernel_from_means",
    "sklearn.preprocessing.KernelCenterer",
)

#: The copy the issue describes: exec of a base64 string that builds the library's function
#: under another name (its code object in the notebook's globals, so no profiler names it).
_COPY = (
    "import sys, types\nimport kpca_lib.centering as m\nsys.setprofile(None)\n"
    "center = types.FunctionType(m.center_kernel.__code__, globals(), 'center')\n"
    "center_new = types.FunctionType(m.center_test_kernel.__code__, globals(), 'center_new')\n"
)

#: q4-answer cells that compute through the library while evading the profiler.
EVASIONS: dict[str, str] = {
    "thread": (
        "import threading\nimport kpca_lib.centering as _c\n\n"
        "def _in_thread(f, *a):\n    out = []\n"
        "    t = threading.Thread(target=lambda: out.append(f(*a)))\n    t.start()\n    t.join()\n"
        "    return out[0]\n\n"
        "def center(K):\n    return _in_thread(_c.center_kernel, K)\n\n"
        "def center_new(K_new, K):\n    return _in_thread(_c.center_test_kernel, K_new, K)\n"
    ),
    "setprofile_none": (
        "import sys\nfrom kpca_lib.centering import center_kernel as _a, center_test_kernel as _b\n\n"
        "def center(K):\n    sys.setprofile(None)\n    return _a(K)\n\n"
        "def center_new(K_new, K):\n    sys.setprofile(None)\n    return _b(K_new, K)\n"
    ),
    "settrace": (
        "import sys\nimport kpca_lib.centering as _c\n\n"
        "def center(K):\n    sys.settrace(None)\n    sys.setprofile(None)\n"
        "    return _c.center_kernel(K)\n\n"
        "def center_new(K_new, K):\n    sys.settrace(None)\n    sys.setprofile(None)\n"
        "    return _c.center_test_kernel(K_new, K)\n"
    ),
    "exec_base64_copy": (
        "import base64\nexec(base64.b64decode("
        + repr(base64.b64encode(_COPY.encode()))
        + ").decode())\n"
    ),
}

#: Cells (label, source) that must each make question 4 unverifiable, alone before its check.
SCAN_ONLY: dict[str, str] = {
    "computed_getattr": "import kpca_lib.centering as m\nf = getattr(m, 'center' + '_kernel')\n",
    "vars_lookup": "import kpca_lib.centering as m\nf = vars(m)['center_kernel'[::-1][::-1]]\n",
    "star_import": "from kpca_lib.centering import *\n",
    "own_module": "import my_helpers_written_by_the_notebook\n",
    "export_replaced": "_kpca_export = lambda q: None\n",
    "key_read": "import json\nkey = json.load(open('/run/kpca/config.json'))['key']\n",
    "grader_helper": "def center(K):\n    return compare_centered(K, K)\n",
    "dunder_dict": "import kpca_lib\nf = kpca_lib.__dict__['cent' + 'ering']\n",
    "process": "import multiprocessing\n",
    "main_module": "import __main__\n",
    "setattr_computed": "import __main__ as m\nsetattr(m, 'a' + 'b', 1)\n",
}


def test_every_evasion_is_refused_by_the_scan():
    grader = frozenset({"compare_centered"})
    for name, src in {**EVASIONS, **SCAN_ONLY}.items():
        why = unverifiable(Q4_FORBID, [("code cell 9", src)], reported=True, grader=grader)
        assert why and "none of its checks count" in why, (name, why)


def test_a_forbidden_name_in_any_earlier_cell_counts():
    """An alias made in another question's cell, or inside a string, is found too; the
    honest slip (the probe reported the call) keeps its partial credit."""
    alias = [
        ("code cell 3 (q3)", "from kpca_lib.centering import center_kernel as ck\n"),
        ("code cell 9 (q4)", "def center(K):\n    return ck(K)\n"),
    ]
    assert "center_kernel" in unverifiable(Q4_FORBID, alias)
    assert unverifiable(Q4_FORBID, alias, reported=True) == ""
    text = [("code cell 9", "name = 'kpca_lib.centering.center_test_kernel, please'\n")]
    assert "center_test_kernel" in unverifiable(Q4_FORBID, text)
    assert unverifiable(Q4_FORBID, [("c", "def center(K):\n    return K - K.mean()\n")]) == ""


def _built(nb):
    solution = read_solution(ROOT / "solutions" / f"{A2}.ipynb")
    return solution, grading_notebook(solution, nb, PREAMBLE)


def test_no_honest_submission_trips_the_scan():
    """The solutions and every submission of the feedback catalogue (slips and right answers
    written differently): no hidden construct in any cell before a question that forbids."""
    problems = []
    for m in FM.CATALOGUE:
        nb = FM.submission(m)
        solution = read_solution(ROOT / "solutions" / f"{m.assignment}.ipynb")
        built = grading_notebook(solution, nb, PREAMBLE)
        for qid in solution.questions:
            q = solution.question(qid)
            if not q.forbid:
                continue
            end = built.exports.get(qid, len(built.kinds))
            for c, kind in enumerate(built.kinds[:end]):
                if kind in ("answer", "student") and hidden_calls(built.nb.cells[c].source):
                    problems.append(
                        (m.id, qid, built.labels[c], hidden_calls(built.nb.cells[c].source))
                    )
            payload = {"__forbidden__": ["x"]}  # as the honest probe reports a library call
            why = forbidden_mentions(q, payload, built)
            if why:
                problems.append((m.id, qid, why))
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):  # the canary of every assignment
        solution = read_solution(path)
        built = grading_notebook(
            solution, with_answers(release_notebook(solution), solution.nb), PREAMBLE
        )
        for qid in solution.questions:
            why = forbidden_mentions(solution.question(qid), {}, built)
            if why:
                problems.append((path.name, qid, why))
    assert not problems, problems


def _submission(q4_source: str | None):
    sol = nbformat.read(ROOT / "solutions" / f"{A2}.ipynb", as_version=4)
    ex = nbformat.read(ROOT / "exercises" / f"{A2}.ipynb", as_version=4)
    nb = with_answers(ex, sol)
    if q4_source is not None:
        next(c for c in nb.cells if c.get("id") == "q4-answer").source = q4_source
    return nb


def test_the_grader_gives_no_point_for_an_evasion(tmp_path, monkeypatch):
    """The real grader, one batch: a full and a blank neighbour, and each evasion of the issue
    in question 4's answer cell. Questions 4 and 5 (both forbid calls; 5 is checked after the
    evading cell) score 0 with the reason; question 3 keeps the full neighbour's points; the
    neighbours are exact."""
    sandbox_or_skip()
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-method-rules")
    from kpca_lib.course.cli import main

    files = []
    full = _submission(None)
    nbformat.write(full, tmp_path / "honest_full.ipynb")
    blank = copy.deepcopy(nbformat.read(ROOT / "exercises" / f"{A2}.ipynb", as_version=4))
    nbformat.write(blank, tmp_path / "honest_blank.ipynb")
    for name, src in EVASIONS.items():
        nbformat.write(_submission(src), tmp_path / f"{name}.ipynb")
    files = sorted(tmp_path.glob("*.ipynb"))
    rc = main(
        ["grade", "--assignment", A2, "--out", str(tmp_path / "g"), "--jobs", "2", *map(str, files)]
    )
    assert rc == 0
    data = json.loads((tmp_path / "g" / "grades.json").read_text())
    rows = {r["submission"]: r for r in data["submissions"]}
    honest = rows["honest_full"]
    assert honest["status"] == "graded" and honest["score"] == honest["max_score"], honest[
        "messages"
    ]
    assert rows["honest_blank"]["score"] == 0
    for name in EVASIONS:
        r = rows[name]
        # Question 5 (it forbids KernelPCA) comes after the evading cell, which could have
        # prepared anything for it: it cannot be verified either. Question 3 came before.
        want = {**honest["questions"], "q4_centering": 0.0, "q5_kpca_projection": 0.0}
        assert (r["status"], r["questions"]) == ("graded", want), (
            name,
            r["questions"],
            r["messages"],
        )
        text = (tmp_path / "g" / r["feedback"]).read_text()
        assert "asks you not to call" in text or "asks you to write" in text, (name, text[:3000])


@pytest.mark.parametrize("name", list(EVASIONS))
def test_the_evasions_are_well_formed(name):
    compile(EVASIONS[name], name, "exec")
