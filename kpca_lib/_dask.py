"""Approximate kernel PCA of Dask arrays: the features are computed where the chunks live.

:class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA` (``method="nystroem"`` or
``"rff"``) accepts a two-dimensional ``dask.array.Array`` (rows = samples) at ``fit`` and
``transform``:

* the feature map is fitted on the client exactly as for a NumPy array of the same
  rows: random Fourier frequencies depend only on ``n_features_in`` and the seed, and
  the Nyström landmark *indices* only on ``n_samples`` and the seed, so only those
  ``J`` rows are computed and brought back (``X[idx]``), never the whole array;
* every chunk of rows becomes one task that computes its features
  (:func:`~kpca_lib.approximation.feature_moments`, at most ``CHUNK_ROWS`` rows of
  features at a time) and returns the shifted feature sum and the J×J ``ΦᵀΦ``;
  the tasks' results are added in a tree on the workers. Memory per worker is
  O(chunk·d + CHUNK_ROWS·J + J²), whatever ``n``;
* the J×J eigenproblem is solved on the client
  (:func:`~kpca_lib.approximation.pca_from_moments`);
* ``transform`` returns a lazy Dask array (``map_blocks``), one block per chunk of rows.

The computation runs on whatever scheduler Dask uses by default: a
``distributed.Client`` when one is active (the cluster's workers), else threads.

Dask is optional: nothing here imports it at module level, and :func:`is_dask_array`
recognises a Dask array by its type's module without importing Dask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._approximate import (
    ApproximateResult,
    components_to_keep,
    drop_zero_components,
    make_feature_map,
)
from ._validation import check_array
from .approximation import (
    CHUNK_ROWS,
    NystroemFeatures,
    RandomFourierFeatures,
    check_n_features_out,
    feature_moments,
    pca_from_moments,
    project_features,
)
from .kernels import KernelSpec

__all__ = ["is_dask_array", "check_dask_array", "fit_approximate_dask", "transform_dask"]

#: Partial moments added per reduction task (a tree of this fan-in).
SPLIT_EVERY = 8


def is_dask_array(X: object) -> bool:
    """Whether ``X`` is a ``dask.array.Array``, decided without importing Dask."""
    cls = type(X)
    return cls.__module__.split(".", 1)[0] == "dask" and cls.__name__ == "Array"


def check_dask_array(X: Any, name: str = "X") -> Any:
    """``X`` as a 2-D float64 Dask array with known chunk sizes and one chunk of columns.

    Finiteness is checked lazily, chunk by chunk, when the tasks run (a ``ValueError``
    then, as :func:`~kpca_lib._validation.check_array` raises for a NumPy array).
    """
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D, of shape (n_samples, n_features); got a {X.ndim}-D Dask array."
        )
    if any(isinstance(s, float) and math.isnan(s) for s in X.shape):
        raise ValueError(
            f"{name} has unknown chunk sizes (shape {X.shape}); call {name}.compute_chunk_sizes() "
            "first: the Nyström landmarks and the mean need the number of rows."
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape}); at least one sample and one feature are needed.")
    if X.dtype.kind == "c":
        raise ValueError(
            f"Complex data not supported: {name} has complex values; only real numbers are allowed."
        )
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold numbers; got a Dask array of dtype {X.dtype}.")
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # every task needs whole rows
    return X


# ----------------------------------------------------------------------------- tasks
def _shift(feature_map: Any, head: NDArray[np.float64]) -> NDArray[np.float64]:
    """Mean features of the first rows: the shift against cancellation, as in feature_pca."""
    return feature_map._features(check_array(head)).mean(axis=0)


def _moments(
    feature_map: Any, block: NDArray[np.float64], shift: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    return feature_moments(feature_map._features, check_array(block), shift, chunk_rows=CHUNK_ROWS)


def _add(*parts: tuple[NDArray[np.float64], NDArray[np.float64]]) -> tuple[NDArray, NDArray]:
    total, gram = parts[0][0].copy(), parts[0][1].copy()
    for s, g in parts[1:]:
        total += s
        gram += g
    return total, gram


def _transform_block(block: NDArray[np.float64], result: ApproximateResult) -> NDArray[np.float64]:
    return project_features(
        result.feature_map._project, check_array(block), result.pca, n_threads=1
    )


# ----------------------------------------------------------------------------- fit / transform
def fit_approximate_dask(
    spec: KernelSpec,
    X: Any,
    n_components: int | None,
    *,
    approximation: str,
    n_features: int,
    random_state: int | np.random.Generator | None,
    remove_zero_eig: bool = False,
) -> ApproximateResult:
    """:func:`~kpca_lib._approximate.fit_approximate` for a Dask array ``X`` (see the module).

    With the same ``random_state`` the feature map is the same as for ``X.compute()``
    and the result equals the in-memory fit up to the order of the floating-point sums.
    """
    import dask

    X = check_dask_array(X)
    n, d = (int(s) for s in X.shape)
    J = check_n_features_out(n_features, n if approximation == "nystroem" else None)
    k = components_to_keep(n_components, n, J)
    feature_map = make_feature_map(spec, approximation, J, random_state)
    if isinstance(feature_map, RandomFourierFeatures):
        feature_map._draw(d)
    else:
        assert isinstance(feature_map, NystroemFeatures)
        idx = feature_map._landmark_indices(n)
        landmarks = check_array(np.asarray(X[idx].compute()))  # J rows come back, nothing more
        feature_map._fit_landmarks(landmarks, idx)

    mapped = dask.delayed(feature_map, pure=True)  # one copy in the graph, shared by the tasks
    shift = dask.delayed(_shift, pure=True)(mapped, X[: min(n, CHUNK_ROWS)])
    parts = [dask.delayed(_moments, pure=True)(mapped, block, shift)
             for block in X.to_delayed().ravel()]
    while len(parts) > 1:  # a tree of additions on the workers
        parts = [dask.delayed(_add, pure=True)(*parts[i : i + SPLIT_EVERY]) if
                 len(parts[i : i + SPLIT_EVERY]) > 1 else parts[i]
                 for i in range(0, len(parts), SPLIT_EVERY)]
    (total, gram), shift_value = dask.compute(parts[0], shift)
    pca = pca_from_moments(total, gram, n, shift_value, k)
    pca = drop_zero_components(pca, n_components, remove_zero=remove_zero_eig)
    return ApproximateResult(feature_map, pca, 1)


def transform_dask(result: ApproximateResult, X: Any) -> Any:
    """``(Φ(X) − feature_mean) @ componentsᵀ`` as a lazy Dask array, block by block of rows."""
    import dask

    X = check_dask_array(X)
    k = result.pca.components.shape[0]
    shared = dask.delayed(result, pure=True)
    return X.map_blocks(
        _transform_block, shared, dtype=np.float64, chunks=(X.chunks[0], (k,)),
        meta=np.empty((0, 0), dtype=np.float64),
    )
