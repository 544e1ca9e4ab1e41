import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import assert_allclose_up_to_sign, subspace_agreement
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import pairwise
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from kpca_lib import PCA, ApproximateKernelPCA, KernelPCA
from kpca_lib.centering import center_kernel, center_test_kernel
from kpca_lib.datasets import make_moons
from kpca_lib.features import polynomial_features
from kpca_lib.kernel_pca import NonPSDKernelWarning
from kpca_lib.kernels import polynomial_kernel, rbf_kernel

CASES = [
    ({"kernel": "rbf", "sigma": 0.5}, {"kernel": "rbf", "gamma": 1 / (2 * 0.5**2)}),
    ({"kernel": "rbf", "sigma": 2.0}, {"kernel": "rbf", "gamma": 1 / (2 * 2.0**2)}),
    (
        {"kernel": "poly", "degree": 2, "gamma": 1.0},
        {"kernel": "poly", "gamma": 1.0, "coef0": 1.0, "degree": 2},
    ),
    # scikit-learn's defaults (gamma = 1/n_features, coef0 = 1, degree = 3) are ours too
    ({"kernel": "poly", "degree": 3, "coef0": 0.5}, {"kernel": "poly", "coef0": 0.5, "degree": 3}),
    ({"kernel": "poly"}, {"kernel": "poly"}),
    ({"kernel": "rbf"}, {"kernel": "rbf"}),
    ({"kernel": "linear"}, {"kernel": "linear"}),
    ({}, {}),
]


@pytest.mark.parametrize("ours_kw, sk_kw", CASES)
@pytest.mark.parametrize("solver", ["dense", "arpack"])
@pytest.mark.parametrize("n", [40, 250])
def test_matches_sklearn(rng, ours_kw, sk_kw, solver, n):
    X = rng.normal(size=(n, 3))
    X_new = rng.normal(size=(9, 3))
    k = 3 if ours_kw.get("kernel", "linear") == "linear" else 5
    ours = KernelPCA(k, eigen_solver=solver, **ours_kw)
    ref = SKKernelPCA(k, eigen_solver="dense", **sk_kw)
    Z, Z_ref = ours.fit_transform(X), ref.fit_transform(X)
    scale = ref.eigenvalues_[0]
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8, atol=1e-10 * scale)
    assert_allclose_up_to_sign(Z, Z_ref, rtol=1e-6, atol=1e-8 * np.sqrt(scale))
    assert_allclose_up_to_sign(
        ours.transform(X_new), ref.transform(X_new), rtol=1e-6, atol=1e-8 * np.sqrt(scale)
    )


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_poly_kernel_pca_equals_pca_on_explicit_features(rng, degree):
    X, X_new = rng.normal(size=(30, 2)), rng.normal(size=(5, 2))
    Phi, Phi_new = polynomial_features(X, degree), polynomial_features(X_new, degree)
    k = min(3, Phi.shape[1] - 1)
    kp = KernelPCA(k, kernel="poly", degree=degree, gamma=1.0)  # the lectures' (xᵀy + 1)^p
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
    np.testing.assert_allclose(
        K_c @ kp.eigenvectors_, kp.eigenvectors_ * kp.eigenvalues_, atol=1e-10
    )
    np.testing.assert_allclose(kp.alphas_, kp.eigenvectors_ / np.sqrt(kp.eigenvalues_))
    assert np.all(np.diff(kp.eigenvalues_) <= 0)
    X_new = rng.normal(size=(6, 3))
    expected = center_test_kernel(rbf_kernel(X_new, X, sigma=1.5), K) @ kp.alphas_
    np.testing.assert_allclose(kp.transform(X_new), expected, atol=1e-12)
    np.testing.assert_allclose(kp.fit_transform(X), kp.transform(X), atol=1e-10)
    np.testing.assert_allclose(kp.explained_variance_, kp.eigenvalues_ / 50)


