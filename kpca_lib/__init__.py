"""kpca_lib: the library of the Kernel PCA course.

Arrays are ``(n_samples, n_features)`` as in scikit-learn; the lectures'
``X ∈ R^{d×n}`` is our ``X.T``.

Submodules and the estimators are imported on first use, so ``import kpca_lib``
stays cheap (it matters when a grader starts one kernel per submission).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "PCA",
    "ApproximateKernelPCA",
    "KernelPCA",
    "analysis",
    "approximation",
    "centering",
    "datasets",
    "features",
    "kernels",
    "mercer",
    "novelty",
    "plotting",
    "preimage",
    "selection",
    "timing",
    "widgets",
]
__version__ = "0.1.0"

_ESTIMATORS = {
    "PCA": "pca",
    "KernelPCA": "kernel_pca",
    "ApproximateKernelPCA": "approximate_kernel_pca",
}
_SUBMODULES = {
    "analysis", "approximation", "centering", "datasets", "features", "kernels", "mercer",
    "novelty", "plotting", "preimage", "selection", "timing", "widgets",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from . import (
        analysis,
        approximation,
        centering,
        datasets,
        features,
        kernels,
        mercer,
        novelty,
        plotting,
        preimage,
        selection,
        timing,
        widgets,
    )
    from .approximate_kernel_pca import ApproximateKernelPCA
    from .kernel_pca import KernelPCA
    from .pca import PCA


def __getattr__(name: str) -> Any:
    if name in _ESTIMATORS:
        module = importlib.import_module(f".{_ESTIMATORS[name]}", __name__)
        return getattr(module, name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'kpca_lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
