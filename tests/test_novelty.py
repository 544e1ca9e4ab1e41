"""The reconstruction error in feature space (kpca_lib.novelty), against explicit feature maps."""

import numpy as np
import pandas as pd
import pytest
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.exceptions import NotFittedError

import kpca_lib.novelty as novelty
from kpca_lib import PCA, ApproximateKernelPCA, KernelPCA
from kpca_lib.features import polynomial_features
from kpca_lib.kernels import rbf_kernel
from kpca_lib.novelty import feature_space_reconstruction_error
from kpca_lib.preimage import expansion_coefficients


def _explicit_error(Phi_fit, Phi, r):
    """‖φ̃ − P_r φ̃‖² with explicit features: PCA of the centred training features by SVD."""
    mu = Phi_fit.mean(axis=0)
    _, _, Vt = np.linalg.svd(Phi_fit - mu, full_matrices=False)
    centred = Phi - mu
    residual = centred - (centred @ Vt[:r].T) @ Vt[:r]
    return np.sum(residual**2, axis=1)


def test_linear_kernel_is_linear_pca_reconstruction_error(rng):
    X = rng.normal(size=(60, 5)) * [3.0, 2.0, 1.0, 0.5, 0.1] + 100.0  # far from the origin
    X_new = rng.normal(size=(15, 5)) * 2.0 + 100.0
    for r in (1, 3, 5):
        kp = KernelPCA(r, kernel="linear").fit(X)
        pca = PCA(r).fit(X)
        W, mean = pca.components_, pca.mean_
        for A in (X, X_new):
            residual = (A - mean) - ((A - mean) @ W.T) @ W
            expected = np.sum(residual**2, axis=1)
            got = feature_space_reconstruction_error(kp, A)
            scale = np.sum((A - mean) ** 2, axis=1).max()  # ‖φ̃(x)‖²: rounding is relative to it
            np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12 * scale)
    # all d components span the data: nothing is left
    kp = KernelPCA(5, kernel="linear").fit(X)
    assert np.all(feature_space_reconstruction_error(kp, X_new) < 1e-9)


@pytest.mark.parametrize("degree, gamma, coef0", [(2, 1.0, 1.0), (2, 0.3, 2.0), (3, 1.0, 1.0)])
def test_poly_kernel_matches_the_explicit_feature_map(rng, degree, gamma, coef0):
    X = rng.normal(size=(50, 3))
    X_new = 1.5 * rng.normal(size=(12, 3))
    # (γ xᵀy + c)^p is the kernel of polynomial_features(√γ x, p, c)
    scale = np.sqrt(gamma)
    Phi_fit = polynomial_features(scale * X, degree, coef0)
    for r in (1, 4, 8):
        kp = KernelPCA(r, kernel="poly", degree=degree, gamma=gamma, coef0=coef0).fit(X)
        for A in (X, X_new):
            expected = _explicit_error(Phi_fit, polynomial_features(scale * A, degree, coef0), r)
            got = feature_space_reconstruction_error(kp, A)
            np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9 * expected.max())


def test_rbf_kernel_matches_the_expansion_of_the_reconstruction(rng):
    """Independently: P_r φ(x) = Σ_i γ_i φ(x_i) (preimage.expansion_coefficients), so
    ‖φ(x) − P_r φ(x)‖² = k(x, x) − 2 Σ_i γ_i k(x, x_i) + γᵀ K γ."""
    X = rng.normal(size=(70, 2))
    X_new = np.vstack([rng.normal(size=(10, 2)), [[4.0, 4.0], [30.0, 0.0]]])
    sigma = 0.8
    K = rbf_kernel(X, sigma=sigma)
    for r in (2, 10, 40):
        kp = KernelPCA(r, sigma=sigma, kernel="rbf").fit(X)
        G = expansion_coefficients(kp.alphas_, kp.transform(X_new))
        K_new = rbf_kernel(X_new, X, sigma=sigma)
        expected = 1.0 - 2.0 * np.sum(G * K_new, axis=1) + np.einsum("ij,jk,ik->i", G, K, G)
        got = feature_space_reconstruction_error(kp, X_new)
        np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12)
    # Far from the data φ(x) is orthogonal to every φ(x_i) and every w_k: its distance² from the
    # affine subspace μ + span{w_k} is ‖φ(x)‖² = 1 plus that of the origin, ‖(I − P)μ‖².
    w_dot_mu = K.mean(axis=0) @ (kp.alphas_ - kp.alphas_.mean(axis=0))  # ⟨μ, w_k⟩
    np.testing.assert_allclose(got[-1], 1.0 + K.mean() - np.sum(w_dot_mu**2), rtol=1e-10)
    assert got[-1] > 1.0


def test_more_components_never_increase_the_error(rng):
    X = rng.normal(size=(80, 3))
    X_new = rng.normal(size=(20, 3))
    errors = [
        feature_space_reconstruction_error(KernelPCA(r, sigma=1.0, kernel="rbf").fit(X), X_new)
        for r in (1, 2, 5, 10, 20, 40)
    ]
    assert all(np.all(a >= b - 1e-12) for a, b in zip(errors, errors[1:], strict=False))
    assert np.all(errors[-1] >= 0.0)
    # with every component, the training points are reconstructed exactly
    full = KernelPCA(None, sigma=1.0, eigen_solver="dense", kernel="rbf").fit(X)
    assert np.all(feature_space_reconstruction_error(full, X) < 1e-9)


