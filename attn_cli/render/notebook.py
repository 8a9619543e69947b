"""HTML for Jupyter: a Run's tables, verdicts and figures, shown by its ``_repr_html_``."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from attn_cli.published.compare import Outcome


def outcomes_html(outcomes: Iterable[Outcome]) -> str:
    """The checks as an HTML table: ID, regenerated, published, tolerance, kind, verdict."""
    rows = []
    colour = {"pass": "#1a7f37", "fail": "#cf222e"}
    for o in outcomes:
        regenerated = "" if o.as_json()["regenerated"] is None else o.regenerated
        status = o.status if not o.note or o.status == "pass" else f"{o.status}: {o.note}"
        cells = [o.check.id, regenerated, o.published, o.tolerance, o.kind]
        rows.append(
            "<tr>"
            + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
            + f"<td style='color:{colour.get(o.status, '#6e7781')}'>{html.escape(status)}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("check", "regenerated", "published", "tolerance", "kind", "verdict"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def png64(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")
