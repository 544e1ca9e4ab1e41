"""Pre-images of kernel PCA: the learned (kernel ridge) map and Mika's fixed point."""

import types
import warnings

import numpy as np
import pytest
import scipy.optimize
from sklearn.base import BaseEstimator
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA as SKPCA
from sklearn.decomposition import KernelPCA as SKKernelPCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from kpca_lib import ApproximateKernelPCA, KernelPCA
from kpca_lib.centering import center_kernel
from kpca_lib.kernels import linear_kernel, polynomial_kernel, rbf_kernel, squared_distances
from kpca_lib.preimage import (
    PreimageMap,
    denoise,
    expansion_coefficients,
    fit_preimage_map,
    fixed_point_preimage,
    rbf_sigma,
)


def _rbf(sigma):
    return lambda A, B: rbf_kernel(A, B, sigma=sigma)


def _rho(z, X_fit, gamma_coef, sigma):
    """ρ(z) = Σ_i γ_i k(z, x_i), written out directly."""
    return float(gamma_coef @ np.exp(-np.sum((X_fit - z) ** 2, axis=1) / (2 * sigma**2)))


def _rho_negative(z, X_fit, gamma_coef, sigma):
    return -_rho(z, X_fit, gamma_coef, sigma)


def _blobs(rng, n_per=15, spread=0.05):
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    X = np.vstack([c + spread * rng.normal(size=(n_per, 2)) for c in centres])
    return X, centres


# -- the learned pre-image (kernel ridge), against scikit-learn ------------------------------


@pytest.mark.parametrize(
    "kernel, ours_params, sk_params, kernel_fn",
    [
        ("rbf", {"sigma": 1.5}, {"gamma": 1 / (2 * 1.5**2)}, _rbf(1.5)),
        (
            "poly",
            {"degree": 3, "gamma": 1.0, "coef0": 1.0},
            {"degree": 3, "coef0": 1.0, "gamma": 1.0},
            lambda A, B: polynomial_kernel(A, B, degree=3, coef0=1.0),
        ),
        ("linear", {}, {}, linear_kernel),
    ],
)
def test_ridge_map_matches_sklearn_inverse_transform(
    rng, kernel, ours_params, sk_params, kernel_fn
):
    X = rng.normal(size=(80, 5)) * np.array([2.0, 1.0, 0.7, 0.4, 0.2])
    X_new = rng.normal(size=(30, 5))
    X = X / (np.abs(X).max() if kernel == "poly" else 1.0)
    X_new = X_new / (np.abs(X_new).max() if kernel == "poly" else 1.0)
    alpha = 0.1
    ours = KernelPCA(4, kernel=kernel, eigen_solver="dense", **ours_params)
    preimages = fit_preimage_map(ours.fit_transform(X), X, kernel_fn=kernel_fn, alpha=alpha)
    ref = SKKernelPCA(
        4, kernel=kernel, eigen_solver="dense", fit_inverse_transform=True, alpha=alpha, **sk_params
    ).fit(X)
    # Eigenvector signs may differ; reconstructions do not (the kernels are sign-invariant).
    for data in (X, X_new):
        got = preimages.predict(ours.transform(data))
        want = ref.inverse_transform(ref.transform(data))
        assert np.linalg.norm(got - want) <= 1e-8 * np.linalg.norm(want)
    np.testing.assert_allclose(
        np.abs(preimages.X_transformed_fit_), np.abs(ref.X_transformed_fit_), atol=1e-9
    )


def test_preimage_map_solves_the_ridge_system(rng):
    Z = rng.normal(size=(25, 3))
    X = rng.normal(size=(25, 4))
    m = fit_preimage_map(Z, X, kernel_fn=_rbf(1.0), alpha=0.3)
    assert isinstance(m, PreimageMap) and m.alpha == 0.3
    np.testing.assert_array_equal(m.X_transformed_fit_, Z)
    K = rbf_kernel(Z, sigma=1.0)
    np.testing.assert_allclose((K + 0.3 * np.eye(25)) @ m.dual_coef_, X, atol=1e-10)
    np.testing.assert_allclose(m.predict(Z), K @ m.dual_coef_, atol=1e-12)
    # as alpha -> 0 the map interpolates the training pairs
    tight = fit_preimage_map(Z, X, kernel_fn=_rbf(1.0), alpha=1e-10)
    np.testing.assert_allclose(tight.predict(Z), X, atol=1e-6)
    # and alpha=0 (allowed, as scikit-learn's) interpolates them when K_Z is positive definite
    exact = fit_preimage_map(Z, X, kernel_fn=_rbf(1.0), alpha=0)
    np.testing.assert_allclose(exact.predict(Z), X, atol=1e-6)
    Z_copy = Z.copy()
    Z[:] = 0.0  # the map keeps its own copy of the training projections
    np.testing.assert_array_equal(m.X_transformed_fit_, Z_copy)


