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


def write_text(path: str | os.PathLike, text: str) -> Path:
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


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Save a matplotlib figure atomically as PNG and close it."""
    import matplotlib.pyplot as plt

    try:
        with atomic_path(path, suffix=".tmp.png") as tmp:
            fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
    finally:
        plt.close(fig)
    return Path(path)


def _json_default(obj: Any):
    import dataclasses

    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
