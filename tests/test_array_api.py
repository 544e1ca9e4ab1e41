"""The Array API (device) path of exact kernel PCA, tested without a GPU.

``array_api_strict`` stands in for PyTorch/CuPy: it allows only standard
operations, and its non-default device ``"device1"`` catches a missing
``device=`` (an array created on the default device cannot be mixed with it).
Every result is compared with the NumPy (CPU) path on the same data.
"""

from __future__ import annotations

import subprocess
import sys

import array_api_strict as xp
import numpy as np
import pytest
import sklearn
import sklearn.decomposition

from kpca_lib import KernelPCA
from kpca_lib import _array_api as aa
from kpca_lib._eigen import EigenpairsNotVerifiedError
from kpca_lib._exact import NonPSDKernelWarning
from kpca_lib.datasets import make_moons

ARRAY = type(xp.asarray(0.0))
DEVICE = xp.Device("device1")
CPU = xp.Device("CPU_DEVICE")

KERNELS = {
    "rbf": {"sigma": 0.4},
    "linear": {},
    "poly": {"degree": 3, "gamma": 0.5, "coef0": 1.0},
    "sigmoid": {"gamma": 0.2, "coef0": 1.0},
    "cosine": {},
}


@pytest.fixture(autouse=True)
def _scipy_array_api(monkeypatch):
    # scikit-learn refuses array_api_dispatch without it (SciPy itself is not used here).
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")


def dispatch():
    return sklearn.config_context(array_api_dispatch=True)


def data(n=160, dtype=np.float64, seed=0):
    X, _ = make_moons(n, noise=0.05, random_state=seed)
    return (X + np.array([0.3, -0.2])).astype(dtype)


def on_device(A, device=DEVICE):
    return xp.asarray(A, device=device)


def host(a):
    assert isinstance(a, ARRAY), type(a)
    return np.asarray(xp.asarray(a, device=CPU), dtype=np.float64)


def subspace_agreement(A, B) -> float:
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    return float(np.linalg.svd(qa.T @ qb, compute_uv=False).min())


def assert_close_up_to_sign(A, B, atol):
    for j in range(A.shape[1]):
        a, b = A[:, j], B[:, j]
        s = 1.0 if np.abs(a - b).max() <= np.abs(a + b).max() else -1.0
        np.testing.assert_allclose(a, s * b, rtol=0, atol=atol, err_msg=f"column {j}")


def assert_on(a, dtype, device=DEVICE):
    assert isinstance(a, ARRAY)
    assert a.device == device
    assert a.dtype == dtype


# -- agreement with the NumPy path ----------------------------------------------------------


@pytest.mark.filterwarnings("ignore::kpca_lib.kernel_pca.NonPSDKernelWarning")  # the CPU fit's, sigmoid
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_device_path_agrees_with_numpy(kernel, dtype):
    X, Xnew = data(dtype=dtype), data(40, dtype=dtype, seed=1)
    params = dict(n_components=2, kernel=kernel, fit_inverse_transform=True, **KERNELS[kernel])
    cpu = KernelPCA(**params)
    Z_cpu = cpu.fit_transform(X)
    gpu = KernelPCA(**params)
    with dispatch():
        Z = gpu.fit_transform(on_device(X))
        T = gpu.transform(on_device(Xnew))
        R = gpu.inverse_transform(T)
    xdtype = xp.float32 if dtype == np.float32 else xp.float64
    for a in (Z, T, R, gpu.alphas_, gpu.eigenvectors_, gpu.X_fit_):
        assert_on(a, xdtype)
    # the fitted eigenvalues in the device's widest float, as the NumPy path keeps float64
    assert_on(gpu.eigenvalues_, xp.float64)
    f64 = dtype == np.float64
    top = cpu.eigenvalues_[0]
    np.testing.assert_allclose(host(gpu.eigenvalues_), cpu.eigenvalues_,
                               rtol=1e-10 if f64 else 0, atol=0 if f64 else 1e-5 * top)
    cos = subspace_agreement(host(gpu.eigenvectors_), cpu.eigenvectors_)
    assert cos > (1 - 1e-10 if f64 else 1 - 1e-4), cos
    scale = np.abs(Z_cpu).max()
    atol = (1e-8 if f64 else 1e-3) * scale
    assert_close_up_to_sign(host(Z), Z_cpu, atol)
    assert_close_up_to_sign(host(T), cpu.transform(Xnew), atol)
    R_cpu = cpu.inverse_transform(cpu.transform(Xnew))
    np.testing.assert_allclose(host(R), R_cpu, rtol=0, atol=(1e-7 if f64 else 2e-2) * np.abs(R_cpu).max())
    assert gpu.eigen_solver_ == "subspace"
    assert gpu.n_components_ == 2 and gpu.n_features_in_ == 2
    assert gpu.gamma_ == cpu.gamma_ and gpu.sigma_ == cpu.sigma_


