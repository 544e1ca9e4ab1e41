"""Input validation shared by every public function.

Every check raises ``ValueError`` with a message that names the parameter,
what was received, and what is allowed, so that a student sees how to fix it.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "InputTypeError",
    "check_array",
    "check_degree",
    "check_n_components",
    "check_positive",
    "check_square",
    "check_finite_scalar",
]


class InputTypeError(ValueError, TypeError):
    """Data whose entries are not numbers (a ``ValueError``, and a ``TypeError`` as in NumPy)."""


def check_array(X: ArrayLike, name: str = "X", *, ensure_2d: bool = True) -> NDArray[np.float64]:
    """Return ``X`` as a finite float64 array of shape ``(n_samples, n_features)``.

    Parameters
    ----------
    X : array-like
        The data to validate.
    name : str, default="X"
        Name used in error messages.
    ensure_2d : bool, default=True
        Require exactly two dimensions.

    Returns
    -------
    ndarray of float64
        The validated array (a copy only when a conversion was needed).

    Raises
    ------
    ValueError
        If ``X`` is not numeric, has the wrong number of dimensions, is empty,
        or contains NaN or infinity.
    """
    if scipy.sparse.issparse(X):
        raise ValueError(
            f"{name} is a sparse matrix: sparse input is not supported; "
            f"pass a dense array, e.g. {name}.toarray()."
        )
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} could not be converted to a numeric array: {exc}") from exc
    if np.iscomplexobj(arr):
        raise ValueError(
            f"Complex data not supported: {name} has complex values; only real numbers are allowed."
        )
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InputTypeError(
                f"{name} must contain real numbers; got an array of dtype {arr.dtype} "
                f"whose entries cannot be converted ({exc})."
            ) from exc
    arr = np.asarray(arr, dtype=np.float64)
    if ensure_2d and arr.ndim != 2:
        hint = ""
        if arr.ndim == 1:
            hint = (
                " Use X.reshape(-1, 1) for a single feature or X.reshape(1, -1) "
                "for a single sample."
            )
        raise ValueError(
            f"{name} must be 2-D with shape (n_samples, n_features); "
            f"got {arr.ndim}-D with shape {arr.shape}. Reshape your data.{hint}"
        )
    if arr.size == 0:
        n_samples, n_features = (arr.shape + (0, 0))[:2]
        what = (
            f"0 feature(s) (shape={arr.shape}) while a minimum of 1 is required"
            if n_samples
            else f"0 sample(s) (shape={arr.shape}) while a minimum of 1 is required"
        )
        raise ValueError(
            f"{name} is empty: found array with {what}; at least one sample and one "
            "feature are needed."
        )
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains NaN or infinity (first at index {tuple(int(i) for i in bad)}); "
            "remove or impute those values before calling this function."
        )
    return arr


def check_square(K: ArrayLike, name: str = "K") -> NDArray[np.float64]:
    """Return ``K`` as a finite float64 square matrix, or raise ``ValueError``."""
    K = check_array(K, name)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) kernel matrix; got shape {K.shape}.")
    return K


def check_finite_scalar(value: object, name: str) -> float:
    """Return ``value`` as a finite float, or raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number; got {value!r}.")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}.")
    return value


def check_positive(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a finite number > 0, else raise ``ValueError``."""
    value = check_finite_scalar(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0; got {value!r}.")
    return value


def check_degree(degree: object, name: str = "degree") -> int:
    """Return ``degree`` as an int if it is a positive integer, else raise ``ValueError``.

    Integral floats such as ``3.0`` are accepted; booleans are not.
    """
    if isinstance(degree, bool) or not isinstance(degree, numbers.Real):
        raise ValueError(f"{name} must be a positive integer (1, 2, 3, ...); got {degree!r}.")
    if not np.isfinite(float(degree)) or float(degree) != int(degree) or int(degree) < 1:
        raise ValueError(f"{name} must be a positive integer (1, 2, 3, ...); got {degree!r}.")
    return int(degree)


def check_n_components(n_components: object, max_allowed: int, why: str) -> int:
    """Validate ``n_components`` against the largest number the data allows.

    Parameters
    ----------
    n_components : int
        Requested number of components.
    max_allowed : int
        Largest value the data allows.
    why : str
        Explanation of ``max_allowed`` used in the error message,
        e.g. ``"min(n_samples, n_features) = 3"``.

    Returns
    -------
    int
        The validated number of components.
    """
    if (
        isinstance(n_components, bool)
        or not isinstance(n_components, numbers.Integral)
    ):
        raise ValueError(
            f"n_components must be None or an integer between 1 and {max_allowed} "
            f"({why}); got {n_components!r}."
        )
    n_components = int(n_components)
    if n_components < 1 or n_components > max_allowed:
        raise ValueError(
            f"n_components must be between 1 and {max_allowed} ({why}); got {n_components}."
        )
    return n_components


def check_n_features(X: NDArray, n_features_in: int, estimator: str) -> None:
    """Raise ``ValueError`` when ``X`` has a different number of features than at fit time."""
    if X.shape[1] != n_features_in:
        raise ValueError(
            f"X has {X.shape[1]} features, but {estimator} is expecting {n_features_in} "
            "features as input (as in fit); pass data with the same columns as in fit."
        )
