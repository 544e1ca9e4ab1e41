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
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "AnswerError",
    "CheckError",
    "Slip",
    "AnswerArray",
    "AnswerSequence",
    "describe",
    "note",
    "noting",
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
    "orient",
    "unanswerable",
    "MAX_ELEMENTS",
]

MAX_ELEMENTS = 200_000  # per array
MAX_DEPTH = 6
MAX_STRING = 2_000
MAX_BYTES = 20_000_000  # one export file


@dataclass(frozen=True)
class Slip:
    """Why an answer is wrong: ``code`` names the cause (``""``: not recognised).

    ``charge`` says how the question's checks are charged for it (see
    :func:`kpca_lib.course.grading.judge.evaluate.run_checks`, the one place that charges):

    * ``"once"``: a slip (a recognised mistake, or an answer of the wrong *form* such as a
      transposed array, strings for booleans or keys spelled differently). The first check
      that meets it fails; a later check of the same question that meets it again passes and
      says where it was counted.
    * ``"each"``: the answer could not be evaluated (a missing name, an exception, a value of
      the wrong type): every check that needs it fails, since nothing was verified, and the
      message is reported in full once.
    * ``"form"``: noted by a helper (:func:`note`) that *repaired* the form of an answer and
      checked the repaired answer: charged once, even when the check then passes.
    * ``"explain"``: noted by a helper when a property of the answer (its precision, an
      argument changed in place) explains any failure of the check better than the
      comparison can; it becomes the failure's cause and message, charged once.
    """

    code: str
    message: str
    values: tuple[float, ...] = ()
    charge: str = "once"

    @property
    def recognised(self) -> bool:
        return bool(self.code)

    def same_as(self, other: Slip | None) -> bool:
        """The same recognised slip as ``other``, or a part of it: every relation of this code
        (``a+b`` holds two; ``a|b``, one that cannot be told from the other on these inputs) is
        one of ``other``'s, with the same factors where they are given."""
        if other is None or not self.code or not other.code:
            return False
        theirs = set(other.code.split("+"))
        if not all(set(part.split("|")) & theirs for part in self.code.split("+")):
            return False
        m = min(len(self.values), len(other.values))
        return all(
            math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
            for a, b in zip(self.values[:m], other.values[:m], strict=True)
        )


class CheckError(Exception):
    """A check failed; the message says which property, by how much, and a hint.

    ``cause``: the :class:`Slip` behind the failure, when known, so that the question's
    checks charge it once (:func:`kpca_lib.course.grading.judge.evaluate.run_checks`).
    """

    def __init__(self, message: str = "", *, cause: Slip | None = None) -> None:
        super().__init__(message)
        self.cause = cause


_NOTES: ContextVar[list[Slip] | None] = ContextVar("kpca_check_notes", default=None)


def note(slip: Slip) -> None:
    """Record a ``"form"`` or ``"explain"`` slip for the check being run (no-op outside one)."""
    notes = _NOTES.get()
    if notes is not None and not any(slip.code == n.code for n in notes):
        notes.append(slip)


@contextmanager
def noting() -> Iterator[list[Slip]]:
    """Collect what helpers :func:`note` while one check runs."""
    notes: list[Slip] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


class AnswerArray(np.ndarray):
    """A decoded float64 array that remembers what the student's array was: its ``dtype``
    (``"float32"``, ``"int64"``...), the arguments the call ``changed`` in place, and the
    Python ``container`` it was given as (``"list"``, ``"tuple"``; ``""``: an array)."""

    kpca_dtype: str = "float64"
    kpca_changed: tuple[int, ...] = ()
    kpca_container: str = ""


@dataclass(frozen=True)
class AnswerSequence:
    """A list or tuple (``kind``) whose items do not make one regular array of numbers (items of
    different lengths, strings, dicts...): the decoded ``items``, so that a message can say what
    was given."""

    kind: str
    items: tuple[Any, ...]
    #: How many items it had (only the first few are exported).
    length: int = 0


