"""JSON, CSV and PNG writers on top of :mod:`attn_cli.io` (atomic, umask modes, one-line errors).

An interrupted run never leaves a truncated PNG, JSON or CSV behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Iterable

from attn_cli import io as io_
from attn_cli.io import atomic_path  # noqa: F401  (re-exported: render modules use it)
from attn_cli.render import capture as _capture
from attn_cli.render import save_processes


def write_text(path: str | os.PathLike, text: str) -> Path:
    capture = _capture.active()  # the Python API: written only when asked
    if capture is not None:
        capture.files.append(Path(path))
        if not capture.write:
            return Path(path)
    return io_.write_text(path, text)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, default=_json_default) + "\n")


def write_csv(path: str | os.PathLike, rows: Iterable[Iterable[Any]], header: Iterable[str] | None = None) -> Path:
    buf = io.StringIO()
    writer = csv.writer(buf)
    if header is not None:
        writer.writerow(list(header))
    for row in rows:
        writer.writerow(list(row))
    return write_text(path, buf.getvalue())


FIGURE_FORMATS = ("png", "svg", "pdf")  # what --format offers; png is the default
DEFAULT_FORMATS = ("png",)


DPI = 120  # every figure's PNG


def save_figure(fig, path: str | os.PathLike, formats: Iterable[str] = DEFAULT_FORMATS, *, dpi: int = DPI,
                metadata: dict[str, str] | None = None, tight_layout: dict | None = None,
                box=None) -> list[Path]:
    """Save a matplotlib figure once per format and close it; the one place figures are saved.

    ``path`` names the figure (``masks.png``); each format replaces its suffix (``masks.svg``,
    ``masks.pdf``). Each file is written to a temp file in the same folder, then renamed
    (atomic). Vector formats keep text as text (SVG ``<text>``, PDF TrueType fonts), so a
    slide or a paper can restyle it. ``metadata`` (PNG text chunks) goes into the PNG only.
    Returns the paths written, in the order of ``formats``; no format: no file (the figure is
    only closed).  Inside :func:`attn_cli.render.save_processes.in_parallel` a forked child saves
    it (the same bytes) while the caller builds the next figure; the files are complete when
    that block ends.  ``tight_layout``: ``fig.tight_layout(**tight_layout)`` just before saving
    (``{}``: its defaults), part of the save, so a child does it too (it measures every text;
    moved there, the copy task's figures are built in 0.03-0.17 s each instead of 0.09-0.32).
    The figure is laid out at the dpi it is saved at, and a PNG is rasterised once
    (:func:`_png_drawn_once`: savefig's tight box draws twice): the copy task's four maps take
    0.77x the CPU time they took (medians of 8 alternating rounds, in one process).
    ``box``: the box to crop to, in inches, where the figure was laid out beforehand
    (:func:`lay_out`; no ``tight_layout`` then): the save then measures none of its texts.
    """
    from attn_cli.private import keep_matplotlib_private

    keep_matplotlib_private()  # no font list or rc file from a folder others can change
    import matplotlib.pyplot as plt

    path = Path(path)
    wanted = list(dict.fromkeys(formats))  # none: no figure file (--no-figures)
    capture = _capture.active()  # the Python API keeps the Figure; files only when asked
    if capture is not None:
        if wanted and tight_layout is not None:  # the Figure handed back is laid out as it is saved
            fig.tight_layout(**tight_layout)
            tight_layout = None
        _capture.keep_figure(capture, fig, path)
        capture.files += [path.with_suffix("." + f) for f in wanted if f in FIGURE_FORMATS]
        if not capture.write:
            return [path.with_suffix("." + f) for f in wanted]
    unknown = [f for f in wanted if f not in FIGURE_FORMATS]
    if unknown or not wanted:
        plt.close(fig)
        if unknown:
            raise ValueError(f"unknown figure format {unknown[0]!r} (choose from {', '.join(FIGURE_FORMATS)})")
        return []

    def save() -> list[Path]:
        return _save_formats(fig, path, wanted, dpi, metadata, tight_layout, box)

    children = save_processes.active()  # inside an experiment's figures: saved by a child while the next is built
    if capture is None and children is not None and children.submit(save, lambda: plt.close(fig)):
        return [path.with_suffix("." + f) for f in wanted]
    try:
        return save()
    finally:
        plt.close(fig)


def lay_out(fig, dpi: int = DPI):
    """Lay ``fig`` out now as :func:`save_figure` would (``tight_layout`` at the save dpi) and
    return the box its save crops to (the tight box plus ``savefig.pad_inches``, in inches):
    ``save_figure(..., box=box)`` then measures no text.  For a figure whose texts cannot move
    its layout once built (:mod:`attn_cli.render.frames`: the copy task's maps, laid out before
    their numbers; the figure code checks what could still move it).  Nothing is drawn here:
    a drawing (to have the save reuse its renderer) cost the copy task's four maps 0.4-0.6 s of
    CPU in the figure drawer, on the core beside the command's torch import, and saved the save
    no measurable time."""
    import matplotlib

    old_dpi = fig.dpi
    fig.set_dpi(dpi)
    try:
        fig.tight_layout()
        box = fig.get_tightbbox(fig.canvas.get_renderer())
    finally:
        fig.set_dpi(old_dpi)
    return box.padded(matplotlib.rcParams["savefig.pad_inches"])


def _save_formats(fig, path: Path, wanted: list[str], dpi: int, metadata: dict[str, str] | None,
                  tight_layout: dict | None, box=None) -> list[Path]:
    """``fig`` laid out (``tight_layout``) and saved atomically in each of ``wanted``, in this
    process (or a child of :mod:`attn_cli.render.save_processes`, with the same bytes);
    ``box``: cropped to it (:func:`lay_out`), not to a box measured now."""
    old_dpi = fig.dpi
    fig.set_dpi(dpi)  # laid out at the dpi it is drawn at: the texts are measured once, for both
    try:
        if tight_layout is not None:
            fig.tight_layout(**tight_layout)
        return _write_formats(fig, path, wanted, dpi, metadata, box)
    finally:
        fig.set_dpi(old_dpi)


def _write_formats(fig, path: Path, wanted: list[str], dpi: int, metadata: dict[str, str] | None,
                   box=None) -> list[Path]:
    import matplotlib

    written = []
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "attn"}):
        for fmt in wanted:
            target = path.with_suffix("." + fmt)
            extra = {"metadata": metadata} if metadata and fmt == "png" else {}
            if fmt == "svg":
                extra = {"metadata": {"Date": None}}  # reproducible bytes: no timestamp
            elif fmt == "pdf":
                extra = {"metadata": {"CreationDate": None}}
            with atomic_path(target, suffix=f".tmp.{fmt}") as tmp:
                if fmt != "png" or not _png_drawn_once(fig, tmp, dpi, metadata, box):
                    fig.savefig(tmp, dpi=dpi, bbox_inches="tight" if box is None else box, format=fmt, **extra)
            written.append(target)
    return written


def _png_drawn_once(fig, target: Path, dpi: int, metadata: dict[str, str] | None, box=None) -> bool:
    """``fig`` (its dpi already ``dpi``) written as ``savefig(target, dpi=dpi,
    bbox_inches="tight")`` writes it, with one drawing fewer (``box``: as ``bbox_inches=box``
    writes it, the box measured beforehand: :func:`lay_out`).

    ``savefig`` with a tight box draws the figure twice: once to measure it (every text laid
    out, every image resampled and colour-mapped), then again shifted onto a canvas of the
    box's size.  Here it is drawn on its own canvas and the tight box (plus
    ``savefig.pad_inches``) is measured on that drawing.  Where the box lies inside the canvas
    (the common case) its pixels are cropped out and written (:func:`_write_png`): the same
    size and content as savefig's, edges up to a fraction of a pixel apart (savefig draws at the
    box's exact origin, this crops at a whole pixel).  Where it reaches past the canvas (a title
    wider than the figure) the figure is drawn once more onto the box's canvas, as savefig does
    (its ``_tight_bbox.adjust_bbox``): savefig's bytes.  False (nothing written) where that
    private helper is gone, the Figure's canvas is not Agg's, or it has a layout engine
    (constrained layout sizes a shared colorbar only over savefig's two drawings; drawn once,
    the embeddings' colorbar came out three times as wide): then savefig itself.
    """
    import matplotlib
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    if not isinstance(fig.canvas, FigureCanvasAgg):  # a Figure kept by the Python API: savefig switches canvases
        return False
    engine = fig.get_layout_engine()  # after tight_layout(): a placeholder, which lays nothing out
    if engine is not None and not isinstance(engine, PlaceHolderLayoutEngine):
        return False  # constrained layout settles over savefig's two drawings
    fig.canvas.draw()  # (H, W) pixels at this dpi
    renderer = fig.canvas.get_renderer()
    if box is None:
        box = fig.get_tightbbox(renderer).padded(matplotlib.rcParams["savefig.pad_inches"])  # inches
    width, height = fig.get_size_inches()
    if box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height:
        pixels = np.asarray(fig.canvas.buffer_rgba())  # (H, W, 4), top row first
        w, h = int(box.width * dpi), int(box.height * dpi)  # the canvas savefig would make (Agg truncates)
        # savefig puts the box's lower-left corner at its canvas's origin (Agg's y runs up)
        left, bottom = round(box.x0 * dpi), pixels.shape[0] - round(box.y0 * dpi)
        _write_png(target, pixels[max(bottom - h, 0):bottom, left:left + w], dpi, metadata)  # slices clip
        return True
    try:
        from matplotlib import _tight_bbox

        restore = _tight_bbox.adjust_bbox(fig, box, renderer, fig.canvas.fixed_dpi)
    except (ImportError, AttributeError, TypeError):  # a matplotlib without this private helper
        return False
    try:
        fig.canvas.draw()  # savefig's second drawing: the box's canvas
        _write_png(target, np.asarray(fig.canvas.buffer_rgba()), dpi, metadata)
    finally:
        restore()
    return True


def _write_png(target: Path, pixels, dpi: int, metadata: dict[str, str] | None) -> None:
    """(H, W, 4) uint8 pixels as a PNG with the text chunks matplotlib's writer puts there
    (``Software``, then ``metadata``) and the dpi, by :mod:`attn_cli.render.png`.  An opaque
    image (every alpha 255: every figure attn draws) is written as RGB:
    the same pixels, 12% fewer bytes than RGBA (what savefig writes)."""
    import matplotlib

    from attn_cli.render import png

    software = f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/"
    text = {k: v for k, v in {"Software": software, **(metadata or {})}.items() if v is not None}
    opaque = bool((pixels[..., 3] == 255).all())
    png.write(target, pixels[..., :3] if opaque else pixels, dpi, text)  # (H, W, 3): RGB


def _json_default(obj: Any):
    import dataclasses

    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# --------------------------------------------------------------------------- timings apart

def result_json(result: Any, outcomes: Any = None) -> Any:
    """A result as a JSON-ready dict, its wall-clock values moved under one ``timing`` key, the
    numeric mode and CPU kernels recorded in its ``config`` (:func:`attn_cli.numerics.stamp`).
    The JSON of every command and of ``attn all``'s ``<name>.json``.

    ``outcomes`` (check ID -> Outcome): where the Result has ``published_beside(outcomes)``
    (the copy task), the fields it returns replace the dumped ones (its cells with the text's
    values and verdicts beside the regenerated ones).

    A Result class names its timing fields in ``TIMING`` (dotted paths, ``*`` for every item
    of a list: ``"runs.*.seconds"``); they leave their places and reappear, in the same
    structure, under ``timing``.  Everything else is then the same, byte for byte, for two
    runs with the same seed.
    """
    import dataclasses

    from attn_cli.numerics import stamp

    obj = dataclasses.asdict(result) if dataclasses.is_dataclass(result) else result
    if outcomes is not None and hasattr(result, "published_beside"):
        obj.update(result.published_beside(outcomes))
    obj = stamp(obj)  # config.numerics
    paths = getattr(type(result), "TIMING", ())
    return split_timing(obj, paths) if paths else obj


def split_timing(obj: dict, paths: Iterable[str]) -> dict:
    """Move the values at ``paths`` out of ``obj`` into ``obj["timing"]`` (in place)."""
    timing: dict = {}
    for path in paths:
        _move(obj, timing, path.split("."))
    obj["timing"] = timing
    return obj


def _move(src: Any, dst: Any, parts: list[str]) -> None:
    key, rest = parts[0], parts[1:]
    if key == "*":
        if not isinstance(src, list) or not rest:
            return
        for i, item in enumerate(src):
            while len(dst) <= i:
                dst.append({})
            _move(item, dst[i], rest)
        return
    if not isinstance(src, dict) or key not in src:
        return
    if not rest:
        dst[key] = src.pop(key)
        return
    child = src[key]
    if isinstance(child, (list, dict)):
        _move(child, dst.setdefault(key, [] if isinstance(child, list) else {}), rest)
