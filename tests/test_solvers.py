"""Correctness of the exact large-n machinery: blocked kernels, half storage, every eigen solver."""

import warnings

import numpy as np
import pytest
import scipy.linalg
from conftest import assert_allclose_up_to_sign, subspace_agreement
from sklearn.decomposition import KernelPCA as SKKernelPCA
from threadpoolctl import threadpool_limits

from kpca_lib import KernelPCA, _eigen, kernel_pca
from kpca_lib._blocked import SymmetricPanels, build_kernel_panels, symmetrize_inplace
from kpca_lib._eigen import (
    Attempt,
    EigenpairsNotVerifiedError,
    choose_solver,
    lanczos_eigh,
    record_solver_reports,
    top_eigh,
    top_eigh_operator,
)
from kpca_lib._verify import Verification, deflation_probe, residual_norms, verify_eigenpairs
from kpca_lib.centering import center_kernel
from kpca_lib.datasets import make_moons
from kpca_lib.kernels import (
    kernel_block_function,
    linear_kernel,
    polynomial_kernel,
    rbf_kernel,
)


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """Small problems gain nothing from BLAS threads; on a shared 2-core box threads only wait."""
    with threadpool_limits(1):
        yield


KERNELS = [
    ("rbf", {"sigma": 0.7}, lambda X: rbf_kernel(X, sigma=0.7)),
    ("poly", {"degree": 3, "coef0": 0.5}, lambda X: polynomial_kernel(X, degree=3, coef0=0.5)),
    ("poly", {"degree": 2, "coef0": 1.0}, lambda X: polynomial_kernel(X, degree=2)),
    ("linear", {}, linear_kernel),
]


def _psd_matrix(rng, n, spectrum):
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    A = (Q * spectrum) @ Q.T
    return 0.5 * (A + A.T)  # exactly symmetric


# -- blocked kernels and half storage -------------------------------------------


@pytest.mark.parametrize("name, params, full", KERNELS)
def test_kernel_blocks_match_kernel_functions(rng, name, params, full):
    X = rng.normal(size=(37, 3)) + 5.0  # off-centre data: the RBF path centres it
    block = kernel_block_function(name, X, **params)
    K = full(X)
    np.testing.assert_allclose(
        block(slice(3, 20), slice(10, 37)), K[3:20, 10:37], rtol=1e-12, atol=1e-12 * np.abs(K).max()
    )
    diag = block(slice(5, 17), slice(5, 17))
    np.testing.assert_array_equal(diag, diag.T)
    np.testing.assert_allclose(diag, K[5:17, 5:17], rtol=1e-12, atol=1e-12 * np.abs(K).max())
    out = np.empty((4, 6))
    assert block(slice(0, 4), slice(30, 36), out=out) is out


@pytest.mark.parametrize("name, params, full", KERNELS)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_panels_store_the_kernel(rng, name, params, full, n_threads):
    X = rng.normal(size=(53, 2))
    K = full(X)
    P = build_kernel_panels(
        kernel_block_function(name, X, **params),
        53,
        n_threads=n_threads,
        panel_rows=8,
        block_cols=5,
    )
    assert len(P.panels) == 7 and P.panels[-1].shape == (5, 53)
    np.testing.assert_allclose(P.to_dense(), K, rtol=1e-12, atol=1e-12 * np.abs(K).max())
    np.testing.assert_allclose(
        P.row_means, K.mean(axis=0), rtol=1e-12, atol=1e-12 * np.abs(K).max()
    )
    assert P.grand_mean == pytest.approx(K.mean(), rel=1e-12, abs=1e-12)
    assert P.frobenius_norm == pytest.approx(np.linalg.norm(K), rel=1e-12)
    V = rng.normal(size=(53, 3))
    np.testing.assert_allclose(P.matmat(V), K @ V, rtol=1e-10, atol=1e-10 * np.abs(K @ V).max())
    np.testing.assert_allclose(
        P.centered_matmat(V), center_kernel(K) @ V, atol=1e-9 * np.abs(K).max()
    )
    assert P.nbytes < 0.75 * K.nbytes


@pytest.mark.parametrize("b", [1, 4, 8, 12, 40])
def test_products_in_chunks_match_the_dense_product(rng, b):
    # A product streams each panel in chunks sized for the CPU caches: at most 1 MiB of the
    # matrix and 48 KiB of the block's rows (1024, 1024, 768, 512 and 153 columns here).
    from kpca_lib._blocked import _chunk_width

    widths = [_chunk_width(128, c, 8) for c in (1, 4, 8, 12, 40)]
    assert widths == [1024, 1024, 768, 512, 153]
    n = 1500
    X = rng.normal(size=(n, 2))
    P = build_kernel_panels(kernel_block_function("rbf", X, sigma=1.0), n)
    K = P.to_dense()
    assert P.frobenius_norm == pytest.approx(np.linalg.norm(K), rel=1e-13)  # blocks: ddot
    V = rng.normal(size=(n, b))
    np.testing.assert_allclose(P.matmat(V), K @ V, rtol=1e-12, atol=1e-12 * np.abs(K @ V).max())


def test_float32_panels_half_the_memory(rng):
    X = rng.normal(size=(300, 2))
    block = kernel_block_function("rbf", X, sigma=1.0)
    P64 = build_kernel_panels(block, 300, panel_rows=32)
    P32 = build_kernel_panels(block, 300, dtype=np.float32, panel_rows=32)
    assert P32.nbytes * 2 == P64.nbytes
    np.testing.assert_allclose(P32.to_dense(), P64.to_dense(), atol=1e-7)
    V = rng.normal(size=(300, 2))
    np.testing.assert_allclose(P32.matmat(V), P64.matmat(V), rtol=1e-5, atol=1e-5)
    assert P32.matmat(V).dtype == np.float64


def test_float32_panels_hold_no_subnormals():
    # exp(-d²/(2σ²)) between 1e-45 and 1e-38 would be float32 subnormals (slow arithmetic).
    X = np.linspace(0.0, 1.0, 40)[:, None]
    P = build_kernel_panels(
        kernel_block_function("rbf", X, sigma=0.07), 40, dtype=np.float32, panel_rows=8
    )
    K = rbf_kernel(X, sigma=0.07)
    tiny = np.finfo(np.float32).tiny
    assert np.any((K > 0) & (K < tiny))
    for panel in P.panels:
        assert np.all((panel == 0) | (np.abs(panel) >= tiny))
    np.testing.assert_allclose(P.to_dense(), K, rtol=1e-7, atol=tiny)


