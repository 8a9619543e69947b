"""Table and figure for ``attn masks`` (W9 4.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.published.catalogue import BY_ID
from attn_cli.render.console import CheckRow, beside, check_table, verdict
from attn_cli.render.table import Cell, Table, styled

if TYPE_CHECKING:
    from attn_cli.experiments.masks import Result

PNG, CSV = BY_ID["w9-masks"].files


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v else "0"


def tables(result: Result, outcomes: Mapping) -> list:
    """``outcomes``: check ID -> Outcome, the verdicts the marks show."""
    comparable = all(x.status != "n/a" for x in outcomes.values())
    return [_weights_table(result, outcomes, comparable), _checks_table(result, outcomes, comparable)]


def _weights_table(result: Result, o: Mapping, comparable: bool) -> Table:
    """The causal weights and row sums, each beside the text's where the settings are the text's."""
    causal, sums = o["w9-masks.causal_weights"].published, o["w9-masks.row_sums"].published
    weights = Table(
        title=f"W9 4.2  causal attention weights (row = position looking, column = position "
        f"looked at; seed {result.config['seed']})",
        caption="each cell: regenerated (rounded to 2 decimals as the text prints), then the text's",
    )
    weights.add_column("query", justify="right")
    for j in result.positions:
        weights.add_column(f"key {j}", justify="right")
    weights.add_column("row sum", justify="right")
    for i, row in enumerate(result.causal_weights_rounded):
        cells: list[Cell] = []
        for j, v in enumerate(row):
            pub = causal[i][j] if comparable and i < len(causal) and j < len(causal[i]) else None
            if pub is None:
                cells.append(_fmt(v))
            else:
                cells.append(beside(_fmt(v), abs(v - pub) < 1e-9, _fmt(pub)))
        s = result.row_sums[i]
        if comparable and i < len(sums):
            noise = "" if s == sums[i] else ", float32 noise"
            cells.append(styled(f"{s!r} ", (f"(text {sums[i]!r}{noise})", "dim")))
        else:
            cells.append(repr(s))
        weights.add_row(str(i), *cells)
    return weights


def _checks_table(result: Result, o: Mapping, comparable: bool) -> Table:
    """Row sums, the causal mask keeping the past, the padding weight, the core softmax."""
    n = len(result.positions)
    sums = o["w9-masks.row_sums"].published
    checks_rows: list[CheckRow] = []

    def add(check_id: str, quantity: str, regenerated_text: str, published_text: str | None = None) -> None:
        outcome = o[check_id]
        published_text = published_text or repr(outcome.published)
        if comparable:
            checks_rows.append((quantity, regenerated_text, published_text, verdict(outcome)))
        else:
            checks_rows.append((quantity, regenerated_text, styled((published_text, "dim")), styled("n/a")))

    last = result.config["changed_from"]
    add(
        "w9-masks.row_sums",
        "rows still sum to 1",
        f"max |sum - 1| = {max(abs(s - 1) for s in result.row_sums):.1e}",
        f"max |sum - 1| = {max(abs(s - 1) for s in sums):.1e}",
    )
    add(
        "w9-masks.past_unchanged",
        f"causal: outputs at 0..{last - 1} unchanged when tokens {last}..{n - 1} change",
        f"{result.past_unchanged_with_mask} (max change {result.past_max_abs_change_with_mask:.1e})",
    )
    add(
        "w9-masks.changes_without_mask",
        "no mask: they change (the future leaks)",
        f"{result.past_changes_without_mask} (max change {result.past_max_abs_change_without_mask:.2f})",
    )
    add(
        "w9-masks.padding_weight.text_recipe",
        f"padding mask on {result.config['padding_from']}..{n - 1}: weight on padding (the text's masked_fill(-inf))",
        repr(result.padding_weight_text),
    )
    add(
        "w9-masks.padding_weight",
        "  the same through the package's masked_softmax (0 by masked_fill)",
        repr(result.padding_weight),
    )
    checks_rows.append(
        (
            "core keep-mask softmax == text's masked_fill(-inf)",
            f"{result.core_equals_text} (max diff {result.core_max_abs_diff:.1e})",
            "(not printed)",
            result.core_equals_text,
        )
    )
    caption = None if comparable else "not the text's settings (seed 0, n 5, d 4): published values do not apply"
    return check_table("W9 4.2  mask checks", checks_rows, caption=caption)


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    from attn_cli.render.figures import heatmap, new_figure
    from attn_cli.render.files import save_figure, write_csv

    pos = result.positions
    pad_from = result.config["padding_from"]
    fig, (ax1, ax2) = new_figure(1, 2, figsize=(10, 4.4))
    im = heatmap(ax1, result.causal_weights, [f"t{i}" for i in pos], [f"t{j}" for j in pos], annotate=True)
    ax1.set_title("causal mask (no peeking ahead)", fontsize=10)
    heatmap(
        ax2,
        result.padding_weights,
        [f"t{i}" for i in pos],
        [f"t{j}" + ("\n(pad)" if j >= pad_from else "") for j in pos],
        annotate=True,
    )
    ax2.set_title(f"padding mask (t{pad_from}..t{pos[-1]} are padding)", fontsize=10)
    for ax in (ax1, ax2):
        ax.set_xlabel("key position (looked at)")
        ax.set_ylabel("query position (looking)")
    fig.colorbar(im, ax=[ax1, ax2], label="attention weight", shrink=0.9)
    fig.suptitle(
        f"W9 4.2: masked self-attention weights (n={len(pos)}, d={result.config['d_k']}, seed {result.config['seed']})"
    )
    images = save_figure(fig, out / PNG, formats, keep=keep)
    rows = [
        [name, i, j, w]
        for name, mat in (("causal", result.causal_weights), ("padding", result.padding_weights))
        for i, row in enumerate(mat)
        for j, w in enumerate(row)
    ]
    csv = write_csv(out / CSV, rows, header=["mask", "query", "key", "weight"])
    return [*images, csv]
