import numpy as np
import pytest
from conftest import assert_allclose_up_to_sign
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.decomposition import PCA as SKPCA
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_lib import PCA
from kpca_lib.pca import n_components_for_variance


@pytest.mark.parametrize("shape", [(50, 4), (10, 40), (30, 30)])
@pytest.mark.parametrize("solver", ["covariance", "gram", "auto"])
def test_matches_sklearn(rng, shape, solver):
    X = rng.normal(size=shape) @ np.diag(np.linspace(3, 0.5, shape[1]))
    k = min(shape) - 1
    ours = PCA(k, solver=solver).fit(X)
    ref = SKPCA(k, svd_solver="full").fit(X)
    n = shape[0]
    np.testing.assert_allclose(ours.eigenvalues_, ref.explained_variance_ * (n - 1) / n, rtol=1e-9)
    np.testing.assert_allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-9)
    assert_allclose_up_to_sign(ours.components_.T, ref.components_.T, atol=1e-8)
    assert_allclose_up_to_sign(ours.transform(X), ref.transform(X), atol=1e-8)


def test_gram_equals_covariance_when_d_much_larger_than_n(rng):
    X = rng.normal(size=(15, 400))
    g = PCA(solver="gram").fit(X)
    c = PCA(solver="covariance").fit(X)
    assert g.solver_ == "gram" and PCA().fit(X).solver_ == "gram"
    nz = c.eigenvalues_ > 1e-10
    assert nz.sum() == 14  # rank of centred data is n - 1
    np.testing.assert_allclose(g.eigenvalues_[nz], c.eigenvalues_[nz], rtol=1e-10)
    assert_allclose_up_to_sign(g.components_[nz].T, c.components_[nz].T, atol=1e-9)
    # w = X alpha: every component lies in the span of the centred data points
    Xc = X - X.mean(axis=0)
    coef, *_ = np.linalg.lstsq(Xc.T, g.components_[nz].T, rcond=None)
    np.testing.assert_allclose(Xc.T @ coef, g.components_[nz].T, atol=1e-10)
    # components are orthonormal, including the completed zero-variance ones
    np.testing.assert_allclose(g.components_ @ g.components_.T, np.eye(15), atol=1e-10)


def test_gram_and_covariance_share_nonzero_eigenvalues_and_rank(rng):
    X = rng.normal(size=(6, 3)) @ rng.normal(size=(3, 20))  # rank 3
    eig_small = np.linalg.eigvalsh(X @ X.T)[::-1]
    eig_big = np.linalg.eigvalsh(X.T @ X)[::-1]
    np.testing.assert_allclose(eig_small[:3], eig_big[:3], rtol=1e-9)
    assert np.linalg.matrix_rank(X @ X.T) == np.linalg.matrix_rank(X.T @ X) == 3
    assert eig_small.min() > -1e-9 and eig_big.min() > -1e-9  # both PSD


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 12), st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_solvers_agree_property(n, d, seed):
    X = np.random.default_rng(seed).normal(size=(n, d))
    g = PCA(solver="gram").fit(X)
    c = PCA(solver="covariance").fit(X)
    np.testing.assert_allclose(g.eigenvalues_, c.eigenvalues_, atol=1e-9 * max(1, c.eigenvalues_[0]))
    np.testing.assert_allclose(g.components_ @ g.components_.T, np.eye(g.n_components_), atol=1e-9)


def test_components_unit_and_eigen_equation(rng):
    X = rng.normal(size=(40, 5))
    p = PCA(3).fit(X)
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / len(X)
    np.testing.assert_allclose(np.linalg.norm(p.components_, axis=1), 1.0)
    for w, lam in zip(p.components_, p.eigenvalues_, strict=False):
        np.testing.assert_allclose(C @ w, lam * w, atol=1e-12)


def test_inverse_transform_round_trip(rng):
    X = rng.normal(size=(20, 4))
    p = PCA().fit(X)
    np.testing.assert_allclose(p.inverse_transform(p.transform(X)), X, atol=1e-12)