def test_panel_overflow_is_an_error():
    X = np.full((20, 2), 50.0) + np.arange(20)[:, None]
    block = kernel_block_function("poly", X, degree=400, coef0=1.0)
    with pytest.raises(ValueError, match="overflow"):
        build_kernel_panels(block, 20, panel_rows=8)
    with pytest.raises(ValueError, match="overflow"):
        KernelPCA(1, kernel="poly", degree=400, eigen_solver="lanczos").fit(X)


def test_symmetrize_inplace_equals_numpy(rng):
    A = rng.normal(size=(23, 23))
    expected = (A + A.T) * 0.5
    out = symmetrize_inplace(A, block=5)
    assert out is A
    np.testing.assert_array_equal(A, expected)


def test_dense_overwrite_gives_the_same_pairs(rng):
    A = _psd_matrix(rng, 50, np.arange(50.0))
    w, V = top_eigh(A.copy(), 4, "dense")
    w2, V2 = top_eigh(A.copy(), 4, "dense", overwrite=True)
    np.testing.assert_allclose(w2, w, rtol=1e-13)
    np.testing.assert_allclose(V2, V, atol=1e-12)


def test_symmetric_panels_empty_start():
    P = SymmetricPanels(10, np.float64, panel_rows=4)
    assert [p.shape for p in P.panels] == [(4, 4), (4, 8), (2, 10)]


# -- eigen solvers -----------------------------------------------------------------


def test_choose_solver():
    assert choose_solver(1000, 2, "auto") == "lanczos"
    # ARPACK below n = 500 + 100·k for k <= 10: measured faster there (choose_solver's docstring)
    assert choose_solver(1499, 10, "auto") == "arpack"
    assert choose_solver(1500, 10, "auto") == choose_solver(1499, 11, "auto") == "lanczos"
    assert choose_solver(699, 2, "auto") == "arpack" and choose_solver(700, 2, "auto") == "lanczos"
    assert choose_solver(1000, 100, "auto") == "lanczos"
    assert choose_solver(1000, 101, "auto") == "dense"
    assert choose_solver(150, 2, "auto") == "dense"
    assert choose_solver(10, 10, "lanczos") == "dense"
    assert choose_solver(10, 10, "arpack") == "dense"
    with pytest.raises(ValueError, match="eigen_solver"):
        choose_solver(10, 2, "lobpcg")


@pytest.mark.parametrize("block_size", [1, 3])
@pytest.mark.parametrize("k", [1, 4, 12])
def test_lanczos_matches_dense(rng, k, block_size):
    n = 400
    spectrum = np.concatenate([np.linspace(50, 10, 20), rng.uniform(0, 5, n - 20)])
    A = _psd_matrix(rng, n, spectrum)
    w_ref, V_ref = top_eigh(A, k, "dense")
    w, V = lanczos_eigh(A.__matmul__, n, k, block_size=block_size)
    order = np.argsort(w)[::-1]
    np.testing.assert_allclose(w[order], w_ref, rtol=1e-12)
    assert_allclose_up_to_sign(V[:, order], V_ref, atol=1e-8)


def test_lanczos_thick_restart_and_clusters(rng):
    # Nearly equal eigenvalues and a tiny basis force many restarts.
    n = 300
    spectrum = np.concatenate([[10.0, 9.999, 9.998], np.linspace(9.9, 0, n - 3)])
    A = _psd_matrix(rng, n, spectrum)
    w, V = lanczos_eigh(A.__matmul__, n, 3, max_basis=12, tol=1e-9, max_iter=20000)
    np.testing.assert_allclose(np.sort(w)[::-1], spectrum[:3], rtol=1e-10)
    assert subspace_agreement(V, np.linalg.eigh(A)[1][:, -3:]) > 1 - 1e-8


def test_lanczos_invariant_subspace_and_rank_deficiency(rng):
    # Rank 2: the Krylov space is exhausted after two steps; zeros must still come out.
    X = rng.normal(size=(150, 2))
    Xc = X - X.mean(axis=0)
    G = Xc @ Xc.T
    w, V = top_eigh_operator(G.__matmul__, 150, 5, "lanczos")
    np.testing.assert_allclose(w[:2], np.linalg.eigvalsh(Xc.T @ Xc)[::-1], rtol=1e-10)
    np.testing.assert_allclose(w[2:], 0.0, atol=1e-9 * w[0])
    np.testing.assert_allclose(V.T @ V, np.eye(5), atol=1e-10)


def test_lanczos_non_convergence_is_an_error(rng):
    A = _psd_matrix(rng, 300, np.linspace(1, 0.99, 300))
    with pytest.raises(
        EigenpairsNotVerifiedError, match=r"(?s)did not converge in 5 products.*max_iter \(now 5\)"
    ):
        lanczos_eigh(A.__matmul__, 300, 2, max_iter=5)
    for solver in ("lanczos", "auto"):
        if solver == "auto":  # falls back to the dense solver, which verifies
            w, _ = top_eigh_operator(A.__matmul__, 300, 2, solver, max_iter=5)
            np.testing.assert_allclose(w, [1.0, 1 - 0.01 / 299], rtol=1e-12)
        else:
            with pytest.raises(EigenpairsNotVerifiedError, match="residual too large"):
                top_eigh_operator(A.__matmul__, 300, 2, solver, max_iter=5)


def test_small_problems_use_dense_fallback(rng):
    A = _psd_matrix(rng, 30, np.arange(30.0))
    for solver in ("lanczos", "arpack"):
        w, V = top_eigh_operator(A.__matmul__, 30, 3, solver)
        np.testing.assert_allclose(w, [29.0, 28.0, 27.0], rtol=1e-12)
    w, _ = top_eigh(A, 3, "lanczos")
    np.testing.assert_allclose(w, [29.0, 28.0, 27.0], rtol=1e-12)


# -- KernelPCA with every solver ------------------------------------------------


@pytest.fixture(scope="module")
def moons():
    X, _ = make_moons(400, noise=0.05, random_state=0)
    X_new, _ = make_moons(13, noise=0.05, random_state=1)
    return X, X_new


