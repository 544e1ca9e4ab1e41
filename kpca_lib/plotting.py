"""Plotting helpers for the notebooks.

Every ``plot_*`` function draws on ``ax`` (a new figure's axes when ``ax is
None``) and returns it; none calls ``plt.show()``. Figures use titles, axis
labels and legends, with colours readable in JupyterLab's light theme.

One style for the course: every lecture calls :func:`use_course_style` in its
set-up cell (:data:`COURSE_STYLE`; :func:`course_style` applies it to one block
only), and :func:`distinct_styles` gives curves that can be told apart by
marker and dash pattern as well as by colour.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from numpy.typing import ArrayLike

__all__ = [
    "COURSE_STYLE",
    "use_course_style",
    "course_style",
    "distinct_styles",
    "plot_points",
    "plot_eigenvalues",
    "plot_images",
    "plot_timings",
    "plot_kernel_matrix",
    "plot_errors",
]

CLASS_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")

#: The course's figure style: Matplotlib ``rcParams`` shared by every lecture.
#: Readable text at the notebooks' default size, legends with a light frame,
#: the colour-blind-safe ``tab10`` cycle in a fixed order, and pixel images
#: drawn as pixels (``nearest``: an 8×8 digit shows its 64 squares, not a blur).
COURSE_STYLE: dict[str, object] = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10.0,
    "axes.titlesize": "medium",
    "axes.labelsize": "medium",
    "figure.titlesize": "large",
    "legend.fontsize": "small",
    "legend.framealpha": 0.85,
    "lines.linewidth": 1.5,
    "lines.markersize": 5.0,
    "image.interpolation": "nearest",
    "axes.prop_cycle": mpl.cycler(color=[f"tab:{c}" for c in (
        "blue", "orange", "green", "red", "purple", "brown", "pink", "gray", "olive", "cyan"
    )]),
}

_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">")
_LINESTYLES = ("-", "--", "-.", ":")


def use_course_style() -> None:
    """Apply :data:`COURSE_STYLE` to every figure drawn from now on.

    Call it once in the set-up cell of a notebook. It changes Matplotlib's
    global ``rcParams`` only for the keys of :data:`COURSE_STYLE`; use
    :func:`course_style` to apply the style to a block of code only.

    Returns
    -------
    None

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from kpca_lib.plotting import use_course_style
    >>> use_course_style()
    >>> plt.rcParams["image.interpolation"]
    'nearest'
    """
    mpl.rcParams.update(COURSE_STYLE)


@contextmanager
def course_style() -> Iterator[None]:
    """Context manager: :data:`COURSE_STYLE` inside the ``with`` block only.

    Yields
    ------
    None
        Matplotlib's previous ``rcParams`` are restored on exit, also after an
        exception.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from kpca_lib.plotting import course_style
    >>> with course_style():
    ...     fig, ax = plt.subplots()
    """
    with mpl.rc_context(COURSE_STYLE):
        yield


def distinct_styles(n: int) -> list[dict[str, object]]:
    """Keyword arguments for ``n`` lines that differ in colour, marker and line style.

    Colours alone are not enough to tell several curves apart (shades of one
    colour map are the classic failure, and a grey-scale print loses them all),
    so every line also gets its own marker, and consecutive lines their own
    dash pattern.

    Parameters
    ----------
    n : int
        Number of lines, 1 to 10.

    Returns
    -------
    list of dict
        ``n`` dictionaries with the keys ``color``, ``marker`` and ``linestyle``,
        to be passed as ``ax.plot(x, y, **style)``; no two share a colour or a
        marker.

    Raises
    ------
    ValueError
        If ``n`` is not an integer between 1 and 10.

    Examples
    --------
    >>> from kpca_lib.plotting import distinct_styles
    >>> distinct_styles(2)[1]
    {'color': 'tab:orange', 'marker': 's', 'linestyle': '--'}
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= len(_MARKERS):
        raise ValueError(f"n must be an integer between 1 and {len(_MARKERS)}; got {n!r}.")
    colours = COURSE_STYLE["axes.prop_cycle"].by_key()["color"]
    return [
        {"color": colours[i], "marker": _MARKERS[i], "linestyle": _LINESTYLES[i % len(_LINESTYLES)]}
        for i in range(int(n))
    ]


