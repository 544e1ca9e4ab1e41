"""kpca_lib.KernelPCA as a drop-in for sklearn.decomposition.KernelPCA (issue 25).

Defaults, ``remove_zero_eig``, sparse ``X``, float32 in → float32 out, precomputed
kernels (symmetric up to their dtype's rounding, any magnitude) and no silent zeros
with ``kernel_dtype="float32"``; each compared with scikit-learn where it has the
feature. The randomized solver is tested in ``test_solvers.py``, scikit-learn's own
tests in ``test_sklearn_kernel_pca_port.py``.
"""

import inspect
import re
import warnings

import numpy as np
import pytest
import scipy.sparse
from conftest import assert_allclose_up_to_sign, subspace_agreement
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.metrics import pairwise

from kpca_lib import ApproximateKernelPCA, KernelPCA

#: Parameters of ApproximateKernelPCA that scikit-learn's KernelPCA does not take.
_APPROXIMATE_ONLY = ("method", "n_features", "random_state")


def _ours(n_components, **params):
    """``ApproximateKernelPCA`` for parameters with a ``method``, else ``KernelPCA``."""
    if "method" in params:
        return ApproximateKernelPCA(n_components, **params)
    return KernelPCA(n_components, **params)


def _compare(ours, theirs, X_fit, X_new, *, rtol=1e-8):
    """Fit both, compare eigenvalues and projections (up to sign) of the training and new points."""
    Z, Z_ref = ours.fit_transform(X_fit), theirs.fit_transform(X_fit)
    scale = float(theirs.eigenvalues_[0])
    np.testing.assert_allclose(
        ours.eigenvalues_, theirs.eigenvalues_, rtol=rtol, atol=1e-10 * scale
    )
    atol = 1e-7 * np.sqrt(scale)
    assert_allclose_up_to_sign(Z, Z_ref, rtol=1e-6, atol=atol)
    assert_allclose_up_to_sign(ours.transform(X_new), theirs.transform(X_new), rtol=1e-6, atol=atol)


# -- 1. defaults ------------------------------------------------------------------------------


def test_defaults_are_scikit_learns():
    ours = inspect.signature(KernelPCA).parameters
    theirs = inspect.signature(SKKernelPCA).parameters
    shared = sorted(set(ours) & set(theirs) - {"tol"})
    assert {"kernel", "gamma", "degree", "coef0", "iterated_power", "remove_zero_eig"} <= set(
        shared
    )
    for name in shared:
        assert ours[name].default == theirs[name].default, name
    # scikit-learn's tol=0 ("the solver chooses") is accepted and means our default, None.
    X = np.random.default_rng(0).normal(size=(30, 4))
    np.testing.assert_array_equal(
        KernelPCA(3, tol=0).fit(X).eigenvalues_, KernelPCA(3).fit(X).eigenvalues_
    )


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"kernel": "rbf"},
        {"kernel": "poly"},
        {"kernel": "sigmoid"},
        {"kernel": "cosine"},
        {"n_components": 3},
        {"n_components": 3, "kernel": "poly", "coef0": 0.5},
    ],
)
def test_no_arguments_behave_as_scikit_learn(rng, params):
    X, X_new = rng.normal(size=(60, 5)) * 0.6, rng.normal(size=(7, 5)) * 0.6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sigmoid kernel is not PSD: ours says so
        ours = KernelPCA(**params)
        theirs = SKKernelPCA(eigen_solver="dense", **params)
        if params.get("kernel") == "sigmoid":  # every component would include negative ones
            ours.set_params(n_components=4)
            theirs.set_params(n_components=4)
        _compare(ours, theirs, X, X_new)
    if params.get("kernel") in ("rbf", "poly", "sigmoid"):
        assert ours.gamma_ == theirs.gamma_ == 1 / 5