@pytest.mark.parametrize("solver", ["lanczos", "arpack", "dense", "randomized"])
@pytest.mark.parametrize(
    "ours_kw, sk_kw",
    [
        ({"kernel": "rbf", "sigma": 0.3}, {"kernel": "rbf", "gamma": 1 / (2 * 0.3**2)}),
        (
            {"kernel": "poly", "degree": 3, "gamma": 1.0},
            {"kernel": "poly", "gamma": 1.0, "coef0": 1.0, "degree": 3},
        ),
        ({"kernel": "poly"}, {"kernel": "poly"}),  # scikit-learn's defaults are ours
    ],
)
def test_every_solver_matches_sklearn(moons, solver, ours_kw, sk_kw):
    X, X_new = moons
    ours = KernelPCA(6, eigen_solver=solver, **ours_kw)
    ref = SKKernelPCA(6, eigen_solver="dense", **sk_kw)
    Z, Z_ref = ours.fit_transform(X), ref.fit_transform(X)
    assert ours.eigen_solver_ == solver
    scale = ref.eigenvalues_[0]
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-9)
    assert_allclose_up_to_sign(Z, Z_ref, rtol=1e-6, atol=1e-8 * np.sqrt(scale))
    assert_allclose_up_to_sign(
        ours.transform(X_new), ref.transform(X_new), rtol=1e-6, atol=1e-8 * np.sqrt(scale)
    )
    np.testing.assert_allclose(ours.transform(X), Z, atol=1e-8 * np.sqrt(scale))


def test_auto_uses_lanczos_for_few_components(moons):
    X, _ = moons
    X = np.vstack([X, make_moons(700, noise=0.05, random_state=3)[0]])  # n = 1100
    kp = KernelPCA(3, kernel="rbf", sigma=0.3).fit(X)
    assert kp.eigen_solver_ == "lanczos"
    assert KernelPCA(3, kernel="rbf", sigma=0.3).fit(X[:500]).eigen_solver_ == "arpack"
    assert KernelPCA(3, kernel="rbf", sigma=0.3).fit(X[:150]).eigen_solver_ == "dense"
    dense = KernelPCA(3, kernel="rbf", sigma=0.3, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(kp.eigenvectors_, dense.eigenvectors_, atol=1e-9)
    for col in kp.eigenvectors_.T:
        assert col[np.argmax(np.abs(col))] > 0


def test_float32_kernel_agrees(moons):
    X, X_new = moons
    ref = KernelPCA(4, kernel="rbf", sigma=0.3, eigen_solver="dense").fit(X)
    for solver in ("lanczos", "arpack", "randomized"):
        kp = KernelPCA(4, kernel="rbf", sigma=0.3, eigen_solver=solver, kernel_dtype="float32")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            Z = kp.fit_transform(X)
        np.testing.assert_allclose(kp.eigenvalues_, ref.eigenvalues_, rtol=1e-5)
        assert subspace_agreement(Z, ref.transform(X)) > 1 - 1e-8
        assert subspace_agreement(kp.transform(X_new), ref.transform(X_new)) > 1 - 1e-6
        assert Z.dtype == np.float64


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_float32_kernel_warns_when_rounding_matters(rng):
    # A huge constant in the kernel: float32 rounding swamps the centred part.
    X = rng.normal(size=(300, 2))
    with pytest.warns(UserWarning, match="float32"):
        KernelPCA(
            2, kernel="poly", degree=1, coef0=1e6, kernel_dtype="float32", eigen_solver="lanczos"
        ).fit(X)


def test_transform_in_blocks(moons, monkeypatch):
    X, X_new = moons
    kp = KernelPCA(2, kernel="rbf", sigma=0.3).fit(X)
    Z = kp.transform(X_new)
    monkeypatch.setattr(kernel_pca, "_TRANSFORM_BLOCK", 3 * len(X))  # 3 rows per block
    np.testing.assert_allclose(kp.transform(X_new), Z, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel_dtype": "float16"}, "kernel_dtype"),
        ({"kernel_dtype": "int64"}, "kernel_dtype"),
        ({"kernel_dtype": 3}, "kernel_dtype"),
        ({"tol": -1e-3}, "tol"),
        ({"tol": "small"}, "tol"),
        ({"tol": np.nan}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
        ({"eigen_solver": "lapack"}, "eigen_solver"),
        ({"eigen_solver": "randomized", "iterated_power": -1}, "iterated_power"),
        ({"eigen_solver": "randomized", "iterated_power": 2.5}, "iterated_power"),
        ({"eigen_solver": "randomized", "iterated_power": "many"}, "iterated_power"),
        ({"eigen_solver": "randomized", "random_state": "seed"}, "random_state"),
        ({"eigen_solver": "randomized", "random_state": -3}, "random_state"),
        ({"remove_zero_eig": "yes"}, "remove_zero_eig"),
    ],
)
def test_bad_solver_parameters(rng, params, match):
    with pytest.raises(ValueError, match=match):
        KernelPCA(2, **params).fit(rng.normal(size=(300, 2)))


# -- verification: every failure mode of issue 11 -------------------------------------

ALL_SOLVERS = ["dense", "arpack", "lanczos", "randomized", "auto"]


def _centred_identity(n):
    return np.eye(n) - 1.0 / n


@pytest.mark.parametrize("solver", ALL_SOLVERS)
def test_repeated_top_eigenvalue_returns_every_copy(solver):
    # σ far below the point spacing: K = I, centred K = I − 11ᵀ/n (eigenvalue 1, n − 1 times).
    X = np.arange(300.0)[:, None]
    kp = KernelPCA(4, kernel="rbf", sigma=1e-3, eigen_solver=solver).fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, np.ones(4), rtol=1e-9)
    np.testing.assert_allclose(kp.eigenvectors_.T @ kp.eigenvectors_, np.eye(4), atol=1e-9)
    # Each column is in the eigenspace of 1: orthogonal to the constant vector.
    np.testing.assert_allclose(kp.eigenvectors_.sum(axis=0), 0.0, atol=1e-8)
    try:
        w, V = top_eigh(_centred_identity(300), 7, solver)
    except EigenpairsNotVerifiedError as exc:
        # ARPACK may fail to restart on a 299-fold eigenvalue (depending on rounding, e.g. the
        # number of BLAS threads): then a clear error, never a wrong answer.
        assert solver == "arpack", exc
        assert "ARPACK error" in str(exc) and "Fix: eigen_solver='dense'" in str(exc)
        return
    np.testing.assert_allclose(w, np.ones(7), rtol=1e-9)
    np.testing.assert_allclose(V.T @ V, np.eye(7), atol=1e-9)


