"""Tables and figure 10.3.1 for ``attn copy-both``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.render.files import new_figure, save_figure, write_csv
from attn_cli.render.table import Column, Table

if TYPE_CHECKING:
    from attn_cli.experiments.copy_both import Result


def tables(result: Result, outcomes: Mapping) -> list:
    def published(check_id: str, fmt: str) -> str:  # the text's value where it applies (its data: N, d, seed)
        outcome = outcomes.get(check_id)
        return "" if outcome is None or outcome.status == "n/a" else fmt.format(outcome.published)

    cfg = result.config
    right = [Column(c, "right") for c in ("published", "regenerated")]
    one = Table(
        title=f"D2L 10.3.1 one head: best linear readout, N={cfg['samples']}, d={cfg['d_v']}, "
        f"seed {cfg['seed']} (relative error)",
        columns=[Column("weights"), *right, Column("unrounded", "right", style="dim")],
    )
    for row in result.one_head:
        a, b, e = row["a"], row["b"], row["error"]
        pub = published(f"d2l-copy-both-one-head.{a:.1f}", "{:.3f}")
        one.add_row(f"({a:.1f}, {b:.1f})", pub, f"{e:.3f}", f"{e:.6f}")
    theory = outcomes["d2l-copy-both-one-head.theory"].published  # an identity: shown whatever the data
    one.add_row("theory sqrt(1/2)", f"{theory:.3f}", f"{result.theory:.3f}", f"{result.theory:.6f}")
    two = Table(
        title="two heads, mirrored weights (relative error; the published digits are "
        "solver noise, the claim is 'below 1e-5')",
        columns=[Column("weights"), *right],
    )
    for row in result.two_heads:
        a, b, e = row["a"], row["b"], row["error"]
        pub = published(f"d2l-copy-both-two-heads.{a:.2f}", "{:.1e}")
        two.add_row(f"({a:.2f}, {b:.2f}) and ({b:.2f}, {a:.2f})", pub, f"{e:.1e}")
    return [one, two]


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    curve = result.curve
    columns = zip(curve["a"], curve["one_head"], curve["two_heads"])
    csv = write_csv(out / "copy_both.csv", columns, header=["a", "one_head_error", "two_heads_error"])

    floor = 1e-9  # log axis: an exact zero would vanish
    fig, ax = new_figure(figsize=(6.4, 4.2))
    for key, style, colour, label in (
        ("one_head", "o-", "tab:red", "one head: weights (a, 1-a)"),
        ("two_heads", "s-", "tab:blue", "two heads: (a, 1-a) and (1-a, a)"),
    ):
        ax.plot(curve["a"], [max(e, floor) for e in curve[key]], style, ms=3, color=colour, label=label)
    ax.axhline(result.theory, color="black", ls="--", lw=1, label=f"theory: sqrt(1/2) = {result.theory:.3f}")
    ax.axvline(0.5, color="grey", ls=":", lw=1)
    ax.annotate(
        "a = 0.5: the two mixtures coincide",
        xy=(0.5, result.theory),
        xytext=(0.56, 3e-2),
        fontsize=8,
        color="grey",
        arrowprops={"arrowstyle": "->", "color": "grey"},
    )
    ax.set(yscale="log", xlim=(0, 1), xlabel="first head's weight a on v1")
    ax.set_ylabel("relative error of the best linear readout")
    cfg = result.config
    ax.set_title(f"Copy-both (D2L fig. 10.3.1 as data): N={cfg['samples']}, d={cfg['d_v']}", fontsize=10)
    ax.legend(fontsize=8, loc="center left")
    ax.grid(True, which="major", alpha=0.3)
    return [*save_figure(fig, out / "copy_both.png", formats, keep=keep), csv]