@dataclass(frozen=True)
class AnswerError:
    """An answer that could not be obtained or is not plain data (with the reason)."""

    message: str


# --------------------------------------------------------------------------- kernel side
def error_value(message: str) -> dict[str, str]:
    """The plain-data form of "this answer could not be computed: <message>"."""
    return {"__error__": str(message)[:MAX_STRING]}


_CONTAINERS = {list: "list", tuple: "tuple"}


def _encode_array(x: Any, changed: tuple[int, ...] = ()) -> dict[str, Any]:
    kind = getattr(x, "dtype", None)
    container = next((name for t, name in _CONTAINERS.items() if isinstance(x, t)), "")
    if container and kind is None:
        kind = np.asarray(x).dtype if _all_bools(x) else None  # verdicts given as a list
    arr = np.asarray(x, dtype=np.float64)
    if arr.size > MAX_ELEMENTS:
        return error_value(f"an array with {arr.size} numbers is too large (at most {MAX_ELEMENTS})")
    flat = [float(v) if math.isfinite(v) else None for v in arr.ravel().tolist()]
    out: dict[str, Any] = {"shape": [int(s) for s in arr.shape], "data": flat}
    if isinstance(kind, np.dtype) and kind != np.float64:
        out["dtype"] = str(kind)[:20]
    if changed:
        out["changed"] = [int(i) for i in changed][:20]
    if container:
        out["container"] = container
    return {"__array__": out}


def _all_bools(x: Any) -> bool:
    return bool(x) and all(isinstance(v, (bool, np.bool_)) for v in x)


def _encode_sequence(x: list[Any] | tuple[Any, ...], depth: int) -> dict[str, Any]:
    """A list or tuple that is not a regular array of numbers: its length and its first items (what
    a message needs to say what was given; an item too large to show is named, not exported)."""
    items = []
    for v in list(x)[:20]:
        item = encode(v, depth + 1)
        if len(dumps(item)) > 20_000:
            item = error_value(f"an item too large to show ({type(v).__name__})")
        items.append(item)
    return {"__seq__": {"kind": "tuple" if isinstance(x, tuple) else "list", "length": len(x), "items": items}}


def encode(x: Any, depth: int = 0, changed: tuple[int, ...] = ()) -> Any:
    """Turn an answer into JSON-able plain data (runs in the student's kernel).

    Errors become :func:`error_value` records, so one bad answer never stops the export.
    """
    if depth > MAX_DEPTH:
        return error_value("the answer is nested too deeply")
    try:
        if x is None or isinstance(x, str):
            return x if x is None else x[:MAX_STRING]
        if x is Ellipsis:
            return error_value("not answered yet (`...` is still there)")
        if isinstance(x, (bool, np.bool_)):
            return bool(x)
        if isinstance(x, numbers.Integral):
            return int(x)
        if isinstance(x, numbers.Real):
            v = float(x)
            return v if math.isfinite(v) else {"__nonfinite__": repr(v)}
        if isinstance(x, dict):
            return {"__map__": {str(k): encode(v, depth + 1) for k, v in x.items()}}
        if isinstance(x, (list, tuple)):
            try:
                return _encode_array(x, changed)
            except (TypeError, ValueError):  # ragged, or not numbers: say what it holds
                return _encode_sequence(x, depth)
        return _encode_array(x, changed)
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