@pytest.mark.parametrize("sigma", [1e3, 1e5])
def test_wide_gaussian_keeps_its_digits(rng, sigma):
    """k ≈ 1 − 1e-10: the errors (about 1e-13) must not drown in the rounding of k ≈ 1."""
    X = rng.normal(size=(40, 2))
    X_new = rng.normal(size=(5, 2))
    kp = KernelPCA(1, sigma=sigma, kernel="rbf").fit(X)
    # For a very wide Gaussian k = 1 − ‖x − y‖²/(2σ²) + O(‖x − y‖⁴/σ⁴): kernel PCA becomes
    # linear PCA with the linear kernel scaled by 1/σ² (centring removes the constant and the
    # ‖x‖² terms); the O(1/σ⁴) terms add up to about 1e-11 (σ = 1e3) or 1e-19 (σ = 1e5).
    # Without expm1, 1 − 2·mean + grand mean would be off by 2e-4 relative at σ = 1e5.
    lin = KernelPCA(1, kernel="linear").fit(X)
    expected = feature_space_reconstruction_error(lin, X_new) / sigma**2
    got = feature_space_reconstruction_error(kp, X_new)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-10 * (1e3 / sigma) ** 4)


def test_callable_and_cosine_kernels(rng):
    X = rng.normal(size=(30, 3))
    X_new = rng.normal(size=(6, 3))

    def k(x, y):
        return float(np.exp(-np.sum((x - y) ** 2) / 2.0))

    named = feature_space_reconstruction_error(KernelPCA(4, sigma=1.0, kernel="rbf").fit(X), X_new)
    custom = feature_space_reconstruction_error(KernelPCA(4, kernel=k).fit(X), X_new)
    np.testing.assert_allclose(custom, named, rtol=1e-8, atol=1e-12)
    # cosine: the linear kernel of the rows scaled to unit length
    unit = np.vstack([X, X_new]) / np.linalg.norm(np.vstack([X, X_new]), axis=1, keepdims=True)
    cos = feature_space_reconstruction_error(KernelPCA(2, kernel="cosine").fit(X), X_new)
    lin = feature_space_reconstruction_error(
        KernelPCA(2, kernel="linear").fit(unit[:30]), unit[30:]
    )
    np.testing.assert_allclose(cos, lin, rtol=1e-8, atol=1e-12)


def test_approximations_use_their_feature_map(rng):
    X = rng.normal(size=(200, 2))
    X_new = rng.normal(size=(10, 2))
    for method in ("nystroem", "rff"):
        kp = ApproximateKernelPCA(3, method=method, sigma=1.0, n_features=40, random_state=0)
        kp.fit(X)
        F_fit = kp.feature_map_.transform(X)
        expected = _explicit_error(F_fit, kp.feature_map_.transform(X_new), 3)
        got = feature_space_reconstruction_error(kp, X_new)
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10)
        with pytest.warns(FutureWarning):  # the deprecated spelling: the same model
            old = KernelPCA(
                3, sigma=1.0, approximation=method, n_features=40, random_state=0, kernel="rbf"
            ).fit(X)
        np.testing.assert_array_equal(feature_space_reconstruction_error(old, X_new), got)


def test_blocks_give_the_same_result(rng, monkeypatch):
    X = rng.normal(size=(50, 2))
    X_new = rng.normal(size=(17, 2))
    for kernel in ("rbf", "poly"):
        kp = KernelPCA(3, kernel=kernel).fit(X)
        whole = feature_space_reconstruction_error(kp, X_new)
        monkeypatch.setattr(novelty, "_BLOCK", 7)  # fewer entries than one row: 1 row per block
        np.testing.assert_allclose(feature_space_reconstruction_error(kp, X_new), whole, rtol=1e-12)
        monkeypatch.undo()


def test_dataframes_are_checked_like_transform(rng):
    X = pd.DataFrame(rng.normal(size=(30, 2)), columns=["a", "b"])
    kp = KernelPCA(2, sigma=1.0, kernel="rbf").fit(X)
    with pytest.warns(UserWarning, match="feature names"):  # scikit-learn's, from transform
        plain = feature_space_reconstruction_error(kp, X.to_numpy())
    np.testing.assert_allclose(feature_space_reconstruction_error(kp, X), plain, rtol=1e-12)
    with pytest.raises(ValueError, match="feature names"):
        feature_space_reconstruction_error(kp, X.rename(columns={"a": "c"}))


def test_errors(rng):
    X = rng.normal(size=(20, 3))
    with pytest.raises(NotFittedError):
        feature_space_reconstruction_error(KernelPCA(2, kernel="rbf"), X)
    with pytest.raises(ValueError, match="kpca_lib.KernelPCA"):
        feature_space_reconstruction_error(SKKernelPCA(2).fit(X), X)
    with pytest.warns(UserWarning, match="not positive semi-definite"):
        sigmoid = KernelPCA(2, kernel="sigmoid").fit(X)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        feature_space_reconstruction_error(sigmoid, X)
    K = rbf_kernel(X)
    with pytest.raises(ValueError, match="precomputed.*k\\(x, x\\)"):
        feature_space_reconstruction_error(KernelPCA(2, kernel="precomputed").fit(K), K)
    with pytest.raises(ValueError, match="3 features|features"):
        feature_space_reconstruction_error(KernelPCA(2, kernel="rbf").fit(X), X[:, :2])
