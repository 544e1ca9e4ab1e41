"""The few Array API helpers the exact pipeline needs, for NumPy and every other namespace.

The solvers (:mod:`kpca_lib._eigen`, :mod:`kpca_lib._randomized`) and the
verification (:mod:`kpca_lib._verify`) are written once against the Array API:
``xp = namespace(U)`` at the top, then only ``xp.*`` calls. For NumPy arrays
``namespace`` returns :mod:`numpy` itself (NumPy 2 implements the standard), so
the CPU path runs exactly the NumPy calls it always did; for a PyTorch tensor,
a CuPy array or an ``array_api_strict`` array it returns the
``array_api_compat`` namespace, and every array stays on its device. Only
``k``-sized scalars and vectors (eigenvalues, residual norms) come back to the
host, as float64 NumPy arrays, to decide what to do next.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
from sklearn.externals.array_api_compat import array_namespace

__all__ = ["namespace", "to_host", "from_host", "device", "random_block"]


def namespace(*arrays: Any) -> ModuleType:
    """``numpy`` for NumPy arrays, else the arrays' ``array_api_compat`` namespace."""
    if all(isinstance(a, np.ndarray) for a in arrays):
        return np
    return array_namespace(*arrays)


def device(x: Any) -> Any:
    """The device of ``x`` (``"cpu"`` for NumPy)."""
    return getattr(x, "device", "cpu")


def to_host(x: Any) -> np.ndarray:
    """A (small) array of any namespace as a float64 NumPy array on the host."""
    if isinstance(x, np.ndarray):
        return np.asarray(x, dtype=np.float64)
    from sklearn.utils._array_api import _convert_to_numpy

    return np.asarray(_convert_to_numpy(x, array_namespace(x)), dtype=np.float64)


def from_host(a: np.ndarray, like: Any, dtype: Any = None) -> Any:
    """The NumPy array ``a`` in the namespace and on the device of ``like`` (``like``'s dtype)."""
    if isinstance(like, np.ndarray):
        return np.asarray(a, dtype=like.dtype if dtype is None else dtype)
    xp = array_namespace(like)
    return xp.asarray(
        np.ascontiguousarray(a), dtype=like.dtype if dtype is None else dtype, device=device(like)
    )


def random_block(rng: np.random.Generator, n: int, b: int, like: Any) -> Any:
    """An ``n×b`` standard normal block drawn on the host by ``rng``, in ``like``'s namespace.

    Drawn on the host so that a seed gives the same numbers on every namespace and device.
    """
    return from_host(rng.standard_normal((n, b)), like)


def hstack(xp: ModuleType, arrays: list[Any]) -> Any:
    """Columns side by side (``np.hstack`` for NumPy, ``xp.concat(axis=1)`` otherwise)."""
    return np.hstack(arrays) if xp is np else xp.concat(arrays, axis=1)


def T(xp: ModuleType, A: Any) -> Any:
    """The transpose of a matrix."""
    return A.T if xp is np else xp.matrix_transpose(A)


def column_norms(xp: ModuleType, R: Any) -> Any:
    """Euclidean norm of every column, without an ``R*R`` temporary on NumPy."""
    if xp is np:
        return np.sqrt(np.einsum("ij,ij->j", R, R))
    return xp.sqrt(xp.sum(R * R, axis=0))


def take_columns(xp: ModuleType, A: Any, idx: np.ndarray) -> Any:
    """``A[:, idx]`` for host indices ``idx``, in any namespace."""
    if xp is np:
        return A[:, idx]
    return xp.take(A, xp.asarray(np.ascontiguousarray(idx, dtype=np.int64), device=device(A)),
                   axis=1)


def column_signs(xp: ModuleType, V: Any) -> Any:
    """The sign of the largest-magnitude entry of every column (1 for a zero column), in ``V``'s
    namespace: scikit-learn's ``svd_flip(u, None)`` convention."""
    if xp is np:
        signs = np.sign(V[np.argmax(np.abs(V), axis=0), np.arange(V.shape[1])])
        signs[signs == 0] = 1.0
        return signs
    picked = xp.linalg.diagonal(xp.take(V, xp.argmax(xp.abs(V), axis=0), axis=0))
    return xp.where(picked < 0, -xp.ones_like(picked), xp.ones_like(picked))
