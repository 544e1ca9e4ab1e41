"""Interactive explorers for the notebooks: thin ipywidgets wiring over pure functions.

Each builder returns an :class:`Explorer` (an ``ipywidgets.VBox``) with

* ``controls``: the named control widgets (``sigma``, ``degree``, ``kernel``, ``r`` ...);
* ``result``: the latest output of the pure computation (a dict);
* ``figure``: the matplotlib ``Figure`` that is redrawn on every change;
* ``last_error``: the exception raised by the last update, or ``None``;
* ``hint``: a one-line ``Label`` under the controls (how to move a slider by one
  step with the keyboard), or ``None``.

An :func:`answer_recorder` on an explorer's control is refreshed by the explorer itself,
first in every update: the kernel sends the recorder's new line before the status line and
the figure, so whenever the status line shows a σ, the line to copy already shows the same σ
(observed separately, the recorder was refreshed only after the figure was rendered, and a
student could copy the previous value while the status line said "separated").

The sliders of the builders are as wide as the notebook (``SLIDER_LAYOUT``): on a
narrow slider a pixel of mouse movement jumps over whole windows of good values.

Setting a control's ``value`` from code updates ``result`` and ``figure``
synchronously, so tests drive the widgets without a browser. ipywidgets would
otherwise swallow an exception raised in a callback; an explorer keeps it in
``last_error`` and shows it in the output area instead of a stale figure.
"""

from __future__ import annotations

import io
import weakref
from collections.abc import Callable
from typing import Any

import ipywidgets as w
import numpy as np
from IPython.display import Image, display
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from .analysis import kpca_projection, reconstruction_errors, threshold_accuracy
from .pca import PCA
from .plotting import plot_errors, plot_points

__all__ = [
    "SIGMA_STEP",
    "KEYBOARD_HINT",
    "Explorer",
    "sigma_explorer",
    "kernel_explorer",
    "eigenface_explorer",
    "answer_recorder",
]


# Step of the log10(σ) sliders. On the two moons of homework 4, question 7
# (make_moons(100, noise=0.05, random_state=0)) a threshold on the first RBF kernel principal
# component separates the classes for σ in about [0.178, 0.249] (kpca_lib.analysis.
# first_component_separates on a fine grid): 0.146 decades. The old step of 0.02 decades put
# 7 of the 135 slider positions of [0.02, 10] there; 0.004 puts 36 of 675 there, and one step
# (0.9 % in σ) is about one pixel of a notebook-wide slider. tests/test_widgets.py counts them.
SIGMA_STEP = 0.004
# Significant digits of σ in the readout, status line and titles: enough to tell neighbouring
# positions apart anywhere in the range (one step changes σ by 0.9 %).
_SIGMA_READOUT = ".4g"  # d3-format of the slider's readout: 0.2000, 1.000, 10.00


def _fmt_sigma(sigma: float) -> str:
    """σ as the slider's readout shows it (4 significant digits, trailing zeros kept)."""
    return f"{sigma:#.4g}"


SLIDER_LAYOUT = {"width": "95%"}
KEYBOARD_HINT = (
    "Tip: click the slider's handle, then the arrow keys ← → move it by one step "
    "(Page Up/Page Down: 5 steps); or click the number and type a value."
)


# The explorer that owns a control (answer_recorder refreshes through it, in order).
_EXPLORER_OF: weakref.WeakKeyDictionary[w.Widget, Explorer] = weakref.WeakKeyDictionary()