def test_deterministic_signs_and_repeatable(rng):
    X = rng.normal(size=(300, 2))
    a = KernelPCA(3, kernel="rbf", sigma=1.0, eigen_solver="arpack").fit(X)
    b = KernelPCA(3, kernel="rbf", sigma=1.0, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(a.eigenvectors_, b.eigenvectors_, atol=1e-8)
    for col in a.eigenvectors_.T:
        assert col[np.argmax(np.abs(col))] > 0
    np.testing.assert_array_equal(
        KernelPCA(3, kernel="rbf").fit_transform(X), KernelPCA(3, kernel="rbf").fit_transform(X)
    )


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
    ref = KernelPCA(3, kernel="poly", degree=2, gamma=1.0).fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert_allclose_up_to_sign(kp.transform(X[:4]), ref.transform(X[:4]), atol=1e-9)


def test_asymmetric_callable_rejected(rng):
    with pytest.raises(ValueError, match="not symmetric"):
        KernelPCA(2, kernel=lambda x, y: float(x @ y + x[0])).fit(rng.normal(size=(10, 2)))


def test_non_psd_kernel_is_reported_not_square_rooted(rng):
    X = rng.normal(size=(30, 2))
    # The sigmoid kernel tanh(xᵀy + 1) is not PSD: its centred matrix has positive and negative
    # eigenvalues. (Not the distance ‖x − y‖: its centred matrix is negative semidefinite, so
    # the one component asked for below would be its zero eigenvalue, not a real one.)
    bad = lambda x, y: float(np.tanh(x @ y + 1.0))  # noqa: E731
    with pytest.raises(ValueError, match="negative eigenvalue"):
        KernelPCA(kernel=bad).fit(X)
    with pytest.warns(NonPSDKernelWarning):
        Z = KernelPCA(1, kernel=bad).fit_transform(X)
    assert np.all(np.isfinite(Z)) and np.any(Z)


def test_valid_callable_does_not_warn(rng):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelPCA(2, kernel=lambda x, y: float(np.exp(-np.sum((x - y) ** 2)))).fit(
            rng.normal(size=(20, 2))
        )


def test_sklearn_conventions(rng):
    X, y = make_moons(120, noise=0.05, random_state=0)
    est = KernelPCA(2, kernel="rbf", sigma=0.5)
    assert clone(est).get_params() == est.get_params()
    pipe = make_pipeline(KernelPCA(2, kernel="rbf"), LogisticRegression())
    grid = GridSearchCV(
        pipe, {"kernelpca__sigma": [0.2, 5.0], "logisticregression__C": [1e4]}, cv=3
    ).fit(X, y)
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
        # n_components=11 > n_samples is capped, as scikit-learn (test_sklearn_dropin.py)
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


def test_identical_points_leave_no_component():
    with pytest.warns(UserWarning, match="no variance.*0 columns"):
        Z = KernelPCA().fit_transform(np.ones((5, 2)))
    assert Z.shape == (5, 0)


def test_polynomial_overflow_is_an_error():
    with pytest.raises(ValueError, match="overflow"):
        KernelPCA(1, kernel="poly", degree=400).fit(np.full((3, 2), 50.0) + np.arange(3)[:, None])
    assert polynomial_kernel(np.ones((1, 1)), degree=3)[0, 0] == 8.0


# -- scikit-learn's API: kernels, gamma, precomputed --------------------------------------

SK_CASES = [
    (
        {"kernel": "sigmoid", "gamma": 0.05, "coef0": 0.3},
        {"kernel": "sigmoid", "gamma": 0.05, "coef0": 0.3},
    ),
    (
        {"kernel": "sigmoid", "coef0": -0.5},
        {"kernel": "sigmoid", "coef0": -0.5},
    ),  # gamma = 1/n_features
    ({"kernel": "cosine"}, {"kernel": "cosine"}),
    ({"kernel": "rbf", "gamma": 0.3}, {"kernel": "rbf", "gamma": 0.3}),
    ({"kernel": "rbf"}, {"kernel": "rbf"}),  # gamma = 1/n_features
    ({"kernel": "rbf", "sigma": 1.0}, {"kernel": "rbf", "gamma": 0.5}),
    (
        {"kernel": "poly", "gamma": 0.2, "degree": 3, "coef0": 2.0},
        {"kernel": "poly", "gamma": 0.2, "degree": 3, "coef0": 2.0},
    ),
]


@pytest.mark.filterwarnings("ignore::kpca_lib.kernel_pca.NonPSDKernelWarning")
@pytest.mark.parametrize("ours_kw, sk_kw", SK_CASES)
@pytest.mark.parametrize("solver", ["dense", "lanczos", "arpack"])
@pytest.mark.parametrize("n", [60, 260])
def test_more_kernels_match_sklearn(rng, ours_kw, sk_kw, solver, n):
    X = rng.normal(size=(n, 4)) * 0.7
    X_new = rng.normal(size=(11, 4))
    ours = KernelPCA(3, eigen_solver=solver, **ours_kw)
    ref = SKKernelPCA(3, eigen_solver="dense", **sk_kw)
    Z, Z_ref = ours.fit_transform(X), ref.fit_transform(X)
    scale = ref.eigenvalues_[0]
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8, atol=1e-10 * scale)
    assert_allclose_up_to_sign(Z, Z_ref, rtol=1e-6, atol=1e-8 * np.sqrt(scale))
    assert_allclose_up_to_sign(
        ours.transform(X_new), ref.transform(X_new), rtol=1e-6, atol=1e-8 * np.sqrt(scale)
    )
    if ours_kw.get("gamma") is not None:
        assert ours.gamma_ == ours_kw["gamma"]


