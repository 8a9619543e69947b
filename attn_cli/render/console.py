"""Consoles: stdout carries the table (or JSON); stderr carries progress and notes."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

class _Console(Console):
    def on_broken_pipe(self) -> None:
        """A reader that left (``attn list | head``) is the CLI's to end, with exit 141, not rich's
        ``SystemExit(1)``."""
        raise BrokenPipeError(32, "Broken pipe")


stdout = _Console(soft_wrap=False)
stderr = _Console(stderr=True)


def note(message: str) -> None:
    """A note for the user on stderr (never mixed into --json output), printed as written:
    paths, words and reasons are data, never rich markup."""
    stderr.print(message, style="dim", highlight=False, markup=False)


def emit(result: Any, renderables, as_json: bool, *, run: Any = None) -> None:
    """Print ``result`` as JSON (``run.json()`` for a pipeline :class:`attn_cli.pipeline.Run`, the
    same for every command) or the rich renderables on stdout."""
    if not as_json:
        for r in renderables if isinstance(renderables, (list, tuple)) else [renderables]:
            stdout.print(r)
        return
    from attn_cli.render.files import _json_default, result_json

    data = run.json() if run is not None else None if result is None else result_json(result)
    print(json.dumps(data, indent=2, default=_json_default))


def check_table(title: str, rows, caption: str | None = None):
    """A rich table of regenerated values beside the published ones.

    rows: ``(quantity, regenerated, published, verdict)`` with text cells; verdict is True
    (within the check's tolerance), False, None (no published value) or a short string
    (:func:`verdict` of an Outcome gives one).
    """
    from rich.table import Table

    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    table.add_column("quantity")
    table.add_column("regenerated", justify="right")
    table.add_column("published", justify="right")
    table.add_column("", justify="center")
    for quantity, regenerated, published, verdict in rows:
        mark = {True: "[green]ok[/]", False: "[red]DIFF[/]", None: ""}.get(verdict, verdict) \
            if isinstance(verdict, (bool, type(None))) else str(verdict)
        table.add_row(quantity, regenerated, published, mark)
    return table


def verdict(outcome) -> bool | str | None:
    """The verdict cell of one Outcome (``attn_cli.published.compare``): True / False for a
    measured value or a rule, "identity" for an identity that holds (shown, not evidence),
    "n/a" where the settings are not the text's, None without an outcome."""
    if outcome is None:
        return None
    if outcome.status == "pass" and outcome.kind == "identity":
        return "[dim]identity[/]"
    if outcome.status in ("pass", "fail"):
        return outcome.status == "pass"
    return outcome.status


def not_text_caption(outcomes) -> str:
    """"; n/a: settings differ from the text's" when some outcome does not apply, else ""."""
    from attn_cli.published.compare import NOT_TEXT

    return f"; {NOT_TEXT}" if any(o.status == "n/a" for o in outcomes) else ""
