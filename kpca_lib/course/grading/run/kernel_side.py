"""Code the grader runs inside a student's kernel: set-up and per-question export.

The rebuilt notebook starts with a cell calling :func:`install`, which reads the
grader's configuration (inputs per question and a per-submission key) from the
read-only file named by ``$KPCA_GRADER_CONFIG`` (inside the sandbox:
``/run/kpca/config.json``, visible to this submission only), caps the size of printed
output, and returns ``export(question_id)``. After a question's last answer cell, the
notebook calls ``export``: it probes the student's answers on the grader's inputs and
*displays* them, with an HMAC of the content, as one message of type
:data:`EXPORT_MIME` on the kernel's own IOPub channel, which the trusted nbval
process reads (size-capped) and records. No file is written anywhere.

Nothing here is trusted by the grader: student code can replace any of it. What
student code can do with that is limited to its *own* answer values, which the grader
validates and checks against its own computations (see :mod:`kpca_lib.course.grading.judge.scoring`).
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

from ..judge.evaluate import probe_payload
from ..judge.plain import decode, dumps, error_value
from ..judge.registry import get_question

__all__ = ["install", "OUTPUT_LIMIT", "EXPORT_MIME", "PREAMBLE"]

#: The cell the grader puts first in every notebook it runs: it installs this module's exports.
PREAMBLE = """\
# Added by the grader.
from kpca_lib.course.grading.run.kernel_side import install as _kpca_install
_kpca_export = _kpca_install(globals())
del _kpca_install
"""

EXPORT_MIME = "application/vnd.kpca.export+json"  # same as report_plugin.EXPORT_MIME

OUTPUT_LIMIT = 200_000  # characters of stdout/stderr per submission


def _cap_output(limit: int) -> None:
    """Cap stdout/stderr at ``limit`` characters in total (a courtesy: the kernel is
    untrusted, the grader caps what it reads on its side). ipykernel may give each cell
    new stream objects, so the cap is re-applied before every cell."""
    state = {"n": 0, "cut": False}

    def wrap(stream: Any) -> None:
        write = getattr(stream, "write", None)
        if write is None or getattr(write, "_kpca_capped", False):
            return

        def capped(text: str, _write: Callable[[str], Any] = write) -> int:
            if state["cut"]:
                return len(text)
            state["n"] += len(text)
            if state["n"] > limit:
                state["cut"] = True
                return _write("\n[output truncated by the grader]\n")
            return _write(text)

        capped._kpca_capped = True  # type: ignore[attr-defined]
        try:
            stream.write = capped
        except (AttributeError, TypeError):
            pass

    def apply(*_: Any) -> None:
        for name in ("stdout", "stderr"):
            wrap(getattr(sys, name))

    apply()
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            shell.events.register("pre_run_cell", apply)
    except Exception:
        pass


def install(namespace: MutableMapping[str, Any], config_path: str | None = None) -> Callable[[str], None]:
    """Read the grader's configuration; return the ``export`` function."""
    path = Path(config_path or os.environ["KPCA_GRADER_CONFIG"])
    config = json.loads(path.read_text())
    key = bytes.fromhex(config["key"])
    inputs_all = config["inputs"]
    _cap_output(int(config.get("output_limit", OUTPUT_LIMIT)))

    def export(question_id: str) -> None:
        inputs = {k: decode(v, traits=False) for k, v in inputs_all.get(question_id, {}).items()}
        try:  # defined by the question cell the grader put before the answers
            question = get_question(question_id)
        except Exception as exc:
            payload = {"__probe__": error_value(f"the question could not be probed: {exc}")}
        else:
            payload = probe_payload(question, namespace, inputs)
        try:
            text = dumps({"question": question_id, "answers": payload})
        except (TypeError, ValueError) as exc:
            text = dumps({"question": question_id, "answers": {}, "error": str(exc)})
        mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        from IPython.display import publish_display_data

        publish_display_data({EXPORT_MIME: {"payload": text, "mac": mac}})

    return export
