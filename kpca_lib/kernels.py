"""Kernel functions evaluated on whole datasets: one implementation of each kernel.

All functions take arrays of shape ``(n_samples, n_features)`` and return the
kernel matrix ``K`` with ``K[i, j] = k(X[i], Y[j])``. When ``Y`` is omitted,
``Y = X`` and ``K`` is the (square) Gram matrix of ``X``.

In the lectures' notation, with data points as columns of ``X ∈ R^{d×n}``,
the linear kernel matrix is ``XᵀX``; in code, with points as rows, it is
``X @ X.T``.

The kernels
-----------
========== ============================== =============================================
name       ``k(x, y)``                    parameters
========== ============================== =============================================
linear     ``xᵀy``
poly       ``(γ xᵀy + coef0)^degree``     ``gamma`` (default 1), ``coef0``, ``degree``
rbf        ``exp(−‖x − y‖² / (2σ²))``     ``sigma`` (default 1) or ``gamma = 1/(2σ²)``
sigmoid    ``tanh(γ xᵀy + coef0)``        ``gamma`` (default 1), ``coef0``
cosine     ``xᵀy / (‖x‖ ‖y‖)``            (a zero row gives 0, as scikit-learn)
========== ============================== =============================================

These are scikit-learn's formulas (``sklearn.metrics.pairwise``). The kernel
functions of this module keep the lectures' defaults: ``gamma=None`` means 1
for ``poly`` and ``sigmoid`` (the lectures' ``(xᵀy + 1)^p``; scikit-learn uses
``1/n_features``) and σ = 1 for ``rbf``. :class:`~kpca_lib.kernel_pca.KernelPCA`
has scikit-learn's defaults instead (``gamma=None`` is ``1/n_features``, see
:func:`make_kernel`'s ``n_features``). The sigmoid kernel is not positive
semi-definite in general (not a Mercer kernel).

Sparse data
-----------
:func:`sparse_kernel` evaluates the named kernels on ``scipy.sparse`` rows
without densifying them: one sparse product ``A Bᵀ`` and element-wise
operations on the (dense) result, with the RBF entries that cancellation could
spoil recomputed from sparse differences ``a − b``.

One code path
-------------
Every caller — the plain functions below, :class:`~kpca_lib.kernel_pca.KernelPCA`'s
fit (threaded blocks of a half-stored matrix) and its ``transform`` — goes
through :class:`KernelEvaluator`, so the same arithmetic gives the same
numbers. Distances are computed stably: both sides are shifted by the same
vector (the mean of the reference set, i.e. the training data), then
``‖x‖² + ‖y‖² − 2xᵀy`` is one matrix product, and entries for which that
expansion could lose more than ``1e-12`` of the kernel's scale to
cancellation are recomputed from direct differences ``x − y``. For a very wide
Gaussian (σ large against the spread of the data, all ``K_ij ≈ 1``) the
estimator stores ``K − 1 = expm1(−γ‖x−y‖²)`` instead of ``K``: centring
removes the constant, and ``expm1`` keeps the digits that ``exp`` rounds away.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray

from ._blocked import KernelStats, symmetrize_inplace
from ._validation import (
    check_array,
    check_degree,
    check_finite_scalar,
    check_positive,
)
from ._xp import device, hstack, namespace

__all__ = [
    "linear_kernel",
    "polynomial_kernel",
    "rbf_kernel",
    "sigmoid_kernel",
    "cosine_kernel",
    "kernel_matrix",
    "squared_distances",
    "get_kernel",
    "make_kernel",
    "KernelSpec",
    "KernelEvaluator",
    "KernelFunction",
    "kernel_block_function",
    "check_kernel_values",
    "sparse_kernel",
    "KERNELS",
]

KERNELS = ("linear", "poly", "rbf", "sigmoid", "cosine")

_EPS = float(np.finfo(np.float64).eps)
#: Entries whose estimated cancellation error exceeds this fraction of the
#: kernel's scale are recomputed from direct differences.
_REFINE_TOL = 1e-12
#: Relative accuracy asked of :func:`squared_distances`.
_DISTANCE_RTOL = 1e-10
#: Kernel values must lie within this range for the eigensolvers (whose norms square them).
_HUGE, _TINY = 1e140, 1e-140
#: Pairs recomputed from direct differences at once (memory: this × n_features floats).
_PAIR_CHUNK = 1 << 16


# -- parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelSpec:
    """A validated kernel: its name and resolved parameters.

    Attributes
    ----------
    name : str
        One of :data:`KERNELS`, ``"precomputed"`` or ``"callable"``.
    gamma : float or None
        ``rbf``: ``1/(2σ²)``; ``poly`` and ``sigmoid``: the factor of ``xᵀy``.
    degree : int
        ``poly`` only.
    coef0 : float
        ``poly`` and ``sigmoid``.
    function : callable or None
        The pairwise function ``k(x, y) -> float`` of a callable kernel.
    """

    name: str
    gamma: float | None = None
    degree: int = 2
    coef0: float = 1.0
    function: Callable[[NDArray, NDArray], float] | None = None

    @property
    def sigma(self) -> float | None:
        """The RBF bandwidth ``σ = 1/√(2γ)`` (``None`` for other kernels)."""
        return 1.0 / math.sqrt(2.0 * self.gamma) if self.name == "rbf" else None

    @property
    def may_be_indefinite(self) -> bool:
        """Kernels that are not positive semi-definite in general."""
        return self.name in ("sigmoid", "callable", "precomputed")

    @property
    def is_named(self) -> bool:
        return self.name in KERNELS


def _check_gamma(gamma: object, kernel: str) -> float:
    gamma = check_positive(gamma, "gamma")
    if gamma < np.finfo(np.float64).tiny:
        raise ValueError(
            f"gamma={gamma!r} is below the smallest normal float ({np.finfo(np.float64).tiny:.3g}) "
            f"for kernel={kernel!r}: every product with it loses precision; use a larger gamma "
            "(or scale X)."
        )
    return gamma


def _sigma_to_gamma(sigma: object) -> float:
    sigma = check_positive(sigma, "sigma")
    two_sigma_sq = 2.0 * sigma * sigma
    gamma = 1.0 / two_sigma_sq if two_sigma_sq > 0 else math.inf
    if not math.isfinite(gamma):
        raise ValueError(
            f"sigma={sigma!r} is too small: gamma = 1/(2σ²) overflows (σ² underflows to "
            f"{sigma * sigma!r}); use sigma >= 1e-150, scaled to the distances between your "
            "points (e.g. their median distance)."
        )
    if gamma < np.finfo(np.float64).tiny:
        raise ValueError(
            f"sigma={sigma!r} is too large: gamma = 1/(2σ²) = {gamma!r} underflows, so every "
            "kernel value is exactly 1; use sigma <= 1e150, scaled to the distances between "
            "your points (e.g. their median distance)."
        )
    return gamma


def make_kernel(
    kernel: str | Callable[[NDArray, NDArray], float] | KernelSpec,
    *,
    sigma: float | None = None,
    gamma: float | None = None,
    degree: int = 2,
    coef0: float = 1.0,
    allow_precomputed: bool = False,
    n_features: int | None = None,
) -> KernelSpec:
    """Validate a kernel name and its parameters into a :class:`KernelSpec`.

    Parameters
    ----------
    kernel : {"linear", "poly", "rbf", "sigmoid", "cosine"}, "precomputed" or callable
        A kernel name, or a function ``k(x, y) -> float`` of two samples.
        ``"precomputed"`` only with ``allow_precomputed=True``.
    sigma : float, optional
        RBF bandwidth σ > 0. Ignored by the other kernels.
    gamma : float, optional
        scikit-learn's ``gamma > 0``: for ``rbf`` it replaces σ
        (``gamma = 1/(2σ²)``); for ``poly`` and ``sigmoid`` it multiplies
        ``xᵀy``. Ignored by ``linear`` and ``cosine``.
        Give ``sigma`` or ``gamma``, not both.
    degree : int, default=2
        ``poly`` only.
    coef0 : float, default=1.0
        ``poly`` and ``sigmoid`` only.
    allow_precomputed : bool, default=False
        Accept ``kernel="precomputed"``.
    n_features : int, optional
        Number of features of the data. Given (as
        :class:`~kpca_lib.kernel_pca.KernelPCA` does), ``gamma=None`` means
        scikit-learn's ``1/n_features`` for ``rbf`` (unless ``sigma`` is
        given), ``poly`` and ``sigmoid``. Omitted, ``gamma=None`` means the
        lectures' defaults: σ = 1 for ``rbf`` and ``gamma = 1`` for ``poly``
        and ``sigmoid``.

    Returns
    -------
    KernelSpec

    Raises
    ------
    ValueError
        For an unknown kernel, both ``sigma`` and ``gamma``, or a parameter
        out of range (the message names it and the fix).
    """
    if isinstance(kernel, KernelSpec):
        return kernel
    if sigma is not None and gamma is not None:
        raise ValueError(
            f"give sigma or gamma, not both (got sigma={sigma!r} and gamma={gamma!r}): "
            "gamma = 1/(2σ²) is scikit-learn's name for the same RBF parameter."
        )
    if sigma is not None:
        check_positive(sigma, "sigma")  # ignored by the other kernels, but never invalid
    if callable(kernel):
        return KernelSpec("callable", function=kernel)
    names = KERNELS + (("precomputed",) if allow_precomputed else ())
    if not isinstance(kernel, str) or kernel not in names:
        raise ValueError(
            f"kernel must be one of {', '.join(repr(k) for k in names)} or a callable "
            f"k(x, y) -> float; got {kernel!r}."
        )
    default_gamma = None
    if n_features is not None:
        if (
            isinstance(n_features, bool)
            or not isinstance(n_features, numbers.Integral)
            or (n_features < 1)
        ):
            raise ValueError(f"n_features must be a positive integer; got {n_features!r}.")
        default_gamma = 1.0 / int(n_features)  # scikit-learn's gamma=None
    if kernel == "rbf":
        if gamma is not None:
            resolved = _check_gamma(gamma, "rbf")
        elif sigma is not None or default_gamma is None:
            resolved = _sigma_to_gamma(1.0 if sigma is None else sigma)
        else:
            resolved = default_gamma
        return KernelSpec("rbf", gamma=resolved)
    if kernel in ("poly", "sigmoid"):
        if gamma is not None:
            resolved = _check_gamma(gamma, kernel)
        else:
            resolved = 1.0 if default_gamma is None else default_gamma
        coef0 = check_finite_scalar(coef0, "coef0")
        degree = check_degree(degree) if kernel == "poly" else 1
        return KernelSpec(kernel, gamma=resolved, degree=degree, coef0=coef0)
    return KernelSpec(kernel)


# -- the one implementation -------------------------------------------------------------


def _row_norms_sq(A: NDArray[np.float64]) -> NDArray[np.float64]:
    xp = namespace(A)
    if xp is not np:
        return xp.sum(A * A, axis=1)
    with np.errstate(over="ignore"):
        return np.einsum("ij,ij->i", A, A)


def _safe_row_norms(A: NDArray[np.float64]) -> NDArray[np.float64]:
    """‖a_i‖ without overflow or underflow (scaled by the largest entry of each row)."""
    xp = namespace(A)
    scale = xp.max(xp.abs(A), axis=1)
    safe = xp.where(scale > 0, scale, xp.ones_like(scale))
    return scale * xp.sqrt(_row_norms_sq(A / safe[:, None]))


def _full(xp: object, like: object, shape: tuple[int, int], value: float) -> object:
    """A constant array of ``like``'s dtype and device (float64 for NumPy, as before)."""
    if xp is np:
        return np.full(shape, value)
    return xp.full(shape, value, dtype=like.dtype, device=device(like))


