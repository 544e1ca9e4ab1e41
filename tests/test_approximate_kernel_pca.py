"""ApproximateKernelPCA: the approximations as their own estimator, and the deprecated
``KernelPCA(approximation=...)`` spelling that now stands for it."""

import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
from conftest import assert_allclose_up_to_sign, subspace_agreement
from sklearn.base import clone
from sklearn.decomposition import PCA as SkPCA
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_lib import ApproximateKernelPCA, KernelPCA
from kpca_lib._approximate import fit_approximate, transform_approximate
from kpca_lib._kernel_params import estimator_kernel_spec
from kpca_lib.datasets import make_moons

METHODS = ("nystroem", "rff")

#: Nyström draws its n_features landmarks among the samples: a fit on fewer samples is a
#: ValueError that says so (by design, as before the split). These common checks fit 10 or
#: 15 samples, fewer than n_features=20; n_features=10 below passes every check.
_TOO_FEW_SAMPLES = (
    "fits 10 or 15 samples: fewer than the n_features=20 Nyström landmarks, a ValueError "
    "by design (n_features <= n_samples); ApproximateKernelPCA(n_features=10) passes it"
)


def _expected_failed_checks(estimator):
    if estimator.method == "nystroem" and estimator.n_features > 10:
        return dict.fromkeys(
            ("check_n_features_in_after_fitting", "check_estimators_nan_inf",
             "check_fit2d_1feature"),
            _TOO_FEW_SAMPLES,
        )
    return {}