class Explorer(w.VBox):
    """A control panel, a figure and the pure function that links them.

    Parameters
    ----------
    controls : dict of str to widget
        Named controls; their ``value`` is passed to ``compute`` as keyword arguments.
    compute : callable
        Pure function ``compute(**values) -> dict`` of the control values.
    draw : callable
        ``draw(figure, result, values)`` draws ``result`` on the cleared figure.
    figsize : (float, float)
    hint : str, optional
        One line shown under the controls (e.g. :data:`KEYBOARD_HINT`).

    The controls are laid out in a row that wraps, so a wide slider gets a line of its own.
    """

    def __init__(
        self,
        controls: dict[str, w.ValueWidget],
        compute: Callable[..., dict[str, Any]],
        draw: Callable[[Figure, dict[str, Any], dict[str, Any]], None],
        figsize: tuple[float, float] = (9.0, 3.6),
        *,
        hint: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.controls = controls
        self.output = w.Output()
        self.status = w.HTML()
        self.hint = (
            None if hint is None
            else w.Label(hint, style={"font_size": "0.9em", "text_color": "#555"})
        )
        self.figure = Figure(figsize=figsize, layout="constrained")
        self.result: dict[str, Any] = {}
        self.last_error: BaseException | None = None
        self.n_updates = 0
        self._followers: list[Callable[[], None]] = []
        self._compute = compute
        self._draw = draw
        controls_box = w.HBox(list(controls.values()), layout=w.Layout(flex_flow="row wrap"))
        hint_row = [] if self.hint is None else [self.hint]
        super().__init__([controls_box, *hint_row, self.status, self.output], **kwargs)
        for control in controls.values():
            control.observe(self._on_change, names="value")
            _EXPLORER_OF[control] = self
        self.update()

    def __repr__(self) -> str:
        # Shown instead of the widget where no kernel runs (a notebook opened
        # before running it, or a viewer without widget support).
        names = ", ".join(self.controls)
        return (
            f"Interactive explorer ({names}): run the notebook's cells in JupyterLab "
            "to see and use it."
        )

    @property
    def values(self) -> dict[str, Any]:
        """Current values of all controls."""
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, change: dict[str, Any]) -> None:
        try:
            self.update()
        except Exception:  # kept in last_error and shown; see update()
            pass

    def follow(self, refresh: Callable[[], None]) -> None:
        """Run ``refresh()`` now and first in every update, before the status and figure."""
        self._followers.append(refresh)
        refresh()

    def update(self) -> dict[str, Any]:
        """Recompute and redraw for the current control values; re-raises errors.

        Followers (:func:`answer_recorder`) are refreshed first, then the status line, then
        the figure, so nothing the student sees is newer than the line they copy.
        """
        values = self.values
        for refresh in self._followers:
            refresh()
        try:
            result = self._compute(**values)
            self.figure.clear()
            self._draw(self.figure, result, values)
        except Exception as exc:
            self.last_error = exc
            self.status.value = (
                f"<span style='color:#b00020'>Error: {type(exc).__name__}: {exc}</span>"
            )
            raise
        self.last_error = None
        self.result = result
        self.n_updates += 1
        self.status.value = result.get("message", "")
        with self.output:
            self.output.clear_output(wait=True)
            display(Image(data=self.png(), format="png"))
        return result

    def png(self) -> bytes:
        """The current figure rendered as PNG bytes.

        Displaying these (rather than the ``Figure`` object) shows the plot in
        any kernel, whether or not pyplot's inline backend has been activated.
        """
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=self.figure.dpi)
        return buffer.getvalue()


def _moons_labels(y: ArrayLike | None) -> list[str] | None:
    return None if y is None else [f"class {c}" for c in np.unique(y)]


