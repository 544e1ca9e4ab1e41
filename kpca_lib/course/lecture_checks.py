"""Self-checks for the numbered exercises at the end of each lecture.

Each lecture ends with a markdown cell ``## Exercises`` (3–5 numbered exercises: a
derivation, a code change, a prediction) and, for every exercise whose answer code can
check, one code cell marked ``metadata["kpca"]["exercise"] = N``::

    from kpca_lib.course.lecture_checks import self_check

    def double_centre(D2):
        raise NotImplementedError  # your code here

    def check_2(f):
        ...  # a visible property check: asserts with a hint, never the solution

    self_check(2, double_centre, check_2)

The stored lecture holds the placeholder, so the cell prints *not answered yet*. A wrong
answer raises :class:`ExerciseNotYetRight` (an ``AssertionError``) whose message is the
check's hint; a right one prints *correct*. The worked solutions (derivations and code)
live in the instructor's ``solutions/lectures/``, which the student edition never holds;
``tests/test_lecture_exercises.py`` runs every lecture with them, with
``KPCA_REQUIRE_ANSWERS=1`` so that an unanswered exercise fails, and checks that each
solution file's wrong answers are refused.

An answer counts as *not answered yet* when it is ``...`` (the placeholder of a value) or
when the check raises :class:`NotImplementedError` (the placeholder of a function body).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["REQUIRE_ENV", "ExerciseNotYetRight", "Solution", "parse_solutions", "self_check"]

#: With this environment variable set to 1, an unanswered exercise raises (solution runs).
REQUIRE_ENV = "KPCA_REQUIRE_ANSWERS"


class ExerciseNotYetRight(AssertionError):
    """An exercise's answer failed its self-check (or is missing where answers are required)."""


def self_check(number: int, answer: Any, check: Callable[[Any], object]) -> None:
    """Check the answer to exercise ``number`` with ``check`` and say what came out.

    Parameters
    ----------
    number : int
        The exercise's number in the lecture's ``## Exercises`` list.
    answer : object
        The student's answer: a value, or a function the check calls. ``...`` means not
        answered yet.
    check : callable
        ``check(answer)`` raises ``AssertionError`` with a hint when the answer is wrong
        (and :class:`NotImplementedError` propagates from an unfilled function body).

    Nothing is returned (the cell shows only the printed line): a right answer prints
    *correct*, a missing one *not answered yet*.

    Raises
    ------
    ExerciseNotYetRight
        When the check fails, or (with ``KPCA_REQUIRE_ANSWERS=1``) when there is no answer.
    """
    label = f"Exercise {number}"
    missing = answer is Ellipsis
    if not missing:
        try:
            check(answer)
        except NotImplementedError:
            missing = True
        except AssertionError as error:
            hint = str(error).strip() or "the check failed (no hint given)"
            raise ExerciseNotYetRight(f"{label}: not yet right: {hint}") from None
    if missing:
        if os.environ.get(REQUIRE_ENV) == "1":
            raise ExerciseNotYetRight(f"{label}: not answered ({REQUIRE_ENV}=1 requires an answer)")
        print(f"{label}: not answered yet. Replace the placeholder (... or "
              "raise NotImplementedError) with your answer and run this cell again.")
        return
    print(f"{label}: correct ✓")


# --------------------------------------------------------------------- worked solutions
_SECTION = re.compile(r"^## Exercise (\d+)\s*$", re.M)
_BLOCK = re.compile(r"^```python (answer|wrong)\s*\n(.*?)^```\s*$", re.M | re.S)


@dataclass
class Solution:
    """One ``## Exercise N`` section of a worked-solutions file: its text and code blocks.

    ``answer`` holds the complete solved source of the exercise's cell (one block), ``wrong``
    the complete sources of typical slips that the cell's check must refuse.
    """

    text: str
    answer: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)


def parse_solutions(text: str) -> dict[int, Solution]:
    """The ``## Exercise N`` sections of a worked-solutions file (markdown), by number.

    Code blocks are fenced as ```` ```python answer ```` and ```` ```python wrong ````.

    Raises
    ------
    ValueError
        When two sections have the same number.
    """
    parts = _SECTION.split(text)
    found: dict[int, Solution] = {}
    for number, body in zip(parts[1::2], parts[2::2], strict=True):
        n = int(number)
        if n in found:
            raise ValueError(f"two sections '## Exercise {n}'")
        section = Solution(body)
        for kind, code in _BLOCK.findall(body):
            getattr(section, kind).append(code)
        found[n] = section
    return found
