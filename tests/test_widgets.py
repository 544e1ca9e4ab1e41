"""Headless tests of every builder in ``kpca_lib.widgets``.

Each test builds an explorer, sets its controls from code exactly as the browser
would (``control.value = ...``), and checks three things: the computed result is
the one the pure functions in ``kpca_lib.analysis`` give for the new values, the
figure's artists and its rendered pixels changed accordingly, and no exception
was raised inside a callback. ipywidgets would otherwise swallow such an
exception into the widget's output; :func:`set_controls` re-raises it, so a
broken callback fails the test instead of passing silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import ipywidgets as w
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from kpca_lib import PCA
from kpca_lib import widgets as kw
from kpca_lib.analysis import (
    first_component_separates,
    kpca_projection,
    reconstruction_errors,
    smallest_r_below,
    threshold_accuracy,
)
from kpca_lib.course.checks import FACE_TARGET, SIGMA_RANGE, homework_faces, homework_moons
from kpca_lib.datasets import load_faces, make_moons

# --------------------------------------------------------------------------- helpers


def set_controls(explorer: kw.Explorer, **values) -> dict:
    """Set controls like a student moving them; re-raise any error from the callbacks."""
    before = explorer.n_updates
    for name, value in values.items():
        explorer.controls[name].value = value
        if explorer.last_error is not None:
            raise explorer.last_error
    assert explorer.n_updates > before, f"setting {values} did not update the explorer"
    return explorer.result


def pixels(figure) -> np.ndarray:
    """The figure rendered by Agg, as an (h, w, 4) array."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def assert_pixels_changed(before: np.ndarray, after: np.ndarray, min_fraction: float = 1e-3):
    assert before.shape == after.shape, "the figure changed size"
    changed = np.any(before != after, axis=-1).mean()
    assert changed >= min_fraction, f"only {changed:.2%} of the pixels changed"


def scatter_points(ax) -> np.ndarray:
    """All points drawn by ``plot_points`` on ``ax`` (one collection per class), stacked."""
    return np.vstack([np.asarray(c.get_offsets()) for c in ax.collections])


def drawn_by_class(ax, y) -> np.ndarray:
    """The scatter points of ``ax`` in the order of the data (``plot_points`` groups by class)."""
    out = np.empty((len(y), 2))
    for cls, collection in zip(np.unique(y), ax.collections, strict=True):
        out[y == cls] = np.asarray(collection.get_offsets())
    return out


def assert_same_up_to_sign(A, B, atol=1e-8):
    A, B = np.asarray(A, float), np.asarray(B, float)
    assert A.shape == B.shape
    for j in range(A.shape[1]):
        s = 1.0 if np.abs(A[:, j] - B[:, j]).max() <= np.abs(A[:, j] + B[:, j]).max() else -1.0
        np.testing.assert_allclose(A[:, j], s * B[:, j], atol=atol, err_msg=f"column {j}")


