"""Approximate kernel PCA: an explicit feature map, then centred linear PCA of the features.

The computing half of :class:`kpca_lib.approximate_kernel_pca.ApproximateKernelPCA`
(``method="nystroem"`` or ``"rff"``; also behind ``KernelPCA``'s deprecated
``approximation=``), as two pure functions over the feature maps and the chunked
feature PCA of :mod:`kpca_lib.approximation`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ._exact import warn_nothing_to_project
from ._validation import check_n_components
from .approximation import (
    APPROXIMATIONS,
    FeaturePCAResult,
    NystroemFeatures,
    RandomFourierFeatures,
    check_n_features_out,
    feature_pca,
    project_features,
)
from .kernels import KernelSpec

__all__ = ["ApproximateResult", "check_approximation", "fit_approximate", "transform_approximate"]


@dataclass
class ApproximateResult:
    """A fitted approximate kernel PCA.

    Attributes
    ----------
    feature_map : RandomFourierFeatures or NystroemFeatures
        The fitted map ``Φ``.
    pca : FeaturePCAResult
        Eigenvalues (``n ×`` the feature covariance's), unit components (rows)
        and the training feature mean.
    n_threads : int
        Threads used for the feature chunks (1 for a Python callable kernel).
    """

    feature_map: RandomFourierFeatures | NystroemFeatures
    pca: FeaturePCAResult
    n_threads: int

    @property
    def eigenvalues(self) -> NDArray[np.float64]:
        return self.pca.eigenvalues


def check_approximation(
    approximation: object, spec: KernelSpec, *, param: str = "approximation"
) -> str | None:
    """Validate the approximation method against the kernel.

    ``param`` is the parameter's name in the messages: ``"approximation"``
    (``KernelPCA``'s deprecated parameter, where ``None`` means exact) or
    ``"method"`` (``ApproximateKernelPCA``'s, where ``None`` is refused).
    """
    exact = param == "approximation"
    if approximation is None and exact:
        return None
    if not isinstance(approximation, str) or approximation not in APPROXIMATIONS:
        choices = ", ".join(repr(a) for a in APPROXIMATIONS)
        raise ValueError(
            f"{param} must be {'None, ' if exact else 'one of '}{choices}; got {approximation!r}."
        )
    if approximation == "rff" and spec.name != "rbf":
        raise ValueError(
            f"{param}='rff' (random Fourier features) exists for kernel='rbf' only; "
            f"got kernel={spec.name!r}. Use {param}='nystroem' for other kernels."
        )
    if spec.name == "precomputed":
        fix = "approximation=None" if exact else "kpca_lib.KernelPCA(kernel='precomputed')"
        raise ValueError(
            f"kernel='precomputed' cannot be approximated: the features need the kernel function. "
            f"Use {fix}."
        )
    return approximation


def fit_approximate(
    spec: KernelSpec,
    X: NDArray[np.float64],
    n_components: int | None,
    *,
    approximation: str,
    n_features: int,
    random_state: int | np.random.Generator | None,
    n_threads: int,
    remove_zero_eig: bool = False,
) -> ApproximateResult:
    """Fit the feature map on ``X`` and the centred PCA of its features.

    ``n_components=None`` keeps every component with a non-zero eigenvalue
    (at most ``min(n_samples, n_features)``); eigenvalues below ``1e-12`` of
    the largest are rounding and set to 0 (dropped with ``remove_zero_eig``).
    """
    n = X.shape[0]
    J = check_n_features_out(n_features, n if approximation == "nystroem" else None)
    k = components_to_keep(n_components, n, J)
    feature_map = make_feature_map(spec, approximation, J, random_state)
    feature_map.fit(X)
    threads = 1 if spec.name == "callable" else n_threads
    result = feature_pca(feature_map._features, X, k, n_threads=threads)
    return ApproximateResult(
        feature_map,
        drop_zero_components(result, n_components, remove_zero=remove_zero_eig),
        threads,
    )


def components_to_keep(n_components: int | None, n: int, J: int) -> int:
    """The number ``k`` of components to compute: ``n_components``, checked, or ``min(n, J)``."""
    max_k = min(n, J)
    if n_components is not None:
        return check_n_components(n_components, max_k, f"min(n_samples, n_features) = {max_k}")
    return max_k


def make_feature_map(
    spec: KernelSpec, approximation: str, J: int, random_state: int | np.random.Generator | None
) -> RandomFourierFeatures | NystroemFeatures:
    """The unfitted feature map of ``approximation`` with ``J`` features for the kernel ``spec``."""
    if approximation == "rff":
        return RandomFourierFeatures(J, gamma=spec.gamma, random_state=random_state)
    kernel = spec.function if spec.name == "callable" else spec.name
    return NystroemFeatures(
        J,
        kernel=kernel,
        gamma=spec.gamma,
        degree=spec.degree,
        coef0=spec.coef0,
        random_state=random_state,
    )


def drop_zero_components(
    result: FeaturePCAResult, n_components: int | None, *, remove_zero: bool = False
) -> FeaturePCAResult:
    """Eigenvalues below ``1e-12`` of the largest are rounding: set to 0, or dropped when
    ``n_components`` is ``None`` (every non-zero component) or ``remove_zero`` (scikit-learn's
    ``remove_zero_eig=True``)."""
    eigenvalues = result.eigenvalues
    keep = eigenvalues > 1e-12 * max(float(eigenvalues.max()), 0.0)
    drop = n_components is None or remove_zero
    if not np.any(keep):
        warn_nothing_to_project(
            "the centred features are zero: every sample is the same point in feature space",
            drop,
            n_components,
        )
    if drop:
        result.eigenvalues, result.components = eigenvalues[keep], result.components[keep]
    else:
        result.eigenvalues = np.where(keep, eigenvalues, 0.0)
    return result


def transform_approximate(result: ApproximateResult, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(Φ(X) − feature_mean) @ componentsᵀ``, chunk by chunk."""
    return project_features(result.feature_map._project, X, result.pca, n_threads=result.n_threads)