class _Side:
    """Rows prepared for :meth:`KernelEvaluator.block` (the left factor of the products)."""

    def __init__(self, left: NDArray[np.float64], sq: NDArray[np.float64] | None, d: int):
        self.left = left
        self.sq = sq
        self.d = d

    @property
    def n(self) -> int:
        return self.left.shape[0]

    def points(self, idx: NDArray[np.intp] | slice) -> NDArray[np.float64]:
        """The shifted rows themselves (the first ``d`` columns of ``left``)."""
        return self.left[idx, : self.d]


class KernelEvaluator:
    """Kernel values ``k(a, b)`` between any rows ``a`` and a fixed reference set ``B``.

    The single implementation behind every kernel function of the package.
    The reference rows are prepared once (shifted, normalised or augmented so
    that one BLAS product gives a whole block), then blocks ``k(A[rows],
    B[cols])`` are computed in place in caller-provided arrays.

    Parameters
    ----------
    spec : KernelSpec
        A named kernel (not callable or precomputed).
    B : ndarray of shape (n_B, n_features)
        Validated float64 reference rows (the training data in kernel PCA).
    shift : ndarray of shape (n_features,), optional
        Vector subtracted from both sides for ``rbf`` (translation invariant).
        Default: the mean of ``B``; pass the fit-time mean to reproduce a
        fitted evaluator exactly.
    centred : bool, default=False
        The caller centres the result (kernel PCA). Then additive terms that
        centring removes are allowed: the linear kernel is evaluated on
        shifted data (``(x−m)ᵀ(y−m)`` differs from ``xᵀy`` by such terms) and
        the RBF kernel may be stored as ``K − 1`` (see ``expm1``).
    expm1 : bool, optional
        ``rbf`` with ``centred=True``: store ``expm1(−γ‖x−y‖²) = K − 1``.
        Default: when ``γ·max‖x − y‖² <= 2`` over the reference set (a wide
        Gaussian, where ``exp`` would round the information away).

    Attributes
    ----------
    shift : ndarray or None
    expm1 : bool
    """

    def __init__(
        self,
        spec: KernelSpec,
        B: NDArray[np.float64],
        *,
        shift: NDArray[np.float64] | None = None,
        centred: bool = False,
        expm1: bool | None = None,
    ) -> None:
        if not spec.is_named:
            raise ValueError(f"KernelEvaluator needs a named kernel; got {spec.name!r}.")
        self.spec = spec
        self.centred = centred
        self.d = B.shape[1]
        name = spec.name
        self.shift = None
        self.expm1 = False
        xp = namespace(B)
        if name == "rbf" or (name == "linear" and centred):
            if shift is None:
                self.shift = xp.mean(B, axis=0)
            else:
                self.shift = np.asarray(shift, dtype=np.float64) if xp is np else shift
        Bs = B - self.shift if self.shift is not None else B
        ones = _full(xp, B, (B.shape[0], 1), 1.0)
        if name == "rbf":
            self.sq = _row_norms_sq(Bs)
            self._check_spread(self.sq, "X")
            # ‖a‖² + ‖b‖² − 2aᵀb = [a, ‖a‖², 1] · [−2b, 1, ‖b‖²]
            self.right = hstack(xp, [-2.0 * Bs, ones, self.sq[:, None]])
            s_max = float(xp.max(self.sq))
            if expm1 is None:
                expm1 = centred and spec.gamma * 4.0 * s_max <= 2.0
            self.expm1 = bool(expm1 and centred)
            # Typical size of the centred kernel entries: the refinement tolerance scales with it.
            self._scale = min(1.0, spec.gamma * 4.0 * s_max) if self.expm1 else 1.0
            self._err = (self.d + 2) * _EPS * spec.gamma  # error of γD per unit of ‖a‖² + ‖b‖²
        elif name in ("poly", "sigmoid"):
            # γ aᵀb + coef0 = [a, 1] · [γ b, coef0]
            self.right = hstack(
                xp, [spec.gamma * Bs, _full(xp, B, (B.shape[0], 1), float(spec.coef0))]
            )
        elif name == "cosine":
            self.right = self._normalise(Bs)
        else:
            self.right = Bs

    # -- preparation ---------------------------------------------------------------------
    def _check_spread(self, sq: NDArray[np.float64], name: str) -> None:
        xp = namespace(sq)
        if not bool(xp.all(xp.isfinite(sq))):
            raise ValueError(
                f"{name} has values too large for squared distances in float64 (largest |x − "
                f"mean| squared overflows); scale {name}, e.g. with "
                "sklearn.preprocessing.StandardScaler (and sigma with it)."
            )

    @staticmethod
    def _normalise(A: NDArray[np.float64]) -> NDArray[np.float64]:
        norms = _safe_row_norms(A)
        xp = namespace(A)
        if xp is not np:
            safe = xp.where(norms > 0, norms, xp.ones_like(norms))
            return xp.where((norms > 0)[:, None], A / safe[:, None], xp.zeros_like(A))
        out = np.zeros_like(A)
        nz = norms > 0
        out[nz] = A[nz] / norms[nz, None]
        return out

    def side(self, A: NDArray[np.float64]) -> _Side:
        """Prepare rows ``A`` (validated, the dtype and namespace of ``B``, same features)."""
        name = self.spec.name
        xp = namespace(A)
        As = A - self.shift if self.shift is not None else A
        ones = _full(xp, A, (A.shape[0], 1), 1.0)
        if name == "rbf":
            sq = _row_norms_sq(As)
            self._check_spread(sq, "X")
            return _Side(hstack(xp, [As, sq[:, None], ones]), sq, self.d)
        if name in ("poly", "sigmoid"):
            return _Side(hstack(xp, [As, ones]), None, self.d)
        if name == "cosine":
            return _Side(self._normalise(As), None, self.d)
        return _Side(np.ascontiguousarray(As) if xp is np else As, None, self.d)

    # -- evaluation ----------------------------------------------------------------------
    def block(
        self,
        side: _Side,
        rows: slice,
        cols: slice,
        out: NDArray[np.float64] | None = None,
        *,
        diagonal: bool = False,
    ) -> NDArray[np.float64]:
        """``k(A[rows], B[cols])`` written into ``out`` (or a new array) and returned.

        ``diagonal=True`` declares that ``A`` is ``B`` and ``rows == cols``:
        the block is then made exactly symmetric (and the RBF diagonal exact).
        Any Array API namespace (the reference rows'); ``out`` is NumPy's only.
        """
        if namespace(self.right) is not np:
            return self._block_namespace(side, rows, cols, diagonal)
        with np.errstate(over="ignore", invalid="ignore"):
            # Overflow is reported by the callers (check_kernel_values), naming the fix.
            return self._block(side, rows, cols, out, diagonal)

    def _block(
        self, side: _Side, rows: slice, cols: slice, out: NDArray | None, diagonal: bool
    ) -> NDArray[np.float64]:
        name = self.spec.name
        K = np.matmul(side.left[rows], self.right[cols].T, out=out)
        if name == "rbf":
            self._refine(K, side, rows, cols)
            np.maximum(K, 0.0, out=K)  # rounding can make ‖x − y‖² slightly negative
            if diagonal:
                _symmetrize(K)
                np.fill_diagonal(K, 0.0)
            K *= -self.spec.gamma
            if self.expm1:
                np.expm1(K, out=K)
            else:
                np.exp(K, out=K)
            return K
        if name == "poly":
            degree = self.spec.degree
            if degree == 2:
                np.multiply(K, K, out=K)
            elif degree > 2:
                np.power(K, degree, out=K)
        elif name == "sigmoid":
            np.tanh(K, out=K)
        if diagonal:
            _symmetrize(K)
        return K

    def _block_namespace(self, side: _Side, rows: slice, cols: slice, diagonal: bool) -> object:
        """:meth:`_block` for arrays of another namespace, on their device (no ``out``).

        The same arithmetic, without the in-place steps; the RBF refinement by direct
        differences (:meth:`_refine`, NumPy's) is not done: on a device the kernel is
        stored in ``X``'s dtype and the verification's rounding level accounts for it.
        """
        xp, name = namespace(self.right), self.spec.name
        K = side.left[rows, :] @ xp.matrix_transpose(self.right[cols, :])
        if name == "rbf":
            K = xp.maximum(K, xp.zeros_like(K))  # rounding can make ‖x − y‖² slightly negative
            if diagonal:
                K = 0.5 * (K + xp.matrix_transpose(K))
                i = xp.arange(K.shape[0], device=device(K))
                K = xp.where(i[:, None] == i[None, :], xp.zeros_like(K), K)
            K = -self.spec.gamma * K
            return xp.expm1(K) if self.expm1 else xp.exp(K)
        if name == "poly" and self.spec.degree >= 2:
            K = K**self.spec.degree
        elif name == "sigmoid":
            K = xp.tanh(K)
        return 0.5 * (K + xp.matrix_transpose(K)) if diagonal else K

    def _refine(self, D: NDArray[np.float64], side: _Side, rows: slice, cols: slice) -> None:
        """Recompute from direct differences the entries that cancellation may have spoilt.

        The product ``‖a‖² + ‖b‖² − 2aᵀb`` has an error of about
        ``(d+2)·eps·(‖a‖² + ‖b‖²)``; multiplied by γ and the kernel value it
        is the error of ``K_ij``. Entries where that exceeds ``1e-12`` times
        the scale of the kernel are recomputed as ``‖a − b‖²``.
        """
        sq_a, sq_b = side.sq[rows], self.sq[cols]
        limit = _REFINE_TOL * self._scale
        if self._err * (float(sq_a.max()) + float(sq_b.max())) <= limit:
            return  # the common case: nothing can be spoilt in this block
        bound = self._err * (sq_a[:, None] + sq_b[None, :])
        with np.errstate(over="ignore", under="ignore"):
            bound *= np.exp(-self.spec.gamma * np.maximum(D, 0.0))
        self._recompute(D, side, rows, cols, bound > limit)

    def _recompute(
        self, D: NDArray[np.float64], side: _Side, rows: slice, cols: slice, mask: NDArray
    ) -> None:
        rows_i, cols_j = np.nonzero(mask)
        r0, c0 = rows.start or 0, cols.start or 0
        B = self.right
        for s in range(0, rows_i.size, _PAIR_CHUNK):
            i, j = rows_i[s : s + _PAIR_CHUNK], cols_j[s : s + _PAIR_CHUNK]
            diff = side.points(i + r0) + 0.5 * B[j + c0, : self.d]  # a − b (right holds −2b)
            D[i, j] = np.einsum("ij,ij->i", diff, diff)

    def __call__(self, A: NDArray[np.float64], *, same: bool = False) -> NDArray[np.float64]:
        """The whole matrix ``k(A, B)``; ``same=True`` when ``A`` is ``B`` (exactly symmetric)."""
        side = self.side(A)
        everything = slice(0, A.shape[0])
        if same:
            return self.block(side, everything, everything, diagonal=True)
        return self.block(side, everything, slice(0, self.right.shape[0]))


