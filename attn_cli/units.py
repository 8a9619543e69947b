"""Units as people read them (no torch, no rich): shared by the core's messages and render."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """Decimal units up to PB; past 1000 PB in scientific notation (``1.2e+08 PB``)."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            break
        n /= 1000
    if unit == "B":
        return f"{int(n)} B"
    return f"{n:.1f} {unit}" if abs(n) < 1000 else f"{n:.2g} {unit}"