def decode(obj: Any, depth: int = 0, *, traits: bool = True) -> Any:
    """Validate plain data from an export and turn it into Python/numpy values.

    Returns plain ``int``, ``float``, ``bool``, ``str``, ``None``, ``dict`` of those,
    float64 ``ndarray`` (non-finite entries as NaN), :class:`AnswerSequence` (a list or tuple
    that is no regular array) or :class:`AnswerError`. An array that was not float64 in the
    kernel, that the call changed in place, or that was a list or tuple, is an
    :class:`AnswerArray` saying so (``traits=False``: plain arrays, for inputs).
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
        return [decode(v, depth + 1, traits=traits) for v in value[:1000]]
    if tag == "__map__" and type(value) is dict:
        return {str(k): decode(v, depth + 1, traits=traits) for k, v in list(value.items())[:1000]}
    if tag == "__seq__" and type(value) is dict and value.get("kind") in ("list", "tuple") \
            and type(value.get("items")) is list:
        items = tuple(decode(v, depth + 1, traits=traits) for v in value["items"][:20])
        length = value.get("length")
        valid = type(length) is int and len(items) <= length <= 10**9
        return AnswerSequence(value["kind"], items, length if valid else len(items))
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
        kind, changed, container = value.get("dtype"), value.get("changed"), value.get("container")
        if not traits or (kind is None and not changed and container is None):
            return arr.reshape(shape)
        out = arr.reshape(shape).view(AnswerArray)
        if type(kind) is str and kind.isidentifier():
            out.kpca_dtype = kind[:20]
        if type(changed) is list and all(type(i) is int for i in changed):
            out.kpca_changed = tuple(changed[:20])
        if container in ("list", "tuple"):
            out.kpca_container = container
        return out
    return AnswerError("the answer is not plain data (numbers, arrays, booleans)")


# --------------------------------------------------------------------------- check helpers
def _value(value: Any, name: str) -> Any:
    if isinstance(value, AnswerError):
        said = value.message.startswith(name + " ")  # "dim_3 is not answered yet ...": named already
        message = value.message if said else f"{name}: {value.message}"
        raise CheckError(message, cause=unanswerable("unanswered", value.message))
    return value


def unanswerable(kind: str, message: str) -> Slip:
    """The cause of an answer that cannot be evaluated (``charge="each"``: every check that needs
    it fails, the message is given once), with one code per distinct ``kind`` and message."""
    return Slip(f"{kind}:{zlib.crc32(message.encode()):08x}", message, charge="each")


def _wrong_type(name: str, message: str) -> CheckError:
    return CheckError(f"{name} {message}", cause=unanswerable("type", f"{name} {message}"))


_LOW_PRECISION = {"float32": 7, "float16": 3, "bfloat16": 2}


def _explain_dtype(value: Any, name: str) -> None:
    """Note a low-precision or integer array: it explains a failed comparison better than the
    comparison can (the digits are lost in the student's array, not in the formula)."""
    kind = getattr(value, "kpca_dtype", "float64")
    if kind in _LOW_PRECISION:
        note(Slip("form-precision", (
            f"{name} is a {kind} array, which keeps about {_LOW_PRECISION[kind]} significant digits, so "
            "it cannot match to the tolerance of the check: compute in float64 (NumPy's default; "
            f"drop dtype={kind} or .astype({kind}))."), charge="explain"))
    elif kind.startswith(("int", "uint")):
        note(Slip("form-integer", (
            f"{name} is an integer array ({kind}): values written into it are truncated to whole "
            "numbers. Build it with floats (e.g. np.zeros(shape) or dtype=float, not an integer "
            "input's dtype)."), charge="explain"))
    changed = getattr(value, "kpca_changed", ())
    if changed:
        which = ", ".join(f"argument {i + 1}" for i in changed)
        note(Slip("form-in-place", (
            f"the function behind {name} changed its {which} in place (e.g. K -= ... or K[...] = ...), "
            "so each later line saw an already-changed matrix and so does the caller: work on a copy "
            "(K = K - ..., or K = K.copy() first)."), charge="explain"))


def as_array(
    value: Any,
    name: str,
    *,
    ndim: int | None = None,
    shape: tuple[int | None, ...] | None = None,
    finite: bool = True,
) -> np.ndarray:
    """A decoded answer as a float array with the expected shape, or a :class:`CheckError`.

    A 2-D answer of the transposed shape is turned back and noted as a ``"form"`` slip (charged
    once per question); a low-precision, integer or changed-in-place array is noted as the
    explanation of a failure."""
    value = _value(value, name)
    if isinstance(value, (bool, str, dict)) or value is None:
        raise _wrong_type(name, f"should be an array of numbers; got {describe(value)}.")
    if isinstance(value, list):
        raise _wrong_type(name, "should be an array of numbers; got a list of answers.")
    if isinstance(value, AnswerSequence):
        raise _wrong_type(name, f"should be an array of numbers; got {describe(value)}.")
    _explain_dtype(value, name)
    arr = np.asarray(value, dtype=np.float64)
    if shape is not None:
        ndim = len(shape)
    if ndim is not None and arr.ndim != ndim:
        raise CheckError(f"{name} should be a {ndim}-D array; got {arr.ndim}-D with shape {arr.shape}.",
                         cause=unanswerable("ndim", f"{name} has {arr.ndim} dimensions"))
    if shape is not None:
        arr = orient(arr, shape, name)
    if finite and not np.all(np.isfinite(arr)):
        raise CheckError(f"{name} contains NaN or infinity.")
    return arr


def _fits(arr_shape: tuple[int, ...], shape: tuple[int | None, ...]) -> bool:
    return len(arr_shape) == len(shape) and all(s is None or s == a for s, a in zip(shape, arr_shape, strict=True))


def orient(arr: np.ndarray, shape: tuple[int | None, ...], name: str, *, rows: str = "") -> np.ndarray:
    """``arr`` with the expected ``shape``: a 2-D array of the transposed shape is transposed back
    and noted as one ``"form"`` slip ("rows for columns"); any other shape raises."""
    want = tuple("any" if s is None else s for s in shape)
    if _fits(arr.shape, shape):
        return arr
    if arr.ndim == 2 and _fits(arr.shape[::-1], shape) and arr.shape[0] != arr.shape[1]:
        note(Slip("form-transposed", (
            f"{name} has shape {arr.shape}, the transpose of the expected {want}: "
            + (rows or "keep one row per point and one column per feature or component")
            + " (transpose it with .T, or build it the other way round).").replace("'", ""), charge="form"))
        return arr.T
    raise CheckError(f"{name} should have shape {want}; got {arr.shape}.".replace("'", ""),
                     cause=unanswerable("shape", f"{name} has shape {arr.shape}"))


def as_int(value: Any, name: str) -> int:
    """A decoded answer as an exact integer (``3.0`` is accepted, ``3.5`` and ``True`` are not)."""
    value = _value(value, name)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.ndarray)):
        raise _wrong_type(name, f"should be an integer; got {_type_name(value)}.")
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise _wrong_type(name, f"should be one integer; got {describe(value)}.")
        value = float(value)
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise CheckError(f"{name} should be an integer; got {value!r}.")
        if abs(value) > 2**53:
            raise CheckError(
                f"{name} is a float ({value:.17g}) too large to be exact: a float keeps 15–16 "
                "significant digits. Use integer arithmetic for exact counts (integer products "
                "and // on integers, not /, ** 0.5 or math.exp).",
                cause=Slip("form-float-count", "counts computed in floating point", charge="explain"))
        value = int(value)
    return value


