"""Randomized differential test of every eigensolver against accurate references.

Data families (fixed seeds, n = 144–150): clustered, duplicated points, a grid,
points far from the origin (1e6 + noise), badly scaled features, a circle at
regular angles. Kernels: linear, RBF (σ at the data's scale, and σ far below
the point spacing, where K ≈ I or a block of ones), polynomial. Every solver
(dense, arpack, lanczos, auto) × kernel dtype (float64, float32) × k from 1 to n.

References:

* a cancellation-free centred kernel: the linear kernel from centred X, the RBF
  kernel from direct differences with ``expm1`` (centring removes the constant
  exactly), the polynomial kernel in extended precision; then ``numpy.linalg.eigh``;
* scikit-learn's ``KernelPCA(eigen_solver="dense")`` (not for the far-offset
  family, where its ``‖x‖² + ‖y‖² − 2xᵀy`` cancels).

Comparisons: eigenvalues within ``tol_eig`` (Weyl: rounding the stored kernel
moves eigenvalues by at most ``‖E‖₂ ≤ ‖E‖_F ≈ eps·‖K‖_F``; plus the solver's
relative residual tolerance, since ``|θ − λ| ≤ ‖r‖``); eigenvectors as subspaces:
the returned ``U`` must lie in the reference eigenspace of every eigenvalue
``≥ λ_k − δ`` (so repeated eigenvalues, in any basis, and ties at ``λ_k``
are handled), with ``sin θ ≤ 10·tol_eig / gap`` (Davis–Kahan).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SKKernelPCA
from threadpoolctl import threadpool_limits

from kpca_lib import KernelPCA
from kpca_lib._eigen import record_solver_reports, top_eigh, top_eigh_operator

N = 150
EPS = {"float64": float(np.finfo(np.float64).eps), "float32": float(np.finfo(np.float32).eps)}
#: Relative residual tolerance each path is verified to (kernel_pca uses 1.2e-6 for float32).
SOLVER_RTOL = {"float64": 1e-9, "float32": 2e-6}
SOLVERS = [
    ("dense", "float64"),
    ("arpack", "float64"),
    ("arpack", "float32"),
    ("lanczos", "float64"),
    ("lanczos", "float32"),
    ("auto", "float64"),
    ("auto", "float32"),
]
KS = [1, 3, 10, 40, None]  # None: k = n
#: What KernelPCA warns when the centred kernel is zero up to rounding (it then returns zeros).
ZERO_KERNEL = "the centred kernel matrix is zero up to rounding"


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """150×150 problems gain nothing from BLAS threads, and on a shared box threads only wait."""
    with threadpool_limits(1):
        yield


def _family(name: str) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, name)))
    if name == "clustered":
        centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
        return np.repeat(centres, 50, axis=0) + 0.1 * rng.normal(size=(N, 2))
    if name == "duplicated":
        return np.repeat(rng.normal(size=(5, 3)), 30, axis=0)
    if name == "grid":
        g = np.arange(12.0)
        return np.array([(a, b) for a in g for b in g])
    if name == "offset":
        return 1e6 + rng.normal(size=(N, 2))
    if name == "badly_scaled":
        return rng.normal(size=(N, 3)) * np.array([1e-3, 1.0, 1e3])
    if name == "circle":
        t = 2 * np.pi * np.arange(N) / N
        return np.c_[np.cos(t), np.sin(t)]
    raise ValueError(name)


FAMILIES = ["clustered", "duplicated", "grid", "offset", "badly_scaled", "circle"]
KERNELS = ["linear", "rbf", "rbf_narrow", "poly"]


def _pairwise_sq(X: np.ndarray) -> np.ndarray:
    diff = X[:, None, :] - X[None, :, :]  # direct differences: no cancellation
    return np.einsum("ijk,ijk->ij", diff, diff)


def _params(X: np.ndarray, kernel: str) -> dict:
    """Estimator parameters: σ from the data (median distance, or far below the spacing)."""
    if kernel == "linear":
        return {"kernel": "linear"}
    if kernel == "poly":
        return {"kernel": "poly", "degree": 2, "gamma": 1.0, "coef0": 1.0}
    D = np.sqrt(_pairwise_sq(X))
    if kernel == "rbf":
        return {"kernel": "rbf", "sigma": float(np.median(D[D > 0]))}
    return {"kernel": "rbf", "sigma": float(D[D > 0].min()) / 40.0}


def _center(K: np.ndarray) -> np.ndarray:
    K_c = K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()
    return 0.5 * (K_c + K_c.T)  # exactly symmetric (the means round differently)


def _reference(X: np.ndarray, params: dict) -> tuple[np.ndarray, float, float]:
    """Cancellation-free centred kernel, ‖K‖_F of the uncentred kernel, and a rounding factor.

    The factor multiplies ``eps·‖K‖_F`` in the tolerances: the RBF kernel computed
    as ``exp(−(‖x‖² + ‖y‖² − 2xᵀy)/2σ²)`` carries an extra relative error of
    ``eps·max‖x‖²/σ²`` in every entry.
    """
    if params["kernel"] == "linear":
        Xc = X - X.mean(axis=0)
        return Xc @ Xc.T, float(np.linalg.norm(X @ X.T)), 1.0
    if params["kernel"] == "rbf":
        t = _pairwise_sq(X) / (2.0 * params["sigma"] ** 2)
        K_c = _center(np.expm1(-t))  # centring removes the constant 1 of exp = 1 + expm1 exactly
        Xc = X - X.mean(axis=0)
        spread = float(np.max(np.einsum("ij,ij->i", Xc, Xc))) / params["sigma"] ** 2
        return K_c, float(np.linalg.norm(np.exp(-t))), 1.0 + spread
    XL = X.astype(np.longdouble)
    K = (XL @ XL.T + params["coef0"]) ** params["degree"]
    K_c = _center(K).astype(np.float64)
    return K_c, float(np.linalg.norm(K.astype(np.float64))), 1.0


def _tol_eig(dtype: str, lam1: float, frob: float, factor: float, n: int) -> float:
    return (
        SOLVER_RTOL[dtype] * abs(lam1)
        + 50.0 * EPS[dtype] * frob * factor
        + 1e3 * n * EPS["float64"] * abs(lam1)
    )


def _check(
    name: str, w: np.ndarray, U: np.ndarray | None, ref_w: np.ndarray, ref_V: np.ndarray, tol: float
) -> bool:
    """Assert eigenvalues and subspace; return whether the subspace was comparable."""
    k = w.shape[0]
    assert np.all(np.isfinite(w)), name
    np.testing.assert_allclose(w, ref_w[:k], rtol=0, atol=tol, err_msg=name)
    if U is None:
        return False
    assert U.shape == (ref_V.shape[0], k), name
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-8, err_msg=name)
    delta = 10.0 * tol
    j = int(np.sum(ref_w >= ref_w[k - 1] - delta))
    if j >= ref_w.shape[0]:
        return True  # the eigenspace is everything: nothing to compare
    gap = ref_w[k - 1] - tol - ref_w[j]
    bound = 10.0 * tol / gap
    if bound >= 0.1:
        return False  # a tiny gap: the subspace is not determined by the data
    Vj = ref_V[:, :j]
    sin = np.linalg.norm(U - Vj @ (Vj.T @ U), ord=2)
    assert sin <= bound, f"{name}: sin of the largest principal angle {sin:.3g} > {bound:.3g}"
    return True


@pytest.fixture(scope="module")
def cases():
    """Data, parameters and accurate reference of every (family, kernel)."""
    out = {}
    for family in FAMILIES:
        X = _family(family)
        for kernel in KERNELS:
            params = _params(X, kernel)
            if family == "offset" and kernel == "poly":
                params = dict(params, coef0=0.0)
            K_c, frob, factor = _reference(X, params)
            w, V = np.linalg.eigh(K_c)
            out[family, kernel] = (X, params, K_c, w[::-1].copy(), V[:, ::-1].copy(), frob, factor)
    return out


def _ks(n: int) -> list[int]:
    return [min(k, n) if k is not None else n for k in KS]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("family", FAMILIES)
def test_top_eigh_matches_reference(cases, family, kernel):
    """`top_eigh` / `top_eigh_operator` on the accurate centred kernel, float64 and float32-stored."""
    X, params, K_c, ref_w, ref_V, _, _ = cases[family, kernel]
    n = X.shape[0]
    frob_c = float(np.linalg.norm(K_c))
    K32 = K_c.astype(np.float32)

    def matmat32(V):
        return (K32 @ V.astype(np.float32)).astype(np.float64)

    compared = 0
    for solver, dtype in SOLVERS:
        for k in _ks(n):
            name = f"{family}/{kernel}/{solver}/{dtype}/k={k}"
            if dtype == "float64":
                w, U = top_eigh(K_c, k, solver, tol=1e-10)
            else:
                w, U = top_eigh_operator(
                    matmat32, n, k, solver, tol=1.2e-6, dtype_eps=EPS["float32"], matrix_norm=frob_c
                )
            assert np.all(np.diff(w) <= 0), name
            tol = _tol_eig(dtype, ref_w[0], frob_c, 1.0, n)
            compared += _check(name, w, U, ref_w, ref_V, tol)
    assert compared >= len(SOLVERS)  # the subspace was compared in most cases


def _fit(X, params, solver, dtype, k):
    est = KernelPCA(k, eigen_solver=solver, kernel_dtype=dtype, **params)
    with warnings.catch_warnings():
        # kernel_dtype="float32" warns when rounding the kernel may matter: the tolerance accounts for it.
        warnings.filterwarnings("ignore", message="kernel_dtype='float32'", category=UserWarning)
        est.fit(X)
    return est


def _sklearn(X, params, k):
    kw = {"kernel": params["kernel"], "eigen_solver": "dense"}
    if params["kernel"] == "rbf":
        kw["gamma"] = 1.0 / (2.0 * params["sigma"] ** 2)
    elif params["kernel"] == "poly":
        kw.update(gamma=1.0, degree=params["degree"], coef0=params["coef0"])
    try:
        return SKKernelPCA(k, **kw).fit(X)
    except ValueError as exc:
        # scipy's subset eigh returns no pair for K ≈ I (a cluster of equal eigenvalues),
        # and scikit-learn then fails inside _check_psd_eigenvalues: nothing to compare with.
        assert "zero-size array" in str(exc), exc
        return None


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "offset"])
def test_kernel_pca_matches_reference_and_sklearn(cases, family, kernel):
    """End to end: `kpca_lib.KernelPCA` against the reference and scikit-learn's dense solver."""
    X, params, _, ref_w, ref_V, frob, factor = cases[family, kernel]
    n = X.shape[0]
    compared = 0
    for k in _ks(n):
        sk = _sklearn(X, params, k)
        for solver, dtype in SOLVERS:
            name = f"{family}/{kernel}/{solver}/{dtype}/k={k}"
            est = _fit(X, params, solver, dtype, k)
            w, U = est.eigenvalues_, est.eigenvectors_
            assert w.shape == (k,) and U.shape == (n, k), name
            tol = _tol_eig(dtype, ref_w[0], frob, factor, n)
            # kpca_lib sets eigenvalues below 1e-12·λ₁ to exactly 0.
            compared += _check(
                name, w, U, np.where(ref_w > 1e-12 * ref_w[0], ref_w, 0.0), ref_V, tol
            )
            if sk is not None and sk.eigenvalues_.shape == (k,):
                sk_w = sk.eigenvalues_
                np.testing.assert_allclose(
                    w, sk_w, rtol=0, atol=2 * tol, err_msg=f"{name} vs sklearn"
                )
    assert compared >= len(SOLVERS)


