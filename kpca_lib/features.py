"""Explicit polynomial feature maps φ.

The polynomial kernel ``(xᵀy + 1)^p`` is an inner product of explicit
features: expanding with the multinomial theorem over the ``d + 1`` numbers
``(1, x_1, ..., x_d)`` gives one feature per multi-index ``a = (a_0, ..., a_d)``
with ``a_0 + ... + a_d = p``::

    φ_a(x) = sqrt(p! / (a_0! a_1! ... a_d!)) · x_1^{a_1} ··· x_d^{a_d}

so that ``φ(x)ᵀφ(y) = (xᵀy + 1)^p``. For ``d = p = 2`` these are the lectures'
six features ``1, √2 x_1, √2 x_2, x_1², √2 x_1 x_2, x_2²`` (in another order).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_array, check_degree, check_finite_scalar

__all__ = [
    "polynomial_features",
    "n_polynomial_features",
    "n_distinct_products",
    "monomial_exponents",
    "polynomial_feature_names",
]


def _check_d(d: object) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or int(d) < 1:
        raise ValueError(f"d (the number of input features) must be an integer >= 1; got {d!r}.")
    return int(d)


def monomial_exponents(d: int, degree: int) -> list[tuple[int, ...]]:
    """All exponent vectors ``(a_1, ..., a_d)`` with total degree at most ``degree``.

    Ordered by total degree (constant first), then in descending lexicographic
    order, so for ``d = 2, degree = 2``: ``(0,0), (1,0), (0,1), (2,0), (1,1), (0,2)``.

    Parameters
    ----------
    d : int
        Number of input features.
    degree : int
        Largest total degree ``p``.

    Returns
    -------
    list of tuple of int
        ``C(d + degree, degree)`` exponent vectors.
    """
    d = _check_d(d)
    degree = check_degree(degree)
    out: list[tuple[int, ...]] = [(0,) * d]
    for total in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(d), total):
            exps = [0] * d
            for i in combo:
                exps[i] += 1
            out.append(tuple(exps))
    return out


def polynomial_features(
    X: ArrayLike, degree: int, coef0: float = 1.0
) -> NDArray[np.float64]:
    """Explicit feature map φ of the polynomial kernel ``(xᵀy + coef0)^degree``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    degree : int
        The power ``p`` of the kernel.
    coef0 : float, default=1.0
        Constant of the kernel, ``>= 0``; the lectures use 1.

    Returns
    -------
    Phi : ndarray of shape (n_samples, C(n_features + degree, degree))
        ``Phi @ Phi.T`` equals ``polynomial_kernel(X, degree=degree, coef0=coef0)``.
        Columns follow :func:`monomial_exponents`.
    """
    X = check_array(X)
    degree = check_degree(degree)
    coef0 = check_finite_scalar(coef0, "coef0")
    if coef0 < 0:
        raise ValueError(
            f"coef0 must be >= 0 for an explicit real feature map; got {coef0}."
        )
    n, d = X.shape
    exps = monomial_exponents(d, degree)
    fact = math.factorial
    Phi = np.empty((n, len(exps)), dtype=np.float64)
    for col, a in enumerate(exps):
        a0 = degree - sum(a)
        weight = fact(degree) / (fact(a0) * math.prod(fact(ai) for ai in a))
        weight *= coef0**a0
        column = np.full(n, math.sqrt(weight))
        for i, ai in enumerate(a):
            if ai:
                column *= X[:, i] ** ai
        Phi[:, col] = column
    return Phi


def polynomial_feature_names(d: int, degree: int, names: list[str] | None = None) -> list[str]:
    """Readable names of the columns of :func:`polynomial_features`, e.g. ``"x1^2 x2"``."""
    exps = monomial_exponents(d, degree)
    names = names or [f"x{i + 1}" for i in range(d)]
    if len(names) != d:
        raise ValueError(f"names must have {d} entries; got {len(names)}.")
    out = []
    for a in exps:
        parts = [n if e == 1 else f"{n}^{e}" for n, e in zip(names, a, strict=False) if e]
        out.append(" ".join(parts) if parts else "1")
    return out


def n_polynomial_features(d: int, degree: int) -> int:
    """Number of monomials of degree at most ``degree`` in ``d`` variables: ``C(d + degree, degree)``.

    This is the dimension ``D`` of :func:`polynomial_features`, and grows like
    ``d^p / p!`` for fixed ``p``.
    """
    d = _check_d(d)
    degree = check_degree(degree)
    return math.comb(d + degree, degree)


def n_distinct_products(d: int, degree: int) -> int:
    """Number of products of at most ``degree`` *distinct* features: ``Σ_{i=0}^{p} C(d, i)``.

    This is the count written in the lecture slides (``1 + 4 + 6 + 4`` for
    ``d = 4, p = 3``); it leaves out powers such as ``x_1²``.
    """
    d = _check_d(d)
    degree = check_degree(degree)
    return sum(math.comb(d, i) for i in range(degree + 1))