def test_fit_then_transform_equals_fit_transform_and_signs_match_the_cpu():
    X = data()
    cpu = KernelPCA(3, kernel="rbf", sigma=0.4).fit(X)
    with dispatch():
        gpu = KernelPCA(3, kernel="rbf", sigma=0.4).fit(on_device(X))
        Z = gpu.transform(on_device(X))
        Zf = KernelPCA(3, kernel="rbf", sigma=0.4).fit_transform(on_device(X))
    np.testing.assert_allclose(host(Z), host(Zf), atol=1e-10)
    # Same sign convention (largest-magnitude entry positive): equal, not only up to sign.
    np.testing.assert_allclose(host(gpu.eigenvectors_), cpu.eigenvectors_, atol=1e-9)
    np.testing.assert_allclose(host(gpu.alphas_), cpu.alphas_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(host(gpu.explained_variance_), cpu.explained_variance_, rtol=1e-10)


def test_alphas_normalise_the_components_and_kernel_matrix_c_stays_on_device():
    X = data()
    with dispatch():
        est = KernelPCA(4, kernel="rbf", sigma=0.5).fit(on_device(X))
        K_c = est.kernel_matrix_c()
    assert_on(K_c, xp.float64)
    A = host(est.alphas_)
    np.testing.assert_allclose(A.T @ host(K_c) @ A, np.eye(4), atol=1e-9)
    np.testing.assert_allclose(host(K_c), KernelPCA(4, kernel="rbf", sigma=0.5).fit(X).kernel_matrix_c(),
                               atol=1e-12)


@pytest.mark.parametrize("solver", ["dense", "randomized", "lanczos"])
def test_solvers_and_every_component(solver):
    X = data(100)
    cpu = KernelPCA(5, kernel="rbf", sigma=0.5).fit(X)
    with dispatch():
        gpu = KernelPCA(5, kernel="rbf", sigma=0.5, eigen_solver=solver, random_state=3).fit(
            on_device(X)
        )
    assert gpu.eigen_solver_ == ("dense" if solver == "dense" else "subspace")
    np.testing.assert_allclose(host(gpu.eigenvalues_), cpu.eigenvalues_, rtol=1e-10)


def test_n_components_none_keeps_the_nonzero_components_as_the_cpu():
    X = data(80)
    cpu = KernelPCA(kernel="linear").fit(X)
    with dispatch():
        gpu = KernelPCA(kernel="linear").fit(on_device(X))
    assert gpu.eigen_solver_ == "dense"
    assert gpu.n_components_ == cpu.n_components_ == 2
    np.testing.assert_allclose(host(gpu.eigenvalues_), cpu.eigenvalues_, rtol=1e-10)


@pytest.mark.parametrize(("n_components", "remove"), [(None, False), (2, True)])
def test_no_component_left_is_an_empty_result_and_a_warning_as_the_cpu(n_components, remove):
    X = np.ones((12, 2))
    with pytest.warns(UserWarning, match="no variance.*0 columns"):
        cpu = KernelPCA(n_components, kernel="rbf", remove_zero_eig=remove).fit_transform(X)
    with dispatch(), pytest.warns(UserWarning, match="no variance.*0 columns"):
        est = KernelPCA(n_components, kernel="rbf", remove_zero_eig=remove)
        Z = est.fit_transform(on_device(X))
        assert_on(Z, xp.float64)
        assert Z.shape == cpu.shape == (12, 0)
        assert est.transform(on_device(X)).shape == (12, 0)


@pytest.mark.parametrize("solver", ["auto", "dense"])
@pytest.mark.parametrize("params", [{"gamma": 0.2, "coef0": 1.0}, {"gamma": 2.0, "coef0": -1.0}])
def test_an_indefinite_kernel_is_reported_as_on_the_cpu(solver, params):
    X = data()
    with pytest.warns(NonPSDKernelWarning, match=r"clearly negative eigenvalue \((-[\d.]+);") as cpu:
        KernelPCA(2, kernel="sigmoid", eigen_solver=solver, **params).fit(X)
    with dispatch(), pytest.warns(NonPSDKernelWarning, match="clearly negative") as dev:
        est = KernelPCA(2, kernel="sigmoid", eigen_solver=solver, **params).fit(on_device(X))
    assert est.eigen_solver_ == ("dense" if solver == "dense" else "subspace")

    def smallest(record):
        (message,) = [str(w.message) for w in record if w.category is NonPSDKernelWarning]
        return float(message.split("eigenvalue (")[1].split(";")[0])

    assert smallest(dev) == pytest.approx(smallest(cpu), rel=1e-3)


def test_the_smallest_eigenvalue_bound_is_never_below_the_truth():
    rng = np.random.default_rng(3)
    for trial in range(6):
        n = 60
        Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
        lam = rng.normal(size=n) * 10.0 ** rng.uniform(-2, 2, size=n)
        A = (Q * lam) @ Q.T
        A_dev = on_device(A)
        minus = (-A_dev).__matmul__
        for products in (8, 24, 400):  # stopped early or converged: still an upper bound
            bound = aa.subspace_iteration(
                minus, n, 1, 8, xp, device=DEVICE, dtype=xp.float64,
                tol=1e-3, max_products=products, dtype_eps=2.2e-16, matrix_norm=1.0, seed=trial,
            )
            assert -float(host(bound.theta)[0]) >= lam.min() - 1e-9 * np.abs(lam).max()
        value = aa.smallest_eigenvalue_bound(
            A_dev.__matmul__, n, xp, device=DEVICE, dtype=xp.float64, dtype_eps=2.2e-16,
            matrix_norm=float(np.linalg.norm(A)),
        )
        assert lam.min() - 1e-9 * np.abs(lam).max() <= value <= lam.min() + 1e-2 * np.abs(lam).max()


def test_float32_in_float32_kernel_and_out():
    X = data(dtype=np.float32)
    with dispatch():
        est = KernelPCA(2, kernel="rbf", sigma=0.4).fit(on_device(X))
        assert_on(est.kernel_matrix_c(), xp.float32)
        assert_on(est.transform(on_device(X)), xp.float32)
        # float64 points for a float32 fit: float64 out, as the CPU path.
        assert_on(est.transform(on_device(X.astype(np.float64))), xp.float64)


def test_a_device_model_pickles():
    import pickle

    X = data(60)
    with dispatch():
        est = KernelPCA(2, kernel="rbf", sigma=0.4, fit_inverse_transform=True).fit(on_device(X))
        again = pickle.loads(pickle.dumps(est))
        T = again.transform(on_device(X))
        np.testing.assert_allclose(host(T), host(est.transform(on_device(X))), atol=1e-12)
        assert_on(again.inverse_transform(T), xp.float64)


def test_results_stay_on_the_default_device_too():
    X = data(60)
    with dispatch():
        Z = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(xp.asarray(X))
    assert_on(Z, xp.float64, CPU)


# -- the blocked kernel build -----------------------------------------------------------------


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_blocked_kernel_equals_unblocked(kernel):
    from kpca_lib.kernels import make_kernel

    X = on_device(data(50))
    spec = make_kernel(kernel, n_features=2, **KERNELS[kernel])
    prep = aa.prepare(spec, X, xp, centred=True)
    whole = aa.build_kernel(prep, xp, budget=1 << 40)
    tiny = aa.build_kernel(prep, xp, budget=1)  # one row per block
    np.testing.assert_allclose(host(tiny.K), host(whole.K), rtol=1e-13, atol=1e-14)
    K = host(tiny.K)
    np.testing.assert_array_equal(K, K.T)  # mirrored: exactly symmetric
    assert tiny.frobenius == pytest.approx(np.linalg.norm(K), rel=1e-12)


def test_fit_with_a_tiny_block_budget_gives_the_same_model(monkeypatch):
    X, Xnew = data(), data(30, seed=1)
    with dispatch():
        ref = KernelPCA(2, kernel="rbf", sigma=0.4).fit(on_device(X))
        T_ref = ref.transform(on_device(Xnew))
        monkeypatch.setattr(aa, "BLOCK_BYTES", 64)
        est = KernelPCA(2, kernel="rbf", sigma=0.4).fit(on_device(X))
        T = est.transform(on_device(Xnew))
    np.testing.assert_allclose(host(est.eigenvalues_), host(ref.eigenvalues_), rtol=1e-12)
    np.testing.assert_allclose(host(T), host(T_ref), atol=1e-10)


# -- refusals and verification ------------------------------------------------------------


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel": "precomputed"}, "kernel='precomputed'.*NumPy array"),
        ({"kernel": lambda x, y: float(x @ y)}, "callable kernel.*named kernel"),
        ({"kernel": "rbf", "approximation": "nystroem"}, "approximation='nystroem'.*None"),
        ({"kernel": "rbf", "eigen_solver": "arpack"}, "eigen_solver='arpack'"),
        ({"kernel": "rbf", "kernel_dtype": "float32"}, "kernel_dtype='float32'.*float32"),
    ],
)
def test_unsupported_options_raise_a_clear_value_error(params, match):
    X = data(40)
    with dispatch(), pytest.raises(ValueError, match=match):
        KernelPCA(2, **params).fit(on_device(X @ X.T if params["kernel"] == "precomputed" else X))


