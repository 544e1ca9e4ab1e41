"""Symmetric eigendecompositions shared by PCA and kernel PCA.

Three solvers compute the ``k`` largest eigenpairs of a symmetric ``n×n`` matrix:

* ``"dense"``: LAPACK ``eigh`` restricted to the top ``k`` (``?syevr``); needs
  the whole matrix in float64 and O(n³) time, but no iteration.
* ``"arpack"``: implicitly restarted Lanczos (``scipy.sparse.linalg.eigsh``),
  one matrix–vector product at a time.
* ``"lanczos"``: block Lanczos with full reorthogonalisation and thick
  restarts (:func:`lanczos_eigh`). It only needs products ``A @ V`` and stops
  as soon as every requested Ritz pair has a small residual
  ``‖A u − θ u‖ ≤ tol · ‖A‖``, checked after every product, so it does the
  fewest passes over the matrix.

The iterative solvers only need a function ``matmat(V) -> A @ V``, so the
matrix may be stored in any form (e.g. half of it, in float32, or implicitly
centred).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "top_eigh",
    "top_eigh_operator",
    "lanczos_eigh",
    "flip_signs",
    "choose_solver",
    "EIGEN_SOLVERS",
]

EIGEN_SOLVERS = ("auto", "dense", "arpack", "lanczos")

#: Below this size the iterative solvers just form the matrix and call LAPACK.
_SMALL = 64

MatMat = Callable[[NDArray[np.float64]], NDArray[np.float64]]


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
    """Validate ``solver`` and resolve ``"auto"``.

    ``"auto"`` picks ``"lanczos"`` for a few components of a large matrix
    (``n > 200`` and ``k ≤ n/10``), where it is the fastest accurate solver,
    and ``"dense"`` otherwise (many components: LAPACK computes them all at
    once). ``"arpack"`` and ``"lanczos"`` fall back to ``"dense"`` when
    ``k >= n``, which they cannot compute.
    """
    if solver not in EIGEN_SOLVERS:
        raise ValueError(
            f"eigen_solver must be one of {', '.join(repr(s) for s in EIGEN_SOLVERS)}; "
            f"got {solver!r}."
        )
    if solver == "auto":
        return "lanczos" if (n > 200 and k <= n // 10) else "dense"
    if solver in ("arpack", "lanczos") and k >= n:
        return "dense"
    return solver


def _descending(
    eigenvalues: NDArray[np.float64], eigenvectors: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues = np.ascontiguousarray(eigenvalues[order])
    eigenvectors = np.ascontiguousarray(eigenvectors[:, order])
    return eigenvalues, flip_signs(eigenvectors)


def _dense_top(S: NDArray[np.float64], k: int, overwrite: bool = False) -> tuple[NDArray, NDArray]:
    n = S.shape[0]
    if overwrite and S.flags.c_contiguous:
        S = S.T  # the same symmetric matrix, Fortran-ordered: LAPACK needs no copy
    return scipy.linalg.eigh(S, subset_by_index=(n - k, n - 1), overwrite_a=overwrite)


def top_eigh(
    S: NDArray[np.float64], k: int, solver: str = "auto", *, overwrite: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The ``k`` largest eigenpairs of the symmetric matrix ``S``, in descending order.

    Parameters
    ----------
    S : ndarray of shape (n, n)
        Symmetric matrix (only its lower triangle is read by the dense solver).
    k : int
        Number of eigenpairs, ``1 <= k <= n``.
    solver : {"auto", "dense", "arpack", "lanczos"}
        See the module docstring and :func:`choose_solver`.
    overwrite : bool, default=False
        Let the dense solver destroy ``S`` instead of copying it (saves an
        n×n matrix).

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
    eigenvectors : ndarray of shape (n, k), unit columns, signs fixed by :func:`flip_signs`.
    """
    n = S.shape[0]
    solver = choose_solver(n, k, solver)
    if solver == "dense":
        return _descending(*_dense_top(S, k, overwrite))
    return top_eigh_operator(S.__matmul__, n, k, solver)


