import warnings

import numpy as np
import pytest
from conftest import assert_allclose_up_to_sign
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from kpca_lib import PCA, KernelPCA
from kpca_lib.centering import center_kernel, center_test_kernel
from kpca_lib.datasets import make_moons
from kpca_lib.features import polynomial_features
from kpca_lib.kernel_pca import NonPSDKernelWarning
from kpca_lib.kernels import polynomial_kernel, rbf_kernel

CASES = [
    ({"kernel": "rbf", "sigma": 0.5}, {"kernel": "rbf", "gamma": 1 / (2 * 0.5**2)}),
    ({"kernel": "rbf", "sigma": 2.0}, {"kernel": "rbf", "gamma": 1 / (2 * 2.0**2)}),
    ({"kernel": "poly", "degree": 2}, {"kernel": "poly", "gamma": 1.0, "coef0": 1.0, "degree": 2}),
    ({"kernel": "poly", "degree": 3, "coef0": 0.5}, {"kernel": "poly", "gamma": 1.0, "coef0": 0.5, "degree": 3}),
    ({"kernel": "linear"}, {"kernel": "linear"}),
]


@pytest.mark.parametrize("ours_kw, sk_kw", CASES)
@pytest.mark.parametrize("solver", ["dense", "arpack"])
@pytest.mark.parametrize("n", [40, 250])
def test_matches_sklearn(rng, ours_kw, sk_kw, solver, n):
    X = rng.normal(size=(n, 3))
    X_new = rng.normal(size=(9, 3))
    k = 3 if ours_kw["kernel"] == "linear" else 5
    ours = KernelPCA(k, eigen_solver=solver, **ours_kw)
    ref = SKKernelPCA(k, eigen_solver="dense", **sk_kw)
    Z, Z_ref = ours.fit_transform(X), ref.fit_transform(X)
    scale = ref.eigenvalues_[0]
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8, atol=1e-10 * scale)
    assert_allclose_up_to_sign(Z, Z_ref, rtol=1e-6, atol=1e-8 * np.sqrt(scale))
    assert_allclose_up_to_sign(ours.transform(X_new), ref.transform(X_new), rtol=1e-6, atol=1e-8 * np.sqrt(scale))


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_poly_kernel_pca_equals_pca_on_explicit_features(rng, degree):
    X, X_new = rng.normal(size=(30, 2)), rng.normal(size=(5, 2))
    Phi, Phi_new = polynomial_features(X, degree), polynomial_features(X_new, degree)
    k = min(3, Phi.shape[1] - 1)
    kp = KernelPCA(k, kernel="poly", degree=degree)
    lin = PCA(k).fit(Phi)
    assert_allclose_up_to_sign(kp.fit_transform(X), lin.transform(Phi), atol=1e-8)
    assert_allclose_up_to_sign(kp.transform(X_new), lin.transform(Phi_new), atol=1e-8)
    # eigenvalues of K_c are n times the covariance eigenvalues (1/n convention)
    np.testing.assert_allclose(kp.eigenvalues_, len(X) * lin.eigenvalues_, rtol=1e-9)