def sigma_explorer(
    X: ArrayLike,
    y: ArrayLike | None = None,
    *,
    sigma: float = 1.0,
    sigma_range: tuple[float, float] = (0.02, 10.0),
    n_components: int = 2,
    sigma_step: float = SIGMA_STEP,
) -> Explorer:
    """RBF kernel PCA of ``X`` with a log-scale σ slider.

    Left: the data; right: the first two kernel principal components at σ.
    With labels ``y``, the status line reports how well a single threshold on
    the first component separates the classes.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,), optional
        Two classes.
    sigma : float
        Initial σ.
    sigma_range : (float, float)
        Smallest and largest σ of the slider.
    n_components : int
        Number of kernel principal components computed (at most two are drawn).
    sigma_step : float
        Step of the slider in log10(σ) (:data:`SIGMA_STEP`).
    """
    X = np.asarray(X, dtype=float)
    y_arr = None if y is None else np.asarray(y)
    lo, hi = np.log10(sigma_range[0]), np.log10(sigma_range[1])
    slider = w.FloatLogSlider(
        value=sigma, base=10, min=lo, max=hi, step=sigma_step, description="σ",
        continuous_update=False, readout_format=_SIGMA_READOUT, layout=SLIDER_LAYOUT,
    )

    def compute(sigma: float) -> dict[str, Any]:
        Z = kpca_projection(X, kernel="rbf", sigma=sigma, n_components=n_components)
        out: dict[str, Any] = {"sigma": sigma, "Z": Z}
        if y_arr is not None:
            acc = threshold_accuracy(Z[:, 0], y_arr)
            out["accuracy"] = acc
            out["message"] = (
                f"σ = {_fmt_sigma(sigma)}: a threshold on component 1 classifies {acc:.1%} "
                "of the points"
                + (" — the classes are separated." if acc == 1.0 else ".")
            )
        return out

    def draw(fig: Figure, result: dict[str, Any], values: dict[str, Any]) -> None:
        ax1, ax2 = fig.subplots(1, 2)
        plot_points(X, y_arr, ax1, title="data", xlabel="$f_1$", ylabel="$f_2$")
        Z = result["Z"]
        plot_points(
            Z[:, :2] if Z.shape[1] > 1 else Z, y_arr, ax2,
            title=f"kernel PCA, RBF σ = {_fmt_sigma(values['sigma'])}",
        )

    return Explorer({"sigma": slider}, compute, draw, hint=KEYBOARD_HINT)


def kernel_explorer(X: ArrayLike, y: ArrayLike | None = None) -> Explorer:
    """Kernel PCA with a choice of kernel, σ (RBF) and degree (polynomial)."""
    X = np.asarray(X, dtype=float)
    y_arr = None if y is None else np.asarray(y)
    controls = {
        "kernel": w.Dropdown(options=["rbf", "poly", "linear"], value="rbf", description="kernel"),
        "sigma": w.FloatLogSlider(
            value=0.3, base=10, min=-1.7, max=1, step=SIGMA_STEP, description="σ",
            continuous_update=False, readout_format=_SIGMA_READOUT, layout=SLIDER_LAYOUT,
        ),
        "degree": w.IntSlider(value=2, min=1, max=6, description="degree", continuous_update=False),
    }

    def compute(kernel: str, sigma: float, degree: int) -> dict[str, Any]:
        Z = kpca_projection(X, kernel=kernel, sigma=sigma, degree=degree, n_components=2)
        out: dict[str, Any] = {"Z": Z}
        if y_arr is not None:
            out["accuracy"] = threshold_accuracy(Z[:, 0], y_arr)
            out["message"] = f"threshold accuracy on component 1: {out['accuracy']:.1%}"
        return out

    def draw(fig: Figure, result: dict[str, Any], values: dict[str, Any]) -> None:
        ax = fig.subplots()
        name = {
            "rbf": f"RBF, σ = {_fmt_sigma(values['sigma'])}",
            "poly": f"polynomial, p = {values['degree']}",
            "linear": "linear (ordinary PCA)",
        }[values["kernel"]]
        plot_points(result["Z"], y_arr, ax, title=f"kernel PCA: {name}")

    return Explorer(controls, compute, draw, figsize=(5.0, 3.8), hint=KEYBOARD_HINT)