@pytest.mark.parametrize("solver", ALL_SOLVERS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_duplicated_points_keep_every_copy(rng, solver, dtype):
    # 5 distinct points × 100 copies, σ far below their distances: K_c has eigenvalue 100 four times.
    X = np.repeat(rng.normal(size=(5, 2)), 100, axis=0)
    kp = KernelPCA(4, kernel="rbf", sigma=1e-3, eigen_solver=solver, kernel_dtype=dtype).fit(X)
    np.testing.assert_allclose(
        kp.eigenvalues_, np.full(4, 100.0), rtol=1e-5 if dtype == "float32" else 1e-9
    )


@pytest.mark.parametrize("solver", ALL_SOLVERS)
def test_circle_pairs_are_not_split(solver):
    # Regular angles on a circle: the centred RBF kernel is circulant, eigenvalues in exact pairs.
    n = 400
    t = 2 * np.pi * np.arange(n) / n
    X = np.c_[np.cos(t), np.sin(t)]
    K_c = center_kernel(rbf_kernel(X, sigma=0.5))
    ref_w, ref_V = np.linalg.eigh(K_c)
    kp = KernelPCA(6, kernel="rbf", sigma=0.5, eigen_solver=solver).fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, ref_w[::-1][:6], rtol=1e-9)
    np.testing.assert_allclose(kp.eigenvalues_[0::2], kp.eigenvalues_[1::2], rtol=1e-9)
    # Three whole pairs: the subspace is determined (gap to the 7th eigenvalue).
    assert subspace_agreement(kp.eigenvectors_, ref_V[:, ::-1][:, :6]) > 1 - 1e-8


@pytest.mark.parametrize("block_size", [None, 1, 2, 4, 9])
def test_lanczos_many_components_of_a_low_rank_matrix(block_size):
    # Issue 11: linear kernel, n = 390, d = 67, k = 39; the automatic block of 9 returned
    # eigenvalues off by up to 16× and non-orthonormal vectors (a normalised block that was
    # mostly in span(Q) was not re-orthogonalised).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(390, 67))
    K_c = center_kernel(X @ X.T)
    ref = np.linalg.eigvalsh(K_c)[::-1][:39]
    w, V = lanczos_eigh(K_c.__matmul__, 390, 39, block_size=block_size)
    order = np.argsort(w)[::-1]
    np.testing.assert_allclose(w[order], ref, rtol=1e-10)
    np.testing.assert_allclose(V.T @ V, np.eye(39), atol=1e-10)
    kp = KernelPCA(39, kernel="linear", eigen_solver="lanczos").fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, ref, rtol=1e-10)


def test_single_vector_lanczos_cannot_certify_copies_but_the_retry_can():
    A = _centred_identity(300)
    with pytest.raises(EigenpairsNotVerifiedError, match="missed eigenvalue"):
        lanczos_eigh(A.__matmul__, 300, 4, block_size=1)
    with record_solver_reports() as reports:
        w, _ = top_eigh_operator(A.__matmul__, 300, 4, "lanczos")
    np.testing.assert_allclose(w, np.ones(4), rtol=1e-10)
    attempts = reports[0].attempts
    assert [a.solver for a in attempts] == ["lanczos"] * len(attempts) and attempts[-1].ok
    assert "block size 1" in attempts[0].detail and not attempts[0].ok


def _fewer_pairs(monkeypatch, always=False):
    """scipy.linalg.eigh that returns fewer pairs than asked (as ?syevr does for K = I)."""
    real = scipy.linalg.eigh

    def broken(a, *args, **kwargs):
        w, V = real(a, *args, **kwargs)
        if always or "subset_by_index" in kwargs:
            return w[1:], V[:, 1:]
        return w, V

    monkeypatch.setattr(scipy.linalg, "eigh", broken)


def test_dense_falls_back_when_lapack_returns_fewer_pairs(rng, monkeypatch):
    A = _psd_matrix(rng, 80, np.arange(80.0))
    _fewer_pairs(monkeypatch)
    for overwrite in (False, True):
        S = A.copy()
        with record_solver_reports() as reports:
            w, V = top_eigh(S, 5, "dense", overwrite=overwrite)
        np.testing.assert_allclose(w, [79.0, 78.0, 77.0, 76.0, 75.0], rtol=1e-12)
        assert V.shape == (80, 5)
        assert "syevr returned 4 of 5 pairs" in reports[0].attempts[0].detail
        np.testing.assert_array_equal(S, A)  # rebuilt from the triangle LAPACK did not touch


def test_dense_that_never_returns_enough_pairs_is_an_error(rng, monkeypatch):
    A = _psd_matrix(rng, 80, np.arange(80.0))
    _fewer_pairs(monkeypatch, always=True)
    with pytest.raises(
        EigenpairsNotVerifiedError, match=r"wrong number of eigenpairs: 4 eigenvalues"
    ):
        top_eigh(A, 5, "dense")


def test_dense_overwrite_leaves_the_matrix_usable(rng):
    A = _psd_matrix(rng, 300, np.linspace(5, 0, 300))
    S = A.copy()
    w, _ = top_eigh(S, 3, "dense", overwrite=True)
    np.testing.assert_array_equal(S, A)
    np.testing.assert_allclose(w, [5.0, 5 - 5 / 299, 5 - 10 / 299], rtol=1e-12)


def test_asymmetric_input_is_named(rng):
    A = rng.normal(size=(50, 50))
    with pytest.raises(EigenpairsNotVerifiedError, match=r"not symmetric.*\(S \+ Sᵀ\)/2"):
        top_eigh(A, 2, "dense")


def test_auto_falls_back_to_dense_and_explicit_lanczos_raises(rng, monkeypatch):
    A = _psd_matrix(rng, 1200, np.linspace(10, 0, 1200))  # auto's first choice: lanczos

    def garbage(matmat, n, k, **kwargs):  # a Lanczos that returns wrong, unconverged pairs
        Q = np.linalg.qr(rng.normal(size=(n, k)))[0]
        return (
            np.arange(k, dtype=float),
            Q,
            {"converged": True, "why": "", "products": 1, "scale": 1.0, "AU": matmat(Q)},
        )

    monkeypatch.setattr(_eigen, "_block_lanczos", garbage)
    with record_solver_reports() as reports:
        w, _ = top_eigh(A, 3, "auto")
    np.testing.assert_allclose(w, np.linspace(10, 0, 1200)[:3], rtol=1e-12)
    assert [a.solver for a in reports[0].attempts][-1] == "dense"
    assert not any(a.ok for a in reports[0].attempts[:-1])
    with pytest.raises(
        EigenpairsNotVerifiedError,
        match=r"(?s)eigen_solver='lanczos'.*residual too large.*Fix: eigen_solver='dense'",
    ):
        top_eigh(A, 3, "lanczos")


