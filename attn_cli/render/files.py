"""Atomic file writing: a temp file in the same folder, then ``os.replace``.

An interrupted run never leaves a truncated PNG, JSON or CSV behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside ``path``; on success rename it onto ``path``, else delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or path.suffix + ".tmp",
                               dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


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


def save_figure(fig, path: str | os.PathLike, formats: Iterable[str] = DEFAULT_FORMATS, *, dpi: int = 120,
                metadata: dict[str, str] | None = None) -> list[Path]:
    """Save a matplotlib figure once per format and close it; the one place figures are saved.

    ``path`` names the figure (``masks.png``); each format replaces its suffix (``masks.svg``,
    ``masks.pdf``). Each file is written to a temp file in the same folder, then renamed
    (atomic). Vector formats keep text as text (SVG ``<text>``, PDF TrueType fonts), so a
    slide or a paper can restyle it. ``metadata`` (PNG text chunks) goes into the PNG only.
    Returns the paths written, in the order of ``formats``.
    """
    import matplotlib
    import matplotlib.pyplot as plt

    path = Path(path)
    wanted = list(dict.fromkeys(formats)) or list(DEFAULT_FORMATS)
    unknown = [f for f in wanted if f not in FIGURE_FORMATS]
    if unknown:
        plt.close(fig)
        raise ValueError(f"unknown figure format {unknown[0]!r} (choose from {', '.join(FIGURE_FORMATS)})")
    written = []
    try:
        with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "attn"}):
            for fmt in wanted:
                target = path.with_suffix("." + fmt)
                extra = {"metadata": metadata} if metadata and fmt == "png" else {}
                if fmt == "svg":
                    extra = {"metadata": {"Date": None}}  # reproducible bytes: no timestamp
                elif fmt == "pdf":
                    extra = {"metadata": {"CreationDate": None}}
                with atomic_path(target, suffix=f".tmp.{fmt}") as tmp:
                    fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=fmt, **extra)
                written.append(target)
    finally:
        plt.close(fig)
    return written


def _json_default(obj: Any):
    import dataclasses

    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