def test_sigma_is_the_rbf_bandwidth_and_an_error_with_any_other_kernel(rng):
    X = rng.normal(size=(40, 3))
    rbf = KernelPCA(3, kernel="rbf", sigma=0.7).fit(X)
    assert rbf.gamma_ == pytest.approx(1 / (2 * 0.7**2)) and rbf.sigma_ == pytest.approx(0.7)
    # KernelPCA(k, sigma=s) meant the RBF kernel under the old default; now it would be a
    # linear PCA that ignores s: refused, naming the fix.
    for kernel in ("linear", "poly", "cosine", "sigmoid", "precomputed", lambda x, y: x @ y):
        with pytest.raises(ValueError, match="bandwidth of the RBF kernel.*pass kernel='rbf'"):
            KernelPCA(3, kernel=kernel, sigma=0.7).fit(X @ X.T if kernel == "precomputed" else X)
    with pytest.raises(ValueError, match="default kernel is 'linear'"):
        KernelPCA(3, sigma=0.7).fit(X)
    with pytest.raises(ValueError, match="sigma or gamma, not both"):
        KernelPCA(kernel="rbf", sigma=1.0, gamma=0.5).fit(X)
    with pytest.raises(ValueError, match=r"'sigma' parameter of KernelPCA must be .* \(0.0, inf\)"):
        KernelPCA(kernel="rbf", sigma=0.0).fit(X)


# -- 2. remove_zero_eig ---------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["dense", "arpack", "lanczos", "randomized"])
def test_remove_zero_eig_matches_scikit_learn(rng, solver):
    X = rng.normal(size=(250, 3)) @ rng.normal(size=(3, 6))  # rank 3 in 6 dimensions
    for remove in (False, True):
        ours = KernelPCA(5, eigen_solver=solver, remove_zero_eig=remove).fit(X)
        theirs = SKKernelPCA(5, eigen_solver="dense", remove_zero_eig=remove).fit(X)
        assert ours.transform(X).shape == theirs.transform(X).shape == (250, 3 if remove else 5)
        np.testing.assert_allclose(ours.eigenvalues_[:3], theirs.eigenvalues_[:3], rtol=1e-9)
        np.testing.assert_array_equal(ours.eigenvalues_[3:], 0.0)


def test_remove_zero_eig_with_an_approximation(rng):
    X = rng.normal(size=(200, 2))
    kp = ApproximateKernelPCA(4, kernel="linear", n_features=30, random_state=0)
    assert kp.fit_transform(X).shape == (200, 4)
    assert kp.set_params(remove_zero_eig=True).fit_transform(X).shape == (200, 2)


_NO_VARIANCE = [  # every sample the same point in feature space, for each way of fitting
    ({"eigen_solver": "dense"}, np.ones((6, 3))),
    ({"eigen_solver": "lanczos"}, np.ones((6, 3))),
    ({"eigen_solver": "randomized", "random_state": 0}, np.ones((6, 3))),
    ({"kernel": "rbf"}, 1.0 + 1e-20 * np.arange(18.0).reshape(6, 3)),  # equal in float64
    ({"kernel": "precomputed"}, np.full((6, 6), 2.5)),
    ({"method": "nystroem", "n_features": 4, "random_state": 0, "kernel": "linear"}, np.ones((6, 3))),
]


@pytest.mark.parametrize(("params", "X"), _NO_VARIANCE)
@pytest.mark.parametrize("n_components", [None, 2])
def test_no_component_left_is_an_empty_result_and_a_warning(params, X, n_components):
    """As in scikit-learn, removing the zero components can leave none: an (n, 0) result,
    and a warning naming the cause (scikit-learn says nothing)."""
    theirs_params = {key: value for key, value in params.items() if key not in _APPROXIMATE_ONLY}
    theirs_params["eigen_solver"] = "dense"
    remove = {"remove_zero_eig": True}
    expected = "n_components=None keeps only" if n_components is None else "remove_zero_eig=True"
    kp = _ours(n_components, **params, **remove)
    with pytest.warns(UserWarning, match=f"no variance to analyse: {expected}.*0 columns") as w:
        Z = kp.fit_transform(X)
    assert w[0].filename == __file__  # the warning points at the caller's line
    theirs = SKKernelPCA(n_components, **theirs_params, **remove).fit_transform(X)
    assert Z.shape == theirs.shape == (6, 0)
    assert kp.transform(X).shape == (6, 0)
    assert kp.eigenvalues_.shape == (0,)
    assert list(kp.get_feature_names_out()) == []
    # Kept zero components are projections of 0, and said so.
    with pytest.warns(UserWarning, match="every projection is 0"):
        np.testing.assert_array_equal(_ours(2, **params).fit_transform(X), 0.0)
    # The pre-image map needs a component to learn from: refused, pointing at the cause.
    if params.get("kernel") != "precomputed":
        with (
            pytest.warns(UserWarning, match="no variance"),
            pytest.raises(ValueError, match="fit_inverse_transform=True.*none is left"),
        ):
            _ours(n_components, fit_inverse_transform=True, **params, **remove).fit(X)


