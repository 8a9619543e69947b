"""Consoles: stdout carries the table (or JSON); stderr carries progress and notes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rich.console import Console

stdout = Console(soft_wrap=False)
stderr = Console(stderr=True)


def note(message: str) -> None:
    """A note for the user on stderr (never mixed into --json output)."""
    stderr.print(message, style="dim", highlight=False)


def emit(result: Any, renderables, as_json: bool) -> None:
    """Print ``result`` as JSON (``dataclasses.asdict``) or the rich renderables on stdout."""
    if as_json:
        from attn_cli.render.files import _json_default

        obj = dataclasses.asdict(result) if dataclasses.is_dataclass(result) else result
        print(json.dumps(obj, indent=2, default=_json_default))
        return
    if not isinstance(renderables, (list, tuple)):
        renderables = [renderables]
    for r in renderables:
        stdout.print(r)
