"""``attn diff``: the header's differences, then a table of the checks that changed."""

from __future__ import annotations

from attn_cli.diff import Diff
from attn_cli.render.report import fmt_value
from attn_cli.render.table import Block, Table, styled


def _margin(c: dict | None) -> str:
    m = None if c is None else c.get("margin")
    return "—" if m is None else f"{m:.3f}"


def _status(c: dict | None):
    status = "—" if c is None else c["status"]
    style = {"pass": "green", "fail": "red", "n/a": "red", "skipped": "yellow"}.get(status, "")
    return styled((status, style))


def blocks(d: Diff, everything: bool = False) -> list[Block]:
    out: list[Block] = [f"{name}: {before} -> {after}" for name, before, after in d.header]
    out += d.notes
    rows = d.rows if everything else d.changed
    if rows:
        table = Table(title="checks that changed" if not everything else "every check on both sides")
        for header in ("id", "before", "after", "delta", "verdicts", "margins"):
            table.add_column(header, justify="right" if header in ("delta", "margins") else "left",
                             no_wrap=header in ("verdicts", "margins", "delta"))
        for r in rows:
            delta = r.delta()
            verdicts = styled(*_status(r.before).spans, " -> ", *_status(r.after).spans,
                              verdict="fail" if r.now_failing else "")
            table.add_row(r.id, fmt_value((r.before or {}).get("regenerated"), 24),
                          fmt_value((r.after or {}).get("regenerated"), 24), "" if delta is None else f"{delta:+.3g}",
                          verdicts, f"{_margin(r.before)} -> {_margin(r.after)}")
        out.append(table)
    for word, records in (("new", d.new), ("removed", d.removed)):
        if records:
            out.append(f"{word}: " + ", ".join(c["id"] for c in records))
    out.append(styled((d.summary, "bold red" if d.exit_code else "bold")))
    return out
