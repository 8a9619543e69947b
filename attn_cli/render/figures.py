"""Shared matplotlib helpers (Agg backend, object API)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

FIGURE_KEYWORDS = ("figsize", "layout")  # what goes to the Figure; the rest to Figure.subplots


def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """``(figure, axes)`` as ``plt.subplots`` returns them, without pyplot: no backend is chosen in
    the caller's process (a notebook keeps its own) and no figure is left open."""
    from attn_cli.store.private import keep_matplotlib_private

    keep_matplotlib_private()  # no font list or rc file from a folder others can change
    from matplotlib.figure import Figure

    fig = Figure(**{k: v for k, v in kwargs.items() if k in FIGURE_KEYWORDS})
    return fig, fig.subplots(nrows, ncols, **{k: v for k, v in kwargs.items() if k not in FIGURE_KEYWORDS})


def plain_text(text: str) -> str:
    """Data as literal figure text: every ``$`` escaped (matplotlib reads ``$...$`` as mathtext)."""
    return str(text).replace("$", r"\$")


def heatmap(
    ax: Axes,
    weights: Any,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    vmin: float = 0.0,
    vmax: float = 1.0,
    cmap: str = "Blues",
    annotate: bool = False,
) -> AxesImage:
    """Draw a weight matrix (rows = queries) with the tokens themselves as tick labels."""
    im = heatmap_frame(ax, len(row_labels), len(col_labels), vmin=vmin, vmax=vmax, cmap=cmap)
    fill_heatmap(ax, im, weights, row_labels, col_labels, annotate=annotate)
    return im


def heatmap_frame(
    ax: Axes, n_rows: int, n_cols: int, *, vmin: float = 0.0, vmax: float = 1.0, cmap: str = "Blues"
) -> AxesImage:
    """A heatmap of this shape before its numbers: zeros on the colour scale, a tick per row and column."""
    import numpy as np

    im = ax.imshow(np.zeros((n_rows, n_cols)), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")  # (rows, cols)
    ax.set_xticks(range(n_cols))
    ax.set_yticks(range(n_rows))
    return im


def fill_heatmap(
    ax: Axes,
    im: AxesImage,
    weights: Any,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    annotate: bool = False,
) -> None:
    """A :func:`heatmap_frame`'s (rows, cols) weights, tick labels and, with ``annotate``, values (2 decimals)."""
    im.set_data(weights)
    ax.set_xticklabels([plain_text(c) for c in col_labels])
    ax.set_yticklabels([plain_text(r) for r in row_labels])
    if annotate:
        vmin, vmax = im.get_clim()
        # centred in its cell, inside the axes: left out of the layout (the same pixels, less work)
        centred: dict[str, Any] = {"ha": "center", "va": "center", "fontsize": 7, "in_layout": False}
        for i, row in enumerate(weights):
            for j, w in enumerate(row):
                ax.text(j, i, f"{w:.2f}", color="white" if w > 0.6 * (vmax - vmin) + vmin else "black", **centred)
