"""Tables and figure for ``attn scaling`` (W9 5.2)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.render.console import beside
from attn_cli.render.files import log2_axis, new_figure, save_figure, write_csv
from attn_cli.render.table import Block, Cell, Table, styled, titled_table
from attn_cli.units import human_bytes, text_memory

if TYPE_CHECKING:
    from attn_cli.experiments.scaling import Result
    from attn_cli.published.compare import Outcome


def _beside(text: str, outcome: Outcome | None) -> Cell:
    """The regenerated cell, then (for a length the text prints, at its settings) = or ≠ and the text's value."""
    if outcome is None or outcome.status not in ("pass", "fail"):
        return text
    published = outcome.check.meta.get("printed") or f"{outcome.published:.2e}"
    return beside(text, outcome.status == "pass", published)


def tables(result: Result, outcomes: Mapping) -> list:
    out: list[Block] = [_formula_table(result, outcomes)]
    if not result.measured_rows:
        out.append("doubling the length quadruples the cost (try --measure to time it)")
        return out
    out.append(_measured_table(result))
    out += [styled(("left out", "yellow"), f" (does not fit): {line}") for line in result.dropped]
    if result.exponent is not None:
        out.extend(_exponent_notes(result, result.exponent))
    return out


def _formula_table(result: Result, o: Mapping) -> Table:
    d = result.config["d_model"]
    formula = titled_table(
        "W9 5.2  self-attention builds an n x n score matrix per head",
        ("n", "score entries", "memory (float32)", f"n² · d operations (d = {d})"),
        caption="each cell: regenerated, then the text's printed value",
    )
    for f in result.formula:
        cells = {"entries": f"{f.entries:.2e}", "memory": f.memory, "operations": f"{f.operations:.2e}"}
        formula.add_row(str(f.n), *(_beside(text, o.get(f"w9-scaling.{f.n}.{k}")) for k, text in cells.items()))
    return formula


def _measured_table(result: Result) -> Table:
    """The timed forward passes (--measure)."""
    d = result.config["d_model"]
    where = result.device_name if result.device_name != "cpu" else f"cpu, {result.threads} threads"
    peak = "peak memory (est.)" if "estimate" in result.peak_method else "peak memory"
    headers = ("n", "scores (float32)", "n² · d", "time", "median", "× previous", "achieved", peak, "up-front estimate")
    measured = titled_table(
        f"measured: one-head attention forward on {where} "
        f"(q, k, v of shape (1, n, {d}); fastest of {result.config['repeats']} passes)",
        headers,
        caption=f"peak memory: {result.peak_method}",
    )
    rows = result.measured_rows
    for prev, r in zip([None, *rows], rows):
        ratio = f"{r.time_s / prev.time_s:.1f}x (n {r.n / prev.n:g}x)" if prev else "—"
        times = (f"{r.time_s * 1e3:.2f} ms", f"{r.median_s * 1e3:.2f} ms", ratio, f"{r.gflops:.1f} GFLOP/s")
        memory = (human_bytes(r.peak_bytes), human_bytes(r.formula_bytes))
        measured.add_row(str(r.n), text_memory(4 * r.n * r.n), f"{r.operations:.2e}", *times, *memory)
    return measured


def _exponent_notes(result: Result, exponent: float) -> list[Block]:
    """The fitted exponent, then a note on why it may fall short of 2 (overheads, a busy CPU)."""
    fit = " (least squares on log-log; the formula says 2 once n is large enough for the n² d products to dominate)"
    out: list[Block] = [styled("fitted exponent: time ∝ n^", (f"{exponent:.2f}", "bold"), fit)]
    load, cpus = result.load_average, result.cpu_count
    why = []
    if exponent < 1.6:
        why.append("at small n fixed per-call overheads dominate (try larger --lengths)")
    if load is not None and cpus and load > cpus and result.device_name == "cpu":  # a busy CPU
        why.append(f"this CPU is busy (load average {load:.1f} on {cpus} cores), so timings are noisy")
    if why:
        out.append(styled(("note", "yellow"), f": {'; '.join(why)}."))
    return out


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    """The measured log-log plot (only when --measure ran)."""
    if not result.measured_rows:
        return []
    fig, (ax1, ax2) = new_figure(1, 2, figsize=(10, 4))
    rows = result.measured_rows
    ns = [r.n for r in rows]
    ts = [r.time_s for r in rows]
    ax1.loglog(ns, ts, "o", color="tab:blue", label="measured (fastest pass)")
    if result.exponent is not None:
        # least-squares line through the geometric mean of the points
        mx = sum(math.log(n) for n in ns) / len(ns)
        my = sum(math.log(t) for t in ts) / len(ts)
        fit = [math.exp(my + result.exponent * (math.log(n) - mx)) for n in ns]
        ax1.loglog(ns, fit, "-", color="tab:blue", alpha=0.6, label=f"fit: n^{result.exponent:.2f}")
        ref = [ts[-1] * (n / ns[-1]) ** 2 for n in ns]
        ax1.loglog(ns, ref, ":", color="gray", label="slope 2 (through the largest n)")
    ax1.set(ylabel="forward time (s)", title=f"time, d = {result.config['d_model']}, {result.device_name}")
    ax1.legend()
    ax2.loglog(ns, [r.peak_bytes for r in rows], "o-", color="tab:orange", label="peak memory")
    ax2.loglog(ns, [4 * n * n for n in ns], ":", color="gray", label="score matrix 4n² bytes")
    memory = "memory" + (" (estimated from tensor sizes)" if "estimate" in result.peak_method else "")
    ax2.set(ylabel="bytes", title=memory)
    ax2.legend()
    for ax in (ax1, ax2):
        log2_axis(ax, ns)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel("sequence length n")
    fig.suptitle("W9 5.2: attention cost is quadratic in n")
    images = save_figure(fig, out / "scaling_measured.png", formats, keep=keep, tight_layout={})
    table = [[r.n, r.time_s, r.median_s, r.peak_bytes, r.formula_bytes, r.operations, r.gflops] for r in rows]
    header = ["n", "time_s", "median_s", "peak_bytes", "forward_bytes_estimate", "operations_n2d", "gflops"]
    csv = write_csv(out / "scaling_measured.csv", table, header=header)
    return [*images, csv]
