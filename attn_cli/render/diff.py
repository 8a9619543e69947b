"""``attn diff``: the header's differences, then a table of the checks that changed."""

from __future__ import annotations

from attn_cli.records import Diff, regenerated
from attn_cli.render.report import STATUS_STYLE, fmt_value, split_id
from attn_cli.render.table import Block, Table, Text, styled


def _margin(c: dict | None) -> str:
    m = None if c is None else c.get("margin")
    return "—" if m is None else f"{m:.3f}"


def _value(c: dict | None) -> str:
    """A regenerated value to 7 significant digits (a moved value differs in its last ones)."""
    value = regenerated(c)
    if isinstance(value, float):
        return f"{value:.7g}"
    text = fmt_value(value, 1000)
    return text if len(text) <= 14 else f"{len(text)} chars"


def _status(c: dict | None) -> Text:
    status = "—" if c is None else c["status"]
    return styled((status, STATUS_STYLE.get(status, "")))


def blocks(d: Diff, everything: bool = False) -> list[Block]:
    out: list[Block] = [f"{name}: {before} -> {after}" for name, before, after in d.header]
    out += d.notes
    rows = d.rows if everything else d.changed
    if rows:
        table = Table(
            title="checks that changed" if not everything else "every check on both sides",
            terminal={"box": "SIMPLE_HEAD", "padding": (0, 0), "pad_edge": False},
        )
        table.add_column("id", no_wrap=True)
        for header in ("before", "after", "delta", "verdicts", "margins"):
            table.add_column(header, justify="left" if header == "verdicts" else "right", no_wrap=True)
        group = None
        for r in rows:
            record = r.after or r.before or {}
            head, name = split_id(r.id, record.get("artifact", ""))
            if head != group:
                table.add_row(styled((head, "bold")), "", "", "", "", "")
                group = head
            delta = r.delta()
            verdicts = styled(
                *_status(r.before).spans, "→", *_status(r.after).spans, verdict="fail" if r.now_failing else ""
            )
            table.add_row(
                "  " + name,
                _value(r.before),
                _value(r.after),
                "" if delta is None else f"{delta:+.2g}",
                verdicts,
                f"{_margin(r.before)}→{_margin(r.after)}",
            )
        out.append(table)
    for word, records in (("new", d.new), ("removed", d.removed)):
        if records:
            out.append(f"{word}: " + ", ".join(c["id"] for c in records))
    out.append(styled((d.summary, "bold red" if d.exit_code else "bold")))
    return out