def test_deterministic_signs(rng):
    X = rng.normal(size=(30, 6))
    a = PCA(4).fit(X).components_
    b = PCA(4, solver="gram").fit(X).components_
    np.testing.assert_allclose(a, b, atol=1e-10)
    for row in a:
        assert row[np.argmax(np.abs(row))] > 0


def test_sklearn_compatibility(rng):
    X = rng.normal(size=(20, 5))
    p = clone(PCA(2, solver="gram"))
    assert p.get_params() == {"n_components": 2, "solver": "gram", "whiten": False}
    Z = make_pipeline(PCA(3)).fit_transform(X)
    assert Z.shape == (20, 3)


def test_n_components_for_variance():
    assert n_components_for_variance([0.5, 0.3, 0.15, 0.05], 0.95) == 3
    assert n_components_for_variance([0.5, 0.5], 0.95) == 2
    assert n_components_for_variance([0.96, 0.04], 0.95) == 1
    with pytest.raises(ValueError):
        n_components_for_variance([0.5], 1.5)


@pytest.mark.parametrize(
    "params, X, match",
    [
        ({"n_components": 0}, np.ones((4, 3)), "n_components"),
        ({"n_components": 4}, np.ones((4, 3)), "n_components"),
        ({"n_components": 2.5}, np.ones((4, 3)), "n_components"),
        ({"solver": "svd"}, np.ones((4, 3)), "solver"),
        ({}, np.ones(4), "2-D"),
        ({}, np.empty((0, 3)), "empty"),
        ({}, np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN"),
        ({}, np.array([[1.0, np.inf], [0.0, 1.0]]), "NaN or infinity"),
    ],
)
def test_bad_input(params, X, match):
    with pytest.raises(ValueError, match=match):
        PCA(**params).fit(X)


def test_transform_checks(rng):
    p = PCA(2).fit(rng.normal(size=(10, 3)))
    with pytest.raises(ValueError, match="3 features"):
        p.transform(rng.normal(size=(2, 4)))
    with pytest.raises(ValueError, match="NaN"):
        p.transform([[np.nan, 0, 0]])


# -- n_components as a fraction, whiten, inverse_transform(X) (scikit-learn's names) -----------


def _decaying(rng, n=60, d=8):
    return rng.normal(size=(n, d)) @ np.diag(np.geomspace(4.0, 0.2, d))


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("solver", ["covariance", "gram"])
def test_fraction_matches_sklearn(rng, fraction, solver):
    X = _decaying(rng)
    ours = PCA(fraction, solver=solver).fit(X)
    ref = SKPCA(fraction, svd_solver="full").fit(X)
    assert ours.n_components_ == ref.n_components_
    assert ours.components_.shape == (ref.n_components_, X.shape[1])
    np.testing.assert_allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-9)
    assert_allclose_up_to_sign(ours.transform(X), ref.transform(X), atol=1e-9)
    assert_allclose_up_to_sign(ours.inverse_transform(ours.transform(X)),
                               ref.inverse_transform(ref.transform(X)), atol=1e-9)


def test_fraction_is_the_lectures_95_percent_rule(rng):
    X = _decaying(rng, 40, 10)
    full = PCA().fit(X)
    k = n_components_for_variance(full.explained_variance_ratio_, 0.95)
    p = PCA(0.95).fit(X)
    assert p.n_components_ == k < 10
    np.testing.assert_allclose(p.components_, full.components_[:k], atol=1e-12)
    np.testing.assert_allclose(p.eigenvalues_, full.eigenvalues_[:k], rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 15),
    st.integers(1, 10),
    st.floats(0.01, 0.99),
    st.integers(0, 2**31 - 1),
)
def test_fraction_property(n, d, fraction, seed):
    X = np.random.default_rng(seed).normal(size=(n, d)) * np.geomspace(1, 0.1, d)
    full = PCA().fit(X)
    p = PCA(fraction).fit(X)
    k = p.n_components_
    cumulative = np.cumsum(full.explained_variance_ratio_)
    # the smallest k whose cumulative ratio reaches the fraction
    assert cumulative[k - 1] >= fraction - 1e-12
    assert k == 1 or cumulative[k - 2] < fraction
    assert p.components_.shape == (k, d) and p.transform(X).shape == (n, k)


