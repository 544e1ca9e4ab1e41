"""Plotting helpers: draw on the given axes (or new ones), return them, label everything."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from kpca_lib import plotting  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_plot_points_uses_given_axes_and_labels(rng):
    fig, ax = plt.subplots()
    Z, y = rng.normal(size=(30, 2)), np.repeat([0, 1], 15)
    out = plotting.plot_points(Z, y, ax, title="t", labels=["a", "b"])
    assert out is ax
    assert ax.get_title() == "t" and ax.get_xlabel() and ax.get_ylabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    offsets = np.vstack([c.get_offsets() for c in ax.collections])
    np.testing.assert_allclose(np.sort(offsets[:, 0]), np.sort(Z[:, 0]))


def test_plot_points_one_dimensional(rng):
    ax = plotting.plot_points(rng.normal(size=20))
    assert ax.get_yticks().size == 0
    assert len(ax.collections) == 1


def test_plot_eigenvalues_cumulative_reaches_one():
    ax = plotting.plot_eigenvalues([4.0, 3.0, 2.0, 1.0], threshold=0.95)
    bars = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(bars, [0.4, 0.3, 0.2, 0.1])
    cumulative = ax.lines[0].get_ydata()
    np.testing.assert_allclose(cumulative, [0.4, 0.7, 0.9, 1.0])
    assert ax.get_title() and ax.get_legend() is not None


def test_plot_images_grid(rng):
    images = rng.normal(size=(7, 16))
    axes = plotting.plot_images(images, titles=[str(i) for i in range(7)], n_cols=4, symmetric=True)
    assert len(axes) == 8
    assert sum(ax.get_visible() for ax in axes) == 7
    assert axes[0].images[0].get_array().shape == (4, 4)
    with pytest.raises(ValueError, match="shape"):
        plotting.plot_images(rng.normal(size=(2, 15)))


def test_line_plots(rng):
    ax = plotting.plot_timings([10, 100], {"a": [0.1, 1.0], "b": [0.2, 0.3]}, title="T")
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_ylabel() == "seconds"
    assert len(ax.lines) == 2 and ax.get_title() == "T"
    ax = plotting.plot_errors([1, 2, 3], {"face": [0.3, 0.2, 0.1]})
    assert ax.get_yscale() == "linear" and ax.get_xlabel().startswith("number")
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.3, 0.2, 0.1])


def test_plot_kernel_matrix(rng):
    K = rng.normal(size=(5, 5))
    ax = plotting.plot_kernel_matrix(K @ K.T, title="K")
    assert ax.get_title() == "K"
    np.testing.assert_allclose(ax.images[0].get_array(), K @ K.T)



def test_use_course_style_sets_every_key_and_returns_nothing():
    with matplotlib.rc_context():  # leave the global style of the test session as it was
        matplotlib.rcParams["image.interpolation"] = "bilinear"
        assert plotting.use_course_style() is None
        for key, value in plotting.COURSE_STYLE.items():
            assert matplotlib.rcParams[key] == value, key
        fig, ax = plt.subplots()
        image = ax.imshow(np.arange(64.0).reshape(8, 8))
        assert image.get_interpolation() == "nearest"  # 8×8 digits drawn as 64 squares


def test_course_style_context_manager_restores_the_previous_style():
    with matplotlib.rc_context({"image.interpolation": "bilinear", "legend.fontsize": "large"}):
        with plotting.course_style():
            assert matplotlib.rcParams["image.interpolation"] == "nearest"
            assert matplotlib.rcParams["legend.fontsize"] == plotting.COURSE_STYLE["legend.fontsize"]
        assert matplotlib.rcParams["image.interpolation"] == "bilinear"
        assert matplotlib.rcParams["legend.fontsize"] == "large"
        with pytest.raises(RuntimeError), plotting.course_style():
            raise RuntimeError("restored after an exception too")
        assert matplotlib.rcParams["image.interpolation"] == "bilinear"


def test_course_style_is_public_and_valid():
    for name in ("COURSE_STYLE", "use_course_style", "course_style", "distinct_styles"):
        assert name in plotting.__all__
    assert plotting.use_course_style.__doc__ and plotting.course_style.__doc__
    matplotlib.RcParams(plotting.COURSE_STYLE)  # every key and value is one Matplotlib accepts


def test_distinct_styles_differ_in_colour_marker_and_dashes():
    styles = plotting.distinct_styles(7)
    assert len(styles) == 7
    assert len({s["color"] for s in styles}) == 7 and len({s["marker"] for s in styles}) == 7
    assert all(a["linestyle"] != b["linestyle"] for a, b in zip(styles[:-1], styles[1:], strict=True))
    fig, ax = plt.subplots()
    for i, style in enumerate(styles):
        ax.plot([0, 1], [i, i], **style, label=f"p = {i + 1}")
    assert [line.get_marker() for line in ax.lines] == [s["marker"] for s in styles]
    for bad in (0, 11, 2.0, True, "3"):
        with pytest.raises(ValueError, match="n must be"):
            plotting.distinct_styles(bad)
