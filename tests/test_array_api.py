"""The Array API (device) path of exact kernel PCA, tested without a GPU, on two libraries.

Every test runs on

* ``array_api_strict``: it allows only standard operations, and its non-default device
  ``"device1"`` catches a missing ``device=`` (an array created on the default device
  cannot be mixed with it);
* PyTorch on the CPU (``torch.device("cpu")``; its ``"meta"`` device plays another
  device in the refusals): the library users actually pass, where ``Tensor.size`` is
  a method, tensors may require grad, and ``np.asarray`` works with dispatch off.

Without PyTorch the torch half is skipped, loudly (the reason is in pytest's summary:
install it with ``.venv/bin/pip install torch==2.13.0``, a CPU build, as ``.ci/run``
does); under CI (``CI`` set, in the repository that has ``.ci/run``) a missing PyTorch
fails instead. Every result is compared
with the NumPy (CPU) path on the same data.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import array_api_strict
import numpy as np
import pytest
import sklearn
import sklearn.decomposition
from sklearn.externals.array_api_compat import array_namespace

from kpca_lib import KernelPCA
from kpca_lib import _array_api as aa
from kpca_lib._eigen import EigenpairsNotVerifiedError
from kpca_lib._exact import NonPSDKernelWarning, _smallest_eigenvalue
from kpca_lib._randomized import randomized_eigh
from kpca_lib._verify import verify_eigenpairs
from kpca_lib.datasets import make_moons

ROOT = Path(__file__).resolve().parents[1]

#: What .ci/run installs (a CPU build; any other spec would fetch a multi-GB CUDA build).
TORCH_PIN = "torch==2.13.0"

KERNELS = {
    "rbf": {"sigma": 0.4},
    "linear": {},
    "poly": {"degree": 3, "gamma": 0.5, "coef0": 1.0},
    "sigmoid": {"gamma": 0.2, "coef0": 1.0},
    "cosine": {},
}


def import_torch():
    """PyTorch, or a loud skip (a failure under CI, where .ci/run installs it)."""
    try:
        import torch
    except ImportError as exc:
        missing = f"PyTorch is not installed ({exc})"
        # Under CI, where .ci/run installs it: an error. The student edition has no .ci/run
        # (and no PyTorch in its lock): there the torch half skips, as anywhere else.
        if os.environ.get("CI") and (ROOT / ".ci" / "run").is_file():
            pytest.fail(f"{missing}, but under CI it must be: .ci/run installs it ({TORCH_PIN}).")
        pytest.skip(
            f"{missing}: the Array API tests on torch CPU are SKIPPED. Install the CPU build "
            f"with `.venv/bin/pip install {TORCH_PIN}` (.ci/run does)."
        )
    return torch


def gpu_backends() -> list[str]:
    """The GPU backends this machine has: PyTorch on CUDA, CuPy (none in CI, which has no GPU)."""
    found = []
    try:
        import torch

        if torch.cuda.is_available():
            found.append("torch-cuda")
    except ImportError:
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            found.append("cupy")
    except Exception:  # noqa: BLE001 (not installed, or no CUDA driver: no CuPy backend)
        pass
    return found


GPU_BACKENDS = gpu_backends()


class Backend:
    """One Array API library: its namespace, a device to compute on and another device."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.namespace = name.split("-")[0]  # the name scikit-learn's checks know
        self.devices = ["None", "device1"] if name == "array_api_strict" else ["cpu"]
        if name == "array_api_strict":
            self.module = array_api_strict
            self.xp = array_api_strict
            self.device = array_api_strict.Device("device1")  # not the default: catches device=
            self.cpu = array_api_strict.Device("CPU_DEVICE")  # the default device
            self.other = self.cpu  # another device than self.device
        elif name == "cupy":
            import cupy

            self.module = cupy
            self.xp = array_namespace(cupy.empty(0))
            self.device = self.cpu = cupy.cuda.Device(0)
            self.other = cupy.cuda.Device(1) if cupy.cuda.runtime.getDeviceCount() > 1 else None
            self.devices = ["None"]
        else:
            torch = import_torch()
            self.module = torch
            self.xp = array_namespace(torch.empty(0))  # the namespace scikit-learn dispatches to
            self.device = self.cpu = torch.device("cpu")
            self.other = torch.device("meta")  # shapes only: a device no data can be mixed with
            if name == "torch-cuda":
                self.device = torch.device("cuda", torch.cuda.current_device())
                self.other = self.cpu
                self.devices = ["cuda"]
        self.array = type(self.xp.asarray(0.0, device=self.device))

    def on_device(self, A, device=None):
        return self.xp.asarray(A, device=self.device if device is None else device)

    def host(self, a):
        assert isinstance(a, self.array), type(a)
        if self.namespace == "torch":
            return a.detach().cpu().numpy().astype(np.float64)
        if self.namespace == "cupy":
            return self.module.asnumpy(a).astype(np.float64)
        return np.asarray(self.xp.asarray(a, device=self.cpu), dtype=np.float64)

    def assert_on(self, a, dtype, device=None):
        assert isinstance(a, self.array), type(a)
        assert a.device == (self.device if device is None else device), a.device
        assert a.dtype == dtype, a.dtype


