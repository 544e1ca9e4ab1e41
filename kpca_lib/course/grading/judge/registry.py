"""Questions defined where they are answered: in a *question cell* of the solution notebook.

A question cell (``metadata["kpca"]["role"] == "question"``) of ``solutions/NN_*.ipynb``
declares one question: its id, title and total points, the names its answer cells define,
how its inputs are drawn, how the answers are probed and its public checks::

    from kpca_lib.course.checks import call, define_question

    q = define_question("q9_trace", title="The trace of K", names=("kernel_trace",), points=2)

    @q.inputs
    def _(rng):                      # the grader draws with its own secret seed
        A = rng.normal(size=(6, 2))
        return {"K": A @ A.T}

    @q.probe
    def _(ns, inputs):               # runs where the student's objects live: plain data out
        return {"t": call(ns, "kernel_trace", inputs["K"])}

    @q.check("value", "kernel_trace(K) is the sum of the eigenvalues of K", points=1)
    def _(answers, inputs):          # runs where the verdict is trusted
        ...                          # return a message, or raise CheckError(hint)

The cell is released read-only with the exercise (the probe and the public checks are
public), so the student's kernel defines the question when it runs the cell, and
:func:`kpca_lib.course.checks.check` finds it here. The grader executes the same cell,
read from ``solutions/`` (trusted), in its own process to draw inputs and run the
checks, and puts it into the rebuilt notebook before the answers so the probe exists in
the sandboxed kernel. Hidden checks stay in ``hidden-check`` cells of ``solutions/``;
a question's ``points`` are its public checks' plus its hidden checks' points.

Re-running a question cell replaces the question (its checks are declared anew).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .questions import Check, Probe, Question

__all__ = ["QuestionDefinition", "define_question", "get_question", "collecting", "defined"]

_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_CHECK_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")

_REGISTRY: dict[str, QuestionDefinition] = {}
_COLLECTORS: list[dict[str, QuestionDefinition]] = []


class QuestionDefinition:
    """A question being declared by a question cell (see the module docstring)."""

    def __init__(self, qid: str, title: str, names: tuple[str, ...], points: float,
                 forbid: tuple[str, ...] = ()) -> None:
        if not isinstance(qid, str) or not _ID.match(qid):
            raise ValueError(f"question id {qid!r}: use letters, digits and _ (e.g. 'q9_trace').")
        if not title or not isinstance(title, str):
            raise ValueError(f"question {qid}: give it a title.")
        if isinstance(names, str):
            names = (names,)
        if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
            raise ValueError(f"question {qid}: names must be the Python names its answer cells define.")
        if not (isinstance(points, (int, float)) and points > 0):
            raise ValueError(f"question {qid}: points must be a positive number (public + hidden checks).")
        if isinstance(forbid, str):
            forbid = (forbid,)
        if not all(isinstance(f, str) and "." in f and all(p.isidentifier() for p in f.split("."))
                   for f in forbid):
            raise ValueError(f"question {qid}: forbid takes dotted names such as "
                             "'kpca_lib.centering.center_kernel'.")
        self.id, self.title, self.names, self.points = qid, title, tuple(names), float(points)
        self.forbid = tuple(forbid)
        self._inputs: Callable[[np.random.Generator], dict[str, Any]] = lambda rng: {}
        self._probe: Probe | None = None
        self._checks: list[Check] = []

    def inputs(self, fn: Callable[[np.random.Generator], dict[str, Any]]) -> Callable[..., Any]:
        """Decorator: ``fn(rng) -> dict`` draws the inputs the answers are evaluated on."""
        self._inputs = fn
        return fn

    def probe(self, fn: Probe) -> Probe:
        """Decorator: ``fn(namespace, inputs) -> dict`` of plain data about the answers."""
        self._probe = fn
        return fn

    def check(self, name: str, description: str, points: float = 1) -> Callable[[Callable[..., str]], Callable[..., str]]:
        """Decorator: a public check ``fn(answers, inputs) -> str`` worth ``points``."""
        if not isinstance(name, str) or not _CHECK_ID.match(name):
            raise ValueError(f"question {self.id}: check name {name!r} must be an identifier.")
        if any(c.id == f"{self.id}.{name}" for c in self._checks):
            raise ValueError(f"question {self.id}: two checks are named {name!r}.")
        if not (isinstance(points, (int, float)) and points >= 0):
            raise ValueError(f"question {self.id}, check {name}: points must be ≥ 0.")

        def register(fn: Callable[..., str]) -> Callable[..., str]:
            self._checks.append(Check(f"{self.id}.{name}", description, float(points), fn))
            return fn

        return register

    def build(self) -> Question:
        """The :class:`~kpca_lib.course.grading.judge.questions.Question` declared so far."""
        if self._probe is None:
            raise ValueError(f"question {self.id} has no probe: decorate one function with @q.probe.")
        return Question(self.id, "", self.title, self.names, self._probe, tuple(self._checks),
                        self._inputs, total_points=self.points, forbid=self.forbid)


def define_question(qid: str, *, title: str, names: tuple[str, ...] | str, points: float,
                    forbid: tuple[str, ...] | str = ()) -> QuestionDefinition:
    """Declare a question (in a question cell); see the module docstring.

    ``forbid``: dotted names of functions or classes the answers may not call (the library
    function the question asks the student to write, scikit-learn's estimator). A probed
    value computed through one of them is an error naming it, in the notebook and in the
    grader alike; the grader also refuses the question's checks when its cells mention one
    that the probe did not see called (see :mod:`kpca_lib.course.grading.judge.scoring`)."""
    definition = QuestionDefinition(qid, title, names, points, forbid)
    target = _COLLECTORS[-1] if _COLLECTORS else _REGISTRY
    if _COLLECTORS and qid in target:
        raise ValueError(f"question {qid} is defined twice.")
    target[qid] = definition
    return definition


def get_question(qid: str) -> Question:
    """The question ``qid`` as defined by the question cell run in this process."""
    definition = _REGISTRY.get(qid)
    if definition is None:
        raise LookupError(
            f"question {qid!r} is not defined here yet: run its question cell first (the read-only "
            "cell at the top of the question), or use Run All."
        )
    return definition.build()


@contextmanager
def collecting() -> Iterator[dict[str, QuestionDefinition]]:
    """Collect the questions defined inside the block (instead of registering them globally):
    how the grader reads ``solutions/`` without touching this process's registry."""
    found: dict[str, QuestionDefinition] = {}
    _COLLECTORS.append(found)
    try:
        yield found
    finally:
        _COLLECTORS.pop()


def defined() -> list[str]:
    """Ids of the questions defined in this process (by question cells run here)."""
    return sorted(_REGISTRY)