def eigenface_explorer(
    pca: PCA,
    images: ArrayLike,
    *,
    shape: tuple[int, int],
    names: list[str] | None = None,
    r: int = 10,
    target: float | None = None,
) -> Explorer:
    """Reconstruct a few images from their first ``r`` eigenfaces, with an r slider.

    Parameters
    ----------
    pca : PCA
        Fitted on the training faces.
    images : array-like of shape (m, h*w)
        Images to reconstruct (e.g. a held-out face, a non-face, noise).
    shape : (h, w)
    names : list of str, optional
        Titles of the images.
    r : int
        Initial number of components.
    target : float, optional
        A relative error to reach. When given, the error plot draws it as a labelled
        horizontal line, ``result["below_target"]`` says for each image whether its error
        at ``r`` is below it (``error < target``), and the status line says so too.
    """
    images = np.atleast_2d(np.asarray(images, dtype=float))
    if target is not None and not (np.isfinite(target) and target > 0):
        raise ValueError(f"target must be a positive relative error; got {target!r}.")
    names = names or [f"image {i}" for i in range(len(images))]
    r_max = pca.components_.shape[0]
    slider = w.IntSlider(
        value=min(r, r_max), min=0, max=r_max, description="r", continuous_update=False,
        layout=SLIDER_LAYOUT,
    )
    rs = np.arange(r_max + 1)
    curves = {name: reconstruction_errors(pca, img, rs) for name, img in zip(names, images, strict=True)}

    def compute(r: int) -> dict[str, Any]:
        W = pca.components_[:r]
        recon = pca.mean_ + ((images - pca.mean_) @ W.T) @ W
        errors = {name: float(curves[name][r]) for name in names}
        out: dict[str, Any] = {"r": r, "reconstructions": recon, "errors": errors}
        if target is None:
            message = ", ".join(f"{n}: {e:.1%}" for n, e in errors.items())
        else:
            out["below_target"] = {n: e < target for n, e in errors.items()}
            message = ", ".join(f"{n}: {_versus_target(e, target)}" for n, e in errors.items())
        out["message"] = f"r = {r}: error {message}"
        return out

    def draw(fig: Figure, result: dict[str, Any], values: dict[str, Any]) -> None:
        m = len(images)
        grid = fig.add_gridspec(2, m + 1)
        for i in range(m):
            for row, data, label in ((0, images[i], "original"), (1, result["reconstructions"][i], f"r = {values['r']}")):
                ax = fig.add_subplot(grid[row, i])
                ax.imshow(data.reshape(shape), cmap="gray")
                ax.set_title(f"{names[i]}\n{label}" if row == 0 else label, fontsize="small")
                ax.set_xticks([])
                ax.set_yticks([])
        ax = fig.add_subplot(grid[:, m])
        plot_errors(rs, curves, ax, title="relative error")
        if target is not None:
            ax.axhline(target, color="#b00020", ls="--", lw=1.0, label=f"target {target:.1%}")
            ax.legend(loc="best", fontsize="small")
        ax.axvline(values["r"], color="gray", ls=":")

    return Explorer(
        {"r": slider}, compute, draw, figsize=(3.0 * (len(images) + 1.6), 4.2), hint=KEYBOARD_HINT
    )


def _versus_target(error: float, target: float) -> str:
    """``'18.2% — above the target 17.5%'``, with more digits if 1 decimal would hide the side."""
    side = "below" if error < target else "above" if error > target else "equal to"
    for digits in range(1, 5):
        e, t = f"{error:.{digits}%}", f"{target:.{digits}%}"
        if (e != t) or side == "equal to":
            break
    return f"{e} — {side} the target {t}"


def answer_recorder(control: w.ValueWidget, variable: str, fmt: str = "{:.4g}") -> w.HTML:
    """Show the line a student copies into the answer cell for the control's current value.

    The graded answer is the line in the notebook, never widget state, so it
    survives saving, closing and re-running the notebook. When ``control`` belongs to an
    :class:`Explorer`, the explorer refreshes the line first in each update, so the line is
    never older than the status line or the figure shown with it.

    Returns
    -------
    ipywidgets.HTML
        Kept up to date with ``variable = <value>``.
    """
    label = w.HTML()

    def refresh(_: object = None) -> None:
        label.value = (
            "Copy this line into the answer cell below: "
            f"<code>{variable} = {fmt.format(control.value)}</code>"
        )

    explorer = _EXPLORER_OF.get(control)
    if explorer is not None:
        explorer.follow(refresh)
    else:
        control.observe(refresh, names="value")
        refresh()
    return label