@pytest.mark.parametrize("kernel", ["rbf", "poly", "rbf_narrow"])
def test_kernel_pca_offset_family_fit_eigenvalues(cases, kernel):
    """Far from the origin (1e6 + noise): the eigenvalues of the fit, at the tolerance today's kernels allow.

    The kernels are computed from ``xᵀy`` (not centred), so entries carry an
    absolute error of about ``eps·‖x‖²/σ²`` (RBF) relative to the kernel: the
    tolerance includes that factor. The tight version is
    :func:`test_kernel_pca_offset_family_tight`.
    """
    X, params, _, ref_w, _, frob, _ = cases["offset", kernel]
    n = X.shape[0]
    factor = 1.0 + float(np.max(np.einsum("ij,ij->i", X, X)))
    if params["kernel"] == "rbf":
        factor /= params["sigma"] ** 2
    for solver, dtype in SOLVERS:
        for k in (1, 3, 10):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est = _fit(X, params, solver, dtype, k)
            for w in caught:
                if ZERO_KERNEL in str(w.message):
                    # Said, not silent: every eigenvalue (and so every projection) is then 0.
                    # The polynomial kernel's entries here are ~4e24 and its centred variation
                    # ~4e12: below float32 rounding (float64 resolves it, see
                    # test_lanczos_resolves_the_offset_polynomial_kernel).
                    assert not np.any(est.eigenvalues_), (solver, dtype, k)
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            tol = _tol_eig(dtype, ref_w[0], frob, factor, n)
            np.testing.assert_allclose(
                est.eigenvalues_,
                np.where(ref_w[:k] > 1e-12 * ref_w[0], ref_w[:k], 0.0),
                rtol=0,
                atol=tol,
                err_msg=f"offset/{kernel}/{solver}/{dtype}/k={k}",
            )


