"""Issue 40's classes of feedback, each tested where it is decided (in-process, no sandbox, no
timing): a hidden check's slow input stopped alone (1), containers named as given (3), no false
note about widgets (4), no value that answers a question (6), a name defined in a later cell
named (7), "not answered yet" (9) and hidden-check code found by the leak scan (11). The graded
examples of every class are in tests/feedback_mistakes.py (tests/test_feedback.py)."""

from __future__ import annotations

import copy
import re
import signal
from pathlib import Path

import nbformat
import numpy as np
import pytest

from kpca_lib.course.edition import _hidden_only_helpers, fingerprints, scan
from kpca_lib.course.grading.judge.evaluate import CheckResult
from kpca_lib.course.grading.judge.notebooks import grading_notebook, read_solution, with_answers
from kpca_lib.course.grading.judge.plain import (
    AnswerError,
    AnswerSequence,
    CheckError,
    as_float,
    as_map,
    decode,
    describe,
    encode,
)
from kpca_lib.course.grading.judge.questions import (
    SIGMA_RANGE,
    call,
    call_within,
    r_below_target,
    r_smallest,
    sigma_check,
    variable,
)
from kpca_lib.course.grading.judge.scoring import _name_defined_later, defined_later, explain

ROOT = Path(__file__).resolve().parents[1]


def _notebooks(assignment: str):
    solution = read_solution(ROOT / "solutions" / f"{assignment}.ipynb")
    exercise = nbformat.read(ROOT / "exercises" / f"{assignment}.ipynb", as_version=4)
    return solution, copy.deepcopy(with_answers(exercise, solution.nb))


def _cell(nb, cid):
    return next(c for c in nb.cells if c.get("id") == cid)


# --------------------------------------------------------------------------- 1: a slow input
def test_a_call_too_slow_for_one_input_is_stopped_and_named():
    def forever(d, p):
        while True:
            pass

    before = signal.getsignal(signal.SIGALRM)
    ns = {"n_features": forever, "fast": lambda d, p: d + p}
    out = call_within(ns, 0.2, "n_features", 7000, 5)
    assert "n_features(7000, 5) did not finish within 0.2 s, so it was stopped" in out["__error__"]
    assert call_within(ns, 0.2, "fast", 2, 3) == 5  # a quick call is not touched
    assert signal.getsignal(signal.SIGALRM) is before  # the probe leaves no timer behind

    # the answer's own `except Exception` cannot swallow the stop
    def swallowing(d, p):
        try:
            while True:
                pass
        except Exception:
            return 0

    assert "did not finish" in call_within({"f": swallowing}, 0.2, "f", 1, 1)["__error__"]


# --------------------------------------------------------------------------- 3: containers
@pytest.mark.parametrize(
    ("given", "said"),
    [
        ([True, False, True], "a list of 3 booleans"),
        ((0.2,), "a tuple of one number, (0.2,): a comma after a value makes a tuple"),
        ([15], "a list of one number"),
        (
            [[0.0, 0.0], [1.0]],
            "a list of 2 items (list) that do not form one regular array of numbers",
        ),
        ([np.zeros((2, 2)), np.zeros((1, 2))], "a list of 2 items (array)"),
        (["yes", "no"], "a list of 2 items (string)"),
        (np.zeros(3), "an array of shape (3,)"),
        ({"a": 1}, "a dict"),
    ],
)
def test_containers_are_named_as_given(given, said):
    assert describe(decode(encode(given))).startswith(said)


def test_no_message_calls_a_list_an_array_or_speaks_of_inhomogeneous_shapes():
    with pytest.raises(CheckError) as err:
        as_map(decode(encode([np.zeros((2, 2)), np.zeros((1, 2))])), "counterexamples")
    assert "should be a dict; got a list of 2 items" in str(err.value)
    assert "inhomogeneous" not in str(err.value) and "array of shape" not in str(err.value)
    with pytest.raises(CheckError) as err:
        as_float(decode(encode((0.2,))), "answer_sigma")
    assert "tuple of one number" in str(err.value)