@pytest.mark.parametrize("solver", ["dense", "lanczos", "arpack"])
def test_precomputed_matches_sklearn_and_named_kernel(rng, solver):
    X, X_new = rng.normal(size=(240, 3)), rng.normal(size=(9, 3))
    K, K_new = pairwise.rbf_kernel(X, gamma=0.4), pairwise.rbf_kernel(X_new, X, gamma=0.4)
    ours = KernelPCA(4, kernel="precomputed", eigen_solver=solver)
    ref = SKKernelPCA(4, kernel="precomputed", eigen_solver="dense")
    assert_allclose_up_to_sign(ours.fit_transform(K), ref.fit_transform(K), atol=1e-8)
    assert_allclose_up_to_sign(ours.transform(K_new), ref.transform(K_new), atol=1e-8)
    named = KernelPCA(4, kernel="rbf", gamma=0.4).fit(X)
    assert_allclose_up_to_sign(ours.transform(K_new), named.transform(X_new), atol=1e-8)
    assert ours.n_features_in_ == 240


def test_precomputed_validation(rng):
    K = pairwise.rbf_kernel(rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="square"):
        KernelPCA(2, kernel="precomputed").fit(K[:, :7])
    bad = K.copy()
    bad[0, 3] += 0.5
    with pytest.raises(ValueError, match="not symmetric"):
        KernelPCA(2, kernel="precomputed").fit(bad)
    kp = KernelPCA(2, kernel="precomputed").fit(K)
    with pytest.raises(ValueError, match=r"\(n_new, 10\)"):
        kp.transform(K[:, :9])
    with pytest.raises(ValueError, match="precomputed"):
        KernelPCA(2, kernel="precomputed", fit_inverse_transform=True).fit(K)
    with pytest.raises(ValueError, match="precomputed"):
        ApproximateKernelPCA(2, kernel="precomputed").fit(K)


@pytest.mark.parametrize("kernel", ["rbf", "poly", "sigmoid", "linear", "cosine"])
def test_sigma_and_gamma_together_rejected(rng, kernel):
    with pytest.raises(ValueError, match="sigma or gamma, not both"):
        KernelPCA(2, kernel=kernel, sigma=1.0, gamma=0.5).fit(rng.normal(size=(10, 2)))


@pytest.mark.parametrize("sigma", [0.4, 3.0])
def test_gamma_is_the_same_rbf_as_sigma(rng, sigma):
    X = rng.normal(size=(50, 3))
    a = KernelPCA(3, kernel="rbf", sigma=sigma).fit(X)
    b = KernelPCA(3, kernel="rbf", gamma=1 / (2 * sigma**2)).fit(X)
    np.testing.assert_allclose(a.eigenvalues_, b.eigenvalues_, rtol=1e-12)
    assert a.sigma_ == pytest.approx(sigma) and b.sigma_ == pytest.approx(sigma)


def test_sigmoid_is_reported_as_not_mercer(rng):
    X = rng.normal(size=(80, 3))
    with pytest.raises(ValueError, match="not a Mercer kernel") as info:
        KernelPCA(kernel="sigmoid", gamma=1.0).fit(X)  # every component: the negative ones too
    assert "sigmoid" in str(info.value) and "n_components=" in str(info.value)
    with pytest.warns(NonPSDKernelWarning, match="sigmoid"):
        Z = KernelPCA(2, kernel="sigmoid", gamma=1.0).fit_transform(X)
    assert np.all(np.isfinite(Z))


