"""Approximate kernel PCA: random Fourier features, Nyström features and ApproximateKernelPCA."""

import numpy as np
import pytest
from conftest import assert_allclose_up_to_sign
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_lib import ApproximateKernelPCA, KernelPCA
from kpca_lib.approximation import (
    NystroemFeatures,
    RandomFourierFeatures,
    feature_pca,
    project_features,
)
from kpca_lib.datasets import make_moons
from kpca_lib.kernels import polynomial_kernel, rbf_kernel


@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(400, noise=0.05, random_state=0)
    X_new, _ = make_moons(20, noise=0.05, random_state=1)
    return X, y, X_new


def _kernel_error(Phi, K):
    return np.linalg.norm(Phi @ Phi.T - K) / np.linalg.norm(K)


# -- the feature maps ----------------------------------------------------------------


def test_rff_error_shrinks_as_J_grows(rng):
    X = rng.normal(size=(80, 2))
    K = rbf_kernel(X, sigma=1.0)
    errors = [
        np.mean([_kernel_error(RandomFourierFeatures(J, sigma=1.0, random_state=s).fit_transform(X), K) for s in range(5)])
        for J in (10, 100, 1000, 10000)
    ]
    assert all(a > b for a, b in zip(errors, errors[1:], strict=False))
    # Monte Carlo rate: 100× more features, about 10× smaller error.
    assert errors[-1] < errors[1] / 5


def test_rff_is_unbiased_and_handles_odd_J(rng):
    X = rng.normal(size=(6, 3))
    K = rbf_kernel(X, sigma=1.5)
    for J in (1, 7):
        mean = np.mean([(lambda P: P @ P.T)(RandomFourierFeatures(J, sigma=1.5, random_state=s).fit_transform(X)) for s in range(3000)], axis=0)
        np.testing.assert_allclose(mean, K, atol=0.05)
    rff = RandomFourierFeatures(7, sigma=1.5, random_state=0).fit(X)
    assert rff.transform(X).shape == (6, 7) and rff.frequencies_.shape == (3, 4)
    # cos² + sin² = 1: the diagonal is exact with pairs only.
    P = RandomFourierFeatures(8, sigma=1.5, random_state=0).fit_transform(X)
    np.testing.assert_allclose(np.sum(P**2, axis=1), 1.0)


def test_rff_reproducible(rng):
    X = rng.normal(size=(10, 2))
    a = RandomFourierFeatures(20, random_state=3).fit_transform(X)
    np.testing.assert_array_equal(a, RandomFourierFeatures(20, random_state=3).fit_transform(X))
    assert not np.allclose(a, RandomFourierFeatures(20, random_state=4).fit_transform(X))


@pytest.mark.parametrize(
    "kw, full",
    [
        ({"kernel": "rbf", "sigma": 0.5}, lambda X: rbf_kernel(X, sigma=0.5)),
        ({"kernel": "poly", "degree": 2}, lambda X: polynomial_kernel(X, degree=2)),
        ({"kernel": lambda x, y: float(np.exp(-np.sum((x - y) ** 2) / 2))}, lambda X: rbf_kernel(X, sigma=1.0)),
    ],
)
def test_nystroem_exact_on_landmarks_and_error_shrinks(rng, kw, full):
    X = rng.normal(size=(60, 2))
    K = full(X)
    nys = NystroemFeatures(60, random_state=0, **kw).fit(X)  # every point is a landmark
    np.testing.assert_allclose(nys.transform(X) @ nys.transform(X).T, K, atol=1e-6 * np.abs(K).max())
    errors = [_kernel_error(NystroemFeatures(J, random_state=1, **kw).fit_transform(X), K) for J in (3, 10, 30)]
    assert errors[0] > errors[1] > errors[2]