@parametrize_with_checks(
    [
        ApproximateKernelPCA(n_components=2, n_features=20, random_state=0),
        ApproximateKernelPCA(n_components=2, method="rff", n_features=20, random_state=0),
        ApproximateKernelPCA(n_components=2, n_features=10, random_state=0),
        ApproximateKernelPCA(
            2, method="rff", n_features=20, gamma=0.1, fit_inverse_transform=True, alpha=0.1,
            random_state=0,
        ),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(300, noise=0.05, random_state=0)
    X_new, _ = make_moons(20, noise=0.05, random_state=1)
    return X, y, X_new


def _deprecated(**params):
    """``KernelPCA(approximation=...)``, fitted, with its one FutureWarning checked."""
    X = params.pop("X")
    with pytest.warns(FutureWarning, match="deprecated since 0.2") as record:
        kp = KernelPCA(**params).fit(X)
    assert sum(issubclass(w.category, FutureWarning) for w in record) == 1
    return kp


# -- the same model, bit for bit ------------------------------------------------------------


_RBF_CASES = [
    {"kernel": "rbf", "sigma": 0.4},
    {"kernel": "rbf", "gamma": 2.0, "fit_inverse_transform": True, "alpha": 0.1},
]
_OTHER_KERNELS = [  # random Fourier features exist for the RBF kernel only
    {"kernel": "poly", "degree": 2, "gamma": 0.5},
    {"kernel": "linear", "remove_zero_eig": True},
    {"kernel": lambda x, y: float(np.exp(-np.sum((x - y) ** 2)))},
    {"kernel": "cosine", "n_components": None},
]


@pytest.mark.parametrize(
    "method, params",
    [(m, p) for m in METHODS for p in _RBF_CASES] + [("nystroem", p) for p in _OTHER_KERNELS],
)
def test_equals_the_deprecated_spelling_bit_for_bit(moons, method, params):
    X, _, X_new = moons
    params = {"n_components": 3, **params}
    new = ApproximateKernelPCA(method=method, n_features=40, random_state=7, **params)
    Z = new.fit_transform(X)
    old = _deprecated(approximation=method, n_features=40, random_state=7, X=X, **params)
    with pytest.warns(FutureWarning):
        Z_old = clone(old).fit_transform(X)
    np.testing.assert_array_equal(Z, Z_old)
    for name in ("eigenvalues_", "explained_variance_", "components_", "feature_mean_"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name), err_msg=name)
    for name in ("n_components_", "n_features_in_", "gamma_", "sigma_"):
        assert getattr(new, name) == getattr(old, name), name
    np.testing.assert_array_equal(new.transform(X_new), old.transform(X_new))
    assert old.eigen_solver_ == "features"
    if params.get("fit_inverse_transform"):
        np.testing.assert_array_equal(new.inverse_transform(Z), old.inverse_transform(Z))
        np.testing.assert_array_equal(new.dual_coef_, old.dual_coef_)
        np.testing.assert_array_equal(new.X_transformed_fit_, old.X_transformed_fit_)


@pytest.mark.parametrize("method", METHODS)
def test_is_the_computation_of_kpca_lib_approximate(moons, method):
    """The estimator adds nothing to the computation of ``_approximate``: the same numbers."""
    X, _, X_new = moons
    est = ApproximateKernelPCA(4, method=method, n_features=30, sigma=0.5, random_state=3)
    Z = est.fit_transform(X)
    result = fit_approximate(
        estimator_kernel_spec(est, 2), X, 4, approximation=method, n_features=30,
        random_state=3, n_threads=1,
    )
    np.testing.assert_array_equal(est.eigenvalues_, result.eigenvalues)
    np.testing.assert_array_equal(est.components_, result.pca.components)
    np.testing.assert_array_equal(Z, transform_approximate(result, X))
    np.testing.assert_array_equal(est.transform(X_new), transform_approximate(result, X_new))


def test_float32_in_float32_out_as_the_deprecated_spelling(moons):
    X, _, X_new = moons
    X32 = X.astype(np.float32)
    new = ApproximateKernelPCA(2, n_features=30, sigma=0.5, random_state=0,
                               fit_inverse_transform=True)
    Z = new.fit_transform(X32)
    assert Z.dtype == np.float32 and new.transform(X_new.astype(np.float32)).dtype == np.float32
    assert new.transform(X_new).dtype == np.float64 and new.components_.dtype == np.float64
    assert new.inverse_transform(Z).dtype == np.float32
    with pytest.warns(FutureWarning):
        old = KernelPCA(2, kernel="rbf", sigma=0.5, approximation="nystroem", n_features=30,
                        random_state=0, fit_inverse_transform=True)
        Z_old = old.fit_transform(X32)
    assert Z_old.dtype == np.float32
    np.testing.assert_array_equal(Z, Z_old)
    np.testing.assert_array_equal(new.inverse_transform(Z), old.inverse_transform(Z))


# -- the FutureWarning of KernelPCA(approximation=...) ---------------------------------------


def test_the_warning_names_the_replacement_exactly(moons):
    X, _, _ = moons
    kp = KernelPCA(2, approximation="nystroem", n_features=50, random_state=0)  # linear kernel
    with pytest.warns(FutureWarning) as record:
        kp.fit(X)
    assert len(record) == 1
    message = str(record[0].message)
    assert record[0].filename == __file__  # at the caller's line
    assert message == (
        "KernelPCA(approximation='nystroem', n_features=50) is deprecated since 0.2 and will "
        "be removed in 0.3: use ApproximateKernelPCA(2, method='nystroem', n_features=50, "
        "kernel='linear', random_state=0) (kpca_lib.ApproximateKernelPCA: the same model and "
        "attributes)."
    )
    # The replacement, as written, is the same model.
    call = re.search(r"use (ApproximateKernelPCA\(.*?\)) \(", message).group(1)
    new = eval(call, {"ApproximateKernelPCA": ApproximateKernelPCA})
    np.testing.assert_array_equal(new.fit_transform(X), kp.transform(X))


@pytest.mark.parametrize("method", METHODS)
def test_the_warning_carries_every_parameter_that_matters(moons, method):
    X, _, _ = moons
    params = dict(kernel="rbf", sigma=0.3, remove_zero_eig=True, fit_inverse_transform=True,
                  alpha=0.01, n_jobs=1, random_state=5, eigen_solver="dense", copy_X=False)
    kp = KernelPCA(approximation=method, n_features=25, **params)
    with pytest.warns(FutureWarning) as record:
        Z = kp.fit_transform(X)  # fit_transform: one warning too
    assert len(record) == 1
    message = str(record[0].message)
    call = re.search(r"use (ApproximateKernelPCA\(.*?\)) \(", message).group(1)
    assert "eigen_solver" not in call and "copy_X" not in call  # exact-only options
    new = eval(call, {"ApproximateKernelPCA": ApproximateKernelPCA})
    assert new.get_params() == ApproximateKernelPCA(
        method=method, n_features=25, **{k: v for k, v in params.items()
                                         if k not in ("eigen_solver", "copy_X")}
    ).get_params()
    np.testing.assert_array_equal(new.fit_transform(X), Z)


def test_one_warning_per_fit_in_a_grid_search(moons):
    X, y, _ = moons
    pipe = make_pipeline(
        KernelPCA(2, kernel="rbf", approximation="rff", n_features=30, random_state=0),
        LogisticRegression(),
    )
    with pytest.warns(FutureWarning) as record:
        GridSearchCV(pipe, {"kernelpca__sigma": [0.2, 1.0]}, cv=2).fit(X, y)
    assert sum(issubclass(w.category, FutureWarning) for w in record) == 2 * 2 + 1  # + refit


def test_no_warning_without_approximation(moons):
    X, _, X_new = moons
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        plain = KernelPCA(2, kernel="rbf", sigma=0.5).fit(X)
        ignored = KernelPCA(2, kernel="rbf", sigma=0.5, n_features=7).fit(X)  # as before
        ApproximateKernelPCA(2, n_features=20, random_state=0).fit_transform(X)
        clone(KernelPCA(approximation="rff", n_features=5)).get_params()  # only a fit warns
    np.testing.assert_array_equal(ignored.transform(X_new), plain.transform(X_new))
    assert hasattr(ignored, "alphas_") and not hasattr(ignored, "components_")


# -- attributes on the right estimator ----------------------------------------------------------


def test_attributes_belong_to_their_estimator(moons):
    X, _, _ = moons
    approx = ApproximateKernelPCA(2, n_features=30, random_state=0).fit(X)
    for name in ("eigenvalues_", "explained_variance_", "components_", "feature_mean_",
                 "feature_map_", "n_components_", "n_features_in_", "gamma_", "sigma_"):
        assert hasattr(approx, name), name
    for name in ("alphas_", "eigenvectors_", "X_fit_", "X_transformed_fit_", "dual_coef_",
                 "feature_names_in_", "inverse_transform", "kernel_matrix_c"):
        assert not hasattr(approx, name), name
    with pytest.raises(NotFittedError, match="fit_inverse_transform"):
        approx.inverse_transform(np.zeros((1, 2)))
    exact = KernelPCA(2, kernel="rbf").fit(X)
    for name in ("components_", "feature_mean_", "feature_map_"):
        assert not hasattr(exact, name), name
        with pytest.raises(AttributeError, match="ApproximateKernelPCA"):
            getattr(exact, name)
    assert approx.components_.shape == (2, 30) and approx.feature_mean_.shape == (30,)
    assert approx.feature_map_.landmarks_.shape == (30, 2)
    np.testing.assert_allclose(approx.explained_variance_, approx.eigenvalues_ / len(X))
    assert approx.gamma_ == 0.5 and approx.sigma_ == 1.0  # gamma=None: 1/n_features_in
    inverse = ApproximateKernelPCA(2, n_features=30, random_state=0,
                                   fit_inverse_transform=True).fit(X)
    assert inverse.X_transformed_fit_.shape == (len(X), 2) and inverse.dual_coef_.shape == X.shape


def test_refit_without_the_pre_image_map_drops_it(moons):
    X, _, _ = moons
    est = ApproximateKernelPCA(2, n_features=30, random_state=0, fit_inverse_transform=True)
    est.fit(X).set_params(fit_inverse_transform=False).fit(X)
    assert not hasattr(est, "dual_coef_") and not hasattr(est, "inverse_transform")


def test_deprecated_spelling_switches_attributes_on_refit(moons):
    X, _, X_new = moons
    kp = KernelPCA(2, kernel="rbf", sigma=0.5).fit(X)
    kp.set_params(approximation="nystroem", n_features=30, random_state=0)
    with pytest.warns(FutureWarning):
        kp.fit(X)
    assert not hasattr(kp, "alphas_") and hasattr(kp, "feature_map_")
    assert kp.transform(X_new).shape == (20, 2)
    kp.set_params(approximation=None).fit(X)
    assert hasattr(kp, "alphas_") and not hasattr(kp, "feature_map_")


# -- scikit-learn's API: clone, pickle, Pipeline, GridSearchCV, pandas ------------------------


def test_clone_and_pickle(moons):
    X, _, X_new = moons
    est = ApproximateKernelPCA(3, method="rff", n_features=40, sigma=0.5, random_state=0)
    assert clone(est).get_params() == est.get_params()
    est.fit(X)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.transform(X_new), est.transform(X_new))
    np.testing.assert_array_equal(clone(est).fit(X).transform(X_new), est.transform(X_new))