@pytest.mark.parametrize("solver", ["dense", "lanczos", "arpack"])
def test_rounding_level_eigenvalues_are_not_called_non_mercer(rng, solver):
    # Centred linear kernel of rank 3: the other requested eigenvalues are rounding noise.
    X = rng.normal(size=(300, 3)) + 50.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kp = KernelPCA(8, kernel="linear", eigen_solver=solver).fit(X)
    np.testing.assert_array_equal(kp.eigenvalues_[3:], 0.0)
    assert np.all(kp.eigenvalues_[:3] > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelPCA(kernel="precomputed").fit(X @ X.T)  # PSD up to rounding: no warning, no error


def test_clearly_indefinite_precomputed_is_an_error(rng):
    A = rng.normal(size=(30, 30))
    K = (A + A.T) / 2
    with pytest.raises(ValueError, match="precomputed kernel matrix is not positive semi-definite"):
        KernelPCA(kernel="precomputed").fit(K)


# -- one kernel code path: offset data, references ---------------------------------------


def _reference_kpca(K, k):
    """Eigenpairs of the centred K by dense LAPACK on the exactly evaluated matrix."""
    n = len(K)
    J = np.eye(n) - 1.0 / n
    K_c = J @ K @ J
    w, V = np.linalg.eigh((K_c + K_c.T) / 2)
    return w[::-1][:k], V[:, ::-1][:, :k]


def _direct_rbf_minus_one(X, Y, gamma):
    sq = np.array([[np.sum((x - y) ** 2) for y in Y] for x in X])
    return np.expm1(-gamma * sq)  # K − 1: centring removes the constant, expm1 keeps the digits


@pytest.mark.parametrize("offset", [1e4, 1e6, 1e8])
@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize(
    "solver, dtype",
    [("dense", "float64"), ("lanczos", "float64"), ("arpack", "float64"), ("lanczos", "float32")],
)
# The linear kernel of 3-D data has 3 components: float32 cannot tell the 4th from 0 and says so.
@pytest.mark.filterwarnings("ignore:kernel_dtype='float32'")
def test_transform_of_training_points_equals_fit_transform_far_from_origin(
    rng, offset, kernel, solver, dtype
):
    X = offset + rng.normal(size=(260, 3))
    sigma = {"sigma": 1.5} if kernel == "rbf" else {}
    kp = KernelPCA(4, kernel=kernel, **sigma, eigen_solver=solver, kernel_dtype=dtype)
    Z = kp.fit_transform(X)
    rtol = 1e-8 if dtype == "float64" else 1e-4
    np.testing.assert_allclose(kp.transform(X), Z, atol=rtol * np.abs(Z).max())
    X_new = offset + rng.normal(size=(5, 3))
    shifted = KernelPCA(4, kernel=kernel, **sigma, eigen_solver=solver, kernel_dtype=dtype).fit(
        X - offset
    )
    assert_allclose_up_to_sign(
        kp.transform(X_new), shifted.transform(X_new - offset), atol=10 * rtol * np.abs(Z).max()
    )


@pytest.mark.parametrize("family", ["offset", "clusters", "duplicates", "wide"])
@pytest.mark.parametrize("solver", ["dense", "lanczos"])
def test_rbf_kernel_pca_matches_cancellation_free_reference(rng, family, solver):
    base = rng.normal(size=(240, 2))
    X, sigma = {
        "offset": (1e7 + base, 0.8),
        "clusters": (np.vstack([base[:120] + 3e4, base[120:] - 3e4]), 1.0),
        "duplicates": (np.repeat(base[:60] + 1e5, 4, axis=0), 0.5),
        "wide": (base, 1e5),  # σ ≫ spread: every K_ij ≈ 1
    }[family]
    k = 3
    kp = KernelPCA(k, kernel="rbf", sigma=sigma, eigen_solver=solver).fit(X)
    w, V = _reference_kpca(_direct_rbf_minus_one(X, X, 1 / (2 * sigma**2)), k)
    # Lanczos stops at residuals 1e-10·‖K_c‖: eigenvalues below that are not resolved.
    floor = 1e-12 if solver == "dense" else 1e-9
    np.testing.assert_allclose(kp.eigenvalues_, w, rtol=1e-8, atol=floor * w[0])
    resolved = w > 1e-6 * w[0]
    assert subspace_agreement(kp.eigenvectors_[:, resolved], V[:, resolved]) > 1 - 1e-8


# -- parameters that cannot work: ValueError naming them ----------------------------------


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel": "rbf", "sigma": 1e-300}, "sigma.*too small"),
        ({"kernel": "rbf", "sigma": 1e160}, "sigma.*too large"),
        ({"kernel": "rbf", "gamma": 0.0}, "gamma"),
        ({"kernel": "rbf", "gamma": -2.0}, "gamma"),
        ({"kernel": "rbf", "gamma": np.inf}, "gamma"),
        ({"sigma": -1.0}, "sigma"),  # ignored by the default linear kernel, but never invalid
        ({"kernel": "poly", "gamma": 0.0}, "gamma"),
        ({"kernel": "sigmoid", "gamma": -1.0}, "gamma"),
        ({"kernel": "poly", "degree": 10**30}, "degree"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"copy_X": "yes"}, "copy_X"),
        ({"fit_inverse_transform": True, "alpha": -1.0}, "alpha"),
    ],
)
@pytest.mark.parametrize("solver", ["dense", "lanczos"])
def test_extreme_parameters_are_value_errors(rng, params, match, solver):
    with pytest.raises(ValueError, match=match):
        KernelPCA(2, eigen_solver=solver, **params).fit(rng.normal(size=(300, 2)))


