"""What a notebook run showed, from the facts the trusted side recorded.

:func:`classify` decides a run's status from which limit fired (never from timing, never from
an exception's name alone); :func:`limit_words` names that limit with its value;
:func:`cell_errors` lists the cells that raised, for the feedback's notes.
"""

from __future__ import annotations

import re
from typing import Any

from ..judge.notebooks import GradingNotebook
from ..judge.scoring import memory_error
from .runner import Run

__all__ = ["classify", "never_started", "limit_words", "cell_errors"]

#: The kinds of cells whose exceptions the feedback reports (not the grader's own cells).
REPORTED_KINDS = ("answer", "student", "setup", "demo", "export")


def classify(run: Run) -> tuple[str, int | None, str]:
    """``(status, cell, message)`` of the first cell that ran out of time or memory, or crashed.

    Decided from facts the trusted side recorded (which limit fired: the grader's
    wall-clock killer, nbval's cell timeout, the output cap, the cgroup's OOM kills, limit
    hits and refused forks, a process's peak address space at its limit, whether the kernel
    was still alive), never from timing, and never from the name of an exception alone: the
    kernel is the student's, and any cell can ``raise MemoryError``. An exception in a cell,
    a ``MemoryError`` that no limit counter saw included (an allocation larger than the
    limit fails without the peak reaching it), is not a failure here: the question's checks
    and the cell's note (with the limit, as a possibility) report it.
    """
    for cell in sorted(run.cells):
        out = run.cells[cell]
        if out.outcome not in ("failed", "error"):
            continue
        if out.alive is None:  # no kernel: the sandbox (or the kernel in it) did not start
            return "crashed", cell, "the kernel did not start"
        found = _stopped(out.facts or {}, out.alive, re.sub(r"\x1b\[[0-9;]*m", "", out.text))
        if found is not None:
            # The whole notebook's clock: no cell is to blame and none is run again (the
            # answers exported before it stand; the questions after it score 0).
            whole = (out.facts or {}).get("killed") == "notebook"
            return found[0], None if whole else cell, found[1]
    if not run.finished:
        return "crashed", None, run.note or "the notebook run did not finish"
    return "graded", None, ""


def never_started(run: Run) -> bool:
    """Whether the run's kernel never started: no cell ran, so nothing the notebook did caused
    it (a transient failure of the machine, or a limit too small for any kernel, which the
    canary reports before any submission is graded)."""
    return any(out.alive is None and out.outcome in ("failed", "error") for out in run.cells.values())


def _stopped(facts: dict[str, Any], alive: bool | None, text: str) -> tuple[str, str] | None:
    """``(status, message)`` of the limit that stopped a failed cell, or ``None`` (it raised).

    Facts that do not depend on the machine's load first (a limit that was hit), then the
    clocks."""
    died = alive is False or memory_error(facts.get("ename"))
    if facts.get("oom_kills", 0) > 0:
        return "crashed", "it ran out of memory (the memory limit killed a process)"
    if facts.get("memory_hits", 0) > 0 and died:
        return "crashed", "it ran out of memory (it reached the memory limit)"
    if facts.get("address_space_hit") and died:
        # No cgroup: the trusted side saw a process's VmPeak reach its RLIMIT_AS.
        return "crashed", "it ran out of memory (a process reached the memory limit)"
    if facts.get("killed") == "memory":  # no cgroup: the grader's watchdog summed them
        sockets = facts.get("socket_mb")
        kernel = (f", {sockets} MB of it kernel memory in socket buffers" if isinstance(sockets, int)
                  and not isinstance(sockets, bool) else "")
        return "crashed", ("it ran out of memory (its processes together held more than the "
                           f"memory limit{kernel})")
    if facts.get("killed") == "output":
        return "crashed", "it produced more output than the grader reads"
    if facts.get("pids_refused", 0) > 0:
        return "crashed", "it started more processes than allowed"
    if facts.get("killed") == "notebook":
        limit = facts.get("notebook_limit")
        value = f" of {limit:g} s" if isinstance(limit, (int, float)) else ""
        return "timeout", (f"it ran past the time limit{value} for the whole notebook (the grader "
                           "stopped it there; the questions checked before keep their points)")
    if facts.get("killed") == "wallclock":
        return "timeout", "it ran past the time limit (the grader stopped it)"
    if facts.get("nbval_timeout") and "exceeded waiting for output" in text:
        return "crashed", "its output could not be read (too large a message?)"
    if facts.get("nbval_timeout"):
        return "timeout", "it ran past the time limit per cell"
    if alive is False:
        return "crashed", "the kernel died (the process exited or was killed)"
    return None


def limit_words(message: str, timeout: float, memory_mb: int) -> str:
    """The limit a stopped cell ran into, with its value."""
    if "whole notebook" in message:  # carries its own value
        return message
    if "time limit" in message:
        return f"it ran past the time limit of {timeout:g} s per cell"
    if "the memory limit" in message:
        return message.replace("the memory limit", f"the memory limit of {memory_mb} MB", 1)
    if "out of memory" in message:
        return f"{message} (the limit is {memory_mb} MB)"
    return message


def cell_errors(run: Run, built: GradingNotebook) -> dict[int, tuple[str, str, str]]:
    """The cells that raised an exception: the student's, the assignment's, and the exports
    (where the grader calls the student's functions: only an exception the probe lets
    through, a ``MemoryError``, gets there); not the grader's preamble or question cells.
    Cell index -> (label, exception name, message)."""
    errors: dict[int, tuple[str, str, str]] = {}
    for cell, out in run.cells.items():
        if out.outcome not in ("failed", "error") or cell >= len(built.kinds):
            continue
        facts = out.facts or {}
        if not facts.get("ename") or built.kinds[cell] not in REPORTED_KINDS:
            continue
        errors[cell] = (built.labels[cell], str(facts.get("ename"))[:100],
                        str(facts.get("evalue") or "")[:300])
    return errors
