"""``copy_task_seeds.png`` and ``copy_task_seeds.csv``: the copy task's seed distribution.

Design notes: ``docs/design.md``, section ``attn_cli.render.copy_task_seeds``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.published.copy_task import METRICS, check_id
from attn_cli.published.seed_rule import LEVEL, interval

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    from attn_cli.experiments.copy_task import Result

SEEDS_PNG = "copy_task_seeds.png"
SEEDS_CSV = "copy_task_seeds.csv"
TITLES = {"teacher_forced": "teacher-forced", "free_running": "free-running", "exact": "whole sequence exact"}
MODELS = ("attention", "plain")
COLOURS = {"attention": "tab:blue", "plain": "tab:red"}
LABELS = {"attention": "attention (W9 2.3)", "plain": "plain (Week 8)"}
INTERVAL_FIELDS = ("n", "mean", "half_width", "low", "high")  # of Interval.record(), in the CSV
CSV_HEADER = ("model", "length", "metric", "seed", "engine", "value", *INTERVAL_FIELDS, "published", "status")
# the published value's marker, in the plot and its legend
PUBLISHED_MARKER: dict[str, Any] = {
    "marker": "D",
    "markerfacecolor": "none",
    "markeredgecolor": "black",
    "linestyle": "none",
}


def samples(result: Any, outcomes: Mapping[str, Any]) -> list[dict]:
    """One entry per (model, length, metric) in the Result's order: its seeds, engines and
    values (one per run), the seed rule's interval (``Interval.record()``), the published
    value and its check's status (both None where the text prints none)."""
    out = []
    for model in [m for m in MODELS if any(r["model"] == m for r in result.rows)]:
        for length in result.config["lengths"]:
            rows = [r for r in result.rows if r["model"] == model and r["length"] == length]
            if not rows:
                continue
            for metric in METRICS:
                values = [float(r[metric]) for r in rows]
                found = outcomes.get(check_id(model, length, metric))
                out.append(
                    {
                        "model": model,
                        "length": length,
                        "metric": metric,
                        "seeds": [r["seed"] for r in rows],
                        "engines": [r["engine"] for r in rows],
                        "values": values,
                        "interval": interval(values).record(),
                        "published": None if found is None else found.published,
                        "status": None if found is None else found.status,
                    }
                )
    return out


def several_seeds(result: Any) -> bool:
    """More than one seed in some cell: the runs this figure is for."""
    cells = {(r["model"], r["length"]) for r in result.rows}
    return len({(r["model"], r["length"], r["seed"]) for r in result.rows}) > len(cells)


def csv_rows(entries: list[dict]) -> list[list]:
    """One row per run and metric (:data:`CSV_HEADER`): the seed's value beside its cell's interval."""
    return [
        [e["model"], e["length"], e["metric"], seed, engine, value, *(e["interval"][k] for k in INTERVAL_FIELDS)]
        + ["" if e["published"] is None else e["published"], e["status"] or ""]
        for e in entries
        for seed, engine, value in zip(e["seeds"], e["engines"], e["values"])
    ]


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping[str, Any], keep: list | None = None
) -> list[Path]:
    """Write the PNG (in each of ``formats``) and its CSV for a multi-seed run; nothing for one seed."""
    from attn_cli.render.files import write_csv

    if not several_seeds(result):
        return []
    entries = samples(result, outcomes)
    paths = _figure(entries, result.config, Path(out) / SEEDS_PNG, formats, keep) if formats else []
    paths.append(write_csv(Path(out) / SEEDS_CSV, csv_rows(entries), header=CSV_HEADER))
    return paths


def _cell(ax: Axes, e: dict, x: float, step: float, colour: str) -> None:
    """One cell's seeds at ``x``: the interval as a band, its mean as a line, each seed a dot,
    and the published value a diamond."""
    iv, n, span = e["interval"], len(e["values"]), [x - 0.42 * step, x + 0.42 * step]
    ax.fill_between(span, max(iv["low"], -0.02), min(iv["high"], 1.02), color=colour, alpha=0.18, linewidth=0)
    ax.plot(span, [iv["mean"]] * 2, color=colour, lw=1)
    width = 0.6 * step  # the dots spread over it deterministically (golden ratio)
    dots = [x + (0.0 if n == 1 else ((i * 0.6180339887) % 1.0 - 0.5) * width) for i in range(n)]
    few = n <= 16
    ax.scatter(dots, e["values"], s=12 if few else 6, color=colour, alpha=0.85 if few else 0.55, linewidths=0, zorder=3)
    if e["published"] is not None:
        ax.plot([x], [e["published"]], markersize=8, markeredgewidth=1.4, zorder=4, **PUBLISHED_MARKER)


def _figure(entries: list[dict], cfg: dict, path: Path, formats: Sequence[str], keep: list | None = None) -> list[Path]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from attn_cli.render.figures import new_figure
    from attn_cli.render.files import save_figure

    lengths = list(dict.fromkeys(e["length"] for e in entries))
    models = list(dict.fromkeys(e["model"] for e in entries))
    k = len(lengths)
    fig, axes = new_figure(1, len(METRICS), figsize=(max(9.0, 3 * (1.2 + 0.75 * k)), 4.4), sharey=True)
    step = 0.8 / len(models)  # each length's slot is shared by the models side by side
    for ax, metric in zip(axes, METRICS):
        for j, model in enumerate(models):
            offset = (j - (len(models) - 1) / 2) * step
            for e in (e for e in entries if e["model"] == model and e["metric"] == metric):
                _cell(ax, e, lengths.index(e["length"]) + offset, step, COLOURS[model])
        ax.set_xticks(range(k), labels=[str(L) for L in lengths])
        ax.set(xlim=(-0.6, k - 0.4), ylim=(-0.03, 1.05), xlabel="sequence length")
        ax.set_title(TITLES[metric], fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("accuracy")
    n_seeds = max(len(e["values"]) for e in entries)
    judged = any(e["status"] in ("pass", "fail") for e in entries)
    published = "published (W9 2.3)" if judged else "published (W9 2.3, at the text's settings: not judged here)"
    handles: list[Artist] = [Patch(color=COLOURS[m], alpha=0.5, label=LABELS[m]) for m in models]
    handles += [
        Line2D([], [], marker="o", color="gray", linestyle="none", markersize=4, label="one seed"),
        Patch(color="gray", alpha=0.25, label=f"seed rule's {LEVEL:.0%} interval (line: mean)"),
        Line2D([], [], markersize=7, label=published, **PUBLISHED_MARKER),
    ]
    wide = fig.get_figwidth() >= 12  # one legend row where it fits, else two
    ncol = len(handles) if wide else -(-len(handles) // 2)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.01))
    engines, extra = f"{cfg['engine']} engine", cfg.get("extra_seed_engine")
    if extra and extra != cfg["engine"]:  # which engine trained the first seed, which the others
        engines += f" for the first seed, {extra} for the others"
    title = f"W9 2.3 copy task over {n_seeds} seeds per cell (hidden {cfg['hidden_size']}, {cfg['steps']} steps, "
    fig.suptitle(f"{title}{engines})", fontsize=10)
    return save_figure(fig, path, formats, keep=keep, tight_layout={"rect": (0, 0.06 if wide else 0.1, 1, 1)})
