"""A pytest plugin loaded in the grader's nbval child: one JSON line per notebook cell.

Written to ``$KPCA_REPORT_FILE`` as each cell finishes, so that what ran is known
even if the child process is killed. For each cell: the notebook, the cell number
(nbval's ``Cell N``: code cells from 0), the outcome, the error text, and whether the
kernel was still alive afterwards (a dead kernel means a crash).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_FILE = os.environ.get("KPCA_REPORT_FILE")


def _write(record: dict[str, Any]) -> None:
    if not _FILE:
        return
    with open(_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup" and report.passed:
        return
    if report.when == "teardown" and report.passed:
        return
    parent = getattr(item, "parent", None)
    kernel = getattr(parent, "kernel", None)
    try:
        alive = bool(kernel.is_alive()) if kernel is not None else None
    except Exception:
        alive = False
    text = ""
    if report.failed:
        try:
            full = str(report.longrepr)
            text = full if len(full) <= 6000 else full[:1500] + "\n...\n" + full[-4000:]
        except Exception:
            text = "(no text)"
    _write({
        "file": str(getattr(item, "fspath", "")),
        "cell": getattr(item, "cell_num", None),
        "when": report.when,
        "outcome": "xfailed" if hasattr(report, "wasxfail") else report.outcome,
        "alive": alive,
        "text": text,
    })


class KernelDied(RuntimeError):
    """The kernel process ended while a cell was running (os._exit, segfault, OOM kill)."""


def _patch_nbval() -> None:
    """Make nbval notice a dead kernel at once instead of waiting for the cell timeout."""
    from queue import Empty

    from nbval.kernel import RunningKernel

    original = RunningKernel.await_reply

    def await_reply(self: Any, msg_id: str, timeout: float | None = None) -> Any:
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
            try:
                return original(self, msg_id, timeout=step)
            except Empty:
                if not self.is_alive():
                    raise KernelDied("the kernel died while running this cell") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    RunningKernel.await_reply = await_reply


_patch_nbval()
