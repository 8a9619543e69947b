"""Bytes as people read them (no torch, no rich): shared by the core's messages and render."""

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


def text_memory(nbytes: float) -> str:
    """Format bytes as W9 3.4 does: MB below 1e9 bytes, GB above, one decimal."""
    unit, value = ("MB", nbytes / 1e6) if nbytes < 1e9 else ("GB", nbytes / 1e9)
    return f"{value:.1f} {unit}"
