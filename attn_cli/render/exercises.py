"""Tables and figures for ``attn exercise`` (D2L 10.3.5 exercises 1-12).

No published numbers exist for the exercises: each table shows the measurement beside
the value the exercise's analysis predicts (``theory``), and a one-line reading below.
Figures: exercise_2.png (error vs epsilon, log-log), exercise_6.png (time vs h),
exercise_11.png (the plain map and four heads), exercise_12.png (trained head weights),
each with its raw numbers in a CSV of the same name.
"""

from __future__ import annotations

from pathlib import Path

from attn_cli.experiments.exercises import TITLES, Result
from attn_cli.render.files import DEFAULT_FORMATS

FILES = {  # exercise -> (png, csv): the names in the catalogue
    2: ("exercise_2.png", "exercise_2.csv"),
    6: ("exercise_6.png", "exercise_6.csv"),
    11: ("exercise_11.png", "exercise_11.csv"),
    12: ("exercise_12.png", "exercise_12.csv"),
}


def _table(number: int, caption: str | None = None, subtitle: str = ""):
    from rich.table import Table

    title = f"D2L 10.3.5 exercise {number}: {TITLES[number]}" + (f"  ({subtitle})" if subtitle else "")
    return Table(title=title, caption=caption, title_justify="left", caption_justify="left")


def _g(x: float, digits: int = 3) -> str:
    if x != x:
        return "nan"
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.{digits}f}"
    return f"{x:.{max(1, digits - 2)}e}"


def _note(text: str):
    """A reading below a table: plain text (brackets such as E[v1|m] are not markup)."""
    from rich.text import Text

    return Text(text)


def _yes(ok: bool) -> str:
    return "[green]yes[/]" if ok else "[red]no[/]"


def _ex1(e) -> list:
    t = _table(1, subtitle=f"N = {e.samples} train + {e.samples} held out, d = {e.dim}; per-coordinate "
                           f"MLP 1-{e.hidden}-{e.hidden}-2, {e.steps} Adam steps on {e.points} coordinates",
               caption="held-out relative error ||pred - t|| / ||t||; theory = the best any readout can do")
    for col in ("values", "a", "levels of m_j", "linear", "MLP", "theory"):
        t.add_column(col, justify="left" if col == "values" else "right")
    for r in e.rows:
        name = "Gaussian" if r.values == "gaussian" else "uniform ±1"
        levels = "continuous" if r.values == "gaussian" else str(r.distinct_levels)
        t.add_row(name, f"{r.a:.1f}", levels, _g(r.linear), _g(r.mlp), _g(r.theory))
    return [t, _note("Gaussian values: E[v1|m] is linear, so the MLP cannot beat √½. ±1 values at a = 0.5: m_j ∈ "
               "{-1, 0, 1} and E[v1_j|m_j] = m_j, linear again. At a = 0.7 the four levels ±1, ±0.4 identify "
               "(v1_j, v2_j): the MLP decodes them, the linear readout stays at √½ (same second moments). "
               "No contradiction: the proposition assumes Gaussian values (or a linear readout).")]


def _ex2(e) -> list:
    out = []
    for s in e.sweeps:
        slope = "n/a" if s.slope is None else f"{s.slope:.3f}"
        t = _table(2, subtitle=f"σ = {s.sigma:g}, knee ε* = σ/2 = {s.knee:g}, slope {slope} "
                               f"over {s.slope_points} straight points",
                   caption=e.eigenvalues + "; theory √((e_s + e_u)/4), e_u = 2σ²/(4ε² + σ²)")
        for col in ("ε", "κ(A)", "readout error", "theory", "in slope fit"):
            t.add_column(col, justify="right")
        for p in s.points:
            t.add_row(f"{p.eps:g}", _g(p.condition, 4), _g(p.error, 4), _g(p.theory, 4), "•" if p.straight else "")
        out.append(t)
    out.append(_note("The noisy mixtures observe v1+v2 (signal 1) and v1-v2 (signal 2ε), each with noise σ√2: the "
               "difference is recovered with error ∝ σ/ε (slope -1) until ε ≈ σ/2, below which the second "
               "head adds nothing and the error returns to √½. Ten times less noise moves the knee ten times "
               "lower."))
    return out


