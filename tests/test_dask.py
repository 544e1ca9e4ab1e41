"""Dask: grading on a cluster, and approximate kernel PCA of Dask arrays.

The cluster tests run on a real LocalCluster of 2 worker processes (1 thread each),
started once for the module; one test starts its own through ``--cluster local:2``,
as an instructor would. Without ``--cluster`` (and for NumPy input) Dask must not even
be imported: that is checked in a fresh interpreter. Submissions are built with the
helpers of ``test_grading`` (solutions/01_feature_maps.ipynb, 12 points).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_grading import (
    ASSIGNMENT,
    ROOT,
    blank,
    cell,
    sandbox_or_skip,
    student_copy,
    without_run_times,
)

from kpca_lib.approximate_kernel_pca import ApproximateKernelPCA
from kpca_lib.course.cli import main
from kpca_lib.kernel_pca import KernelPCA

SECRET = "test-secret"


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("KPCA_GRADING_SECRET", SECRET)


@pytest.fixture(scope="module")
def client():
    import distributed  # the `test` extra installs Dask: a missing Dask fails, not skips

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


def write(tmp: Path, name: str, nb) -> Path:
    import nbformat

    path = tmp / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def rows(out: Path) -> dict[str, dict]:
    """The gradebook's rows (grades.json), each once, without anything run-specific."""
    data = json.loads((out / "grades.json").read_text())
    ids = [r["submission"] for r in data["submissions"]]
    assert len(ids) == len(set(ids)), "a row is recorded twice"
    with open(out / "grades.csv", newline="") as fh:
        assert [r["submission"] for r in csv.DictReader(fh)] == ids
    for r in data["submissions"]:
        assert r.pop("run_seconds") >= 0  # the machine's speed, not a grade
    return {r["submission"]: r for r in data["submissions"]}


