import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.preprocessing import KernelCenterer

from kpca_lib import centering, mercer
from kpca_lib.features import polynomial_features
from kpca_lib.kernels import polynomial_kernel, rbf_kernel


def test_center_kernel_equals_explicit_feature_centring(rng):
    X = rng.normal(size=(12, 2))
    Phi = polynomial_features(X, 3)
    Phi_c = Phi - Phi.mean(axis=0)
    K_c = centering.center_kernel(Phi @ Phi.T)
    np.testing.assert_allclose(K_c, Phi_c @ Phi_c.T, atol=1e-9)
    # and the matrix formula of the lectures, with 1_n = ones/n
    K = polynomial_kernel(X, degree=3)
    one = np.full((12, 12), 1 / 12)
    np.testing.assert_allclose(K_c, K - one @ K - K @ one + one @ K @ one, atol=1e-9)


def test_center_test_kernel_equals_explicit(rng):
    X, Xn = rng.normal(size=(10, 2)), rng.normal(size=(4, 2))
    P, Pn = polynomial_features(X, 2), polynomial_features(Xn, 2)
    mu = P.mean(axis=0)
    got = centering.center_test_kernel(Pn @ P.T, P @ P.T)
    np.testing.assert_allclose(got, (Pn - mu) @ (P - mu).T, atol=1e-10)


def test_matches_sklearn_kernel_centerer(rng):
    X, Xn = rng.normal(size=(15, 3)), rng.normal(size=(5, 3))
    K, Kn = rbf_kernel(X, sigma=0.9), rbf_kernel(Xn, X, sigma=0.9)
    kc = KernelCenterer().fit(K)
    np.testing.assert_allclose(centering.center_kernel(K), kc.transform(K), atol=1e-12)
    np.testing.assert_allclose(centering.center_test_kernel(Kn, K), kc.transform(Kn), atol=1e-12)


def test_center_kernel_copy_flag(rng):
    K = rbf_kernel(rng.normal(size=(6, 2)))
    K0 = K.copy()
    centering.center_kernel(K)
    np.testing.assert_array_equal(K, K0)
    out = centering.center_kernel(K, copy=False)
    assert out is K
    np.testing.assert_allclose(K.sum(axis=0), 0, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(2, 9).flatmap(
        lambda n: arrays(np.float64, (n, 2), elements=st.floats(-5, 5, allow_nan=False))
    )
)
def test_centred_rows_and_columns_sum_to_zero(X):
    K_c = centering.center_kernel(polynomial_kernel(X, degree=2))
    scale = max(1.0, np.abs(polynomial_kernel(X, degree=2)).max())
    np.testing.assert_allclose(K_c.sum(axis=0), 0, atol=1e-9 * scale * len(X))
    np.testing.assert_allclose(K_c.sum(axis=1), 0, atol=1e-9 * scale * len(X))


def test_centering_bad_input(rng):
    with pytest.raises(ValueError, match="square"):
        centering.center_kernel(np.ones((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        centering.center_kernel(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="one column per training point"):
        centering.center_test_kernel(np.ones((2, 3)), np.eye(4))


@pytest.mark.parametrize(
    "k",
    [
        lambda x, y: float(x @ y),
        lambda x, y: float((x @ y + 1) ** 3),
        lambda x, y: float(np.exp(-np.sum((x - y) ** 2) / 2)),
        lambda x, y: float(np.exp(x @ y / 4)),
        lambda x, y: float(min(x[0], y[0]) + 10),  # min kernel on shifted data is PSD
    ],
)
def test_valid_kernels_pass(rng, k):
    X = rng.uniform(0, 2, size=(25, 2))
    result = mercer.check_mercer(k, X)
    assert result.symmetric and result.psd and result.valid, result.explanation
    assert bool(result)
    assert "No violation" in str(result)


def test_asymmetric_function_caught(rng):
    X = rng.normal(size=(10, 2))
    result = mercer.check_mercer(lambda x, y: float(x @ y + x[0]), X)
    assert not result.symmetric and not result.valid
    assert "NOT symmetric" in result.explanation
    assert result.max_asymmetry > 0.1


@pytest.mark.parametrize(
    "k",
    [
        lambda x, y: -float(x @ y),
        lambda x, y: float(np.linalg.norm(x - y)),
        lambda x, y: float(np.tanh(x @ y - 5)),
        lambda x, y: float((x @ y - 1) ** 2) - 3.0,
    ],
)
def test_non_psd_functions_caught(rng, k):
    X = rng.normal(size=(20, 2))
    result = mercer.check_mercer(k, X)
    assert result.symmetric
    assert not result.psd and not result.valid, result.explanation
    assert result.min_eigenvalue < -result.tol
    assert "NOT positive semi-definite" in result.explanation


def test_min_eigenvalue_is_exact(rng):
    X = rng.normal(size=(8, 3))
    K = rbf_kernel(X, sigma=1.0)
    result = mercer.check_mercer_matrix(K)
    assert result.min_eigenvalue == pytest.approx(np.linalg.eigvalsh(K)[0], abs=1e-12)


def test_mercer_bad_input(rng):
    with pytest.raises(ValueError, match="function"):
        mercer.check_mercer("rbf", rng.normal(size=(3, 2)))
    with pytest.raises(ValueError, match="tol"):
        mercer.check_mercer(lambda x, y: 1.0, rng.normal(size=(3, 2)), tol=-1)
    with pytest.raises(ValueError, match="finite"):
        mercer.check_mercer(lambda x, y: np.nan, rng.normal(size=(3, 2)))


def test_rounding_level_negative_eigenvalue_is_called_rounding(rng):
    # A PSD matrix of rank 3: its zero eigenvalues come out at ±rounding.
    A = rng.normal(size=(40, 3)) * 1e3
    K = A @ A.T
    result = mercer.check_mercer_matrix(K, tol=1e-300)  # even with a tol below rounding
    eig = np.linalg.eigvalsh((K + K.T) / 2)
    assert result.rounding_bound >= 10 * np.finfo(float).eps * 40 * np.abs(eig).max() * 0.99
    assert result.valid and result.psd
    if result.min_eigenvalue < 0:
        assert "rounding, not a violation" in result.explanation
    assert "NOT" not in result.explanation


@pytest.mark.parametrize("shift", [1e-6, 1e-3, 1.0])
def test_clearly_negative_eigenvalue_is_a_violation_not_rounding(rng, shift):
    A = rng.normal(size=(20, 3))
    K = A @ A.T - shift * np.eye(20)  # smallest eigenvalue −shift, far beyond rounding
    result = mercer.check_mercer_matrix(K)
    assert not result.valid and not result.psd
    assert result.min_eigenvalue == pytest.approx(-shift, rel=1e-6)
    assert "far beyond the rounding error" in result.explanation
    assert result.rounding_bound < shift / 1e3


def test_sigmoid_kernel_is_not_mercer(rng):
    from kpca_lib.kernels import sigmoid_kernel

    X = rng.normal(size=(30, 2)) * 2
    result = mercer.check_mercer_matrix(sigmoid_kernel(X, gamma=1.0, coef0=1.0))
    assert not result.valid and "NOT positive semi-definite" in result.explanation