def _type_name(value: Any) -> str:
    return describe(value)


def _count(n: int, word: str) -> str:
    return f"{'one' if n == 1 else n} {word}{'' if n == 1 else 's'}"


def describe(value: Any) -> str:
    """What the student gave, in words: "a list of 6 booleans", "a tuple of one number (0.2,)
    (a comma after a value makes a tuple)", "a dict", "an array of shape (3, 2)"."""
    if isinstance(value, AnswerSequence):
        kinds = sorted({describe(v).split(" of ")[0].removeprefix("a ").removeprefix("an ")
                        for v in value.items})
        return (f"a {value.kind} of {_count(value.length, 'item')} ({', '.join(kinds[:4])}) that do not "
                "form one regular array of numbers")
    container = getattr(value, "kpca_container", "")
    if isinstance(value, np.ndarray) and container and value.ndim >= 1:
        n = value.shape[0]
        if value.ndim > 1:
            what = _count(n, "row") + f" of {value.shape[1]}" if value.ndim == 2 else _count(n, "item")
        elif getattr(value, "kpca_dtype", "") == "bool":
            what = _count(n, "boolean")
        else:
            what = _count(n, "number")
        text = f"a {container} of {what}"
        if container == "tuple" and value.shape == (1,):
            shown = f"{float(value[0]):g}" if np.isfinite(value[0]) else "nan"
            text += f", ({shown},): a comma after a value makes a tuple"
        return text
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a dict"
    if isinstance(value, AnswerError):
        return "an item too large or not plain data"
    if value is None:
        return "None"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), type(value).__name__)