def test_auto_falls_back_to_dense_when_arpack_does_not_verify(rng, monkeypatch):
    A = _psd_matrix(rng, 400, np.linspace(10, 0, 400))  # auto's first choice: arpack

    def garbage(matmat, n, k, tol, max_iter, report, *args):
        report.attempts.append(Attempt("arpack", "broken", 0.0, 0, Verification(ok=False)))
        return None

    monkeypatch.setattr(_eigen, "_arpack_attempt", garbage)
    with record_solver_reports() as reports:
        w, _ = top_eigh(A, 3, "auto")
    np.testing.assert_allclose(w, np.linspace(10, 0, 400)[:3], rtol=1e-12)
    assert [a.solver for a in reports[0].attempts] == ["arpack", "dense"]


def test_verification_detects_each_defect(rng):
    A = _psd_matrix(rng, 200, np.concatenate([[9.0, 8.0, 8.0, 7.0], np.linspace(5, 0, 196)]))
    w, V = top_eigh(A, 3, "dense")
    good = verify_eigenpairs(A.__matmul__, 200, 3, w, V, tol=1e-10)
    assert good.ok and good.failures == [] and good.deflated_top < w[-1] + 1e-8
    bad = V.copy()
    bad[:, 1] += 1e-6 * bad[:, 0]
    assert "not orthonormal" in " ".join(
        verify_eigenpairs(A.__matmul__, 200, 3, w, bad, tol=1e-10).failures
    )
    assert "residual too large" in " ".join(
        verify_eigenpairs(A.__matmul__, 200, 3, w * 1.001, V, tol=1e-10).failures
    )
    assert "descending" in " ".join(
        verify_eigenpairs(A.__matmul__, 200, 3, w[::-1], V[:, ::-1], tol=1e-10).failures
    )
    assert (
        "wrong number"
        in verify_eigenpairs(A.__matmul__, 200, 3, w[:2], V[:, :2], tol=1e-10).failures[0]
    )
    # Eigenpairs 1, 2 and 4: exact pairs, but the second copy of 8 was missed.
    w_all, V_all = np.linalg.eigh(A)
    pick = [-1, -2, -4]
    missed = verify_eigenpairs(A.__matmul__, 200, 3, w_all[pick], V_all[:, pick], tol=1e-10)
    assert not missed.ok and "missed eigenvalue" in missed.failures[0]
    assert 7.0 < missed.deflated_top <= 8.0 + 1e-12
    assert missed.missed.shape[0] == 200 and missed.missed.shape[1] >= 1


def test_float32_stored_operator_is_verified_at_its_rounding_level(rng):
    A = _psd_matrix(rng, 400, np.linspace(10, 0, 400))
    A32 = A.astype(np.float32)

    def matmat(V):
        return (A32 @ V.astype(np.float32)).astype(np.float64)

    ref = np.linalg.eigvalsh(A32.astype(np.float64))[::-1][:3]
    for solver in ("lanczos", "arpack"):
        w, _ = top_eigh_operator(
            matmat,
            400,
            3,
            solver,
            dtype_eps=float(np.finfo(np.float32).eps),
            matrix_norm=float(np.linalg.norm(A)),
        )
        np.testing.assert_allclose(w, ref, rtol=1e-5)


def test_many_pairs_are_verified_through_probes(rng):
    # k > 64 without A·U: residual and orthonormality from Gaussian probes (Frobenius norms).
    A = _psd_matrix(rng, 150, np.linspace(3, 0, 150))
    w, V = np.linalg.eigh(A)
    w, V = w[::-1][:100], V[:, ::-1][:, :100]
    good = verify_eigenpairs(A.__matmul__, 150, 100, w, V, tol=1e-10)
    assert good.ok and good.n_products < 100  # 16 probes and the deflation passes, not A @ U
    off = w.copy()
    off[50] *= 1 + 1e-6
    assert (
        "‖AU − UΘ‖_F ≈" in verify_eigenpairs(A.__matmul__, 150, 100, off, V, tol=1e-10).failures[0]
    )
    skew = V.copy()
    skew[:, 70] += 1e-7 * V[:, 3]
    assert (
        "‖UᵀU − I‖_F (estimated"
        in verify_eigenpairs(A.__matmul__, 150, 100, w, skew, tol=1e-10).failures[0]
    )


@pytest.mark.parametrize("solver", ALL_SOLVERS)
def test_float32_matrix_gives_float64_pairs(rng, solver):
    A = _psd_matrix(rng, 300, np.linspace(4, 0, 300)).astype(np.float32)
    w, V = top_eigh(A, 3, solver)
    ref = np.linalg.eigvalsh(A.astype(np.float64))[::-1][:3]
    np.testing.assert_allclose(w, ref, rtol=1e-9)
    assert V.dtype == np.float64
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-9)


def test_solver_reports_nest():
    """An outer record_solver_reports block also sees the reports of an inner one."""
    from kpca_lib._eigen import record_solver_reports

    with record_solver_reports() as outer:
        with record_solver_reports() as inner:
            top_eigh(np.diag([3.0, 2.0, 1.0]), 2, "dense")
        assert len(inner) == 1
    assert len(outer) == 1 and outer[0].used == "dense"


def test_arpack_error_is_retried_with_a_larger_subspace(monkeypatch):
    """ARPACK's 'no shifts could be applied' (repeated eigenvalues) is retried with a larger NCV."""
    import scipy.sparse.linalg

    from kpca_lib._eigen import record_solver_reports

    real = scipy.sparse.linalg.eigsh
    seen = []

    def flaky(*args, ncv=None, **kwargs):
        seen.append(ncv)
        if ncv is None:
            raise scipy.sparse.linalg.ArpackError(3)
        return real(*args, ncv=ncv, **kwargs)

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", flaky)
    A = np.diag(np.r_[np.full(30, 2.0), np.linspace(1.0, 0.0, 120)])
    with record_solver_reports() as reports:
        w, V = _eigen.top_eigh(A, 10, "arpack")
    np.testing.assert_allclose(w, 2.0, rtol=1e-10)
    assert seen[0] is None and seen[1] > 10
    assert reports[-1].ok and "ARPACK error" in reports[-1].attempts[0].describe()