def _symmetrize(B: NDArray[np.float64]) -> None:
    """Replace the square block ``B`` by ``(B + Bᵀ)/2`` in place (BLAS rounding differs)."""
    if B.shape[0] > 512:
        symmetrize_inplace(B)
        return
    B += B.T.copy()
    B *= 0.5


def check_kernel_values(
    spec: KernelSpec, stats: KernelStats, dtype: object = "float64", *, where: str = "fit"
) -> None:
    """Raise a ``ValueError`` naming the parameter to change when kernel values are unusable.

    Checks, on the values as stored (after any cast to ``dtype``): no
    infinity or NaN; ``max |K_ij| <= 1e140`` (the eigensolvers square
    them); and, unless every value is 0, ``max |K_ij| >= 1e-140``.
    """
    dtype = np.dtype(dtype)
    big = stats.max_abs
    fix = _fix_hint(spec)
    overflow64 = not (big == big and big <= np.finfo(np.float64).max)
    if not stats.finite and dtype == np.float32 and not overflow64:
        raise ValueError(
            f"the {spec.name} kernel matrix overflows float32 (kernel_dtype='float32'): its "
            f"largest value {big:.3g} exceeds {float(np.finfo(np.float32).max):.3g}; use "
            f"kernel_dtype='float64', or {fix}."
        )
    if not stats.finite or overflow64:
        raise ValueError(
            f"the {spec.name} kernel matrix overflowed at {where} (infinite or NaN values); {fix}."
        )
    if big > _HUGE:
        raise ValueError(
            f"the {spec.name} kernel matrix has values up to {big:.3g} at {where}, too large "
            f"for the eigensolvers (they square them; limit {_HUGE:.0e}); {fix}."
        )
    if 0.0 < big < _TINY:
        if spec.name == "rbf":
            raise ValueError(
                f"sigma={spec.sigma:.6g} (gamma={spec.gamma:.6g}) is so large compared with the "
                f"distances between the points that every kernel value differs from 1 by less "
                f"than {big:.3g}; use a smaller sigma (larger gamma), e.g. the median distance "
                "between points, or scale X."
            )
        raise ValueError(
            f"the {spec.name} kernel values are all below {big:.3g} in magnitude, too small for "
            f"the eigensolvers (their squares underflow); {fix}."
        )