def test_in_a_pipeline_and_a_grid_search(moons):
    X, y, _ = moons
    pipe = make_pipeline(
        ApproximateKernelPCA(2, n_features=50, random_state=0), LogisticRegression(C=1e4)
    )
    grid = GridSearchCV(
        pipe,
        {"approximatekernelpca__sigma": [0.2, 5.0],
         "approximatekernelpca__method": ["nystroem", "rff"]},
        cv=3,
    ).fit(X, y)
    assert grid.best_params_["approximatekernelpca__sigma"] == 0.2
    assert grid.best_score_ > 0.9


def test_set_output_pandas_and_feature_names(rng):
    X = pd.DataFrame(rng.normal(size=(40, 3)), columns=["u", "v", "w"], index=range(100, 140))
    est = ApproximateKernelPCA(2, n_features=20, random_state=0).set_output(transform="pandas")
    Z = est.fit_transform(X)
    assert isinstance(Z, pd.DataFrame) and list(Z.index) == list(X.index)
    assert list(Z.columns) == ["approximatekernelpca0", "approximatekernelpca1"]
    assert list(est.feature_names_in_) == ["u", "v", "w"]
    np.testing.assert_allclose(est.transform(X).to_numpy(), Z.to_numpy(), atol=1e-10)
    with pytest.raises(ValueError, match="feature names"):
        est.transform(X[["w", "v", "u"]])


