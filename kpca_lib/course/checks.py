"""Public checks of the homework: immediate, specific feedback in the exercise notebooks.

In a check cell::

    from kpca_lib.course.checks import check
    check("q1_phi_p3", globals())

``check`` evaluates the answers of that question (the names the question asks for,
looked up in ``globals()``) on fixed random inputs, exactly as the grader will on its
own fresh inputs, and prints one line per property: what passed, and for what failed
by how much and a diagnosis. It never prints the solution. It then says what the
public checks are worth and prints a one-line ✔/✘ summary. A failure does not raise,
so *Run All* reaches every question; with ``KPCA_CHECKS_RAISE=1`` (``make test``) it
raises :class:`CheckFailed` (an ``AssertionError``).

The question itself (its names, inputs, probe and public checks) is defined by the
read-only question cell above the answer (:func:`define_question`, see
:mod:`kpca_lib.course.grading.judge.registry`).

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

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .grading.judge.evaluate import (
    CheckResult,
    make_inputs,
    probe_payload,
    public_seed,
    roundtrip,
    run_checks,
)
from .grading.judge.plain import (
    CheckError,
    as_array,
    as_bool,
    as_float,
    as_int,
    as_list,
    as_map,
    plain_list,
)
from .grading.judge.questions import (
    FACE_TARGET,
    SIGMA_RANGE,
    Check,
    Question,
    call,
    call_tuple,
    homework_faces,
    homework_moons,
    mercer_candidates,
    variable,
)
from .grading.judge.registry import define_question, get_question

__all__ = [
    "check",
    "coverage",
    "run_hidden_check",
    "define_question",
    "call",
    "call_tuple",
    "variable",
    "plain_list",
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


STRICT_ENV = "KPCA_CHECKS_RAISE"


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _points(x: float) -> str:
    return f"{x:g} point" + ("" if x == 1 else "s")


def coverage(question: Question) -> str:
    """What the public checks of ``question`` are worth, and what the grader adds."""
    public, hidden = question.public_points, question.hidden_points
    total = public + hidden
    if hidden:
        return (f"These checks are worth {_points(public)} of the question's {_points(total)}; the "
                f"grader runs them again on fresh inputs and adds hidden checks worth {_points(hidden)}.")
    return (f"These checks are worth all {_points(public)} of the question; the grader runs them "
            "again on fresh inputs.")


def check(question_id: str, namespace: Mapping[str, Any]) -> None:
    """Run the public checks of a question on the answers defined in ``namespace``.

    Prints a report (one ✔ or ✘ line per check, with what failed, by how much and a
    hint), what the checks are worth, and a one-line summary. A failed check does not
    raise, so *Run All* reaches every question; set the environment variable
    ``KPCA_CHECKS_RAISE=1`` (as ``make test`` does) to make a failure raise instead.

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
        Only with ``KPCA_CHECKS_RAISE=1``, when a check fails.
    """
    try:
        question = get_question(question_id)
    except LookupError as exc:
        _conclude(question_id, f"✘ {question_id}: {exc}")
        return
    inputs = make_inputs(question, public_seed(question_id))
    start = time.perf_counter()
    answers = roundtrip(probe_payload(question, namespace, inputs))
    seconds = time.perf_counter() - start
    results = run_checks(question, answers, inputs)
    print(format_results(f"{question_id} ({question.title})", results))
    print("  " + coverage(question))
    if seconds > SLOW_SECONDS:
        print(f"  Note: your answers took {seconds:.0f} s to check here. The grader runs every cell "
              f"under a time limit ({DEFAULT_LIMIT:g} s per cell unless your instructor says otherwise): "
              "a cell past it scores 0 for its question. Make it faster before you submit.")
    stale = kernel_history().stale()
    if stale:
        print(f"  Note: {stale} The grader runs every cell once, top to bottom, in a fresh kernel: "
              "before you submit, use Kernel → Restart Kernel and Run All Cells and look at the "
              "checks again.")
    failed = [r for r in results if not r.passed]
    if failed:
        _conclude(question_id, f"✘ {question_id}: {len(failed)} of {len(results)} checks failed (✘ above); "
                  "fix the answer cell, run it, then run this cell again.")
    else:
        print(f"✔ {question_id}: all {len(results)} public checks passed.")


SLOW_SECONDS = 10.0
DEFAULT_LIMIT = 30.0  # kpca-course grade --timeout's default


class _History:
    """What this kernel ran, cell by cell (JupyterLab sends each cell's id with its code)."""

    def __init__(self) -> None:
        self.sources: dict[str, set[str]] = {}
        self.runs: dict[str, int] = {}
        self.current = ""

    def record(self, info: Any) -> None:
        cid = getattr(info, "cell_id", None)
        if not cid:
            return
        self.current = cid
        self.runs[cid] = self.runs.get(cid, 0) + 1
        self.sources.setdefault(cid, set()).add(getattr(info, "raw_cell", "") or "")

    def stale(self) -> str:
        """Why the kernel's state may differ from a top-to-bottom run (``""`` if it cannot)."""
        edited = sum(1 for c, s in self.sources.items() if len(s) > 1 and c != self.current)
        again = sum(1 for c, n in self.runs.items() if n > 1 and c != self.current)
        if not again:
            return ""
        what = (f"{edited} cell{'s were' if edited != 1 else ' was'} edited and run again"
                if edited else f"{again} cell{'s were' if again != 1 else ' was'} run more than once")
        return f"in this kernel {what}, so what the checks saw may come from cells run out of order or since changed."


_HISTORY: _History | None = None


def kernel_history() -> _History:
    """This kernel's :class:`_History`, recording from the first call on (in IPython only)."""
    global _HISTORY
    if _HISTORY is None:
        _HISTORY = _History()
        try:
            from IPython import get_ipython

            shell = get_ipython()
            if shell is not None:
                shell.events.register("pre_run_cell", _HISTORY.record)
        except Exception:
            pass
    return _HISTORY


def _conclude(question_id: str, summary: str) -> None:
    print(summary)
    if _strict():
        raise CheckFailed(summary)


def run_hidden_check(
    question_id: str,
    fn: Callable[[dict[str, Any], dict[str, Any]], Any],
    namespace: Mapping[str, Any],
    inputs: Callable[[Any], dict[str, Any]] | None = None,
) -> None:
    """Run a hidden check (a cell of ``solutions/`` only) on the answers in ``namespace``.

    ``fn(answers, inputs)`` receives the decoded plain data (as the grader will) and
    raises :class:`CheckError` or ``AssertionError`` when the property fails. Its
    docstring's first line is the description students see in feedback. The grader
    never runs this function in the student's kernel: it reads the cell from
    ``solutions/`` and calls ``fn`` in its own process on the exported answers.

    ``inputs(rng) -> dict``: inputs of this hidden check only, added to the question's. The
    grader draws them with its own seed; they are never in the released notebook, so the
    question's probe must read them with ``inputs.get(...)``.
    """
    question = get_question(question_id)
    description = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
    hidden = Check(f"{question_id}.{fn.__name__}", description, 0, fn, hidden=True, inputs=inputs)
    drawn = make_inputs(question, public_seed(question_id, salt=1), [hidden])
    answers = roundtrip(probe_payload(question, namespace, drawn))
    (result,) = run_checks(replace(question, checks=()), answers, drawn, [hidden])
    print(format_results(f"hidden check of {question_id}", [result]))
    if not result.passed:
        raise CheckFailed(f"hidden check {hidden.id} failed: {result.message}")


kernel_history()  # record from the import on (the set-up cell imports this module)