def test_too_few_products_is_not_verified():
    with dispatch(), pytest.raises(EigenpairsNotVerifiedError) as info:
        KernelPCA(3, kernel="rbf", sigma=0.3, eigen_solver="lanczos", max_iter=1).fit(
            on_device(data())
        )
    message = str(info.value)
    assert "subspace" in message and "residual too large" in message and "Fix:" in message


def test_a_wrong_vector_is_caught(monkeypatch):
    real = aa.subspace_iteration

    def wrong(*args, **kwargs):
        it = real(*args, **kwargs)
        U = xp.concat([it.U[:, :1], xp.flip(it.U[:, 1:], axis=0)], axis=1)  # not an eigenvector
        return aa._Iteration(it.theta, U, True, "", it.products, it.scale)

    monkeypatch.setattr(aa, "subspace_iteration", wrong)
    with dispatch(), pytest.raises(EigenpairsNotVerifiedError, match="orthonormal|residual"):
        KernelPCA(2, kernel="rbf", sigma=0.4, eigen_solver="randomized").fit(on_device(data()))
    with dispatch():  # "auto" promised a verified result: it falls back to eigh on the device
        est = KernelPCA(2, kernel="rbf", sigma=0.4).fit(on_device(data()))
    assert est.eigen_solver_ == "dense"


