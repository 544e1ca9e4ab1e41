import math

import numpy as np
import pytest

from kpca_lib import features
from kpca_lib.kernels import polynomial_kernel


def test_lecture_p2_map_d2():
    """The lecture's φ(a, b) = (a², b², 1, √2ab, √2a, √2b), in our column order."""
    a, b = 0.7, -1.3
    phi = features.polynomial_features([[a, b]], 2)[0]
    lecture = {1.0, a * a, b * b, math.sqrt(2) * a * b, math.sqrt(2) * a, math.sqrt(2) * b}
    np.testing.assert_allclose(sorted(phi), sorted(lecture))
    np.testing.assert_allclose(phi, [1, math.sqrt(2) * a, math.sqrt(2) * b, a * a, math.sqrt(2) * a * b, b * b])
    assert features.polynomial_feature_names(2, 2) == ["1", "x1", "x2", "x1^2", "x1 x2", "x2^2"]


@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("degree", [1, 2, 3, 4, 6])
def test_inner_products_and_dimension(rng, d, degree):
    X = rng.normal(size=(6, d)) / 2
    Y = rng.normal(size=(4, d)) / 2
    PX, PY = features.polynomial_features(X, degree), features.polynomial_features(Y, degree)
    assert PX.shape == (6, math.comb(d + degree, degree))
    assert PX.shape[1] == features.n_polynomial_features(d, degree)
    np.testing.assert_allclose(PX @ PY.T, polynomial_kernel(X, Y, degree=degree), rtol=1e-10, atol=1e-12)


def test_coef0(rng):
    X = rng.normal(size=(5, 3))
    P = features.polynomial_features(X, 3, coef0=2.5)
    np.testing.assert_allclose(P @ P.T, polynomial_kernel(X, degree=3, coef0=2.5))
    with pytest.raises(ValueError, match="coef0"):
        features.polynomial_features(X, 2, coef0=-1.0)


def test_counts_from_the_lecture():
    # slides: d = 4 features, products of at most 3 distinct ones: 1 + 4 + 6 + 4
    assert features.n_distinct_products(4, 3) == 15
    assert features.n_polynomial_features(10, 15) == math.comb(25, 15) == 3268760
    assert features.n_polynomial_features(2, 20) == 231
    assert features.n_polynomial_features(2, 2) == 6


def test_exponents_unique_and_complete():
    exps = features.monomial_exponents(3, 4)
    assert len(set(exps)) == len(exps) == math.comb(7, 4)
    assert all(sum(e) <= 4 for e in exps)


@pytest.mark.parametrize("args", [(0, 2), (2, 0), (2.5, 2), (2, -1), (True, 2)])
def test_bad_counts(args):
    with pytest.raises(ValueError):
        features.n_polynomial_features(*args)


def test_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        features.polynomial_features(np.ones(3), 2)
    with pytest.raises(ValueError, match="NaN"):
        features.polynomial_features([[np.nan, 1.0]], 2)
    with pytest.raises(ValueError, match="degree"):
        features.polynomial_features([[1.0, 1.0]], 0)
