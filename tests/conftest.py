"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import numpy as np
import pytest


def assert_allclose_up_to_sign(A, B, rtol=1e-7, atol=1e-9):
    """Columns of A equal columns of B up to a sign flip per column."""
    A = np.asarray(A, dtype=float)
    B = np.asarray(B, dtype=float)
    assert A.shape == B.shape, (A.shape, B.shape)
    for j in range(A.shape[1]):
        a, b = A[:, j], B[:, j]
        s = 1.0 if np.abs(a - b).max() <= np.abs(a + b).max() else -1.0
        np.testing.assert_allclose(a, s * b, rtol=rtol, atol=atol, err_msg=f"column {j}")


def subspace_agreement(A, B) -> float:
    """Smallest cosine of the principal angles between the column spans of A and B."""
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    return float(np.linalg.svd(qa.T @ qb, compute_uv=False).min())


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def pytest_collection_modifyitems(config, items):
    """Deselect scikit-learn's array-API estimator checks from the common-check lists.

    They need SCIPY_ARRAY_API=1 set before SciPy is imported, which this process
    cannot do, so in it they would only ever be skipped. Deselecting them keeps the
    report free of silent skips (pytest prints the deselected count); the Array API
    path is tested by tests/test_array_api.py, which runs scikit-learn's own
    ``check_array_api_input`` in a subprocess with SCIPY_ARRAY_API=1.
    """
    keep, drop = [], []
    for item in items:
        (drop if "check_array_api" in item.nodeid else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