def test_arpack_error_everywhere_is_a_clear_error(monkeypatch):
    import scipy.sparse.linalg

    def broken(*args, **kwargs):
        raise scipy.sparse.linalg.ArpackError(3)

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", broken)
    A = np.diag(np.linspace(2.0, 0.0, 150))
    with pytest.raises(_eigen.EigenpairsNotVerifiedError, match="eigen_solver='dense'"):
        _eigen.top_eigh(A, 10, "arpack")


# -- the randomized solver (issue 25): scikit-learn's API, verified like the others -------------


@pytest.mark.parametrize(
    "spectrum",
    [
        np.r_[[9.0, 7.0, 5.0, 4.0], np.linspace(1.0, 0.0, 196)],  # a gap after the top 4
        np.r_[[3.0, 3.0, 3.0], np.linspace(2.0, 0.0, 197)],  # a repeated top eigenvalue
        np.r_[[2.0, 1.0], np.zeros(198)],  # rank 2: the other requested pairs are zeros
    ],
)
@pytest.mark.parametrize("k", [1, 4])
def test_randomized_matches_dense(rng, spectrum, k):
    A = _psd_matrix(rng, 200, spectrum)
    w_ref, V_ref = top_eigh(A, k, "dense")
    with record_solver_reports() as reports:
        w, V = top_eigh(A, k, "randomized")
    assert reports[0].used == "randomized" and reports[0].ok
    np.testing.assert_allclose(w, w_ref, rtol=1e-10, atol=1e-12 * spectrum.max())
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-10)
    # Whole eigenspaces only: the pairs strictly above the (k+1)-th eigenvalue span a unique space.
    resolved = w_ref > np.sort(spectrum)[::-1][k] + 1e-6
    if resolved.any():
        assert subspace_agreement(V[:, resolved], V_ref[:, resolved]) > 1 - 1e-9


def test_randomized_returns_the_largest_not_the_largest_in_magnitude(rng):
    # scikit-learn's randomized solver picks by magnitude (it refuses this case); ours does not.
    A = _psd_matrix(rng, 200, np.r_[[5.0, 4.0, 3.0], -np.linspace(8.0, 4.0, 10), np.zeros(187)])
    with record_solver_reports() as reports:
        w, _ = top_eigh(A, 3, "randomized")
    np.testing.assert_allclose(w, [5.0, 4.0, 3.0], rtol=1e-10)
    assert "shift" in reports[0].attempts[-1].detail


@pytest.mark.parametrize("random_state", [0, 7, np.random.RandomState(3), np.random.default_rng(5)])
def test_randomized_random_state_and_iterated_power(rng, random_state):
    A = _psd_matrix(rng, 300, np.r_[[9.0, 7.0, 5.0], np.linspace(2.0, 0.0, 297)])
    ref, _ = top_eigh(A, 3, "dense")
    for power in (0, 3, "auto"):
        with record_solver_reports() as reports:
            w, _ = top_eigh_operator(
                A.__matmul__, 300, 3, "randomized", iterated_power=power, random_state=random_state
            )
        np.testing.assert_allclose(w, ref, rtol=1e-10)
        passes = int(reports[0].attempts[-1].detail.split(", ")[1].split()[0])
        minimum = {0: 1, 3: 7, "auto": 15}[power]  # 2·iterated_power + 1; "auto" is 7 here
        assert passes >= minimum
    # The same integer seed gives the same pairs.
    a = top_eigh_operator(A.__matmul__, 300, 3, "randomized", random_state=11)
    b = top_eigh_operator(A.__matmul__, 300, 3, "randomized", random_state=11)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_randomized_that_cannot_converge_is_refused(rng):
    # A flat spectrum and a small budget: subspace iteration cannot reach the tolerance.
    A = _psd_matrix(rng, 300, np.linspace(4.0, 0.0, 300))
    with pytest.raises(
        EigenpairsNotVerifiedError,
        match=r"(?s)eigen_solver='randomized'.*residual too large.*Fix: eigen_solver='dense'",
    ):
        top_eigh(A, 3, "randomized", max_iter=60)
    assert choose_solver(10_000, 3, "auto") != "randomized"


def test_randomized_garbage_is_never_returned(rng, monkeypatch):
    from kpca_lib import _randomized

    A = _psd_matrix(rng, 200, np.linspace(10.0, 0.0, 200))

    def garbage(matmat, n, k, **kwargs):
        Q = np.linalg.qr(rng.normal(size=(n, k)))[0]
        info = {
            "converged": True,
            "why": "",
            "products": 1,
            "passes": 1,
            "scale": 1.0,
            "shift": 0.0,
            "block": k,
            "AU": matmat(Q),
        }
        return np.arange(k, dtype=float), Q, info

    monkeypatch.setattr(_randomized, "randomized_eigh", garbage)
    with pytest.raises(EigenpairsNotVerifiedError, match=r"(?s)randomized.*residual too large"):
        top_eigh(A, 3, "randomized")


@pytest.mark.parametrize(
    "ours_kw, sk_kw",
    [
        ({"kernel": "rbf", "sigma": 0.3}, {"kernel": "rbf", "gamma": 1 / (2 * 0.3**2)}),
        ({"kernel": "rbf"}, {"kernel": "rbf"}),
        ({}, {}),
    ],
)
def test_randomized_kernel_pca_matches_sklearn(moons, ours_kw, sk_kw):
    X, X_new = moons
    ours = KernelPCA(4, eigen_solver="randomized", random_state=0, **ours_kw)
    exact = SKKernelPCA(4, eigen_solver="dense", **sk_kw).fit(X)
    theirs = SKKernelPCA(4, eigen_solver="randomized", random_state=0, **sk_kw).fit(X)
    Z = ours.fit_transform(X)
    assert ours.eigen_solver_ == "randomized"
    scale = exact.eigenvalues_[0]
    # Ours is verified to the same accuracy as the exact solvers ...
    np.testing.assert_allclose(ours.eigenvalues_, exact.eigenvalues_, rtol=1e-9, atol=1e-12 * scale)
    assert_allclose_up_to_sign(Z, exact.transform(X), atol=1e-7 * np.sqrt(scale))
    assert_allclose_up_to_sign(
        ours.transform(X_new), exact.transform(X_new), atol=1e-7 * np.sqrt(scale)
    )
    # ... and spans what scikit-learn's randomized solver approximates.
    nonzero = exact.eigenvalues_ > 1e-9 * scale
    np.testing.assert_allclose(ours.eigenvalues_[nonzero], theirs.eigenvalues_[nonzero], rtol=1e-4)
    assert (
        subspace_agreement(ours.transform(X_new)[:, nonzero], theirs.transform(X_new)[:, nonzero])
        > 1 - 1e-4
    )


