"""Table and figures for ``attn copy-task`` (W9 2.3).

Every published value and every verdict shown here (the marks, the near-diagonal line, the plot's
published points, the CSV's published column) comes from the outcomes passed in: nothing here
compares a value with a published one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.published.catalogue import BY_ID
from attn_cli.published.compare import Outcome
from attn_cli.published.copy_task import MAP_RULE, MAP_RULE_ID, METRICS, TEXT_SETTING, cell_of, check_id
from attn_cli.published.seed_rule import FLOOR
from attn_cli.published.seed_rule import RULE as SEED_RULE
from attn_cli.render import copy_task_seeds
from attn_cli.render.console import beside
from attn_cli.render.copy_task_seeds import COLOURS
from attn_cli.render.table import Cell, Table, Text, styled

if TYPE_CHECKING:
    from attn_cli.experiments.copy_task import Result

ACCURACY_PNG = BY_ID["w9-copy-task"].files[0]  # copy_task_accuracy.png
ACCURACY_CSV = "copy_task_accuracy.csv"
ROWS_JSON = "copy_task_runs.json"
MAP_PNG = BY_ID["w9-copy-task-map"].files[0]  # copy_task_attention_L{length}.png
HEADERS = {"teacher_forced": "teacher-forced", "free_running": "free-running", "exact": "whole seq. exact"}
MODEL_LABELS = {"attention": "attention", "plain": "plain (Week 8)"}
RUN_COLUMNS = ("model", "length", "seed", "engine", "teacher-forced", "free-running", "exact", "diagonal")
LABELS = {"attention": "attention (W9 2.3)", "plain": "plain encoder-decoder (Week 8)"}
# the published points of the accuracy plot (their edge: the model's colour)
PUBLISHED_MARKER: dict[str, Any] = {"linestyle": "none", "marker": "D", "markersize": 9, "markerfacecolor": "none"}
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
    """Why the published cells are shown in brackets: not the text's settings, or the
    outcomes' own reason (a --quick run: "skipped (quick)")."""
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
    """One table cell: the value (mean ± std over several seeds), then, where the text prints this
    cell, its check's mark and the published value (in brackets where the check is not judged)."""
    text = f"{stats['mean']:.3f}" + (f" ± {stats['std']:.3f}" if n > 1 else "")
    if outcome is None:
        return text
    pub = outcome.published
    if outcome.status not in ("pass", "fail"):
        return styled(f"{text} ", (f"(text {pub:.3f})", "dim"))
    return beside(text, outcome.status == "pass", f"{pub:.3f}", f"{stats['mean'] - pub:+.3f}")


def tables(result: Result, outcomes: Outcomes) -> list:
    """``outcomes``: check ID -> Outcome, the verdicts the marks show."""
    seeds = tuple(result.config["seeds"]) or (result.config["seed"],)
    # every published cell has a verdict (pass or fail), the one the check table shows
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
    engines = sorted({r["engine"] for r in result.rows})
    computed = [r for r in result.runs if not r["cached"]]
    out.append(
        f"{len(result.runs)} runs: {len(result.runs) - len(computed)} cached, {len(computed)} computed; "
        f"{result.seconds:.1f} s wall; {'; '.join(ENGINE_NOTES[e] for e in engines)}."
    )
    return out


def _cells_table(result: Result, outcomes: Outcomes, seeds: tuple, comparable: bool) -> Table:
    """One row per length and model, one column per metric; each cell marked by its check."""
    cfg = result.config
    several = len(seeds) > 1
    engines = sorted({r["engine"] for r in result.rows})
    models = [m for m in ("attention", "plain") if any(c["model"] == m for c in result.cells)]
    title = (
        f"W9 2.3  copy task  (hidden {cfg['hidden_size']}, {cfg['steps']} steps, batch {cfg['batch_size']}, "
        f"lr {cfg['lr']:g}, eval {cfg['eval_size']}, "
        + (f"seeds {' '.join(map(str, seeds))}" if several else f"seed {seeds[0]}")
        + f", {cfg['device']}, {' + '.join(engines)} engine)"
    )
    caption = "each cell: regenerated" + (" (mean ± std over seeds)" if several else "")
    caption += (
        ", = when the published value passes the seed rule (≠ and the difference when not), then the published value"
        if comparable
        else ", then the published value in brackets (not judged)"
    )
    table = Table(title=title, caption=caption)
    table.add_column("length", justify="right")
    table.add_column("model")
    for metric in METRICS:
        table.add_column(HEADERS[metric], justify="right")
    for length in cfg["lengths"]:
        for i, model in enumerate(models):
            cell = result.cell(model, length)
            assert cell is not None  # every model ran every length
            table.add_row(
                str(length) if i == 0 else "",
                MODEL_LABELS[model],
                *(_cell(cell[metric], cell["n"], outcomes.get(check_id(model, length, metric))) for metric in METRICS),
                end_section=(i == len(models) - 1 and len(models) > 1),
            )
    return table