def top_eigh_operator(
    matmat: MatMat,
    n: int,
    k: int,
    solver: str = "lanczos",
    *,
    tol: float | None = None,
    max_iter: int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The ``k`` largest eigenpairs of a symmetric matrix given by ``matmat(V) = A @ V``.

    Parameters
    ----------
    matmat : callable
        Product with the symmetric ``n×n`` matrix, for ``V`` of shape (n, b).
    n, k : int
        Matrix size and number of eigenpairs, ``1 <= k < n``.
    solver : {"lanczos", "arpack"}
    tol : float, optional
        Relative tolerance. ``"lanczos"``: residuals ``‖A u − θ u‖ ≤ tol·‖A‖``
        (default ``1e-10``); ``"arpack"``: scipy's ``tol`` (default 0, machine
        precision).
    max_iter : int, optional
        Maximum number of matrix–vector products (default: ``max(1000, 50k)``
        for ``"lanczos"``, ``10n`` for ``"arpack"``).

    Returns
    -------
    eigenvalues : ndarray of shape (k,), descending
    eigenvectors : ndarray of shape (n, k), unit columns, signs fixed by :func:`flip_signs`.
    """
    if solver == "arpack":
        if n <= _SMALL or k >= n:
            return _descending(*_dense_top(_materialize(matmat, n), k))
        op = scipy.sparse.linalg.LinearOperator(
            (n, n),
            matvec=lambda v: matmat(v.reshape(-1, 1)).ravel(),
            matmat=matmat,
            dtype=np.float64,
        )
        v0 = np.random.default_rng(0).uniform(-1.0, 1.0, size=n)
        eigenvalues, eigenvectors = scipy.sparse.linalg.eigsh(
            op, k=k, which="LA", v0=v0, tol=0.0 if tol is None else tol, maxiter=max_iter
        )
        return _descending(eigenvalues, eigenvectors)
    if solver == "lanczos":
        eigenvalues, eigenvectors = lanczos_eigh(
            matmat, n, k, tol=1e-10 if tol is None else tol, max_iter=max_iter
        )
        return _descending(eigenvalues, eigenvectors)
    raise ValueError(f"eigen_solver must be 'lanczos' or 'arpack' here; got {solver!r}.")


def _materialize(matmat: MatMat, n: int) -> NDArray[np.float64]:
    A = matmat(np.eye(n))
    A += A.T
    A *= 0.5
    return A


def _orthonormal_block(
    W: NDArray[np.float64],
    Q: NDArray[np.float64],
    rng: np.random.Generator,
    scale: float,
) -> NDArray[np.float64]:
    """Orthonormalise the block ``W`` against the orthonormal columns of ``Q`` and itself.

    Directions that vanish (``W`` already lies in ``span(Q)``: an invariant
    subspace was found) are replaced by random ones, so the basis keeps growing.
    """
    for _ in range(2):  # classical Gram–Schmidt, twice is enough
        W -= Q @ (Q.T @ W)
    W, R = np.linalg.qr(W)
    bad = np.abs(np.diag(R)) <= 1e-12 * scale
    if np.any(bad):
        Z = rng.standard_normal((W.shape[0], int(bad.sum())))
        basis = np.hstack([Q, W[:, ~bad]])
        for _ in range(2):
            Z -= basis @ (basis.T @ Z)
        W = np.hstack([W[:, ~bad], np.linalg.qr(Z)[0]])
    return W


def lanczos_eigh(
    matmat: MatMat,
    n: int,
    k: int,
    *,
    tol: float = 1e-10,
    max_iter: int | None = None,
    block_size: int | None = None,
    max_basis: int | None = None,
    seed: int = 0,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Top ``k`` eigenpairs by block Lanczos with full reorthogonalisation and thick restarts.

    The basis ``Q`` of the Krylov space ``span{V0, AV0, A²V0, ...}`` is grown by
    one block of ``block_size`` vectors per product with ``A``; both ``Q`` and
    ``AQ`` are kept, so the Rayleigh–Ritz problem ``H = Qᵀ(AQ)`` and the true
    residuals ``‖A u − θ u‖`` of the Ritz pairs are available after every
    product. When the basis reaches ``max_basis`` vectors it is restarted with
    the best Ritz vectors (thick restart), which keeps memory at
    ``2·n·max_basis`` numbers.

    Parameters
    ----------
    matmat : callable
        ``matmat(V) = A @ V`` for a symmetric ``A`` and ``V`` of shape (n, b).
    n, k : int
        Matrix size and number of wanted eigenpairs (largest eigenvalues).
    tol : float, default=1e-10
        Stop when every wanted Ritz pair has ``‖A u − θ u‖ ≤ tol · max|θ|``.
        Eigenvalue errors are then about ``tol²·‖A‖²/gap`` and eigenvector
        angles about ``tol·‖A‖/gap``.
    max_iter : int, optional
        Maximum number of matrix–vector products (default ``max(1000, 50k)``);
        a :class:`~sklearn.exceptions.ConvergenceWarning` is issued when reached.
    block_size : int, optional
        Vectors per product (1 is plain Lanczos). Default: 1 for ``k <= 10``
        (fewest passes over the matrix), else ``k // 4`` (fewer, cheaper
        Rayleigh–Ritz steps and BLAS-3 products when many pairs are wanted).
    max_basis : int, optional
        Basis size that triggers a restart (default ``max(2k + 20, k + 40)``).
    seed : int, default=0
        Seed of the start block, so that results are reproducible.

    Returns
    -------
    eigenvalues : ndarray of shape (k,), ascending
    eigenvectors : ndarray of shape (n, k)
    """
    if block_size is None:
        block_size = 1 if k <= 10 else k // 4
    b = max(1, int(block_size))
    m_max = max(2 * k + 20, k + 40) if max_basis is None else int(max_basis)
    m_max = max(m_max, k + 2 * b)
    if n <= max(_SMALL, 2 * m_max):
        return _dense_top(_materialize(matmat, n), k)
    max_iter = max(1000, 50 * k) if max_iter is None else int(max_iter)
    rng = np.random.default_rng(seed)

    Q = np.empty((n, m_max + b))
    AQ = np.empty((n, m_max + b))
    H = np.zeros((m_max + b, m_max + b))
    block = np.linalg.qr(rng.standard_normal((n, b)))[0]
    m = 0  # current basis size
    n_products = 0
    scale = 0.0
    best, since_best = np.inf, 0  # to detect stagnation at the rounding floor
    patience = max(50, 2 * m_max)
    while True:
        W = matmat(block)
        n_products += block.shape[1]
        j = block.shape[1]
        Q[:, m : m + j] = block
        AQ[:, m : m + j] = W
        # New columns of H = Qᵀ A Q, symmetrised.
        H[: m + j, m : m + j] = Q[:, : m + j].T @ W
        H[m : m + j, : m] = H[: m, m : m + j].T
        H[m : m + j, m : m + j] = 0.5 * (H[m : m + j, m : m + j] + H[m : m + j, m : m + j].T)
        m += j
        theta_all, S = np.linalg.eigh(H[:m, :m])
        scale = max(scale, float(np.max(np.abs(theta_all))), np.finfo(float).tiny)
        top = S[:, -k:] if m >= k else S
        theta = theta_all[-top.shape[1] :]
        U = Q[:, :m] @ top
        residuals = np.linalg.norm(AQ[:, :m] @ top - U * theta, axis=0)
        worst = float(residuals.max()) / scale if m >= k else np.inf
        if worst <= tol:
            return theta, U
        if worst < 0.5 * best:
            best, since_best = worst, 0
        else:
            since_best += j
        if n_products >= max_iter or since_best > patience:
            why = "stagnated after" if since_best > patience else "did not converge in"
            warnings.warn(
                f"lanczos eigensolver {why} {n_products} matrix-vector products (largest "
                f"relative residual {worst:.2g} > tol = {tol:.2g}); increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=3,
            )
            return theta, U
        W = _orthonormal_block(W.copy(), Q[:, :m], rng, scale)
        if m + W.shape[1] > m_max:
            # Thick restart: keep the best Ritz vectors (with their images under A).
            keep = min(m, m_max - W.shape[1], max(k + b, (m_max + k) // 2))
            Sk = S[:, -keep:]
            Q[:, :keep] = Q[:, :m] @ Sk
            AQ[:, :keep] = AQ[:, :m] @ Sk
            H[:keep, :keep] = np.diag(theta_all[-keep:])
            m = keep
            W = _orthonormal_block(W, Q[:, :m], rng, scale)
        block = W
