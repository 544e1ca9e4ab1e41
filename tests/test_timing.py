"""CPU timing helpers of the lectures (kpca_lib.timing)."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from kpca_lib.timing import cpu_seconds, loglog_slope


def test_cpu_seconds_calls_f_repeats_times_and_returns_the_best():
    calls = []
    seconds = cpu_seconds(lambda: calls.append(1), repeats=4)
    assert len(calls) == 4
    assert 0.0 <= seconds < 0.5


def test_cpu_seconds_measures_cpu_work_not_sleeping():
    import subprocess
    import sys

    # Sleeping uses no CPU time: a wall-clock timer would report >= 0.2 s. The CPU time is
    # the process's, so this runs in a fresh interpreter: in the test process, threads that
    # other tests left running (a Dask cluster's, a thread pool's) would add theirs.
    code = (
        "import time\n"
        "from kpca_lib.timing import cpu_seconds\n"
        "print(cpu_seconds(lambda: time.sleep(0.2), repeats=1))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 0.1
    work = cpu_seconds(lambda: sum(i * i for i in range(300_000)), repeats=1)
    assert work > 0.0


def test_cpu_seconds_limits_blas_threads_during_the_call_only():
    before = [p["num_threads"] for p in threadpool_info()]
    seen = []
    cpu_seconds(lambda: seen.append([p["num_threads"] for p in threadpool_info()]), repeats=1)
    assert all(t == 1 for t in seen[0])
    assert [p["num_threads"] for p in threadpool_info()] == before
    seen.clear()
    cpu_seconds(lambda: seen.append([p["num_threads"] for p in threadpool_info()]), threads=None)
    assert seen[0] == before


@pytest.mark.parametrize("repeats", [0, -1, 1.5, True, "3"])
def test_cpu_seconds_rejects_bad_repeats(repeats):
    with pytest.raises(ValueError, match="repeats"):
        cpu_seconds(lambda: None, repeats=repeats)


@pytest.mark.parametrize("threads", [0, 2.0, False])
def test_cpu_seconds_rejects_bad_threads(threads):
    with pytest.raises(ValueError, match="threads"):
        cpu_seconds(lambda: None, threads=threads)


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0])
def test_loglog_slope_recovers_the_exponent_of_a_power_law(p):
    sizes = np.array([100, 200, 400, 800])
    assert loglog_slope(sizes, 1e-6 * sizes**p) == pytest.approx(p, abs=1e-12)


def test_loglog_slope_is_a_least_squares_fit():
    sizes = np.array([1.0, 2.0, 4.0])
    costs = np.array([1.0, 4.0, 8.0])          # slopes 2 then 1
    expected = np.polyfit(np.log(sizes), np.log(costs), 1)[0]
    assert loglog_slope(sizes, costs) == pytest.approx(expected)


@pytest.mark.parametrize(
    "sizes, costs, match",
    [
        ([1.0], [1.0], "same length"),
        ([1.0, 2.0], [1.0], "same length"),
        ([1.0, 2.0], [1.0, 0.0], "positive"),
        ([1.0, -2.0], [1.0, 2.0], "positive"),
        ([1.0, np.nan], [1.0, 2.0], "positive"),
        ([3.0, 3.0], [1.0, 2.0], "different"),
    ],
)
def test_loglog_slope_rejects_bad_input(sizes, costs, match):
    with pytest.raises(ValueError, match=match):
        loglog_slope(sizes, costs)
