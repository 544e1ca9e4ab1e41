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


# -- scikit-learn's kernels and parameters ------------------------------------------------


@pytest.mark.parametrize("gamma", [None, 0.05, 0.7])
@pytest.mark.parametrize("coef0", [-1.0, 0.0, 1.0])
def test_sigmoid_matches_sklearn(rng, gamma, coef0):
    X, Y = rng.normal(size=(9, 3)), rng.normal(size=(4, 3))
    expected = pairwise.sigmoid_kernel(X, Y, gamma=1.0 if gamma is None else gamma, coef0=coef0)
    np.testing.assert_allclose(kernels.sigmoid_kernel(X, Y, gamma=gamma, coef0=coef0), expected, rtol=1e-13, atol=1e-15)
    K = kernels.sigmoid_kernel(X, gamma=gamma, coef0=coef0)
    np.testing.assert_array_equal(K, K.T)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e5])
def test_cosine_matches_sklearn_including_zero_rows(rng, scale):
    X, Y = rng.normal(size=(8, 3)) * scale, rng.normal(size=(5, 3)) * scale
    X[2] = 0.0
    Y[4] = 0.0
    np.testing.assert_allclose(kernels.cosine_kernel(X, Y), pairwise.cosine_similarity(X, Y), rtol=1e-12, atol=1e-15)
    K = kernels.cosine_kernel(X)
    np.testing.assert_array_equal(K[2], 0.0)  # a zero row has no direction: 0, as scikit-learn
    np.testing.assert_allclose(np.diag(K)[[0, 1, 3]], 1.0, rtol=1e-14)


def test_cosine_of_huge_and_tiny_rows_is_finite():
    X = np.array([[1e200, 1e200], [1e-200, 0.0], [3.0, 4.0]])
    K = kernels.cosine_kernel(X)
    assert np.all(np.isfinite(K))
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-14)
    assert K[0, 1] == pytest.approx(np.sqrt(0.5), rel=1e-14)


@pytest.mark.parametrize("gamma, degree, coef0", [(0.1, 3, 1.0), (2.0, 2, 0.0), (0.5, 4, -0.5)])
def test_poly_gamma_has_sklearn_meaning(rng, gamma, degree, coef0):
    X, Y = rng.normal(size=(6, 3)), rng.normal(size=(5, 3))
    expected = pairwise.polynomial_kernel(X, Y, degree=degree, gamma=gamma, coef0=coef0)
    np.testing.assert_allclose(kernels.polynomial_kernel(X, Y, degree, coef0, gamma=gamma), expected, rtol=1e-12)


@pytest.mark.parametrize("sigma", [0.3, 2.0])
def test_rbf_gamma_is_one_over_two_sigma_squared(rng, sigma):
    X = rng.normal(size=(7, 2))
    np.testing.assert_allclose(kernels.rbf_kernel(X, gamma=1 / (2 * sigma**2)), kernels.rbf_kernel(X, sigma=sigma), rtol=1e-14)


def test_sigma_and_gamma_together_rejected(rng):
    X = rng.normal(size=(3, 2))
    with pytest.raises(ValueError, match="sigma or gamma, not both"):
        kernels.rbf_kernel(X, sigma=1.0, gamma=0.5)
    with pytest.raises(ValueError, match="not both"):
        kernels.get_kernel("rbf", sigma=1.0, gamma=0.5)


@pytest.mark.parametrize("gamma", [0, -1.0, np.inf, np.nan, 1e-320, "1"])
@pytest.mark.parametrize("kernel", ["rbf", "poly", "sigmoid"])
def test_bad_gamma(rng, kernel, gamma):
    with pytest.raises(ValueError, match="gamma"):
        kernels.get_kernel(kernel, gamma=gamma)(rng.normal(size=(3, 2)))


@pytest.mark.parametrize("degree", [2**31, 10**400])
def test_huge_degree_rejected_by_name(rng, degree):
    with pytest.raises(ValueError, match="degree"):
        kernels.polynomial_kernel(rng.normal(size=(3, 2)), degree=degree)


def test_poly_overflow_names_the_fix():
    with pytest.raises(ValueError, match="overflow.*degree"):
        kernels.polynomial_kernel(np.full((2, 2), 1e3), degree=200)


def test_huge_data_rbf_rejected_not_nan():
    with pytest.raises(ValueError, match="scale X"):
        kernels.rbf_kernel(np.array([[1e200, 0.0], [0.0, 1e200]]))


# -- stability: against a cancellation-free reference --------------------------------------


def _direct_sq(X, Y):
    return np.array([[np.sum((x - y) ** 2) for y in Y] for x in X])


def _families(rng):
    n, d = 40, 3
    base = rng.normal(size=(n, d))
    return {
        "offset": 1e6 + base,
        "offset_far": 1e8 + 1e-2 * base,
        "clusters": np.vstack([base[:20] + 1e4, base[20:] - 1e4]),
        "duplicates": np.repeat(base[:8] + 3e3, 5, axis=0),
        "badly_scaled": base * np.array([1e-4, 1.0, 1e4]),
        "grid": np.stack(np.meshgrid(np.arange(5.0), np.arange(8.0)), -1).reshape(-1, 2) * 1e-3 + 1e5,
    }


@pytest.mark.parametrize("family", ["offset", "offset_far", "clusters", "duplicates", "badly_scaled", "grid"])
def test_squared_distances_are_accurate(rng, family):
    X = _families(rng)[family]
    Y = X[::3] + 1e-3
    for A, B in ((X, None), (X, Y)):
        D = kernels.squared_distances(A, B)
        ref = _direct_sq(A, A if B is None else B)
        np.testing.assert_allclose(D, ref, rtol=1e-9, atol=1e-300)
    np.testing.assert_array_equal(np.diag(kernels.squared_distances(X)), 0.0)


@pytest.mark.parametrize("family", ["offset", "offset_far", "clusters", "duplicates", "badly_scaled", "grid"])
@pytest.mark.parametrize("scale", [0.3, 1.0, 30.0])
def test_rbf_is_accurate_far_from_the_origin(rng, family, scale):
    X = _families(rng)[family]
    sq = _direct_sq(X, X)
    sigma = scale * np.sqrt(np.median(sq[sq > 0]))
    ref = np.exp(-sq / (2 * sigma**2))
    np.testing.assert_allclose(kernels.rbf_kernel(X, sigma=sigma), ref, rtol=1e-10, atol=1e-13)
    Y = X[::4] * (1 + 1e-12)
    ref_xy = np.exp(-_direct_sq(X, Y) / (2 * sigma**2))
    np.testing.assert_allclose(kernels.rbf_kernel(X, Y, sigma=sigma), ref_xy, rtol=1e-10, atol=1e-13)


def test_one_code_path_blocks_equal_whole_matrix(rng):
    X = 1e5 + rng.normal(size=(30, 4))
    for name, params in [("rbf", {"sigma": 0.8}), ("poly", {"degree": 3, "gamma": 0.1}), ("sigmoid", {"gamma": 0.2}), ("cosine", {}), ("linear", {})]:
        block = kernels.kernel_block_function(name, X, **params)
        K = kernels.get_kernel(name, **params)(X)
        np.testing.assert_allclose(block(slice(0, 30), slice(0, 30)), K, rtol=1e-12, atol=1e-12 * np.abs(K).max())
