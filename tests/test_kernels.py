import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.metrics import pairwise

from kpca_lib import kernels
from kpca_lib.features import polynomial_features


def finite_matrix(min_rows=1, max_rows=8, max_cols=4):
    return st.tuples(
        st.integers(min_rows, max_rows), st.integers(1, max_cols)
    ).flatmap(
        lambda s: arrays(np.float64, s, elements=st.floats(-3, 3, allow_nan=False, width=64))
    )


def test_linear_matches_sklearn(rng):
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(4, 3))
    np.testing.assert_allclose(kernels.linear_kernel(X, Y), pairwise.linear_kernel(X, Y))
    np.testing.assert_allclose(kernels.linear_kernel(X), X @ X.T)


@pytest.mark.parametrize("degree", [1, 2, 3, 5])
@pytest.mark.parametrize("coef0", [0.0, 1.0, 2.5])
def test_polynomial_matches_sklearn(rng, degree, coef0):
    X, Y = rng.normal(size=(6, 4)), rng.normal(size=(5, 4))
    expected = pairwise.polynomial_kernel(X, Y, degree=degree, gamma=1.0, coef0=coef0)
    np.testing.assert_allclose(kernels.polynomial_kernel(X, Y, degree, coef0), expected)


@pytest.mark.parametrize("sigma", [0.1, 0.7, 1.0, 10.0])
def test_rbf_matches_sklearn(rng, sigma):
    X, Y = rng.normal(size=(9, 3)), rng.normal(size=(2, 3))
    gamma = 1.0 / (2 * sigma**2)
    np.testing.assert_allclose(
        kernels.rbf_kernel(X, Y, sigma), pairwise.rbf_kernel(X, Y, gamma=gamma), rtol=1e-12, atol=1e-15
    )
    K = kernels.rbf_kernel(X, sigma=sigma)
    np.testing.assert_array_equal(np.diag(K), 1.0)
    np.testing.assert_array_equal(K, K.T)


def test_rbf_definition_pointwise(rng):
    x, y = rng.normal(size=3), rng.normal(size=3)
    sigma = 0.8
    expected = np.exp(-np.sum((x - y) ** 2) / (2 * sigma**2))
    assert kernels.rbf_kernel(x[None], y[None], sigma)[0, 0] == pytest.approx(expected, rel=1e-14)


def test_kernel_matrix_matches_vectorised(rng):
    X, Y = rng.normal(size=(5, 2)), rng.normal(size=(3, 2))
    K = kernels.kernel_matrix(lambda x, y: (x @ y + 1.0) ** 3, X, Y)
    np.testing.assert_allclose(K, kernels.polynomial_kernel(X, Y, degree=3))


def test_kernel_matrix_keeps_asymmetry(rng):
    X = rng.normal(size=(4, 2))
    K = kernels.kernel_matrix(lambda x, y: x[0] - y[1], X)
    assert not np.allclose(K, K.T)


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda x, y: np.nan, "finite"),
        (lambda x, y: np.inf, "finite"),
        (lambda x, y: np.array([1.0, 2.0]), "one real number"),
        (lambda x, y: "a", "one real number"),
    ],
)
def test_kernel_matrix_rejects_bad_values(rng, bad, match):
    with pytest.raises(ValueError, match=match):
        kernels.kernel_matrix(bad, rng.normal(size=(3, 2)))


def test_kernel_matrix_rejects_non_callable(rng):
    with pytest.raises(ValueError, match="function"):
        kernels.kernel_matrix(3.0, rng.normal(size=(3, 2)))


@pytest.mark.parametrize("sigma", [0, -1, np.nan, np.inf, "1", True, 1e-300, 1e-160, 1e160])
def test_rbf_bad_sigma(rng, sigma):
    with pytest.raises(ValueError, match="sigma"):
        kernels.rbf_kernel(rng.normal(size=(3, 2)), sigma=sigma)


@pytest.mark.parametrize("degree", [0, -2, 2.5, "2", None, True, np.nan])
def test_poly_bad_degree(rng, degree):
    with pytest.raises(ValueError, match="degree"):
        kernels.polynomial_kernel(rng.normal(size=(3, 2)), degree=degree)


def test_poly_accepts_integral_float_degree(rng):
    X = rng.normal(size=(3, 2))
    np.testing.assert_allclose(kernels.polynomial_kernel(X, degree=3.0), kernels.polynomial_kernel(X, degree=3))


def test_feature_count_mismatch(rng):
    with pytest.raises(ValueError, match="same number of features"):
        kernels.linear_kernel(rng.normal(size=(3, 2)), rng.normal(size=(3, 4)))


def test_get_kernel_unknown_name():
    with pytest.raises(ValueError, match="kernel must be one of"):
        kernels.get_kernel("laplacian")


@settings(max_examples=40, deadline=None)
@given(finite_matrix(), st.integers(1, 4))
def test_polynomial_kernel_equals_feature_inner_products(X, degree):
    Phi = polynomial_features(X, degree)
    K = kernels.polynomial_kernel(X, degree=degree)
    np.testing.assert_allclose(Phi @ Phi.T, K, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(K).max()))


@settings(max_examples=40, deadline=None)
@given(finite_matrix(min_rows=2), st.floats(0.05, 20))
def test_valid_kernels_are_psd(X, sigma):
    for K in (
        kernels.rbf_kernel(X, sigma=sigma),
        kernels.polynomial_kernel(X, degree=2),
        kernels.linear_kernel(X),
    ):
        eig = np.linalg.eigvalsh(K)
        assert eig.min() >= -1e-8 * max(1.0, np.abs(eig).max())
        np.testing.assert_allclose(K, K.T)