def test_lanczos_resolves_the_offset_polynomial_kernel(cases):
    """Far from the origin, (xᵀy)² in float64: Lanczos finds what the dense solver finds."""
    X, params, _, ref_w, _, _, _ = cases["offset", "poly"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = _fit(X, params, "lanczos", "float64", 2)
    assert not [str(w.message) for w in caught if ZERO_KERNEL in str(w.message)]
    np.testing.assert_allclose(est.eigenvalues_, ref_w[:2], rtol=1e-5)


def test_kernel_pca_offset_family_tight(cases):
    """Far-offset data at the tolerance of centred data (possible once the kernel centres X)."""
    for kernel in ("linear", "rbf"):
        X, params, _, ref_w, ref_V, frob, factor = cases["offset", kernel]
        Xc = X - X.mean(axis=0)
        frob_c = float(np.linalg.norm(Xc @ Xc.T)) if kernel == "linear" else frob
        for solver, dtype in SOLVERS:
            for k in (1, 3):
                est = _fit(X, params, solver, dtype, k)
                tol = _tol_eig(dtype, ref_w[0], frob_c, factor, X.shape[0])
                _check(
                    f"offset/{kernel}/{solver}/{dtype}/k={k}",
                    est.eigenvalues_,
                    est.eigenvectors_,
                    ref_w,
                    ref_V,
                    tol,
                )


def test_auto_fallbacks_are_recorded(cases):
    """Every call reports its attempts; the returned one is verified."""
    X, params, _, ref_w, _, _, _ = cases["duplicated", "rbf_narrow"]
    with record_solver_reports() as reports:
        est = _fit(X, params, "auto", "float64", 4)
    assert reports and all(r.ok for r in reports)
    assert reports[-1].attempts[-1].verification.ok
    np.testing.assert_allclose(est.eigenvalues_, ref_w[:4], rtol=1e-9)
