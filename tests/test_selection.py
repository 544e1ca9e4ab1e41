"""Label-free choices of σ and of the number of components (kpca_lib.selection)."""

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.decomposition import KernelPCA as SkKernelPCA

from kpca_lib.kernels import rbf_kernel
from kpca_lib.selection import (
    explained_variance_ratio,
    median_heuristic_sigma,
    n_components_for_variance,
)


def test_median_heuristic_is_the_median_pairwise_distance():
    X = np.random.default_rng(0).normal(size=(57, 4)) * [1.0, 3.0, 0.1, 2.0]
    assert median_heuristic_sigma(X) == pytest.approx(np.median(pdist(X)), rel=1e-12)


def test_median_heuristic_scales_with_the_data_and_ignores_translation():
    X = np.random.default_rng(1).normal(size=(40, 3))
    s = median_heuristic_sigma(X)
    assert median_heuristic_sigma(7.5 * X + 1e6) == pytest.approx(7.5 * s, rel=1e-6)


def test_median_heuristic_subsamples_large_inputs_deterministically():
    X = np.random.default_rng(2).normal(size=(3000, 2))
    a = median_heuristic_sigma(X, max_samples=300, random_state=5)
    assert a == median_heuristic_sigma(X, max_samples=300, random_state=5)
    assert a == pytest.approx(np.median(pdist(X[:1500])), rel=0.1)


@pytest.mark.parametrize("bad", [np.zeros((1, 2)), np.ones((5, 2))])
def test_median_heuristic_refuses_degenerate_data(bad):
    with pytest.raises(ValueError, match="median|at least 2"):
        median_heuristic_sigma(bad)


@pytest.mark.parametrize("max_samples", [1, 2.5, True])
def test_median_heuristic_checks_max_samples(max_samples):
    with pytest.raises(ValueError, match="max_samples"):
        median_heuristic_sigma(np.eye(3), max_samples=max_samples)


def test_feature_space_ratio_matches_the_explicit_features():
    # Linear kernel: feature space = input space, so the ratios are PCA's.
    X = np.random.default_rng(3).normal(size=(30, 5)) * [5, 2, 1, 0.5, 0.1]
    ratio = explained_variance_ratio(X @ X.T)
    Xc = X - X.mean(axis=0)
    s2 = np.linalg.svd(Xc, compute_uv=False) ** 2
    np.testing.assert_allclose(ratio[:5], s2 / s2.sum(), atol=1e-12)
    np.testing.assert_allclose(ratio[5:], 0.0, atol=1e-12)
    assert ratio.sum() == pytest.approx(1.0)


def test_feature_space_ratio_agrees_with_scikit_learn_eigenvalues():
    X = np.random.default_rng(4).normal(size=(60, 2))
    K = rbf_kernel(X, sigma=0.8)
    ratio = explained_variance_ratio(K)
    sk = SkKernelPCA(n_components=5, kernel="rbf", gamma=1 / (2 * 0.8**2)).fit(X)
    n = len(X)
    total = np.trace(K) - K.sum() / n  # trace(K^c) without forming K^c
    np.testing.assert_allclose(ratio[:5], sk.eigenvalues_ / total, rtol=1e-8)


def test_n_components_for_variance():
    ratio = np.array([0.5, 0.3, 0.15, 0.05])
    assert n_components_for_variance(ratio, 0.5) == 1
    assert n_components_for_variance(ratio, 0.8) == 2
    assert n_components_for_variance(ratio, 0.95) == 3
    assert n_components_for_variance(ratio, 1.0) == 4


@pytest.mark.parametrize("fraction", [0, 1.5, -0.1, True, "0.9"])
def test_n_components_for_variance_checks_fraction(fraction):
    with pytest.raises(ValueError, match="fraction"):
        n_components_for_variance([1.0], fraction)


def test_n_components_for_variance_refuses_truncated_ratios():
    with pytest.raises(ValueError, match="all components"):
        n_components_for_variance([0.5, 0.2], 0.95)


def test_zero_variance_is_an_error():
    with pytest.raises(ValueError, match="no variance"):
        explained_variance_ratio(np.ones((4, 4)))
