"""``attn exercise`` (D2L 10.3.5 exercises 1-12, no published numbers): the tables (built in
:mod:`.exercise_tables`), the ``--list`` table, and the figures of exercises 2 (error vs epsilon), 6
(time vs h), 11 (the plain map and four heads) and 12 (trained head weights), each with a CSV beside."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.render import exercise_tables
from attn_cli.render.exercise_tables import uniform_start
from attn_cli.render.files import heatmap, log2_axis, new_figure, save_figure, write_csv
from attn_cli.render.table import titled_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from attn_cli.experiments import exercises as ex

# exercise -> (png, csv): the names in the catalogue
FILES = {n: (f"exercise_{n}.png", f"exercise_{n}.csv") for n in (2, 6, 11, 12)}


def tables(result: ex.Result, outcomes: Mapping) -> list:
    """Every exercise that ran; ``outcomes``: taken for the render contract (none is marked)."""
    out = []
    for n in result.ran():
        draw = getattr(exercise_tables, f"ex{n}_tables")
        out.extend(draw(getattr(result, f"ex{n}"), f"D2L 10.3.5 exercise {n}: {result.TITLES[n]}"))
    return out


def listing(titles: dict[int, str]) -> list:
    """``attn exercise --list``: the twelve exercises (number -> title) and what each run shows."""
    from attn_cli.published.catalogue import BY_ID

    columns = ("N", "exercise", "what a run shows", "files")
    arts = {n: BY_ID[f"d2l-ex{n}"] for n in titles}  # every exercise is in the catalogue (tests/test_exercises.py)
    rows = [(str(n), title, arts[n].title, " ".join(arts[n].files)) for n, title in titles.items()]
    return [titled_table("D2L 10.3.5 exercises", columns, rows, left=columns[1:])]


def figures(
    result: ex.Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    """Each figure drawn, then its raw numbers in the CSV of the same name (``outcomes``: unused)."""
    paths: list[Path] = []
    for n, draw in ((2, _fig2), (6, _fig6), (11, _fig11), (12, _fig12)):
        e = getattr(result, f"ex{n}")
        if e is not None:
            fig, rows, header = draw(e)
            png, csv = FILES[n]
            layout: dict | None = {} if n == 12 else None  # exercise 12: two panels, laid out tight
            paths += save_figure(fig, Path(out) / png, formats, keep=keep, tight_layout=layout)
            paths.append(write_csv(Path(out) / csv, rows, header=header))
    return paths


def _fig2(e: ex.ex02_noise.Result) -> tuple[Figure, list, list[str]]:
    fig, ax = new_figure(figsize=(6.5, 4.5))
    for s, colour in zip(e.sweeps, ("tab:blue", "tab:red")):
        eps = [p.eps for p in s.points]
        ax.plot(eps, [p.error for p in s.points], "o", color=colour, label=f"measured, σ = {s.sigma:g}")
        theory = f"theory, slope {s.slope:.2f}" if s.slope is not None else "theory"
        ax.plot(*s.theory_curve(), "-", color=colour, alpha=0.5, lw=1, label=theory)
        ax.axvline(s.knee, color=colour, ls=":", lw=1)
        ax.text(s.knee, 1.3e-3, f" ε* = σ/2 = {s.knee:g}", color=colour, fontsize=8, rotation=90, va="bottom")
    ax.axhline(e.ONE_HEAD_ERROR, color="gray", ls="--", lw=1)
    ax.text(1.2e-5, 0.75, "one head: √½", color="gray", fontsize=8)
    ax.set(xscale="log", yscale="log", xlim=(8e-6, 0.6), ylim=(1e-3, 1.2))
    ax.set_xlabel("ε  (heads (0.5+ε, 0.5−ε) and (0.5−ε, 0.5+ε))")
    ax.set(ylabel="readout error (relative)", title="Ex. 2: nearly identical heads under noise")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower left")
    rows = [[s.sigma, p.eps, p.error, p.theory, p.condition, p.straight] for s in e.sweeps for p in s.points]
    return fig, rows, ["sigma", "eps", "error", "theory", "condition", "in_slope_fit"]


def _fig6(e: ex.ex06_timing.Result) -> tuple[Figure, list, list[str]]:
    fig, ax = new_figure(figsize=(6, 4))
    hs = [r.h for r in e.rows]
    ax.plot(hs, [r.seconds * 1e3 for r in e.rows], "o-", label="measured forward time")
    fit = f"fit: {e.fixed_seconds * 1e3:.0f} ms + {e.ns_per_entry:.1f} ns × B·h·n²"
    ax.plot(hs, [e.fitted_seconds(r.score_entries) * 1e3 for r in e.rows], "--", color="gray", label=fit)
    log2_axis(ax, hs)
    ax.set(xlabel="heads h  (p = d/h)", ylabel="forward time (ms)", ylim=(0, None))
    ax.set_title(f"Ex. 6: d = {e.d}, n = {e.n}, batch {e.batch}: ratio {e.ratio:.1f}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    rows = [[r.h, r.p, r.seconds, r.score_entries, r.matmul_flops] for r in e.rows]
    return fig, rows, ["h", "p", "seconds", "score_entries", "matmul_flops"]


def _fig11(e: ex.ex11_projections.Result) -> tuple[Figure, list, list[str]]:
    maps = [("plain (no projections)", e.plain)] + [(f"head {i + 1}", w) for i, w in enumerate(e.head_weights)]
    vmax = max(max(max(row) for row in w) for _, w in maps)
    fig, axes = new_figure(1, len(maps), figsize=(3.2 * len(maps), 3.4))
    for ax, (title, w) in zip(axes, maps):
        im = heatmap(ax, w, e.queries, e.keys, vmax=vmax)  # one colour scale: the last map's stands for all
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("keys")
    axes[0].set_ylabel("queries")
    fig.colorbar(im, ax=list(axes), shrink=0.8, label="attention weight")
    words = f"'{''.join(e.queries)}' → '{''.join(e.keys)}'"
    fig.suptitle(f"Ex. 11: {words} through a fresh {e.heads}-head layer (one colour scale)")
    rows = [[name, q, j, e.keys[j], w] for name, W in maps for q, row in zip(e.queries, W) for j, w in enumerate(row)]
    return fig, rows, ["map", "query", "key_position", "key", "weight"]


def _fig12(e: ex.ex12_learned.Result) -> tuple[Figure, list, list[str]]:
    fig, (ax1, ax2) = new_figure(1, 2, figsize=(11, 4))
    colours = {"one-hot": "tab:green", "soft": "tab:blue", "duplicate": "tab:orange"}
    for x, r in enumerate(e.runs):
        for i, ((a, _), kind) in enumerate(zip(r.weights, r.kinds)):
            offset = (i - (r.h - 1) / 2) * 0.08
            ax1.plot(x + offset, a, "o", color=colours[kind], label=kind)
        ax2.plot([c[0] for c in r.curve], [max(c[1], 1e-7) for c in r.curve], label=f"h = {r.h}")
    handles, labels = ax1.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax1.legend(unique.values(), unique.keys(), fontsize=8)
    ax1.axhline(1 / len(e.runs[0].weights[0]), color="gray", ls=":", lw=1)
    ax1.set_xticks(range(len(e.runs)), labels=[f"h = {r.h}\nerror {r.error:.1e}" for r in e.runs])
    ax1.set(ylim=(-0.05, 1.05), ylabel="weight α1 on the first key (α2 = 1 − α1)")
    ax1.set_title(f"trained head weights (start ≈ {uniform_start(e)})")
    ax2.axhline(e.bound, color="gray", ls="--", lw=1)
    ax2.set(yscale="log", xlabel="Adam step", ylabel="training relative error")
    ax2.set_title("training curves (dashed: one-head bound √½)")
    ax2.legend(fontsize=8)
    fig.suptitle(f"Ex. 12: learned copy-both heads (d = {e.d}, {e.steps} steps)")
    rows = [[r.h, i + 1, a, b, k, r.error] for r in e.runs for i, ((a, b), k) in enumerate(zip(r.weights, r.kinds))]
    return fig, rows, ["h", "head", "alpha1", "alpha2", "kind", "held_out_error"]
