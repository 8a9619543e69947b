"""Table and figures for ``attn copy-task`` (W9 2.3).

Every published value shown here (a cell's text value and its ``=``/``≠`` mark, the plain
model's quoted accuracies, the published points of the plot, the CSV's published column)
and every verdict (the marks, the near-diagonal line, the JSON's ``status``) comes from the
outcomes passed in (:func:`attn_cli.pipeline.run` compares once; ``attn all`` passes those of its
check table: one verdict per cell).  Nothing here compares a value with a published one.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Mapping

from attn_cli.published.catalogue import BY_ID
from attn_cli.published.compare import Outcome
from attn_cli.published.copy_task import MAP_RULE, MAP_RULE_ID, METRICS, TEXT_SETTING, cell_of, check_id
from attn_cli.published.seed_rule import RULE as SEED_RULE
from attn_cli.published.seed_rule import FLOOR

ACCURACY_PNG = BY_ID["w9-copy-task"].files[0]  # copy_task_accuracy.png
ACCURACY_CSV = "copy_task_accuracy.csv"
ROWS_JSON = "copy_task_runs.json"
MAP_PNG = BY_ID["w9-copy-task-map"].files[0]  # copy_task_attention_L{length}.png
HEADERS = {"teacher_forced": "teacher-forced", "free_running": "free-running", "exact": "whole seq. exact"}
MODEL_LABELS = {"attention": "attention", "plain": "plain (Week 8)"}
RENDER_VERSION = 4  # bump when a figure's look changes: cached PNGs are then redrawn
TOLERANCE_NOTE = (f"each published cell is one seed of training on an unknown machine, so it is judged by "
                  f"the seed rule: {SEED_RULE} (one seed: within ±{FLOOR:g}); the last printed digits of "
                  "one trained model are not reproducible across CPUs and PyTorch builds")

Outcomes = Mapping[str, Outcome]  # check ID -> Outcome


def _cells_judged(outcomes: Outcomes) -> bool:
    """Every published cell has a verdict (pass or fail), the one the check table shows."""
    return all(o.status in ("pass", "fail") for o in outcomes.values() if o.check.artifact == "w9-copy-task")


def _not_judged_line(outcomes: Outcomes) -> str:
    """Why the published cells are shown in brackets: not the text's settings, or the
    outcomes' own reason (a --quick run: "skipped (quick)")."""
    cells = [o for o in outcomes.values() if o.check.artifact == "w9-copy-task"]
    if any(o.status == "n/a" for o in cells):
        text = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in TEXT_SETTING.items())
        return (f"[yellow]~ not the text's settings[/] ({text}): the published values are shown in brackets "
                "for orientation only, not judged.")
    reasons = ", ".join(dict.fromkeys(o.note for o in cells if o.status not in ("pass", "fail")))
    return (f"[yellow]~ not judged: {reasons}[/]; the published values are shown in brackets for "
            "orientation only.")


def _published(outcomes: Outcomes, model: str, length: int, metric: str):
    """The text's value of one cell (from its outcome), or None where the text prints none."""
    o = outcomes.get(check_id(model, length, metric))
    return None if o is None else o.published


def _published_points(outcomes: Outcomes, model: str, metric: str) -> list[tuple[int, float]]:
    """(length, published value) of every cell of ``model`` and ``metric`` the text prints."""
    cells = [(cell_of(cid), o.published) for cid, o in outcomes.items() if o.check.artifact == "w9-copy-task"]
    return sorted((length, value) for (m, length, x), value in cells if (m, x) == (model, metric))


def _cell(stats: dict, n: int, outcome: Outcome | None) -> str:
    """One table cell: the value (mean ± std over several seeds), then, where the text prints
    this cell, its check's verdict (``=`` pass, ``≠`` and the difference fail: the outcome's
    status, never a comparison of its own) and the published value; where the outcome is not
    judged (another setting, a quick run) the published value is shown plainly."""
    text = f"{stats['mean']:.3f}" + (f" ± {stats['std']:.3f}" if n > 1 else "")
    if outcome is None:
        return text
    pub = outcome.published
    if outcome.status not in ("pass", "fail"):
        return f"{text} [dim](text {pub:.3f})[/]"
    mark = "[green]=[/]" if outcome.status == "pass" else f"[red]≠ ({stats['mean'] - pub:+.3f})[/]"
    return f"{text} {mark} [dim]{pub:.3f}[/]"