def _ex3(e) -> list:
    t = _table(3, subtitle=f"values in R^{e.value_dim}, {e.samples} train + held-out samples",
               caption=f"population = exact error from the covariances; max |population - (1 - rank/k)| = "
                       f"{e.max_gap:.1e}")
    for col in ("A", "h", "k", "rank(A)", "min entry", "1 - rank/k", "population", "sampled (held out)"):
        t.add_column(col, justify="left" if col == "A" else "right")
    for r in e.rows:
        t.add_row(r.kind, str(r.h), str(r.k), str(r.rank), _g(r.min_entry, 4), _g(r.bound, 4),
                  f"{r.population + 0.0:.6f}".replace("-0.000000", "0.000000"), _g(r.sampled, 4))
    return [t, _note("Squared relative error. Random softmax rows (all entries positive) reach rank min(h, k); "
               "duplicated or uniform heads lose rank and error. A layer of width d passes d numbers, so its "
               "'rank' is capped at d/c value slots however many heads it has.")]


def _ex4(e) -> list:
    t = _table(4, subtitle=f"β = {e.beta:g}, {e.resamples} resamples of the keys",
               caption=f"failure: ||o - (v_a+v_b)/2|| > {e.threshold}; as c → ∞ the two queries fail only for "
                       f"γ < -1, probability {e.two_query_limit:.3f}")
    for col in ("setting", "c", "median error", "failure fraction"):
        t.add_column(col, justify="left" if col == "setting" else "right")
    for r in e.rows:
        t.add_row(r.setting, f"{r.c:g}", _g(r.median, 4), f"{r.failure:.3f}")
    return [t, _note("w_a/w_b = exp(cγ): one query swings to v_a or v_b with the sign of γ. Raising c hurts one query "
               "even with isotropic keys: the noise on the two scores is c√(2β) (0.14 at c = 10, 1.41 at c = 100), "
               f"so the tie breaks at random. The part-4 query is immune to γ (max change {e.neg_gamma_spread:.1e}) "
               "but keeps that tie; two queries need only one winner each.")]


def _ex5(e) -> list:
    heads = ", ".join(f"{i + 1}: ({a:g}, {b:g})" for i, (a, b) in enumerate(e.heads))
    t = _table(5, subtitle=f"heads {heads}; τ = {e.tau}", caption=f"solver: {e.solver}")
    t.add_column("heads kept", justify="left")
    t.add_column("removed", justify="left")
    t.add_column("readout error", justify="right")
    t.add_row("1 2 3", "", _g(e.full_error))
    for s in e.subsets:
        t.add_row(" ".join(map(str, s.kept)), " ".join(map(str, s.removed)), _g(s.error))
    p = _table(5, subtitle="one-shot vs greedy")
    for col in ("procedure", "importances", "removed", "kept", "error", "evaluations", "to prune h → 1"):
        p.add_column(col, justify="left" if col in ("procedure", "importances") else "right")
    p.add_row("one-shot", " ".join(f"{x:.2g}" for x in e.importance), " ".join(map(str, e.one_shot_removed)),
              " ".join(map(str, e.one_shot_kept)), _g(e.one_shot_error), str(e.one_shot_evaluations),
              e.one_shot_formula)
    p.add_row("greedy", " → ".join(" ".join(f"{x:.2g}" for x in s["importance"]) for s in e.greedy_steps),
              " ".join(map(str, e.greedy_removed)), " ".join(map(str, e.greedy_kept)), _g(e.greedy_error),
              str(e.greedy_evaluations), f"{e.greedy_to_one_formula} (counted {e.greedy_to_one} at h = 3)")
    return [t, p, _note("Heads 2 and 3 cover for each other, so each alone looks unimportant; one-shot removes both and "
                  "loses the second mixture. Greedy re-measures after each removal and keeps one. At h = 96: "
                  f"one-shot {96 + 1}, greedy {96 * 97 // 2} evaluations.")]