def _decimal_comma(value: Any) -> str | None:
    """``"0,2"`` when ``value`` looks like ``answer = 0,2`` (a tuple of two integers in Python)."""
    if isinstance(value, np.ndarray) and value.shape == (2,) and np.all(np.isfinite(value)):
        a, b = (float(v) for v in value)
        if a == int(a) and b == int(b) and b >= 0:
            return f"{int(a)},{int(b)}"
    return None


def as_float(value: Any, name: str) -> float:
    """A decoded answer as a finite float."""
    value = _value(value, name)
    if isinstance(value, np.ndarray) and value.shape == ():
        value = float(value)
    comma = _decimal_comma(value)
    if comma is not None:
        raise CheckError(
            f"{name} is the pair ({comma.replace(',', ', ')}), not one number: in Python, {name} = {comma} "
            "makes a tuple. Write the number with a decimal point (e.g. 0.25, not 0,25).",
            cause=unanswerable("decimal-comma", f"{name} = {comma} is a tuple"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong_type(name, f"should be a number; got {_type_name(value)}.")
    value = float(value)
    if not math.isfinite(value):
        raise CheckError(f"{name} should be a finite number; got {value!r}.")
    return value


_TRUTH = {"true": True, "false": False}


def as_bool(value: Any, name: str) -> bool:
    """A decoded answer as ``True`` or ``False``. The strings ``"True"``/``"False"`` are read as
    the booleans and noted as one ``"form"`` slip; numbers are not accepted."""
    value = _value(value, name)
    if isinstance(value, str) and value.strip().lower() in _TRUTH:
        note(Slip("form-bool-string", (
            f"{name} is the string {value!r}, not the boolean {_TRUTH[value.strip().lower()]}: write "
            "True or False without quotes (a non-empty string, even 'False', counts as true in an if)."),
            charge="form"))
        return _TRUTH[value.strip().lower()]
    if not isinstance(value, bool):
        raise _wrong_type(name, f"should be True or False; got {_type_name(value)}.")
    return value


def as_list(value: Any, name: str) -> list[Any]:
    """A decoded list of answers (one per input case)."""
    value = _value(value, name)
    if not isinstance(value, list):
        raise _wrong_type(name, "could not be evaluated.")
    return value


def as_map(value: Any, name: str, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A decoded answer as a dict (from a Python ``dict``).

    With ``keys``, a key that is one of them spelled differently (case, spaces, quotes) is read
    as that key and noted as one ``"form"`` slip."""
    value = _value(value, name)
    if not isinstance(value, dict):
        raise _wrong_type(name, f"should be a dict; got {_type_name(value)}.")
    if keys is None:
        return value
    canon = {_key(k): k for k in keys}
    out: dict[str, Any] = {}
    respelled = []
    for k, v in value.items():
        if k in keys or _key(k) not in canon:
            out.setdefault(k, v)
            continue
        respelled.append(k)
        out.setdefault(canon[_key(k)], v)
    if respelled:
        shown = ", ".join(repr(k) for k in respelled[:6])
        note(Slip("form-keys", (
            f"{name} uses the keys {shown}; the question names them "
            f"{', '.join(repr(canon[_key(k)]) for k in respelled[:6])} (exact spelling and case)."),
            charge="form"))
    return out


def _key(k: str) -> str:
    return k.strip().strip("'\"").strip().casefold()