def test_nystroem_landmarks_and_rank(rng):
    X = rng.normal(size=(50, 2))
    nys = NystroemFeatures(12, sigma=1.0, random_state=0).fit(X)
    np.testing.assert_array_equal(nys.landmarks_, X[nys.landmark_indices_])
    assert np.all(np.diff(nys.landmark_indices_) > 0)
    # A linear kernel in 2-D has rank 2: the other features are exactly zero.
    lin = NystroemFeatures(12, kernel="linear", random_state=0).fit(X)
    assert lin.rank_ == 2
    np.testing.assert_array_equal(lin.transform(X)[:, 2:], 0.0)
    np.testing.assert_allclose(lin.transform(X) @ lin.transform(X).T, X @ X.T, atol=1e-10)


@pytest.mark.parametrize(
    "est, match",
    [
        (RandomFourierFeatures(0), "n_features"),
        (RandomFourierFeatures(2.5), "n_features"),
        (RandomFourierFeatures(True), "n_features"),
        (RandomFourierFeatures(10, sigma=0), "sigma"),
        (NystroemFeatures(11), "n_features"),
        (NystroemFeatures(3, kernel="laplacian"), "kernel"),
        (NystroemFeatures(3, kernel="rbf", sigma=-1.0), "sigma"),
    ],
)
def test_feature_maps_bad_parameters(rng, est, match):
    with pytest.raises(ValueError, match=match):
        est.fit(rng.normal(size=(10, 2)))


def test_feature_maps_bad_data(rng):
    for est in (RandomFourierFeatures(4, random_state=0), NystroemFeatures(4, random_state=0)):
        est.fit(rng.normal(size=(10, 2)))
        with pytest.raises(ValueError, match="2 features"):
            est.transform(rng.normal(size=(3, 3)))
        with pytest.raises(ValueError, match="NaN"):
            est.transform([[np.nan, 1.0]])


@parametrize_with_checks(
    [
        RandomFourierFeatures(5, random_state=0),
        NystroemFeatures(1, random_state=0),
        ApproximateKernelPCA(1, method="nystroem", n_features=1, random_state=0),
        ApproximateKernelPCA(2, method="rff", n_features=10, random_state=0),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# -- feature PCA (centred, chunked) ------------------------------------------------


def test_feature_pca_is_centred_pca(rng):
    F = rng.normal(size=(103, 6)) * [5, 4, 3, 2, 1, 0.5] + 100.0  # far from the origin
    res = feature_pca(lambda A: A.copy(), F, 3, chunk_rows=10, n_threads=2)
    Fc = F - F.mean(axis=0)
    w, V = np.linalg.eigh(Fc.T @ Fc)
    np.testing.assert_allclose(res.eigenvalues, w[::-1][:3], rtol=1e-9)
    np.testing.assert_allclose(res.mean, F.mean(axis=0), rtol=1e-12)
    assert_allclose_up_to_sign(res.components.T, V[:, ::-1][:, :3], atol=1e-8)
    Z = project_features(lambda A, W: A @ W, F, res, chunk_rows=7, n_threads=2)
    np.testing.assert_allclose(Z, Fc @ res.components.T, atol=1e-9)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-9)


# -- ApproximateKernelPCA ---------------------------------------------------------------


def test_nystroem_with_all_points_is_exact_kernel_pca(moons):
    X, _, X_new = moons
    exact = KernelPCA(4, sigma=0.3, eigen_solver="dense", kernel="rbf").fit(X)
    approx = ApproximateKernelPCA(4, sigma=0.3, method="nystroem", n_features=len(X), random_state=0)
    Z = approx.fit_transform(X)
    np.testing.assert_allclose(approx.eigenvalues_, exact.eigenvalues_, rtol=1e-6)
    assert_allclose_up_to_sign(Z, exact.transform(X), atol=1e-5)
    assert_allclose_up_to_sign(approx.transform(X_new), exact.transform(X_new), atol=1e-5)
    np.testing.assert_allclose(approx.explained_variance_, approx.eigenvalues_ / len(X))


def _captured_variance(Z, K_c, eigenvalues):
    """Share of the optimal variance ``Σ_k nλ_k`` captured by the span of Z's columns (1 = optimal)."""
    Q, _ = np.linalg.qr(Z)
    return np.trace(Q.T @ K_c @ Q) / eigenvalues.sum()


@pytest.mark.parametrize(
    "method, sizes, best", [("nystroem", (5, 20, 100), 0.9999), ("rff", (10, 100, 1000), 0.98)]
)
def test_approximation_converges_to_exact(moons, method, sizes, best):
    X, _, _ = moons
    exact = KernelPCA(2, sigma=0.5, eigen_solver="dense", kernel="rbf").fit(X)
    K_c = exact.kernel_matrix_c()
    eig_err, captured = [], []
    for J in sizes:
        errs, caps = [], []
        for seed in range(3):
            kp = ApproximateKernelPCA(2, sigma=0.5, method=method, n_features=J, random_state=seed)
            Z = kp.fit_transform(X)
            errs.append(np.max(np.abs(kp.eigenvalues_ - exact.eigenvalues_) / exact.eigenvalues_))
            caps.append(_captured_variance(Z, K_c, exact.eigenvalues_))
        eig_err.append(np.mean(errs))
        captured.append(np.mean(caps))
    # Random features converge like 1/√J, with Monte Carlo noise: only the ends are compared.
    assert eig_err[0] > eig_err[2] and (method == "rff" or eig_err[0] > eig_err[1] > eig_err[2])
    assert captured[0] < captured[2] <= 1.0 + 1e-12
    assert captured[2] > best


def test_approximate_fit_transform_equals_transform_and_is_centred(moons):
    X, _, _ = moons
    for method in ("nystroem", "rff"):
        kp = ApproximateKernelPCA(3, sigma=0.5, method=method, n_features=60, random_state=0)
        Z = kp.fit_transform(X)
        np.testing.assert_allclose(Z, kp.transform(X), atol=1e-10)
        np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-10)
        np.testing.assert_allclose(Z.var(axis=0), kp.explained_variance_, rtol=1e-8)
        assert kp.components_.shape == (3, 60) and kp.feature_mean_.shape == (60,)
        for name in ("alphas_", "eigenvectors_", "X_fit_", "kernel_matrix_c"):
            assert not hasattr(kp, name)