@pytest.mark.parametrize("alpha", [-1e-12, -1.0, float("nan"), float("inf"), True, "1", None])
def test_alpha_validation(rng, alpha):
    Z, X = rng.normal(size=(5, 2)), rng.normal(size=(5, 3))
    with pytest.raises(ValueError, match="alpha"):
        fit_preimage_map(Z, X, kernel_fn=_rbf(1.0), alpha=alpha)


def test_ridge_map_bad_kernels_and_shapes(rng):
    Z, X = rng.normal(size=(6, 2)), rng.normal(size=(6, 3))
    with pytest.raises(ValueError, match="not positive definite.*larger alpha"):
        fit_preimage_map(Z, X, kernel_fn=lambda A, B: -10.0 * rbf_kernel(A, B), alpha=1e-3)
    with pytest.raises(ValueError, match=r"\(6, 6\) kernel matrix"):
        fit_preimage_map(Z, X, kernel_fn=lambda A, B: np.ones((3, 3)), alpha=1.0)
    with pytest.raises(ValueError, match="NaN"):
        fit_preimage_map(Z, X, kernel_fn=lambda A, B: np.full((len(A), len(B)), np.nan), alpha=1.0)
    with pytest.raises(ValueError, match="same number of rows"):
        fit_preimage_map(Z, X[:5], kernel_fn=_rbf(1.0))
    with pytest.raises(ValueError, match="kernel_fn"):
        fit_preimage_map(Z, X, kernel_fn="rbf")
    m = fit_preimage_map(Z, X, kernel_fn=_rbf(1.0))
    with pytest.raises(ValueError, match="3 columns.*2 components"):
        m.predict(rng.normal(size=(2, 3)))


# -- the fixed-point pre-image (Mika et al. 1999) ------------------------------------------------


def test_expansion_coefficients_reproduce_the_projection(rng):
    """PΦ − Φ̄ = Σ_i γ_i (Φ(x_i) − Φ̄) has coordinates Z on the components and nothing else."""
    X = rng.normal(size=(40, 3))
    kp = KernelPCA(5, sigma=1.2, kernel="rbf").fit(X)
    Z = kp.transform(rng.normal(size=(7, 3)))
    G = expansion_coefficients(kp.alphas_, Z)
    np.testing.assert_allclose(G.sum(axis=1), 1.0, atol=1e-12)
    K_c = center_kernel(rbf_kernel(X, sigma=1.2))
    np.testing.assert_allclose(G @ K_c @ kp.alphas_, Z, atol=1e-10)  # ⟨PΦ − Φ̄, w_k⟩ = z_k
    np.testing.assert_allclose(np.einsum("ij,jk,ik->i", G, K_c, G), np.sum(Z**2, axis=1), rtol=1e-8)


def test_fixed_point_recovers_a_training_point_with_every_component(rng):
    # With all components PΦ(x_j) = Φ(x_j): the only exact pre-image is x_j itself.
    X, _ = _blobs(rng)
    kp = KernelPCA(None, sigma=1.0, eigen_solver="dense", kernel="rbf").fit(X)
    j = [0, 17, 40]
    start = X[j] + 0.3 * rng.normal(size=(3, 2))
    res = fixed_point_preimage(kp, kp.transform(X[j]), X_init=start, max_iter=500, tol=1e-10)
    assert res.converged.all()
    np.testing.assert_allclose(res.X, X[j], atol=1e-6)
    np.testing.assert_allclose(res.objective, 1.0, atol=1e-6)  # ρ(x_j) = k(x_j, x_j) = 1


