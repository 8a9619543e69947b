"""Table and figures for ``attn copy-task`` (W9 2.3), with ``copy_task_seeds.png`` and ``.csv`` for several
seeds per cell (design notes: ``docs/design.md``, section ``attn_cli.render.copy_task``). Every published
value and verdict shown comes from the outcomes passed in: nothing here compares a value with a published one."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.published.catalogue import BY_ID
from attn_cli.published.compare import Outcome
from attn_cli.published.copy_task import MAP_RULE, MAP_RULE_ID, METRICS, TEXT_SETTING, cell_of, check_id
from attn_cli.published.seed_rule import FLOOR, LEVEL, interval
from attn_cli.published.seed_rule import RULE as SEED_RULE
from attn_cli.render import files
from attn_cli.render.console import beside
from attn_cli.render.files import fill_heatmap, heatmap_frame, log2_axis, new_figure, save_figure, write_csv, write_json
from attn_cli.render.table import Cell, Table, Text, styled, titled_table

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    from attn_cli.experiments.copy_task import Result

ACCURACY_PNG = BY_ID["w9-copy-task"].files[0]  # copy_task_accuracy.png
ACCURACY_CSV = "copy_task_accuracy.csv"
ROWS_JSON = "copy_task_runs.json"
MAP_PNG = BY_ID["w9-copy-task-map"].files[0]  # copy_task_attention_L{length}.png
SEEDS_PNG, SEEDS_CSV = "copy_task_seeds.png", "copy_task_seeds.csv"
MODELS = ("attention", "plain")
COLOURS = {"attention": "tab:blue", "plain": "tab:red"}
HEADERS = {"teacher_forced": "teacher-forced", "free_running": "free-running", "exact": "whole seq. exact"}
TITLES = {**HEADERS, "exact": "whole sequence exact"}  # the seeds figure's panels
MODEL_LABELS = {"attention": "attention", "plain": "plain (Week 8)"}
LABELS = {"attention": "attention (W9 2.3)", "plain": "plain encoder-decoder (Week 8)"}
SEED_LABELS = {**LABELS, "plain": "plain (Week 8)"}
INTERVAL_FIELDS = ("n", "mean", "half_width", "low", "high")  # of Interval.record(), in the seeds CSV
CSV_HEADER = ("model", "length", "metric", "seed", "engine", "value", *INTERVAL_FIELDS, "published", "status")
# a published value's marker (its edge: the model's colour in the accuracy plot, black in the seeds figure)
MARKER: dict[str, Any] = {"linestyle": "none", "marker": "D", "markerfacecolor": "none"}
SEED_MARKER = {**MARKER, "markeredgecolor": "black"}

TOLERANCE_NOTE = (
    f"each published cell is one seed of training on an unknown machine, so it is judged by "
    f"the seed rule: {SEED_RULE} (one seed: within ±{FLOOR:g}); the last printed digits of "
    "one trained model are not reproducible across CPUs and PyTorch builds"
)

ENGINE_NOTES = {
    "exact": "exact engine: bit-identical to the W9 2.3 program run with the same pinned CPU kernels",
    "fast": "fast engine: the exact engine's seed distribution, not its bits",
}

Outcomes = Mapping[str, Outcome]  # check ID -> Outcome


def _cell_outcomes(outcomes: Outcomes) -> dict[str, Outcome]:
    """The outcomes of the table's published cells (not the map rule's)."""
    return {cid: o for cid, o in outcomes.items() if o.check.artifact == "w9-copy-task"}


def _not_judged_line(outcomes: Outcomes) -> Text:
    """Why the published cells are in brackets: not the text's settings, or the outcomes' reason."""
    cells = _cell_outcomes(outcomes).values()
    shown = "the published values are shown in brackets for orientation only"
    if any(o.status == "n/a" for o in cells):
        text = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in TEXT_SETTING.items())
        return styled(("~ not the text's settings", "yellow"), f" ({text}): {shown}, not judged.")
    reasons = ", ".join(dict.fromkeys(o.note for o in cells if o.status not in ("pass", "fail")))
    return styled((f"~ not judged: {reasons}", "yellow"), f"; {shown}.")


def _published_points(outcomes: Outcomes, model: str, metric: str) -> list[tuple[int, float]]:
    """(length, published value) of every cell of ``model`` and ``metric`` the text prints."""
    cells = [(cell_of(cid), o.published) for cid, o in _cell_outcomes(outcomes).items()]
    return sorted((length, value) for (m, length, x), value in cells if (m, x) == (model, metric))


def _cell(stats: dict, n: int, outcome: Outcome | None) -> Cell:
    """The value (mean ± std over seeds), then where the text prints one its check's mark and value."""
    text = f"{stats['mean']:.3f}" + (f" ± {stats['std']:.3f}" if n > 1 else "")
    if outcome is None:
        return text
    pub = outcome.published
    if outcome.status not in ("pass", "fail"):
        return styled(f"{text} ", (f"(text {pub:.3f})", "dim"))
    return beside(text, outcome.status == "pass", f"{pub:.3f}", f"{stats['mean'] - pub:+.3f}")