@pytest.fixture(params=["array_api_strict", "torch", *GPU_BACKENDS])
def be(request):
    return Backend(request.param)


def test_gpu_backends_run_where_there_is_a_gpu():
    # The whole file runs on PyTorch CUDA and on CuPy where this machine has them (and
    # scikit-learn's own Array API checks then include every device it knows); CI has no GPU.
    if not GPU_BACKENDS:
        pytest.skip("no GPU here: the tests run on array-api-strict and PyTorch CPU only")
    assert set(GPU_BACKENDS) <= {"torch-cuda", "cupy"}


@pytest.fixture(autouse=True)
def _scipy_array_api(monkeypatch):
    # scikit-learn refuses array_api_dispatch without it (SciPy itself is not used here).
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")


def dispatch():
    return sklearn.config_context(array_api_dispatch=True)


def data(n=160, dtype=np.float64, seed=0):
    X, _ = make_moons(n, noise=0.05, random_state=seed)
    return (X + np.array([0.3, -0.2])).astype(dtype)


def subspace_agreement(A, B) -> float:
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    return float(np.linalg.svd(qa.T @ qb, compute_uv=False).min())


def assert_close_up_to_sign(A, B, atol):
    for j in range(A.shape[1]):
        a, b = A[:, j], B[:, j]
        s = 1.0 if np.abs(a - b).max() <= np.abs(a + b).max() else -1.0
        np.testing.assert_allclose(a, s * b, rtol=0, atol=atol, err_msg=f"column {j}")


# -- agreement with the NumPy path ----------------------------------------------------------


@pytest.mark.filterwarnings(
    "ignore::kpca_lib.kernel_pca.NonPSDKernelWarning"
)  # the be.cpu fit's, sigmoid
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_device_path_agrees_with_numpy(be, kernel, dtype):
    X, Xnew = data(dtype=dtype), data(40, dtype=dtype, seed=1)
    params = dict(n_components=2, kernel=kernel, fit_inverse_transform=True, **KERNELS[kernel])
    cpu = KernelPCA(**params)
    Z_cpu = cpu.fit_transform(X)
    gpu = KernelPCA(**params)
    with dispatch():
        Z = gpu.fit_transform(be.on_device(X))
        T = gpu.transform(be.on_device(Xnew))
        R = gpu.inverse_transform(T)
    xdtype = be.xp.float32 if dtype == np.float32 else be.xp.float64
    for a in (Z, T, R, gpu.alphas_, gpu.eigenvectors_, gpu.X_fit_):
        be.assert_on(a, xdtype)
    # the fitted eigenvalues in the device's widest float, as the NumPy path keeps float64
    be.assert_on(gpu.eigenvalues_, be.xp.float64)
    f64 = dtype == np.float64
    top = cpu.eigenvalues_[0]
    np.testing.assert_allclose(
        be.host(gpu.eigenvalues_),
        cpu.eigenvalues_,
        rtol=1e-10 if f64 else 0,
        atol=0 if f64 else 1e-5 * top,
    )
    cos = subspace_agreement(be.host(gpu.eigenvectors_), cpu.eigenvectors_)
    assert cos > (1 - 1e-10 if f64 else 1 - 1e-4), cos
    scale = np.abs(Z_cpu).max()
    atol = (1e-8 if f64 else 1e-3) * scale
    assert_close_up_to_sign(be.host(Z), Z_cpu, atol)
    assert_close_up_to_sign(be.host(T), cpu.transform(Xnew), atol)
    R_cpu = cpu.inverse_transform(cpu.transform(Xnew))
    np.testing.assert_allclose(
        be.host(R), R_cpu, rtol=0, atol=(1e-7 if f64 else 2e-2) * np.abs(R_cpu).max()
    )
    assert gpu.eigen_solver_ == cpu.eigen_solver_  # one solver choice for every namespace
    assert gpu.n_components_ == 2 and gpu.n_features_in_ == 2
    assert gpu.gamma_ == cpu.gamma_ and gpu.sigma_ == cpu.sigma_