def test_fixed_point_lands_in_the_cluster_of_a_training_point(rng):
    X, centres = _blobs(rng, spread=0.05)
    kp = KernelPCA(2, sigma=1.0, kernel="rbf").fit(X)
    res = fixed_point_preimage(kp, kp.transform(X))
    assert res.converged.all()
    label = np.repeat(np.arange(3), 15)
    dist = np.sqrt(((res.X[:, None, :] - centres[None]) ** 2).sum(axis=2))
    assert np.all(dist[np.arange(45), label] < 0.2)  # its own cluster, 6 from the others
    # the result maximises ρ: above every training point and a generic optimiser's answer
    G = expansion_coefficients(kp.alphas_, kp.transform(X))
    for i in (0, 20, 44):
        rho = _rho(res.X[i], X, G[i], 1.0)
        np.testing.assert_allclose(res.objective[i], rho, rtol=1e-10)
        assert rho >= max(_rho(x, X, G[i], 1.0) for x in X) - 1e-12
        opt = scipy.optimize.minimize(_rho_negative, X[i], args=(X, G[i], 1.0), method="BFGS")
        assert rho >= -opt.fun - 1e-9
        np.testing.assert_allclose(res.X[i], opt.x, atol=1e-4)


def test_fixed_point_does_not_underflow_far_from_the_data(rng):
    X, _ = _blobs(rng)
    kp = KernelPCA(2, sigma=0.5, kernel="rbf").fit(X)
    Z = kp.transform(X[:4])
    near = fixed_point_preimage(kp, Z)
    # 1000σ away every k(z, x_i) is exp(-2e6) = 0 in floating point: a naive ratio is 0/0.
    far = fixed_point_preimage(kp, Z, X_init=X[:4] + 500.0)
    assert np.all(np.isfinite(far.X)) and far.converged.all()
    np.testing.assert_allclose(far.X, near.X, atol=1e-6)


def test_fixed_point_restarts_when_the_denominator_is_not_positive(rng):
    X, _ = _blobs(rng)
    kp = KernelPCA(2, sigma=1.0, kernel="rbf").fit(X)
    Z = 40.0 * kp.transform(X[[0, 20]])  # far outside the data: γ_i of both signs, large
    G = expansion_coefficients(kp.alphas_, Z)
    worst = np.argmin(G, axis=1)  # start on the training point with the most negative γ
    assert np.all(G[np.arange(2), worst] < -0.5)
    assert all(_rho(X[w], X, G[i], 1.0) < 0 for i, w in enumerate(worst))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converges after the restart: no warning
        res = fixed_point_preimage(kp, Z, X_init=X[worst])
    assert np.all(np.isfinite(res.X)) and res.converged.all()
    for i in range(2):
        assert res.objective[i] > 0
        assert res.objective[i] >= max(_rho(x, X, G[i], 1.0) for x in X) - 1e-12


def test_fixed_point_reports_non_convergence(rng):
    X, _ = _blobs(rng)
    kp = KernelPCA(2, sigma=3.0, kernel="rbf").fit(X)
    Z = kp.transform(X[:3])
    with pytest.warns(ConvergenceWarning, match="did not converge for 3 of 3"):
        res = fixed_point_preimage(kp, Z, X_init=X[:3] + 2.0, max_iter=1, tol=1e-14)
    assert not res.converged.any() and np.all(res.n_iter == 1)
    assert np.all(np.isfinite(res.X))


def test_fixed_point_rejects_other_kernels_and_approximations(rng):
    X = rng.normal(size=(20, 2))
    for kp in (KernelPCA(2, kernel="poly").fit(X), KernelPCA(2, kernel="linear").fit(X)):
        with pytest.raises(ValueError, match="kernel='rbf' only"):
            fixed_point_preimage(kp, kp.transform(X))
    approx = ApproximateKernelPCA(2, method="nystroem", n_features=10, random_state=0).fit(X)
    with pytest.raises(ValueError, match="no X_fit_.*fit the exact kpca_lib.KernelPCA"):
        fixed_point_preimage(approx, approx.transform(X))
    kp = KernelPCA(2, kernel="rbf").fit(X)
    with pytest.raises(ValueError, match="3 columns"):
        fixed_point_preimage(kp, np.ones((2, 3)))
    with pytest.raises(ValueError, match="X_init must have shape"):
        fixed_point_preimage(kp, kp.transform(X), X_init=X[:3])
    with pytest.raises(ValueError, match="max_iter"):
        fixed_point_preimage(kp, kp.transform(X), max_iter=0)
    with pytest.raises(ValueError, match="tol"):
        fixed_point_preimage(kp, kp.transform(X), tol=-1.0)