@pytest.mark.parametrize("solver", ["dense", "lanczos", "arpack"])
def test_sigma_far_too_large_for_the_data_names_sigma(rng, solver):
    with pytest.raises(ValueError, match="use a smaller sigma"):
        KernelPCA(2, kernel="rbf", sigma=1e100, eigen_solver=solver).fit(rng.normal(size=(300, 2)))


@pytest.mark.parametrize(
    "X",
    [np.array([[1e200, 0.0], [0.0, 1e200], [1.0, 2.0]]), np.full((3, 2), 1e160) * [[1], [2], [3]]],
)
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_huge_data_is_a_value_error(X, kernel):
    with pytest.raises(ValueError, match="scale X"):
        KernelPCA(1, kernel=kernel).fit(X)


@pytest.mark.parametrize("degree, scale", [(20, 4.0), (40, 3.0), (3, 1e14)])
def test_float32_overflow_is_checked_after_the_cast(rng, degree, scale):
    # Values between float32's max (3.4e38) and 1e140: fine in float64, not in float32.
    X = rng.normal(size=(300, 3)) * scale
    kp64 = KernelPCA(2, kernel="poly", degree=degree, gamma=1.0, eigen_solver="lanczos").fit(X)
    assert np.all(np.isfinite(kp64.eigenvalues_))
    with pytest.raises(ValueError, match="float32.*kernel_dtype='float64'"):
        KernelPCA(
            2,
            kernel="poly",
            degree=degree,
            gamma=1.0,
            eigen_solver="lanczos",
            kernel_dtype="float32",
        ).fit(X)


# -- copy_X, n_jobs, feature names, set_output --------------------------------------------


def test_copy_X(rng):
    X, X_new = rng.normal(size=(40, 3)), rng.normal(size=(5, 3))
    kp = KernelPCA(2).fit(X)
    Z = kp.transform(X_new)
    assert not np.shares_memory(kp.X_fit_, X)
    X += 10.0
    np.testing.assert_array_equal(kp.transform(X_new), Z)
    ref = KernelPCA(2, copy_X=False).fit(X)
    assert ref.X_fit_ is X  # a reference, as scikit-learn