def test_a_missed_eigenvalue_is_caught():
    # Eigenvalues 3, 2.5, 2: the pairs (3, q0) and (2, q2) are exact, but 2.5 was missed.
    n = 30
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((n, 3)))
    A = on_device(Q @ np.diag([3.0, 2.5, 2.0]) @ Q.T)

    def verify(values, vectors):
        return aa.verify_on_device(
            A.__matmul__, n, len(values), on_device(np.array(values)), on_device(vectors), xp,
            tol=1e-10, norm_estimate=3.0, matrix_norm=None, dtype_eps=2.2e-16,
        )

    assert verify([3.0, 2.5], Q[:, :2]).ok
    check = verify([3.0, 2.0], Q[:, [0, 2]])
    assert not check.ok and check.max_residual < 1e-12
    assert "missed eigenvalue" in check.failures[0] and check.deflated_top == pytest.approx(2.5)
    check = verify([3.0], np.linalg.qr(Q[:, [0]] + 1e-3 * Q[:, [1]])[0])
    assert not check.ok and "residual too large" in check.failures[0]


def test_transform_refuses_arrays_from_elsewhere():
    X = data(60)
    with dispatch():
        est = KernelPCA(2, kernel="rbf", sigma=0.4, fit_inverse_transform=True).fit(on_device(X))
        with pytest.raises(ValueError, match="fitted on the Array API path"):
            est.transform(X)
        with pytest.raises(ValueError, match="fitted on the Array API path"):
            est.transform(xp.asarray(X))  # another device
        with pytest.raises(ValueError, match="one column per component"):
            est.inverse_transform(on_device(X[:, :1]))
        cpu = KernelPCA(2, kernel="rbf", sigma=0.4).fit(X)
        with pytest.raises(ValueError, match="fitted on NumPy data"):
            cpu.transform(on_device(X))


# -- dispatch off, NumPy input, imports ---------------------------------------------------


