"""Answers as plain data: the only thing that crosses from a student's kernel to the grader.

:func:`encode` runs *inside* the student's kernel and turns probed answers into JSON
values (numbers, booleans, strings, and arrays as ``{"__array__": {"shape", "data"}}``).
It is a convenience, not a defence: student code can replace it. The defence is
:func:`decode`, which runs in the grader and accepts only well-formed plain data
(bounded size and depth, real numbers, regular arrays). Objects whose ``__eq__`` always
succeeds, numpy subclasses, monkeypatched numpy: none of them can survive the trip,
because the grader only ever sees JSON numbers and compares them with its own code.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "AnswerError",
    "CheckError",
    "encode",
    "error_value",
    "plain_list",
    "decode",
    "dumps",
    "loads",
    "as_array",
    "as_int",
    "as_float",
    "as_bool",
    "as_map",
    "as_list",
    "MAX_ELEMENTS",
]

MAX_ELEMENTS = 200_000  # per array
MAX_DEPTH = 6
MAX_STRING = 2_000
MAX_BYTES = 20_000_000  # one export file


class CheckError(Exception):
    """A check failed; the message says which property, by how much, and a hint."""


@dataclass(frozen=True)
class AnswerError:
    """An answer that could not be obtained or is not plain data (with the reason)."""

    message: str


# --------------------------------------------------------------------------- kernel side
def error_value(message: str) -> dict[str, str]:
    """The plain-data form of "this answer could not be computed: <message>"."""
    return {"__error__": str(message)[:MAX_STRING]}


def _encode_array(x: Any) -> dict[str, Any]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.size > MAX_ELEMENTS:
        return error_value(f"an array with {arr.size} numbers is too large (at most {MAX_ELEMENTS})")
    flat = [float(v) if math.isfinite(v) else None for v in arr.ravel().tolist()]
    return {"__array__": {"shape": [int(s) for s in arr.shape], "data": flat}}


def encode(x: Any, depth: int = 0) -> Any:
    """Turn an answer into JSON-able plain data (runs in the student's kernel).

    Errors become :func:`error_value` records, so one bad answer never stops the export.
    """
    if depth > MAX_DEPTH:
        return error_value("the answer is nested too deeply")
    try:
        if x is None or isinstance(x, str):
            return x if x is None else x[:MAX_STRING]
        if isinstance(x, (bool, np.bool_)):
            return bool(x)
        if isinstance(x, numbers.Integral):
            return int(x)
        if isinstance(x, numbers.Real):
            v = float(x)
            return v if math.isfinite(v) else {"__nonfinite__": repr(v)}
        if isinstance(x, dict):
            return {"__map__": {str(k): encode(v, depth + 1) for k, v in x.items()}}
        return _encode_array(x)
    except Exception as exc:  # any object that is not numbers
        return error_value(
            f"expected numbers, got an object of type {type(x).__name__} "
            f"({type(exc).__name__}: {exc})"
        )


def dumps(payload: Any) -> str:
    """Strict JSON text (no NaN or infinity literals)."""
    return json.dumps(payload, allow_nan=False, sort_keys=True, separators=(",", ":"))


def plain_list(items: list[Any]) -> dict[str, list[Any]]:
    """A list of already-encoded answers (e.g. one per input case)."""
    return {"__list__": list(items)[:1000]}


# --------------------------------------------------------------------------- grader side
def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def loads(text: str | bytes) -> Any:
    """Parse strict JSON with a size limit (raises ``ValueError``)."""
    if len(text) > MAX_BYTES:
        raise ValueError(f"export of {len(text)} bytes is larger than {MAX_BYTES}")
    return json.loads(text, parse_constant=_reject_constant)


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def decode(obj: Any, depth: int = 0) -> Any:
    """Validate plain data from an export and turn it into Python/numpy values.

    Returns plain ``int``, ``float``, ``bool``, ``str``, ``None``, ``dict`` of those,
    float64 ``ndarray`` (non-finite entries as NaN), or :class:`AnswerError`.
    Anything else (wrong types, ragged or oversized arrays) becomes an ``AnswerError``.
    """
    if depth > MAX_DEPTH:
        return AnswerError("the answer is nested too deeply")
    t = type(obj)
    if obj is None or t in (bool, int, float):
        return obj
    if t is str:
        return obj[:MAX_STRING]
    if t is not dict or len(obj) != 1:
        return AnswerError("the answer is not plain data (numbers, arrays, booleans)")
    (tag, value), = obj.items()
    if tag == "__error__":
        return AnswerError(str(value)[:MAX_STRING])
    if tag == "__nonfinite__":
        return float("nan")
    if tag == "__list__" and type(value) is list:
        return [decode(v, depth + 1) for v in value[:1000]]
    if tag == "__map__" and type(value) is dict:
        return {str(k): decode(v, depth + 1) for k, v in list(value.items())[:1000]}
    if tag == "__array__" and type(value) is dict:
        shape, data = value.get("shape"), value.get("data")
        if (
            type(shape) is not list
            or len(shape) > 8
            or not all(type(s) is int and 0 <= s <= MAX_ELEMENTS for s in shape)
            or type(data) is not list
            or len(data) != math.prod(shape)
            or len(data) > MAX_ELEMENTS
        ):
            return AnswerError("the answer is not a regular array of numbers")
        if not all(v is None or _is_number(v) for v in data):
            return AnswerError("the array contains something other than numbers")
        try:
            arr = np.array([np.nan if v is None else float(v) for v in data], dtype=np.float64)
        except OverflowError:
            return AnswerError("the array contains a number too large for a float")
        return arr.reshape(shape)
    return AnswerError("the answer is not plain data (numbers, arrays, booleans)")


# --------------------------------------------------------------------------- check helpers
def _value(value: Any, name: str) -> Any:
    if isinstance(value, AnswerError):
        raise CheckError(f"{name}: {value.message}")
    return value


def as_array(
    value: Any,
    name: str,
    *,
    ndim: int | None = None,
    shape: tuple[int | None, ...] | None = None,
    finite: bool = True,
) -> np.ndarray:
    """A decoded answer as a float array with the expected shape, or a :class:`CheckError`."""
    value = _value(value, name)
    if isinstance(value, (bool, str, dict)) or value is None:
        raise CheckError(f"{name} should be an array of numbers; got {type(value).__name__}.")
    arr = np.asarray(value, dtype=np.float64)
    if shape is not None:
        ndim = len(shape)
    if ndim is not None and arr.ndim != ndim:
        raise CheckError(f"{name} should be a {ndim}-D array; got {arr.ndim}-D with shape {arr.shape}.")
    if shape is not None:
        want = tuple("any" if s is None else s for s in shape)
        if any(s is not None and s != a for s, a in zip(shape, arr.shape, strict=True)):
            raise CheckError(f"{name} should have shape {want}; got {arr.shape}.".replace("'", ""))
    if finite and not np.all(np.isfinite(arr)):
        raise CheckError(f"{name} contains NaN or infinity.")
    return arr


def as_int(value: Any, name: str) -> int:
    """A decoded answer as an exact integer (``3.0`` is accepted, ``3.5`` and ``True`` are not)."""
    value = _value(value, name)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.ndarray)):
        raise CheckError(f"{name} should be an integer; got {type(value).__name__}.")
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise CheckError(f"{name} should be one integer; got an array of shape {value.shape}.")
        value = float(value)
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise CheckError(f"{name} should be an integer; got {value!r}.")
        if abs(value) > 2**53:
            raise CheckError(
                f"{name} is a float ({value:.6g}) too large to be exact; use integer "
                "arithmetic (e.g. math.comb or //) for exact counts."
            )
        value = int(value)
    return value


def as_float(value: Any, name: str) -> float:
    """A decoded answer as a finite float."""
    value = _value(value, name)
    if isinstance(value, np.ndarray) and value.shape == ():
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CheckError(f"{name} should be a number; got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise CheckError(f"{name} should be a finite number; got {value!r}.")
    return value


def as_bool(value: Any, name: str) -> bool:
    """A decoded answer as ``True`` or ``False`` (numbers are not accepted)."""
    value = _value(value, name)
    if not isinstance(value, bool):
        raise CheckError(f"{name} should be True or False; got {type(value).__name__}.")
    return value


def as_list(value: Any, name: str) -> list[Any]:
    """A decoded list of answers (one per input case)."""
    value = _value(value, name)
    if not isinstance(value, list):
        raise CheckError(f"{name} could not be evaluated.")
    return value


def as_map(value: Any, name: str) -> dict[str, Any]:
    """A decoded answer as a dict (from a Python ``dict``)."""
    value = _value(value, name)
    if not isinstance(value, dict):
        raise CheckError(f"{name} should be a dict; got {type(value).__name__}.")
    return value