def test_a_large_kernel_is_solved_with_blocks_of_four_and_verified():
    # From n = 2048 a product streams the kernel from memory: four columns per product cost
    # about what one does, so the default block is 4 (k <= 16); the result is the same.
    assert [_eigen._default_block_size(k, 2048) for k in (1, 2, 10, 16, 50)] == [4, 4, 4, 4, 12]
    assert [_eigen._default_block_size(k, 2047) for k in (1, 2, 10, 11, 50)] == [1, 1, 1, 2, 12]
    assert _eigen._default_block_size(3, 5000, max_basis=12) == 2  # a restart holds 2+ blocks
    X = make_moons(2100, noise=0.05, random_state=0)[0]
    K_c = center_kernel(rbf_kernel(X, sigma=0.5))
    reference = np.linalg.eigvalsh(K_c)[::-1][:3]
    with record_solver_reports() as reports:
        kp = KernelPCA(3, kernel="rbf", sigma=0.5, eigen_solver="lanczos").fit(X)
    first = reports[-1].attempts[0]
    assert first.detail == "block size 4" and first.ok
    np.testing.assert_allclose(kp.eigenvalues_, reference, rtol=1e-10)


def test_the_deflation_check_probes_four_vectors():
    assert _eigen._KRYLOV_CHECK["check_block"] == 4 and _eigen._KRYLOV_CHECK["min_passes"] == 3
    # A diagonal operator of size 3000 whose top eigenvalue is double, above a decaying
    # bulk as a kernel matrix's: the pairs (1, 3) miss the second copy, and are refused;
    # honest pairs pass.
    n = 3000
    d = 0.5 * 0.99 ** np.arange(n)
    d[-2:] = [5.0, 5.0]
    d[-3] = 4.0
    matmat = lambda V: d[:, None] * V  # noqa: E731
    E = np.eye(n)
    honest = verify_eigenpairs(
        matmat, n, 2, np.array([5.0, 5.0]), E[:, [-1, -2]], tol=1e-10, **_eigen._KRYLOV_CHECK
    )
    assert honest.ok and honest.n_products >= 12  # 3 passes of 4 vectors at least
    missed = verify_eigenpairs(
        matmat, n, 2, np.array([5.0, 4.0]), E[:, [-1, -3]], tol=1e-10, **_eigen._KRYLOV_CHECK
    )
    assert not missed.ok and "missed eigenvalue" in missed.failures[0]
    assert 4.0 < missed.deflated_top <= 5.0 + 1e-12  # a Ritz value above θ_2, at most λ


def _double_top(n):
    d = 0.5 * 0.999 ** np.arange(n)
    d[-2:], d[-3] = 5.0, 4.8
    return d, np.eye(n)


@pytest.mark.parametrize("n", [300, 1000, 2500])
def test_a_missed_copy_of_a_repeated_eigenvalue_is_found_whatever_the_probe(n):
    # Top eigenvalue 5 twice above a slowly decaying bulk; the pairs (5, 4.8) miss the
    # second 5. Two passes of the deflation check let this through in up to 70 % of random
    # probes (a Krylov space of degree 1); three find it for every probe tried here.
    d, E = _double_top(n)
    for seed in range(20):
        check = verify_eigenpairs(
            lambda V: d[:, None] * V, n, 2, np.array([5.0, 4.8]), E[:, [-1, -3]], tol=1e-10,
            seed=seed, **_eigen._KRYLOV_CHECK,
        )
        assert not check.ok and "missed eigenvalue" in check.failures[0], seed


def test_lanczos_never_returns_a_missed_copy_of_a_repeated_eigenvalue_as_verified():
    # Single-vector Lanczos (n < 2048, k <= 10) sees one copy of a repeated eigenvalue from
    # its start vector; this case was returned as verified with the 5 and the 4 (the second
    # 5 missed) before the deflation check took 3 passes. Now it is caught and retried with
    # a larger block, which finds both copies.
    n = 1500
    d = 0.5 * 0.999 ** np.arange(n)
    d[-2:], d[-3] = 5.0, 4.0
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((n, n)))[0]
    A = (Q * d) @ Q.T
    A = 0.5 * (A + A.T)
    with record_solver_reports() as reports:
        w, _ = top_eigh_operator(A.__matmul__, n, 2, "lanczos")
    np.testing.assert_allclose(w, [5.0, 5.0], rtol=1e-10)
    first = reports[-1].attempts[0]
    assert first.detail == "block size 1" and not first.ok


@pytest.mark.parametrize("seed", range(10))
def test_a_probe_multiplied_beforehand_checks_what_a_fresh_product_checks(seed):
    # The deflation check may start from a random block Z0 that a solver multiplied along
    # with its own first block: (I − UUᵀ)Z0 and its image A Z0 − (AU)(UᵀZ0), by linearity.
    # Same block, same seed: the same check as with a product of its own, to rounding.
    n = 1200
    d, E = _double_top(n)
    matmat = lambda V: d[:, None] * V  # noqa: E731
    rotation = np.array([[0.6, 0.8], [-0.8, 0.6]])
    for theta, U, ok in (
        ([5.0, 4.8], E[:, [-1, -3]], False),  # the second 5 missed
        ([5.0, 5.0], E[:, [-1, -2]] @ rotation, True),  # a basis of the pair, not the axes
    ):
        AU = matmat(U)
        Z0 = deflation_probe(n, 2, 4, seed)
        assert Z0.shape == (n, 4)
        kw = {"tol": 1e-10, "AU": AU, "seed": seed, **_eigen._KRYLOV_CHECK}
        fresh = verify_eigenpairs(matmat, n, 2, np.array(theta), U, **kw)
        early = verify_eigenpairs(matmat, n, 2, np.array(theta), U, probe=(Z0, matmat(Z0)), **kw)
        assert early.ok is fresh.ok is ok, (theta, early.failures)
        assert ok or [f.split(":")[0] for f in early.failures] == ["missed eigenvalue(s)"]
        assert early.deflated_top == pytest.approx(fresh.deflated_top, rel=1e-12)
        assert early.n_products == fresh.n_products