def _fix_hint(spec: KernelSpec) -> str:
    if spec.name == "poly":
        return (
            f"scale X to a smaller range (e.g. StandardScaler), use a lower degree "
            f"(degree={spec.degree}) or a smaller gamma (gamma={spec.gamma:.6g})"
        )
    if spec.name == "rbf":
        return "scale X (e.g. StandardScaler) and choose sigma to match"
    if spec.name == "sigmoid":
        return f"scale X or use a smaller gamma (gamma={spec.gamma:.6g})"
    return "scale X to a smaller range (e.g. StandardScaler)"


def _stats_of(K: NDArray[np.float64]) -> KernelStats:
    with np.errstate(invalid="ignore"):
        big = max(float(K.max()), -float(K.min())) if K.size else 0.0
    finite = bool(np.isfinite(big))
    return KernelStats(np.zeros(0), 0.0, 0.0, big, finite)


def evaluate(
    spec: KernelSpec, X: NDArray[np.float64], Y: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """``k(X, Y)`` (``Y = X`` when omitted) for a validated spec and validated arrays.

    The exact kernel values (no additive terms dropped), checked for overflow.
    """
    if spec.name == "callable":
        return kernel_matrix(spec.function, X, Y)
    if spec.name == "precomputed":
        raise ValueError("kernel='precomputed' has no kernel function: X is the kernel matrix.")
    same = Y is None
    K = KernelEvaluator(spec, X if same else Y)(X, same=same)
    stats = _stats_of(K)
    if not stats.finite or stats.max_abs > np.finfo(np.float64).max:
        check_kernel_values(spec, stats, where="evaluation")
    return K


# -- sparse data ----------------------------------------------------------------------------


def _dense_product(A: object, B: object) -> NDArray[np.float64]:
    """``A @ B.T`` as a dense float64 array, for ``A`` and ``B`` sparse or dense (not both dense)."""
    P = A @ B.T if scipy.sparse.issparse(A) else (B @ A.T).T
    if scipy.sparse.issparse(P):
        P = P.toarray()
    return np.ascontiguousarray(np.asarray(P, dtype=np.float64))


def _sparse_row_sq(A: object) -> NDArray[np.float64]:
    if scipy.sparse.issparse(A):
        with np.errstate(over="ignore"):
            return np.asarray(A.multiply(A).sum(axis=1), dtype=np.float64).ravel()
    return _row_norms_sq(np.asarray(A))


def _sparse_normalise(A: object) -> object:
    """Rows divided by their Euclidean norms (zero rows stay zero), without densifying."""
    if not scipy.sparse.issparse(A):
        return KernelEvaluator._normalise(np.asarray(A))
    scale = np.asarray(abs(A).max(axis=1).toarray(), dtype=np.float64).ravel()
    safe = np.where(scale > 0, scale, 1.0)
    scaled = scipy.sparse.diags(1.0 / safe) @ A
    norms = scale * np.sqrt(_sparse_row_sq(scaled))
    inverse = np.zeros_like(norms)
    nz = norms > 0
    inverse[nz] = 1.0 / norms[nz]
    return scipy.sparse.csr_matrix(scipy.sparse.diags(inverse) @ A)


def _rows_csr(A: object, idx: NDArray[np.intp]) -> scipy.sparse.csr_matrix:
    rows = A[idx]
    return rows if scipy.sparse.issparse(rows) else scipy.sparse.csr_matrix(rows)


def sparse_kernel(spec: KernelSpec, A: object, B: object | None = None) -> NDArray[np.float64]:
    """``k(A, B)`` (``B = A`` when omitted) for a named kernel, ``A`` or ``B`` scipy.sparse.

    The data are never densified: ``A Bᵀ`` is one sparse product (its
    result, the kernel matrix, is dense), and the kernel is applied to it
    element-wise. RBF distances are ``‖a‖² + ‖b‖² − 2aᵀb``; the entries whose
    cancellation error could exceed ``1e-12`` of the kernel's scale (close
    pairs far from the origin: sparse data are not shifted by their mean,
    which would densify them) are recomputed from the sparse differences
    ``a − b``. With ``B`` omitted the result is exactly symmetric (and the
    RBF diagonal exactly 1). Overflow is left to the caller to report
    (:func:`check_kernel_values`).

    Parameters
    ----------
    spec : KernelSpec
        A named kernel (``linear``, ``poly``, ``rbf``, ``sigmoid``, ``cosine``).
    A : scipy.sparse matrix or ndarray of shape (n_A, n_features)
        Validated float64 data (:func:`kpca_lib._validation.check_sparse_array`).
    B : scipy.sparse matrix or ndarray of shape (n_B, n_features), optional

    Returns
    -------
    ndarray of shape (n_A, n_B)
    """
    if not spec.is_named:
        raise ValueError(
            f"sparse data need a named kernel ({', '.join(map(repr, KERNELS))}); got {spec.name!r}."
        )
    same = B is None
    B = A if same else B
    if A.shape[1] != B.shape[1]:
        raise ValueError(
            f"X and Y must have the same number of features; got {A.shape[1]} and {B.shape[1]}."
        )
    name = spec.name
    with np.errstate(over="ignore", invalid="ignore"):
        if name == "cosine":
            An = _sparse_normalise(A)
            K = _dense_product(An, An if same else _sparse_normalise(B))
        else:
            K = _dense_product(A, B)
        if name in ("poly", "sigmoid"):
            K *= spec.gamma
            K += spec.coef0
            if name == "sigmoid":
                np.tanh(K, out=K)
            elif spec.degree == 2:
                np.multiply(K, K, out=K)
            elif spec.degree > 2:
                np.power(K, spec.degree, out=K)
        elif name == "rbf":
            sq_a = _sparse_row_sq(A)
            sq_b = sq_a if same else _sparse_row_sq(B)
            if not (np.all(np.isfinite(sq_a)) and np.all(np.isfinite(sq_b))):
                raise ValueError(
                    "X has values too large for squared distances in float64 (a squared row "
                    "norm overflows); scale X, e.g. with "
                    "sklearn.preprocessing.MaxAbsScaler (which keeps it sparse), and sigma with it."
                )
            K *= -2.0
            K += sq_a[:, None]
            K += sq_b[None, :]
            _refine_sparse(K, A, B, sq_a, sq_b, spec.gamma)
            np.maximum(K, 0.0, out=K)
            if same:
                _symmetrize(K)
                np.fill_diagonal(K, 0.0)
            K *= -spec.gamma
            np.exp(K, out=K)
            return K
    if same:
        _symmetrize(K)
    return K


def _refine_sparse(
    D: NDArray[np.float64],
    A: object,
    B: object,
    sq_a: NDArray[np.float64],
    sq_b: NDArray[np.float64],
    gamma: float,
) -> None:
    """Recompute from sparse differences the distances that cancellation may have spoilt."""
    err = (A.shape[1] + 2) * _EPS * gamma
    if err * (float(sq_a.max(initial=0.0)) + float(sq_b.max(initial=0.0))) <= _REFINE_TOL:
        return
    bound = err * (sq_a[:, None] + sq_b[None, :])
    with np.errstate(over="ignore", under="ignore"):
        bound *= np.exp(-gamma * np.maximum(D, 0.0))
    rows_i, cols_j = np.nonzero(bound > _REFINE_TOL)
    for s in range(0, rows_i.size, _PAIR_CHUNK):
        i, j = rows_i[s : s + _PAIR_CHUNK], cols_j[s : s + _PAIR_CHUNK]
        diff = _rows_csr(A, i) - _rows_csr(B, j)
        D[i, j] = np.asarray(diff.multiply(diff).sum(axis=1), dtype=np.float64).ravel()


# -- the public functions ---------------------------------------------------------------


def _pair(X: ArrayLike, Y: ArrayLike | None) -> tuple[NDArray, NDArray | None]:
    X = check_array(X, "X")
    if Y is None:
        return X, None
    Y = check_array(Y, "Y")
    if Y.shape[1] != X.shape[1]:
        raise ValueError(
            f"X and Y must have the same number of features; got {X.shape[1]} and {Y.shape[1]}."
        )
    return X, Y


def linear_kernel(X: ArrayLike, Y: ArrayLike | None = None) -> NDArray[np.float64]:
    """Linear kernel ``k(x, y) = xᵀy``.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional
        Defaults to ``X``.

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)
    """
    return evaluate(make_kernel("linear"), *_pair(X, Y))


def polynomial_kernel(
    X: ArrayLike,
    Y: ArrayLike | None = None,
    degree: int = 2,
    coef0: float = 1.0,
    *,
    gamma: float | None = None,
) -> NDArray[np.float64]:
    """Polynomial kernel ``k(x, y) = (γ xᵀy + coef0) ** degree``.

    With ``gamma = coef0 = 1`` (the defaults) this is the lectures'
    ``(xᵀx' + 1)^p``; it equals
    ``polynomial_features(x, p) @ polynomial_features(y, p)``.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional
    degree : int, default=2
        The power ``p``, a positive integer.
    coef0 : float, default=1.0
        The additive constant.
    gamma : float, optional
        Factor of ``xᵀy``, > 0 (default 1; scikit-learn's default is ``1/n_features``).

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)

    Raises
    ------
    ValueError
        If a parameter is invalid or the values overflow.
    """
    spec = make_kernel("poly", degree=degree, coef0=coef0, gamma=gamma)
    return evaluate(spec, *_pair(X, Y))


def sigmoid_kernel(
    X: ArrayLike,
    Y: ArrayLike | None = None,
    gamma: float | None = None,
    coef0: float = 1.0,
) -> NDArray[np.float64]:
    """Sigmoid kernel ``k(x, y) = tanh(γ xᵀy + coef0)`` (scikit-learn's ``sigmoid_kernel``).

    Not positive semi-definite in general: it is not a Mercer kernel
    (:func:`kpca_lib.mercer.check_mercer` finds counter-examples).

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional
    gamma : float, optional
        Factor of ``xᵀy``, > 0 (default 1; scikit-learn's default is ``1/n_features``).
    coef0 : float, default=1.0

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)
    """
    spec = make_kernel("sigmoid", gamma=gamma, coef0=coef0)
    return evaluate(spec, *_pair(X, Y))


def cosine_kernel(X: ArrayLike, Y: ArrayLike | None = None) -> NDArray[np.float64]:
    """Cosine kernel ``k(x, y) = xᵀy / (‖x‖ ‖y‖)`` (scikit-learn's ``cosine_similarity``).

    A zero row has no direction: its kernel values are 0 (scikit-learn
    normalises it to the zero vector), so even ``k(0, 0) = 0``.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)
    """
    return evaluate(make_kernel("cosine"), *_pair(X, Y))


def squared_distances(X: ArrayLike, Y: ArrayLike | None = None) -> NDArray[np.float64]:
    """Squared Euclidean distances ``‖x_i − y_j‖²``, accurate to ``1e-10`` relative.

    Both sets are shifted by the mean of ``Y`` (of ``X`` when ``Y`` is
    omitted), ``‖x‖² + ‖y‖² − 2xᵀy`` is one matrix product, and entries that
    cancellation could make less accurate than ``1e-10`` relative (close
    pairs far from the mean) are recomputed as ``‖x − y‖²`` directly. When
    ``Y`` is omitted the result is exactly symmetric with a zero diagonal.
    """
    X, Y = _pair(X, Y)
    same = Y is None
    ref = X if same else Y
    ev = KernelEvaluator(KernelSpec("rbf", gamma=1.0), ref)
    side = ev.side(X)
    D = np.matmul(side.left, ev.right.T)
    bound = (ev.d + 2) * _EPS * (side.sq[:, None] + ev.sq[None, :])
    ev._recompute(D, side, slice(0, X.shape[0]), slice(0, ref.shape[0]), bound > _DISTANCE_RTOL * D)
    np.maximum(D, 0.0, out=D)
    if same:
        symmetrize_inplace(D)
        np.fill_diagonal(D, 0.0)
    return D


def rbf_kernel(
    X: ArrayLike,
    Y: ArrayLike | None = None,
    sigma: float | None = None,
    *,
    gamma: float | None = None,
) -> NDArray[np.float64]:
    """Gaussian (RBF) kernel ``k(x, y) = exp(−‖x − y‖² / (2σ²))``.

    This is scikit-learn's ``rbf_kernel`` with ``gamma = 1 / (2 sigma**2)``,
    computed without cancellation for data far from the origin.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional
    sigma : float, optional
        Bandwidth σ > 0 (default 1).
    gamma : float, optional
        ``1/(2σ²)`` instead of ``sigma`` (not both).

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)
    """
    spec = make_kernel("rbf", sigma=sigma, gamma=gamma)
    return evaluate(spec, *_pair(X, Y))


def kernel_matrix(
    k: Callable[[NDArray, NDArray], float], X: ArrayLike, Y: ArrayLike | None = None
) -> NDArray[np.float64]:
    """Evaluate any Python function ``k(x, y) -> float`` on all pairs of rows.

    Every pair is evaluated, including both ``k(x_i, x_j)`` and ``k(x_j, x_i)``,
    so an asymmetric function gives an asymmetric matrix (which
    :func:`kpca_lib.mercer.check_mercer` then reports).

    Parameters
    ----------
    k : callable
        A function of two 1-D arrays returning a real number.
    X : array-like of shape (n_samples_X, n_features)
    Y : array-like of shape (n_samples_Y, n_features), optional

    Returns
    -------
    ndarray of shape (n_samples_X, n_samples_Y)

    Raises
    ------
    ValueError
        If ``k`` is not callable, or returns something that is not a finite real number.
    """
    if not callable(k):
        raise ValueError(f"k must be a function k(x, y) -> float; got {type(k).__name__}.")
    X, Y = _pair(X, Y)
    Y = X if Y is None else Y
    K = np.empty((X.shape[0], Y.shape[0]), dtype=np.float64)
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            value = k(x, y)
            try:
                value = float(np.asarray(value, dtype=np.float64).item())
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"the kernel function must return one real number; for pair ({i}, {j}) "
                    f"it returned {value!r}."
                ) from exc
            if not np.isfinite(value):
                raise ValueError(
                    f"the kernel function returned {value} for pair ({i}, {j}); "
                    "a kernel must return finite numbers."
                )
            K[i, j] = value
    return K