class _FittedRBF(BaseEstimator):
    """A fitted RBF kernel PCA as fixed_point_preimage sees it, with any attributes."""

    def __init__(self, X_fit_=None, alphas_=None, eigenvalues_=None, sigma=1.0, kernel="rbf"):
        self.X_fit_, self.alphas_, self.eigenvalues_ = X_fit_, alphas_, eigenvalues_
        self.sigma, self.kernel = sigma, kernel

    def fit(self, X, y=None):  # never called; sklearn's check_is_fitted wants an estimator
        raise NotImplementedError


def _fitted_rbf(kp, **changes):
    attributes = {"X_fit_": kp.X_fit_, "alphas_": kp.alphas_, "eigenvalues_": kp.eigenvalues_}
    return _FittedRBF(**{**attributes, **changes})


def test_fixed_point_extreme_inputs_error_or_stay_finite(rng):
    X, _ = _blobs(rng)
    kp = KernelPCA(2, sigma=1.0, kernel="rbf").fit(X)
    huge = fixed_point_preimage(kp, np.array([[1e300, -1e300], [1e300, 1e300]]))
    assert np.all(np.isfinite(huge.X))
    with pytest.raises(ValueError, match="Z is too large"):
        fixed_point_preimage(_fitted_rbf(kp, alphas_=kp.alphas_ * 1e300), np.full((1, 2), 1e10))
    with pytest.raises(ValueError, match="sigma=1e-160 is too small"):  # σ² underflows
        fixed_point_preimage(_fitted_rbf(kp, sigma=1e-160), np.zeros((1, 2)))
    # σ = 1e200: a constant kernel, whose pre-image is the γ-weighted mean (Σ γ_i = 1)
    res = fixed_point_preimage(_fitted_rbf(kp, sigma=1e200), np.zeros((2, 2)))
    np.testing.assert_allclose(res.X, np.tile(X.mean(axis=0), (2, 1)), atol=1e-9)
    far = KernelPCA(2, sigma=1.0, kernel="rbf").fit(X + 1e6)  # data far from the origin
    res = fixed_point_preimage(far, far.transform(X[:3] + 1e6))
    near = fixed_point_preimage(kp, kp.transform(X[:3]))
    np.testing.assert_allclose(res.X - 1e6, near.X, atol=1e-6)


def test_rbf_sigma_reads_sigma_or_gamma():
    ns = types.SimpleNamespace
    assert rbf_sigma(ns(sigma=2.0)) == 2.0
    assert rbf_sigma(ns(sigma=None, gamma=0.125)) == pytest.approx(2.0)
    assert rbf_sigma(ns(gamma=0.5)) == pytest.approx(1.0)
    assert rbf_sigma(ns(sigma=None, gamma=None, sigma_=3.0)) == 3.0
    with pytest.raises(ValueError, match="neither sigma nor gamma"):
        rbf_sigma(ns(sigma=None, gamma=None))
    with pytest.raises(ValueError, match="gamma"):
        rbf_sigma(ns(sigma=None, gamma=-1.0))


# -- denoising -----------------------------------------------------------------------------------


def test_denoise_methods_and_errors(rng):
    X, _ = _blobs(rng)
    kp = KernelPCA(2, sigma=1.0, kernel="rbf").fit(X)
    noisy = X[:5] + 0.1 * rng.normal(size=(5, 2))
    fp = denoise(kp, noisy, method="fixed-point")
    np.testing.assert_allclose(
        fp, fixed_point_preimage(kp, kp.transform(noisy), X_init=noisy).X, atol=1e-12
    )
    m = fit_preimage_map(kp.transform(X), X, kernel_fn=_rbf(1.0), alpha=0.1)
    np.testing.assert_allclose(
        denoise(kp, noisy, preimage_map=m), m.predict(kp.transform(noisy)), atol=1e-12
    )
    # any estimator with transform and a learned inverse_transform, e.g. scikit-learn's
    sk = SKKernelPCA(2, gamma=0.5, fit_inverse_transform=True, alpha=0.1).fit(X)
    np.testing.assert_allclose(
        denoise(sk, noisy), sk.inverse_transform(sk.transform(noisy)), atol=1e-12
    )
    for no_map in (
        SKKernelPCA(2, gamma=0.5).fit(X),  # fit_inverse_transform=False
        types.SimpleNamespace(transform=kp.transform),  # no inverse_transform at all
    ):
        with pytest.raises(ValueError, match="fit_inverse_transform=True.*preimage_map"):
            denoise(no_map, noisy, method="ridge")
    with pytest.raises(ValueError, match="method must be one of"):
        denoise(kp, noisy, method="mika")
    with pytest.raises(ValueError, match="preimage_map"):
        denoise(kp, noisy, method="fixed-point", preimage_map=m)