def test_fit_then_transform_equals_fit_transform_and_signs_match_the_cpu(be):
    X = data()
    cpu = KernelPCA(3, kernel="rbf", sigma=0.4).fit(X)
    with dispatch():
        gpu = KernelPCA(3, kernel="rbf", sigma=0.4).fit(be.on_device(X))
        Z = gpu.transform(be.on_device(X))
        Zf = KernelPCA(3, kernel="rbf", sigma=0.4).fit_transform(be.on_device(X))
    np.testing.assert_allclose(be.host(Z), be.host(Zf), atol=1e-10)
    # Same sign convention (largest-magnitude entry positive): equal, not only up to sign.
    np.testing.assert_allclose(be.host(gpu.eigenvectors_), cpu.eigenvectors_, atol=1e-9)
    np.testing.assert_allclose(be.host(gpu.alphas_), cpu.alphas_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(
        be.host(gpu.explained_variance_), cpu.explained_variance_, rtol=1e-10
    )


def test_alphas_normalise_the_components_and_kernel_matrix_c_stays_on_device(be):
    X = data()
    with dispatch():
        est = KernelPCA(4, kernel="rbf", sigma=0.5).fit(be.on_device(X))
        K_c = est.kernel_matrix_c()
    be.assert_on(K_c, be.xp.float64)
    A = be.host(est.alphas_)
    np.testing.assert_allclose(A.T @ be.host(K_c) @ A, np.eye(4), atol=1e-9)
    np.testing.assert_allclose(
        be.host(K_c), KernelPCA(4, kernel="rbf", sigma=0.5).fit(X).kernel_matrix_c(), atol=1e-12
    )


@pytest.mark.parametrize("solver", ["dense", "randomized", "lanczos"])
def test_solvers_and_every_component(be, solver):
    X = data(100)
    cpu = KernelPCA(5, kernel="rbf", sigma=0.5).fit(X)
    with dispatch():
        gpu = KernelPCA(5, kernel="rbf", sigma=0.5, eigen_solver=solver, random_state=3).fit(
            be.on_device(X)
        )
    # Block Lanczos is NumPy's: on another namespace the iterative requests run the shared
    # randomized subspace iteration.
    assert gpu.eigen_solver_ == ("dense" if solver == "dense" else "randomized")
    np.testing.assert_allclose(be.host(gpu.eigenvalues_), cpu.eigenvalues_, rtol=1e-10)


def test_n_components_none_keeps_the_nonzero_components_as_the_cpu(be):
    X = data(80)
    cpu = KernelPCA(kernel="linear").fit(X)
    with dispatch():
        gpu = KernelPCA(kernel="linear").fit(be.on_device(X))
    assert gpu.eigen_solver_ == "dense"
    assert gpu.n_components_ == cpu.n_components_ == 2
    np.testing.assert_allclose(be.host(gpu.eigenvalues_), cpu.eigenvalues_, rtol=1e-10)


@pytest.mark.parametrize(("n_components", "remove"), [(None, False), (2, True)])
def test_no_component_left_is_an_empty_result_and_a_warning_as_the_cpu(be, n_components, remove):
    X = np.ones((12, 2))
    with pytest.warns(UserWarning, match="no variance.*0 columns"):
        cpu = KernelPCA(n_components, kernel="rbf", remove_zero_eig=remove).fit_transform(X)
    with dispatch(), pytest.warns(UserWarning, match="no variance.*0 columns"):
        est = KernelPCA(n_components, kernel="rbf", remove_zero_eig=remove)
        Z = est.fit_transform(be.on_device(X))
        be.assert_on(Z, be.xp.float64)
        assert Z.shape == cpu.shape == (12, 0)
        assert est.transform(be.on_device(X)).shape == (12, 0)


@pytest.mark.parametrize("solver", ["auto", "dense", "randomized"])
@pytest.mark.parametrize("params", [{"gamma": 0.2, "coef0": 1.0}, {"gamma": 2.0, "coef0": -1.0}])
def test_an_indefinite_kernel_is_reported_as_on_the_cpu(be, solver, params):
    X = data()
    with pytest.warns(
        NonPSDKernelWarning, match=r"clearly negative eigenvalue \((-[\d.]+);"
    ) as cpu:
        KernelPCA(2, kernel="sigmoid", eigen_solver=solver, **params).fit(X)
    with dispatch(), pytest.warns(NonPSDKernelWarning, match="clearly negative") as dev:
        est = KernelPCA(2, kernel="sigmoid", eigen_solver=solver, **params).fit(be.on_device(X))
    assert est.eigen_solver_ == ("randomized" if solver == "randomized" else "dense")  # n = 160

    def smallest(record):
        (message,) = [str(w.message) for w in record if w.category is NonPSDKernelWarning]
        return float(message.split("eigenvalue (")[1].split(";")[0])

    assert smallest(dev) == pytest.approx(smallest(cpu), rel=1e-3)


def test_the_smallest_eigenvalue_bound_is_never_below_the_truth(be):
    rng = np.random.default_rng(3)
    for trial in range(6):
        n = 60
        Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
        lam = rng.normal(size=n) * 10.0 ** rng.uniform(-2, 2, size=n)
        A = (Q * lam) @ Q.T
        A_dev = be.on_device(A)
        minus = (-A_dev).__matmul__
        for products in (8, 24, 400):  # stopped early or converged: still an upper bound
            theta, _, _ = randomized_eigh(
                minus, n, 1, tol=1e-3, max_iter=products, iterated_power=0, oversampling=7,
                random_state=trial, like=A_dev,
            )
            assert -float(be.host(theta)[0]) >= lam.min() - 1e-9 * np.abs(lam).max()
        value = _smallest_eigenvalue(A_dev.__matmul__, n, like=A_dev)
        assert lam.min() - 1e-9 * np.abs(lam).max() <= value <= lam.min() + 1e-2 * np.abs(lam).max()


def test_float32_in_float32_kernel_and_out(be):
    X = data(dtype=np.float32)
    with dispatch():
        est = KernelPCA(2, kernel="rbf", sigma=0.4).fit(be.on_device(X))
        be.assert_on(est.kernel_matrix_c(), be.xp.float32)
        be.assert_on(est.transform(be.on_device(X)), be.xp.float32)
        # float64 points for a float32 fit: float64 out, as the be.cpu path.
        be.assert_on(est.transform(be.on_device(X.astype(np.float64))), be.xp.float64)


def test_a_device_model_pickles(be):
    import pickle

    X = data(60)
    with dispatch():
        est = KernelPCA(2, kernel="rbf", sigma=0.4, fit_inverse_transform=True).fit(be.on_device(X))
        again = pickle.loads(pickle.dumps(est))
        T = again.transform(be.on_device(X))
        np.testing.assert_allclose(be.host(T), be.host(est.transform(be.on_device(X))), atol=1e-12)
        be.assert_on(again.inverse_transform(T), be.xp.float64)


def test_results_stay_on_the_default_device_too(be):
    X = data(60)
    with dispatch():
        Z = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(be.xp.asarray(X))
    be.assert_on(Z, be.xp.float64, be.cpu)


# -- the blocked kernel build -----------------------------------------------------------------


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_blocked_kernel_equals_unblocked(be, kernel):
    from kpca_lib.kernels import KernelEvaluator, make_kernel

    X = be.on_device(data(50))
    spec = make_kernel(kernel, n_features=2, **KERNELS[kernel])
    ev = KernelEvaluator(spec, X, centred=True)  # the evaluator every namespace shares
    whole = aa.build_kernel(ev, X, be.xp, budget=1 << 40)
    tiny = aa.build_kernel(ev, X, be.xp, budget=1)  # one row per block
    np.testing.assert_allclose(be.host(tiny.K), be.host(whole.K), rtol=1e-13, atol=1e-14)
    K = be.host(tiny.K)
    np.testing.assert_array_equal(K, K.T)  # mirrored: exactly symmetric
    assert tiny.frobenius == pytest.approx(np.linalg.norm(K), rel=1e-12)
    # The same evaluator on NumPy rows gives the CPU path's kernel.
    cpu = KernelEvaluator(spec, be.host(X), centred=True)(be.host(X), same=True)
    np.testing.assert_allclose(K, cpu, rtol=1e-12, atol=1e-13 * np.abs(cpu).max())


def test_fit_with_a_tiny_block_budget_gives_the_same_model(be, monkeypatch):
    X, Xnew = data(), data(30, seed=1)
    with dispatch():
        ref = KernelPCA(2, kernel="rbf", sigma=0.4).fit(be.on_device(X))
        T_ref = ref.transform(be.on_device(Xnew))
        monkeypatch.setattr(aa, "BLOCK_BYTES", 64)
        est = KernelPCA(2, kernel="rbf", sigma=0.4).fit(be.on_device(X))
        T = est.transform(be.on_device(Xnew))
    np.testing.assert_allclose(be.host(est.eigenvalues_), be.host(ref.eigenvalues_), rtol=1e-12)
    np.testing.assert_allclose(be.host(T), be.host(T_ref), atol=1e-10)


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
def test_unsupported_options_raise_a_clear_value_error(be, params, match):
    X = data(40)
    with dispatch(), pytest.raises(ValueError, match=match):
        KernelPCA(2, **params).fit(
            be.on_device(X @ X.T if params["kernel"] == "precomputed" else X)
        )


def test_too_few_products_is_not_verified(be):
    with dispatch(), pytest.raises(EigenpairsNotVerifiedError) as info:
        KernelPCA(3, kernel="rbf", sigma=0.3, eigen_solver="lanczos", max_iter=1).fit(
            be.on_device(data())
        )
    message = str(info.value)
    assert "randomized" in message and "residual too large" in message and "Fix:" in message
    assert "Array API path" in message and "NumPy array" in message


def test_a_wrong_vector_is_caught(be, monkeypatch):
    import kpca_lib._randomized as rz

    real = rz.randomized_eigh

    def wrong(*args, **kwargs):
        theta, U, info = real(*args, **kwargs)
        xp = be.xp
        U = xp.concat([U[:, :1], xp.flip(U[:, 1:], axis=0)], axis=1)  # not an eigenvector
        return theta, U, {**info, "AU": xp.concat([info["AU"][:, :1], U[:, 1:]], axis=1)}

    monkeypatch.setattr(rz, "randomized_eigh", wrong)
    with dispatch(), pytest.raises(EigenpairsNotVerifiedError, match="orthonormal|residual"):
        KernelPCA(2, kernel="rbf", sigma=0.4, eigen_solver="randomized").fit(be.on_device(data()))
    with dispatch():  # "auto" promised a verified result: it falls back to eigh on the device
        est = KernelPCA(2, kernel="rbf", sigma=0.4).fit(be.on_device(data()))
    assert est.eigen_solver_ == "dense"


def test_a_missed_eigenvalue_is_caught(be):
    # Eigenvalues 3, 2.5, 2: the pairs (3, q0) and (2, q2) are exact, but 2.5 was missed.
    n = 30
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((n, 3)))
    A = be.on_device(Q @ np.diag([3.0, 2.5, 2.0]) @ Q.T)

    def verify(values, vectors):
        return verify_eigenpairs(
            A.__matmul__,
            n,
            len(values),
            be.on_device(np.array(values)),
            be.on_device(vectors),
            tol=1e-10,
            norm_estimate=3.0,
            check_block=4,
            min_passes=3,
            max_passes=6,
        )

    assert verify([3.0, 2.5], Q[:, :2]).ok
    check = verify([3.0, 2.0], Q[:, [0, 2]])
    assert not check.ok and check.max_residual < 1e-12
    assert "missed eigenvalue" in check.failures[0] and check.deflated_top == pytest.approx(2.5)
    check = verify([3.0], np.linalg.qr(Q[:, [0]] + 1e-3 * Q[:, [1]])[0])
    assert not check.ok and "residual too large" in check.failures[0]