# -- 3. sparse X ----------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf", "sigmoid", "cosine"])
@pytest.mark.parametrize("solver", ["dense", "arpack", "randomized"])
def test_sparse_matches_scikit_learn(kernel, solver):
    X = scipy.sparse.random(120, 40, density=0.1, format="csr", random_state=0)
    X_new = scipy.sparse.random(9, 40, density=0.1, format="csr", random_state=1)
    params = {"kernel": kernel, "gamma": 0.5} if kernel == "sigmoid" else {"kernel": kernel}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sigmoid: not PSD
        ours = KernelPCA(3, eigen_solver=solver, random_state=0, **params)
        _compare(ours, SKKernelPCA(3, eigen_solver="dense", **params), X, X_new)
        assert scipy.sparse.issparse(ours.X_fit_)
        # dense and sparse rows give the same projections; so does a dense fit
        np.testing.assert_allclose(
            ours.transform(X_new.toarray()), ours.transform(X_new), atol=1e-12
        )
        dense = KernelPCA(3, eigen_solver=solver, random_state=0, **params).fit(X.toarray())
    assert_allclose_up_to_sign(dense.transform(X_new), ours.transform(X_new), atol=1e-8)


def test_sparse_is_never_densified(monkeypatch):
    # 40 points with 3000 features: nothing of that width may become dense.
    X = scipy.sparse.random(40, 3000, density=0.01, format="csr", random_state=0)
    X_new = scipy.sparse.random(5, 3000, density=0.01, format="csr", random_state=1)
    real = {
        cls: cls.toarray
        for cls in (scipy.sparse.csr_matrix, scipy.sparse.csc_matrix, scipy.sparse.coo_matrix)
    }

    def guarded(cls):
        def toarray(self, *args, **kwargs):
            assert self.shape[1] != 3000, "X was densified"
            return real[cls](self, *args, **kwargs)

        return toarray

    for cls in real:
        monkeypatch.setattr(cls, "toarray", guarded(cls))
    for kernel in ("linear", "poly", "rbf", "sigmoid", "cosine"):
        kp = KernelPCA(3, kernel=kernel, gamma=0.01)
        kp.fit_transform(X)
        kp.transform(X_new)
        kp.kernel_matrix_c()


def test_sparse_rbf_far_from_the_origin_is_accurate(rng):
    # Sparse data are not shifted by their mean; close pairs far from 0 are recomputed.
    X = 1e5 + rng.normal(size=(80, 3))
    ours = KernelPCA(3, kernel="rbf", sigma=1.0).fit(scipy.sparse.csr_matrix(X))
    dense = KernelPCA(3, kernel="rbf", sigma=1.0).fit(X)  # shifted, cancellation free
    np.testing.assert_allclose(ours.eigenvalues_, dense.eigenvalues_, rtol=1e-9)


def test_sparse_inverse_transform_matches_the_dense_fit():
    X = scipy.sparse.random(60, 10, density=0.3, format="csr", random_state=0)
    sparse = KernelPCA(3, kernel="rbf", fit_inverse_transform=True).fit(X)
    dense = KernelPCA(3, kernel="rbf", fit_inverse_transform=True).fit(X.toarray())
    Z = dense.transform(X.toarray())
    signs = np.sign(np.sum(sparse.transform(X) * Z, axis=0))
    np.testing.assert_allclose(
        sparse.inverse_transform(Z * signs), dense.inverse_transform(Z), atol=1e-8
    )


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel": "precomputed"}, "kernel='precomputed' needs the dense kernel matrix"),
        ({"kernel": lambda x, y: float(x @ y)}, "callable kernel"),
        ({"method": "nystroem", "n_features": 5}, "method='nystroem' computes dense"),
    ],
)
def test_sparse_is_refused_where_it_is_not_meaningful(params, match):
    X = scipy.sparse.random(20, 20, density=0.3, format="csr", random_state=0)
    with pytest.raises(ValueError, match=f"scipy.sparse.*{match}.*X.toarray"):
        _ours(2, **params).fit(X)
    kp = _ours(2, **{k: v for k, v in params.items() if k != "kernel"}).fit(X.toarray())
    if "method" in params:
        with pytest.raises(ValueError, match="scipy.sparse"):
            kp.transform(X)


