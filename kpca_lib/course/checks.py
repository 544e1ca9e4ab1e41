"""Public checks of the homework: immediate, specific feedback in the exercise notebooks.

In a check cell::

    from kpca_lib.course.checks import check
    check("q1_phi_p3", globals())

``check`` evaluates the answers of that question (the names the question asks for,
looked up in ``globals()``) on fixed random inputs, exactly as the grader will on its
own fresh inputs, and prints one line per property: what passed, and for what failed
by how much and a hint. It never prints the solution. When something fails it raises
:class:`CheckFailed` (an ``AssertionError``), so a notebook run stops being green.

How answers are read (also by the grader)
-----------------------------------------
Every answer is a *name defined by the question's answer cell*: functions such as
``phi_3`` are called on inputs; values such as ``dim_3`` are read. For the two
widget questions the answer is an assignment line in the answer cell::

    answer_sigma = ...    # question q7_sigma_moons (cell id "q7-answer")
    answer_r = ...        # question q8_eigenfaces_r (cell id "q8-answer")

(``...`` stands for the value the slider shows; the student edition never holds the answers.)

The widget's ``answer_recorder`` shows that line for the slider's current value; the
student pastes it into the answer cell and runs it. The grader reads the *source* of
the answer cell (found by cell id, or by ``metadata["kpca"]["question"]`` if the cell
was copied), re-executes it, and grades the value bound to ``answer_sigma`` /
``answer_r``: never widget state, which a headless re-run would reset to the default.

Hidden checks (``solutions/`` only) are run with :func:`run_hidden_check`; the
released exercises do not contain them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .grading.evaluate import (
    CheckResult,
    make_inputs,
    probe_payload,
    public_seed,
    roundtrip,
    run_checks,
)
from .grading.plain import CheckError, as_array, as_bool, as_float, as_int, as_list, as_map
from .grading.questions import (
    FACE_TARGET,
    SIGMA_RANGE,
    Check,
    get_question,
    homework_faces,
    homework_moons,
    mercer_candidates,
)

__all__ = [
    "check",
    "run_hidden_check",
    "CheckFailed",
    "CheckError",
    "format_results",
    "mercer_candidates",
    "homework_moons",
    "homework_faces",
    "SIGMA_RANGE",
    "FACE_TARGET",
    "as_array",
    "as_bool",
    "as_float",
    "as_int",
    "as_list",
    "as_map",
]


class CheckFailed(AssertionError):
    """At least one check of a question failed (the printed report says which and why)."""


def format_results(title: str, results: list[CheckResult], *, show_messages: bool = True) -> str:
    """A short report: one line per check, ✔ or ✘, with the message."""
    n_ok = sum(r.passed for r in results)
    lines = [f"{title}: {n_ok} of {len(results)} checks passed"]
    for r in results:
        mark = "✔" if r.passed else "✘"
        line = f"  {mark} {r.description}"
        if show_messages and r.message:
            line += f"\n      {r.message}"
        lines.append(line)
    return "\n".join(lines)


def check(question_id: str, namespace: Mapping[str, Any]) -> None:
    """Run the public checks of a question on the answers defined in ``namespace``.

    Parameters
    ----------
    question_id : str
        E.g. ``"q1_phi_p3"``; the check cell below each question names it.
    namespace : mapping
        Where the answers live: pass ``globals()``.

    Returns
    -------
    None
        Nothing, so that a check cell shows only the printed report.

    Raises
    ------
    CheckFailed
        When a check fails; the printed report says which property, by how much, and a hint.
    """
    question = get_question(question_id)
    inputs = make_inputs(question, public_seed(question_id))
    answers = roundtrip(probe_payload(question, namespace, inputs))
    results = run_checks(question, answers, inputs)
    print(format_results(f"{question_id} ({question.title})", results))
    failed = [r for r in results if not r.passed]
    if failed:
        raise CheckFailed(
            f"{len(failed)} of {len(results)} checks of {question_id} failed: see the report above."
        )
    print("  The grader runs these checks again on fresh inputs, plus hidden checks.")


def run_hidden_check(
    question_id: str,
    fn: Callable[[dict[str, Any], dict[str, Any]], Any],
    namespace: Mapping[str, Any],
) -> None:
    """Run a hidden check (a cell of ``solutions/`` only) on the answers in ``namespace``.

    ``fn(answers, inputs)`` receives the decoded plain data (as the grader will) and
    raises :class:`CheckError` or ``AssertionError`` when the property fails. Its
    docstring's first line is the description students see in feedback. The grader
    never runs this function in the student's kernel: it reads the cell from
    ``solutions/`` and calls ``fn`` in its own process on the exported answers.
    """
    question = get_question(question_id)
    description = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
    hidden = Check(f"{question_id}.{fn.__name__}", description, 0, fn, hidden=True)
    inputs = make_inputs(question, public_seed(question_id, salt=1))
    answers = roundtrip(probe_payload(question, namespace, inputs))
    (result,) = run_checks(replace(question, checks=()), answers, inputs, [hidden])
    print(format_results(f"hidden check of {question_id}", [result]))
    if not result.passed:
        raise CheckFailed(f"hidden check {hidden.id} failed: {result.message}")
