"""Table and figure for ``attn sqrt-dk`` (W9 3.3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.published.catalogue import BY_ID
from attn_cli.published.settings import SQRT_DK_DIMS, SQRT_DK_N_KEYS, SQRT_DK_TRIALS
from attn_cli.render.console import beside
from attn_cli.render.files import log2_axis, new_figure, save_figure, write_csv
from attn_cli.render.table import Block, Cell, Column, Table, styled

if TYPE_CHECKING:
    from attn_cli.experiments.sqrt_dk import Result
    from attn_cli.published.compare import Outcome

COLUMNS = (  # (field, header, format)
    ("std", "std(q·k)", "{:.2f}"),
    ("std_scaled", "std(q·k/√d_k)", "{:.2f}"),
    ("max_weight_unscaled", "max weight\nunscaled", "{:.2f}"),
    ("max_weight_scaled", "max weight\nscaled", "{:.2f}"),
    ("grad_unscaled", "grad norm\nunscaled", "{:.4f}"),
    ("grad_scaled", "grad norm\nscaled", "{:.4f}"),
)
PNG, CSV = BY_ID["w9-sqrt-dk-plot"].files[0], "sqrt_dk.csv"


def _cell(outcome: Outcome | None, value: float, fmt: str) -> Cell:
    text = fmt.format(value)
    if outcome is None:
        return text
    pub = fmt.format(outcome.published)
    if outcome.status not in ("pass", "fail"):
        return styled(f"{text} ", (f"(text ~{pub})", "dim"))
    return beside(text, outcome.status == "pass", pub, f"diff {value - outcome.published:+.1e}")


def tables(result: Result, outcomes: Mapping) -> list:
    o, cfg = outcomes, result.config
    table = Table(
        title=f"W9 3.3  why divide by √d_k  ({cfg['trials']} trials, {cfg['n_keys']} keys, "
        f"seed {cfg['seed']}, {cfg['device']})",
        caption="each cell: regenerated, = when within half a unit of the text's last printed digit, "
        "then the text's value",
        columns=[Column(h, "right") for h in ("d_k", *(header for _, header, _ in COLUMNS))],
    )
    for r in result.rows:
        cells = [_cell(o.get(f"w9-sqrt-dk.{r.d_k}.{f}"), getattr(r, f), fmt) for f, _, fmt in COLUMNS]
        table.add_row(str(r.d_k), *cells)
    out: list[Block] = [table]
    shown = [o[f"w9-sqrt-dk.{r.d_k}.std"] for r in result.rows if f"w9-sqrt-dk.{r.d_k}.std" in o]
    if any(x.status == "n/a" for x in shown):
        draws = f"seed 0, {SQRT_DK_TRIALS} trials, {SQRT_DK_N_KEYS} keys and d_k {' '.join(map(str, SQRT_DK_DIMS))}"
        why = f": the text's numbers come from {draws} drawn in that order; with other settings (e.g. --quick) the "
        why += "values differ statistically and the published checks do not apply."
        out.append(styled(("~ not the text's draws", "yellow"), why))
    out.append(
        "a dot product of d independent terms has variance d: without the division the softmax "
        "saturates (one weight near 1) and its gradient vanishes; scaled, both stay put."
    )
    return out


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    dims = [r.d_k for r in result.rows]
    fig, (ax1, ax2) = new_figure(1, 2, figsize=(10, 4))
    panels = ((ax1, "max_weight", "mean largest softmax weight"), (ax2, "grad", "mean softmax gradient norm  ‖∂w₀/∂s‖"))
    curves = (("unscaled", "o-", "tab:red", "unscaled  q·k"), ("scaled", "s-", "tab:blue", "scaled  q·k / √d_k"))
    for ax, key, ylabel in panels:
        for which, style, colour, label in curves:
            ax.plot(dims, [getattr(r, f"{key}_{which}") for r in result.rows], style, color=colour, label=label)
        log2_axis(ax, dims)
        ax.set(xlabel="key dimension d_k", ylabel=ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
    n_keys = result.config["n_keys"]
    ax1.axhline(1 / n_keys, color="gray", ls=":", lw=1)
    ax1.text(dims[0], 1 / n_keys, f" uniform 1/{n_keys}", va="bottom", color="gray", fontsize=8)
    ax1.set_ylim(0, 1.05)
    ax2.set_ylim(bottom=0)
    fig.suptitle(f"W9 3.3: softmax saturation without 1/√d_k ({result.config['trials']} trials, {n_keys} keys)")
    images = save_figure(fig, out / PNG, formats, keep=keep, tight_layout={})
    fields = ("d_k", *(f for f, _, _ in COLUMNS), "text_draws")  # the CSV's header is the Result's field names
    csv = write_csv(out / CSV, [[getattr(r, f) for f in fields] for r in result.rows], header=fields)
    return [*images, csv]
