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

from .plain import AnswerError, CheckError, Slip, decode, dumps, encode, error_value, loads, noting
from .questions import Check, Question, forbidden_calls

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


def make_inputs(question: Question, seed: int, hidden: Iterable[Check] = ()) -> dict[str, Any]:
    """The question's inputs for ``seed``, with those of the ``hidden`` checks that draw their
    own (drawn after the question's, so the public inputs do not depend on them), normalised
    through plain data (as the kernel sees them)."""
    rng = np.random.default_rng(seed)
    raw = dict(question.make_inputs(rng))
    for check in hidden:
        if check.inputs is not None:
            extra = check.inputs(rng)
            clash = sorted(set(extra) & set(raw))
            if clash:
                raise ValueError(f"{check.id}: its inputs {clash} are already the question's; "
                                 "give hidden inputs names of their own.")
            raw.update(extra)
    return {k: decode(encode(v), traits=False) for k, v in raw.items()}


def probe_payload(question: Question, namespace: Mapping[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """Evaluate the student's answers on ``inputs`` as plain data (never raises)."""
    try:
        with forbidden_calls(question.forbid) as hits:
            payload = question.probe(namespace, inputs)
        if hits and isinstance(payload, dict):
            payload = {**payload, "__forbidden__": list(hits)}
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
    """Run the question's public checks, then ``hidden``, and charge each cause once.

    This is the one place where a question's checks are charged (docs/grading.md, "How
    points are charged"):

    * a **slip** (:class:`~kpca_lib.course.grading.judge.plain.Slip` with ``charge`` ``"once"``,
      ``"form"`` or ``"explain"``: a recognised mistake, an answer of the wrong form that a
      helper repaired, a low-precision array...) costs the first check that meets it; a later
      check of the question that meets the same slip passes and says where it was counted;
    * an answer that **could not be evaluated** (``charge="each"``: a missing name, an
      exception, a wrong type) fails every check that needs it, nothing being verified, but
      its message is given in full only once; later checks refer to it;
    * any other failure costs its check.

    A check never raises.
    """
    results = []
    charged: list[tuple[str, Slip]] = []
    for check in (*question.checks, *hidden):
        cause: Slip | None = None
        with noting() as notes:
            try:
                message = str(check.fn(answers, inputs))
                passed = True
            except CheckError as exc:
                message, passed, cause = str(exc) or "the check failed", False, exc.cause
            except AssertionError as exc:
                message, passed = str(exc) or "the check failed", False
            except Exception as exc:  # malformed data that slipped past the helpers
                message, passed = f"the answer could not be checked ({type(exc).__name__}: {exc})", False
        passed, message = _charge(check, passed, message, cause, list(notes), charged)
        results.append(
            CheckResult(check.id, question.id, check.description, float(check.points), passed,
                        message, check.hidden)
        )
    return results


def _where(check: Check) -> str:
    return f"the {'hidden ' if check.hidden else ''}check “{check.description}”"


def _earlier(slip: Slip, charged: list[tuple[str, Slip]]) -> str | None:
    return next((where for where, prior in charged if slip.same_as(prior)), None)


def _charge(check: Check, passed: bool, message: str, cause: Slip | None, notes: list[Slip],
            charged: list[tuple[str, Slip]]) -> tuple[bool, str]:
    """``(passed, message)`` of one check once its causes are charged (see :func:`run_checks`)."""
    forms = [n for n in notes if n.charge == "form"]
    explains = [n for n in notes if n.charge == "explain"]
    if not passed and explains and (cause is None or cause.charge != "each"):
        cause, message = explains[0], explains[0].message
    where = _where(check)
    new_forms = [f for f in forms if _earlier(f, charged) is None]
    if passed:
        if not forms:
            return True, message
        if new_forms:
            charged.extend((where, f) for f in new_forms)
            return False, " ".join(f.message for f in new_forms) + " With that put right, the check passes."
        first = forms[0]
        return True, f"{message} (the same slip as in {_earlier(first, charged)}, counted once there)"
    for f in new_forms:
        charged.append((where, f))
    prefix = "".join(f.message + " " for f in new_forms)
    if cause is None or not cause.recognised:
        return False, prefix + message
    prior = _earlier(cause, charged)
    if prior is None:
        charged.append((where, cause))
        return False, prefix + message
    if cause.charge == "each":
        return False, f"{cause.message} (as reported in {prior}: nothing here could be checked)."
    if new_forms:
        return False, prefix.strip()
    return True, f"the same slip as in {prior}, counted once there: {cause.message}"
