"""Where a command's output goes when the Python API runs it (:mod:`attn_cli.api`).

A command ends in :func:`attn_cli.render.console.emit` (the table or the JSON on stdout),
writes its figures with :func:`attn_cli.render.files.save_figure` and its data files with
:func:`attn_cli.render.files.write_text`.  While a :class:`Capture` is :func:`active`, those
three hand what they were given to the capture instead: the typed Result, the object the
JSON is made from, the rich tables, the matplotlib Figures (kept open for the caller, out
of pyplot's list), and the files only when ``write`` is set.
Outside the API nothing is active and the CLI prints and writes as before.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ACTIVE: ContextVar["Capture | None"] = ContextVar("attn_capture", default=None)


@dataclass
class Capture:
    """What one command emitted."""

    write: bool = False  # also write the files (figures, CSV, JSON) into --out
    emitted: bool = False
    result: Any = None  # the typed Result
    data: Any = None  # what --json prints (attn_cli.render.files.result_json), before its JSON encoding
    tables: list = field(default_factory=list)  # rich renderables, as the table on stdout
    run: Any = None  # the pipeline's attn_cli.pipeline.Run: the Result, its outcomes, the files written
    figures: list[tuple[str, Any]] = field(default_factory=list)  # (file name, matplotlib Figure)
    files: list[Path] = field(default_factory=list)  # written (``write``) or that would have been


def active() -> Capture | None:
    """The capture in force, or None (the CLI)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def capturing(write: bool = False):
    """Capture what commands run inside the block emit (see the module docstring)."""
    capture = Capture(write=write)
    token = _ACTIVE.set(capture)
    try:
        yield capture
    finally:
        _ACTIVE.reset(token)


def keep_figure(capture: Capture, fig, path: Path) -> None:
    """Keep ``fig`` (made without pyplot: :func:`attn_cli.render.figures.new_figure`) for the caller."""
    capture.figures.append((Path(path).name, fig))