def get_kernel(
    kernel: str | Callable[[NDArray, NDArray], float],
    *,
    sigma: float | None = None,
    gamma: float | None = None,
    degree: int = 2,
    coef0: float = 1.0,
) -> Callable[[ArrayLike, ArrayLike | None], NDArray[np.float64]]:
    """Return a function ``(X, Y=None) -> K`` for a kernel name or a pairwise callable.

    Parameters
    ----------
    kernel : {"linear", "poly", "rbf", "sigmoid", "cosine"} or callable
        A kernel name, or a function ``k(x, y) -> float`` on two samples.
    sigma, gamma, degree, coef0
        Parameters of the named kernels (validated here; see :func:`make_kernel`).

    Returns
    -------
    callable
        ``f(X, Y=None)`` returning the kernel matrix.
    """
    return KernelFunction(make_kernel(kernel, sigma=sigma, gamma=gamma, degree=degree, coef0=coef0))


class KernelFunction:
    """A picklable ``f(X, Y=None) -> K`` for a :class:`KernelSpec` (validates its inputs).

    Parameters
    ----------
    spec : KernelSpec
        A named or callable kernel.
    """

    def __init__(self, spec: KernelSpec) -> None:
        self.spec = spec

    def __call__(self, X: ArrayLike, Y: ArrayLike | None = None) -> NDArray[np.float64]:
        return evaluate(self.spec, *_pair(X, Y))

    def __repr__(self) -> str:
        return f"KernelFunction({self.spec!r})"