# -- errors that name the fix -------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, match",
    [
        ({"method": "random"}, r"'method' parameter of ApproximateKernelPCA must be a str among"),
        ({"method": None}, "'method' parameter of ApproximateKernelPCA"),
        ({"method": "rff", "kernel": "poly"}, "method='rff'.*'rbf' only.*method='nystroem'"),
        ({"kernel": "precomputed"}, r"cannot be approximated.*KernelPCA\(kernel='precomputed'\)"),
        ({"n_features": 0}, r"'n_features' parameter .* in the range \[1, inf\)"),
        ({"n_features": 1.5}, "n_features"),
        ({"n_features": 11}, r"n_features = 11 Nyström landmarks.*n_samples = 10"),
        ({"method": "rff", "n_features": 3, "n_components": 4}, r"n_components.*between 1 and 3"),
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": 1.0, "gamma": 0.5}, "not both"),
        ({"kernel": "poly", "sigma": 1.0}, "ApproximateKernelPCA's default kernel is 'rbf'"),
        ({"kernel_params": {"a": 1}}, "kernel_params"),
        ({"fit_inverse_transform": True, "alpha": -1.0}, "alpha"),
        ({"remove_zero_eig": "yes"}, "'remove_zero_eig' parameter of ApproximateKernelPCA"),
        ({"random_state": "seed"}, "random_state"),
        ({"n_jobs": 0}, "n_jobs"),
    ],
)
def test_bad_parameters_name_the_fix(rng, params, match):
    params = {"n_components": 2, "n_features": 5, **params}
    with pytest.raises(ValueError, match=match):
        ApproximateKernelPCA(**params).fit(rng.normal(size=(10, 2)))


@pytest.mark.parametrize("method", METHODS)
def test_sparse_x_is_refused_with_the_fix(method):
    X = scipy.sparse.random(30, 5, density=0.5, format="csr", random_state=0)
    match = rf"scipy.sparse.*method='{method}'.*X.toarray\(\).*KernelPCA"
    with pytest.raises(ValueError, match=match):
        ApproximateKernelPCA(2, method=method, n_features=5).fit(X)
    est = ApproximateKernelPCA(2, method=method, n_features=5, random_state=0).fit(X.toarray())
    with pytest.raises(ValueError, match="scipy.sparse"):
        est.transform(X)


