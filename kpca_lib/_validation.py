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
    "capped_n_components",
    "check_positive",
    "check_nonnegative",
    "check_square",
    "check_finite_scalar",
    "check_n_jobs",
    "check_iterated_power",
    "check_random_state",
    "check_sparse_array",
    "output_dtype",
]

#: Largest accepted polynomial degree (NumPy's integer powers need an int64 exponent).
MAX_DEGREE = 2**31 - 1


class InputTypeError(ValueError, TypeError):
    """Data whose entries are not numbers (a ``ValueError``, and a ``TypeError`` as in NumPy)."""


def detached(X: object) -> object:
    """``X`` without its autograd graph (a PyTorch tensor that requires grad), else ``X``.

    Kernel PCA is not differentiated (its eigensolver and verification are not
    autograd operations), so such a tensor is used by value, as ``X.detach()``:
    NumPy would refuse it (``np.asarray``), and the Array API path would record a
    graph it never uses. Duck-typed: no array library is imported.
    """
    if getattr(X, "requires_grad", False) is True and callable(getattr(X, "detach", None)):
        return X.detach()
    return X


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
    X = detached(X)
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


def capped_n_components(n_components: object, n_samples: int) -> int | None:
    """Exact kernel PCA's ``n_components``: ``None``, or an integer >= 1 capped at ``n_samples``.

    As scikit-learn's ``KernelPCA`` (``min(n_samples, n_components)``): the centred
    kernel matrix has ``n_samples`` eigenpairs, so asking for more gives them all (in
    ``GridSearchCV``, a candidate larger than a training fold still scores).
    """
    if n_components is None:
        return None
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral):
        raise ValueError(
            f"n_components must be None or an integer >= 1 (at most n_samples = {n_samples} "
            f"are computed); got {n_components!r}."
        )
    if int(n_components) < 1:
        raise ValueError(f"n_components must be None or an integer >= 1; got {n_components}.")
    return min(int(n_components), n_samples)


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


def check_nonnegative(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a finite number >= 0, else raise ``ValueError``."""
    value = check_finite_scalar(value, name)
    if value < 0:
        raise ValueError(f"{name} must be >= 0; got {value!r}.")
    return value


def check_degree(degree: object, name: str = "degree") -> int:
    """Return ``degree`` as an int if it is a positive integer, else raise ``ValueError``.

    Integral floats such as ``3.0`` are accepted; booleans are not.
    """
    message = f"{name} must be a positive integer (1, 2, 3, ...); got {degree!r}."
    if isinstance(degree, bool) or not isinstance(degree, numbers.Real):
        raise ValueError(message)
    if not isinstance(degree, numbers.Integral):
        as_float = float(degree)
        if not np.isfinite(as_float) or as_float != int(as_float):
            raise ValueError(message)
    value = int(degree)
    if value < 1:
        raise ValueError(message)
    if value > MAX_DEGREE:
        raise ValueError(
            f"{name}={value} is too large: (gamma·xᵀy + coef0)^{name} over- or underflows for "
            f"every base other than ±1; use {name} <= {MAX_DEGREE} (in practice 1 to 10)."
        )
    return value


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
    if isinstance(n_components, bool) or not isinstance(n_components, numbers.Integral):
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


def check_n_jobs(n_jobs: object) -> int:
    """Resolve ``n_jobs`` (scikit-learn's meaning) to a number of threads.

    ``None`` or ``-1``: every available core; a positive integer: that many
    threads; ``-2``: all cores but one, and so on.
    """
    from ._blocked import available_cores

    if n_jobs is None:
        return available_cores()
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise ValueError(
            f"n_jobs must be None, a positive number of threads, or -1 for every core "
            f"(-2 for all but one, ...); got {n_jobs!r}."
        )
    cores = available_cores()
    return int(n_jobs) if n_jobs > 0 else max(1, cores + 1 + int(n_jobs))


def check_iterated_power(iterated_power: object) -> int | str:
    """``"auto"`` or an integer >= 0 (power iterations of the randomized eigensolver)."""
    if isinstance(iterated_power, str) and iterated_power == "auto":
        return "auto"
    if (
        isinstance(iterated_power, bool)
        or not isinstance(iterated_power, numbers.Integral)
        or iterated_power < 0
    ):
        raise ValueError(
            f"iterated_power must be 'auto' or an integer >= 0; got {iterated_power!r}."
        )
    return int(iterated_power)


def check_random_state(random_state: object) -> object:
    """Return ``random_state`` if NumPy can seed a generator from it, else raise ``ValueError``.

    Allowed: ``None``, an integer ``>= 0``, a ``numpy.random.RandomState``
    (scikit-learn's) or a ``numpy.random.Generator``.
    """
    ok = random_state is None or isinstance(
        random_state, (np.random.RandomState, np.random.Generator)
    )
    if (
        not ok
        and not isinstance(random_state, bool)
        and isinstance(random_state, numbers.Integral)
        and random_state >= 0
    ):
        ok = True
    if not ok:
        raise ValueError(
            "random_state must be None, an integer >= 0, a numpy.random.RandomState or a "
            f"numpy.random.Generator; got {random_state!r}."
        )
    return random_state


def check_sparse_array(X: object, name: str = "X") -> scipy.sparse.csr_matrix:
    """Return the scipy.sparse matrix ``X`` as a finite float64 CSR matrix, or raise ``ValueError``.

    The sparse counterpart of :func:`check_array`: 2-D, at least one sample
    and one feature, real and finite stored values. ``X`` is never densified.
    """
    if not scipy.sparse.issparse(X):
        raise ValueError(f"{name} must be a scipy.sparse matrix; got {type(X).__name__}.")
    if len(X.shape) != 2:
        raise ValueError(
            f"{name} must be 2-D with shape (n_samples, n_features); got shape {X.shape}."
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(
            f"{name} is empty (shape {X.shape}); at least one sample and one feature are needed."
        )
    if np.iscomplexobj(X.data if hasattr(X, "data") else np.zeros(0)):
        raise ValueError(
            f"Complex data not supported: {name} has complex values; only real numbers are allowed."
        )
    try:
        csr = scipy.sparse.csr_matrix(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputTypeError(
            f"{name} must contain real numbers; got a sparse matrix of dtype {X.dtype} ({exc})."
        ) from exc
    if not csr.has_canonical_format:
        csr = csr.copy()  # sum_duplicates works in place: never on the caller's arrays
        csr.sum_duplicates()
    if not np.all(np.isfinite(csr.data)):
        raise ValueError(
            f"{name} contains NaN or infinity among its stored values; remove or impute those "
            "values before calling this function."
        )
    return csr


def output_dtype(*inputs: object) -> np.dtype:
    """The dtype scikit-learn's transformers give their output: float32 only when every input is.

    Computations run in float64 whatever the input; the result is cast back
    to float32 when every array-like in ``inputs`` (data, or the data seen at
    fit) has dtype float32, as ``sklearn.decomposition.KernelPCA`` does.
    """
    for X in inputs:
        dtype = X if isinstance(X, np.dtype) else getattr(X, "dtype", None)
        if dtype is None:
            dtypes = getattr(X, "dtypes", None)  # a pandas DataFrame
            if dtypes is None or len(dtypes) == 0:
                return np.dtype(np.float64)
            if not all(np.dtype(getattr(d, "numpy_dtype", d)) == np.float32 for d in dtypes):
                return np.dtype(np.float64)
            continue
        try:
            if np.dtype(dtype) != np.float32:
                return np.dtype(np.float64)
        except TypeError:
            return np.dtype(np.float64)
    return np.dtype(np.float32)
