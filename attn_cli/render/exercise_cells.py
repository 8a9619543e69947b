"""The cells and titles the exercise tables share (:mod:`.exercises`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attn_cli.render.table import Cell, Table, Text, styled


def titled_table(
    heading: str,
    columns: Sequence[str] = (),
    rows: Iterable[Sequence[Cell]] = (),
    left: Sequence[str] = (),
    caption: str | None = None,
    subtitle: str = "",
) -> Table:
    """A table titled ``heading`` (the exercise's) and ``subtitle``: ``columns`` (right-justified
    except those in ``left``), then ``rows`` of text cells."""
    title = heading + (f"  ({subtitle})" if subtitle else "")
    t = Table(title=title, caption=caption or "")
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    for row in rows:
        t.add_row(*row)
    return t


def fmt(x: float, digits: int = 3) -> str:
    if x != x:
        return "nan"
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.{digits}f}"
    return f"{x:.{max(1, digits - 2)}e}"


def yes_no(ok: bool) -> Text:
    return styled(("yes", "green"), verdict="pass") if ok else styled(("no", "red"), verdict="fail")