def test_chunked_features_equal_one_chunk(moons):
    X, _, _ = moons
    kp = ApproximateKernelPCA(2, sigma=0.5, method="rff", n_features=50, random_state=0)
    Z = kp.fit_transform(X)  # X fits in one chunk
    res = feature_pca(kp.feature_map_._features, X, 2, chunk_rows=37, n_threads=2)
    np.testing.assert_allclose(res.eigenvalues, kp.eigenvalues_, rtol=1e-10)
    Z2 = project_features(kp.feature_map_._project, X, res, chunk_rows=37, n_threads=2)
    np.testing.assert_allclose(Z2, Z, atol=1e-10)


def test_refit_switches_between_methods(moons):
    X, _, X_new = moons
    kp = ApproximateKernelPCA(2, sigma=0.5, method="rff", n_features=30, random_state=0).fit(X)
    assert hasattr(kp.feature_map_, "frequencies_")
    kp.set_params(method="nystroem").fit(X)
    assert hasattr(kp.feature_map_, "landmarks_") and kp.transform(X_new).shape == (20, 2)


def test_approximation_in_a_pipeline(moons):
    X, y, _ = moons
    pipe = make_pipeline(ApproximateKernelPCA(2, method="nystroem", n_features=50, random_state=0), LogisticRegression(C=1e4))
    grid = GridSearchCV(pipe, {"approximatekernelpca__sigma": [0.2, 5.0]}, cv=3).fit(X, y)
    assert grid.best_params_["approximatekernelpca__sigma"] == 0.2
    assert grid.best_score_ > 0.95
    est = ApproximateKernelPCA(2, method="rff", n_features=30, random_state=0)
    assert clone(est).get_params() == est.get_params()


