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