def _axes(ax: Axes | None, figsize: tuple[float, float] = (5.0, 4.0)) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_points(
    Z: ArrayLike,
    y: ArrayLike | None = None,
    ax: Axes | None = None,
    *,
    title: str = "",
    xlabel: str = "component 1",
    ylabel: str = "component 2",
    labels: Sequence[str] | None = None,
    s: float = 12.0,
) -> Axes:
    """Scatter plot of 2-D points (or of 1-D values on a line), coloured by class.

    Parameters
    ----------
    Z : array-like of shape (n, 2) or (n, 1) or (n,)
        Points or projections. One column is drawn against a small jitter-free
        zero line, so a threshold on that single number is visible.
    y : array-like of shape (n,), optional
        Class of every point; one colour and legend entry per class.
    ax : matplotlib Axes, optional
    title, xlabel, ylabel : str
    labels : sequence of str, optional
        Legend names of the classes (default ``"class 0"``, ...).
    s : float
        Marker size.

    Returns
    -------
    Axes
    """
    ax = _axes(ax)
    Z = np.asarray(Z, dtype=float)
    if Z.ndim == 1:
        Z = Z[:, None]
    one_d = Z.shape[1] == 1
    xs = Z[:, 0]
    ys = np.zeros_like(xs) if one_d else Z[:, 1]
    if y is None:
        ax.scatter(xs, ys, s=s, color=CLASS_COLOURS[0], alpha=0.8)
    else:
        y = np.asarray(y)
        for i, cls in enumerate(np.unique(y)):
            mask = y == cls
            name = labels[i] if labels is not None else f"class {cls}"
            offset = 0.0 if not one_d else 0.1 * i
            ax.scatter(
                xs[mask],
                ys[mask] + offset,
                s=s,
                color=CLASS_COLOURS[i % len(CLASS_COLOURS)],
                alpha=0.8,
                label=name,
            )
        ax.legend(loc="best", fontsize="small")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    if one_d:
        ax.set_yticks([])
        ax.set_ylabel("")
    else:
        ax.set_ylabel(ylabel)
    return ax


def plot_eigenvalues(
    eigenvalues: ArrayLike,
    ax: Axes | None = None,
    *,
    threshold: float | None = 0.95,
    title: str = "Explained variance",
    max_components: int | None = None,
) -> Axes:
    """Bar chart of explained-variance ratios with their cumulative sum.

    Parameters
    ----------
    eigenvalues : array-like
        Eigenvalues (any scale); they are normalised to ratios.
    ax : Axes, optional
    threshold : float or None, default=0.95
        Draws the "keep enough components for this fraction" line.
    title : str
    max_components : int, optional
        Show only the first this many.
    """
    ax = _axes(ax)
    ev = np.clip(np.asarray(eigenvalues, dtype=float), 0, None)
    ratio = ev / ev.sum()
    if max_components is not None:
        ratio_shown = ratio[:max_components]
    else:
        ratio_shown = ratio
    k = np.arange(1, ratio_shown.size + 1)
    ax.bar(k, ratio_shown, color="tab:blue", alpha=0.7, label="per component")
    ax.plot(k, np.cumsum(ratio)[: ratio_shown.size], "o-", color="tab:orange", ms=3, label="cumulative")
    if threshold is not None:
        ax.axhline(threshold, color="tab:red", ls="--", lw=1, label=f"{threshold:.0%}")
    ax.set_xlabel("component k")
    ax.set_ylabel("fraction of variance")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend(loc="center right", fontsize="small")
    return ax