def tables(result: Result, outcomes: Outcomes) -> list:
    seeds = tuple(result.config["seeds"]) or (result.config["seed"],)
    comparable = all(o.status in ("pass", "fail") for o in _cell_outcomes(outcomes).values())
    out: list = [_cells_table(result, outcomes, seeds, comparable)]
    if len(seeds) > 1:
        out.append(_runs_table(result))
    if not comparable:
        out.append(_not_judged_line(outcomes))
    out.append(f"note: {TOLERANCE_NOTE}.")
    if any(c["model"] == "plain" for c in result.cells):
        quoted = ", ".join(f"{v:g} at {L}" for L, v in _published_points(outcomes, "plain", "free_running"))
        out.append(
            f"plain: Week 8's encoder-decoder without attention; W9 quotes only its free-running accuracy ({quoted})."
        )
    if result.maps:
        out.append(_map_line(result, outcomes.get(MAP_RULE_ID), len(seeds)))
    notes = "; ".join(ENGINE_NOTES[e] for e in sorted({r["engine"] for r in result.rows}))
    n, computed = len(result.runs), sum(not r["cached"] for r in result.runs)
    out.append(f"{n} runs: {n - computed} cached, {computed} computed; {result.seconds:.1f} s wall; {notes}.")
    return out


def _cells_table(result: Result, outcomes: Outcomes, seeds: tuple, comparable: bool) -> Table:
    """One row per length and model, one column per metric; each cell marked by its check."""
    cfg = result.config
    several = len(seeds) > 1
    engines = sorted({r["engine"] for r in result.rows})
    models = [m for m in MODELS if any(c["model"] == m for c in result.cells)]
    seed_text = f"seeds {' '.join(map(str, seeds))}" if several else f"seed {seeds[0]}"
    title = (
        f"W9 2.3  copy task  (hidden {cfg['hidden_size']}, {cfg['steps']} steps, batch {cfg['batch_size']}, "
        f"lr {cfg['lr']:g}, eval {cfg['eval_size']}, {seed_text}, {cfg['device']}, {' + '.join(engines)} engine)"
    )
    caption = "each cell: regenerated" + (" (mean ± std over seeds)" if several else "")
    caption += (
        ", = when the published value passes the seed rule (≠ and the difference when not), then the published value"
        if comparable
        else ", then the published value in brackets (not judged)"
    )
    table = titled_table(title, ("length", "model", *(HEADERS[m] for m in METRICS)), left=("model",), caption=caption)
    for length in cfg["lengths"]:
        for i, model in enumerate(models):
            cell = result.cell(model, length)
            assert cell is not None  # every model ran every length
            cells = [_cell(cell[m], cell["n"], outcomes.get(check_id(model, length, m))) for m in METRICS]
            last = i == len(models) - 1 and len(models) > 1
            table.add_row(str(length) if i == 0 else "", MODEL_LABELS[model], *cells, end_section=last)
    return table


