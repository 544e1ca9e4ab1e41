"""A symmetric kernel matrix stored once: its lower triangle, in row panels.

Exact kernel PCA of ``n`` points needs the ``n×n`` kernel matrix, which is the
whole memory cost (scikit-learn holds it in float64: ``8n²`` bytes). Because
``K`` is symmetric, half of it is enough. :class:`SymmetricPanels` keeps rows
``[r_p, r_{p+1})`` and columns ``[0, r_{p+1})`` of ``K`` in panel ``p``, so the
panels tile the lower triangle plus full diagonal blocks: about ``n²/2``
numbers. A product ``K @ V`` then reads every panel twice, once for the lower
and once (transposed) for the upper triangle, with one BLAS call each.

The matrix is never centred explicitly: the centred product is
``K_c V = P K P V`` with ``P = I − 11ᵀ/n``, i.e. subtract the column means of
``V`` before and of the result after (O(n) work per vector). The row means of
``K`` (needed to centre test kernels) and its Frobenius norm (a bound on the
float32 rounding error) are accumulated in float64 while the panels are built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ._threads import available_cpus, parallel_for, resolve_threads

__all__ = [
    "SymmetricPanels",
    "KernelStats",
    "build_kernel_panels",
    "build_kernel_dense",
    "available_cores",
    "symmetrize_inplace",
]

#: Rows per panel; the diagonal blocks (``PANEL_ROWS²``) are stored in full, which costs
#: ``n·PANEL_ROWS/2`` entries beyond the triangle (2 MiB at n = 4000 with 128 rows; 256
#: rows cost twice that, for the same speed of build and products, measured).
PANEL_ROWS = 128
#: Columns computed at once: a block of 128×1024 float64 is 1 MiB (fits in L2).
BLOCK_COLS = 1024

#: Work is split into tasks of at least this many matrix entries, and into at most
#: ``MAX_TASKS`` tasks, whatever the number of threads: every task writes its own
#: partial results, which are then added in task order, so the numbers do not depend
#: on the thread count or on which thread ran which task. A few large tasks per thread
#: (not one per block) keep the overhead low; several per thread let the threads that
#: do get a CPU on a busy machine take over the work of one that does not.
MIN_TASK_ENTRIES = 1 << 20
#: See ``MIN_TASK_ENTRIES``. Each task of a product ``K @ V`` holds an ``n×b`` partial sum.
MAX_TASKS = {"build": 32, "matmat": 8}
#: Panel columns multiplied at once in :meth:`SymmetricPanels.matmat`: 1 MiB of matrix
#: entries (128 rows × 1024 float64), small enough to stay in the L2 cache between the
#: product for the lower and the one for the upper triangle.
CHUNK_BYTES = 1 << 20
#: ... and at most this many bytes of the block ``V`` per chunk: the rows of ``V`` that a
#: chunk multiplies stay in the L1 data cache (48 KiB per core on current x86 server cores).
#: With more than 6 columns the chunk is narrowed accordingly; measured at n = 4000 (2 cores,
#: OpenBLAS): 8 columns 7.8 ms per product instead of 10.7, 12 columns 10.5 instead of 15.6,
#: 16 columns 10.6 instead of 14.3, the same for up to 6 columns; a fit with k = 50 (blocks of
#: 12) 170 ms instead of 210.
V_CHUNK_BYTES = 48 << 10


#: Entries × columns of a product with the kernel below which it runs on one thread
#: (n = 1000 with 4 columns is above; the result does not depend on the thread count).
PARALLEL_PRODUCT = 1 << 22


def available_cores() -> int:
    """Number of CPUs this process may use (affinity mask and cgroup quota).

    See :func:`kpca_lib._threads.available_cpus`.
    """
    return available_cpus()


def _task_ranges(sizes: list[int], kind: str) -> list[tuple[int, int]]:
    """Split items of the given sizes (matrix entries) into contiguous, about equal tasks.

    The split depends only on ``sizes`` (never on the thread count), see ``MIN_TASK_ENTRIES``.
    """
    total = sum(sizes)
    n_tasks = int(min(MAX_TASKS[kind], max(1, total // MIN_TASK_ENTRIES), len(sizes)))
    bounds, acc, target = [0], 0, total / max(n_tasks, 1)
    for i, size in enumerate(sizes):
        acc += size
        if acc >= target * len(bounds) and len(bounds) < n_tasks and i + 1 < len(sizes):
            bounds.append(i + 1)
    bounds.append(len(sizes))
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def symmetrize_inplace(A: NDArray, block: int = 512) -> NDArray:
    """Replace the square ``A`` by ``(A + Aᵀ)/2`` in place, block by block.

    Same values as ``A += A.T; A *= 0.5``, but without the n×n temporary that
    NumPy makes for the overlapping ``A.T``.
    """
    n = A.shape[0]
    for i in range(0, n, block):
        rows = slice(i, min(i + block, n))
        for j in range(0, i + 1, block):
            cols = slice(j, min(j + block, n))
            upper = A[cols, rows].T.copy()
            A[rows, cols] += upper
            A[rows, cols] *= 0.5
            if i != j:
                A[cols, rows] = A[rows, cols].T
    return A


class SymmetricPanels:
    """The lower triangle of a symmetric ``n×n`` matrix, in row panels.

    Parameters
    ----------
    n : int
        Size of the matrix.
    dtype : numpy dtype
        Storage type, float64 or float32.
    panel_rows : int
        Rows per panel.
    n_threads : int, optional
        Threads of the products (default: every available CPU); clipped to the
        available CPUs (:func:`kpca_lib._threads.resolve_threads`).

    Attributes
    ----------
    bounds : list of int
        Row boundaries ``0 = r_0 < r_1 < ... = n`` of the panels.
    panels : list of ndarray
        Panel ``p`` has shape ``(r_{p+1} − r_p, r_{p+1})``.
    row_means : ndarray of shape (n,)
        Row (= column) means of the matrix, in float64.
    grand_mean : float
    frobenius_norm : float
        ``‖K‖_F`` of the stored values, in float64.
    n_threads : int
        Threads of :meth:`matmat`; the result does not depend on it.
    """

    #: Products run on the library's worker threads with one BLAS thread each
    #: (:func:`kpca_lib._threads.parallel_for`): the solvers need not hand them the
    #: caller's BLAS threads (a threadpoolctl call per product saved).
    threads_own_products = True

    def __init__(
        self, n: int, dtype: np.dtype, panel_rows: int = PANEL_ROWS, n_threads: int | None = None
    ) -> None:
        self.n = n
        self.dtype = np.dtype(dtype)
        self.n_threads = resolve_threads(n_threads)
        self.bounds = list(range(0, n, panel_rows)) + [n]
        shapes = [
            (stop - start, stop)
            for start, stop in zip(self.bounds[:-1], self.bounds[1:], strict=True)
        ]
        # One allocation, cut into the panels: NumPy asks the kernel for transparent huge
        # pages for a large one, which first touches (the build) fill ~2× faster than
        # 4 KiB pages (measured: 17 ms instead of 39 ms for 64 MB).
        storage = np.empty(sum(rows * cols for rows, cols in shapes), dtype=self.dtype)
        self.panels = []
        offset = 0
        for rows, cols in shapes:
            self.panels.append(storage[offset : offset + rows * cols].reshape(rows, cols))
            offset += rows * cols
        self.row_means = np.zeros(n)
        self.grand_mean = 0.0
        self.frobenius_norm = 0.0
        self.stats: KernelStats | None = None

    @property
    def nbytes(self) -> int:
        """Memory held by the panels, in bytes (about ``n²/2`` entries)."""
        return sum(p.nbytes for p in self.panels)

    def matmat(self, V: NDArray[np.float64]) -> NDArray[np.float64]:
        """``K @ V`` for ``V`` of shape (n, b), in the storage precision, returned as float64.

        Panel ``p`` gives rows ``[r_p, r_{p+1})`` of the result (its lower part)
        and adds ``panelᵀ V[r_p:r_{p+1}]`` to rows ``[0, r_p)`` (the upper
        triangle). For several columns, both products are made chunk by chunk of
        ``CHUNK_BYTES`` (a chunk is still in the CPU cache for the second one), so
        the matrix is read from memory once per product, not twice: the products
        are limited by memory bandwidth (a single column uses two whole-panel
        matrix–vector products instead: chunks that short do not run well on two
        threads). The panels are split into a few contiguous tasks
        (independent of the thread count) run by :func:`kpca_lib._threads.parallel_for`
        on ``n_threads`` threads with one BLAS thread each; each task adds its
        upper-triangle part into its own buffer, and the buffers are added in
        task order, so the result is the same for any number of threads.
        """
        V = np.ascontiguousarray(V, dtype=self.dtype)
        Y = np.empty_like(V)
        # One column: matrix–vector products (BLAS gemv, ~1/3 faster for the transposed panel).
        Vv, Yv = (V[:, 0], Y[:, 0]) if V.shape[1] == 1 else (V, Y)
        b = self.bounds
        tasks = _task_ranges([p.size for p in self.panels], "matmat")
        upper: list[NDArray] = [Yv[:0]] * len(tasks)
        rows = max(b_next - b_p for b_p, b_next in zip(b[:-1], b[1:], strict=True))
        width = _chunk_width(rows, V.shape[1], self.dtype.itemsize)

        def task(t: int) -> None:
            first, stop = tasks[t]
            part = np.zeros((b[stop - 1], *Vv.shape[1:]), dtype=self.dtype)
            for p in range(first, stop):
                panel, r0, r1 = self.panels[p], b[p], b[p + 1]
                if Vv.ndim == 1:
                    # One vector: two whole-panel calls. Chunks of a matrix–vector product
                    # are too short for two threads (each call hands the GIL over), and
                    # gemv streams the panel from memory fast enough without them.
                    Yv[r0:r1] = panel @ Vv[:r1]
                    if r0:
                        part[:r0] += panel[:, :r0].T @ Vv[r0:r1]
                    continue
                own = np.zeros((r1 - r0, *Vv.shape[1:]), dtype=self.dtype)
                for c0 in range(0, r1, width):
                    c1 = min(c0 + width, r1)
                    chunk = panel[:, c0:c1]
                    own += chunk @ Vv[c0:c1]
                    if c0 < r0:  # left of the diagonal block: also the upper triangle
                        c1 = min(c1, r0)
                        part[c0:c1] += chunk[:, : c1 - c0].T @ Vv[r0:r1]
                Yv[r0:r1] = own
            upper[t] = part

        # A small product runs on the calling thread: starting a helper thread costs about
        # 0.1 ms, as much as the whole product below PARALLEL_PRODUCT (n = 500: 14 products).
        small = self.n * self.n * V.shape[1] < PARALLEL_PRODUCT
        parallel_for(task, len(tasks), 1 if small else self.n_threads)
        for part in upper:  # in task order: the same sums whatever the thread count
            Yv[: part.shape[0]] += part
        return Y.astype(np.float64, copy=False)

    def centered_matmat(self, V: NDArray[np.float64]) -> NDArray[np.float64]:
        """``K_c @ V = P K P V`` with ``P = I − 11ᵀ/n`` (the centred kernel, never formed)."""
        V = V - V.mean(axis=0)
        Y = self.matmat(V)
        Y -= Y.mean(axis=0)
        return Y

    def to_dense(self) -> NDArray[np.float64]:
        """The full matrix in float64 (for tests and small ``n``)."""
        K = np.empty((self.n, self.n))
        b = self.bounds
        for p, panel in enumerate(self.panels):
            K[b[p] : b[p + 1], : b[p + 1]] = panel
            K[: b[p], b[p] : b[p + 1]] = panel[:, : b[p]].T
        return K


def _chunk_width(rows: int, columns: int, itemsize: int) -> int:
    """Panel columns per chunk of a product with ``columns`` vectors (see ``CHUNK_BYTES``)."""
    matrix = CHUNK_BYTES // (rows * itemsize)
    vectors = V_CHUNK_BYTES // (max(columns, 1) * itemsize)
    return max(64, min(matrix, vectors))


def _blocks(bounds: list[int], block_cols: int) -> Iterator[tuple[int, slice, slice]]:
    """(panel, rows, cols) of every block of the lower triangle, diagonal blocks last."""
    for p in range(len(bounds) - 1):
        rows = slice(bounds[p], bounds[p + 1])
        for start in range(0, bounds[p], block_cols):
            yield p, rows, slice(start, min(start + block_cols, bounds[p]))
        yield p, rows, rows


@dataclass
class KernelStats:
    """Statistics of a kernel matrix gathered while its blocks are computed.

    Attributes
    ----------
    row_means : ndarray of shape (n,)
        Row (= column) means, in float64.
    grand_mean : float
    frobenius_norm : float
        ``‖K‖_F`` in float64.
    max_abs : float
        Largest ``|K_ij|`` before the cast to the storage precision (NaN if any
        entry was NaN).
    finite : bool
        Every *stored* entry is finite (checked after the cast, so a float32
        overflow is seen).
    """

    row_means: NDArray[np.float64]
    grand_mean: float
    frobenius_norm: float
    max_abs: float
    finite: bool


def default_overflow_check(stats: KernelStats, dtype: np.dtype) -> None:
    """Raise the generic ``ValueError`` for a kernel matrix with infinite or NaN entries."""
    if not stats.finite:
        hint = " or kernel_dtype='float64'" if np.dtype(dtype) == np.float32 else ""
        raise ValueError(
            f"the kernel matrix overflowed (infinite values in {np.dtype(dtype).name}, largest "
            f"|K_ij| = {stats.max_abs:.3g}); scale X to a smaller range, use a lower degree{hint}."
        )


def _fill(
    block: Callable[..., NDArray[np.float64]],
    n: int,
    bounds: list[int],
    store: Callable[[int, slice, slice], NDArray],
    *,
    dtype: np.dtype,
    n_threads: int | None,
    block_cols: int,
) -> KernelStats:
    """Compute every block of the lower triangle, hand it to ``store`` and gather statistics.

    ``store(p, rows, cols)`` returns the array (view) where ``K[rows, cols]`` is
    kept; the worker writes the block there and, when ``store`` also needs the
    transposed block, the caller's ``store`` view handles the lower part only
    (see :func:`build_kernel_dense`).
    """
    dtype = np.dtype(dtype)
    items = list(_blocks(bounds, block_cols))
    # Contiguous tasks of whole blocks, independent of the thread count; each task keeps
    # its own statistics (added in task order below), so they do not depend on it either.
    tasks = _task_ranges([(r.stop - r.start) * (c.stop - c.start) for _, r, c in items], "build")
    row_sums = np.zeros((len(tasks), n))
    sq_sums = np.zeros(len(tasks))
    max_abs = np.zeros(len(tasks))
    finite = np.ones(len(tasks), dtype=bool)
    panel_rows = max(b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    ones = np.ones(max(panel_rows, block_cols))
    tiny = float(np.finfo(dtype).tiny) if dtype != np.float64 else 0.0
    scratch_shape = (panel_rows, max(panel_rows, block_cols))

    def work(t: int) -> None:
        scratch = np.empty(scratch_shape)
        first, stop = tasks[t]
        for p, rows, cols in items[first:stop]:
            target = store(p, rows, cols)
            h, w = target.shape
            # Compute in a contiguous scratch block (stays in cache), then store.
            B = block(rows, cols, out=scratch[:h, :w])
            with np.errstate(invalid="ignore"):
                big = max(float(B.max()), -float(B.min()))
            max_abs[t] = max(max_abs[t], big) if big == big else np.nan
            if tiny:
                # Values below the smallest normal float32 would be stored as
                # subnormals, which make every later product ~10× slower on x86:
                # flush them to 0 (an absolute change below 1.2e-38).
                with np.errstate(invalid="ignore"):
                    B *= np.abs(B) >= tiny
            with np.errstate(over="ignore", invalid="ignore"):
                target[...] = B
            if dtype != np.float64:
                # The overflow check runs on the stored values, after the cast.
                finite[t] &= bool(np.isfinite(target).all())
            else:
                finite[t] &= big == big and big != np.inf
            with np.errstate(over="ignore", invalid="ignore"):
                row_sums[t, rows] += B @ ones[:w]
                # A whole-width block is contiguous: BLAS ddot, 2-3× faster than einsum.
                frob = float(np.vdot(B, B) if B.flags.c_contiguous else np.einsum("ij,ij->", B, B))
                if rows != cols:  # an off-diagonal block also stands for its transpose
                    row_sums[t, cols] += ones[:h] @ B
                    frob *= 2.0
            sq_sums[t] += frob

    # Tasks from a work queue, each thread with one BLAS thread: the blocks are small and
    # the parallelism is across blocks (a multithreaded BLAS would only spin and wait here).
    parallel_for(work, len(tasks), resolve_threads(n_threads))
    total = np.zeros(n)
    for sums in row_sums:  # in task order: the same sums whatever the thread count
        total += sums
    row_means = total / n
    frobenius_sq = 0.0
    for sq in sq_sums:
        frobenius_sq += float(sq)
    return KernelStats(
        row_means=row_means,
        grand_mean=float(row_means.mean()),
        frobenius_norm=float(np.sqrt(frobenius_sq)),
        max_abs=float(np.nan if np.isnan(max_abs).any() else max_abs.max()),
        finite=bool(finite.all()),
    )


def build_kernel_panels(
    block: Callable[..., NDArray[np.float64]],
    n: int,
    *,
    dtype: np.dtype = np.float64,
    n_threads: int | None = None,
    panel_rows: int = PANEL_ROWS,
    block_cols: int = BLOCK_COLS,
    check: Callable[[KernelStats, np.dtype], None] = default_overflow_check,
) -> SymmetricPanels:
    """Evaluate a symmetric kernel matrix block by block into :class:`SymmetricPanels`.

    Parameters
    ----------
    block : callable
        ``block(rows, cols, out=None)`` returns ``K[rows, cols]`` in float64,
        e.g. from :class:`kpca_lib.kernels.KernelEvaluator`.
    n : int
        Number of samples.
    dtype : float64 or float32
        Storage precision.
    n_threads : int, optional
        Worker threads of the build and of the products (default: every
        available CPU, :func:`kpca_lib._threads.available_cpus`; more are
        clipped to that). NumPy and BLAS release the GIL, so blocks are computed
        in parallel; BLAS itself is limited to one thread meanwhile to avoid
        oversubscription. The values do not depend on the number of threads.
    check : callable, optional
        ``check(stats, dtype)`` raises for unusable values (default: a
        ``ValueError`` for infinite or NaN entries, checked after the cast).

    Returns
    -------
    SymmetricPanels
        With ``row_means``, ``grand_mean``, ``frobenius_norm`` and ``stats``.

    Raises
    ------
    ValueError
        If the kernel overflows (infinite values in the storage precision).
    """
    K = SymmetricPanels(n, dtype, panel_rows, n_threads)
    stats = _fill(
        block,
        n,
        K.bounds,
        lambda p, rows, cols: K.panels[p][:, cols],
        dtype=K.dtype,
        n_threads=n_threads,
        block_cols=block_cols,
    )
    check(stats, K.dtype)
    K.row_means = stats.row_means
    K.grand_mean = stats.grand_mean
    K.frobenius_norm = stats.frobenius_norm
    K.stats = stats
    return K


def build_kernel_dense(
    block: Callable[..., NDArray[np.float64]],
    n: int,
    *,
    n_threads: int | None = None,
    panel_rows: int = PANEL_ROWS,
    block_cols: int = BLOCK_COLS,
    check: Callable[[KernelStats, np.dtype], None] = default_overflow_check,
) -> tuple[NDArray[np.float64], KernelStats]:
    """The full float64 ``n×n`` symmetric kernel matrix, computed like :func:`build_kernel_panels`.

    The lower-triangle blocks are computed in parallel threads and mirrored,
    so the matrix is exactly symmetric and holds the same values as the panels.

    Returns
    -------
    K : ndarray of shape (n, n)
    stats : KernelStats
    """
    K = np.empty((n, n))
    bounds = list(range(0, n, panel_rows)) + [n]
    stats = _fill(
        block,
        n,
        bounds,
        lambda p, rows, cols: K[rows, cols],
        dtype=np.dtype(np.float64),
        n_threads=n_threads,
        block_cols=block_cols,
    )
    check(stats, np.dtype(np.float64))
    # Mirror the lower triangle (block by block: no n×n temporary).
    for i in range(0, n, 512):
        rows = slice(i, min(i + 512, n))
        for j in range(0, i + 1, 512):
            cols = slice(j, min(j + 512, n))
            if i == j:
                tri = np.tril_indices(rows.stop - rows.start, -1)
                sub = K[rows, cols]
                sub.T[tri] = sub[tri]
            else:
                K[cols, rows] = K[rows, cols].T
    return K, stats