def tables(result, outcomes: Outcomes) -> list:
    """``outcomes``: check ID -> Outcome, the verdicts the marks show."""
    from rich.table import Table

    o = outcomes
    cfg = result.config
    seeds = tuple(cfg["seeds"]) or (cfg["seed"],)
    several = len(seeds) > 1
    models = [m for m in ("attention", "plain") if any(c["model"] == m for c in result.cells)]
    comparable = _cells_judged(o)
    engines = sorted({r["engine"] for r in result.rows})
    title = (f"W9 2.3  copy task  (hidden {cfg['hidden_size']}, {cfg['steps']} steps, batch {cfg['batch_size']}, "
             f"lr {cfg['lr']:g}, eval {cfg['eval_size']}, "
             + (f"seeds {' '.join(map(str, seeds))}" if several else f"seed {seeds[0]}")
             + f", {cfg['device']}, {' + '.join(engines)} engine)")
    caption = "each cell: regenerated" + (" (mean ± std over seeds)" if several else "")
    caption += (", = when the published value passes the seed rule (≠ and the difference when not), then the "
                "published value" if comparable else ", then the published value in brackets (not judged)")
    table = Table(title=title, caption=caption)
    table.add_column("length", justify="right")
    table.add_column("model")
    for metric in METRICS:
        table.add_column(HEADERS[metric], justify="right")
    for length in cfg["lengths"]:
        for i, model in enumerate(models):
            cell = result.cell(model, length)
            table.add_row(str(length) if i == 0 else "", MODEL_LABELS[model],
                          *(_cell(cell[metric], cell["n"], o.get(check_id(model, length, metric)))
                            for metric in METRICS),
                          end_section=(i == len(models) - 1 and len(models) > 1))
    out: list = [table]
    if several:
        out.append(_runs_table(result))
    if not comparable:
        out.append(_not_judged_line(o))
    out.append(f"note: {TOLERANCE_NOTE}.")
    if "plain" in models:
        quoted = ", ".join(f"{v:g} at {L}" for L, v in _published_points(o, "plain", "free_running"))
        out.append(f"plain: Week 8's encoder-decoder without attention; W9 quotes only its free-running "
                   f"accuracy ({quoted}).")
    if result.maps:
        out.append(_map_line(result, o.get(MAP_RULE_ID), len(seeds)))
    computed = [r for r in result.runs if not r["cached"]]
    notes = {"exact": "exact engine: bit-identical to the W9 2.3 program run with the same pinned CPU kernels",
             "fast": "fast engine: the exact engine's seed distribution, not its bits"}
    engine_note = "; ".join(notes[e] for e in engines)
    out.append(f"{len(result.runs)} runs: {len(result.runs) - len(computed)} cached, {len(computed)} computed; "
               f"{result.seconds:.1f} s wall; {engine_note}.")
    return out


def _map_line(result, rule: Outcome | None, n_seeds: int) -> str:
    """The near-diagonal line: the measured fractions, the rule and its outcome."""
    parts = [f"L{m['length']} {m['diagonal_all']:.0%}" for m in result.maps]
    status = rule.status if rule is not None else None  # the check's verdict, as the check table shows it
    verdict = ("[green]holds[/]" if status == "pass" else "[red]fails[/]" if status == "fail"
               else f"not judged here: {rule.note}" if rule is not None and rule.note else "not judged here")
    return (f"attention maps: over all {result.config['eval_size']} evaluation sequences and {n_seeds} seed(s), "
            f"the readout attention peaks at the step's own input position for {', '.join(parts)} of decoder "
            "steps (each figure shows one sequence). Near-diagonal rule: " + MAP_RULE + ": " + verdict + ".")


def _runs_table(result):
    from rich.table import Table

    table = Table(title="runs (one per model, length and seed)")
    for name in ("model", "length", "seed", "engine", "teacher-forced", "free-running", "exact", "diagonal",
                 "final loss", "seconds"):
        table.add_column(name, justify="left" if name in ("model", "engine") else "right")
    for row, run in zip(result.rows, result.runs):
        diagonal = "" if row["diagonal"] is None else f"{row['diagonal']:.3f}"  # None: plain model
        table.add_row(row["model"], str(row["length"]), str(row["seed"]), row["engine"],
                      f"{row['teacher_forced']:.3f}", f"{row['free_running']:.3f}", f"{row['exact']:.3f}", diagonal,
                      f"{run['final_loss']:.4f}", "cached" if run["cached"] else f"{run['seconds']:.1f}")
    return table