def _map_line(result: Result, rule: Outcome | None, n_seeds: int) -> Text:
    """The near-diagonal line: the measured fractions, the rule and its outcome."""
    parts = [f"L{m['length']} {m['diagonal_all']:.0%}" for m in result.maps]
    status = rule.status if rule is not None else None  # the check's verdict, as the check table shows it
    verdict: str | tuple[str, str] = {"pass": ("holds", "green"), "fail": ("fails", "red")}.get(status or "", "")
    if not verdict:
        verdict = f"not judged here: {rule.note}" if rule is not None and rule.note else "not judged here"
    text = (
        f"attention maps: over all {result.config['eval_size']} evaluation sequences and {n_seeds} "
        f"seed(s), the readout attention peaks at the step's own input position for {', '.join(parts)} "
        "of decoder steps (each figure shows one sequence). Near-diagonal rule: " + MAP_RULE + ": "
    )
    return styled(text, verdict, ".")


def _runs_table(result: Result) -> Table:
    names = ("model", "length", "seed", "engine", "teacher-forced", "free-running", "exact", "diagonal", "final loss")
    table = titled_table("runs (one per model, length and seed)", (*names, "seconds"), left=("model", "engine"))
    for row, run in zip(result.rows, result.runs):
        diagonal = "" if row["diagonal"] is None else f"{row['diagonal']:.3f}"  # None: plain model
        seconds = "cached" if run["cached"] else f"{run['seconds']:.1f}"
        cells = [row["model"], str(row["length"]), str(row["seed"]), row["engine"], *(f"{row[m]:.3f}" for m in METRICS)]
        table.add_row(*cells, diagonal, f"{run['final_loss']:.4f}", seconds)
    return table


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Outcomes, keep: list | None = None
) -> list[Path]:
    """Write the accuracy plot and one attention map per length, each with its numbers beside;
    for several seeds per cell also their distribution (``copy_task_seeds.png`` and ``.csv``)."""
    paths = _accuracy_figure(result, outcomes, out / ACCURACY_PNG, formats, keep) if formats else []
    stats = [(m, s) for m in METRICS for s in ("mean", "std")]
    rows = []
    for c in result.cells:
        published = outcomes.get(check_id(c["model"], c["length"], "free_running"))  # None: the text prints none
        rows.append([c["model"], c["length"], c["n"], *(c[m][s] for m, s in stats), published and published.published])
    header = ["model", "length", "seeds", *(f"{m}_{s}" for m, s in stats), "free_running_published"]
    paths.append(write_csv(out / ACCURACY_CSV, rows, header=header))
    runs = {"config": result.config, "rows": result.rows, "runs": copy.deepcopy(result.runs)}
    paths.append(write_json(out / ROWS_JSON, files.split_timing(runs, type(result).TIMING)))
    for m in result.maps:
        map_png = out / MAP_PNG.format(length=m["length"])
        if formats:
            paths += _map_figure(m, map_png, formats, keep)
        rows = [[f"step {t} ({m['src'][t]})", *row] for t, row in enumerate(m["weights"])]
        header = ["decoder step \\ input", *(f"{j} ({d})" for j, d in enumerate(m["src"]))]
        paths.append(write_csv(map_png.with_suffix(".csv"), rows, header=header))
    cells = {(r["model"], r["length"]) for r in result.rows}
    if len({(r["model"], r["length"], r["seed"]) for r in result.rows}) > len(cells):  # several seeds in a cell
        entries = samples(result, outcomes)
        paths += _seeds_figure(entries, result.config, out / SEEDS_PNG, formats, keep) if formats else []
        paths.append(write_csv(out / SEEDS_CSV, csv_rows(entries), header=CSV_HEADER))
    return paths


