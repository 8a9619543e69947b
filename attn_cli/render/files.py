"""JSON, CSV and PNG writers on top of :mod:`attn_cli.io` (atomic, umask modes, one-line errors).

An interrupted run never leaves a truncated PNG, JSON or CSV behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.io import atomic_path, write_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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


def save_figure(
    fig: Figure,
    path: str | os.PathLike,
    formats: Iterable[str] = DEFAULT_FORMATS,
    *,
    dpi: int = DPI,
    metadata: dict[str, str] | None = None,
    tight_layout: dict | None = None,
    keep: list[tuple[str, Figure]] | None = None,
) -> list[Path]:
    """Save a matplotlib figure once per format, atomically; the one place figures are saved.

    ``path`` names the figure (``masks.png``); each format replaces its suffix. Vector formats
    keep text as text, so a slide or a paper can restyle it, and carry no date, so their bytes
    are reproducible. ``metadata`` (PNG text chunks) goes into the PNG only. ``tight_layout``:
    ``fig.tight_layout(**tight_layout)`` first, at the dpi it is saved at. Returns the paths
    written, in the order of ``formats``. ``keep``: ``(file name, figure)`` is appended there
    (the Python API's figures).
    """
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
    fig.set_dpi(dpi)  # laid out at the dpi it is drawn at
    try:
        if wanted and tight_layout is not None:
            fig.tight_layout(**tight_layout)
        with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "attn"}):
            for fmt in wanted:
                extra: Any = {  # keyword arguments of savefig, per format
                    "png": {"metadata": metadata} if metadata else {},
                    "svg": {"metadata": {"Date": None}},
                    "pdf": {"metadata": {"CreationDate": None}},
                }[fmt]
                target = path.with_suffix("." + fmt)
                with atomic_path(target, suffix=f".tmp.{fmt}") as tmp:
                    fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=fmt, **extra)
                written.append(target)
    finally:
        fig.set_dpi(old_dpi)
    return written


def _json_default(obj: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# --------------------------------------------------------------------------- timings apart


def result_json(result: Any, outcomes: Any = None) -> Any:
    """A result as a JSON-ready dict (the JSON of every command and of ``attn all``'s
    ``<name>.json``), the numeric mode and CPU kernels recorded in its ``config``.

    ``outcomes`` (check ID -> Outcome): where the Result has ``published_beside(outcomes)``
    (the copy task), the fields it returns replace the dumped ones.  The fields a Result class
    names in ``TIMING`` (dotted paths, ``*`` for every item of a list: ``"runs.*.seconds"``)
    move, in the same structure, under ``timing``, so that everything else is the same, byte
    for byte, for two runs with the same seed.
    """
    import dataclasses

    from attn_cli.core.numerics import stamp

    obj = dataclasses.asdict(result) if dataclasses.is_dataclass(result) and not isinstance(result, type) else result
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