def no_tags(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


# --------------------------------------------------------------------------- data


@pytest.fixture(scope="module")
def moons():
    return make_moons(100, noise=0.05, random_state=0)


@pytest.fixture(scope="module")
def faces():
    data = load_faces()
    train = data.data[:90]  # faces used to fit the eigenfaces
    pca = PCA(n_components=40).fit(train)
    rng = np.random.default_rng(0)
    images = np.vstack([data.data[95], data.data[150], rng.uniform(0, 1, train.shape[1])])
    return pca, images, ["held-out face", "non-face", "noise"]


# --------------------------------------------------------------------------- Explorer itself


def _toy_explorer(fail_when=None):
    """An Explorer whose compute raises for ``x == fail_when``."""
    slider = w.FloatSlider(value=1.0, min=0.0, max=5.0)

    def compute(x):
        if x == fail_when:
            raise RuntimeError(f"broken callback at x={x}")
        return {"x": x, "message": f"x = {x}"}

    def draw(fig, result, values):
        ax = fig.subplots()
        ax.plot([0, 1], [0, result["x"]])

    return kw.Explorer({"x": slider}, compute, draw)


def test_exception_in_callback_is_kept_shown_and_reraised():
    ex = _toy_explorer(fail_when=3.0)
    assert ex.last_error is None and ex.result == {"x": 1.0, "message": "x = 1.0"}
    ex.controls["x"].value = 3.0  # the observer must not raise into ipywidgets ...
    assert isinstance(ex.last_error, RuntimeError)  # ... but keeps the error
    assert "Error: RuntimeError: broken callback at x=3.0" in ex.status.value
    assert ex.result == {"x": 1.0, "message": "x = 1.0"}, "a failed update must not change result"
    with pytest.raises(RuntimeError, match="broken callback"):
        ex.update()  # update() re-raises
    # and the tests' helper turns it into a failure
    ex.controls["x"].value = 2.0
    assert ex.last_error is None
    with pytest.raises(RuntimeError, match="broken callback"):
        set_controls(ex, x=3.0)
    # recovers on the next good value
    assert set_controls(ex, x=4.0)["x"] == 4.0
    assert ex.last_error is None and ex.status.value == "x = 4.0"


def test_exception_while_building_is_raised():
    with pytest.raises(RuntimeError, match="broken callback"):
        _toy_explorer(fail_when=1.0)


def test_explorer_layout_and_values():
    ex = _toy_explorer()
    assert isinstance(ex, w.VBox)
    controls_box, status, output = ex.children
    assert list(controls_box.children) == list(ex.controls.values())
    assert status is ex.status and output is ex.output
    assert ex.values == {"x": 1.0}
    assert ex.n_updates == 1


# --------------------------------------------------------------------------- sigma_explorer


def test_sigma_explorer_builds(moons):
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    assert set(ex.controls) == {"sigma"}
    slider = ex.controls["sigma"]
    assert isinstance(slider, w.FloatLogSlider)
    assert slider.continuous_update is False, "kernel PCA per slider tick would be sluggish"
    assert (slider.min, slider.max) == pytest.approx((np.log10(0.02), 1.0))
    assert ex.last_error is None and ex.n_updates == 1
    np.testing.assert_allclose(ex.result["Z"], kpca_projection(X, sigma=1.0, n_components=2))
    data_ax, kpca_ax = ex.figure.axes
    assert data_ax.get_title() == "data"
    assert kpca_ax.get_title() == "kernel PCA, RBF σ = 1.000"
    np.testing.assert_allclose(drawn_by_class(data_ax, y), X)
    np.testing.assert_allclose(drawn_by_class(kpca_ax, y), ex.result["Z"])
    assert [t.get_text() for t in kpca_ax.get_legend().get_texts()] == ["class 0", "class 1"]


def test_sigma_slider_changes_result_and_figure(moons):
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    before_pixels, before_Z = pixels(ex.figure), ex.result["Z"]
    assert ex.result["accuracy"] < 1.0  # at σ = 1 the moons are not separated

    result = set_controls(ex, sigma=0.2)

    assert result["sigma"] == 0.2 and ex.n_updates == 2
    Z = kpca_projection(X, kernel="rbf", sigma=0.2, n_components=2)
    np.testing.assert_allclose(result["Z"], Z)
    assert not np.allclose(np.abs(result["Z"]), np.abs(before_Z))
    assert result["accuracy"] == threshold_accuracy(Z[:, 0], y) == 1.0
    assert ex.status.value == (
        "σ = 0.2000: a threshold on component 1 classifies 100.0% of the points"
        " — the classes are separated."
    )
    data_ax, kpca_ax = ex.figure.axes
    assert kpca_ax.get_title() == "kernel PCA, RBF σ = 0.2000"
    np.testing.assert_allclose(drawn_by_class(kpca_ax, y), Z)
    np.testing.assert_allclose(drawn_by_class(data_ax, y), X)  # the data panel is unchanged
    assert_pixels_changed(before_pixels, pixels(ex.figure))


def test_explorer_png_is_the_current_figure(moons):
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    first = ex.png()
    assert first.startswith(b"\x89PNG\r\n\x1a\n")
    set_controls(ex, sigma=0.2)
    assert ex.png() != first
    set_controls(ex, sigma=1.0)
    assert ex.png() == first


def test_sigma_explorer_is_a_function_of_sigma(moons):
    """Going back to a σ draws the same figure again (no state leaks between updates)."""
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    first = pixels(ex.figure)
    set_controls(ex, sigma=0.2)
    set_controls(ex, sigma=1.0)
    np.testing.assert_array_equal(pixels(ex.figure), first)
    assert len(ex.figure.axes) == 2, "the figure must be cleared before redrawing"


def test_sigma_slider_clamps_to_range(moons):
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0, sigma_range=(0.1, 2.0))
    result = set_controls(ex, sigma=50.0)
    assert result["sigma"] == pytest.approx(2.0)
    assert ex.figure.axes[1].get_title() == "kernel PCA, RBF σ = 2.000"