def _accuracy_figure(
    result: Result, outcomes: Outcomes, path: Path, formats: Sequence[str], keep: list | None = None
) -> list[Path]:
    fig, ax = new_figure(figsize=(6.4, 4.2))
    for model in MODELS:
        cells = [c for c in result.cells if c["model"] == model]
        if not cells:
            continue
        xs, ys = [c["length"] for c in cells], [c["free_running"]["mean"] for c in cells]
        errs = [c["free_running"]["std"] for c in cells]
        label = f"{LABELS[model]}, regenerated"
        ax.errorbar(xs, ys, yerr=errs if any(errs) else None, fmt="o-", color=COLOURS[model], capsize=3, label=label)
    for model in sorted({c["model"] for c in result.cells}):
        if pts := _published_points(outcomes, model, "free_running"):
            label = f"{LABELS[model].split(' (')[0]}, published"
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            ax.plot(xs, ys, markeredgecolor=COLOURS[model], markeredgewidth=1.5, markersize=9, label=label, **MARKER)
    ticks = sorted(set(result.config["lengths"]) | {4, 16, 32})
    log2_axis(ax, ticks)
    ax.set(ylim=(0, 1.05), xlabel="sequence length", ylabel="free-running token accuracy")
    ax.axhline(0.1, color="gray", ls=":", lw=1)
    ax.text(ticks[0], 0.1, " chance (1 in 10)", va="bottom", color="gray", fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    cfg = result.config
    engines = " + ".join(sorted({r["engine"] for r in result.rows}))
    ax.set_title(
        f"W9 2.3 copy task: attention removes the bottleneck\n(hidden {cfg['hidden_size']}, "
        f"{cfg['steps']} step{'' if cfg['steps'] == 1 else 's'}, {engines} engine)",
        fontsize=10,
    )
    return save_figure(fig, path, formats, keep=keep, tight_layout={})


def _map_figure(m: dict, path: Path, formats: Sequence[str], keep: list | None = None) -> list[Path]:
    """One sequence's readout weights: values shown up to length 8, every position labelled up to 48."""
    length = m["length"]
    # inches high (and 1.2 more wide, for the colour bar); at least length 4's: below, the y label ran into the title
    size = min(3 + 0.28 * max(length, 4), 14)
    fig, ax = new_figure(figsize=(size + 1.2, size))
    im = heatmap_frame(ax, length, length)
    step = 1 if length <= 48 else -(-length // 24)
    if step > 1:
        ax.set(xticks=range(0, length, step), yticks=range(0, length, step))
    ax.set(xlabel="input position (the digit there)", ylabel="decoder step (the digit it should write)")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    labels = [str(d) for d in m["src"]][::step]
    fill_heatmap(ax, im, m["weights"], labels, labels, annotate=length <= 8)
    wrap = "\n" if size < 8 else " "  # a narrow map takes its title on three lines: on two it is too wide
    title = (
        f"W9 2.3 attention, length {length}: readout weights, free running\n"
        f"argmax on the diagonal at {m['diagonal']:.0%} of this sequence's steps{wrap}"
        f"({m['diagonal_all']:.0%} over all sequences); free-running accuracy "
        f"{m['free_running']:.3f} (seed {m['seed']})"
    )
    ax.set_title(title, fontsize=9)
    return save_figure(fig, path, formats, keep=keep, tight_layout={})


def samples(result: Any, outcomes: Mapping[str, Any]) -> list[dict]:
    """One entry per (model, length, metric) in the Result's order: its runs' seeds, engines and values, the
    seed rule's interval (``Interval.record()``), the published value and its status (None: none printed)."""
    out = []
    for model in MODELS:  # a model that did not run has no rows
        for length in result.config["lengths"]:
            rows = [r for r in result.rows if r["model"] == model and r["length"] == length]
            if not rows:
                continue
            runs = {"seeds": [r["seed"] for r in rows], "engines": [r["engine"] for r in rows]}
            for metric in METRICS:
                values = [float(r[metric]) for r in rows]
                found = outcomes.get(check_id(model, length, metric))
                published, status = (found.published, found.status) if found else (None, None)
                cell = {"model": model, "length": length, "metric": metric, **runs, "values": values}
                out.append({**cell, "interval": interval(values).record(), "published": published, "status": status})
    return out


def csv_rows(entries: list[dict]) -> list[list]:
    """One row per run and metric (:data:`CSV_HEADER`): the seed's value beside its cell's interval."""
    return [
        [e["model"], e["length"], e["metric"], seed, engine, value, *(e["interval"][k] for k in INTERVAL_FIELDS)]
        + ["" if e["published"] is None else e["published"], e["status"] or ""]
        for e in entries
        for seed, engine, value in zip(e["seeds"], e["engines"], e["values"])
    ]


def _seed_cell(ax: Axes, e: dict, x: float, step: float, colour: str) -> None:
    """One cell at ``x``: the interval a band, its mean a line, each seed a dot, the published value a diamond."""
    iv, n, span = e["interval"], len(e["values"]), [x - 0.42 * step, x + 0.42 * step]
    ax.fill_between(span, max(iv["low"], -0.02), min(iv["high"], 1.02), color=colour, alpha=0.18, linewidth=0)
    ax.plot(span, [iv["mean"]] * 2, color=colour, lw=1)
    width = 0.6 * step  # the dots spread over it deterministically (golden ratio)
    dots = [x + (0.0 if n == 1 else ((i * 0.6180339887) % 1.0 - 0.5) * width) for i in range(n)]
    few = n <= 16
    ax.scatter(dots, e["values"], s=12 if few else 6, color=colour, alpha=0.85 if few else 0.55, linewidths=0, zorder=3)
    if e["published"] is not None:
        ax.plot([x], [e["published"]], markersize=8, markeredgewidth=1.4, zorder=4, **SEED_MARKER)


def _seeds_figure(entries: list[dict], cfg: dict, path: Path, formats: Sequence[str], keep: list | None) -> list[Path]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    lengths = list(dict.fromkeys(e["length"] for e in entries))
    models = list(dict.fromkeys(e["model"] for e in entries))
    k = len(lengths)
    fig, axes = new_figure(1, len(METRICS), figsize=(max(9.0, 3 * (1.2 + 0.75 * k)), 4.4), sharey=True)
    step = 0.8 / len(models)  # each length's slot is shared by the models side by side
    for ax, metric in zip(axes, METRICS):
        for j, model in enumerate(models):
            offset = (j - (len(models) - 1) / 2) * step
            for e in (e for e in entries if e["model"] == model and e["metric"] == metric):
                _seed_cell(ax, e, lengths.index(e["length"]) + offset, step, COLOURS[model])
        ax.set_xticks(range(k), labels=[str(L) for L in lengths])
        ax.set(xlim=(-0.6, k - 0.4), ylim=(-0.03, 1.05), xlabel="sequence length")
        ax.set_title(TITLES[metric], fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("accuracy")
    n_seeds = max(len(e["values"]) for e in entries)
    judged = any(e["status"] in ("pass", "fail") for e in entries)
    published = "published (W9 2.3)" if judged else "published (W9 2.3, at the text's settings: not judged here)"
    handles: list[Artist] = [Patch(color=COLOURS[m], alpha=0.5, label=SEED_LABELS[m]) for m in models]
    handles += [
        Line2D([], [], marker="o", color="gray", linestyle="none", markersize=4, label="one seed"),
        Patch(color="gray", alpha=0.25, label=f"seed rule's {LEVEL:.0%} interval (line: mean)"),
        Line2D([], [], markersize=7, label=published, **SEED_MARKER),
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
