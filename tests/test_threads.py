"""Thread counts: available CPUs (affinity, cgroup quota), n_jobs, BLAS threads, determinism.

No timing here: what is checked is which thread counts are chosen, what BLAS is allowed
inside the library's worker threads and its eigensolvers, and that the numbers do not
depend on the number of threads.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import kpca_lib._blocked as blocked
import kpca_lib._threads as threads
from kpca_lib import KernelPCA
from kpca_lib._blocked import build_kernel_dense, build_kernel_panels
from kpca_lib._eigen import lanczos_eigh, top_eigh, top_eigh_operator
from kpca_lib._threads import (
    available_cpus,
    caller_blas_threads,
    cgroup_cpu_limit,
    current_blas_threads,
    parallel_for,
    resolve_threads,
)
from kpca_lib._validation import check_n_jobs
from kpca_lib.datasets import make_moons
from kpca_lib.kernels import kernel_block_function


def _blas_counts() -> list[int]:
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


@pytest.fixture(autouse=True)
def _fresh_cpu_count(monkeypatch):
    """Every test reads the CPUs it pretends to have (no answer reused from another test)."""
    monkeypatch.setattr(threads, "_CPUS_TTL", 0.0)


def test_the_cpu_count_is_reused_for_a_moment_then_read_again(monkeypatch):
    # A fit asks several times; the files are read once per _CPUS_TTL seconds.
    reads = []
    monkeypatch.setattr(threads, "_CPUS_TTL", 3600.0)
    monkeypatch.setattr(threads, "_CPUS_SEEN", [])
    monkeypatch.setattr(threads, "_affinity_count", lambda: reads.append(1) or 6)
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda *a, **k: None)
    assert available_cpus() == available_cpus() == 6 and len(reads) == 1
    monkeypatch.setattr(threads, "_CPUS_TTL", 0.0)
    monkeypatch.setattr(threads, "_affinity_count", lambda: reads.append(1) or 3)
    assert available_cpus() == 3 and len(reads) == 2


@pytest.fixture
def cpus(monkeypatch):
    """Pretend the affinity mask holds ``n`` CPUs and there is no cgroup quota."""

    def set_cpus(n: int, quota: float | None = None) -> None:
        monkeypatch.setattr(threads, "_affinity_count", lambda: n)
        monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda *a, **k: quota)

    return set_cpus


@pytest.fixture
def small_tasks(monkeypatch):
    """Split even small matrices into several tasks, so that threads really share the work."""
    monkeypatch.setattr(blocked, "MIN_TASK_ENTRIES", 64)


def _cgroup(tmp_path, proc: str, files: dict[str, str]):
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    proc_file = tmp_path / "proc_self_cgroup"
    proc_file.write_text(proc)
    return root, proc_file


# -- how many CPUs ---------------------------------------------------------------------


def test_available_cpus_honours_the_affinity_mask(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda *a, **k: None)
    assert available_cpus() == 3


@pytest.mark.parametrize(
    "affinity, quota, expected", [(8, 1.5, 2), (8, 0.25, 1), (8, 3.0, 3), (2, 6.0, 2), (4, None, 4)]
)
def test_available_cpus_honours_a_cgroup_quota(cpus, affinity, quota, expected):
    cpus(affinity, quota)
    assert available_cpus() == expected


def test_cgroup_v2_quota_of_the_process_and_its_parents(tmp_path):
    root, proc = _cgroup(
        tmp_path,
        "0::/a/b\n",
        {
            "a/b/cpu.max": "300000 100000\n",
            "a/cpu.max": "150000 100000\n",
            "cpu.max": "max 100000\n",
        },
    )
    assert cgroup_cpu_limit(root, proc) == pytest.approx(1.5)


def test_cgroup_v2_without_a_limit(tmp_path):
    root, proc = _cgroup(tmp_path, "0::/\n", {"cpu.max": "max 100000\n"})
    assert cgroup_cpu_limit(root, proc) is None
    root, proc = _cgroup(tmp_path / "none", "0::/\n", {})
    assert cgroup_cpu_limit(root, proc) is None


def test_cgroup_v2_limit_at_the_mount_root_inside_a_container(tmp_path):
    # /proc/self/cgroup names the host's path; the container sees its own cgroup at the root.
    root, proc = _cgroup(tmp_path, "0::/docker/abc123\n", {"cpu.max": "200000 100000\n"})
    assert cgroup_cpu_limit(root, proc) == pytest.approx(2.0)


@pytest.mark.parametrize("mount", ["cpu", "cpu,cpuacct"])
def test_cgroup_v1_quota_as_fallback(tmp_path, mount):
    root, proc = _cgroup(
        tmp_path,
        "4:cpu,cpuacct:/kubepods/pod1\n0::/\n",
        {
            f"{mount}/kubepods/pod1/cpu.cfs_quota_us": "50000\n",
            f"{mount}/kubepods/pod1/cpu.cfs_period_us": "100000\n",
            f"{mount}/cpu.cfs_quota_us": "-1\n",
            f"{mount}/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup_cpu_limit(root, proc) == pytest.approx(0.5)


def test_cgroup_v1_without_a_quota(tmp_path):
    root, proc = _cgroup(
        tmp_path,
        "1:cpu:/\n",
        {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"},
    )
    assert cgroup_cpu_limit(root, proc) is None


def test_cgroup_v2_limit_wins_over_v1_files(tmp_path):
    root, proc = _cgroup(
        tmp_path,
        "0::/\n1:cpu:/\n",
        {
            "cpu.max": "100000 100000\n",
            "cpu/cpu.cfs_quota_us": "400000\n",
            "cpu/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup_cpu_limit(root, proc) == pytest.approx(1.0)


def test_cgroup_files_that_cannot_be_parsed_are_ignored(tmp_path):
    root, proc = _cgroup(tmp_path, "garbage\n0::/\n", {"cpu.max": "lots\n"})
    assert cgroup_cpu_limit(root, proc) is None


def test_available_cpus_reads_the_cgroup_files(tmp_path, monkeypatch):
    root, proc = _cgroup(tmp_path, "0::/\n", {"cpu.max": "150000 100000\n"})
    monkeypatch.setattr(threads, "CGROUP_ROOT", root)
    monkeypatch.setattr(threads, "PROC_SELF_CGROUP", proc)
    monkeypatch.setattr(threads, "_affinity_count", lambda: 16)
    assert available_cpus() == 2


# -- n_jobs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_jobs, expected",
    [(None, 4), (-1, 4), (1, 1), (3, 3), (4, 4), (64, 4), (-2, 3), (-4, 1), (-9, 1)],
)
def test_resolve_threads_honours_and_clips_n_jobs(cpus, n_jobs, expected):
    cpus(4)
    assert resolve_threads(n_jobs) == expected


@pytest.mark.parametrize("n_jobs", [0, True, 1.5, "2"])
def test_resolve_threads_rejects_bad_n_jobs(n_jobs):
    with pytest.raises(ValueError, match="n_jobs"):
        resolve_threads(n_jobs)


def test_panels_clip_the_thread_count_to_the_available_cpus(cpus, rng):
    cpus(8, quota=2.0)
    X = rng.normal(size=(40, 2))
    P = build_kernel_panels(kernel_block_function("rbf", X), 40, n_threads=32, panel_rows=8)
    assert P.n_threads == 2
    assert build_kernel_panels(kernel_block_function("rbf", X), 40, n_threads=1).n_threads == 1
    assert build_kernel_panels(kernel_block_function("rbf", X), 40).n_threads == 2


@pytest.mark.parametrize("n_jobs, expected", [(None, 3), (-1, 3), (1, 1), (2, 2), (16, 3), (-2, 2)])
def test_kernel_pca_uses_n_jobs_threads_clipped(cpus, small_tasks, monkeypatch, n_jobs, expected):
    cpus(3)
    assert resolve_threads(check_n_jobs(n_jobs)) == expected
    used = []
    original = blocked.parallel_for

    def spy(fn, n_tasks, n_threads):
        used.append(n_threads)
        return original(fn, n_tasks, n_threads)

    monkeypatch.setattr(blocked, "parallel_for", spy)
    X, _ = make_moons(300, noise=0.05, random_state=0)
    monkeypatch.setattr(blocked, "PARALLEL_PRODUCT", 0)  # every product counts as large
    kp = KernelPCA(2, kernel="rbf", gamma=2.0, eigen_solver="lanczos", n_jobs=n_jobs).fit(X)
    assert used and set(used) == {expected}  # the build and every product
    # Below PARALLEL_PRODUCT a product runs on the calling thread (same numbers, no thread start).
    monkeypatch.setattr(blocked, "PARALLEL_PRODUCT", 1 << 40)
    used.clear()
    again = KernelPCA(2, kernel="rbf", gamma=2.0, eigen_solver="lanczos", n_jobs=n_jobs).fit(X)
    assert used[0] == expected and set(used[1:]) == {1}  # the build, then the products
    np.testing.assert_array_equal(again.eigenvectors_, kp.eigenvectors_)
    # transform: the kernel between new and training points, on the same clipped queue
    from kpca_lib import _exact

    queued = []
    real = _exact.parallel_for

    def spy_transform(fn, n_tasks, n_threads):
        queued.append(n_threads)
        return real(fn, n_tasks, n_threads)

    monkeypatch.setattr(_exact, "parallel_for", spy_transform)
    Z = kp.transform(X[:40])
    assert queued and set(queued) == {expected}
    np.testing.assert_allclose(Z, kp.fit_transform(X)[:40], rtol=1e-9, atol=1e-9)


# -- BLAS threads --------------------------------------------------------------------------


def test_parallel_for_runs_every_task_once_with_one_blas_thread(cpus):
    cpus(4)
    before = _blas_counts()
    seen: dict[int, tuple[int, list[int]]] = {}
    lock = threading.Lock()

    def task(i: int) -> None:
        counts = _blas_counts()
        with lock:
            assert i not in seen
            seen[i] = (threading.get_ident(), counts)

    parallel_for(task, 25, 3)
    assert sorted(seen) == list(range(25))
    assert all(counts and set(counts) == {1} for _, counts in seen.values())
    assert _blas_counts() == before  # restored afterwards


def test_parallel_for_hands_out_tasks_dynamically():
    # Task 0 holds its thread until every other task is done: with a static split
    # (half of the tasks per thread) this would never finish.
    others_done = threading.Event()
    done = []

    def task(i: int) -> None:
        if i == 0:
            assert others_done.wait(timeout=60), "the other thread did not take the remaining tasks"
        else:
            done.append(i)
            if len(done) == 9:
                others_done.set()

    parallel_for(task, 10, 2)
    assert sorted(done) == list(range(1, 10))


def test_parallel_for_raises_the_first_error_and_stops():
    started = []

    def task(i: int) -> None:
        started.append(i)
        if i == 2:
            raise ZeroDivisionError("task 2")

    with pytest.raises(ZeroDivisionError, match="task 2"):
        parallel_for(task, 1000, 2)
    assert len(started) < 1000
    parallel_for(task, 0, 2)  # nothing to do


def test_workers_of_build_and_products_use_one_blas_thread(cpus, small_tasks, monkeypatch, rng):
    cpus(2)
    seen = []
    original = blocked.parallel_for

    def spy(fn, n_tasks, n_threads):
        def recorded(i: int) -> None:
            seen.append(tuple(_blas_counts()))
            fn(i)

        return original(recorded, n_tasks, n_threads)

    monkeypatch.setattr(blocked, "parallel_for", spy)
    X = rng.normal(size=(120, 2))
    with threadpool_limits(2):
        P = build_kernel_panels(kernel_block_function("rbf", X), 120, panel_rows=16)
        P.matmat(rng.normal(size=(120, 3)))
    assert len(seen) > 2 and all(set(counts) == {1} for counts in seen)


def _two_blas_threads():
    limits = threadpool_limits(2, user_api="blas")
    if current_blas_threads() != 2:  # pragma: no cover - a BLAS that cannot use two threads
        limits.restore_original_limits()
        pytest.skip("BLAS cannot be set to two threads here")
    return limits


@pytest.mark.parametrize("solver", ["lanczos", "arpack"])
def test_eigensolver_work_has_one_blas_thread_and_products_the_callers(
    cpus, monkeypatch, rng, solver
):
    cpus(4)
    from kpca_lib import _eigen

    A = rng.normal(size=(300, 300))
    A = A @ A.T
    in_products, in_solver = [], []

    def matmat(V):
        in_products.append(current_blas_threads())
        return A @ V

    original = _eigen.verify_eigenpairs

    def verify(*args, **kwargs):
        in_solver.append(current_blas_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(_eigen, "verify_eigenpairs", verify)
    limits = _two_blas_threads()
    try:
        top_eigh_operator(matmat, 300, 3, solver)
        lanczos_eigh(matmat, 300, 3)
        assert current_blas_threads() == 2  # restored
    finally:
        limits.restore_original_limits()
    assert in_products and set(in_products) == {2}
    assert in_solver and set(in_solver) == {1}



def test_the_smallest_eigenvalue_probe_is_a_solver_too(cpus, monkeypatch, rng):
    # The ARPACK run that reports a kernel's most negative eigenvalue (indefinite kernels):
    # its own work on one BLAS thread, the products with the caller's.
    cpus(4)
    import scipy.sparse.linalg

    from kpca_lib import _exact

    A = rng.normal(size=(600, 600))
    A = A + A.T
    in_products, in_solver = [], []
    real_eigsh = scipy.sparse.linalg.eigsh

    def eigsh(*args, **kwargs):
        in_solver.append(current_blas_threads())
        return real_eigsh(*args, **kwargs)

    def matmat(V):
        in_products.append(current_blas_threads())
        return A @ V

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", eigsh)
    limits = _two_blas_threads()
    try:
        smallest = _exact._smallest_eigenvalue(matmat, 600)
        assert current_blas_threads() == 2  # restored
    finally:
        limits.restore_original_limits()
    assert smallest == pytest.approx(np.linalg.eigvalsh(A)[0], rel=1e-3)
    assert in_products and set(in_products) == {2}
    assert in_solver == [1]

def test_products_and_lapack_never_exceed_the_available_cpus(cpus, monkeypatch, rng):
    cpus(8, quota=1.0)
    from kpca_lib import _eigen

    A = rng.normal(size=(100, 100))
    A = A @ A.T
    seen = []

    def matmat(V):
        seen.append(current_blas_threads())
        return A @ V

    original = _eigen._dense_top

    def dense_top(*args, **kwargs):
        seen.append(current_blas_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(_eigen, "_dense_top", dense_top)
    limits = _two_blas_threads()
    try:
        top_eigh_operator(matmat, 100, 3, "lanczos")
        top_eigh(A, 3, "dense")
        with caller_blas_threads():
            seen.append(current_blas_threads())
    finally:
        limits.restore_original_limits()
    assert seen and set(seen) == {1}


# -- the numbers do not depend on the thread count -------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_panels_and_products_are_identical_for_any_thread_count(cpus, small_tasks, rng, dtype):
    cpus(4)
    X = rng.normal(size=(211, 3))
    V = rng.normal(size=(211, 5))
    v = rng.normal(size=(211, 1))
    results = []
    for n_threads in (1, 2, 3, 4):
        P = build_kernel_panels(
            kernel_block_function("rbf", X, gamma=0.3),
            211,
            dtype=dtype,
            n_threads=n_threads,
            panel_rows=16,
            block_cols=24,
        )
        assert P.n_threads == n_threads
        results.append(
            (P.to_dense(), P.row_means, P.frobenius_norm, P.matmat(V), P.centered_matmat(v))
        )
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


def test_dense_kernel_is_identical_for_any_thread_count(cpus, small_tasks, rng):
    cpus(4)
    X = rng.normal(size=(150, 2))
    ref, ref_stats = build_kernel_dense(
        kernel_block_function("rbf", X), 150, n_threads=1, panel_rows=16
    )
    for n_threads in (2, 4):
        K, stats = build_kernel_dense(
            kernel_block_function("rbf", X), 150, n_threads=n_threads, panel_rows=16
        )
        np.testing.assert_array_equal(K, ref)
        np.testing.assert_array_equal(stats.row_means, ref_stats.row_means)
        assert stats.frobenius_norm == ref_stats.frobenius_norm


@pytest.mark.parametrize("solver", ["lanczos", "arpack", "dense"])
def test_kernel_pca_is_identical_for_any_n_jobs(cpus, small_tasks, solver):
    cpus(4)
    X, _ = make_moons(400, noise=0.05, random_state=0)
    fits = [
        KernelPCA(3, kernel="rbf", gamma=2.0, eigen_solver=solver, n_jobs=n_jobs).fit(X)
        for n_jobs in (1, 2, 4)
    ]
    Z = [kp.transform(X[:50]) for kp in fits]
    for kp, z in zip(fits[1:], Z[1:], strict=True):
        np.testing.assert_array_equal(kp.eigenvalues_, fits[0].eigenvalues_)
        np.testing.assert_array_equal(kp.eigenvectors_, fits[0].eigenvectors_)
        np.testing.assert_allclose(z, Z[0], rtol=1e-12, atol=1e-12)


# -- the BLAS controller ---------------------------------------------------------------------


@pytest.fixture
def fresh_controller():
    """``threads._controller`` made anew in the test, and again afterwards for the others."""
    threads._controller.cache_clear()
    yield
    threads._controller.cache_clear()


def _blas_libraries(controller) -> list[tuple[str, str, int]]:
    return sorted(
        (lib.filepath, lib.internal_api, lib.num_threads)
        for lib in controller.select(user_api="blas").lib_controllers
    )


def test_the_blas_controller_finds_what_threadpoolctls_full_scan_finds(fresh_controller):
    from threadpoolctl import ThreadpoolController

    controller = threads._controller()
    if Path("/proc/self/maps").is_file():
        assert isinstance(controller, threads._BLASController)  # the fast path is taken here
    assert _blas_libraries(controller) == _blas_libraries(ThreadpoolController())
    assert _blas_libraries(controller)  # NumPy's BLAS at least
    with threads.blas_threads(1):
        assert set(_blas_counts()) == {1}  # seen by threadpoolctl's own full scan
    assert _blas_libraries(controller) == _blas_libraries(ThreadpoolController())


def test_the_blas_controller_falls_back_to_the_full_scan(fresh_controller, monkeypatch):
    import threadpoolctl

    # threadpoolctl without the private list of controllers: no prefixes, the full scan
    assert threads._blas_prefixes()
    with monkeypatch.context() as patch:
        patch.setattr(threadpoolctl, "_ALL_CONTROLLERS", [])
        assert threads._blas_prefixes() is None
    monkeypatch.setattr(threads, "_blas_prefixes", lambda: None)
    controller = threads._controller()
    assert type(controller) is threadpoolctl.ThreadpoolController
    assert _blas_libraries(controller)
    assert _blas_libraries(controller) == _blas_libraries(threadpoolctl.ThreadpoolController())
    monkeypatch.undo()

    # a private method that changed and fails: the full scan, no error
    def broken(self, path):
        raise TypeError("changed signature")

    threads._controller.cache_clear()
    monkeypatch.setattr(threads._BLASController, "_make_controller_from_path", broken)
    controller = threads._controller()
    assert type(controller) is threadpoolctl.ThreadpoolController
    with threads.blas_threads(1):
        assert set(_blas_counts()) == {1}
