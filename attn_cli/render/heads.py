"""Tables and figure 10.3.2 (the multi-head layout) for ``attn heads``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.render.files import new_figure, save_figure
from attn_cli.render.table import styled, titled_table

if TYPE_CHECKING:
    from attn_cli.experiments.heads import Result
    from attn_cli.published.compare import Outcome


def _published(outcome: Outcome | None) -> str:
    """The text's value beside a regenerated one, where it applies (at the text's settings)."""
    if outcome is None or outcome.status == "n/a":
        return ""
    value = outcome.published
    return str(tuple(value)) if isinstance(value, list) else str(value)


def tables(result: Result, outcomes: Mapping) -> list:
    o, cfg = outcomes, result.config
    title = "W9 5.1: hand-written multi-head attention vs nn.MultiheadAttention (d=8, h=2, n=5, seed 0)"
    match = titled_table(title, ("claim", "published", "regenerated"), left=("claim",))
    pub = _published(o.get("w9-heads.matches"))
    matches = "True" if result.handwritten_matches else styled(("False", "red"), verdict="fail")
    match.add_row("matches (allclose, atol 1e-5)", pub, matches)
    match.add_row("largest difference", "", f"{result.handwritten_max_diff:.1e}")
    title = f"W9 5.1: parameters of nn.MultiheadAttention(d_model={cfg['d_model']}, heads) = 4d^2 + 4d"
    w9 = titled_table(title, ("heads", "head size d/h", "published", "regenerated", "4d^2 + 4d"))
    for row in result.w9_params:
        pub = _published(o.get(f"w9-heads.params.{row['heads']}"))
        w9.add_row(str(row["heads"]), str(row["head_size"]), pub, str(row["params"]), str(row["formula"]))
    title = "D2L 10.3.2.3: MultiHeadAttention(100, 5, dropout 0.5), batch 2, 4 queries, 6 key-value pairs, "
    shape = titled_table(title + "valid_lens [3, 2]", ("quantity", "published", "regenerated"), left=("quantity",))
    shape.add_row("output shape", _published(o.get("d2l-mha-shape.output")), str(tuple(result.mha_shape)))
    shape.add_row("weights shape (batch, heads, queries, keys)", "", str(tuple(result.mha_weights_shape)))
    shape.add_row("largest weight on a key beyond valid_lens", "", f"{result.mha_masked_weight:g}")
    title = f"D2L 10.3.2.3: parameters of MultiHeadAttention(num_hiddens={cfg['d2l_d_model']}, bias=False) = 4d^2, "
    d2l = titled_table(title + "counted on concrete layers", ("heads", "published", "regenerated", "4d^2"))
    for row in result.d2l_params:
        pub = _published(o.get(f"d2l-mha-params.{row['heads']}"))
        d2l.add_row(str(row["heads"]), pub, str(row["params"]), str(row["formula"]))
    lay = result.layout
    note = (
        f"figure 10.3.2 (heads_layout.png): d = {lay['d']}, h = {lay['h']} heads of width p = {lay['p']}; "
        f"parameters drawn 3 h d p + (h p) d = {lay['params_drawn']}, concrete layer {lay['params_layer']}"
    )
    return [match, w9, shape, d2l, note]


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    """Figure 10.3.2: per-head projections, attention per head, concatenation, W_o."""
    d, h, p = result.layout["d"], result.layout["h"], result.layout["p"]
    # columns drawn: every head up to 6, else the first three, an ellipsis and the last
    shown = list(range(h)) if h <= 6 else [0, 1, 2, None, h - 1]
    width = len(shown) * _COL_W + (len(shown) - 1) * _GAP
    fig, ax = new_figure(figsize=(max(7.0, 0.75 * width + 2.5), 7.0))
    ax.set(xlim=(-0.4, width + 2.0), ylim=(-0.6, 10.2))
    ax.axis("off")
    centre = width / 2
    inputs = {"queries": centre - 0.3 * width, "keys": centre, "values": centre + 0.3 * width}
    for name, x in inputs.items():
        _box(ax, x, _IN_Y, 1.9, 0.55, f"{name}  (n, d={d})", "#eeeeee")
    for c, head in enumerate(shown):
        _draw_head(ax, c * (_COL_W + _GAP), head, d, p, inputs)
    notes = (
        (_PROJ_Y, f"per-head\nprojections\n(p = d/h = {p})"),
        (_ATT_Y, "one distribution\nper head\nand query"),
        (_CAT_Y, "width d again"),
        (_OUT_Y, "output projection\nmixes the heads"),
    )
    for y, text in notes:
        ax.text(width + 0.25, y, text, fontsize=7, ha="left", va="center", color="dimgrey")
    _box(ax, centre, _CAT_Y, width, 0.7, f"concatenate the {h} head outputs:  h · p = {h} · {p} = {d}", "#d9d2e9")
    _box(ax, centre, _OUT_Y, 2.6, 0.7, f"$W_o$  ({d} × {d})\noutput (n, {d})", "#b6d7a8")
    _arrow(ax, centre, _CAT_Y + 0.35, centre, _OUT_Y - 0.35)
    ax.set_title(f"Multi-head attention (D2L fig. 10.3.2): d = {d}, h = {h} heads of width {p}", fontsize=10)
    return save_figure(fig, Path(out) / "heads_layout.png", formats, keep=keep)


_COL_W, _GAP = 2.3, 0.35  # figure 10.3.2: a head column's width, the gap between columns
_IN_Y, _PROJ_Y, _ATT_Y, _CAT_Y, _OUT_Y = 0.0, 3.0, 5.2, 7.3, 9.2  # the heights of its rows
_ARROW: dict[str, Any] = dict(arrowstyle="-|>", mutation_scale=8, lw=0.7, color="dimgrey", shrinkA=0, shrinkB=0)


def _draw_head(ax: Any, x0: float, head: int | None, d: int, p: int, inputs: dict[str, float]) -> None:
    """One head's column from ``x0``: q, k, v projections into its attention (``None``: an ellipsis)."""
    x = x0 + _COL_W / 2
    if head is None:
        ax.text(x, (_PROJ_Y + _ATT_Y) / 2, "· · ·", ha="center", va="center", fontsize=16)
        return
    i = head + 1
    for k, (name, color, src) in enumerate(zip("qkv", ("#cfe2f3", "#d9ead3", "#fff2cc"), inputs.values())):
        bx = x0 + (k + 0.5) * _COL_W / 3
        _box(ax, bx, _PROJ_Y, _COL_W / 3 - 0.08, 0.95, f"$W^{{({name})}}_{{{i}}}$\n{d}→{p}", color, fs=7)
        _arrow(ax, src, _IN_Y + 0.3, bx, _PROJ_Y - 0.5)
        _arrow(ax, bx, _PROJ_Y + 0.5, x, _ATT_Y - 0.4)
    _box(ax, x, _ATT_Y, _COL_W - 0.1, 0.8, f"head {i}\nscaled dot-product\nattention", "#f4cccc", fs=7)
    _arrow(ax, x, _ATT_Y + 0.4, x, _CAT_Y - 0.35)


def _box(ax: Any, x: float, y: float, w: float, h: float, text: str, color: str, fs: float = 8) -> None:
    """A rounded box of width ``w`` and height ``h`` centred on (x, y), with its text."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04", fc=color, ec="black", lw=0.8))
    ax.text(x, y, text, ha="center", va="center", fontsize=fs)


def _arrow(ax: Any, x0: float, y0: float, x1: float, y1: float) -> None:
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), **_ARROW))
