"""Consoles: stdout carries the table (or JSON); stderr carries progress and notes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

from attn_cli.render.table import Block, Cell, Column, Table, Text, styled, to_rich

if TYPE_CHECKING:
    from attn_cli.published.compare import Outcome


class _Console(Console):
    def on_broken_pipe(self) -> None:  # a reader that left (attn list | head): exit 141, not rich's SystemExit(1)
        raise BrokenPipeError(32, "Broken pipe")


stdout = _Console(soft_wrap=False)
stderr = _Console(stderr=True)


def note(message: str) -> None:
    """A note for the user on stderr, printed as written (data, never rich markup)."""
    stderr.print(message, style="dim", highlight=False, markup=False)


def emit(result: Any, blocks: Sequence[Block], as_json: bool, *, run: Any = None) -> None:
    """Print ``result`` as JSON (``run.json()`` for a pipeline Run) or the blocks on stdout."""
    if not as_json:
        for b in blocks:
            stdout.print(to_rich(b))
        return
    from attn_cli.render.files import _json_default, result_json

    data = run.json() if run is not None else None if result is None else result_json(result)
    print(json.dumps(data, indent=2, default=_json_default))


def mark(ok: bool | None) -> Cell:
    """The verdict cell of a claim: ok (green), DIFF (red), or empty without one."""
    if ok is None:
        return ""
    return styled(("ok", "green"), verdict="pass") if ok else styled(("DIFF", "red"), verdict="fail")


def beside(text: str, ok: bool, published: str, difference: str = "") -> Text:
    """A regenerated value, ``=`` (or ``≠`` and the difference) by its verdict, the published one dimmed."""
    sign = ("=", "green") if ok else ("≠" + (f" ({difference})" if difference else ""), "red")
    return styled(f"{text} ", sign, " ", (published, "dim"), verdict="pass" if ok else "fail")


CheckRow = tuple[Cell, Cell, Cell, bool | Cell | None]  # check_table's row: quantity, regenerated, published, verdict


def check_table(title: str, rows: Iterable[CheckRow], caption: str | None = None) -> Table:
    """Regenerated values beside the published ones; a row's verdict is a bool or None
    (:func:`mark`) or a cell (:func:`verdict`)."""
    columns = [Column("quantity"), Column("regenerated", "right"), Column("published", "right"), Column("", "center")]
    table = Table(title=title, caption=caption or "", columns=columns)
    for quantity, regenerated, published, ok in rows:
        table.add_row(quantity, regenerated, published, mark(ok) if isinstance(ok, (bool, type(None))) else ok)
    return table


def verdict(outcome: Outcome | None) -> Cell:
    """The verdict cell of one Outcome: ok / DIFF, "identity" for an identity that holds (shown,
    not evidence), else the status ("n/a", "skipped")."""
    if outcome is None:
        return ""
    if outcome.status == "pass" and outcome.kind == "identity":
        return styled(("identity", "dim"))
    if outcome.status in ("pass", "fail"):
        return mark(outcome.status == "pass")
    return styled(outcome.status, verdict="skip" if outcome.status == "skipped" else "")


def not_text_caption(outcomes: Iterable[Outcome]) -> str:
    """ "; n/a: settings differ from the text's" when some outcome does not apply, else ""."""
    from attn_cli.published.compare import NOT_TEXT

    return f"; {NOT_TEXT}" if any(o.status == "n/a" for o in outcomes) else ""