@pytest.mark.parametrize("solver", ["dense", "lanczos"])
def test_n_jobs_gives_the_same_result(rng, solver):
    X = rng.normal(size=(700, 3))
    a = KernelPCA(3, kernel="rbf", eigen_solver=solver, n_jobs=1).fit(X)
    b = KernelPCA(3, kernel="rbf", eigen_solver=solver, n_jobs=2).fit(X)
    np.testing.assert_allclose(a.eigenvalues_, b.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(a.transform(X[:50]), b.transform(X[:50]), atol=1e-10)


def test_feature_names_and_column_check(rng):
    X = rng.normal(size=(30, 3))
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    kp = KernelPCA(2).fit(df)
    np.testing.assert_array_equal(kp.feature_names_in_, ["a", "b", "c"])
    np.testing.assert_array_equal(kp.get_feature_names_out(), ["kernelpca0", "kernelpca1"])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        Z = kp.transform(X)
    np.testing.assert_allclose(kp.transform(df), Z)
    with pytest.raises(ValueError, match="feature names"):
        kp.transform(df[["b", "a", "c"]])
    with pytest.raises(ValueError, match="feature names"):
        kp.transform(df.rename(columns={"c": "z"}))


@pytest.mark.parametrize(
    "kp",
    [KernelPCA(2), ApproximateKernelPCA(2, kernel="linear", n_features=20, random_state=0)],
)
def test_set_output_pandas(rng, kp):
    X = pd.DataFrame(rng.normal(size=(30, 3)), columns=["u", "v", "w"], index=range(100, 130))
    kp = clone(kp).set_output(transform="pandas")
    Z = kp.fit_transform(X)
    assert isinstance(Z, pd.DataFrame)
    prefix = type(kp).__name__.lower()
    assert list(Z.columns) == [f"{prefix}0", f"{prefix}1"] and list(Z.index) == list(X.index)
    np.testing.assert_allclose(kp.transform(X).to_numpy(), Z.to_numpy(), atol=1e-10)


def test_attributes_belong_to_one_mode(rng):
    X = rng.normal(size=(60, 2))
    kp = KernelPCA(2).fit(X)
    assert hasattr(kp, "alphas_") and not hasattr(kp, "components_")
    with pytest.warns(FutureWarning, match="use ApproximateKernelPCA"):  # deprecated spelling
        kp.set_params(approximation="nystroem", n_features=30, random_state=0).fit(X)
    for name in ("alphas_", "eigenvectors_", "X_fit_"):
        assert not hasattr(kp, name)
    for name in ("eigenvalues_", "components_", "feature_mean_", "feature_map_"):
        assert hasattr(kp, name)
    kp.set_params(approximation=None).fit(X)
    assert hasattr(kp, "alphas_") and not hasattr(kp, "feature_map_")


# -- inverse_transform ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "ours_kw, sk_kw",
    [
        ({"kernel": "rbf", "gamma": 0.2}, {"kernel": "rbf", "gamma": 0.2}),
        (
            {"kernel": "poly", "degree": 2, "gamma": 0.5},
            {"kernel": "poly", "degree": 2, "gamma": 0.5, "coef0": 1.0},
        ),
    ],
)
@pytest.mark.parametrize("alpha", [0.1, 1.0])
def test_inverse_transform_matches_sklearn(rng, ours_kw, sk_kw, alpha):
    X, X_new = rng.normal(size=(80, 3)), rng.normal(size=(6, 3))
    ours = KernelPCA(3, fit_inverse_transform=True, alpha=alpha, **ours_kw).fit(X)
    ref = SKKernelPCA(
        3, fit_inverse_transform=True, alpha=alpha, eigen_solver="dense", **sk_kw
    ).fit(X)
    signs = np.sign(np.sum(ours.transform(X_new) * ref.transform(X_new), axis=0))
    Z = ref.transform(X_new) * signs
    np.testing.assert_allclose(
        ours.inverse_transform(Z), ref.inverse_transform(ref.transform(X_new)), atol=1e-8
    )
    assert_allclose_up_to_sign(ours.X_transformed_fit_, ref.X_transformed_fit_, atol=1e-8)
    assert ours.dual_coef_.shape == ref.dual_coef_.shape


def test_inverse_transform_needs_the_flag(rng):
    X = rng.normal(size=(20, 2))
    kp = KernelPCA(2).fit(X)
    with pytest.raises(NotFittedError, match="fit_inverse_transform parameter was not set to True"):
        kp.inverse_transform(kp.transform(X))
    assert not hasattr(kp, "dual_coef_")
    kp.set_params(fit_inverse_transform=True).fit(X)
    assert kp.inverse_transform(kp.transform(X)).shape == X.shape
    with pytest.raises(ValueError, match="n_components_"):
        kp.inverse_transform(np.ones((2, 5)))