def test_n_components_none_keeps_non_zero(rng):
    X = rng.normal(size=(40, 2))
    kp = ApproximateKernelPCA(kernel="linear", method="nystroem", n_features=10, random_state=0).fit(X)
    assert kp.n_components_ == 2
    kp = ApproximateKernelPCA(5, kernel="linear", method="nystroem", n_features=10, random_state=0).fit(X)
    np.testing.assert_array_equal(kp.eigenvalues_[2:], 0.0)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"method": "random"}, "method"),
        ({"method": 1}, "method"),
        ({"method": "rff", "kernel": "poly"}, "rff"),
        ({"method": "nystroem", "n_features": 0}, "n_features"),
        ({"method": "nystroem", "n_features": 11}, "n_features"),
        ({"method": "rff", "n_features": 1.5}, "n_features"),
        ({"method": "rff", "n_features": 3, "n_components": 4}, "n_components"),
        ({"method": "rff", "sigma": 0.0}, "sigma"),
    ],
)
def test_bad_approximation_parameters(rng, params, match):
    params = {"n_components": 2, **params}
    with pytest.raises(ValueError, match=match):
        ApproximateKernelPCA(**params).fit(rng.normal(size=(10, 2)))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"approximation": "random"}, "'approximation' parameter of KernelPCA"),
        ({"approximation": "rff", "kernel": "poly"}, "approximation='rff'"),
        ({"approximation": "nystroem", "eigen_solver": "magic"}, "eigen_solver"),
    ],
)
def test_bad_parameters_of_the_deprecated_spelling_keep_their_names(rng, params, match):
    params = {"n_components": 2, "kernel": "rbf", **params}
    with pytest.raises(ValueError, match=match):
        KernelPCA(**params).fit(rng.normal(size=(10, 2)))


def test_approximate_transform_bad_data(rng):
    kp = ApproximateKernelPCA(2, method="rff", n_features=10, random_state=0).fit(rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="2 features"):
        kp.transform(rng.normal(size=(3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        kp.transform([[np.nan, 1.0]])


# -- gamma and the new kernels ---------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.5, 2.0])
def test_feature_maps_accept_gamma_instead_of_sigma(rng, sigma):
    X = rng.normal(size=(30, 3))
    gamma = 1 / (2 * sigma**2)
    np.testing.assert_allclose(
        RandomFourierFeatures(40, gamma=gamma, random_state=1).fit_transform(X),
        RandomFourierFeatures(40, sigma=sigma, random_state=1).fit_transform(X),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        NystroemFeatures(10, gamma=gamma, random_state=1).fit_transform(X),
        NystroemFeatures(10, sigma=sigma, random_state=1).fit_transform(X),
        rtol=1e-10, atol=1e-12,
    )
    with pytest.raises(ValueError, match="not both"):
        NystroemFeatures(10, sigma=sigma, gamma=gamma).fit(X)


@pytest.mark.parametrize("kernel, params", [("cosine", {}), ("sigmoid", {"gamma": 0.05}), ("poly", {"gamma": 0.3, "degree": 3})])
def test_nystroem_with_all_landmarks_is_exact_kernel_pca(rng, kernel, params):
    from kpca_lib.kernels import get_kernel

    X = rng.normal(size=(40, 3))
    K = get_kernel(kernel, **params)(X)
    Phi = NystroemFeatures(40, kernel=kernel, random_state=0, **params).fit_transform(X)
    if kernel != "sigmoid":  # the sigmoid K is indefinite: Nyström keeps its PSD part
        np.testing.assert_allclose(Phi @ Phi.T, K, atol=1e-8 * np.abs(K).max())
        exact = KernelPCA(2, kernel=kernel, **params).fit(X)
        approx = ApproximateKernelPCA(2, kernel=kernel, method="nystroem", n_features=40, random_state=0, **params).fit(X)
        np.testing.assert_allclose(approx.eigenvalues_, exact.eigenvalues_, rtol=1e-6)
        assert_allclose_up_to_sign(approx.transform(X[:5]), exact.transform(X[:5]), atol=1e-6)
