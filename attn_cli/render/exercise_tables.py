"""The tables of D2L 10.3.5 exercises 1-12 (see :mod:`.exercises`): each shows the measurement
beside the value the exercise's analysis predicts; the reading below quotes only numbers from the
result or from the exercise module's named constants."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from attn_cli.render.table import Block, Text, styled, titled_table

if TYPE_CHECKING:
    from attn_cli.experiments import exercises as ex


def fmt(x: float, digits: int = 3) -> str:
    if x != x:
        return "nan"
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.{digits}f}"
    return f"{x:.{max(1, digits - 2)}e}"


def yes_no(ok: bool) -> Text:
    return styled(("yes", "green"), verdict="pass") if ok else styled(("no", "red"), verdict="fail")


def uniform_start(e: ex.ex12_learned.Result) -> str:
    """The uniform weights every head starts near, e.g. (0.5, 0.5)."""
    keys = len(e.runs[0].weights[0])
    return "(" + ", ".join([f"{1 / keys:g}"] * keys) + ")"


def _join(values: Iterable[object], form: str = "{}", sep: str = " ") -> str:
    return sep.join(map(form.format, values))


def ex1_tables(e: ex.ex01_readouts.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("values", "a", "levels of m_j", "linear", "MLP", "theory"),
        left=("values",),
        subtitle=f"N = {e.samples} train + {e.samples} held out, d = {e.d_v}; per-coordinate "
        f"MLP 1-{e.hidden}-{e.hidden}-2, {e.steps} Adam steps on {e.points} coordinates",
        caption="held-out relative error ||pred - t|| / ||t||; theory = the best any readout can do",
    )
    for r in e.rows:
        name = "Gaussian" if r.values == "gaussian" else "uniform ±1"
        levels = "continuous" if r.values == "gaussian" else str(r.distinct_levels)
        t.add_row(name, f"{r.a:.1f}", levels, fmt(r.linear), fmt(r.mlp), fmt(r.theory))
    signs = [r for r in e.rows if r.values == "sign"]
    flat = next(r for r in signs if r.theory > 0)  # E[v1|m] linear again
    decoded = next(r for r in signs if r.theory == 0)  # the levels identify (v1_j, v2_j)

    def shown(a: float) -> str:
        return "{" + ", ".join(f"{x:g}" for x in e.levels(a)) + "}"

    return [
        t,
        f"Gaussian values: E[v1|m] is linear, so the MLP cannot beat √½. ±1 values at a = {flat.a:g}: "
        f"m_j ∈ {shown(flat.a)} and E[v1_j|m_j] = m_j, linear again. At a = {decoded.a:g} the "
        f"{decoded.distinct_levels} levels {shown(decoded.a)} identify (v1_j, v2_j): the MLP decodes "
        "them, the linear readout stays at √½ (same second moments). No contradiction: the "
        "proposition assumes Gaussian values (or a linear readout).",
    ]


def ex2_tables(e: ex.ex02_noise.Result, heading: str) -> list:
    out: list[Block] = []
    for s in e.sweeps:
        slope = "n/a" if s.slope is None else f"{s.slope:.3f}"
        t = titled_table(
            heading,
            ("ε", "κ(A)", "readout error", "theory", "in slope fit"),
            [
                (f"{p.eps:g}", fmt(p.condition, 4), fmt(p.error, 4), fmt(p.theory, 4), "•" if p.straight else "")
                for p in s.points
            ],
            subtitle=f"σ = {s.sigma:g}, knee ε* = σ/2 = {s.knee:g}, slope {slope} "
            f"over {s.slope_points} straight points",
            caption=e.eigenvalues + "; theory √((e_s + e_u)/4), e_u = 2σ²/(4ε² + σ²)",
        )
        out.append(t)
    sigmas = [s.sigma for s in e.sweeps]
    less = max(sigmas) / min(sigmas)
    moved = f" {less:g} times less noise moves the knee as many times lower." if len(sigmas) > 1 else ""
    out.append(
        "The noisy mixtures observe v1+v2 (signal 1) and v1-v2 (signal 2ε), each with noise σ√2: "
        "the difference is recovered with error ∝ σ/ε (slope -1) until ε ≈ σ/2, below which the "
        "second head adds nothing and the error returns to √½." + moved
    )
    return out


def ex3_tables(e: ex.ex03_rank.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("A", "h", "k", "rank(A)", "min entry", "1 - rank/k", "population", "sampled (held out)"),
        left=("A",),
        subtitle=f"values in R^{e.value_dim}, {e.samples} train + held-out samples",
        caption=f"population = exact error from the covariances; max |population - (1 - rank/k)| = {e.max_gap:.1e}",
    )
    for r in e.rows:
        population = f"{r.population + 0.0:.6f}".replace("-0.000000", "0.000000")
        numbers = (fmt(r.min_entry, 4), fmt(r.bound, 4), population, fmt(r.sampled, 4))
        t.add_row(r.kind, str(r.h), str(r.k), str(r.rank), *numbers)
    return [
        t,
        "Squared relative error. Random softmax rows (all entries positive) reach rank min(h, k); "
        "duplicated or uniform heads lose rank and error. A layer of width d passes d numbers, so its "
        "'rank' is capped at d/c value slots however many heads it has.",
    ]


def ex4_tables(e: ex.ex04_key_noise.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("setting", "c", "median error", "failure fraction"),
        [(r.setting, f"{r.c:g}", fmt(r.median, 4), f"{r.failure:.3f}") for r in e.rows],
        left=("setting",),
        subtitle=f"β = {e.beta:g}, {e.resamples} resamples of the keys",
        caption=f"failure: ||o - (v_a+v_b)/2|| > {e.threshold}; as c → ∞ the two queries fail only for "
        f"γ < -1, probability {e.two_query_limit:.3f}",
    )
    noise = ", ".join(f"{e.score_noise(c):.2f} at c = {c:g}" for c in dict.fromkeys(r.c for r in e.rows))
    return [
        t,
        "w_a/w_b = exp(cγ): one query swings to v_a or v_b with the sign of γ. Raising c hurts one "
        f"query even with isotropic keys: the noise on the two scores is c√(2β) ({noise}), so the tie "
        f"breaks at random. The part-4 query is immune to γ (max change {e.neg_gamma_spread:.1e}) "
        "but keeps that tie; two queries need only one winner each.",
    ]


def ex5_tables(e: ex.ex05_pruning.Result, heading: str) -> list:
    heads = ", ".join(f"{i + 1}: ({a:g}, {b:g})" for i, (a, b) in enumerate(e.heads))
    t = titled_table(
        heading,
        ("heads kept", "removed", "readout error"),
        left=("heads kept", "removed"),
        subtitle=f"heads {heads}; τ = {e.tau}",
        caption=f"solver: {e.solver}",
    )
    t.add_row(_join(range(1, len(e.heads) + 1)), "", fmt(e.full_error))
    for s in e.subsets:
        t.add_row(_join(s.kept), _join(s.removed), fmt(s.error))
    p = titled_table(
        heading,
        ("procedure", "importances", "removed", "kept", "error", "evaluations", "to prune h → 1"),
        left=("procedure", "importances"),
        subtitle="one-shot vs greedy",
    )
    one_shot = (_join(e.importance, "{:.2g}"), _join(e.one_shot_removed), _join(e.one_shot_kept), fmt(e.one_shot_error))
    p.add_row("one-shot", *one_shot, str(e.one_shot_evaluations), e.one_shot_formula)
    steps = " → ".join(_join(s["importance"], "{:.2g}") for s in e.greedy_steps)
    greedy = (steps, _join(e.greedy_removed), _join(e.greedy_kept), fmt(e.greedy_error), str(e.greedy_evaluations))
    p.add_row("greedy", *greedy, f"{e.greedy_to_one_formula} (counted {e.greedy_to_one} at h = {len(e.heads)})")
    pair = _join(e.one_shot_removed, sep=" and ")
    wide = e.WIDE_LAYER_HEADS
    one_shot_evals, greedy_evals = e.evaluations_at(wide)
    return [
        t,
        p,
        f"Heads {pair} cover for each other, so each alone looks unimportant; one-shot removes "
        f"{'both' if len(e.one_shot_removed) == 2 else 'them'} and loses the second mixture. Greedy "
        f"re-measures after each removal and keeps one. At h = {wide}: one-shot "
        f"{one_shot_evals}, greedy {greedy_evals} evaluations.",
    ]


def ex6_tables(e: ex.ex06_timing.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("h", "p = d/h", "forward ms", "score entries B·h·n²", "matmul FLOPs (Eq. 10.3.3)", "fit ms"),
        subtitle=f"d = {e.d}, n = {e.n}, batch {e.batch}, {e.device}, {e.threads} thread(s), "
        f"median of {e.repeats} after a warm-up",
        caption=f"fit time = {e.fixed_seconds * 1e3:.1f} ms + {e.ns_per_entry:.2f} ns × entries, "
        f"R² = {e.r_squared:.3f}",
    )
    for r in e.rows:
        fit = f"{e.fitted_seconds(r.score_entries) * 1e3:.1f}"
        t.add_row(str(r.h), str(r.p), f"{r.seconds * 1e3:.1f}", f"{r.score_entries:,}", f"{r.matmul_flops:.3e}", fit)
    return [
        t,
        f"slowest/fastest = {e.ratio:.1f} (h = {e.slowest_h} vs h = {e.fastest_h}). The "
        "multiply-adds are constant; the score tensor (B·h·n² entries: scaling, softmax, memory "
        "traffic) grows with h and accounts for the trend. Narrow heads also lose patterns: with "
        "p = 1 a query can be sharp only on the largest or smallest key; p = 2 already allows any assignment.",
    ]


def ex7_tables(e: ex.ex07_cross_cost.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("n", "m", "4nd²", "4md²", "4nmd", "formula", "counted"),
        subtitle=f"d = {e.d}, h = {e.heads}; FLOPs counted by FlopCounterMode on the meta device",
        caption="4nd² (W_q, W_o: grows with n) + 4md² (W_k, W_v: grows with m) + 4nmd (scores and "
        "mixing: grows with nm)",
    )
    for r in e.rows:
        terms = (f"{x:.3e}" for x in (r.q_and_out, r.k_and_v, r.scores_and_mix))
        counted = styled(f"{r.counted:.4e}", *(() if r.counted == r.formula else ((" ≠", "red"),)))
        t.add_row(str(r.n), str(r.m), *terms, f"{r.formula:.4e}", counted)
    p = titled_table(
        heading,
        ("keys and values", "formula", "FLOPs", "counted"),
        left=("keys and values", "formula"),
        subtitle=f"one decoder step, m = {e.m} source tokens",
    )
    p.add_row("recomputed every step", "4d² + 4md² + 4md", f"{e.recompute_formula:,}", f"{e.recompute_counted:,}")
    p.add_row("computed once, cached", "4d² + 4md", f"{e.cached_formula:,}", f"{e.cached_counted:,}")
    return [
        t,
        p,
        f"ratio {e.ratio_expression} = {e.ratio:.1f} (counted {e.ratio_counted:.1f}) for d = {e.d}, "
        f"m = {e.m}: caching turns the per-token cost from O(m d²) into O(m d).",
    ]


def ex8_tables(e: ex.ex08_gqa.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("scheme", "g", "parameters", "FLOPs", "KV cache / token / layer"),
        left=("scheme",),
        subtitle=f"d = {e.d}, h = {e.h}, p = {e.p}, 16-bit; FLOPs at n = {e.tokens} tokens",
        caption="parameters 2d² + 2(g/h)d²; FLOPs 4nd² + 4(g/h)nd² + 4n²d; cache 2·g·p numbers per token "
        "and layer; measured on the meta device",
    )

    def same(measured: int, formula: int, form: str) -> Text:
        sign = ("= formula", "green") if measured == formula else (f"≠ {formula:,}", "red")
        return styled(f"{measured:{form}} ", sign)

    for s in e.schemes:
        counts = same(s.parameters, s.parameters_formula, ","), same(s.flops, s.flops_formula, ".4e")
        t.add_row(s.name, str(s.groups), *counts, f"{s.kv_bytes_per_token:,} B = {s.kv_bytes_per_token / 1024:g} KiB")
    p = titled_table(
        heading,
        ("p", "readout error", "theory √(1 - min(p,c)/c)"),
        [(str(r.p), fmt(r.error, 4), fmt(r.theory, 4)) for r in e.shared],
        subtitle=f"part 3: two query heads {e.shared_weights} share one value head of width p; values "
        f"in R^{e.value_dim}",
    )
    return [
        t,
        p,
        "Only the K/V half of the projection term shrinks (by g/h); the n²d term stays. Shared "
        "keys and values still allow distinct mixtures (different queries, different weights), but "
        "each source token can pass at most g·p numbers to the output.",
    ]


def ex9_tables(e: ex.ex09_slices.Result, heading: str) -> list:
    masks = "masks that differ (seq, head: repeated -> tiled)"
    t = titled_table(
        heading,
        ("valid_lens", "max |loop - folded|", "max |tiled - folded|", "detectable", masks),
        left=("valid_lens", masks),
        subtitle=f"d = {e.d}, h = {e.h}, {e.n_k} keys",
        caption=f"rule: {e.rule}; checked against the masks for {e.rule_checked} (valid_lens, h) "
        f"combinations: {'agrees' if e.rule_agrees else 'DISAGREES'}",
    )
    for c in e.cases:
        differ = [m for m in c.heads_masks if m.split(": ")[1].split(" -> ")[0] != m.split(" -> ")[1]]
        shown = f"{len(differ)} of {len(c.heads_masks)}" + (": " + ", ".join(differ[:2]) if differ else "")
        shown += " ..." if len(differ) > 2 else ""
        diffs = (f"{c.loop_vs_folded:.1e}", f"{c.tiled_vs_folded:.1e}")
        t.add_row(str(c.valid_lens).replace(" ", ""), *diffs, yes_no(c.tiled_vs_folded > e.TOL), shown)
    hidden = [
        c.valid_lens
        for c in e.cases
        if c.tiled_vs_folded <= e.TOL
        and len({str(v) for v in c.valid_lens}) > 1
        and all(isinstance(v, int) for v in c.valid_lens)
    ]
    example = f", so {str(hidden[0]).replace(' ', '')} with {e.n_k} keys cannot be told apart" if hidden else ""
    return [
        t,
        "Head i of sequence b sits at folded index b·h + i; repeat_interleave gives it valid_lens[b], "
        "tiling gives valid_lens[(b·h + i) mod B]. Lengths at or beyond the number of keys all mean "
        f"'no mask'{example}.",
    ]


def ex10_tables(e: ex.ex10_permute.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("check", "max |difference|", "unchanged", "expected"),
        [
            (c.name, f"{c.max_diff:.1e}", yes_no(c.unchanged), "unchanged" if c.expected_unchanged else "changed")
            for c in e.checks
        ],
        left=("check",),
        subtitle=f"d = {e.d}, h = {e.h}, n = {e.n} queries, m = {e.m} source rows",
        caption=f"unchanged: max |difference| < {e.tolerance:g}; every check as expected: "
        f"{'yes' if e.all_as_expected else 'NO'}",
    )
    return [
        t,
        f"With valid_lens {e.valid}, exactly the permutations that map the first {e.valid} rows onto "
        "themselves are invisible. Word order must enter through positions before (or inside) the "
        "encoder: cross-attention over an order-blind encoder cannot recover it.",
    ]


def ex11_tables(e: ex.ex11_projections.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("map", "rows sum to 1", "same rows", "same columns", "matching letter wins", "mean max weight", "regimes"),
        left=("map", "regimes"),
        subtitle=f"'{''.join(e.queries)}' attends to '{''.join(e.keys)}', width {e.d_model}, fresh "
        f"{e.heads}-head layer",
        caption="same rows/columns: max difference between rows (columns) of identical letters",
    )
    for p in e.props:
        regimes = ", ".join(f"{k} {p.regimes.count(k)}" for k in ("sharp", "split", "diffuse") if k in p.regimes)
        errors = (f"{x:.0e}" for x in (p.row_sum_error, p.same_rows, p.same_columns))
        t.add_row(p.head, *errors, f"{p.match_wins:.2f}", f"{p.mean_max_weight:.3f}", regimes)
    return [
        t,
        f"hold in every head: {'; '.join(e.hold_in_every_head)}. lost: {'; '.join(e.lost)}. The score "
        "e^T W_q^T W_k e'/√p depends only on the letters (hence the ties) but is not a "
        "similarity: a trained map shows what W_q^T W_k favours, not what resembles what.",
    ]


def ex12_tables(e: ex.ex12_learned.Result, heading: str) -> list:
    t = titled_table(
        heading,
        ("h", "error before", "error after", "head weights (α1, α2) after training", "kinds"),
        left=("head weights (α1, α2) after training", "kinds"),
        subtitle=f"d = {e.d}, Adam lr {e.lr}, {e.steps} steps of {e.batch}",
        caption=f"held-out relative error; one head cannot go below √½ = {e.bound:.3f}",
    )
    for r in e.runs:
        weights = " ".join(f"({a:.2f},{b:.2f})" for a, b in r.weights)
        kinds = " ".join(k.replace("one-hot", "1-hot").replace("duplicate", "dup") for k in r.kinds)
        t.add_row(str(r.h), fmt(r.initial_error), fmt(r.error), weights, kinds)
    start = uniform_start(e)
    return [
        t,
        f"All heads start near {start}, where every pair's mixing matrix is nearly singular: early "
        f"gradients separate the values slowly, and heads that leave {start} on the same side stay "
        "near-duplicates. Two distinct heads suffice; the rest are redundant.",
    ]