def test_numpy_input_with_dispatch_on_is_the_cpu_path_bit_for_bit():
    X = data()
    ref = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(X)
    with dispatch():
        Z = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(X)
    assert isinstance(Z, np.ndarray)
    np.testing.assert_array_equal(Z, ref)


def test_dispatch_off_converts_or_refuses_as_scikit_learn():
    X = data(60)
    ref = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(X)
    # Default device: converted to NumPy (np.asarray), the CPU path, NumPy out.
    Z = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(xp.asarray(X))
    assert isinstance(Z, np.ndarray)
    np.testing.assert_array_equal(Z, ref)
    # Another device: array_api_strict refuses the conversion (scikit-learn's own estimator
    # lets its RuntimeError through; ours says which input, as for any unconvertible X).
    with pytest.raises(RuntimeError, match="convert"):
        sklearn.decomposition.KernelPCA(2).fit(on_device(X))
    with pytest.raises(ValueError, match="X could not be converted.*device1"):
        KernelPCA(2, kernel="rbf", sigma=0.4).fit(on_device(X))


def test_the_numpy_path_imports_no_array_library():
    code = (
        "import sys, numpy as np\n"
        "from kpca_lib import KernelPCA\n"
        "KernelPCA(2, kernel='rbf').fit_transform(np.random.default_rng(0).random((50, 3)))\n"
        "bad = [m for m in ('array_api_strict', 'torch', 'cupy', 'kpca_lib._array_api') "
        "if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


_SKLEARN_CHECK = """
from sklearn.utils.estimator_checks import check_array_api_input
from kpca_lib import KernelPCA

for dtype in ("float64", "float32"):
    for device in (None, "device1"):
        for kernel in ("rbf", "linear", "poly", "sigmoid", "cosine"):
            est = KernelPCA(3, kernel=kernel, fit_inverse_transform=True)
            check_array_api_input("KernelPCA", est, array_namespace="array_api_strict",
                                  device_name=device, dtype_name=dtype,
                                  check_values=dtype == "float64")
print("passed")
"""


def test_scikit_learns_own_array_api_check_passes():
    # scikit-learn's check_array_api_input (namespace, device and dtype of every fitted
    # attribute and output, values against the NumPy fit) needs SCIPY_ARRAY_API=1 before
    # SciPy is imported: a fresh interpreter.
    import os
    import subprocess
    import sys

    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run([sys.executable, "-c", _SKLEARN_CHECK], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "passed", done.stderr[-3000:]


def test_float32_components_below_rounding_are_warned_about_as_on_the_cpu():
    # A wide Gaussian's spectrum decays fast: 30 components reach far below float32's
    # rounding level of the kernel (2^-24 ||K||_F). Never silent zeros, on the device either
    # (the CPU's warning, kpca_lib._exact._check_float32_accuracy, names the device's cause).
    X = data(n=200, dtype=np.float32)
    with dispatch(), pytest.warns(UserWarning, match=(
        r"X is float32, so the kernel matrix on the device is float32: \d+ of the 30 requested "
        r"components .* Pass X in float64"
    )):
        est = KernelPCA(30, kernel="rbf", sigma=3.0).fit(on_device(X))
    values = host(est.eigenvalues_)
    assert np.any(values == 0) and np.all(values[:2] > 0)


def test_a_missed_copy_far_below_the_norm_is_caught_on_the_device():
    # As on the CPU (tests/test_solvers.py): a missed eigenvalue at 5e-10·‖A‖ shows in the
    # random block with a weight of about 1/√n; the check must not stop as if the
    # complement were exhausted.
    n = 400
    rng = np.random.default_rng(1)
    d = 1e-12 * rng.uniform(0.0, 1.0, n)
    d[:4] = [1.0, 0.5, 5e-10, 5e-10 / 3]
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = on_device(0.5 * ((Q * d) @ Q.T + ((Q * d) @ Q.T).T))

    def verify(values, vectors):
        return aa.verify_on_device(
            A.__matmul__, n, len(values), on_device(np.array(values)), on_device(vectors), xp,
            tol=1e-10, norm_estimate=1.0, matrix_norm=None, dtype_eps=2.2e-16,
        )

    assert verify(list(d[:3]), Q[:, :3]).ok
    check = verify(list(d[[0, 1, 3]]), Q[:, [0, 1, 3]])
    assert not check.ok and "missed eigenvalue" in check.failures[0]
