"""kpca_lib: the library of the Kernel PCA course.

Arrays are ``(n_samples, n_features)`` as in scikit-learn; the lectures'
``X ∈ R^{d×n}`` is our ``X.T``.
"""

from . import centering, datasets, features, kernels, mercer
from .kernel_pca import KernelPCA
from .pca import PCA

__all__ = [
    "PCA",
    "KernelPCA",
    "centering",
    "datasets",
    "features",
    "kernels",
    "mercer",
]
__version__ = "0.1.0"
