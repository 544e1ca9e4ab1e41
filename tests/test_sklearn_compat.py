"""scikit-learn's own estimator checks: our estimators behave like scikit-learn's."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_lib import PCA, KernelPCA


@parametrize_with_checks(
    [PCA(), PCA(2, solver="gram"), KernelPCA(2), KernelPCA(kernel="poly", degree=3)]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
