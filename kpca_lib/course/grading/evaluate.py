"""From answers to check results: the same pipeline in the notebook and in the grader.

``probe_payload`` runs where the student's objects live (the kernel) and yields plain
data; ``decode_payload`` and ``run_checks`` run where the verdict is trusted. In the
notebook (public feedback) both happen in the student's kernel; in the grader only
``probe_payload`` does, and the grader decodes and checks in its own process.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .plain import AnswerError, CheckError, decode, dumps, encode, error_value, loads
from .questions import Check, Question

__all__ = [
    "CheckResult",
    "Answers",
    "public_seed",
    "make_inputs",
    "probe_payload",
    "decode_payload",
    "roundtrip",
    "run_checks",
]


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check (``message`` is only shown to students for public checks)."""

    id: str
    question: str
    description: str
    points: float
    passed: bool
    message: str
    hidden: bool

    @property
    def score(self) -> float:
        return self.points if self.passed else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Answers(dict):
    """Decoded answers; a field the export does not have reads as 'no answer recorded'."""

    def __missing__(self, key: str) -> AnswerError:
        return AnswerError("no answer was recorded for this question")


def public_seed(question_id: str, salt: int = 0) -> int:
    """The fixed seed of the public checks in the notebook (grading uses its own seeds)."""
    return zlib.crc32(question_id.encode()) + salt


def make_inputs(question: Question, seed: int) -> dict[str, Any]:
    """The question's inputs for ``seed``, normalised through plain data (as the kernel sees them)."""
    raw = question.make_inputs(np.random.default_rng(seed))
    return {k: decode(encode(v)) for k, v in raw.items()}


def probe_payload(question: Question, namespace: Mapping[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """Evaluate the student's answers on ``inputs`` as plain data (never raises)."""
    try:
        payload = question.probe(namespace, inputs)
    except MemoryError:
        raise
    except Exception as exc:  # a bug in a probe must not lose the other questions
        return {"__probe__": error_value(f"the answers could not be probed: {type(exc).__name__}: {exc}")}
    return payload


def decode_payload(payload: Any) -> Answers:
    """Validate an export's payload; anything malformed becomes :class:`AnswerError` values."""
    answers = Answers()
    if not isinstance(payload, dict):
        return answers
    for key, value in list(payload.items())[:200]:
        answers[str(key)] = decode(value)
    probe_error = answers.get("__probe__")
    if isinstance(probe_error, AnswerError):
        return _AllError(probe_error)
    return answers


class _AllError(Answers):
    def __init__(self, error: AnswerError) -> None:
        super().__init__()
        self.error = error

    def __missing__(self, key: str) -> AnswerError:
        return self.error


def roundtrip(payload: dict[str, Any]) -> Answers:
    """``decode_payload(loads(dumps(payload)))``: exactly what the grader would read."""
    try:
        text = dumps(payload)
    except (TypeError, ValueError) as exc:
        return _AllError(AnswerError(f"the answers are not plain data: {exc}"))
    return decode_payload(loads(text))


def run_checks(
    question: Question,
    answers: Answers,
    inputs: dict[str, Any],
    hidden: Iterable[Check] = (),
) -> list[CheckResult]:
    """Run the question's public checks, then ``hidden``; a check never raises."""
    results = []
    for check in (*question.checks, *hidden):
        try:
            message = str(check.fn(answers, inputs))
            passed = True
        except (CheckError, AssertionError) as exc:
            message, passed = str(exc) or "the check failed", False
        except Exception as exc:  # malformed data that slipped past the helpers
            message, passed = f"the answer could not be checked ({type(exc).__name__}: {exc})", False
        results.append(
            CheckResult(check.id, question.id, check.description, float(check.points), passed,
                        message, check.hidden)
        )
    return results