SAME_PLACE = (
    r"Inputs passed to KernelPCA\.{}\(\) must use the same namespace and the same device as "
    r"those passed to fit\(\)\. This KernelPCA was fitted on {}"
)


def test_transform_refuses_arrays_from_elsewhere(be):
    X = data(60)
    with dispatch():
        est = KernelPCA(2, kernel="rbf", sigma=0.4, fit_inverse_transform=True).fit(be.on_device(X))
        Z = est.transform(be.on_device(X))
        fitted = SAME_PLACE.format("transform", "the Array API path")
        with pytest.raises(ValueError, match=fitted + r".*got numpy\.ndarray.*Move X there"):
            est.transform(X)
        if be.other is None:
            return  # one GPU: no other device of the same library to refuse
        other = re.escape(str(be.other))
        with pytest.raises(ValueError, match=fitted + rf".*on device {other}.*Move X there"):
            est.transform(be.on_device(X, be.other))  # another device of the same library
        inverse = SAME_PLACE.format("inverse_transform", "the Array API path")
        with pytest.raises(ValueError, match=inverse):
            est.inverse_transform(be.host(Z))
        with pytest.raises(ValueError, match=inverse + rf".*on device {other}"):
            est.inverse_transform(be.on_device(be.host(Z), be.other))
        with pytest.raises(ValueError, match="one column per component"):
            est.inverse_transform(be.on_device(X[:, :1]))
        cpu = KernelPCA(2, kernel="rbf", sigma=0.4, fit_inverse_transform=True).fit(X)
        numpy_fit = SAME_PLACE.format("transform", r"NumPy data \(the CPU path\)")
        with pytest.raises(ValueError, match=numpy_fit + r".*X\.cpu\(\)\.numpy\(\)"):
            cpu.transform(be.on_device(X))
        with pytest.raises(ValueError, match=SAME_PLACE.format("inverse_transform", "NumPy")):
            cpu.inverse_transform(Z)