def _ex6(e) -> list:
    t = _table(6, subtitle=f"d = {e.d}, n = {e.n}, batch {e.batch}, {e.device}, {e.threads} thread(s), "
                           f"median of {e.repeats} after a warm-up",
               caption=f"fit time = {e.fixed_seconds * 1e3:.1f} ms + {e.ns_per_entry:.2f} ns × entries, "
                       f"R² = {e.r_squared:.3f}")
    for col in ("h", "p = d/h", "forward ms", "score entries B·h·n²", "matmul FLOPs (Eq. 10.3.3)", "fit ms"):
        t.add_column(col, justify="right")
    for r in e.rows:
        fit = (e.fixed_seconds + e.ns_per_entry * 1e-9 * r.score_entries) * 1e3
        t.add_row(str(r.h), str(r.p), f"{r.seconds * 1e3:.1f}", f"{r.score_entries:,}", f"{r.matmul_flops:.3e}",
                  f"{fit:.1f}")
    return [t, _note(f"slowest/fastest = {e.ratio:.1f} (h = {e.slowest_h} vs h = {e.fastest_h}). The multiply-adds are "
               "constant; the score tensor (B·h·n² entries: scaling, softmax, memory traffic) grows with h and "
               "accounts for the trend. Narrow heads also lose patterns: with p = 1 a query can be sharp only on "
               "the largest or smallest key; p = 2 already allows any assignment.")]


def _ex7(e) -> list:
    t = _table(7, subtitle=f"d = {e.d}, h = {e.heads}; FLOPs counted by FlopCounterMode on the meta device",
               caption="4nd² (W_q, W_o: grows with n) + 4md² (W_k, W_v: grows with m) + 4nmd (scores and "
                       "mixing: grows with nm)")
    for col in ("n", "m", "4nd²", "4md²", "4nmd", "formula", "counted"):
        t.add_column(col, justify="right")
    for r in e.rows:
        t.add_row(str(r.n), str(r.m), f"{r.q_and_out:.3e}", f"{r.k_and_v:.3e}", f"{r.scores_and_mix:.3e}",
                  f"{r.formula:.4e}", f"{r.counted:.4e}" + ("" if r.counted == r.formula else " [red]≠[/]"))
    p = _table(7, subtitle=f"one decoder step, m = {e.m} source tokens")
    for col in ("keys and values", "formula", "FLOPs", "counted"):
        p.add_column(col, justify="left" if col in ("keys and values", "formula") else "right")
    p.add_row("recomputed every step", "4d² + 4md² + 4md", f"{e.recompute_formula:,}", f"{e.recompute_counted:,}")
    p.add_row("computed once, cached", "4d² + 4md", f"{e.cached_formula:,}", f"{e.cached_counted:,}")
    return [t, p, _note(f"ratio {e.ratio_expression} = {e.ratio:.1f} (counted {e.ratio_counted:.1f}) for d = {e.d}, "
                  f"m = {e.m}: caching turns the per-token cost from O(m d²) into O(m d).")]


def _ex8(e) -> list:
    t = _table(8, subtitle=f"d = {e.d}, h = {e.h}, p = {e.p}, 16-bit; FLOPs at n = {e.tokens} tokens",
               caption="parameters 2d² + 2(g/h)d²; FLOPs 4nd² + 4(g/h)nd² + 4n²d; cache 2·g·p numbers per token "
                       "and layer; measured on the meta device")
    for col in ("scheme", "g", "parameters", "FLOPs", "KV cache / token / layer"):
        t.add_column(col, justify="left" if col == "scheme" else "right")

    def same(measured: int, formula: int) -> str:
        return "[green]= formula[/]" if measured == formula else f"[red]≠ {formula:,}[/]"

    for s in e.schemes:
        t.add_row(s.name, str(s.groups), f"{s.parameters:,} {same(s.parameters, s.parameters_formula)}",
                  f"{s.flops:.4e} {same(s.flops, s.flops_formula)}",
                  f"{s.kv_bytes_per_token:,} B = {s.kv_bytes_per_token / 1024:g} KiB")
    p = _table(8, subtitle=f"part 3: two query heads {e.shared_weights} share one value head of width p; values "
                           f"in R^{e.value_dim}")
    for col in ("p", "readout error", "theory √(1 - min(p,c)/c)"):
        p.add_column(col, justify="right")
    for r in e.shared:
        p.add_row(str(r.p), _g(r.error, 4), _g(r.theory, 4))
    return [t, p, _note("Only the K/V half of the projection term shrinks (by g/h); the n²d term stays. Shared keys and "
                  "values still allow distinct mixtures (different queries, different weights), but each source "
                  "token can pass at most g·p numbers to the output.")]