@pytest.fixture(scope="module")
def noisy_digits():
    """Noisy digits as in scikit-learn's plot_digits_denoising example: images scaled to
    [0, 1], a stratified split with random_state=0 and 1000 training images, Gaussian noise of
    standard deviation 0.25 from RandomState(0) (test images first, then training images), the
    estimators fitted on the noisy training images. Differences: the example uses USPS 16×16
    images from OpenML (a download) and 100 test images; here load_digits (8×8, offline,
    X/16) and 200 test images."""
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_train, X_test = train_test_split(
        X, stratify=y, random_state=0, train_size=1000, test_size=200
    )
    noise = np.random.RandomState(0)
    X_test_noisy = X_test + noise.normal(scale=0.25, size=X_test.shape)
    X_train_noisy = X_train + noise.normal(scale=0.25, size=X_train.shape)
    return X_train_noisy, X_test, X_test_noisy


def _digits_errors(noisy_digits, n_components, gamma, alpha, methods):
    # One BLAS thread: these are small problems (n = 1000), and a multithreaded BLAS on the
    # shared, loaded 2-core machine only adds contention (seconds become tens of seconds).
    with threadpool_limits(limits=1):
        return _digits_errors_unlimited(noisy_digits, n_components, gamma, alpha, methods)


def _digits_errors_unlimited(noisy_digits, n_components, gamma, alpha, methods):
    X_train_noisy, X_test, X_test_noisy = noisy_digits
    sigma = 1.0 / np.sqrt(2.0 * gamma)

    def mse(A):
        return float(np.mean((A - X_test) ** 2))

    errors = {"noisy": mse(X_test_noisy)}
    linear = SKPCA(32).fit(X_train_noisy)  # the example's linear PCA
    errors["linear PCA"] = mse(linear.inverse_transform(linear.transform(X_test_noisy)))
    sk = SKKernelPCA(
        n_components,
        kernel="rbf",
        gamma=gamma,
        fit_inverse_transform=True,
        alpha=alpha,
        eigen_solver="dense",
    ).fit(X_train_noisy)
    errors["sklearn"] = mse(sk.inverse_transform(sk.transform(X_test_noisy)))
    ours = KernelPCA(n_components, sigma=sigma, kernel="rbf")
    Z_fit = ours.fit_transform(X_train_noisy)
    if "ridge" in methods:
        m = fit_preimage_map(Z_fit, X_train_noisy, kernel_fn=_rbf(sigma), alpha=alpha)
        ridge = denoise(ours, X_test_noisy, preimage_map=m)
        errors["ridge"] = mse(ridge)
        errors["ridge vs sklearn"] = float(
            np.linalg.norm(ridge - sk.inverse_transform(sk.transform(X_test_noisy)))
            / np.linalg.norm(ridge)
        )
    if "fixed-point" in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            errors["fixed-point"] = mse(denoise(ours, X_test_noisy, method="fixed-point"))
    return errors


def test_digits_denoising_sklearn_example_settings(noisy_digits):
    """The example's KernelPCA(n_components=400, alpha=5e-3, gamma=1e-3 on 256 pixels); on 64
    pixels squared distances are 4× smaller, so gamma = 4e-3 keeps the same kernel widths."""
    e = _digits_errors(noisy_digits, 400, 4e-3, 5e-3, ("ridge",))
    assert e["ridge vs sklearn"] < 1e-8
    assert e["ridge"] <= e["sklearn"] * (1 + 1e-8)
    assert e["ridge"] < 0.5 * e["noisy"]
    assert e["ridge"] < e["linear PCA"]  # the example's point: kernel PCA denoises better


def test_digits_denoising_fixed_point(noisy_digits):
    """n_components=32 and alpha=5e-3 as the example; σ by the median heuristic
    (gamma = 1/median of the squared distances between noisy training images)."""
    X_train_noisy = noisy_digits[0]
    D = squared_distances(X_train_noisy)
    gamma = 1.0 / float(np.median(D[np.triu_indices_from(D, 1)]))
    e = _digits_errors(noisy_digits, 32, gamma, 5e-3, ("ridge", "fixed-point"))
    assert e["ridge vs sklearn"] < 1e-8
    assert e["ridge"] <= e["sklearn"] * (1 + 1e-8)
    assert e["fixed-point"] <= e["sklearn"]
    assert e["fixed-point"] < e["linear PCA"] < e["noisy"]