def plot_images(
    images: ArrayLike,
    shape: tuple[int, int] | None = None,
    axes: np.ndarray | None = None,
    *,
    titles: Sequence[str] | None = None,
    n_cols: int = 5,
    cmap: str = "gray",
    suptitle: str = "",
    symmetric: bool = False,
) -> np.ndarray:
    """Show images (rows of a data matrix, or an (n, h, w) stack) in a grid.

    Parameters
    ----------
    images : array-like of shape (n, h*w) or (n, h, w)
    shape : (h, w), optional
        Needed when the images are flattened rows.
    axes : array of Axes, optional
        At least ``n`` axes; created when omitted.
    titles : sequence of str, optional
    n_cols : int, default=5
    cmap : str, default="gray"
    suptitle : str
        Title of the whole figure.
    symmetric : bool, default=False
        Use a colour scale symmetric around 0 (for eigenfaces, whose signs matter).

    Returns
    -------
    ndarray of Axes
    """
    images = np.asarray(images, dtype=float)
    if images.ndim == 2:
        if shape is None:
            side = int(round(np.sqrt(images.shape[1])))
            if side * side != images.shape[1]:
                raise ValueError("pass shape=(h, w) for flattened images that are not square")
            shape = (side, side)
        images = images.reshape(-1, *shape)
    n = images.shape[0]
    if axes is None:
        n_rows = int(np.ceil(n / n_cols))
        fig, axes = plt.subplots(
            n_rows, min(n, n_cols), figsize=(1.6 * min(n, n_cols), 1.8 * n_rows), squeeze=False
        )
        if suptitle:
            fig.suptitle(suptitle)
    axes = np.asarray(axes).ravel()
    for i, ax in enumerate(axes):
        ax.set_xticks([])
        ax.set_yticks([])
        if i >= n:
            ax.set_visible(False)
            continue
        if symmetric:
            lim = np.abs(images[i]).max() or 1.0
            ax.imshow(images[i], cmap="RdBu_r", vmin=-lim, vmax=lim)
        else:
            ax.imshow(images[i], cmap=cmap)
        if titles is not None:
            ax.set_title(titles[i], fontsize="small")
    return axes


def _plot_lines(
    xs: ArrayLike,
    series: Mapping[str, ArrayLike],
    ax: Axes | None,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool,
    logy: bool,
    ms: float,
) -> Axes:
    ax = _axes(ax)
    for name, values in series.items():
        ax.plot(np.asarray(xs), np.asarray(values), "o-", ms=ms, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_timings(
    sizes: ArrayLike,
    timings: Mapping[str, ArrayLike],
    ax: Axes | None = None,
    *,
    xlabel: str = "size",
    title: str = "Run time",
    loglog: bool = True,
) -> Axes:
    """Line plot of timings (seconds) against a size, one line per method."""
    return _plot_lines(
        sizes, timings, ax, xlabel=xlabel, ylabel="seconds", title=title,
        logx=loglog, logy=loglog, ms=6.0,
    )


def plot_errors(
    xs: ArrayLike,
    errors: Mapping[str, ArrayLike],
    ax: Axes | None = None,
    *,
    xlabel: str = "number of components r",
    ylabel: str = "relative error",
    title: str = "Reconstruction error",
    logy: bool = False,
) -> Axes:
    """Error curves against a parameter, one line per named series."""
    return _plot_lines(
        xs, errors, ax, xlabel=xlabel, ylabel=ylabel, title=title, logx=False, logy=logy, ms=3.0
    )


def plot_kernel_matrix(K: ArrayLike, ax: Axes | None = None, *, title: str = "Kernel matrix") -> Axes:
    """Heat map of a kernel matrix with a colour bar."""
    ax = _axes(ax, (4.5, 4.0))
    image = ax.imshow(np.asarray(K, dtype=float), cmap="viridis")
    ax.figure.colorbar(image, ax=ax, fraction=0.046)
    ax.set_title(title)
    ax.set_xlabel("j")
    ax.set_ylabel("i")
    return ax
