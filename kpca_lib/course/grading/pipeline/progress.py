"""Progress on stderr, one line per finished row."""

from __future__ import annotations

import sys
import threading
import time

from ..record.gradebook import format_points, problem
from ..record.rows import Row
from ..record.summary import format_duration
from ..text import one_line

__all__ = ["Progress"]


class Progress:
    """Progress on stderr, one line at a time (a terminal, a pipe or a log file alike).

    ``begin`` says what the batch is; ``step(row)`` is called once per finished row:
    ``[k/N] name status score/max run 1.2s elapsed mm:ss ETA mm:ss``. The ETA is the
    mean run time of the notebooks finished so far times the notebooks still to run,
    divided by the runs done at once (``ETA --`` until a notebook has finished).
    """

    def __init__(self, total: int, enabled: bool, parallel: int = 1) -> None:
        self.total, self.n, self.enabled = total, 0, enabled
        self.parallel = max(1, parallel)
        self.start = time.monotonic()
        self.durations: list[float] = []
        self.lock = threading.Lock()

    def _write(self, line: str) -> None:
        if self.enabled:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def begin(self, text: str) -> None:
        self.start = time.monotonic()
        self._write(text)

    def eta(self) -> float | None:
        """Seconds still needed, or ``None`` before the first notebook finished."""
        left = self.total - self.n
        if left <= 0:
            return 0.0
        if not self.durations:
            return None
        return sum(self.durations) / len(self.durations) * left / min(self.parallel, left)

    def step(self, row: Row) -> None:
        with self.lock:
            self.n += 1
            if row.seconds > 0:
                self.durations.append(row.seconds)
            status = f"{row.status} (grader failure)" if row.grader_error else row.status
            why = problem({"status": row.status, "messages": row.messages,
                           "grader_error": row.grader_error})
            self._write(f"[{self.n}/{self.total}] {one_line(row.submission)} {status} "
                        f"{format_points(row.score)}/{format_points(row.max_score)} "
                        f"run {row.seconds:.1f}s "
                        f"elapsed {format_duration(time.monotonic() - self.start)} "
                        f"ETA {format_duration(self.eta())}" + (f" | why: {why}" if why else ""))
