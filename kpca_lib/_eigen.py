"""Symmetric eigendecompositions shared by PCA and kernel PCA."""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from numpy.typing import NDArray

__all__ = ["top_eigh", "flip_signs", "EIGEN_SOLVERS"]

EIGEN_SOLVERS = ("auto", "dense", "arpack")


def flip_signs(V: NDArray[np.float64]) -> NDArray[np.float64]:
    """Make the largest-magnitude entry of every column positive (in place).

    This is scikit-learn's ``svd_flip(u, None)`` convention, so that results
    are deterministic and compare directly with scikit-learn.
    """
    idx = np.argmax(np.abs(V), axis=0)
    signs = np.sign(V[idx, np.arange(V.shape[1])])
    signs[signs == 0] = 1.0
    V *= signs[None, :]
    return V


def choose_solver(n: int, k: int, solver: str) -> str:
    """Resolve ``"auto"``: ARPACK for a few components of a large matrix, else dense."""
    if solver not in EIGEN_SOLVERS:
        raise ValueError(
            f"eigen_solver must be one of {', '.join(repr(s) for s in EIGEN_SOLVERS)}; "
            f"got {solver!r}."
        )
    if solver == "auto":
        return "arpack" if (n > 200 and k < 10) else "dense"
    if solver == "arpack" and k >= n:
        return "dense"
    return solver


def top_eigh(
    S: NDArray[np.float64], k: int, solver: str = "auto"
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The ``k`` largest eigenpairs of the symmetric matrix ``S``, in descending order.

    Parameters
    ----------
    S : ndarray of shape (n, n)
        Symmetric matrix (only its lower triangle is read by the dense solver).
    k : int
        Number of eigenpairs, ``1 <= k <= n``.
    solver : {"auto", "dense", "arpack"}
        ``"dense"``: LAPACK ``eigh`` restricted to the top ``k``;
        ``"arpack"``: Lanczos iterations (``scipy.sparse.linalg.eigsh``),
        fast for a few components; ``"auto"``: ARPACK when ``n > 200`` and ``k < 10``.

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
    eigenvectors : ndarray of shape (n, k), unit columns, signs fixed by :func:`flip_signs`.
    """
    n = S.shape[0]
    solver = choose_solver(n, k, solver)
    if solver == "arpack":
        v0 = np.random.default_rng(0).uniform(-1.0, 1.0, size=n)
        eigenvalues, eigenvectors = scipy.sparse.linalg.eigsh(S, k=k, which="LA", v0=v0)
    else:
        eigenvalues, eigenvectors = scipy.linalg.eigh(S, subset_by_index=(n - k, n - 1))
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues = np.ascontiguousarray(eigenvalues[order])
    eigenvectors = np.ascontiguousarray(eigenvectors[:, order])
    return eigenvalues, flip_signs(eigenvectors)