# --------------------------------------------------------------------------- without Dask
def test_dask_is_never_imported_without_cluster(tmp_path):
    """A grade without --cluster, `import kpca_lib` and NumPy fits: no dask module loaded."""
    sub = write(tmp_path, "full", student_copy())
    code = f"""
import sys
import numpy as np
import kpca_lib
from kpca_lib import ApproximateKernelPCA
X = np.random.default_rng(0).normal(size=(300, 2))
for method in ("nystroem", "rff"):
    ApproximateKernelPCA(2, method=method, n_features=40, random_state=0).fit_transform(X)
from kpca_lib.course.cli import main
rc = main(["grade", "--assignment", {ASSIGNMENT!r}, "--out", {str(tmp_path / "out")!r},
           "--sandbox", "none", "--jobs", "1", {str(sub)!r}])
assert rc == 0, rc
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed"))
assert not loaded, loaded
print("no dask")
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 0 and "no dask" in proc.stdout, proc.stderr[-3000:]
    assert rows(tmp_path / "out")["full"]["score"] == 12


def test_cluster_argument_is_checked_before_anything(tmp_path, capsys):
    from kpca_lib.course.grading.run.cluster import parse_cluster

    assert parse_cluster("local:3") == ("local", 3)
    assert parse_cluster("tcp://10.0.0.5:8786") == ("address", "tcp://10.0.0.5:8786")
    for bad in ("local:0", "local", "http://x:1", "nope", str(tmp_path / "missing.json")):
        with pytest.raises(ValueError):
            parse_cluster(bad)
    with pytest.raises(SystemExit) as exc:
        main(["grade", "--assignment", ASSIGNMENT, "--cluster", "local:x", "x.ipynb"])
    assert exc.value.code == 2 and "--cluster must be" in capsys.readouterr().err


# --------------------------------------------------------------------------- grading
def test_cluster_gives_exactly_the_local_gradebook(tmp_path):
    """--cluster local:2 vs --jobs 2: the same grades.json, byte for byte but for the run
    times (rows, scores, checks, messages), including a timeout and a dead kernel (each
    run twice: resume)."""
    sandbox_or_skip()
    full = {q: 3.0 for q in ("q1_phi_p3", "q1_phi_p4", "q1_phi_general", "q2_feature_count")}
    subs = [write(tmp_path, "full", student_copy()), write(tmp_path, "blank", blank())]
    nb = student_copy()
    cell(nb, "q1-p4-answer").source = "import time\nwhile True:\n    time.sleep(0.1)\n"
    subs.append(write(tmp_path, "infinite_loop", nb))
    nb = student_copy()
    cell(nb, "q1-general-answer").source = "import os\nos._exit(1)\n"
    subs.append(write(tmp_path, "kernel_exit", nb))
    (tmp_path / "garbage.ipynb").write_bytes(b"\x89PNG garbage")
    subs.append(tmp_path / "garbage.ipynb")
    common = ["grade", "--assignment", ASSIGNMENT, "--timeout", "5", *map(str, subs)]
    assert main([*common[:3], "--out", str(tmp_path / "local"), "--jobs", "2", *common[3:]]) == 0
    assert main([*common[:3], "--out", str(tmp_path / "cluster"), "--cluster", "local:2",
                 *common[3:]]) == 0
    local, cluster = rows(tmp_path / "local"), rows(tmp_path / "cluster")
    assert cluster == local
    assert without_run_times((tmp_path / "cluster" / "grades.json").read_text()) == (
        without_run_times((tmp_path / "local" / "grades.json").read_text()))
    assert (local["full"]["status"], local["full"]["score"]) == ("graded", 12)
    assert local["infinite_loop"]["status"] == "timeout"
    assert local["infinite_loop"]["questions"] == {**full, "q1_phi_p4": 0}
    assert local["kernel_exit"]["status"] == "crashed"
    assert local["kernel_exit"]["questions"] == {**full, "q1_phi_general": 0}
    assert local["garbage"]["status"] == "invalid"
    for name in local:
        assert (tmp_path / "cluster" / "feedback" / f"{name}.md").read_text() == (
            tmp_path / "local" / "feedback" / f"{name}.md").read_text()


def test_a_worker_killed_mid_batch_loses_no_grade(tmp_path, client):
    """The task of one submission kills its own worker (SIGKILL) on its first attempt,
    after the notebook ran and before the result is returned: the scheduler runs it
    again on a live worker; every row is recorded once, with the grades of a local run."""
    from kpca_lib.course.grading.pipeline import grade_batch
    from kpca_lib.course.grading.run.cluster import ClusterRunner

    sandbox = sandbox_or_skip()
    nb = student_copy()
    cell(nb, "q2-answer").source += "\n# the worker running this dies once\n"
    subs = [write(tmp_path, "doomed", nb), write(tmp_path, "full", student_copy()),
            write(tmp_path, "blank", blank())]
    nb = student_copy()
    cell(nb, "q1-p4-answer").source = cell(blank(), "q1-p4-answer").source
    subs.append(write(tmp_path, "partial", nb))
    flag = tmp_path / "killed-worker-pid"

    def die_once(payload):  # defined here: Dask ships it to the workers by value
        from kpca_lib.course.grading.run.cluster import run_remote

        result = run_remote(payload)
        if "the worker running this dies once" in payload["notebook"] and not flag.exists():
            flag.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    before = set(client.run(os.getpid).values())
    batch = grade_batch(assignment=ASSIGNMENT, submissions=subs, out=tmp_path / "out",
                        solutions=ROOT / "solutions", timeout=30, sandbox=sandbox,
                        cluster=ClusterRunner(client, task=die_once))
    killed = int(flag.read_text())
    assert killed in before  # the first attempt did run on a worker, and killed it
    assert len(batch) == 4 and not any(r.grader_error for r in batch)
    got = {rid: (r["status"], r["score"]) for rid, r in rows(tmp_path / "out").items()}
    assert got == {"doomed": ("graded", 12), "full": ("graded", 12), "blank": ("graded", 0),
                   "partial": ("graded", 9)}
    client.wait_for_workers(2, timeout=120)  # the nanny restarted it
    assert killed not in set(client.run(os.getpid).values())


def test_a_task_that_cannot_run_is_the_graders_failure_not_a_zero(tmp_path, client):
    """Every attempt raises (retries included): the row is `crashed` by the grader, with the
    reason, and the other rows are unaffected; nothing is left pending. (The canary, the
    instructor's solution graded first, runs: the cluster breaks after it.)"""
    from kpca_lib.course.grading.pipeline import grade_batch
    from kpca_lib.course.grading.run.cluster import ClusterRunner, run_remote

    attempts = tmp_path / "attempts"
    attempts.mkdir()
    canary = tmp_path / "canary-ran"

    def broken(payload):
        if not canary.exists():
            canary.touch()
            return run_remote(payload)
        (attempts / str(len(list(attempts.iterdir())))).touch()
        raise OSError(28, "No space left on device")

    subs = [write(tmp_path, "full", student_copy())]
    (tmp_path / "garbage.ipynb").write_text("not json")
    subs.append(tmp_path / "garbage.ipynb")
    batch = grade_batch(assignment=ASSIGNMENT, submissions=subs, out=tmp_path / "out",
                        solutions=ROOT / "solutions", sandbox="none",
                        cluster=ClusterRunner(client, task=broken, retries=1))
    got = rows(tmp_path / "out")
    assert got["full"]["status"] == "crashed" and got["full"]["score"] == 0
    assert "No space left on device" in got["full"]["grader_error"]
    assert "cluster could not run it" in got["full"]["grader_error"]
    assert got["garbage"]["status"] == "invalid"
    assert [r.submission for r in batch if r.grader_error] == ["full"]
    assert len(list(attempts.iterdir())) == 2  # the first attempt and one retry


def test_a_cluster_that_runs_nothing_stops_before_grading(tmp_path, client):
    """The canary cannot run either: the grader stops, says why, and writes no row."""
    from kpca_lib.course.grading.pipeline import CanaryFailed, grade_batch
    from kpca_lib.course.grading.run.cluster import ClusterRunner

    def broken(payload):
        raise OSError(28, "No space left on device")

    subs = [write(tmp_path, "full", student_copy())]
    with pytest.raises(CanaryFailed, match="No space left on device"):
        grade_batch(assignment=ASSIGNMENT, submissions=subs, out=tmp_path / "out",
                    solutions=ROOT / "solutions", sandbox="none",
                    cluster=ClusterRunner(client, task=broken, retries=0))
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_workers_must_run_the_graders_code():
    from kpca_lib.course.grading.run.cluster import check_worker, source_digest

    assert check_worker("none", source_digest()) == ""
    assert "different kpca_lib" in check_worker("none", "0" * 64)


def test_local_cluster_refuses_a_client_without_its_certificate():
    """local:N listens on 127.0.0.1 over mutual TLS: another local user cannot connect."""
    import distributed

    from kpca_lib.course.grading.run.cluster import open_cluster

    with open_cluster("local:1", sandbox="none") as runner:
        address = runner.client.scheduler.address
        assert address.startswith("tls://127.0.0.1:"), address
        assert len(runner.client.scheduler_info()["workers"]) == 1
        # A certificate of its own (another user's cluster) is not this cluster's.
        with pytest.raises((OSError, TimeoutError)):
            distributed.Client(address, security=distributed.Security.temporary(), timeout=5)
        with pytest.raises((OSError, TimeoutError)):
            distributed.Client(address.replace("tls://", "tcp://"), timeout=5)


def test_scheduler_file_and_address_reach_the_same_scheduler(tmp_path, client):
    from kpca_lib.course.grading.run.cluster import open_cluster

    address = client.scheduler.address
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_file.write_text(json.dumps({"address": address}))
    for spec in (address, str(scheduler_file)):
        with open_cluster(spec, sandbox="none") as runner:
            assert runner.client.scheduler.address == address
            assert len(runner.client.scheduler_info()["workers"]) == 2


# --------------------------------------------------------------------------- Dask arrays
@pytest.mark.parametrize("method", ["nystroem", "rff"])
def test_dask_array_fit_equals_in_memory_fit(client, method):
    import dask.array as da
    rng = np.random.default_rng(7)
    X = rng.normal(size=(23_457, 3)) * [1.0, 0.5, 2.0]
    # Uneven row chunks, split columns: the estimator rechunks what it needs.
    Xd = da.from_array(X, chunks=((5000, 8000, 457, 10_000), (2, 1)))
    params = dict(n_components=5, sigma=1.3, method=method, n_features=80, random_state=11)
    mem = ApproximateKernelPCA(**params).fit(X)
    dsk = ApproximateKernelPCA(**params).fit(Xd)
    if method == "nystroem":
        np.testing.assert_array_equal(dsk.feature_map_.landmark_indices_,
                                      mem.feature_map_.landmark_indices_)
    else:
        np.testing.assert_array_equal(dsk.feature_map_.frequencies_, mem.feature_map_.frequencies_)
    np.testing.assert_allclose(dsk.eigenvalues_, mem.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(dsk.components_, mem.components_, atol=1e-8)
    np.testing.assert_allclose(dsk.feature_mean_, mem.feature_mean_, atol=1e-8)
    Z = dsk.transform(Xd)
    assert type(Z).__module__.startswith("dask") and Z.shape == (X.shape[0], 5)
    assert Z.chunks[0] == Xd.chunks[0]
    np.testing.assert_allclose(Z.compute(), mem.transform(X), atol=1e-8)
    Zt = ApproximateKernelPCA(**params).fit_transform(Xd)
    assert type(Zt).__module__.startswith("dask")
    np.testing.assert_allclose(Zt.compute(), mem.transform(X), atol=1e-8)
    assert dsk.n_features_in_ == 3


def test_dask_array_input_is_checked(client):
    import dask.array as da
    X = np.random.default_rng(0).normal(size=(500, 2))
    with pytest.raises(ValueError, match="exact kernel PCA.*ApproximateKernelPCA.*X.compute"):
        KernelPCA(2, kernel="rbf").fit(da.from_array(X, chunks=100))
    with pytest.raises(ValueError, match="fit_inverse_transform"):
        ApproximateKernelPCA(2, method="rff", fit_inverse_transform=True).fit(da.from_array(X))
    bad = X.copy()
    bad[321, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ApproximateKernelPCA(2, method="rff", random_state=0).fit(da.from_array(bad, chunks=100))
    model = ApproximateKernelPCA(2, n_features=50, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        model.transform(da.from_array(np.ones((10, 3))))
    with pytest.raises(ValueError, match="approximate fit.*ApproximateKernelPCA"):
        KernelPCA(2, kernel="rbf").fit(X[:100]).transform(da.from_array(X))
    with pytest.warns(FutureWarning, match="use ApproximateKernelPCA"):  # deprecated, still works
        old = KernelPCA(2, approximation="rff", random_state=0, kernel="rbf").fit(
            da.from_array(X, chunks=100)
        )
    new = ApproximateKernelPCA(2, method="rff", random_state=0).fit(da.from_array(X, chunks=100))
    np.testing.assert_array_equal(old.eigenvalues_, new.eigenvalues_)