# -- 4. float32 in, float32 out ---------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "rbf", "fit_inverse_transform": True},
        {"kernel": "poly", "fit_inverse_transform": True},
        {"method": "nystroem", "n_features": 20, "random_state": 0, "kernel": "rbf"},
    ],
)
@pytest.mark.parametrize("fit_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("new_dtype", [np.float32, np.float64, np.int64])
def test_output_dtype_follows_scikit_learn(rng, params, fit_dtype, new_dtype):
    X = rng.normal(size=(40, 4))
    X_new = (rng.normal(size=(6, 4)) * 3).astype(new_dtype)
    ours = _ours(3, **params)
    Z = ours.fit_transform(X.astype(fit_dtype))
    Z_new = ours.transform(X_new)
    sk_params = {k: v for k, v in params.items() if k not in _APPROXIMATE_ONLY}
    theirs = SKKernelPCA(3, **sk_params)
    assert Z.dtype == theirs.fit_transform(X.astype(fit_dtype)).dtype
    assert Z_new.dtype == theirs.transform(X_new).dtype
    if params.get("fit_inverse_transform"):
        assert ours.inverse_transform(Z).dtype == theirs.inverse_transform(Z).dtype
        assert ours.inverse_transform(Z_new).dtype == theirs.inverse_transform(Z_new).dtype
    # computed in float64 and rounded once at the end
    ref = _ours(3, **params).fit(X.astype(fit_dtype).astype(np.float64))
    np.testing.assert_array_equal(Z_new, ref.transform(X_new).astype(Z_new.dtype))
    assert ours.eigenvalues_.dtype == np.float64


# -- 5. precomputed kernels: symmetry up to the dtype's rounding, any magnitude ----------------


def _float32_kernel_with_rounding_asymmetry(rng, n=200):
    X = rng.normal(size=(n, 20))
    K = (X @ X.T).astype(np.float32)
    upper = np.triu_indices(n, 1)
    K[upper] = np.nextafter(K[upper], np.float32(np.inf))  # the halves differ by one ulp
    return K


def test_precomputed_symmetric_up_to_float32_rounding_is_accepted(rng):
    K = _float32_kernel_with_rounding_asymmetry(rng)
    assert np.max(np.abs(K - K.T)) > 0
    ours = KernelPCA(4, kernel="precomputed").fit(K)
    sym = 0.5 * (K.astype(np.float64) + K.T.astype(np.float64))
    ref = SKKernelPCA(4, kernel="precomputed", eigen_solver="dense").fit(sym)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-9)
    assert ours.transform(K[:5]).dtype == np.float32  # float32 kernels in, float32 out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_precomputed_asymmetry_is_refused_with_numbers(rng, dtype):
    X = rng.normal(size=(150, 5))
    K = (X @ X.T).astype(dtype)
    K[61, 140] += 1e-3 * np.abs(K).max()  # not rounding: 1e-3 of the largest entry
    with pytest.raises(ValueError) as info:
        KernelPCA(2, kernel="precomputed").fit(K)
    message = str(info.value)
    shown = re.search(
        r"K\[(\d+), (\d+)\] = (\S+) but K\[(\d+), (\d+)\] = (\S+), a difference of (\S+), .*"
        r"\(tolerance (\S+) = ",
        message,
    )
    assert shown, message
    i, j, a, _, _, b, diff, tolerance = shown.groups()
    assert {int(i), int(j)} == {61, 140} and float(a) != float(b)  # enough digits to differ
    assert float(diff) == pytest.approx(abs(float(K[61, 140]) - float(K[140, 61])), rel=1e-2)
    assert float(diff) > float(tolerance) and str(np.dtype(dtype)) in message
    assert "(K + K.T) / 2" in message


@pytest.mark.parametrize("scale", [1e150, 1e-150, 1e250])
def test_precomputed_kernels_of_any_magnitude(rng, scale):
    X, X_new = rng.normal(size=(60, 3)), rng.normal(size=(5, 3))
    K, K_new = pairwise.rbf_kernel(X, gamma=0.3), pairwise.rbf_kernel(X_new, X, gamma=0.3)
    ref = KernelPCA(3, kernel="precomputed").fit(K)
    big = KernelPCA(3, kernel="precomputed").fit(K * scale)
    np.testing.assert_allclose(big.eigenvalues_, ref.eigenvalues_ * scale, rtol=1e-12)
    np.testing.assert_allclose(
        big.transform(K_new * scale),
        ref.transform(K_new) * np.sqrt(scale),
        rtol=1e-9,
        atol=1e-12 * np.sqrt(scale),
    )


