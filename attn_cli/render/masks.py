"""Table and figure for ``attn masks`` (W9 4.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.published.catalogue import BY_ID
from attn_cli.render.console import CheckRow, beside, check_table, verdict
from attn_cli.render.files import heatmap, new_figure, save_figure, write_csv
from attn_cli.render.table import Cell, Column, Table, styled

if TYPE_CHECKING:
    from attn_cli.experiments.masks import Result

PNG, CSV = BY_ID["w9-masks"].files


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v else "0"


def tables(result: Result, outcomes: Mapping) -> list:
    comparable = all(x.status != "n/a" for x in outcomes.values())
    return [_weights_table(result, outcomes, comparable), _checks_table(result, outcomes, comparable)]


def _weights_table(result: Result, o: Mapping, comparable: bool) -> Table:
    """The causal weights and row sums, each beside the text's where the settings are the text's."""
    causal, sums = o["w9-masks.causal_weights"].published, o["w9-masks.row_sums"].published
    weights = Table(
        title=f"W9 4.2  causal attention weights (row = position looking, column = position "
        f"looked at; seed {result.config['seed']})",
        caption="each cell: regenerated (rounded to 2 decimals as the text prints), then the text's",
        columns=[Column(h, "right") for h in ("query", *(f"key {j}" for j in result.positions), "row sum")],
    )
    for i, row in enumerate(result.causal_weights_rounded):
        cells: list[Cell] = []
        for j, v in enumerate(row):
            pub = causal[i][j] if comparable and i < len(causal) and j < len(causal[i]) else None
            cells.append(_fmt(v) if pub is None else beside(_fmt(v), abs(v - pub) < 1e-9, _fmt(pub)))
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
    r, n, last = result, len(result.positions), result.config["changed_from"]
    worst = {"w9-masks.row_sums": max(abs(s - 1) for s in o["w9-masks.row_sums"].published)}  # shown, not repr'd
    package = repr(r.padding_weight)
    leaks = f"{r.past_changes_without_mask} (max change {r.past_max_abs_change_without_mask:.2f})"
    checked = [  # (check ID, quantity, regenerated)
        ("w9-masks.row_sums", "rows still sum to 1", f"max |sum - 1| = {max(abs(s - 1) for s in r.row_sums):.1e}"),
        (
            "w9-masks.past_unchanged",
            f"causal: outputs at 0..{last - 1} unchanged when tokens {last}..{n - 1} change",
            f"{r.past_unchanged_with_mask} (max change {r.past_max_abs_change_with_mask:.1e})",
        ),
        ("w9-masks.changes_without_mask", "no mask: they change (the future leaks)", leaks),
        (
            "w9-masks.padding_weight.text_recipe",
            f"padding mask on {r.config['padding_from']}..{n - 1}: weight on padding (the text's masked_fill(-inf))",
            repr(r.padding_weight_text),
        ),
        ("w9-masks.padding_weight", "  the same through the package's masked_softmax (0 by masked_fill)", package),
    ]
    rows: list[CheckRow] = []
    for check_id, quantity, regenerated in checked:
        published = f"max |sum - 1| = {worst[check_id]:.1e}" if check_id in worst else repr(o[check_id].published)
        shown = (published, verdict(o[check_id])) if comparable else (styled((published, "dim")), styled("n/a"))
        rows.append((quantity, regenerated, *shown))
    core = f"{r.core_equals_text} (max diff {r.core_max_abs_diff:.1e})"
    rows.append(("core keep-mask softmax == text's masked_fill(-inf)", core, "(not printed)", r.core_equals_text))
    caption = None if comparable else "not the text's settings (seed 0, n 5, d 4): published values do not apply"
    return check_table("W9 4.2  mask checks", rows, caption=caption)


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    pos, cfg = result.positions, result.config
    pad_from = cfg["padding_from"]
    ticks = [f"t{i}" for i in pos]
    padded = [t + ("\n(pad)" if j >= pad_from else "") for j, t in zip(pos, ticks)]
    fig, axes = new_figure(1, 2, figsize=(10, 4.4))
    panels = (
        ("causal", result.causal_weights, ticks, "causal mask (no peeking ahead)"),
        ("padding", result.padding_weights, padded, f"padding mask (t{pad_from}..t{pos[-1]} are padding)"),
    )
    rows = []  # the CSV: one per mask, query and key
    for ax, (name, weights, keys, title) in zip(axes, panels):
        rows += [[name, i, j, w] for i, row in enumerate(weights) for j, w in enumerate(row)]
        im = heatmap(ax, weights, ticks, keys, annotate=True)  # one colour scale: 0 to 1
        ax.set_title(title, fontsize=10)
        ax.set(xlabel="key position (looked at)", ylabel="query position (looking)")
    fig.colorbar(im, ax=list(axes), label="attention weight", shrink=0.9)
    fig.suptitle(f"W9 4.2: masked self-attention weights (n={len(pos)}, d={cfg['d_k']}, seed {cfg['seed']})")
    images = save_figure(fig, out / PNG, formats, keep=keep)
    csv = write_csv(out / CSV, rows, header=["mask", "query", "key", "weight"])
    return [*images, csv]