def _map_line(result: Result, rule: Outcome | None, n_seeds: int) -> Text:
    """The near-diagonal line: the measured fractions, the rule and its outcome."""
    parts = [f"L{m['length']} {m['diagonal_all']:.0%}" for m in result.maps]
    status = rule.status if rule is not None else None  # the check's verdict, as the check table shows it
    verdict: str | tuple[str, str] = {"pass": ("holds", "green"), "fail": ("fails", "red")}.get(status or "", "")
    if not verdict:
        verdict = f"not judged here: {rule.note}" if rule is not None and rule.note else "not judged here"
    return styled(
        f"attention maps: over all {result.config['eval_size']} evaluation sequences and {n_seeds} "
        f"seed(s), the readout attention peaks at the step's own input position for {', '.join(parts)} "
        "of decoder steps (each figure shows one sequence). Near-diagonal rule: " + MAP_RULE + ": ",
        verdict,
        ".",
    )


def _runs_table(result: Result) -> Table:
    table = Table(title="runs (one per model, length and seed)")
    for name in (*RUN_COLUMNS, "final loss", "seconds"):
        table.add_column(name, justify="left" if name in ("model", "engine") else "right")
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
    for several seeds per cell also their distribution (:mod:`attn_cli.render.copy_task_seeds`)."""
    from attn_cli.render.files import split_timing, write_csv, write_json

    out = Path(out)
    paths = _accuracy_figure(result, outcomes, out / ACCURACY_PNG, formats, keep) if formats else []
    stats = [(m, s) for m in METRICS for s in ("mean", "std")]
    rows = []
    for c in result.cells:
        published = outcomes.get(check_id(c["model"], c["length"], "free_running"))  # None: the text prints none
        rows.append([c["model"], c["length"], c["n"], *(c[m][s] for m, s in stats), published and published.published])
    header = ["model", "length", "seeds", *(f"{m}_{s}" for m, s in stats), "free_running_published"]
    paths.append(write_csv(out / ACCURACY_CSV, rows, header=header))
    runs = {"config": result.config, "rows": result.rows, "runs": copy.deepcopy(result.runs)}
    paths.append(write_json(out / ROWS_JSON, split_timing(runs, type(result).TIMING)))
    for m in result.maps:
        map_png = out / MAP_PNG.format(length=m["length"])
        if formats:
            paths += _map_figure(m, map_png, formats, keep)
        rows = [[f"step {t} ({m['src'][t]})", *row] for t, row in enumerate(m["weights"])]
        header = ["decoder step \\ input", *(f"{j} ({d})" for j, d in enumerate(m["src"]))]
        paths.append(write_csv(map_png.with_suffix(".csv"), rows, header=header))
    paths += copy_task_seeds.figures(result, out, formats, outcomes, keep)  # several seeds per cell: their distribution
    return paths


def _accuracy_figure(
    result: Result, outcomes: Outcomes, path: Path, formats: Sequence[str], keep: list | None = None
) -> list[Path]:
    from attn_cli.render.figures import new_figure
    from attn_cli.render.files import save_figure

    fig, ax = new_figure(figsize=(6.4, 4.2))
    for model in ("attention", "plain"):
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
            ax.plot(xs, ys, markeredgecolor=COLOURS[model], markeredgewidth=1.5, label=label, **PUBLISHED_MARKER)
    ticks = sorted(set(result.config["lengths"]) | {4, 16, 32})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, labels=[str(t) for t in ticks])
    ax.minorticks_off()
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
    """One length's attention map: the readout weights of one sequence, a value in every cell
    up to length 8, every position labelled up to length 48 (beyond, every k-th)."""
    from attn_cli.render.figures import fill_heatmap, heatmap_frame, new_figure
    from attn_cli.render.files import save_figure

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