def test_mixed_namespaces_are_refused_naming_the_fix():
    torch = import_torch()
    X = data(60)
    strict = Backend("array_api_strict")
    with dispatch():
        on_torch = KernelPCA(2, kernel="rbf", sigma=0.4).fit(torch.as_tensor(X))
        with pytest.raises(
            ValueError,
            match=(
                SAME_PLACE.format("transform", r"the Array API path \(.*torch")
                + r'.*array_api_strict.*Move X there \(X = torch\.as_tensor\(X, device="cpu"\)\)'
            ),
        ):
            on_torch.transform(strict.on_device(X))
        on_strict = KernelPCA(2, kernel="rbf", sigma=0.4).fit(strict.on_device(X))
        with pytest.raises(
            ValueError,
            match=(
                SAME_PLACE.format("transform", r"the Array API path \(array_api_strict")
                + r".*torch"
            ),
        ):
            on_strict.transform(torch.as_tensor(X))


# -- dispatch off, NumPy input, imports ---------------------------------------------------


def test_numpy_input_with_dispatch_on_is_the_cpu_path_bit_for_bit():
    X = data()
    ref = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(X)
    with dispatch():
        Z = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(X)
    assert isinstance(Z, np.ndarray)
    np.testing.assert_array_equal(Z, ref)