def _ex9(e) -> list:
    from rich.markup import escape

    t = _table(9, subtitle=f"d = {e.d}, h = {e.h}, {e.n_k} keys",
               caption=f"rule: {e.rule}; checked against the masks for {e.rule_checked} (valid_lens, h) "
                       f"combinations: {'agrees' if e.rule_agrees else 'DISAGREES'}")
    for col in ("valid_lens", "max |loop - folded|", "max |tiled - folded|", "detectable",
                "masks that differ (seq, head: repeated -> tiled)"):
        t.add_column(col, justify="left" if col.startswith(("valid", "masks")) else "right")
    for c in e.cases:
        differ = [m for m in c.heads_masks if m.split(": ")[1].split(" -> ")[0] != m.split(" -> ")[1]]
        t.add_row(str(c.valid_lens).replace(" ", ""), f"{c.loop_vs_folded:.1e}", f"{c.tiled_vs_folded:.1e}",
                  _yes(c.tiled_vs_folded > 1e-5),
                  escape(f"{len(differ)} of {len(c.heads_masks)}" + (": " + ", ".join(differ[:2]) if differ else "")
                         + (" ..." if len(differ) > 2 else "")))
    return [t, _note("Head i of sequence b sits at folded index b·h + i; repeat_interleave gives it valid_lens[b], "
               "tiling gives valid_lens[(b·h + i) mod B]. Lengths at or beyond the number of keys all mean "
               "'no mask', so [5, 7] with 5 keys cannot be told apart.")]


def _ex10(e) -> list:
    t = _table(10, subtitle=f"d = {e.d}, h = {e.h}, n = {e.n} queries, m = {e.m} source rows",
               caption=f"unchanged: max |difference| < {e.tolerance:g}; every check as expected: "
                       f"{'yes' if e.all_as_expected else 'NO'}")
    for col in ("check", "max |difference|", "unchanged", "expected"):
        t.add_column(col, justify="left" if col == "check" else "right")
    for c in e.checks:
        t.add_row(c.name, f"{c.max_diff:.1e}", _yes(c.unchanged),
                  "unchanged" if c.expected_unchanged else "changed")
    return [t, _note(f"With valid_lens {e.valid}, exactly the permutations that map the first {e.valid} rows onto "
               "themselves are invisible. Word order must enter through positions before (or inside) the "
               "encoder: cross-attention over an order-blind encoder cannot recover it.")]


def _ex11(e) -> list:
    t = _table(11, subtitle=f"'{''.join(e.queries)}' attends to '{''.join(e.keys)}', width {e.dim}, fresh "
                            f"{e.heads}-head layer",
               caption="same rows/columns: max difference between rows (columns) of identical letters")
    for col in ("map", "rows sum to 1", "same rows", "same columns", "matching letter wins", "mean max weight",
                "regimes"):
        t.add_column(col, justify="left" if col in ("map", "regimes") else "right")
    for p in e.props:
        regimes = ", ".join(f"{k} {p.regimes.count(k)}" for k in ("sharp", "split", "diffuse") if k in p.regimes)
        t.add_row(p.head, f"{p.row_sum_error:.0e}", f"{p.same_rows:.0e}", f"{p.same_columns:.0e}",
                  f"{p.match_wins:.2f}", f"{p.mean_max_weight:.3f}", regimes)
    return [t, _note("hold in every head: " + "; ".join(e.hold_in_every_head) + ". lost: " + "; ".join(e.lost)
            + ". The score e^T W_q^T W_k e'/√p depends only on the letters (hence the ties) but is not a "
              "similarity: a trained map shows what W_q^T W_k favours, not what resembles what.")]


