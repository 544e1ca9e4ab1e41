"""Datasets of the course: a circle, two moons and faces (offline and online)."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.utils import Bunch

from ._validation import check_finite_scalar, check_positive

__all__ = [
    "make_circle",
    "make_moons",
    "load_faces",
    "load_olivetti_faces",
    "load_lfw_people",
    "DatasetUnavailableError",
]


class DatasetUnavailableError(RuntimeError):
    """An online dataset could not be downloaded (no internet, or the server failed)."""


def _check_n(n: object, name: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1:
        raise ValueError(f"{name} must be a positive integer; got {n!r}.")
    return int(n)


def make_circle(
    n: int = 200,
    center: tuple[float, float] = (0.0, 0.0),
    radius: float = 1.0,
    noise: float = 0.0,
    random_state: int | np.random.Generator | None = None,
    *,
    return_angles: bool = False,
) -> NDArray[np.float64] | tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Points on the circle ``(f1 − a)² + (f2 − b)² = r²`` of the lectures.

    Parameters
    ----------
    n : int, default=200
        Number of points.
    center : (float, float), default=(0, 0)
        The centre ``(a, b)``.
    radius : float, default=1.0
        The radius ``r > 0``.
    noise : float, default=0.0
        Standard deviation of Gaussian noise added to both coordinates; with 0
        every point lies exactly on the circle (up to rounding).
    random_state : int, Generator or None
        Seed for the angles and the noise.
    return_angles : bool, default=False
        Also return the angle θ of every point: the single number that
        describes it, although PCA needs two directions.

    Returns
    -------
    X : ndarray of shape (n, 2)
    angles : ndarray of shape (n,), only if ``return_angles``
    """
    n = _check_n(n)
    radius = check_positive(radius, "radius")
    noise = check_finite_scalar(noise, "noise")
    if noise < 0:
        raise ValueError(f"noise must be >= 0; got {noise}.")
    try:
        a, b = (check_finite_scalar(c, "center") for c in center)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"center must be two finite numbers (a, b); got {center!r}.") from exc
    rng = np.random.default_rng(random_state)
    angles = rng.uniform(0.0, 2.0 * np.pi, size=n)
    X = np.column_stack([a + radius * np.cos(angles), b + radius * np.sin(angles)])
    if noise > 0:
        X += rng.normal(scale=noise, size=X.shape)
    return (X, angles) if return_angles else X


def make_moons(
    n_samples: int = 200,
    noise: float = 0.05,
    random_state: int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Two interleaving half circles (scikit-learn's ``make_moons``).

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,)
        The moon (0 or 1) of each point.
    """
    from sklearn.datasets import make_moons as _make_moons

    n_samples = _check_n(n_samples, "n_samples")
    noise = check_finite_scalar(noise, "noise")
    if noise < 0:
        raise ValueError(f"noise must be >= 0; got {noise}.")
    X, y = _make_moons(n_samples=n_samples, noise=noise, random_state=random_state)
    return X, y.astype(np.int64)


def load_faces() -> Bunch:
    """The LFW subset shipped inside scikit-image: works offline.

    200 grey images of 25×25 pixels in [0, 1]: the first 100 are faces from
    Labeled Faces in the Wild, the last 100 are non-face crops of the same photos.

    Returns
    -------
    Bunch
        ``images`` (200, 25, 25), ``data`` (200, 625), ``target`` (200,) with
        1 for a face and 0 for a non-face, ``target_names`` and ``DESCR``.
    """
    try:
        from skimage.data import lfw_subset
    except ImportError as exc:
        raise ImportError(
            "load_faces needs scikit-image (skimage.data.lfw_subset); install it with "
            "`pip install 'kpca-course[faces]'` or `pip install scikit-image`."
        ) from exc

    images = np.asarray(lfw_subset(), dtype=np.float64)
    n = images.shape[0]
    target = np.zeros(n, dtype=np.int64)
    target[: n // 2] = 1
    return Bunch(
        images=images,
        data=images.reshape(n, -1),
        target=target,
        target_names=np.array(["non-face", "face"]),
        DESCR=(
            "LFW subset from scikit-image (skimage.data.lfw_subset): 100 faces followed by "
            "100 non-faces, 25x25 pixels, grey levels in [0, 1]."
        ),
    )


def _fetch_online(fetch: Callable[..., Any], what: str, **kwargs: Any) -> Bunch:
    try:
        return fetch(**kwargs)
    except (OSError, ValueError, RuntimeError) as exc:  # URLError is an OSError
        raise DatasetUnavailableError(
            f"could not download {what} ({type(exc).__name__}: {exc}). This needs internet "
            "access the first time; offline, use kpca_lib.datasets.load_faces(), which "
            "ships with scikit-image."
        ) from exc


def load_olivetti_faces(data_home: str | None = None) -> Bunch:
    """Olivetti faces (400 images of 64×64, 40 people) via scikit-learn; needs internet once.

    Raises
    ------
    DatasetUnavailableError
        When the download fails (e.g. offline), with a pointer to :func:`load_faces`.
    """
    from sklearn.datasets import fetch_olivetti_faces

    return _fetch_online(fetch_olivetti_faces, "the Olivetti faces", data_home=data_home)


def load_lfw_people(
    min_faces_per_person: int = 70, resize: float = 0.4, data_home: str | None = None
) -> Bunch:
    """Labeled Faces in the Wild via scikit-learn; needs internet once (about 200 MB).

    Raises
    ------
    DatasetUnavailableError
        When the download fails (e.g. offline), with a pointer to :func:`load_faces`.
    """
    from sklearn.datasets import fetch_lfw_people

    return _fetch_online(
        fetch_lfw_people,
        "Labeled Faces in the Wild",
        min_faces_per_person=min_faces_per_person,
        resize=resize,
        data_home=data_home,
    )