def test_precomputed_eigenvalues_that_overflow_name_the_fix(rng):
    X = rng.normal(size=(60, 3))
    with pytest.raises(
        ValueError, match="overflow float64.*divide the kernel by a constant"
    ) as info:
        KernelPCA(3, kernel="precomputed").fit(pairwise.linear_kernel(X) * 1e307)
    assert "StandardScaler" not in str(info.value)


# -- 6. no silent zeros with kernel_dtype="float32" -------------------------------------------


@pytest.mark.parametrize("coef0", [3e2, 1e3])
@pytest.mark.parametrize("solver", ["lanczos", "arpack", "randomized"])
def test_float32_components_below_resolution_are_warned_about(rng, coef0, solver):
    # (x + c)^4 in one dimension: the centred components shrink like c³, c², c, 1, so float32
    # storage of the kernel (~c⁴ per entry) resolves only the first ones.
    X = rng.normal(size=(400, 1))
    params = {"kernel": "poly", "degree": 4, "gamma": 1.0, "coef0": coef0, "eigen_solver": solver}
    exact = KernelPCA(4, **params).fit(X)
    assert np.all(exact.eigenvalues_ > 0)  # float64 resolves all four
    with pytest.warns(UserWarning, match="kernel_dtype='float32'") as record:
        kp = KernelPCA(4, kernel_dtype="float32", **params).fit(X)
    zeros = int(np.sum(kp.eigenvalues_ == 0))
    assert zeros >= 1
    message = " ".join(str(w.message) for w in record)
    assert f"{zeros} of the 4 requested components" in message
    assert "kernel_dtype='float64'" in message and f"n_components={4 - zeros}" in message
    with pytest.warns(UserWarning, match="dropped \\(remove_zero_eig=True\\)"):
        kept = KernelPCA(4, kernel_dtype="float32", remove_zero_eig=True, **params).fit(X)
    assert kept.n_components_ == 4 - zeros