@pytest.mark.parametrize(
    "params, scale",
    [
        ({"kernel": "poly", "gamma": 1e-100}, 1.0),
        ({"kernel": "linear"}, 1e-170),
        ({"kernel": "rbf"}, 1e-170),
    ],
)
def test_kernel_variation_below_rounding_is_never_silent(rng, params, scale):
    X = scale * rng.normal(size=(50, 2))
    if params == {"kernel": "linear"}:
        # The linear kernel is fitted on X·2^-e (exact) and scaled back (issue 41): the
        # variance is resolved, but eigenvalues of ~1e-338 are below float64's range.
        for n_components in (None, 2):
            with pytest.raises(ValueError, match="underflow float64.*scale X up"):
                KernelPCA(n_components, **params).fit(X)
        return
    try:  # n_components=None keeps the non-zero components: none is left
        with pytest.warns(UserWarning, match="zero up to rounding.*0 columns"):
            assert KernelPCA(**params).fit_transform(X).shape == (50, 0)
    except ValueError as exc:  # or refused outright, naming the cause
        assert "smaller sigma" in str(exc) or "scale X" in str(exc)
    try:
        with pytest.warns(UserWarning, match="zero up to rounding"):
            KernelPCA(2, **params).fit(X)
    except ValueError as exc:  # or refused outright, naming the cause
        assert "smaller sigma" in str(exc) or "scale X" in str(exc)


# -- randomized differential test against a cancellation-free reference --------------------


def _family(rng, name, n, d):
    base = rng.normal(size=(n, d))
    if name == "offset":
        return 1e6 + base
    if name == "clusters":
        centres = rng.normal(size=(4, d)) * 1e3
        return centres[rng.integers(0, 4, n)] + base
    if name == "duplicates":
        return np.repeat(base[: max(2, n // 5)], 5, axis=0)[:n] + 1e3
    if name == "grid":
        side = int(np.ceil(np.sqrt(n)))
        g = np.stack(np.meshgrid(np.arange(side), np.arange(side)), -1).reshape(-1, 2)[:n]
        return np.hstack([g, np.zeros((n, d - 2))]) * 0.1 + 50.0 if d >= 2 else g[:, :1]
    if name == "badly_scaled":
        return base * np.logspace(-3, 3, d)
    return base


def _reference(kernel, X, param):
    """Centred kernel by direct differences / exact centring (no cancellation)."""
    if kernel == "rbf":
        K = _direct_rbf_minus_one(X, X, param)
    elif kernel == "linear":
        Xc = X - X.mean(axis=0)
        K = Xc @ Xc.T
    else:  # cosine
        N = X / np.linalg.norm(X, axis=1, keepdims=True)
        K = N @ N.T
    return _reference_kpca(K, len(X))[0]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("seed", range(24))
def test_randomized_differential(seed):
    rng = np.random.default_rng(1000 + seed)
    family = ["gaussian", "offset", "clusters", "duplicates", "grid", "badly_scaled"][seed % 6]
    kernel = ["rbf", "linear", "cosine"][seed % 3]
    solver, dtype = [
        ("dense", "float64"),
        ("lanczos", "float64"),
        ("arpack", "float64"),
        ("lanczos", "float32"),
    ][seed % 4]
    n, d = int(rng.integers(40, 260)), int(rng.integers(2, 6))
    X = _family(rng, family, n, d)
    if kernel == "cosine" and family != "badly_scaled":
        X = X - X.mean(axis=0) + 0.01  # cosine is about directions: give the points some
    sq = np.sum((X[: min(n, 60), None, :] - X[None, : min(n, 60), :]) ** 2, axis=-1)
    gamma = 1.0 / (2 * np.median(sq[sq > 0]) * rng.choice([0.05, 1.0, 20.0]))
    k = int(rng.choice([1, 3, max(1, n // 4)]))
    ref = _reference(kernel, X, gamma)
    kp = KernelPCA(
        k,
        kernel=kernel,
        gamma=gamma if kernel == "rbf" else None,
        eigen_solver=solver,
        kernel_dtype=dtype,
    )
    Z = kp.fit_transform(X)
    top = ref[0]
    # float32 storage moves eigenvalues by up to 2^-24 ‖K‖_F (the documented bound).
    tol = 1e-8 * top if dtype == "float64" else 2.0**-24 * np.linalg.norm(ref) * 4
    expected = np.where(ref[:k] > kp._result.rounding_bound, ref[:k], 0.0)
    resolved = expected > tol
    np.testing.assert_allclose(
        kp.eigenvalues_[resolved],
        expected[resolved],
        rtol=1e-6 if dtype == "float64" else 1e-3,
        atol=tol,
    )
    assert np.all(np.abs(kp.eigenvalues_[~resolved]) <= 2 * tol + kp._result.rounding_bound)
    scale = np.abs(Z).max()
    np.testing.assert_allclose(
        kp.transform(X), Z, atol=(1e-7 if dtype == "float64" else 1e-3) * scale
    )