def test_alphas_normalisation_and_definitions(rng):
    X = rng.normal(size=(50, 3))
    kp = KernelPCA(4, kernel="rbf", sigma=1.5).fit(X)
    K = rbf_kernel(X, sigma=1.5)
    K_c = center_kernel(K)
    np.testing.assert_allclose(kp.alphas_.T @ K_c @ kp.alphas_, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(K_c @ kp.eigenvectors_, kp.eigenvectors_ * kp.eigenvalues_, atol=1e-10)
    np.testing.assert_allclose(kp.alphas_, kp.eigenvectors_ / np.sqrt(kp.eigenvalues_))
    assert np.all(np.diff(kp.eigenvalues_) <= 0)
    X_new = rng.normal(size=(6, 3))
    expected = center_test_kernel(rbf_kernel(X_new, X, sigma=1.5), K) @ kp.alphas_
    np.testing.assert_allclose(kp.transform(X_new), expected, atol=1e-12)
    np.testing.assert_allclose(kp.fit_transform(X), kp.transform(X), atol=1e-10)
    np.testing.assert_allclose(kp.explained_variance_, kp.eigenvalues_ / 50)


def test_deterministic_signs_and_repeatable(rng):
    X = rng.normal(size=(300, 2))
    a = KernelPCA(3, eigen_solver="arpack").fit(X)
    b = KernelPCA(3, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(a.eigenvectors_, b.eigenvectors_, atol=1e-8)
    for col in a.eigenvectors_.T:
        assert col[np.argmax(np.abs(col))] > 0
    np.testing.assert_array_equal(KernelPCA(3).fit_transform(X), KernelPCA(3).fit_transform(X))


def test_n_components_none_drops_zero_eigenvalues(rng):
    X = rng.normal(size=(20, 2))
    kp = KernelPCA(kernel="linear").fit(X)
    assert kp.n_components_ == 2  # rank of centred linear kernel
    kp = KernelPCA(5, kernel="linear").fit(X)
    np.testing.assert_array_equal(kp.eigenvalues_[2:], 0.0)
    np.testing.assert_array_equal(kp.alphas_[:, 2:], 0.0)
    Z = kp.fit_transform(X)
    assert np.all(np.isfinite(Z)) and np.all(np.isfinite(kp.transform(X)))
    np.testing.assert_allclose(Z, kp.transform(X), atol=1e-10)


def test_callable_kernel(rng):
    X = rng.normal(size=(25, 2))
    kp = KernelPCA(3, kernel=lambda x, y: (x @ y + 1.0) ** 2).fit(X)
    ref = KernelPCA(3, kernel="poly", degree=2).fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert_allclose_up_to_sign(kp.transform(X[:4]), ref.transform(X[:4]), atol=1e-9)


def test_asymmetric_callable_rejected(rng):
    with pytest.raises(ValueError, match="not symmetric"):
        KernelPCA(2, kernel=lambda x, y: float(x @ y + x[0])).fit(rng.normal(size=(10, 2)))


def test_non_psd_kernel_is_reported_not_square_rooted(rng):
    X = rng.normal(size=(30, 2))
    bad = lambda x, y: float(np.linalg.norm(x - y))  # noqa: E731 - distance: not PSD
    with pytest.raises(ValueError, match="negative eigenvalue"):
        KernelPCA(kernel=bad).fit(X)
    with pytest.warns(NonPSDKernelWarning):
        Z = KernelPCA(1, kernel=bad).fit_transform(X)
    assert np.all(np.isfinite(Z))


def test_valid_callable_does_not_warn(rng):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelPCA(2, kernel=lambda x, y: float(np.exp(-np.sum((x - y) ** 2)))).fit(rng.normal(size=(20, 2)))


def test_sklearn_conventions(rng):
    X, y = make_moons(120, noise=0.05, random_state=0)
    est = KernelPCA(2, kernel="rbf", sigma=0.5)
    assert clone(est).get_params() == est.get_params()
    pipe = make_pipeline(KernelPCA(2, kernel="rbf"), LogisticRegression())
    grid = GridSearchCV(pipe, {"kernelpca__sigma": [0.2, 5.0], "logisticregression__C": [1e4]}, cv=3).fit(X, y)
    assert grid.best_params_["kernelpca__sigma"] == 0.2
    assert grid.best_score_ > 0.95


def test_moons_become_separable():
    X, y = make_moons(200, noise=0.05, random_state=0)
    lin = LogisticRegression().fit(PCA(1).fit_transform(X), y).score(PCA(1).fit_transform(X), y)
    Z = KernelPCA(2, kernel="rbf", sigma=0.2).fit_transform(X)
    kern = LogisticRegression(C=1e4, max_iter=1000).fit(Z, y).score(Z, y)
    assert lin < 0.9 and kern == 1.0


@settings(max_examples=20, deadline=None)
@given(st.integers(3, 30), st.floats(0.2, 5.0), st.integers(0, 2**31 - 1))
def test_fit_transform_equals_transform_property(n, sigma, seed):
    X = np.random.default_rng(seed).normal(size=(n, 2))
    kp = KernelPCA(min(2, n), kernel="rbf", sigma=sigma)
    Z = kp.fit_transform(X)
    np.testing.assert_allclose(Z, kp.transform(X), atol=1e-8)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 11}, "n_components"),
        ({"n_components": -1}, "n_components"),
        ({"n_components": 2.0}, "n_components"),
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": -1.0}, "sigma"),
        ({"sigma": np.nan}, "sigma"),
        ({"kernel": "poly", "degree": 0}, "degree"),
        ({"kernel": "poly", "degree": 1.5}, "degree"),
        ({"kernel": "laplacian"}, "kernel"),
        ({"kernel": 3}, "kernel"),
        ({"eigen_solver": "lapack"}, "eigen_solver"),
    ],
)
def test_bad_parameters(rng, params, match):
    with pytest.raises(ValueError, match=match):
        KernelPCA(**params).fit(rng.normal(size=(10, 2)))


@pytest.mark.parametrize(
    "X, match",
    [
        (np.ones(5), "2-D"),
        (np.ones((2, 2, 2)), "2-D"),
        (np.empty((0, 2)), "empty"),
        (np.array([[0.0, np.nan], [1.0, 1.0]]), "NaN"),
        (np.array([[0.0, -np.inf], [1.0, 1.0]]), "infinity"),
        ([["a", "b"], ["c", "d"]], "real numbers"),
    ],
)
def test_bad_data(X, match):
    with pytest.raises(ValueError, match=match):
        KernelPCA(1).fit(X)


def test_transform_bad_data(rng):
    kp = KernelPCA(2).fit(rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="2 features"):
        kp.transform(rng.normal(size=(3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        kp.transform([[np.nan, 1.0]])


def test_identical_points_rejected():
    with pytest.raises(ValueError, match="no variance"):
        KernelPCA().fit(np.ones((5, 2)))


def test_polynomial_overflow_is_an_error():
    with pytest.raises(ValueError, match="overflow"):
        KernelPCA(1, kernel="poly", degree=400).fit(np.full((3, 2), 50.0) + np.arange(3)[:, None])
    assert polynomial_kernel(np.ones((1, 1)), degree=3)[0, 0] == 8.0