def test_bad_data_at_transform_and_inverse_transform(rng):
    est = ApproximateKernelPCA(2, n_features=10, random_state=0, fit_inverse_transform=True)
    est.fit(rng.normal(size=(30, 2)))
    with pytest.raises(ValueError, match="X has 3 features, but ApproximateKernelPCA"):
        est.transform(rng.normal(size=(3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        est.transform([[np.nan, 1.0]])
    with pytest.raises(ValueError, match="n_components_ = 2"):
        est.inverse_transform(np.ones((2, 3)))
    with pytest.raises(NotFittedError):
        ApproximateKernelPCA().transform(np.ones((2, 2)))


# -- Dask arrays --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_dask_array_fit_equals_the_computed_array(method):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2345, 3)) * [1.0, 0.5, 2.0]
    Xd = da.from_array(X, chunks=((500, 800, 45, 1000), (2, 1)))  # uneven rows, split columns
    params = dict(n_components=4, method=method, n_features=40, sigma=1.3, random_state=11)
    mem = ApproximateKernelPCA(**params).fit(X)
    dsk = ApproximateKernelPCA(**params).fit(Xd)
    np.testing.assert_allclose(dsk.eigenvalues_, mem.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(dsk.components_, mem.components_, atol=1e-8)
    np.testing.assert_allclose(dsk.feature_mean_, mem.feature_mean_, atol=1e-8)
    Z = dsk.transform(Xd)
    assert type(Z).__module__.startswith("dask") and Z.chunks[0] == Xd.chunks[0]
    np.testing.assert_allclose(Z.compute(), mem.transform(X), atol=1e-8)
    Zt = ApproximateKernelPCA(**params).fit_transform(Xd)
    np.testing.assert_allclose(Zt.compute(), mem.transform(X), atol=1e-8)
    np.testing.assert_allclose(mem.transform(Xd).compute(), mem.transform(X), atol=1e-12)
    assert dsk.n_features_in_ == 3 and dsk.n_components_ == 4
    with pytest.warns(FutureWarning):  # the deprecated spelling: the same Dask path
        old = KernelPCA(4, kernel="rbf", sigma=1.3, approximation=method, n_features=40,
                        random_state=11).fit(Xd)
    np.testing.assert_array_equal(old.eigenvalues_, dsk.eigenvalues_)
    np.testing.assert_array_equal(old.transform(Xd).compute(), Z.compute())


def test_dask_array_errors_point_to_the_fix():
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(0).normal(size=(200, 2))
    Xd = da.from_array(X, chunks=50)
    with pytest.raises(ValueError, match=r"exact kernel PCA.*ApproximateKernelPCA.*X.compute\(\)"):
        KernelPCA(2, kernel="rbf").fit(Xd)
    with pytest.raises(ValueError, match=r"ApproximateKernelPCA.*X.compute\(\)"):
        KernelPCA(2, kernel="rbf").fit(X).transform(Xd)
    with pytest.raises(ValueError, match="fit_inverse_transform"):
        ApproximateKernelPCA(2, fit_inverse_transform=True).fit(Xd)
    est = ApproximateKernelPCA(2, n_features=20, random_state=0).fit(Xd)
    with pytest.raises(ValueError, match="X has 3 features"):
        est.transform(da.ones((10, 3)))


# -- against references --------------------------------------------------------------------------


def test_same_landmarks_as_sklearn_nystroem_then_pca_give_the_same_subspace(moons):
    """scikit-learn's ``Nystroem`` on the same landmarks, then ``PCA``: the features differ by
    a rotation (both are ``K(x, L) K_LL^{-1/2}`` up to an orthogonal factor), which PCA of the
    centred features does not see: the same eigenvalues and projections up to sign."""
    X, _, X_new = moons
    gamma, J, k = 2.0, 25, 4
    ours = ApproximateKernelPCA(k, n_features=J, gamma=gamma, random_state=0)
    Z = ours.fit_transform(X)
    landmarks = X[ours.feature_map_.landmark_indices_]
    nystroem = Nystroem(gamma=gamma, n_components=J, random_state=0).fit(landmarks)
    reference = SkPCA(k).fit(nystroem.transform(X))
    np.testing.assert_allclose(
        ours.eigenvalues_, reference.explained_variance_ * (len(X) - 1), rtol=1e-6
    )
    assert_allclose_up_to_sign(Z, reference.transform(nystroem.transform(X)), atol=1e-6)
    assert_allclose_up_to_sign(
        ours.transform(X_new), reference.transform(nystroem.transform(X_new)), atol=1e-6
    )


@pytest.mark.parametrize("method, sizes", [("nystroem", (5, 40, 300)), ("rff", (10, 300, 3000))])
def test_tends_to_exact_kernel_pca_as_n_features_grows(moons, method, sizes):
    X, _, _ = moons
    exact = KernelPCA(2, kernel="rbf", sigma=0.5, eigen_solver="dense").fit(X)
    Z_exact = exact.transform(X)
    agreement = [
        subspace_agreement(
            ApproximateKernelPCA(2, method=method, n_features=J, sigma=0.5, random_state=0)
            .fit_transform(X),
            Z_exact,
        )
        for J in sizes
    ]
    assert agreement[0] < agreement[-1]
    assert agreement[-1] > (1 - 1e-8 if method == "nystroem" else 0.99)  # 300 = every point