def kernel_block_function(
    kernel: str,
    X: NDArray[np.float64],
    *,
    sigma: float | None = None,
    gamma: float | None = None,
    degree: int = 2,
    coef0: float = 1.0,
) -> Callable[..., NDArray[np.float64]]:
    """Return ``block(rows, cols, out=None) -> K[rows, cols]`` for the kernel matrix of ``X``.

    A thin wrapper over :class:`KernelEvaluator` (the one implementation):
    each block is a single BLAS product followed by in-place element-wise
    operations, so ``K`` can be built block by block, in parallel threads,
    without n×n temporaries. Diagonal blocks (``rows == cols``) are exactly
    symmetric, and the RBF diagonal is exactly 1.

    Parameters
    ----------
    kernel : {"linear", "poly", "rbf", "sigmoid", "cosine"}
    X : ndarray of shape (n_samples, n_features)
        Validated float64 training data.
    sigma, gamma, degree, coef0
        Kernel parameters (see :func:`make_kernel`).

    Returns
    -------
    callable
        ``block(rows, cols, out=None)`` with two slices of ``range(n_samples)``.
    """
    spec = make_kernel(kernel, sigma=sigma, gamma=gamma, degree=degree, coef0=coef0)
    if not spec.is_named:
        raise ValueError(f"kernel must be one of {', '.join(map(repr, KERNELS))}; got {kernel!r}.")
    return evaluator_blocks(KernelEvaluator(spec, X), X)


def evaluator_blocks(
    evaluator: KernelEvaluator, X: NDArray[np.float64]
) -> Callable[..., NDArray[np.float64]]:
    """``block(rows, cols, out=None)`` of the square matrix ``k(X, X)`` of a fitted evaluator."""
    side = evaluator.side(X)

    def block(
        rows: slice, cols: slice, out: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        return evaluator.block(side, rows, cols, out, diagonal=rows == cols)

    return block
