"""JSON, CSV and figure writers on :mod:`attn_cli.io` (atomic, umask modes): an interrupted run
never leaves a truncated file behind; and the figures' shared matplotlib helpers (Agg backend, object API)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.core.numerics import stamp
from attn_cli.io import atomic_path, write_text

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, default=_json_default) + "\n")


def write_csv(path: str | os.PathLike, rows: Iterable[Iterable[Any]], header: Iterable[str]) -> Path:
    buf = io.StringIO()
    csv.writer(buf).writerows([header, *rows])
    return write_text(path, buf.getvalue())


FIGURE_FORMATS = ("png", "svg", "pdf")  # what --format offers; png is the default
DPI = 120  # every figure's PNG
FIGURE_KEYWORDS = ("figsize", "layout")  # what new_figure gives the Figure; the rest to Figure.subplots


def save_figure(
    fig: Figure,
    path: str | os.PathLike,
    formats: Iterable[str] = ("png",),
    *,
    tight_layout: dict | None = None,
    keep: list[tuple[str, Figure]] | None = None,
) -> list[Path]:
    """Save a figure once per format (each replaces ``path``'s suffix), atomically: the one place
    figures are saved.  Vector formats keep text as text and carry no date (reproducible bytes);
    ``keep`` gets ``(file name, figure)`` (the Python API's)."""
    import matplotlib

    path = Path(path)
    wanted = list(dict.fromkeys(formats))  # none: no figure file (--no-figures)
    if keep is not None:
        keep.append((path.name, fig))
    unknown = [f for f in wanted if f not in FIGURE_FORMATS]
    if unknown:
        raise ValueError(f"unknown figure format {unknown[0]!r} (choose from {', '.join(FIGURE_FORMATS)})")
    written = []
    old_dpi = fig.dpi
    fig.set_dpi(DPI)  # laid out at the dpi it is drawn at
    try:
        if wanted and tight_layout is not None:
            fig.tight_layout(**tight_layout)
        with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "attn"}):
            for fmt in wanted:
                meta = {"svg": {"Date": None}, "pdf": {"CreationDate": None}, "png": None}[fmt]
                target = path.with_suffix("." + fmt)
                with atomic_path(target, suffix=f".tmp.{fmt}") as tmp:
                    fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format=fmt, metadata=meta)
                written.append(target)
    finally:
        fig.set_dpi(old_dpi)
    return written


def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """``(figure, axes)`` as ``plt.subplots`` returns them, without pyplot: no backend is chosen in
    the caller's process (a notebook keeps its own) and no figure is left open."""
    from attn_cli.store.private import keep_matplotlib_private

    keep_matplotlib_private()  # no font list or rc file from a folder others can change
    from matplotlib.figure import Figure

    fig = Figure(**{k: v for k, v in kwargs.items() if k in FIGURE_KEYWORDS})
    return fig, fig.subplots(nrows, ncols, **{k: v for k, v in kwargs.items() if k not in FIGURE_KEYWORDS})


def no_figures(result: Any, out: Path, formats: Sequence[str], outcomes: Any, keep: list | None = None) -> list[Path]:
    return []  # a renderer of tables only


def log2_axis(ax: Axes, ticks: Sequence[int]) -> None:
    """A base-2 log x axis with each of ``ticks`` labelled and no minor ticks."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, labels=[str(t) for t in ticks])
    ax.xaxis.minorticks_off()


def plain_text(text: str) -> str:
    """Data as literal figure text: every ``$`` escaped (matplotlib reads ``$...$`` as mathtext)."""
    return str(text).replace("$", r"\$")


def heatmap(
    ax: Axes,
    weights: Any,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    vmax: float = 1.0,
    annotate: bool = False,
) -> AxesImage:
    """Draw a weight matrix (rows = queries) with the tokens themselves as tick labels."""
    im = heatmap_frame(ax, len(row_labels), len(col_labels), vmax=vmax)
    fill_heatmap(ax, im, weights, row_labels, col_labels, annotate=annotate)
    return im


def heatmap_frame(ax: Axes, n_rows: int, n_cols: int, *, vmax: float = 1.0) -> AxesImage:
    """A heatmap of this shape before its numbers: zeros on the colour scale, a tick per row and column."""
    import numpy as np

    im = ax.imshow(np.zeros((n_rows, n_cols)), cmap="Blues", vmin=0.0, vmax=vmax, aspect="auto")  # (rows, cols)
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


def _json_default(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def result_json(result: Any, outcomes: Any = None) -> Any:
    """A result as a JSON-ready dict (every command's JSON, ``attn all``'s ``<name>.json``), its numeric
    mode in its ``config``, ``published_beside(outcomes)``'s fields over the dumped ones, and the fields
    its class names in ``TIMING`` under ``timing``: the rest is the same, byte for byte, for one seed."""
    obj = dataclasses.asdict(result) if dataclasses.is_dataclass(result) and not isinstance(result, type) else result
    if outcomes is not None and hasattr(result, "published_beside"):
        obj.update(result.published_beside(outcomes))
    obj = stamp(obj)  # config.numerics
    paths = getattr(type(result), "TIMING", ())
    return split_timing(obj, paths) if paths else obj


def split_timing(obj: dict, paths: Iterable[str]) -> dict:
    """Move the values at ``paths`` (``"runs.*.seconds"``) out of ``obj`` into ``obj["timing"]`` (in place)."""
    timing: dict = {}
    for path in paths:
        _move(obj, timing, path.split("."))
    obj["timing"] = timing
    return obj


def _move(src: Any, dst: Any, parts: list[str]) -> None:
    key, rest = parts[0], parts[1:]
    if key == "*" and isinstance(src, list) and rest:
        dst.extend({} for _ in range(len(src) - len(dst)))
        for item, into in zip(src, dst):
            _move(item, into, rest)
    elif key != "*" and isinstance(src, dict) and key in src:
        if not rest:
            dst[key] = src.pop(key)
        elif isinstance(src[key], (list, dict)):
            _move(src[key], dst.setdefault(key, [] if isinstance(src[key], list) else {}), rest)