def figures(result, out: Path, formats, outcomes: Outcomes) -> list[Path]:
    """Write the accuracy plot and one attention map per length, each with its numbers beside;
    for several seeds per cell also their distribution (:mod:`attn_cli.render.copy_task_seeds`).

    A PNG already drawn from the same numbers (its ``attn-digest`` text chunk matches) is
    kept as it is, so a cached rerun does not even import matplotlib.
    """
    from attn_cli.render.files import split_timing, write_csv, write_json

    o = outcomes
    out = Path(out)
    accuracy_png = out / ACCURACY_PNG
    drawn_from = {k: v for k, v in result.config.items() if k not in ("jobs", "cache_root", "use_cache")}
    # In a figure drawer (no torch, matplotlib warm) each figure is queued (``later``) and the
    # queue is drawn by one forked child per core, each taking the next figure as it is free
    # (save_processes.pull); the paths are known before (the same targets).  The costliest go
    # first, so that no long figure starts last: the costliest map, then the accuracy plot
    # (about a length-16 map's CPU time; it came last and ended the window alone), then the
    # other maps by cost (_map_cost).  The files are listed in the usual order.
    from attn_cli.render import drawer, save_processes

    later: list | None = [] if drawer.inside() and save_processes.available() else None
    by_length = sorted(enumerate(result.maps), key=lambda im: -_map_cost(im[1]["length"]))
    drawn: dict[int, list[Path]] = {}
    paths: list[Path] = []

    def draw_map(i: int, m: dict) -> None:
        target = out / MAP_PNG.format(length=m["length"])
        drawn[i] = _draw_once(target, m, formats, lambda digest: _map_figure(m, target, digest, formats), later)

    for i, m in by_length[:1]:
        draw_map(i, m)
    paths += _draw_once(accuracy_png, {"cells": result.cells_with_published(o), "config": drawn_from}, formats,
                        lambda digest: _accuracy_figure(result, o, accuracy_png, digest, formats), later)
    for i, m in by_length[1:]:
        draw_map(i, m)
    paths.append(write_csv(
        out / ACCURACY_CSV,
        [[c["model"], c["length"], c["n"], *(x for m in METRICS for x in (c[m]["mean"], c[m]["std"])),
          _published(o, c["model"], c["length"], "free_running")] for c in result.cells],
        header=["model", "length", "seeds", *(x for m in METRICS for x in (f"{m}_mean", f"{m}_std")),
                "free_running_published"]))
    paths.append(write_json(out / ROWS_JSON, split_timing(
        {"config": result.config, "rows": result.rows, "runs": copy.deepcopy(result.runs)}, type(result).TIMING)))
    for i, m in enumerate(result.maps):
        map_png = out / MAP_PNG.format(length=m["length"])
        paths += drawn[i]
        paths.append(write_csv(map_png.with_suffix(".csv"), [[f"step {t} ({m['src'][t]})", *row]
                                                        for t, row in enumerate(m["weights"])],
                               header=["decoder step \\ input", *(f"{j} ({d})" for j, d in enumerate(m["src"]))]))
    from attn_cli.render import copy_task_seeds  # several seeds per cell: their distribution (nothing for one)

    paths += copy_task_seeds.figures(result, out, formats, o,
                                     draw_once=lambda *args: _draw_once(*args, later=later))
    if later:
        save_processes.pull(later)  # every file complete when it returns
    return paths


DIGEST_KEY = "attn-digest"