def test_a_sequence_from_an_export_is_validated():
    assert decode({"__seq__": {"kind": "set", "items": []}}) == AnswerError(
        "the answer is not plain data (numbers, arrays, booleans)"
    )
    assert isinstance(decode({"__seq__": {"kind": "list", "items": "x"}}), AnswerError)
    seq = decode({"__seq__": {"kind": "tuple", "items": [1, {"__error__": "no"}]}})
    assert seq == AnswerSequence("tuple", (1, AnswerError("no")), 2)
    lying = decode(
        {"__seq__": {"kind": "list", "length": 1, "items": [1, 2]}}
    )  # fewer than it holds
    assert lying.length == 2
    # a long list with large items: its length, and only a few small items cross
    big = encode([np.zeros(50_000), *[[1.0]] * 100])
    assert big["__seq__"]["length"] == 101 and len(big["__seq__"]["items"]) == 20
    assert "too large to show" in big["__seq__"]["items"][0]["__error__"]
    assert describe(decode(big)).startswith("a list of 101 items")


# --------------------------------------------------------------------------- 4: widget notes
@pytest.mark.parametrize(
    ("source", "noted"),
    [
        ('answer_sigma = sigma_widget.controls["sigma"].value\n', ["sigma_widget"]),
        # the cell's own variable, assigned before it is read
        ("sigma_widget = 0.2\nanswer_sigma = sigma_widget\n", []),
        # a comprehension's own loop variable, and a function's parameter
        ("answer_sigma = [sigma_widget for sigma_widget in (0.2,)][0]\n", []),
        ("def pick(sigma_widget):\n    return sigma_widget\n\n\nanswer_sigma = pick(0.2)\n", []),
        # a function imported in the same cell
        (
            "from kpca_lib.widgets import answer_recorder, sigma_explorer\n"
            "answer_sigma = 0.2\nprint(answer_recorder, sigma_explorer)\n",
            [],
        ),
        # read by a function the cell defines, before the cell binds it: still the widget's
        (
            "def read():\n    return sigma_widget.value\n\n\nanswer_sigma = read()\n",
            ["sigma_widget"],
        ),
    ],
)
def test_a_widget_note_only_for_a_value_that_comes_from_the_widget(source, noted):
    solution, nb = _notebooks("04_widgets_sigma_and_eigenfaces")
    _cell(nb, "q7-answer").source = source
    built = grading_notebook(solution, nb, "")
    assert "demo" in built.kinds  # the widget's cell runs: a later cell reads a name it binds
    assert list(built.widget_reads.values()) == ([noted] if noted else [])


def test_a_name_a_cell_in_between_redefines_is_not_the_widgets():
    solution, nb = _notebooks("04_widgets_sigma_and_eigenfaces")
    i = nb.cells.index(_cell(nb, "q7-answer"))
    nb.cells.insert(i, nbformat.v4.new_code_cell("sigma_widget = 0.2\n"))
    _cell(nb, "q7-answer").source = "answer_sigma = sigma_widget\n"
    assert not grading_notebook(solution, nb, "").widget_reads


