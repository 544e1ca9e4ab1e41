"""scikit-learn's own estimator checks: our estimators behave like scikit-learn's."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_lib import PCA, KernelPCA


@parametrize_with_checks(
    [
        PCA(),
        PCA(2, solver="gram"),
        KernelPCA(2),
        KernelPCA(kernel="poly", degree=3),
        KernelPCA(2, kernel="cosine"),
        KernelPCA(2, kernel="sigmoid", gamma=0.01),
        KernelPCA(2, gamma=0.1, fit_inverse_transform=True, alpha=0.1),
        KernelPCA(2, kernel="rbf", eigen_solver="lanczos", kernel_dtype="float32", n_jobs=1),
    ]
)
@pytest.mark.filterwarnings("ignore::kpca_lib.kernel_pca.NonPSDKernelWarning")
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