def test_float32_without_zeros_is_silent(rng):
    X = rng.normal(size=(400, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kp = KernelPCA(
            3, kernel="rbf", sigma=0.5, eigen_solver="lanczos", kernel_dtype="float32"
        ).fit(X)
    ref = KernelPCA(3, kernel="rbf", sigma=0.5).fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, ref.eigenvalues_, rtol=1e-5)
    assert subspace_agreement(kp.eigenvectors_, ref.eigenvectors_) > 1 - 1e-6


def test_float32_with_nothing_resolved_names_float32(rng):
    X = rng.normal(size=(300, 2))
    # xᵀy + c: the centred kernel (eigenvalues ~ n) is c·1e-5 below the stored one (~ n·c).
    params = {"kernel": "poly", "degree": 1, "gamma": 1.0, "coef0": 1e8, "eigen_solver": "lanczos"}
    with pytest.warns(UserWarning, match=r"below float32 rounding.*kernel_dtype='float64'"):
        kp = KernelPCA(2, kernel_dtype="float32", **params).fit(X)
    np.testing.assert_array_equal(kp.eigenvalues_, 0.0)
    assert np.all(KernelPCA(2, **params).fit(X).eigenvalues_ > 0)  # float64 resolves them


def test_float32_precomputed_kernel_components_below_its_resolution_are_warned_about(rng):
    X = rng.normal(size=(300, 2)) * [1.0, 1e-4]  # the second direction carries 1e-8 of the variance
    K = X @ X.T
    assert np.all(KernelPCA(2, kernel="precomputed").fit(K).eigenvalues_ > 0)
    with pytest.warns(
        UserWarning, match=r"precomputed kernel matrix is float32: 1 of the 2 requested"
    ):
        kp = KernelPCA(2, kernel="precomputed").fit(K.astype(np.float32))
    assert kp.eigenvalues_[0] > 0 and kp.eigenvalues_[1] == 0


def test_arpack_that_does_not_converge_is_retried_with_larger_subspaces():
    # A degree-4 polynomial kernel of 2-D points has rank 14; asking ARPACK (tol=0) for 11
    # pairs reaches into the cluster of rounding-level eigenvalues, which it often fails to
    # converge with its default subspace (the matrix's norm is ~1e-7, so ARPACK's absolute
    # floor eps^(2/3) matters). On such data scikit-learn's eigsh returned a result where
    # ours raised at the first non-convergence (and on others, e.g. seed 0 here, it raises
    # ArpackNoConvergence itself). Ours is retried with larger subspaces and still verified.
    from sklearn.datasets import make_circles

    from kpca_lib._eigen import record_solver_reports

    params = dict(kernel="poly", gamma=0.0019171225, degree=4, coef0=-0.0079121, n_components=11)
    retried = 0
    for seed in range(4):
        X = make_circles(223, noise=0.05, factor=0.4, random_state=seed)[0]
        with record_solver_reports() as reports:
            ours = KernelPCA(**params, eigen_solver="arpack").fit(X)
        retried += any("did not converge" in (a.error or "") for r in reports for a in r.attempts)
        sk = SKKernelPCA(**params, eigen_solver="dense").fit(X)
        K = pairwise.polynomial_kernel(X, degree=4, gamma=params["gamma"], coef0=params["coef0"])
        J = np.eye(len(X)) - 1.0 / len(X)
        reference = np.linalg.eigvalsh(J @ K @ J)[::-1][:11]
        scale = reference[0]
        np.testing.assert_allclose(ours.eigenvalues_, reference, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(ours.eigenvalues_, sk.eigenvalues_, rtol=0, atol=1e-9 * scale)
        assert np.count_nonzero(ours.eigenvalues_) == 8  # the rest is rounding: exactly 0
    assert retried  # the retry was exercised (on all 4 of these data sets with SciPy 1.17)


# -- 7. scikit-learn's behaviour where it is right (issue 41) ---------------------------------


def test_every_scikit_learn_parameter_exists():
    ours = set(inspect.signature(KernelPCA).parameters)
    assert set(inspect.signature(SKKernelPCA).parameters) <= ours


def laplacian(x, y, scale=1.0):
    """A callable kernel with a parameter (module level: a fitted model pickles)."""
    return float(np.exp(-np.abs(x - y).sum() / scale))


def test_kernel_params_are_passed_to_a_callable_kernel(rng):
    X, X_new = rng.normal(size=(30, 3)), rng.normal(size=(5, 3))
    params = {"n_components": 3, "kernel": laplacian, "kernel_params": {"scale": 2.5}}
    ours, theirs = KernelPCA(**params), SKKernelPCA(**params, eigen_solver="dense")
    _compare(ours, theirs, X, X_new)
    # Used, not ignored: another scale is another kernel.
    other = KernelPCA(3, kernel=laplacian).fit(X)
    assert not np.allclose(other.eigenvalues_, ours.eigenvalues_)
    # None and {} are no parameters; the fitted model pickles (a partial of the callable).
    import pickle

    for empty in (None, {}):
        np.testing.assert_array_equal(
            KernelPCA(3, kernel=laplacian, kernel_params=empty).fit(X).eigenvalues_,
            other.eigenvalues_,
        )
    again = pickle.loads(pickle.dumps(ours))
    np.testing.assert_array_equal(again.transform(X_new), ours.transform(X_new))


def test_kernel_params_with_a_named_kernel_are_refused_on_purpose(rng):
    # DIFFERS ON PURPOSE: scikit-learn ignores kernel_params for a named kernel, silently
    # (kernel_params={"gamma": 10} with kernel="rbf" fits gamma=1/n_features); we refuse,
    # as sigma with a kernel other than "rbf" (docs/library.md says so).
    X = rng.normal(size=(20, 3))
    with pytest.raises(ValueError, match=r"kernel_params=\{'gamma': 10\}.*named kernel.*gamma="):
        KernelPCA(2, kernel="rbf", kernel_params={"gamma": 10}).fit(X)
    with pytest.raises(ValueError, match="'kernel_params' parameter of KernelPCA must be an inst"):
        KernelPCA(2, kernel=lambda x, y: float(x @ y), kernel_params=[1]).fit(X)
    KernelPCA(2, kernel="rbf", kernel_params={}).fit(X)  # nothing to ignore


@pytest.mark.parametrize("solver", ["auto", "dense", "arpack", "randomized", "lanczos"])
@pytest.mark.parametrize("params", [{}, {"kernel": "rbf"}, {"remove_zero_eig": True}])
def test_n_components_above_n_samples_is_capped_as_scikit_learn(rng, solver, params):
    X = rng.normal(size=(12, 3))
    ours = KernelPCA(20, eigen_solver=solver, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's arpack: "k >= N ... using eigh"
        theirs = SKKernelPCA(20, eigen_solver="dense" if solver == "lanczos" else solver, **params)
        Z_ref = theirs.fit_transform(X)
    Z = ours.fit_transform(X)
    assert Z.shape == Z_ref.shape == ((12, 3) if params.get("remove_zero_eig") else (12, 12))
    assert ours.n_components == 20 and ours.n_components_ == Z.shape[1]  # the parameter kept
    assert ours.transform(X).shape == Z.shape
    top = theirs.eigenvalues_[0]
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, atol=1e-9 * top)


def test_n_components_above_a_fold_scores_in_grid_search(rng):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline

    X = rng.normal(size=(24, 3))
    y = (X[:, 0] > 0).astype(int)
    pipe = Pipeline([("kpca", KernelPCA(kernel="rbf")), ("clf", LogisticRegression())])
    search = GridSearchCV(pipe, {"kpca__n_components": [2, 20]}, cv=3, error_score="raise")
    search.fit(X, y)  # 20 > 16 training points per fold: capped, as scikit-learn
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_n_components_true_is_refused(rng):
    with pytest.raises(ValueError, match="n_components must be None or an integer >= 1"):
        KernelPCA(True).fit(rng.normal(size=(10, 2)))  # a bool is an Integral to scikit-learn


@pytest.mark.parametrize("n_components", [0, -1, 2.5])
def test_n_components_below_one_is_still_refused(rng, n_components):
    X = rng.normal(size=(10, 2))
    with pytest.raises(ValueError, match="'n_components' parameter of KernelPCA") as ours:
        KernelPCA(n_components).fit(X)
    with pytest.raises(ValueError) as theirs:
        SKKernelPCA(n_components).fit(X)
    assert str(ours.value) == str(theirs.value)  # scikit-learn's own validation and words


@pytest.mark.parametrize(
    "params",
    [
        {"tol": -1.0},
        {"max_iter": 0},
        {"max_iter": 2.5},
        {"iterated_power": -1},
        {"iterated_power": "many"},
        {"eigen_solver": "lapack"},
        {"remove_zero_eig": "yes"},
        {"fit_inverse_transform": 1},
        {"copy_X": None},
        {"alpha": -1.0},
        {"coef0": np.nan},
        {"kernel": "laplacian"},
        {"random_state": -1},
        {"random_state": "seed"},
        {"n_jobs": 1.5},
    ],
)
def test_parameters_are_checked_by_scikit_learns_constraints(rng, params):
    """Every parameter's type and range through scikit-learn's own validation, before any work:
    the same exception type and message as scikit-learn's KernelPCA, naming the parameter,
    what is allowed and the value (what we allow in addition: our "lanczos" solver, tol=None,
    a numpy Generator as random_state). Parameters of ours only have their own constraints."""
    from sklearn.utils._param_validation import InvalidParameterError

    X = rng.normal(size=(10, 2))
    with pytest.raises(InvalidParameterError) as ours:
        KernelPCA(2, **params).fit(X)
    with pytest.raises(InvalidParameterError) as theirs:
        SKKernelPCA(2, **params).fit(X)
    head, tail = str(theirs.value).split(" must be ")
    assert str(ours.value).startswith(head + " must be ")
    assert str(ours.value).endswith(tail.split(". ")[-1])  # "Got ... instead."
    if "eigen_solver" in params:
        assert "'lanczos'" in str(ours.value)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"tol": np.inf}, r"'tol' parameter of KernelPCA must be a float in the range \[0.0, inf\)"),
        ({"gamma": 0.0}, r"'gamma' parameter of KernelPCA must be a float in the range \(0.0"),
        ({"kernel_dtype": "float16"}, "'kernel_dtype' parameter of KernelPCA"),
        ({"approximation": "random"}, "'approximation' parameter of KernelPCA"),
        ({"random_state": np.random.default_rng(0), "n_jobs": 0}, "n_jobs"),
    ],
)
def test_where_our_constraints_are_stricter_or_our_own(rng, params, match):
    # DIFFERS ON PURPOSE (docs/library.md): an infinite tol would verify anything, and a zero
    # gamma is a constant kernel (scikit-learn accepts both); kernel_dtype and approximation
    # are ours; a numpy Generator is accepted as random_state; n_jobs=0 names no thread count.
    with pytest.raises(ValueError, match=match):
        KernelPCA(2, **params).fit(rng.normal(size=(10, 2)))