def test_dispatch_off_converts_or_refuses_as_scikit_learn(be):
    if be.name == "cupy":
        pytest.skip("CuPy has no CPU device: it never converts to NumPy implicitly")
    X = data(60)
    ref = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(X)
    # Default device: converted to NumPy (np.asarray), the CPU path, NumPy out.
    Z = KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(be.on_device(X, be.cpu))
    assert isinstance(Z, np.ndarray)
    np.testing.assert_array_equal(Z, ref)
    if be.namespace == "torch":
        # A CPU tensor converts, as in scikit-learn; one that requires grad too (detached).
        T = be.module.tensor(X, requires_grad=True)
        np.testing.assert_array_equal(KernelPCA(2, kernel="rbf", sigma=0.4).fit_transform(T), ref)
        return
    # Another device: array_api_strict refuses the conversion (scikit-learn's own estimator
    # lets its RuntimeError through; ours says which input, as for any unconvertible X).
    with pytest.raises(RuntimeError, match="convert"):
        sklearn.decomposition.KernelPCA(2).fit(be.on_device(X))
    with pytest.raises(ValueError, match="X could not be converted.*device1"):
        KernelPCA(2, kernel="rbf", sigma=0.4).fit(be.on_device(X))


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
import json, sys
from unittest import SkipTest

from sklearn.utils.estimator_checks import _yield_array_api_checks, check_array_api_input
from kpca_lib import KernelPCA

namespace, devices = sys.argv[1], [None if d == "None" else d for d in sys.argv[2:]]
results = {}


def run(label, check, est):
    try:
        check("KernelPCA", est)
        results[label] = "passed"
    except SkipTest as exc:
        results[label] = f"skipped: {exc}"
    except Exception as exc:  # every failure is reported, not only the first
        results[label] = f"FAILED: {type(exc).__name__}: {exc}"[:2000]