def _ex12(e) -> list:
    t = _table(12, subtitle=f"d = {e.d}, Adam lr {e.lr}, {e.steps} steps of {e.batch}",
               caption=f"held-out relative error; one head cannot go below √½ = {e.bound:.3f}")
    for col in ("h", "error before", "error after", "head weights (α1, α2) after training", "kinds"):
        t.add_column(col, justify="left" if col.startswith(("head", "kinds")) else "right")
    for r in e.runs:
        weights = " ".join(f"({a:.2f},{b:.2f})" for a, b in r.weights)
        kinds = " ".join(k.replace("one-hot", "1-hot").replace("duplicate", "dup") for k in r.kinds)
        t.add_row(str(r.h), _g(r.initial_error),
                  _g(r.error), weights, kinds)
    return [t, _note("All heads start near (0.5, 0.5), where every pair's mixing matrix is nearly singular: early "
               "gradients separate the values slowly, and heads that leave (0.5, 0.5) on the same side stay "
               "near-duplicates. Two distinct heads suffice; the rest are redundant.")]


RENDERERS = {1: _ex1, 2: _ex2, 3: _ex3, 4: _ex4, 5: _ex5, 6: _ex6, 7: _ex7, 8: _ex8, 9: _ex9, 10: _ex10,
             11: _ex11, 12: _ex12}


def tables(result: Result) -> list:
    out = []
    for n in result.ran():
        out.extend(RENDERERS[n](getattr(result, f"ex{n}")))
    return out


def listing() -> list:
    """``attn exercise --list``: the twelve exercises and what each run shows."""
    from rich.table import Table

    from attn_cli.published.catalogue import BY_ID

    t = Table(title="D2L 10.3.5 exercises", title_justify="left")
    t.add_column("N", justify="right")
    t.add_column("exercise")
    t.add_column("what a run shows")
    t.add_column("files")
    for n, title in TITLES.items():
        art = BY_ID.get(f"d2l-ex{n}")
        t.add_row(str(n), title, art.title if art else "", " ".join(art.files) if art else "")
    return [t]


# --------------------------------------------------------------------------- figures


