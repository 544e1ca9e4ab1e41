"""Code the grader runs inside a student's kernel: set-up and per-question export.

The rebuilt notebook starts with a cell calling :func:`install`, which reads the
grader's configuration (inputs per question, output folder, a per-submission key),
deletes the file, caps the size of printed output, and returns ``export(question_id)``.
After a question's last answer cell, the notebook calls ``export``: it probes the
student's answers on the grader's inputs and writes ``<out>/<question>.json`` with an
HMAC of the content.

Nothing here is trusted by the grader: student code can replace any of it. What
student code can do with that is limited to its *own* answer values, which the grader
validates and checks against its own computations (see :mod:`kpca_lib.course.grading.grade`).
The key only stops one submission's kernel from writing another submission's answers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from .evaluate import probe_payload
from .plain import decode, dumps
from .questions import get_question

__all__ = ["install", "OUTPUT_LIMIT"]

OUTPUT_LIMIT = 200_000  # characters of stdout/stderr per submission


def _cap_output(limit: int) -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        write = stream.write
        state = {"n": 0, "cut": False}

        def capped(text: str, _write: Callable[[str], Any] = write, _state: dict = state) -> int:
            if _state["cut"]:
                return len(text)
            _state["n"] += len(text)
            if _state["n"] > limit:
                _state["cut"] = True
                return _write("\n[output truncated by the grader]\n")
            return _write(text)

        try:
            stream.write = capped
        except (AttributeError, TypeError):
            pass


def install(namespace: MutableMapping[str, Any], config_path: str) -> Callable[[str], None]:
    """Read and delete the grader's configuration; return the ``export`` function."""
    path = Path(config_path)
    config = json.loads(path.read_text())
    path.unlink()
    key = bytes.fromhex(config["key"])
    out = Path(config["out"])
    inputs_all = config["inputs"]
    _cap_output(int(config.get("output_limit", OUTPUT_LIMIT)))

    def export(question_id: str) -> None:
        question = get_question(question_id)
        inputs = {k: decode(v) for k, v in inputs_all.get(question_id, {}).items()}
        payload = probe_payload(question, namespace, inputs)
        try:
            text = dumps({"question": question_id, "answers": payload})
        except (TypeError, ValueError) as exc:
            text = dumps({"question": question_id, "answers": {}, "error": str(exc)})
        mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        tmp = out / f".{question_id}.tmp"
        tmp.write_text(json.dumps({"payload": text, "mac": mac}))
        os.replace(tmp, out / f"{question_id}.json")

    return export