def _digest(data) -> str:
    import hashlib
    import json

    blob = json.dumps({"render": RENDER_VERSION, "data": data}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _draw_once(path: Path, data, formats, draw, later: list | None = None) -> list[Path]:
    """Draw ``path`` in each format unless the PNG already holds exactly ``data`` (its digest)
    and every other format was written with it (present, not older than the PNG); no format
    (``--no-figures``): nothing.  ``later``: the drawing is appended there instead, to be run
    by the caller (in a figure drawer: :func:`attn_cli.render.save_processes.pull`), and the
    paths it will write are returned."""
    if not formats:  # --no-figures: nothing drawn, matplotlib not imported
        return []
    digest = _digest(data)
    targets = [path.with_suffix("." + f) for f in dict.fromkeys(formats)]
    if "png" in formats and png_text(path).get(DIGEST_KEY) == digest:
        made = path.stat().st_mtime_ns
        if all(t.exists() and t.stat().st_mtime_ns >= made for t in targets):
            return targets
    if later is not None:
        later.append(lambda: draw(digest))
        return targets
    return draw(digest)


def _save(fig, path: Path, digest: str, formats, box=None) -> list[Path]:
    """Save in each format (the PNG with the digest of its numbers as a text chunk) and close;
    laid out and cropped now, or (``box``) as it was laid out before (:func:`_map_frame`)."""
    from attn_cli.render.files import save_figure

    return save_figure(fig, path, formats, metadata={DIGEST_KEY: digest}, box=box,
                       tight_layout={} if box is None else None)


def png_text(path: Path) -> dict[str, str]:
    """The text chunks of a PNG, read by Pillow (matplotlib's own PNG writer, installed with it;
    its import is ~0.1 s against matplotlib's ~1.5 s); {} for a missing file, another format,
    or one Pillow cannot verify whole (truncated, a chunk's CRC wrong): it is then redrawn."""
    import struct

    from PIL import Image

    try:
        with Image.open(path) as image:
            if image.format != "PNG":
                return {}
            text = {k: v for k, v in image.info.items() if isinstance(k, str) and isinstance(v, str)}
            image.verify()  # every chunk's CRC, up to the image's end
    except (OSError, SyntaxError, ValueError, EOFError, struct.error):  # Pillow's ways of saying "broken"
        return {}
    return text


def _accuracy_figure(result, outcomes: Outcomes, path: Path, digest: str, formats) -> list[Path]:
    from attn_cli.render.figures import new_figure

    fig, ax = new_figure(figsize=(6.4, 4.2))
    colours = {"attention": "tab:blue", "plain": "tab:red"}
    labels = {"attention": "attention (W9 2.3)", "plain": "plain encoder-decoder (Week 8)"}
    lengths = list(result.config["lengths"])
    for model in ("attention", "plain"):
        cells = [c for c in result.cells if c["model"] == model]
        if not cells:
            continue
        xs = [c["length"] for c in cells]
        ys = [c["free_running"]["mean"] for c in cells]
        errs = [c["free_running"]["std"] for c in cells]
        ax.errorbar(xs, ys, yerr=errs if any(errs) else None, fmt="o-", color=colours[model], capsize=3,
                    label=f"{labels[model]}, regenerated")
    for model in sorted({c["model"] for c in result.cells}):
        pts = _published_points(outcomes, model, "free_running")
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="none", marker="D", markersize=9,
                    markerfacecolor="none", markeredgecolor=colours[model], markeredgewidth=1.5,
                    label=f"{labels[model].split(' (')[0]}, published")
    ticks = sorted(set(lengths) | {4, 16, 32})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, labels=[str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.axhline(0.1, color="gray", ls=":", lw=1)
    ax.text(ticks[0], 0.1, " chance (1 in 10)", va="bottom", color="gray", fontsize=8)
    ax.set_xlabel("sequence length")
    ax.set_ylabel("free-running token accuracy")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    cfg = result.config
    engines = " + ".join(sorted({r["engine"] for r in result.rows}))
    ax.set_title(f"W9 2.3 copy task: attention removes the bottleneck\n(hidden {cfg['hidden_size']}, "
                 f"{cfg['steps']} step{'' if cfg['steps'] == 1 else 's'}, {engines} engine)", fontsize=10)
    return _save(fig, path, digest, formats)


MAP_FRAME = "copy-task map"  # a kept frame's key, with the length (render/frames.py)
MAX_FRAMES = 8  # maps built ahead by a figure drawer (prepare)
STAND_IN_DIGIT = "0"  # each tick label's stand-in while a map is laid out (its numbers not yet known)


def prepare(config, formats) -> None:
    """Build each attention map's frame (:func:`_map_frame`) before the runs end: called in a
    figure drawer while this command imports torch and trains (:mod:`attn_cli.render.frames`)."""
    from attn_cli.render import frames

    if formats and "attention" in config.model_list:
        # the longest first, at most MAX_FRAMES: built one after another here, a long list would
        # keep the drawer from its first request, where children build the rest side by side
        for length in sorted(set(config.lengths), reverse=True)[:MAX_FRAMES]:
            frames.keep((MAP_FRAME, length), _map_frame(length))


def _map_size(length: int) -> float:
    """The map's height in inches (its width: 1.2 more, for the colour bar); at least length 4's
    (below, the y axis's label ran into the title)."""
    return min(3 + 0.28 * max(length, 4), 14)


def _map_cost(length: int) -> float:
    """A map's drawing cost, in arbitrary units, to order the maps' hand-out: its texts (tick
    labels; a value in every cell up to length 8) plus its pixels / 10,000.  Measured in one
    process: 0.29, 0.15, 0.20 and 0.10 s of CPU at lengths 32, 16, 8 and 4 (estimates 288, 123,
    127, 54: the annotated length 8 before 16)."""
    from attn_cli.render.files import DPI

    ticks = len(range(0, length, _tick_step(length)))
    height = _map_size(length)  # inches; the width 1.2 more (_map_frame), the crop roughly so
    return 2 * ticks + (length * length if length <= 8 else 0) + height * (height + 1.2) * DPI * DPI / 10_000


def _tick_step(length: int) -> int:
    """Every position is labelled up to 48; beyond, every k-th (too many to read)."""
    return 1 if length <= 48 else -(-length // 24)


def _map_title(length: int, diagonal: float, diagonal_all: float, free_running: float, seed: int) -> str:
    # a narrow map (lengths below 16) takes its title on three lines: on two it is wider than
    # the figure, which left blank margins beside the map and cost a second drawing to save
    wrap = "\n" if _map_size(length) < 8 else " "
    return (f"W9 2.3 attention, length {length}: readout weights, free running\n"
            f"argmax on the diagonal at {diagonal:.0%} of this sequence's steps{wrap}"
            f"({diagonal_all:.0%} over all sequences); free-running accuracy "
            f"{free_running:.3f} (seed {seed})")


MAP_TITLE_SIZE = 9


def _map_base(length: int):
    """(figure, axes, image): the length's attention map as far as it goes without its numbers
    (the figure, the ticks, the axis labels, the colour bar), in the order it was always built."""
    from attn_cli.render.figures import heatmap_frame, new_figure

    size = _map_size(length)
    fig, ax = new_figure(figsize=(size + 1.2, size))
    im = heatmap_frame(ax, length, length)
    step = _tick_step(length)
    if step > 1:
        ax.set_xticks(range(0, length, step))
        ax.set_yticks(range(0, length, step))
    ax.set_xlabel("input position (the digit there)")
    ax.set_ylabel("decoder step (the digit it should write)")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    return fig, ax, im


def _map_frame(length: int):
    """(figure, axes, image, box): :func:`_map_base` laid out
    (:func:`attn_cli.render.files.lay_out`) with a stand-in digit for every tick label and the
    title of seed 0 at its widest (100%, 100%, 1.000); ``box``: the crop.  So a map's geometry
    is its length's, whatever its digits, and its save measures no text (:func:`_map_figure`
    checks that the real title fits)."""
    from attn_cli.render.files import lay_out

    fig, ax, im = _map_base(length)
    stand_in = [STAND_IN_DIGIT] * len(range(0, length, _tick_step(length)))
    ax.set_xticklabels(stand_in)
    ax.set_yticklabels(stand_in)
    ax.set_title(_map_title(length, 1.0, 1.0, 1.0, 0), fontsize=MAP_TITLE_SIZE)
    return fig, ax, im, lay_out(fig)


def _title_fits(fig, ax, box) -> bool:
    """Whether ``ax``'s title, as set now, lies inside the tight box the layout measured (``box``
    less its pad, inches), at the save dpi: one text measured.  Where the stand-in title was the
    widest text (the shortest maps) a narrower title keeps the stand-in's margins; a wider one
    (a long seed) is laid out again.  The other texts that change with the numbers are tick
    digits, each within a pixel or two of the stand-in's ink, inside the pad (12 pixels)."""
    import matplotlib

    from attn_cli.render.files import DPI

    pad = matplotlib.rcParams["savefig.pad_inches"]
    old_dpi = fig.dpi
    fig.set_dpi(DPI)
    try:
        extent = ax.title.get_window_extent(fig.canvas.get_renderer())  # pixels at DPI
    finally:
        fig.set_dpi(old_dpi)
    slack = 0.5  # pixels: the box went through inches; the stand-in's own edges lie on it
    return ((box.x0 + pad) * DPI - slack <= extent.x0 and extent.x1 <= (box.x1 - pad) * DPI + slack
            and (box.y0 + pad) * DPI - slack <= extent.y0 and extent.y1 <= (box.y1 - pad) * DPI + slack)


def _map_figure(m: dict, path: Path, digest: str, formats) -> list[Path]:
    from attn_cli.render import frames
    from attn_cli.render.figures import fill_heatmap

    length = m["length"]
    title = _map_title(length, m["diagonal"], m["diagonal_all"], m["free_running"], m["seed"])
    labels = [str(d) for d in m["src"]][::_tick_step(length)]

    def fill(ax, im) -> None:
        fill_heatmap(ax, im, m["weights"], labels, labels, annotate=length <= 8)
        ax.set_title(title, fontsize=MAP_TITLE_SIZE)

    fig, ax, im, box = frames.take((MAP_FRAME, length)) or _map_frame(length)
    fill(ax, im)
    if not _title_fits(fig, ax, box):  # a title wider than the stand-in's (a long seed): laid out around it
        import matplotlib.pyplot as plt

        plt.close(fig)
        (fig, ax, im), box = _map_base(length), None
        fill(ax, im)
    return _save(fig, path, digest, formats, box=box)
