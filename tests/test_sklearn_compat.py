"""scikit-learn's own estimator checks: our estimators behave like scikit-learn's."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_lib import PCA, KernelPCA


@parametrize_with_checks(
    [
        PCA(),
        PCA(2, solver="gram"),
        KernelPCA(),  # scikit-learn's defaults: linear kernel, every non-zero component
        KernelPCA(2),
        KernelPCA(2, kernel="rbf"),  # gamma = 1/n_features, as scikit-learn
        KernelPCA(kernel="poly", degree=3),
        KernelPCA(2, kernel="cosine"),
        # tanh(γ xᵀy + 1) short of saturation on scikit-learn's data (some checks centre it at
        # 100, so xᵀy ≈ 2e4): with γ = 0.01 the kernel is exactly 1 there, a constant, which
        # KernelPCA rightly reports (zero up to rounding), and those checks test nothing.
        KernelPCA(2, kernel="sigmoid", gamma=1e-4),
        KernelPCA(2, kernel="rbf", gamma=0.1, fit_inverse_transform=True, alpha=0.1),
        KernelPCA(2, kernel="rbf", eigen_solver="lanczos", kernel_dtype="float32", n_jobs=1),
        KernelPCA(2, kernel="rbf", eigen_solver="randomized", random_state=0),
        KernelPCA(3, kernel="rbf", sigma=1.0, remove_zero_eig=True),
    ]
)
@pytest.mark.filterwarnings("ignore::kpca_lib.kernel_pca.NonPSDKernelWarning")
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