@pytest.mark.parametrize("solver", ["covariance", "gram"])
def test_whiten_matches_sklearn_up_to_the_1_over_n_convention(rng, solver):
    X = _decaying(rng, 30, 6)
    n = len(X)
    ours = PCA(4, solver=solver, whiten=True).fit(X)
    ref = SKPCA(4, whiten=True, svd_solver="full").fit(X)
    Z = ours.transform(X)
    # unit variance with the lectures' 1/n; scikit-learn's is 1/(n-1), a factor sqrt(n/(n-1))
    np.testing.assert_allclose(Z.T @ Z / n, np.eye(4), atol=1e-10)
    assert_allclose_up_to_sign(Z, ref.transform(X) * np.sqrt(n / (n - 1)), atol=1e-9)
    # inverse_transform undoes the whitening: the same reconstruction as scikit-learn's
    np.testing.assert_allclose(ours.inverse_transform(Z), ref.inverse_transform(ref.transform(X)),
                               atol=1e-9)
    plain = PCA(4, solver=solver).fit(X)
    np.testing.assert_allclose(ours.inverse_transform(Z),
                               plain.inverse_transform(plain.transform(X)), atol=1e-10)
    np.testing.assert_allclose(Z, plain.transform(X) / np.sqrt(plain.eigenvalues_), atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 12), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_whiten_round_trip_property(n, d, seed):
    X = np.random.default_rng(seed).normal(size=(n, d)) * np.geomspace(3, 0.3, d)
    k = min(n - 1, d)  # the centred data has rank min(n - 1, d)
    p = PCA(k, whiten=True).fit(X)
    Z = p.transform(X)
    np.testing.assert_allclose(Z.T @ Z / n, np.eye(k), atol=1e-8)
    if k == d:
        np.testing.assert_allclose(p.inverse_transform(Z), X, atol=1e-9 * (1 + np.abs(X).max()))


def test_inverse_transform_argument_is_named_X(rng):
    X = rng.normal(size=(12, 4))
    p = PCA(2).fit(X)
    Z = p.transform(X)
    np.testing.assert_allclose(p.inverse_transform(X=Z), p.inverse_transform(Z))
    with pytest.raises(ValueError, match="X has 3 columns.*2 components"):
        p.inverse_transform(np.ones((2, 3)))


def test_whiten_rejects_zero_variance_components(rng):
    X = rng.normal(size=(5, 20))  # d > n: centred rank 4 < min(n, d) = 5
    with pytest.raises(ValueError, match="whiten=True.*zero variance.*at most 4"):
        PCA(whiten=True).fit(X)
    Z = PCA(4, whiten=True).fit_transform(X)
    assert np.all(np.isfinite(Z))
    with pytest.raises(ValueError, match="whiten"):
        PCA(whiten="yes").fit(X)


@pytest.mark.parametrize(
    "n_components",
    [0.0, 1.0, -0.5, -1, 1.5, float("nan"), float("inf"), True, False, "mle", "0.5", [2]],
)
def test_bad_n_components(n_components):
    X = np.random.default_rng(0).normal(size=(10, 4))
    with pytest.raises(ValueError, match="n_components") as info:
        PCA(n_components).fit(X)
    if n_components == 1.0 and not isinstance(n_components, bool):
        assert "integer 1" in str(info.value)


def test_fraction_of_zero_variance_data():
    with pytest.raises(ValueError, match="zero variance"):
        PCA(0.9).fit(np.ones((5, 3)))


@parametrize_with_checks([PCA(0.9, whiten=True), PCA(2, solver="gram", whiten=True)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