def test_alpha_zero_is_allowed_as_scikit_learn(rng):
    X, X_new = rng.normal(size=(25, 3)), rng.normal(size=(6, 3))
    params = {"n_components": 4, "kernel": "rbf", "gamma": 0.3, "fit_inverse_transform": True}
    ours = KernelPCA(**params, alpha=0).fit(X)
    theirs = SKKernelPCA(**params, alpha=0, eigen_solver="dense").fit(X)
    # alpha=0 interpolates the training pairs: their projections map back to the points.
    np.testing.assert_allclose(ours.inverse_transform(ours.transform(X)), X, atol=1e-6)
    signs = np.sign(np.sum(ours.transform(X_new) * theirs.transform(X_new), axis=0))
    Z = theirs.transform(X_new) * signs
    scale = np.abs(theirs.inverse_transform(theirs.transform(X_new))).max()
    np.testing.assert_allclose(
        ours.inverse_transform(Z),
        theirs.inverse_transform(theirs.transform(X_new)),
        atol=1e-4 * scale,
    )
    with pytest.raises(ValueError, match="alpha"):
        KernelPCA(**params, alpha=-1e-3).fit(X)
    # A singular kernel of the projections (linear: rank 4 < 25) is a clear error, where
    # scikit-learn raises LinAlgError.
    with pytest.raises(ValueError, match="singular or not positive definite.*larger alpha"):
        KernelPCA(4, fit_inverse_transform=True, alpha=0).fit(X)


