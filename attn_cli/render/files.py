"""JSON, CSV and figure writers on :mod:`attn_cli.io` (atomic, umask modes): an interrupted run
never leaves a truncated file behind."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.core.numerics import stamp
from attn_cli.io import atomic_path, write_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, default=_json_default) + "\n")


def write_csv(path: str | os.PathLike, rows: Iterable[Iterable[Any]], header: Iterable[str]) -> Path:
    buf = io.StringIO()
    csv.writer(buf).writerows([header, *rows])
    return write_text(path, buf.getvalue())


FIGURE_FORMATS = ("png", "svg", "pdf")  # what --format offers; png is the default
DPI = 120  # every figure's PNG


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
    if key == "*":
        if isinstance(src, list) and rest:
            dst.extend({} for _ in range(len(src) - len(dst)))
            for item, into in zip(src, dst):
                _move(item, into, rest)
        return
    if not isinstance(src, dict) or key not in src:
        return
    if not rest:
        dst[key] = src.pop(key)
        return
    child = src[key]
    if isinstance(child, (list, dict)):
        _move(child, dst.setdefault(key, [] if isinstance(child, list) else {}), rest)
