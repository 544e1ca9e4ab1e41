import numpy as np
import pytest
from sklearn.utils import Bunch

from kpca_lib import datasets


def test_circle_exact_and_angles():
    X, theta = datasets.make_circle(100, center=(2.0, -1.0), radius=3.0, random_state=0, return_angles=True)
    assert X.shape == (100, 2)
    np.testing.assert_allclose((X[:, 0] - 2) ** 2 + (X[:, 1] + 1) ** 2, 9.0)
    np.testing.assert_allclose(X, np.column_stack([2 + 3 * np.cos(theta), -1 + 3 * np.sin(theta)]))
    np.testing.assert_array_equal(X, datasets.make_circle(100, (2.0, -1.0), 3.0, random_state=0))


def test_circle_noise():
    X = datasets.make_circle(500, radius=1.0, noise=0.1, random_state=1)
    r = np.linalg.norm(X, axis=1)
    assert 0.05 < r.std() < 0.2


@pytest.mark.parametrize(
    "kwargs, match",
    [({"n": 0}, "n"), ({"radius": 0}, "radius"), ({"noise": -1}, "noise"), ({"center": (1,)}, "center")],
)
def test_circle_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        datasets.make_circle(**kwargs)


def test_moons():
    X, y = datasets.make_moons(50, noise=0.1, random_state=0)
    assert X.shape == (50, 2) and set(y) == {0, 1}
    with pytest.raises(ValueError, match="n_samples"):
        datasets.make_moons(0)


def test_load_faces_offline():
    faces = datasets.load_faces()
    assert faces.images.shape == (200, 25, 25)
    assert faces.data.shape == (200, 625)
    np.testing.assert_array_equal(faces.data[7], faces.images[7].ravel())
    assert faces.target[:100].sum() == 100 and faces.target[100:].sum() == 0
    assert 0.0 <= faces.data.min() and faces.data.max() <= 1.0


@pytest.mark.parametrize("loader, fetcher", [
    ("load_olivetti_faces", "fetch_olivetti_faces"),
    ("load_lfw_people", "fetch_lfw_people"),
])
def test_online_loaders(monkeypatch, loader, fetcher):
    import sklearn.datasets

    fake = Bunch(images=np.zeros((2, 4, 4)), data=np.zeros((2, 16)), target=np.array([0, 1]))
    monkeypatch.setattr(sklearn.datasets, fetcher, lambda **kw: fake)
    assert getattr(datasets, loader)() is fake

    def offline(**kw):
        raise OSError("<urlopen error [Errno -3] Temporary failure in name resolution>")

    monkeypatch.setattr(sklearn.datasets, fetcher, offline)
    with pytest.raises(datasets.DatasetUnavailableError, match="load_faces"):
        getattr(datasets, loader)()