@pytest.mark.parametrize("scale", [2.0**-330, 1e-100, 1e100, 2.0**330, 1e150])
def test_linear_kernel_of_data_at_extreme_scales_matches_scikit_learn(rng, scale):
    # The linear kernel of s·X is s²·K(X): fitted as X·2^-e (exact) and scaled back, where
    # its values (up to ~1e300) would be refused by the eigensolvers' range check.
    X, X_new = rng.normal(size=(40, 5)) + 3.0, rng.normal(size=(7, 5))
    ours = KernelPCA(3).fit(X * scale)
    theirs = SKKernelPCA(3, eigen_solver="dense").fit(X * scale)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-10)
    assert_allclose_up_to_sign(
        ours.transform(X_new * scale), theirs.transform(X_new * scale), rtol=1e-9, atol=0
    )
    # Bit for bit our unit-scale fit, scaled, where the scale is a power of two.
    if np.log2(scale) == int(np.log2(scale)):
        unit = KernelPCA(3).fit(X)
        np.testing.assert_array_equal(ours.eigenvalues_, unit.eigenvalues_ * scale**2)
        np.testing.assert_array_equal(ours.transform(X_new * scale), unit.transform(X_new) * scale)
        np.testing.assert_array_equal(ours.fit_transform(X * scale), unit.fit_transform(X) * scale)
        np.testing.assert_array_equal(ours.alphas_, unit.alphas_ / scale)
    np.testing.assert_array_equal(ours.X_fit_, X * scale)  # the caller's units


def test_inverse_transform_exists_only_with_fit_inverse_transform(rng):
    # scikit-learn's check_array_api_input calls inverse_transform whenever
    # hasattr(est, "inverse_transform"): without the map there is no such attribute, and
    # calling it still raises scikit-learn's NotFittedError (an AttributeError too).
    from sklearn.exceptions import NotFittedError
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = rng.normal(size=(20, 3))
    est = KernelPCA(2).fit(X)
    assert not hasattr(est, "inverse_transform") and not hasattr(KernelPCA(2), "inverse_transform")
    with pytest.raises(NotFittedError, match="fit_inverse_transform parameter was not set"):
        est.inverse_transform(est.transform(X))
    assert hasattr(KernelPCA, "inverse_transform")  # the method, on the class (help, docs)
    assert "Pre-images" in KernelPCA.inverse_transform.__doc__
    assert hasattr(KernelPCA(2, fit_inverse_transform=True), "inverse_transform")
    # DIFFERS ON PURPOSE: scikit-learn's Pipeline offers inverse_transform (that then raises)
    # when its KernelPCA has no map; with ours it does not offer it.
    assert not hasattr(make_pipeline(StandardScaler(), KernelPCA(2)).fit(X), "inverse_transform")
    pipe = make_pipeline(StandardScaler(), KernelPCA(2, fit_inverse_transform=True)).fit(X)
    assert pipe.inverse_transform(pipe.transform(X)).shape == X.shape


def test_remove_zero_eig_docstring_says_what_happens():
    doc = " ".join(KernelPCA.__doc__.split())
    assert "returns ``(n, 0)`` projections, as scikit-learn, and warns" in doc
    assert "raises a ``ValueError`` (naming the cause) instead of returning" not in doc