def figures(result: Result, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    paths: list[Path] = []
    for n, draw in ((2, _fig2), (6, _fig6), (11, _fig11), (12, _fig12)):
        e = getattr(result, f"ex{n}")
        if e is not None:
            paths.extend(draw(e, Path(out), formats))
    return paths


def _fig2(e, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    from attn_cli.render.figures import new_figure
    from attn_cli.render.files import save_figure, write_csv

    fig, ax = new_figure(figsize=(6.5, 4.5))
    colours = ("tab:blue", "tab:red")
    for s, colour in zip(e.sweeps, colours):
        eps = [p.eps for p in s.points]
        ax.plot(eps, [p.error for p in s.points], "o", color=colour, label=f"measured, σ = {s.sigma:g}")
        fine = [10 ** (k / 20) for k in range(-110, 0)]
        from attn_cli.experiments.exercises.ex02_noise import theory

        ax.plot(fine, [theory(x, s.sigma) for x in fine], "-", color=colour, alpha=0.5, lw=1,
                label=f"theory, slope {s.slope:.2f}" if s.slope is not None else "theory")
        ax.axvline(s.knee, color=colour, ls=":", lw=1)
        ax.text(s.knee, 1.3e-3, f" ε* = σ/2 = {s.knee:g}", color=colour, fontsize=8, rotation=90, va="bottom")
    ax.axhline(0.5 ** 0.5, color="gray", ls="--", lw=1)
    ax.text(1.2e-5, 0.75, "one head: √½", color="gray", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(8e-6, 0.6)
    ax.set_ylim(1e-3, 1.2)
    ax.set_xlabel("ε  (heads (0.5+ε, 0.5−ε) and (0.5−ε, 0.5+ε))")
    ax.set_ylabel("readout error (relative)")
    ax.set_title("Ex. 2: nearly identical heads under noise")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower left")
    png, csv = FILES[2]
    paths = save_figure(fig, out / png, formats)
    paths.append(write_csv(out / csv, [[s.sigma, p.eps, p.error, p.theory, p.condition, p.straight]
                                       for s in e.sweeps for p in s.points],
                           header=["sigma", "eps", "error", "theory", "condition", "in_slope_fit"]))
    return paths


def _fig6(e, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    from attn_cli.render.figures import new_figure
    from attn_cli.render.files import save_figure, write_csv

    fig, ax = new_figure(figsize=(6, 4))
    hs = [r.h for r in e.rows]
    ax.plot(hs, [r.seconds * 1e3 for r in e.rows], "o-", label="measured forward time")
    ax.plot(hs, [(e.fixed_seconds + e.ns_per_entry * 1e-9 * r.score_entries) * 1e3 for r in e.rows], "--",
            color="gray", label=f"fit: {e.fixed_seconds * 1e3:.0f} ms + {e.ns_per_entry:.1f} ns × B·h·n²")
    ax.set_xscale("log", base=2)
    ax.set_xticks(hs, labels=[str(h) for h in hs])
    ax.minorticks_off()
    ax.set_xlabel("heads h  (p = d/h)")
    ax.set_ylabel("forward time (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Ex. 6: d = {e.d}, n = {e.n}, batch {e.batch}: ratio {e.ratio:.1f}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    png, csv = FILES[6]
    return [*save_figure(fig, out / png, formats),
            write_csv(out / csv, [[r.h, r.p, r.seconds, r.score_entries, r.matmul_flops] for r in e.rows],
                      header=["h", "p", "seconds", "score_entries", "matmul_flops"])]


def _fig11(e, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    from attn_cli.render.figures import heatmap, new_figure
    from attn_cli.render.files import save_figure, write_csv

    maps = [("plain (no projections)", e.plain)] + [(f"head {i + 1}", w) for i, w in enumerate(e.head_weights)]
    vmax = max(max(max(row) for row in w) for _, w in maps)
    fig, axes = new_figure(1, len(maps), figsize=(3.2 * len(maps), 3.4))
    im = None
    for ax, (title, w) in zip(axes, maps):
        im = heatmap(ax, w, e.queries, e.keys, vmax=vmax)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("keys")
    axes[0].set_ylabel("queries")
    fig.colorbar(im, ax=list(axes), shrink=0.8, label="attention weight")
    fig.suptitle(f"Ex. 11: '{''.join(e.queries)}' → '{''.join(e.keys)}' through a fresh {e.heads}-head layer "
                 "(one colour scale)")
    png, csv = FILES[11]
    rows = [[name, q, j, e.keys[j], w] for name, W in maps for q, row in zip(e.queries, W)
            for j, w in enumerate(row)]
    return [*save_figure(fig, out / png, formats),
            write_csv(out / csv, rows, header=["map", "query", "key_position", "key", "weight"])]


def _fig12(e, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    from attn_cli.render.figures import new_figure
    from attn_cli.render.files import save_figure, write_csv

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
    ax1.axhline(0.5, color="gray", ls=":", lw=1)
    ax1.set_xticks(range(len(e.runs)), labels=[f"h = {r.h}\nerror {r.error:.1e}" for r in e.runs])
    ax1.set_ylim(-0.05, 1.05)
    ax1.set_ylabel("weight α1 on the first key (α2 = 1 − α1)")
    ax1.set_title("trained head weights (start ≈ 0.5)")
    ax2.axhline(e.bound, color="gray", ls="--", lw=1)
    ax2.set_yscale("log")
    ax2.set_xlabel("Adam step")
    ax2.set_ylabel("training relative error")
    ax2.set_title("training curves (dashed: one-head bound √½)")
    ax2.legend(fontsize=8)
    fig.suptitle(f"Ex. 12: learned copy-both heads (d = {e.d}, {e.steps} steps)")
    fig.tight_layout()
    png, csv = FILES[12]
    rows = [[r.h, i + 1, a, b, k, r.error] for r in e.runs for i, ((a, b), k) in enumerate(zip(r.weights, r.kinds))]
    return [*save_figure(fig, out / png, formats),
            write_csv(out / csv, rows, header=["h", "head", "alpha1", "alpha2", "kind", "held_out_error"])]