def test_a_probe_in_the_span_of_the_eigenvectors_falls_back_to_a_product():
    n = 600
    d, E = _double_top(n)
    calls = []

    def matmat(V):
        calls.append(V.shape[1])
        return d[:, None] * V

    U = E[:, [-1, -2]]
    Z0 = U @ np.ones((2, 4))  # (I − UUᵀ)Z0 = 0: nothing to extrapolate from
    check = verify_eigenpairs(
        matmat, n, 2, np.array([5.0, 5.0]), U, tol=1e-10, AU=matmat(U),
        probe=(Z0, matmat(Z0)), **_eigen._KRYLOV_CHECK,
    )
    assert calls[2] == 4 and check.ok  # the check multiplied a block of its own
    with pytest.raises(ValueError, match=r"probe must be two arrays of shape \(600, 4\)"):
        verify_eigenpairs(
            matmat, n, 2, np.array([5.0, 5.0]), U, tol=1e-10, probe=(Z0, Z0),
            **_eigen._KRYLOV_CHECK,
        )
    with pytest.raises(ValueError, match=r"probe must be two arrays of shape \(600, 4\)"):
        verify_eigenpairs(
            matmat, n, 2, np.array([5.0, 5.0]), U, tol=1e-10, AU=U, probe=(Z0[:, :3], Z0[:, :3]),
            **_eigen._KRYLOV_CHECK,
        )


@pytest.mark.parametrize("solve", ["attempts", "lanczos_eigh"])
def test_lanczos_multiplies_the_verification_block_with_its_first_block(solve):
    # The verification's first deflation product rides along with the solver's first
    # product: one pass over the matrix fewer, the same verified result.
    X = make_moons(2100, noise=0.05, random_state=0)[0]
    K_c = center_kernel(rbf_kernel(X, sigma=0.5))
    widths = []

    def matmat(V):
        widths.append(V.shape[1])
        return K_c @ V

    with record_solver_reports() as reports:
        if solve == "attempts":
            w, _ = top_eigh_operator(matmat, 2100, 3, "lanczos")
        else:
            w, _ = lanczos_eigh(matmat, 2100, 3)
    attempt = reports[-1].attempts[0]
    assert attempt.ok and len(reports[-1].attempts) == 1
    passes = attempt.verification.n_products // 4
    assert passes >= 3 and widths[0] == 4 + 4
    assert len(widths) == attempt.products // 4 + passes - 1  # no pass of its own for the probe
    assert sum(widths) == attempt.products + attempt.verification.n_products
    np.testing.assert_allclose(np.sort(w), np.linalg.eigvalsh(K_c)[-3:], rtol=1e-10)


def _tiny_repeated_tail(n, seed, pair=2e-9):
    # Requested eigenvalues far below ‖A‖ = 1: the 5th and 6th are a pair (2e-9), the 7th
    # a third of it, the rest below 1e-12. A copy of the pair missed and the 7th returned in
    # its place is wrong by 1.3e-9·‖A‖, 13 times the verification's tol·‖A‖.
    rng = np.random.default_rng(seed)
    d = 1e-12 * rng.uniform(0.0, 1.0, n)
    d[:7] = [1.0, 0.5, 0.2, 0.1, pair, pair, pair / 3]
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = (Q * d) @ Q.T
    return 0.5 * (A + A.T), np.sort(d)[::-1], Q


def test_a_missed_copy_far_below_the_norm_is_found():
    # The deflation check stopped when its new directions were below 1e-10·‖A‖ ("the
    # complement is exhausted"); a missed eigenvalue of 2e-9·‖A‖ shows in a random block
    # only with a weight of about 1/√n, so the check stopped after one product, and
    # single-vector Lanczos returned (…, 2e-9, 6.7e-10) for (…, 2e-9, 2e-9) as verified
    # (with 5e-9 instead of 2e-9: 9 of 12 draws). Now it stops early only on directions
    # that are zero to float64 precision.
    n = 800
    A, d, Q = _tiny_repeated_tail(n, 0, pair=1e-9)
    kw = {"tol": 1e-10, "AU": None, **_eigen._KRYLOV_CHECK}
    honest = verify_eigenpairs(A.__matmul__, n, 6, d[:6], Q[:, :6], **kw)
    assert honest.ok
    missed = verify_eigenpairs(A.__matmul__, n, 6, d[[0, 1, 2, 3, 4, 6]], Q[:, [0, 1, 2, 3, 4, 6]], **kw)
    assert not missed.ok and "missed eigenvalue" in missed.failures[0]
    assert missed.deflated_top == pytest.approx(1e-9, rel=1e-3)


@pytest.mark.parametrize("seed", range(4))
def test_lanczos_finds_a_repeated_eigenvalue_far_below_the_norm(seed):
    n = 800
    A, d, _ = _tiny_repeated_tail(n, seed)
    w, _ = top_eigh_operator(A.__matmul__, n, 6, "lanczos")
    # tol = 1e-10 bounds the residuals; the eigenvalues are then good to about 1e-12·‖A‖
    # here (tol²‖A‖²/gap), far from the 1.3e-9 of a missed copy.
    np.testing.assert_allclose(np.sort(w)[::-1], d[:6], rtol=0, atol=1e-11)


def test_kernel_pca_of_a_circle_finds_both_copies_of_every_pair():
    # Points on a circle: the kernel's eigenvalues come in pairs (cos and sin of each
    # frequency) and, for a wide Gaussian, decay fast. The 9th and 10th (7.9e-9 of the
    # first) were returned as one copy and a smaller eigenvalue, silently (the case above).
    n = 1500
    t = np.linspace(0.0, 2 * np.pi, n, endpoint=False) + 0.01
    X = np.c_[np.cos(t), np.sin(t)]
    truth = np.linalg.eigvalsh(center_kernel(rbf_kernel(X, sigma=4.0)))[::-1][:10]
    assert truth[9] / truth[0] < 1e-8 and truth[8] == pytest.approx(truth[9], rel=1e-6)
    kp = KernelPCA(10, kernel="rbf", sigma=4.0).fit(X)
    assert kp.eigen_solver_ == "lanczos"
    np.testing.assert_allclose(kp.eigenvalues_, truth, rtol=1e-5, atol=1e-13 * truth[0])


def test_residual_norms_match_numpy_with_one_temporary(rng):
    import tracemalloc

    n, k = 3000, 40
    U = np.linalg.qr(rng.standard_normal((n, k)))[0]
    theta = np.sort(rng.uniform(1.0, 2.0, k))[::-1]
    AU = U * theta + 1e-9 * rng.standard_normal((n, k))
    expected = np.linalg.norm(AU - U * theta, axis=0)
    tracemalloc.start()
    try:
        got = residual_norms(AU, U, theta)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # One n×k array (np.linalg.norm of AU − U·θ makes three): the fit's peak at large k.
    assert peak < 1.2 * U.nbytes
