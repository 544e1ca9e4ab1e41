import numpy as np
import pytest
from conftest import assert_allclose_up_to_sign
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.decomposition import PCA as SKPCA
from sklearn.pipeline import make_pipeline

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
    assert p.get_params() == {"n_components": 2, "solver": "gram"}
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
