"""Measuring computational cost robustly on a shared machine.

The lectures time eigendecompositions and SVDs to show how their cost grows. Wall-clock
time on a busy machine mostly measures the other programs, so :func:`cpu_seconds`
reports the **CPU time** of this process (``time.process_time``), with one BLAS thread
by default and the best of a few repeats. :func:`loglog_slope` fits the exponent ``p``
of a cost ``≈ c·size^p`` from such measurements.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from threadpoolctl import threadpool_limits

__all__ = ["cpu_seconds", "loglog_slope"]


def cpu_seconds(f: Callable[[], object], repeats: int = 3, *, threads: int | None = 1) -> float:
    """Best-of-``repeats`` CPU time of ``f()``, in seconds.

    Parameters
    ----------
    f : callable
        Called with no arguments, ``repeats`` times; its result is discarded.
    repeats : int, default=3
        Number of calls; the smallest CPU time is returned (the least disturbed one).
    threads : int or None, default=1
        Number of BLAS/OpenMP threads during the calls (``threadpoolctl``); ``None``
        leaves the thread pools as they are. CPU time adds up over threads, so with
        one thread it is close to the operation count divided by the speed of one core.

    Returns
    -------
    float
        The CPU time of the fastest call, in seconds (``time.process_time``).

    Examples
    --------
    >>> import numpy as np
    >>> seconds = cpu_seconds(lambda: np.linalg.eigh(np.eye(50)), repeats=2)
    >>> seconds >= 0
    True
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int | np.integer) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer; got {repeats!r}.")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int | np.integer) or threads < 1
    ):
        raise ValueError(f"threads must be a positive integer or None; got {threads!r}.")
    best = np.inf
    with threadpool_limits(limits=None if threads is None else int(threads)):
        for _ in range(int(repeats)):
            start = time.process_time()
            f()
            best = min(best, time.process_time() - start)
    return float(best)


def loglog_slope(sizes: ArrayLike, costs: ArrayLike) -> float:
    """Least-squares slope of ``log(costs)`` against ``log(sizes)``.

    A cost ``c·size^p`` is a straight line of slope ``p`` on log–log axes, so the slope
    estimates the exponent ``p`` over the measured range.

    Parameters
    ----------
    sizes, costs : array-like of shape (m,)
        Positive numbers, ``m >= 2``, with at least two different sizes.

    Returns
    -------
    float
        The fitted exponent ``p``.

    Examples
    --------
    >>> round(loglog_slope([10, 20, 40], [1.0, 8.0, 64.0]), 6)
    3.0
    """
    x = np.asarray(sizes, dtype=float)
    y = np.asarray(costs, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(
            f"sizes and costs must be 1-D of the same length >= 2; got shapes {x.shape} and "
            f"{y.shape}."
        )
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and x.min() > 0 and y.min() > 0):
        raise ValueError("sizes and costs must be finite and positive (their logarithms are fitted).")
    if np.ptp(x) == 0:
        raise ValueError("sizes must contain at least two different values.")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])
