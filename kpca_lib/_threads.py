"""Limiting BLAS threads around the library's own thread pools, cheaply.

``threadpoolctl.threadpool_limits`` scans every loaded shared library on each call
(about a millisecond, much more on a busy machine); a grid search fits hundreds of
estimators. One :class:`~threadpoolctl.ThreadpoolController` is made on first use, after
NumPy's and SciPy's BLAS are loaded (the only libraries limited here), and reused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import lru_cache

from threadpoolctl import ThreadpoolController

__all__ = ["blas_threads"]


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    import scipy.linalg  # noqa: F401  (SciPy's BLAS is loaded before the controller looks)

    return ThreadpoolController()


@contextlib.contextmanager
def blas_threads(limit: int | None) -> Iterator[None]:
    """Within the block, BLAS uses at most ``limit`` threads (``None``: leave it alone)."""
    if limit is None:
        yield
        return
    with _controller().limit(limits=int(limit), user_api="blas"):
        yield