# --------------------------------------------------------------------------- 6: no give-away
def _numbers(text: str) -> set[float]:
    return {float(x) for x in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?", text)}


@pytest.mark.parametrize("value", [8.5, 9.5, 11.0, 12.5, 15.0, 0.045, -0.7, 20.0])
def test_sigma_messages_print_no_working_sigma(value):
    with pytest.raises(CheckError) as err:
        sigma_check({"sigma": value}, {})
    allowed = {value, *SIGMA_RANGE, 1.0, 2.0, 8.0}  # 1/(2σ²), σ², "question 8's"
    assert _numbers(str(err.value)) <= allowed, str(err.value)


@pytest.mark.parametrize("r", [12, 14, 16, 20])
def test_r_messages_never_name_the_smallest_r(r):
    for check in (r_below_target, r_smallest):
        try:
            message = check({"r": r}, {})
        except CheckError as exc:
            message = str(exc)
        assert not re.search(r"(?<![\d.])15(?![\d.%])", message), message


# --------------------------------------------------------------------------- 7: a later cell
def test_a_name_defined_in_a_later_cell_is_named():
    solution, nb = _notebooks("02_pca_and_centering")
    answer = _cell(nb, "q5-answer")
    helper = answer.source[answer.source.index("def _alphas") :]
    answer.source = answer.source[: answer.source.index("def _alphas")]
    nb.cells.append(nbformat.v4.new_code_cell(helper))
    built = grading_notebook(solution, nb, "")
    export = built.exports["q5_kpca_projection"]
    later = defined_later(built, export, "_alphas")
    assert "`_alphas` is defined in code cell" in later and "def _alphas" in later
    assert defined_later(built, export, "not_there") == ""
    failed = CheckResult(
        "q5.train",
        "q5",
        "d",
        1.0,
        False,
        "kpca_project raised NameError: name '_alphas' is not defined.",
        False,
    )
    assert _name_defined_later(failed, built, export).message.endswith(
        "move that definition above it."
    )
    passed = CheckResult("q5.train", "q5", "d", 1.0, True, "ok", False)
    assert _name_defined_later(passed, built, export) is passed
    # a cell that raised the NameError itself is named with the later cell too
    notes, _ = explain(
        built,
        {export - 1: ("code cell 3", "NameError", "name '_alphas' is not defined")},
        set(),
        512,
    )
    assert any("`_alphas` is defined in code cell" in n for n in notes["q5_kpca_projection"])


def test_the_kernel_side_message_of_a_name_error_points_below():
    def f():
        return undefined_helper()  # noqa: F821

    assert "defined in a cell below the check cell" in call({"f": f}, "f")["__error__"]


# --------------------------------------------------------------------------- 9: not answered
def test_a_stub_left_as_it_is_is_not_answered_yet():
    assert variable({"dim_3": ...}, "dim_3")["__error__"].startswith(
        "dim_3 is not answered yet (`...` is still there)"
    )
    assert variable({"answer_r": None}, "answer_r")["__error__"].startswith(
        "answer_r is not answered yet (None is still there)"
    )
    assert "Ellipsis" not in str(encode({"a": ...}))


# --------------------------------------------------------------------------- 11: the leak scan
HIDDEN = """from kpca_lib.course.grading.judge.questions import {name}


def some_hidden_check(answers, inputs):
    \"\"\"A property.\"\"\"
    return {name}(answers, inputs)


run_hidden_check("q9_x", some_hidden_check, globals())
"""


def test_hidden_check_code_in_the_library_is_a_leak(tmp_path):
    """A helper that only hidden checks import, defined in the package, ships with the edition:
    the scan finds it by name; helpers the public checks use too are not fingerprints."""
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    for src in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
        (course / "solutions" / src.name).write_bytes(src.read_bytes())
    package = course / "kpca_lib" / "course"
    package.mkdir(parents=True)
    (package / "helpers.py").write_text(
        "def probe_only_the_grader_knows(answers, inputs):\n    return 'ok'\n\n\n"
        "def shared_helper(x):\n    return x\n\n\nVALUE = shared_helper(1)\n"
    )
    path = course / "solutions" / "01_feature_maps.ipynb"
    nb = nbformat.read(path, as_version=4)
    hidden = nbformat.v4.new_code_cell(HIDDEN.format(name="probe_only_the_grader_knows"))
    hidden.metadata["kpca"] = {"role": "hidden-check", "question": "q1_phi_p3", "points": 1}
    shared = nbformat.v4.new_code_cell(HIDDEN.format(name="shared_helper"))
    shared.metadata["kpca"] = {"role": "hidden-check", "question": "q1_phi_p3", "points": 1}
    nb.cells += [hidden, shared]
    nbformat.write(nb, path)
    found = _hidden_only_helpers(
        sorted((course / "solutions").glob("*.ipynb")), course / "kpca_lib"
    )
    # (this package holds none of the real helpers: only the two planted names are looked at)
    assert set(found) & {"probe_only_the_grader_knows", "shared_helper"} == {
        "probe_only_the_grader_knows"
    }
    assert "nothing else uses it" in found["probe_only_the_grader_knows"]
    fps = fingerprints(course / "solutions", instructor_root=course)
    leaks = [f for f in scan(course / "kpca_lib", fps) if f.kind == "hidden-check"]
    assert [f.file for f in leaks] == ["course/helpers.py"]


def test_the_repositorys_hidden_checks_keep_their_code_in_solutions():
    paths = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    assert _hidden_only_helpers(paths, ROOT / "kpca_lib") == {}