@pytest.mark.parametrize("n_components", [1, 3])
def test_sigma_explorer_number_of_components(moons, n_components):
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=0.5, n_components=n_components)
    assert ex.result["Z"].shape == (len(X), n_components)
    before = pixels(ex.figure)
    result = set_controls(ex, sigma=0.2)
    np.testing.assert_allclose(
        result["Z"], kpca_projection(X, sigma=0.2, n_components=n_components)
    )
    kpca_ax = ex.figure.axes[1]
    drawn = drawn_by_class(kpca_ax, y)
    if n_components == 1:  # one number per point: drawn on a line (class offset 0.1)
        np.testing.assert_allclose(drawn[:, 0], result["Z"][:, 0])
        np.testing.assert_allclose(drawn[:, 1], 0.1 * y)
    else:  # the first two of the components are drawn
        np.testing.assert_allclose(drawn, result["Z"][:, :2])
    assert_pixels_changed(before, pixels(ex.figure))


def test_sigma_explorer_without_labels(moons):
    X, _ = moons
    ex = kw.sigma_explorer(X, sigma=1.0)
    assert "accuracy" not in ex.result and ex.status.value == ""
    before = pixels(ex.figure)
    result = set_controls(ex, sigma=0.3)
    np.testing.assert_allclose(result["Z"], kpca_projection(X, sigma=0.3))
    np.testing.assert_allclose(scatter_points(ex.figure.axes[1]), result["Z"])
    assert ex.figure.axes[1].get_legend() is None
    assert_pixels_changed(before, pixels(ex.figure))


def test_sigma_explorer_error_in_callback_fails(moons, monkeypatch):
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    good = ex.result

    def broken(*args, **kwargs):
        raise FloatingPointError("eigensolver blew up")

    monkeypatch.setattr(kw, "kpca_projection", broken)
    with pytest.raises(FloatingPointError, match="blew up"):
        set_controls(ex, sigma=0.2)
    assert ex.result is good
    assert "FloatingPointError" in ex.status.value
    with pytest.raises(FloatingPointError):
        ex.update()
    monkeypatch.undo()
    assert set_controls(ex, sigma=0.3)["sigma"] == 0.3 and ex.last_error is None


def test_sigma_explorer_bad_labels_fail_at_build(moons):
    X, _ = moons
    three_classes = np.arange(len(X)) % 3
    with pytest.raises(ValueError, match="exactly two classes"):
        kw.sigma_explorer(X, three_classes)


# --------------------------------------------------------------------------- homework 4 sliders


def slider_positions(slider: w.FloatLogSlider) -> np.ndarray:
    """Every σ the slider can stop at: ``base**(min + k·step)``, as the browser's slider snaps."""
    k = np.arange(int(np.floor((slider.max - slider.min) / slider.step + 1e-9)) + 1)
    return slider.base ** (slider.min + k * slider.step)


def separating_positions(
    slider: w.FloatLogSlider, X, y, within: tuple[float, float] = (0.0, np.inf)
) -> list[float]:
    """The slider's positions in ``within`` at which the first RBF component separates ``y``,
    both at the position itself and at the value of the line a student copies from
    ``answer_recorder`` (4 significant digits)."""
    copy = w.FloatLogSlider(base=slider.base, min=slider.min, max=slider.max, step=slider.step)
    label = kw.answer_recorder(copy, "answer_sigma")
    good = []
    for sigma in slider_positions(slider):
        if not within[0] <= sigma <= within[1]:
            continue
        copy.value = sigma
        pasted = float(recorded(label)[2])
        if first_component_separates(X, y, sigma)[0] and first_component_separates(X, y, pasted)[0]:
            good.append(float(sigma))
    return good


MIN_SEPARATING_POSITIONS = 25


