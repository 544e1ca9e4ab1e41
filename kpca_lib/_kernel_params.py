"""The kernel parameters of the kernel PCA estimators, resolved into a :class:`KernelSpec`.

:class:`~kpca_lib.kernel_pca.KernelPCA` and
:class:`~kpca_lib.approximate_kernel_pca.ApproximateKernelPCA` take the same kernel
parameters with the same meaning (``kernel``, ``sigma``, ``gamma``, ``degree``,
``coef0``, ``kernel_params``, scikit-learn's defaults); this one function resolves and
checks them for both.
"""

from __future__ import annotations

import functools
import inspect
from numbers import Real
from typing import Any

from sklearn.utils._param_validation import Interval, StrOptions

from .kernels import KERNELS, KernelSpec, make_kernel

__all__ = ["estimator_kernel_spec", "KERNEL_CONSTRAINTS"]

#: scikit-learn's parameter constraints of the kernel parameters (checked by
#: ``BaseEstimator._validate_params`` before any work, with scikit-learn's messages).
#: Stricter than scikit-learn's on purpose: ``gamma`` and ``sigma`` must be > 0 (a zero
#: bandwidth is a constant kernel, nothing to analyse); ``make_kernel`` then checks
#: what overflows and the polynomial degree (an integer >= 1).
KERNEL_CONSTRAINTS: dict = {
    "kernel": [StrOptions({*KERNELS, "precomputed"}), callable],
    "sigma": [Interval(Real, 0, None, closed="neither"), None],
    "gamma": [Interval(Real, 0, None, closed="neither"), None],
    "degree": [Interval(Real, 0, None, closed="left")],
    "coef0": [Interval(Real, None, None, closed="neither")],
    "kernel_params": [dict, None],
}


def estimator_kernel_spec(estimator: Any, n_features: int) -> KernelSpec:
    """The :class:`KernelSpec` of ``estimator``'s kernel parameters.

    Parameters
    ----------
    estimator : KernelPCA or ApproximateKernelPCA
        Reads ``kernel``, ``kernel_params``, ``sigma``, ``gamma``, ``degree`` and ``coef0``.
    n_features : int
        Number of input features: ``gamma=None`` (and no ``sigma``) is ``1/n_features``,
        as in scikit-learn.

    Raises
    ------
    ValueError
        For a non-empty ``kernel_params`` with a named kernel (which would ignore it), ``sigma`` with a kernel other than ``"rbf"``, and every invalid
        kernel parameter (:func:`~kpca_lib.kernels.make_kernel`).
    """
    kernel = estimator.kernel
    params = estimator.kernel_params  # None or a dict (KERNEL_CONSTRAINTS)
    if params and not callable(kernel):
        raise ValueError(
            f"kernel_params={params!r} are keyword arguments of a callable kernel, but "
            f"kernel={kernel!r} is a named kernel, which would ignore them (scikit-learn "
            "does, silently). Pass its parameters as gamma=, degree=, coef0= (or sigma= "
            "for 'rbf'), or drop kernel_params."
        )
    if params and callable(kernel):
        kernel = functools.partial(kernel, **params)
    spec = make_kernel(
        kernel,
        sigma=estimator.sigma,
        gamma=estimator.gamma,
        degree=estimator.degree,
        coef0=estimator.coef0,
        allow_precomputed=True,
        n_features=n_features,
    )
    if estimator.sigma is not None and not (
        isinstance(estimator.kernel, str) and estimator.kernel == "rbf"
    ):
        default = _default_kernel(estimator)
        raise ValueError(
            f"sigma={estimator.sigma!r} is the bandwidth of the RBF kernel, but kernel="
            f"{estimator.kernel!r} has none: pass kernel='rbf' with it ({default}), or drop sigma."
        )
    return spec


def _default_kernel(estimator: Any) -> str:
    """``"KernelPCA's default kernel is 'linear', as scikit-learn's"`` (or the estimator's)."""
    cls = type(estimator)
    default = inspect.signature(cls).parameters["kernel"].default
    note = ", as scikit-learn's" if default == "linear" else ""
    return f"{cls.__name__}'s default kernel is {default!r}{note}"
