"""The grader runs the notebook as the student ran it, and charges each cause once.

(a) ``grading_notebook``: every code cell in the student's order, instructor cells restored from
    ``solutions/``, each question's export where its check cell stands, demo cells only when a
    later cell reads them;
(b) ``dependencies``: names bound and read, by parsing;
(c) ``run_checks``: one rule charges a question's checks (slip once, form once, unanswerable at
    every check but reported once);
(d) forbidden calls: a value computed through one is an error, in the notebook's probe too;
(e) ``check()``'s note about cells run again;
(f) the real grader: a cell that raised and a cell that reads a widget are named in the
    feedback; a forbidden name in a branch the probe never takes voids the question.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
import numpy as np
import pytest
from test_grading import sandbox_or_skip

from kpca_lib.course.checks import _History
from kpca_lib.course.cli import main
from kpca_lib.course.grading.judge.dependencies import binds, reads, references
from kpca_lib.course.grading.judge.evaluate import Answers, run_checks
from kpca_lib.course.grading.judge.notebooks import grading_notebook, read_solution, with_answers
from kpca_lib.course.grading.judge.plain import (
    CheckError,
    Slip,
    as_array,
    as_bool,
    note,
    unanswerable,
)
from kpca_lib.course.grading.judge.questions import Check, Question, call, forbidden_calls

ROOT = Path(__file__).resolve().parents[1]


def _notebooks(assignment: str):
    solution = read_solution(ROOT / "solutions" / f"{assignment}.ipynb")
    exercise = nbformat.read(ROOT / "exercises" / f"{assignment}.ipynb", as_version=4)
    return solution, exercise, with_answers(exercise, solution.nb)


def _cell(nb, cid):
    return next(c for c in nb.cells if c.get("id") == cid)


# --------------------------------------------------------------------------- (a) the notebook run
def test_cells_run_in_the_students_order_with_instructor_cells_restored():
    solution, _, nb = _notebooks("01_feature_maps")
    nb = copy.deepcopy(nb)
    _cell(nb, "q1-p3-check").source = "print('Score: 12 / 12')"  # edited read-only cell
    _cell(nb, "q1-p3-question").source = "pass"
    i = nb.cells.index(_cell(nb, "q1-p4-answer"))
    nb.cells.insert(i, nbformat.v4.new_code_cell("D_demo = 15"))  # a cell the student added
    nb.cells = [c for c in nb.cells if c.get("id") != "q2-check"]  # a check cell deleted
    built = grading_notebook(solution, nb, "# preamble")
    sources = [c.source for c in built.nb.cells]
    assert sources[0] == "# preamble"
    # every question cell runs first, with the trusted source
    trusted_q = _cell(solution.nb, "q1-p3-question").source
    assert sources.count(trusted_q) == 1 and sources.index(trusted_q) < sources.index("D_demo = 15")
    assert "pass" not in sources and not any("Score" in s for s in sources)
    # the export stands where the check cell stood, after the student's cell and the answer
    p3, p4 = built.exports["q1_phi_p3"], built.exports["q1_phi_p4"]
    added = sources.index("D_demo = 15")
    assert p3 < added < p4 and built.kinds[added] == "student" and built.owners[added] == "q1_phi_p4"
    assert sources[p4] == "_kpca_export('q1_phi_p4')\n"
    # a deleted check cell: the question is exported at the end
    assert built.exports["q2_feature_count"] == len(sources) - 1
    assert built.labels[added].startswith("code cell ") and "D_demo = 15" in built.labels[added]


def test_demo_cells_run_only_when_a_later_cell_reads_them():
    solution, _, nb = _notebooks("04_widgets_sigma_and_eigenfaces")
    built = grading_notebook(solution, nb, "")
    demos = [i for i, k in enumerate(built.kinds) if k in ("demo", "unused-demo")]
    assert demos and all(built.kinds[i] == "unused-demo" for i in demos)
    assert not built.widget_reads
    nb = copy.deepcopy(nb)
    _cell(nb, "q7-answer").source = 'answer_sigma = sigma_widget.controls["sigma"].value\n'
    built = grading_notebook(solution, nb, "")
    assert "demo" in built.kinds  # the σ explorer runs: a later cell reads what it binds
    (reads_at,) = built.widget_reads
    assert built.widget_reads[reads_at] == ["sigma_widget"] and built.owners[reads_at] == "q7_sigma_moons"
    # a cell that cannot be analysed keeps every demo before it
    nb.cells.append(nbformat.v4.new_code_cell("exec('print(1)')"))
    built = grading_notebook(solution, nb, "")
    assert "unused-demo" not in built.kinds


def test_skipped_cells_and_graded_exports_become_comments():
    solution, _, nb = _notebooks("01_feature_maps")
    built = grading_notebook(solution, nb, "")
    answer = built.kinds.index("answer")
    again = grading_notebook(solution, nb, "", skip={answer}, done={"q1_phi_p3"})
    assert again.nb.cells[answer].source.startswith("# (skipped by the grader")
    assert again.nb.cells[again.exports["q1_phi_p3"]].source.startswith("# (skipped by the grader")
    assert again.nb.cells[again.exports["q1_phi_p4"]].source == "_kpca_export('q1_phi_p4')\n"


# --------------------------------------------------------------------------- (b) parsing
def test_dependencies_by_parsing():
    assert binds("import numpy as np\nfrom a.b import c\nx, y = 1, 2\ndef f(): z = 1\n") >= {
        "np", "c", "x", "y", "f"}
    assert reads("%matplotlib inline\nprint(w.value)\n") >= {"print", "w"}
    assert reads("%timeit f(x)\n!ls\n") >= {"f", "x"}
    assert reads("%run other.py") is None and reads("get_ipython().user_ns['a']") is None
    assert reads("exec('a = 1')") is None and reads("globals()['a']") is None
    assert binds("def (:") is None
    names = frozenset({"kpca_lib.centering.center_kernel", "sklearn.decomposition.KernelPCA"})
    assert references("from kpca_lib.centering import center_kernel as ck", names) == {
        "kpca_lib.centering.center_kernel"}
    assert references("getattr(m, 'KernelPCA')", names) == {"sklearn.decomposition.KernelPCA"}
    assert references("# center_kernel in a comment\nx = 1", names) == set()


# --------------------------------------------------------------------------- (c) charging
def _question(*fns):
    checks = tuple(Check(f"q.c{i}", f"check {i}", 1.0, fn) for i, fn in enumerate(fns))
    return Question("q", "", "a question", ("f",), lambda ns, inputs: {}, checks, total_points=len(fns))


def test_a_slip_is_charged_once_however_many_checks_meet_it():
    slip = Slip("ascending", "you took the smallest eigenvalues")

    def fails(answers, inputs):
        raise CheckError(slip.message, cause=slip)

    def other(answers, inputs):
        raise CheckError("something else")

    results = run_checks(_question(fails, fails, other), Answers(), {})
    assert [r.passed for r in results] == [False, True, False]
    assert "counted once there" in results[1].message and "check 0" in results[1].message


def test_an_answer_that_cannot_be_evaluated_fails_every_check_and_is_reported_once():
    def needs(answers, inputs):
        return str(as_array(answers["W"], "W"))

    answers = Answers({"W": None})
    answers["W"] = __import__("kpca_lib.course.grading.judge.plain", fromlist=["AnswerError"]).AnswerError(
        "gram_pca raised ValueError: boom")
    results = run_checks(_question(needs, needs), answers, {})
    assert [r.passed for r in results] == [False, False]
    assert "boom" in results[0].message and "as reported in the check “check 0”" in results[1].message
    assert unanswerable("x", "a") != unanswerable("x", "b")  # distinct messages, distinct causes


def test_a_repaired_form_is_charged_once_even_when_the_check_then_passes():
    def reads_bool(answers, inputs):
        return f"ok {as_bool(answers['v'], 'v')}"

    results = run_checks(_question(reads_bool, reads_bool), Answers({"v": "True"}), {})
    assert [r.passed for r in results] == [False, True]
    assert "string 'True'" in results[0].message and "With that put right" in results[0].message
    assert "counted once there" in results[1].message


def test_an_explanation_replaces_a_misleading_diagnosis():
    def compares(answers, inputs):
        note(Slip("form-precision", "a float32 array keeps 7 digits", charge="explain"))
        raise CheckError("expand with the multinomial theorem")

    results = run_checks(_question(compares, compares), Answers(), {})
    assert results[0].message == "a float32 array keeps 7 digits" and not results[0].passed
    assert results[1].passed


def test_transposed_arrays_are_read_as_meant_and_noted():
    from kpca_lib.course.grading.judge.plain import decode, encode, noting

    with noting() as notes:
        A = as_array(decode(encode(np.ones((3, 5), dtype=np.float32))), "Z", shape=(5, 3))
    assert A.shape == (5, 3)
    assert [n.code for n in notes] == ["form-precision", "form-transposed"]


# --------------------------------------------------------------------------- (d) forbidden calls
def test_a_value_computed_through_a_forbidden_call_is_an_error():
    from kpca_lib.centering import center_kernel

    K = np.eye(4) + 1.0
    ns = {"own": lambda K: K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean(),
          "lib": lambda K: center_kernel(K)}
    with forbidden_calls(("kpca_lib.centering.center_kernel",)) as hits:
        own, lib = call(ns, "own", K), call(ns, "lib", K)
    assert "__array__" in own
    assert "calls kpca_lib.centering.center_kernel" in lib["__error__"]
    assert hits == ["kpca_lib.centering.center_kernel"]
    assert "__array__" in call(ns, "lib", K)  # outside a probe that forbids it: allowed


# --------------------------------------------------------------------------- (e) check()'s note
def test_check_notes_cells_run_again_but_not_itself():
    h = _History()
    h.record(SimpleNamespace(cell_id="answer", raw_cell="x = 1"))
    h.record(SimpleNamespace(cell_id="check", raw_cell="check('q', globals())"))
    h.record(SimpleNamespace(cell_id="check", raw_cell="check('q', globals())"))
    assert h.stale() == ""
    h.record(SimpleNamespace(cell_id="answer", raw_cell="x = 2"))
    h.record(SimpleNamespace(cell_id="check", raw_cell="check('q', globals())"))
    assert "1 cell was edited and run again" in h.stale()
    h.record(SimpleNamespace(cell_id=None, raw_cell="y = 1"))  # nbval, the grader: no cell ids
    assert "1 cell was edited" in h.stale()


# --------------------------------------------------------------------------- (f) the real grader
def test_the_feedback_names_the_cells_as_the_student_knows_them(tmp_path, monkeypatch):
    sandbox_or_skip()
    monkeypatch.setenv("KPCA_GRADING_SECRET", "test-execution-model")
    files = []

    _, _, nb = _notebooks("04_widgets_sigma_and_eigenfaces")
    nb = copy.deepcopy(nb)
    _cell(nb, "q7-answer").source = 'answer_sigma = sigma_widget.controls["sigma"].value\n'
    nbformat.write(nb, tmp_path / "widget.ipynb")
    rc = main(["grade", "--assignment", "04_widgets_sigma_and_eigenfaces", "--out", str(tmp_path / "g4"),
               "--jobs", "2", str(tmp_path / "widget.ipynb")])
    assert rc == 0

    _, _, nb = _notebooks("02_pca_and_centering")
    raised = copy.deepcopy(nb)
    i = raised.cells.index(_cell(raised, "q4-answer"))
    raised.cells.insert(i, nbformat.v4.new_code_cell("offset = undefined_helper(1)"))
    nbformat.write(raised, tmp_path / "raised.ipynb")
    dead = copy.deepcopy(nb)
    _cell(dead, "q4-answer").source = _cell(dead, "q4-answer").source.replace(
        "def center(K):", "def center(K, use_library=False):\n    if use_library:\n"
        "        from kpca_lib.centering import center_kernel\n        return center_kernel(K)\n", 1)
    nbformat.write(dead, tmp_path / "dead_branch.ipynb")
    files = [tmp_path / "raised.ipynb", tmp_path / "dead_branch.ipynb"]
    rc = main(["grade", "--assignment", "02_pca_and_centering", "--out", str(tmp_path / "g2"),
               "--jobs", "2", *map(str, files)])
    assert rc == 0

    rows = {r["submission"]: r for d in ("g4", "g2")
            for r in json.loads((tmp_path / d / "grades.json").read_text())["submissions"]}
    assert rows["widget"]["questions"]["q7_sigma_moons"] == 0
    text = (tmp_path / "g4" / rows["widget"]["feedback"]).read_text()
    assert "nobody moves its sliders" in text and "sigma\\_widget" in text
    assert rows["raised"]["score"] == rows["raised"]["max_score"]  # the cell's name is never read
    text = (tmp_path / "g2" / rows["raised"]["feedback"]).read_text()
    assert "raised NameError: name 'undefined\\_helper' is not defined" in text
    assert rows["dead_branch"]["questions"]["q4_centering"] == 0
    assert rows["dead_branch"]["questions"]["q3_gram_pca"] == 3
    text = (tmp_path / "g2" / rows["dead_branch"]["feedback"]).read_text()
    assert "use kpca\\_lib.centering.center\\_kernel, which the question asks" in text


@pytest.mark.parametrize("assignment", ["01_feature_maps", "03_mercer"])
def test_a_full_submission_builds_one_export_per_question(assignment):
    solution, _, nb = _notebooks(assignment)
    built = grading_notebook(solution, nb, "")
    assert sorted(built.exports) == sorted(solution.questions)
    for qid, at in built.exports.items():
        assert built.owners[at] == qid and built.kinds[at] == "export"
