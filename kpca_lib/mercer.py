"""Mercer's condition checked on a dataset.

Mercer's theorem (informally, as in the lectures): ``k`` is a valid kernel,
``k(x, y) = φ(x)ᵀφ(y)`` for some φ, if and only if

(a) ``k`` is symmetric, ``k(x, y) = k(y, x)``, and
(b) for every dataset ``x_1, ..., x_n`` the matrix ``K_ij = k(x_i, x_j)`` is
    positive semi-definite.

One dataset can prove that a function is *not* a kernel (a counter-example),
but never that it is one: :func:`check_mercer` says "no violation found on this
data" for a function that passes.

Computed eigenvalues carry rounding errors of about ``eps·n·‖K‖``, so even a
valid kernel can show a tiny negative eigenvalue. The verdict tells the two
causes apart: a negative eigenvalue within the rounding bound
``10·eps·n·‖K‖₂`` (``rounding_bound``) is rounding, never a violation; one
below ``-tol`` (much larger by default) is a counter-example.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_array, check_positive
from .kernels import kernel_matrix

__all__ = ["MercerResult", "check_mercer", "check_mercer_matrix"]


@dataclass(frozen=True)
class MercerResult:
    """Verdict of :func:`check_mercer`.

    Attributes
    ----------
    symmetric : bool
        ``K`` equals ``Kᵀ`` up to ``tol``.
    psd : bool
        The symmetric part ``(K + Kᵀ)/2`` has no eigenvalue below ``-tol``.
    valid : bool
        ``symmetric and psd``: no violation of Mercer's condition on this data.
    min_eigenvalue : float
        Smallest eigenvalue of ``(K + Kᵀ)/2``.
    max_asymmetry : float
        ``max |K_ij − K_ji|``.
    tol : float
        Tolerance used for both tests.
    eigenvalues : ndarray
        All eigenvalues of ``(K + Kᵀ)/2``, ascending.
    explanation : str
        The verdict in words (it says whether a negative eigenvalue is
        rounding or a violation).
    rounding_bound : float
        ``10·eps·n·‖K‖₂``: how negative rounding alone can make an eigenvalue
        of a positive semi-definite ``K``.
    """

    symmetric: bool
    psd: bool
    valid: bool
    min_eigenvalue: float
    max_asymmetry: float
    tol: float
    eigenvalues: NDArray[np.float64] = field(repr=False)
    explanation: str = ""
    rounding_bound: float = 0.0

    def __bool__(self) -> bool:
        return self.valid

    def __str__(self) -> str:
        return self.explanation


def check_mercer_matrix(K: ArrayLike, tol: float | None = None) -> MercerResult:
    """Check symmetry and positive semi-definiteness of a kernel matrix.

    Parameters
    ----------
    K : array-like of shape (n, n)
    tol : float, optional
        Tolerance: an eigenvalue below ``-tol`` (or an asymmetry above ``tol``)
        is a violation. By default ``1e-10 · n · max(1, max |λ|)``, generously
        above the rounding errors of an eigendecomposition of ``K``. A ``tol``
        below the rounding bound is raised to it (rounding is not a violation).

    Returns
    -------
    MercerResult
    """
    K = check_array(K, "K")
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square; got shape {K.shape}.")
    n = K.shape[0]
    S = (K + K.T) / 2.0
    eigenvalues = np.linalg.eigvalsh(S)
    scale = max(1.0, float(np.max(np.abs(eigenvalues))), float(np.max(np.abs(K))))
    if tol is None:
        tol = 1e-10 * n * scale
    else:
        tol = check_positive(tol, "tol")
    eps = float(np.finfo(np.float64).eps)
    norm = max(float(np.max(np.abs(eigenvalues))), float(np.max(np.abs(K))))
    rounding = 10.0 * eps * n * norm
    threshold = max(tol, rounding)
    max_asym = float(np.max(np.abs(K - K.T)))
    symmetric = max_asym <= max(tol, 10.0 * eps * norm)
    min_eig = float(eigenvalues[0])
    psd = min_eig >= -threshold
    valid = symmetric and psd
    parts = []
    if symmetric:
        parts.append(f"symmetric (max |K_ij - K_ji| = {max_asym:.3g} <= tol {tol:.3g})")
    else:
        i, j = np.unravel_index(np.argmax(np.abs(K - K.T)), K.shape)
        parts.append(
            f"NOT symmetric: K[{i},{j}] = {K[i, j]:.6g} but K[{j},{i}] = {K[j, i]:.6g} "
            f"(difference {max_asym:.3g} > tol {tol:.3g})"
        )
    if min_eig >= 0:
        parts.append(f"positive semi-definite (smallest eigenvalue {min_eig:.3g} >= 0)")
    elif min_eig >= -rounding:
        parts.append(
            f"positive semi-definite up to rounding (smallest eigenvalue {min_eig:.3g}, within "
            f"the rounding error ±{rounding:.3g} of the eigensolver: rounding, not a violation)"
        )
    elif psd:
        parts.append(
            f"positive semi-definite within tol (smallest eigenvalue {min_eig:.3g} >= -{tol:.3g}), "
            f"though more negative than rounding alone explains (±{rounding:.3g}): the function "
            "may be slightly indefinite; try more or other points"
        )
    else:
        n_neg = int(np.sum(eigenvalues < -threshold))
        parts.append(
            f"NOT positive semi-definite: {n_neg} eigenvalue(s) below -tol, the smallest is "
            f"{min_eig:.6g}, far beyond the rounding error ±{rounding:.3g}"
        )
    if valid:
        verdict = (
            "No violation of Mercer's condition on these points: K is "
            + " and ".join(parts)
            + ". (This supports, but cannot prove, that the function is a kernel.)"
        )
    else:
        verdict = (
            "Not a valid (Mercer) kernel: K is "
            + "; ".join(parts)
            + ". A single dataset like this is a counter-example, so no feature map φ with "
            "k(x, y) = φ(x)ᵀφ(y) exists."
        )
    return MercerResult(
        symmetric=bool(symmetric),
        psd=bool(psd),
        valid=bool(valid),
        min_eigenvalue=min_eig,
        max_asymmetry=max_asym,
        tol=float(tol),
        eigenvalues=eigenvalues,
        explanation=verdict,
        rounding_bound=float(rounding),
    )


def check_mercer(
    k: Callable[[NDArray, NDArray], float], X: ArrayLike, tol: float | None = None
) -> MercerResult:
    """Test Mercer's condition for a function ``k(x, y)`` on the points ``X``.

    Parameters
    ----------
    k : callable
        Candidate kernel, a function of two 1-D arrays returning a real number.
    X : array-like of shape (n_samples, n_features)
        Points on which ``K_ij = k(x_i, x_j)`` is built.
    tol : float, optional
        See :func:`check_mercer_matrix`.

    Returns
    -------
    MercerResult
        With ``symmetric``, ``psd``, ``valid``, ``min_eigenvalue`` and ``explanation``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(20, 2))
    >>> check_mercer(lambda x, y: (x @ y + 1) ** 2, X).valid
    True
    >>> check_mercer(lambda x, y: -np.linalg.norm(x - y) ** 2 - 1, X).valid
    False
    """
    X = check_array(X)
    K = kernel_matrix(k, X)
    return check_mercer_matrix(K, tol=tol)