# 1. Every kernel, float32 and float64, values against the NumPy fit in float64.
for dtype in ("float64", "float32"):
    for device in devices:
        for kernel in ("rbf", "linear", "poly", "sigmoid", "cosine"):
            est = KernelPCA(3, kernel=kernel, fit_inverse_transform=True)

            def check(name, est, dtype=dtype, device=device):
                check_array_api_input(name, est, array_namespace=namespace, device_name=device,
                                      dtype_name=dtype, check_values=dtype == "float64")

            run(f"check_array_api_input {kernel} {dtype} {device}", check, est)
# 2. scikit-learn's whole list of Array API checks (every namespace and device it knows:
# the ones not installed or not on this machine skip), on KernelPCA() as it is, without
# fit_inverse_transform (scikit-learn's own test suite sets it for KernelPCA), and with it.
for label, est in [("KernelPCA()", KernelPCA()),
                   ("KernelPCA(rbf, inverse)", KernelPCA(3, kernel="rbf",
                                                         fit_inverse_transform=True))]:
    for check in _yield_array_api_checks(est):
        keywords = ", ".join(f"{k}={v!r}" for k, v in sorted(check.keywords.items()))
        run(f"{label} {check.func.__name__}({keywords})", check, est)
print(json.dumps(results))
"""


def test_scikit_learns_own_array_api_checks_pass(be):
    # scikit-learn's Array API estimator checks (namespace, device and dtype of every fitted
    # attribute and output, values against the NumPy fit, the same-namespace refusal) need
    # SCIPY_ARRAY_API=1 before SciPy is imported: a fresh interpreter.
    import json

    devices = be.devices
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _SKLEARN_CHECK, be.namespace, *devices],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    failed = {k: v for k, v in results.items() if not (v == "passed" or v.startswith("skipped"))}
    assert not failed, "\n".join(f"{k}: {v}" for k, v in failed.items())
    ran = [k for k, v in results.items() if v == "passed"]
    assert sum(k.startswith("check_array_api_input ") for k in ran) == 10 * len(devices)
    for est in ("KernelPCA()", "KernelPCA(rbf, inverse)"):
        mine = [k for k in ran if k.startswith(est) and f"'{be.namespace}'" in k]
        if be.name != "array_api_strict":  # float32 and float64 on the device
            if be.name == "cupy":
                continue
            for dtype in ("float32", "float64"):
                where = f"device_name='{devices[0]}', dtype_name='{dtype}'"
                assert any(where in k for k in mine), (
                    dtype,
                    mine,
                )
        else:  # both of scikit-learn's devices, and the same-namespace check
            assert any("check_array_api_same_namespace" in k for k in mine), mine
            assert sum("check_array_api_input(" in k for k in mine) == 2, mine


def test_float32_components_below_rounding_are_warned_about_as_on_the_cpu(be):
    # A wide Gaussian's spectrum decays fast: 30 components reach far below float32's
    # rounding level of the kernel (2^-24 ||K||_F). Never silent zeros, on the device either
    # (the be.cpu's warning, kpca_lib._exact._check_float32_accuracy, names the device's cause).
    X = data(n=200, dtype=np.float32)
    with (
        dispatch(),
        pytest.warns(
            UserWarning,
            match=(
                r"X is float32, so the kernel matrix on the device is float32: \d+ of the 30 requested "
                r"components .* Pass X in float64"
            ),
        ),
    ):
        est = KernelPCA(30, kernel="rbf", sigma=3.0).fit(be.on_device(X))
    values = be.host(est.eigenvalues_)
    assert np.any(values == 0) and np.all(values[:2] > 0)


def test_a_missed_copy_far_below_the_norm_is_caught_on_the_device(be):
    # As on the be.cpu (tests/test_solvers.py): a missed eigenvalue at 5e-10·‖A‖ shows in the
    # random block with a weight of about 1/√n; the check must not stop as if the
    # complement were exhausted.
    n = 400
    rng = np.random.default_rng(1)
    d = 1e-12 * rng.uniform(0.0, 1.0, n)
    d[:4] = [1.0, 0.5, 5e-10, 5e-10 / 3]
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = be.on_device(0.5 * ((Q * d) @ Q.T + ((Q * d) @ Q.T).T))

    def verify(values, vectors):
        return verify_eigenpairs(
            A.__matmul__,
            n,
            len(values),
            be.on_device(np.array(values)),
            be.on_device(vectors),
            tol=1e-10,
            norm_estimate=1.0,
            check_block=4,
            min_passes=3,
            max_passes=6,
        )

    assert verify(list(d[:3]), Q[:, :3]).ok
    check = verify(list(d[[0, 1, 3]]), Q[:, [0, 1, 3]])
    assert not check.ok and "missed eigenvalue" in check.failures[0]


# -- what users pass: tensors that require grad, integers, strided views, NaN -------------


def test_tensors_that_require_grad_or_are_strided_views_are_used_by_value():
    torch = import_torch()
    X = data(80)
    ref = KernelPCA(2, kernel="rbf", sigma=0.4).fit(X)
    strided = torch.as_tensor(np.repeat(X, 2, axis=0))[::2]  # every other row: a strided view
    transposed = torch.as_tensor(np.ascontiguousarray(X.T)).T  # column-major
    needs_grad = torch.tensor(X, requires_grad=True)
    assert not strided.is_contiguous() and not transposed.is_contiguous()
    for T in (strided, transposed, needs_grad):
        with dispatch():
            est = KernelPCA(2, kernel="rbf", sigma=0.4, fit_inverse_transform=True)
            Z = est.fit_transform(T)
            new = est.transform(T)
            back = est.inverse_transform(new)
        for a in (Z, new, back, est.eigenvectors_, est.X_fit_):
            assert isinstance(a, torch.Tensor) and not a.requires_grad
            assert a.dtype == torch.float64 and a.device.type == "cpu"
        np.testing.assert_allclose(est.eigenvalues_.numpy(), ref.eigenvalues_, rtol=1e-10)
        assert_close_up_to_sign(new.numpy(), ref.transform(X), 1e-8)
    assert needs_grad.requires_grad  # the caller's tensor is untouched


def test_integer_arrays_become_the_devices_widest_float(be):
    X = np.round(data(80) * 10).astype(np.int64)
    ref = KernelPCA(2, kernel="rbf", sigma=4.0).fit(X)
    with dispatch():
        est = KernelPCA(2, kernel="rbf", sigma=4.0).fit(be.on_device(X))
        Z = est.transform(be.on_device(X))
    be.assert_on(Z, be.xp.float64)
    np.testing.assert_allclose(be.host(est.eigenvalues_), ref.eigenvalues_, rtol=1e-10)
    assert_close_up_to_sign(be.host(Z), ref.transform(X), 1e-8)


def test_nan_in_an_array_is_refused_naming_the_fix(be):
    X = data(40)
    bad = X.copy()
    bad[3, 1] = np.nan
    message = (
        r"Input X contains NaN or infinity \(first at index \(3, 1\), of 40×2\); remove or impute"
    )
    with dispatch():
        with pytest.raises(ValueError, match=message + r".*torch\.isfinite"):
            KernelPCA(2, kernel="rbf").fit(be.on_device(bad))
        est = KernelPCA(2, kernel="rbf").fit(be.on_device(X))
        with pytest.raises(ValueError, match=message):
            est.transform(be.on_device(bad))


# -- docs/gpu.md, executed ----------------------------------------------------------------


def test_the_examples_of_docs_gpu_md_run_on_the_cpu():
    """Every Python block of docs/gpu.md, in a fresh interpreter, with the device "cpu" for
    "cuda" and 500 points for 20 000 (a 20 000² kernel is 3.2 GB): the rest as written."""
    import_torch()
    text = (ROOT / "docs" / "gpu.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/gpu.md has no Python example"
    code = "\n".join(blocks)
    for old, new in [('device="cuda"', 'device="cpu"'), ("make_moons(20_000", "make_moons(500")]:
        assert code.count(old) == 1, f"docs/gpu.md changed: {old!r} is not in its example once"
        code = code.replace(old, new)
    code += (
        "\nassert isinstance(Z, torch.Tensor) and Z.device.type == 'cpu', Z.device\n"
        "assert tuple(Z.shape) == (500, 2) and tuple(Z_new.shape) == (100, 2)\n"
        "assert Z.dtype == torch.float64 and kpca.eigen_solver_ in ('randomized', 'dense')\n"
        "print('ran')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SCIPY_ARRAY_API"}  # the example sets it
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ran"), done.stderr[-3000:]