@pytest.mark.slow  # kernel PCA at about 180 slider positions
def test_homework_sigma_slider_has_many_separating_positions():
    """Question 7: the σ slider the homework builds stops often inside the separating window.

    The old slider (step 0.02 decades) is scanned at all its positions: only a few separate
    the moons, and a student dragging it jumps over the window. Its positions are every fifth
    position of the new slider, which is then scanned between the old positions just outside
    the window; positions further out are not counted, so the count is a lower bound.
    """
    X, y = homework_moons()
    ex = kw.sigma_explorer(X, y, sigma=1.0)  # the homework's call
    slider = ex.controls["sigma"]
    assert (slider.base ** slider.min, slider.base ** slider.max) == pytest.approx(SIGMA_RANGE)

    old = kw.sigma_explorer(X, y, sigma=1.0, sigma_step=0.02).controls["sigma"]
    old_good = separating_positions(old, X, y)
    assert 0 < len(old_good) < MIN_SEPARATING_POSITIONS  # the count can fail
    around = (old_good[0] / old.base**old.step, old_good[-1] * old.base**old.step)

    good = separating_positions(slider, X, y, within=around)
    assert len(good) >= MIN_SEPARATING_POSITIONS, f"only {len(good)} positions separate"
    assert len(good) >= 4 * len(old_good)
    # one window, no isolated lucky positions: the good positions are neighbours
    steps = np.diff(np.log10(good)) / slider.step
    np.testing.assert_allclose(steps, 1.0, atol=1e-6)
    # the readout tells neighbouring positions apart
    assert len({format(v, "#.4g") for v in good}) == len(good)
    # the explorer agrees at a position in the middle of the window
    middle = good[len(good) // 2]
    result = set_controls(ex, sigma=middle)
    assert result["accuracy"] == 1.0 and "the classes are separated" in ex.status.value


def test_sliders_are_wide_with_a_keyboard_hint(moons, faces):
    X, y = moons
    pca, images, names = faces
    explorers = {
        "sigma": kw.sigma_explorer(X, y),
        "kernel": kw.kernel_explorer(X, y),
        "r": kw.eigenface_explorer(pca, images, shape=(25, 25), names=names),
    }
    for name, ex in explorers.items():
        slider = ex.controls["r" if name == "r" else "sigma"]
        assert slider.layout.width == "95%", name
        controls_box, hint, status, output = ex.children
        assert controls_box.layout.flex_flow == "row wrap", "a wide slider gets its own line"
        assert hint is ex.hint and isinstance(hint, w.Label), name
        assert "arrow keys" in hint.value and "one step" in hint.value
        # the status line stays the first HTML widget (what a student, and the browser test, reads)
        assert status is ex.status and isinstance(status, w.HTML) and not isinstance(hint, w.HTML)
        assert output is ex.output
    sigma = explorers["sigma"].controls["sigma"]
    assert sigma.step == kw.SIGMA_STEP and sigma.readout_format == ".4g"
    assert explorers["kernel"].controls["sigma"].step == kw.SIGMA_STEP
    assert explorers["kernel"].controls["degree"].layout.width is None  # only σ is widened


# --------------------------------------------------------------------------- kernel_explorer


def test_kernel_explorer_builds(moons):
    X, y = moons
    ex = kw.kernel_explorer(X, y)
    assert set(ex.controls) == {"kernel", "sigma", "degree"}
    assert ex.controls["kernel"].options == ("rbf", "poly", "linear")
    assert ex.values == {"kernel": "rbf", "sigma": 0.3, "degree": 2}
    assert all(c.continuous_update is False for c in (ex.controls["sigma"], ex.controls["degree"]))
    np.testing.assert_allclose(ex.result["Z"], kpca_projection(X, kernel="rbf", sigma=0.3))
    (ax,) = ex.figure.axes
    assert ax.get_title() == "kernel PCA: RBF, σ = 0.3000"
    np.testing.assert_allclose(drawn_by_class(ax, y), ex.result["Z"])


def test_kernel_explorer_sigma(moons):
    X, y = moons
    ex = kw.kernel_explorer(X, y)
    before = pixels(ex.figure)
    result = set_controls(ex, sigma=0.2)
    Z = kpca_projection(X, kernel="rbf", sigma=0.2)
    np.testing.assert_allclose(result["Z"], Z)
    assert result["accuracy"] == threshold_accuracy(Z[:, 0], y)
    assert ex.status.value == f"threshold accuracy on component 1: {result['accuracy']:.1%}"
    assert ex.figure.axes[0].get_title() == "kernel PCA: RBF, σ = 0.2000"
    np.testing.assert_allclose(drawn_by_class(ex.figure.axes[0], y), Z)
    assert_pixels_changed(before, pixels(ex.figure))


def test_kernel_explorer_kernel_and_degree(moons):
    X, y = moons
    ex = kw.kernel_explorer(X, y)
    rbf = pixels(ex.figure)

    result = set_controls(ex, kernel="poly")
    np.testing.assert_allclose(result["Z"], kpca_projection(X, kernel="poly", degree=2))
    assert ex.figure.axes[0].get_title() == "kernel PCA: polynomial, p = 2"
    poly2 = pixels(ex.figure)
    assert_pixels_changed(rbf, poly2)

    result = set_controls(ex, degree=3)
    Z3 = kpca_projection(X, kernel="poly", degree=3)
    np.testing.assert_allclose(result["Z"], Z3)
    assert ex.figure.axes[0].get_title() == "kernel PCA: polynomial, p = 3"
    np.testing.assert_allclose(drawn_by_class(ex.figure.axes[0], y), Z3)
    assert_pixels_changed(poly2, pixels(ex.figure))

    # σ does not enter the polynomial kernel: same result, same picture
    poly3 = pixels(ex.figure)
    result = set_controls(ex, sigma=2.0)
    np.testing.assert_allclose(result["Z"], Z3)
    np.testing.assert_array_equal(pixels(ex.figure), poly3)


def test_kernel_explorer_linear_is_ordinary_pca(moons):
    X, y = moons
    ex = kw.kernel_explorer(X, y)
    before = pixels(ex.figure)
    result = set_controls(ex, kernel="linear")
    assert ex.figure.axes[0].get_title() == "kernel PCA: linear (ordinary PCA)"
    assert_same_up_to_sign(result["Z"], PCA(n_components=2).fit_transform(X))
    assert_pixels_changed(before, pixels(ex.figure))
    # the degree does not enter the linear kernel
    linear = pixels(ex.figure)
    set_controls(ex, degree=5)
    np.testing.assert_array_equal(pixels(ex.figure), linear)


def test_kernel_explorer_degree_ignored_by_rbf(moons):
    X, y = moons
    ex = kw.kernel_explorer(X, y)
    rbf = pixels(ex.figure)
    Z = ex.result["Z"]
    result = set_controls(ex, degree=4)
    np.testing.assert_allclose(result["Z"], Z)
    np.testing.assert_array_equal(pixels(ex.figure), rbf)


def test_kernel_explorer_error_in_callback_fails(moons, monkeypatch):
    X, y = moons
    ex = kw.kernel_explorer(X, y)

    def broken(*args, **kwargs):
        raise ValueError("kernel must be one of ...")

    monkeypatch.setattr(kw, "kpca_projection", broken)
    with pytest.raises(ValueError, match="kernel must be"):
        set_controls(ex, kernel="poly")
    assert "ValueError" in ex.status.value


# --------------------------------------------------------------------------- eigenface_explorer


def test_eigenface_explorer_builds(faces):
    pca, images, names = faces
    ex = kw.eigenface_explorer(pca, images, shape=(25, 25), names=names, r=10)
    slider = ex.controls["r"]
    assert isinstance(slider, w.IntSlider)
    assert (slider.min, slider.max, slider.value) == (0, 40, 10)
    assert slider.continuous_update is False
    assert ex.result["r"] == 10
    # 2 rows of images per name plus the error curves
    assert len(ex.figure.axes) == 2 * len(names) + 1
    curves_ax = ex.figure.axes[-1]
    assert [line.get_label() for line in curves_ax.get_lines()[:3]] == names
    for name, img, line in zip(names, images, curves_ax.get_lines()[:3], strict=True):
        np.testing.assert_allclose(line.get_ydata(), reconstruction_errors(pca, img, np.arange(41)))
        assert ex.result["errors"][name] == pytest.approx(line.get_ydata()[10])


def test_eigenface_r_changes_reconstructions_and_figure(faces):
    pca, images, names = faces
    ex = kw.eigenface_explorer(pca, images, shape=(25, 25), names=names, r=10)
    before = pixels(ex.figure)
    old_errors = ex.result["errors"]

    result = set_controls(ex, r=30)

    assert result["r"] == 30
    W = pca.components_[:30]
    expected = pca.mean_ + ((images - pca.mean_) @ W.T) @ W
    np.testing.assert_allclose(result["reconstructions"], expected)
    for name, img in zip(names, images, strict=True):
        assert result["errors"][name] == pytest.approx(reconstruction_errors(pca, img, [30])[0])
        # more components never reconstruct worse (orthogonal projections onto nested spaces)
        assert result["errors"][name] <= old_errors[name] + 1e-12
    # a held-out face is reconstructed far better than noise
    assert result["errors"]["held-out face"] < result["errors"]["noise"]
    assert ex.status.value.startswith("r = 30: error held-out face: ")
    # bottom-row images show the reconstructions; the marker line moved to r
    m = len(names)
    recon_axes = ex.figure.axes[1 : 2 * m : 2]
    for ax, rec in zip(recon_axes, result["reconstructions"], strict=True):
        assert ax.get_title() == "r = 30"
        np.testing.assert_allclose(ax.get_images()[0].get_array(), rec.reshape(25, 25))
    marker = ex.figure.axes[-1].get_lines()[-1]
    assert list(marker.get_xdata()) == [30, 30]
    assert_pixels_changed(before, pixels(ex.figure))


def test_eigenface_r_extremes(faces):
    pca, images, names = faces
    ex = kw.eigenface_explorer(pca, images, shape=(25, 25), names=names, r=10)
    result = set_controls(ex, r=0)  # no component: every reconstruction is the mean face
    np.testing.assert_allclose(result["reconstructions"], np.tile(pca.mean_, (len(images), 1)))
    result = set_controls(ex, r=10_000)  # clamped to the number of components
    assert result["r"] == 40 == ex.controls["r"].value


def test_eigenface_default_names(faces):
    pca, images, _ = faces
    ex = kw.eigenface_explorer(pca, images[:1], shape=(25, 25), r=5)
    assert ex.figure.axes[0].get_title() == "image 0\noriginal"
    assert list(ex.result["errors"]) == ["image 0"]
    before = pixels(ex.figure)
    set_controls(ex, r=6)
    assert_pixels_changed(before, pixels(ex.figure))


def target_lines(ax):
    return [line for line in ax.get_lines() if line.get_label().startswith("target")]


def test_eigenface_target_question_8():
    """Question 8 with ``target=FACE_TARGET``: the line on the plot, the flag and the status."""
    eigenfaces, _, held_out = homework_faces()
    ex = kw.eigenface_explorer(
        eigenfaces, held_out[None, :], shape=(25, 25), names=["held-out face"], r=5,
        target=FACE_TARGET,
    )
    all_r = np.arange(eigenfaces.components_.shape[0] + 1)
    errors = reconstruction_errors(eigenfaces, held_out, all_r)
    best = smallest_r_below(eigenfaces, held_out, FACE_TARGET)
    assert best is not None and best > 5

    def expected_status(r: int, side: str) -> str:
        return f"r = {r}: error held-out face: {errors[r]:.1%} — {side} the target 17.5%"

    assert ex.result["below_target"] == {"held-out face": False}
    assert ex.status.value == expected_status(5, "above")
    curves_ax = ex.figure.axes[-1]
    (line,) = target_lines(curves_ax)
    np.testing.assert_allclose(line.get_ydata(), [FACE_TARGET, FACE_TARGET])
    assert line.get_label() == "target 17.5%"
    assert "target 17.5%" in [t.get_text() for t in curves_ax.get_legend().get_texts()]
    assert list(curves_ax.get_lines()[-1].get_xdata()) == [5, 5]  # the r marker is still last

    before = pixels(ex.figure)
    result = set_controls(ex, r=best)
    assert result["below_target"] == {"held-out face": True}
    assert result["errors"]["held-out face"] == pytest.approx(errors[best])
    assert ex.status.value == expected_status(best, "below")
    assert_pixels_changed(before, pixels(ex.figure))
    result = set_controls(ex, r=best - 1)  # the smallest r: one fewer is above
    assert result["below_target"] == {"held-out face": False}
    assert ex.status.value == expected_status(best - 1, "above")
    assert len(target_lines(ex.figure.axes[-1])) == 1


def test_eigenface_target_several_images_and_close_calls(faces):
    pca, images, names = faces
    errors = {n: reconstruction_errors(pca, img, [12])[0] for n, img in zip(names, images, strict=True)}
    # just above the face's error: 1 decimal would print the same number twice
    target = errors["held-out face"] + 4e-5
    ex = kw.eigenface_explorer(pca, images, shape=(25, 25), names=names, r=12, target=target)
    assert ex.result["below_target"] == {n: bool(e < target) for n, e in errors.items()}
    assert ex.result["below_target"]["held-out face"] and not ex.result["below_target"]["noise"]
    face = ex.status.value.split(", ")[0]
    match = re.fullmatch(r"r = 12: error held-out face: ([\d.]+)% — below the target ([\d.]+)%", face)
    assert match, face
    shown_error, shown_target = (float(v) / 100 for v in match.groups())
    assert shown_error < shown_target
    assert shown_error == pytest.approx(errors["held-out face"], abs=5e-5)
    assert f"noise: {errors['noise']:.1%} — above the target" in ex.status.value


def test_eigenface_without_target_is_unchanged(faces):
    pca, images, names = faces
    ex = kw.eigenface_explorer(pca, images, shape=(25, 25), names=names, r=10)
    assert "below_target" not in ex.result and "target" not in ex.status.value
    assert target_lines(ex.figure.axes[-1]) == []
    for bad in (0.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="target"):
            kw.eigenface_explorer(pca, images, shape=(25, 25), target=bad)


# --------------------------------------------------------------------------- answer_recorder


ANSWER_LINE = re.compile(r"<code>(?P<line>(?P<name>\w+) = (?P<value>[^<]+))</code>")


def recorded(label: w.HTML) -> tuple[str, str, str]:
    match = ANSWER_LINE.search(label.value)
    assert match, label.value
    return match["line"], match["name"], match["value"]


def test_answer_recorder_follows_the_slider(moons):
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    label = kw.answer_recorder(ex.controls["sigma"], "answer_sigma")
    assert isinstance(label, w.HTML)
    assert no_tags(label.value) == ("Copy this line into the answer cell below: answer_sigma = 1")
    set_controls(ex, sigma=0.2)
    line, name, value = recorded(label)
    assert line == "answer_sigma = 0.2"
    # the copied line is valid Python that gives back the slider's value (4 significant digits)
    namespace: dict = {}
    exec(line, namespace)
    assert namespace[name] == pytest.approx(ex.controls["sigma"].value, rel=5e-4)
    # and it is the value at which the explorer shows the moons separated
    assert ex.result["accuracy"] == 1.0


def _watch_order(ex: kw.Explorer, label: w.HTML, control: w.ValueWidget, fmt: str) -> list[str]:
    """Each time the status line or the figure changes, whether the recorder's line already
    shows the control's value (what a student reading the status line would copy)."""
    stale: list[str] = []

    def seen(what: str):
        def note(_change) -> None:
            line, name, value = recorded(label)
            expected = f"{name} = {fmt.format(control.value)}"
            if line != expected:
                stale.append(f"{what} changed while the recorder showed {line!r}, not {expected!r}")
        return note

    ex.status.observe(seen("status"), names="value")
    ex.output.observe(seen("figure"), names="outputs")
    return stale


def test_answer_recorder_is_never_older_than_the_status_line(moons):
    """The explorer refreshes its recorder before its status line and figure, so a student
    who reads "separated" copies that σ, however fast the slider moves (issue: the recorder
    was refreshed after the figure, and lagged the status line in a real browser)."""
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    slider = ex.controls["sigma"]
    label = kw.answer_recorder(slider, "answer_sigma")
    stale = _watch_order(ex, label, slider, "{:.4g}")
    updates = ex.n_updates
    for k in range(30):  # arrow-key presses in a row, then a drag back
        slider.value = 10 ** (np.log10(0.3) - k * kw.SIGMA_STEP)
    slider.value = 0.2
    assert ex.n_updates == updates + 31
    assert stale == []
    assert recorded(label)[0] == "answer_sigma = 0.2"
    assert "σ = 0.2000" in ex.status.value


def test_answer_recorder_of_an_integer_explorer_is_refreshed_first(faces):
    pca, images, names = faces
    ex = kw.eigenface_explorer(pca, images, shape=(25, 25), names=names, r=5)
    label = kw.answer_recorder(ex.controls["r"], "answer_r", fmt="{:d}")
    stale = _watch_order(ex, label, ex.controls["r"], "{:d}")
    for r in (6, 7, 12, 3):
        ex.controls["r"].value = r
    assert stale == []
    assert recorded(label)[0] == "answer_r = 3"


def test_answer_recorder_follows_a_failing_update(moons):
    """An update that raises still moves the line with the slider (the status shows the error)."""
    X, y = moons
    ex = kw.sigma_explorer(X, y, sigma=1.0)
    label = kw.answer_recorder(ex.controls["sigma"], "answer_sigma")
    ex._compute = lambda **_: 1 / 0  # noqa: SLF001 (a compute that fails)
    ex.controls["sigma"].value = 0.5
    assert isinstance(ex.last_error, ZeroDivisionError)
    assert recorded(label)[0] == "answer_sigma = 0.5"
    assert "ZeroDivisionError" in ex.status.value


def test_answer_recorder_rounds_and_formats():
    slider = w.FloatLogSlider(value=0.123456, base=10, min=-2, max=1)
    label = kw.answer_recorder(slider, "answer_sigma")
    assert recorded(label)[0] == "answer_sigma = 0.1235"
    slider.value = 3.0
    assert recorded(label)[0] == "answer_sigma = 3"
    ints = w.IntSlider(value=7, min=0, max=40)
    label = kw.answer_recorder(ints, "answer_r", fmt="{:d}")
    assert recorded(label)[0] == "answer_r = 7"
    ints.value = 12
    assert recorded(label)[0] == "answer_r = 12"
    choice = w.Dropdown(options=["rbf", "poly"], value="rbf")
    label = kw.answer_recorder(choice, "answer_kernel", fmt="{!r}")
    choice.value = "poly"
    assert recorded(label)[0] == "answer_kernel = 'poly'"


# --------------------------------------------------------------------------- notebook 04's explorer

NOTEBOOK_04 = Path(__file__).resolve().parents[1] / "notebooks" / "04_kernels_and_mercer.ipynb"


def run_notebook_cells(path: Path, cell_ids: list[str]) -> dict:
    """Execute the code cells ``cell_ids`` of a stored notebook, in order, in one namespace."""
    import matplotlib.pyplot as plt
    import nbformat

    cells = {c.get("id"): c for c in nbformat.read(path, as_version=4).cells}
    missing = [cid for cid in cell_ids if cid not in cells]
    assert not missing, f"{path.name} has no cells {missing}: update this test"
    namespace: dict = {}
    for cid in cell_ids:
        exec(compile(cells[cid].source, f"{path.name}[{cid}]", "exec"), namespace)
    plt.close("all")
    return namespace


def test_notebook_04_sigma_explorer():
    """The σ explorer of notebook 04 (the lecture's own compute/draw functions): it works at
    both ends of the slider, starts at the σ = 0.5 the text announces, and moving the slider
    recomputes K and redraws. (This check used to be a "CI check" cell in the lecture.)"""
    from kpca_lib.kernels import rbf_kernel

    # imports, the 60 points on the circle (and the σ panels), the explorer
    ns = run_notebook_cells(NOTEBOOK_04, ["km-01", "km-20", "km-23"])
    explorer, compute, X_circle = ns["explorer"], ns["compute"], ns["X_circle"]
    slider = explorer.controls["sigma"]
    assert explorer.values == {"sigma": 0.5} and explorer.last_error is None
    for sigma in (slider.base**slider.min, slider.base**slider.max):  # σ = 0.01 and σ = 10
        result = compute(sigma)
        assert 1 <= result["rank"] <= len(X_circle)
        np.testing.assert_allclose(result["K"], rbf_kernel(X_circle, sigma=sigma))
        assert np.all(np.diff(result["eigenvalues"]) <= 0)  # sorted, largest first
    before = pixels(explorer.figure)
    result = set_controls(explorer, sigma=1.0)
    np.testing.assert_allclose(result["K"], rbf_kernel(X_circle, sigma=1.0))
    assert result["message"].startswith("σ = 1.000")
    assert_pixels_changed(before, pixels(explorer.figure))


# --------------------------------------------------------------------------- in a real kernel

EXPLORERS_IN_A_FRESH_KERNEL = """
from kpca_lib import PCA
from kpca_lib.datasets import load_faces, make_moons
from kpca_lib.widgets import eigenface_explorer, kernel_explorer, sigma_explorer

X, y = make_moons(60, noise=0.05, random_state=0)
faces = load_faces().data
display(sigma_explorer(X, y), kernel_explorer(X, y),
        eigenface_explorer(PCA(10).fit(faces[:40]), faces[50], shape=(25, 25)))
"""


@pytest.mark.slow
def test_explorers_draw_their_figure_in_a_fresh_kernel(tmp_path):
    """In the python3 kernel, with nothing drawn before, each explorer shows its figure as PNG.

    A bare ``Figure`` passed to ``display`` is drawn as an image only once pyplot's inline
    backend is active in the kernel; otherwise students see '<Figure size ... with 2 Axes>'
    (exercise 04 has no figure before its explorer).
    """
    import nbformat
    from test_exercises_run import run_in_local_kernel

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(EXPLORERS_IN_A_FRESH_KERNEL)]
    run_in_local_kernel(nb, tmp_path, timeout=120)
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    outputs = [m["state"]["outputs"] for m in state.values() if m["model_name"] == "OutputModel"]
    assert len(outputs) == 3
    for out in outputs:
        kinds = [sorted(o.get("data", {})) for o in out]
        assert any("image/png" in k for k in kinds), f"the figure is shown as {kinds}"
