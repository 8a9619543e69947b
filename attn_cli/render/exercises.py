"""Tables for ``attn exercise`` (D2L 10.3.5 exercises 1-12); figures in :mod:`.exercise_figures`.

No published numbers exist for the exercises: each table shows the measurement beside
the value the exercise's analysis predicts (``theory``), and a one-line reading below.
Every number a reading quotes comes from the result or from a named constant of the
exercise's module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from attn_cli.render.exercise_figures import FILES, figures, uniform_start  # noqa: F401 (FILES, figures: the family's)
from attn_cli.render.table import Block, Cell, Table, Text, styled

if TYPE_CHECKING:
    from attn_cli.experiments import exercises as ex


def _table(
    number: int,
    heading: str,
    columns: Sequence[str] = (),
    rows: Iterable[Sequence[Cell]] = (),
    left: Sequence[str] = (),
    caption: str | None = None,
    subtitle: str = "",
) -> Table:
    """A table titled with the exercise and its ``heading``: ``columns`` (right-justified except
    those in ``left``), then ``rows`` of text cells."""
    title = f"D2L 10.3.5 exercise {number}: {heading}" + (f"  ({subtitle})" if subtitle else "")
    t = Table(title=title, caption=caption or "")
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    for row in rows:
        t.add_row(*row)
    return t


def _g(x: float, digits: int = 3) -> str:
    if x != x:
        return "nan"
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.{digits}f}"
    return f"{x:.{max(1, digits - 2)}e}"


def _yes(ok: bool) -> Text:
    return styled(("yes", "green"), verdict="pass") if ok else styled(("no", "red"), verdict="fail")


def _ex1(e: ex.ex01_readouts.Result, title: str) -> list:
    t = _table(
        1,
        title,
        ("values", "a", "levels of m_j", "linear", "MLP", "theory"),
        left=("values",),
        subtitle=f"N = {e.samples} train + {e.samples} held out, d = {e.d_v}; per-coordinate "
        f"MLP 1-{e.hidden}-{e.hidden}-2, {e.steps} Adam steps on {e.points} coordinates",
        caption="held-out relative error ||pred - t|| / ||t||; theory = the best any readout can do",
    )
    for r in e.rows:
        name = "Gaussian" if r.values == "gaussian" else "uniform ±1"
        levels = "continuous" if r.values == "gaussian" else str(r.distinct_levels)
        t.add_row(name, f"{r.a:.1f}", levels, _g(r.linear), _g(r.mlp), _g(r.theory))
    signs = [r for r in e.rows if r.values == "sign"]
    flat = next(r for r in signs if r.theory > 0)  # E[v1|m] linear again
    decoded = next(r for r in signs if r.theory == 0)  # the levels identify (v1_j, v2_j)

    def shown(a: float) -> str:
        return "{" + ", ".join(f"{x:g}" for x in e.levels(a)) + "}"

    return [
        t,
        (
            f"Gaussian values: E[v1|m] is linear, so the MLP cannot beat √½. ±1 values at a = {flat.a:g}: "
            f"m_j ∈ {shown(flat.a)} and E[v1_j|m_j] = m_j, linear again. At a = {decoded.a:g} the "
            f"{decoded.distinct_levels} levels {shown(decoded.a)} identify (v1_j, v2_j): the MLP decodes "
            "them, the linear readout stays at √½ (same second moments). No contradiction: the "
            "proposition assumes Gaussian values (or a linear readout)."
        ),
    ]


def _ex2(e: ex.ex02_noise.Result, title: str) -> list:
    out: list[Block] = []
    for s in e.sweeps:
        slope = "n/a" if s.slope is None else f"{s.slope:.3f}"
        t = _table(
            2,
            title,
            ("ε", "κ(A)", "readout error", "theory", "in slope fit"),
            [
                (f"{p.eps:g}", _g(p.condition, 4), _g(p.error, 4), _g(p.theory, 4), "•" if p.straight else "")
                for p in s.points
            ],
            subtitle=f"σ = {s.sigma:g}, knee ε* = σ/2 = {s.knee:g}, slope {slope} "
            f"over {s.slope_points} straight points",
            caption=e.eigenvalues + "; theory √((e_s + e_u)/4), e_u = 2σ²/(4ε² + σ²)",
        )
        out.append(t)
    sigmas = [s.sigma for s in e.sweeps]
    moved = (
        f" {max(sigmas) / min(sigmas):g} times less noise moves the knee as many times lower."
        if len(sigmas) > 1
        else ""
    )
    out.append(
        "The noisy mixtures observe v1+v2 (signal 1) and v1-v2 (signal 2ε), each with noise σ√2: "
        "the difference is recovered with error ∝ σ/ε (slope -1) until ε ≈ σ/2, below which the "
        "second head adds nothing and the error returns to √½." + moved
    )
    return out


def _ex3(e: ex.ex03_rank.Result, title: str) -> list:
    t = _table(
        3,
        title,
        ("A", "h", "k", "rank(A)", "min entry", "1 - rank/k", "population", "sampled (held out)"),
        left=("A",),
        subtitle=f"values in R^{e.value_dim}, {e.samples} train + held-out samples",
        caption=f"population = exact error from the covariances; max |population - (1 - rank/k)| = {e.max_gap:.1e}",
    )
    for r in e.rows:
        t.add_row(
            r.kind,
            str(r.h),
            str(r.k),
            str(r.rank),
            _g(r.min_entry, 4),
            _g(r.bound, 4),
            f"{r.population + 0.0:.6f}".replace("-0.000000", "0.000000"),
            _g(r.sampled, 4),
        )
    return [
        t,
        (
            "Squared relative error. Random softmax rows (all entries positive) reach rank min(h, k); "
            "duplicated or uniform heads lose rank and error. A layer of width d passes d numbers, so its "
            "'rank' is capped at d/c value slots however many heads it has."
        ),
    ]


def _ex4(e: ex.ex04_key_noise.Result, title: str) -> list:
    t = _table(
        4,
        title,
        ("setting", "c", "median error", "failure fraction"),
        [(r.setting, f"{r.c:g}", _g(r.median, 4), f"{r.failure:.3f}") for r in e.rows],
        left=("setting",),
        subtitle=f"β = {e.beta:g}, {e.resamples} resamples of the keys",
        caption=f"failure: ||o - (v_a+v_b)/2|| > {e.threshold}; as c → ∞ the two queries fail only for "
        f"γ < -1, probability {e.two_query_limit:.3f}",
    )
    noise = ", ".join(f"{e.score_noise(c):.2f} at c = {c:g}" for c in dict.fromkeys(r.c for r in e.rows))
    return [
        t,
        (
            "w_a/w_b = exp(cγ): one query swings to v_a or v_b with the sign of γ. Raising c hurts one "
            f"query even with isotropic keys: the noise on the two scores is c√(2β) ({noise}), so the tie "
            f"breaks at random. The part-4 query is immune to γ (max change {e.neg_gamma_spread:.1e}) "
            "but keeps that tie; two queries need only one winner each."
        ),
    ]


def _ex5(e: ex.ex05_pruning.Result, title: str) -> list:
    heads = ", ".join(f"{i + 1}: ({a:g}, {b:g})" for i, (a, b) in enumerate(e.heads))
    t = _table(
        5,
        title,
        ("heads kept", "removed", "readout error"),
        left=("heads kept", "removed"),
        subtitle=f"heads {heads}; τ = {e.tau}",
        caption=f"solver: {e.solver}",
    )
    t.add_row(" ".join(str(i + 1) for i in range(len(e.heads))), "", _g(e.full_error))
    for s in e.subsets:
        t.add_row(" ".join(map(str, s.kept)), " ".join(map(str, s.removed)), _g(s.error))
    p = _table(
        5,
        title,
        ("procedure", "importances", "removed", "kept", "error", "evaluations", "to prune h → 1"),
        left=("procedure", "importances"),
        subtitle="one-shot vs greedy",
    )
    p.add_row(
        "one-shot",
        " ".join(f"{x:.2g}" for x in e.importance),
        " ".join(map(str, e.one_shot_removed)),
        " ".join(map(str, e.one_shot_kept)),
        _g(e.one_shot_error),
        str(e.one_shot_evaluations),
        e.one_shot_formula,
    )
    p.add_row(
        "greedy",
        " → ".join(" ".join(f"{x:.2g}" for x in s["importance"]) for s in e.greedy_steps),
        " ".join(map(str, e.greedy_removed)),
        " ".join(map(str, e.greedy_kept)),
        _g(e.greedy_error),
        str(e.greedy_evaluations),
        f"{e.greedy_to_one_formula} (counted {e.greedy_to_one} at h = {len(e.heads)})",
    )
    pair = " and ".join(map(str, e.one_shot_removed))
    wide = e.WIDE_LAYER_HEADS
    one_shot, greedy = e.evaluations_at(wide)
    return [
        t,
        p,
        (
            f"Heads {pair} cover for each other, so each alone looks unimportant; one-shot removes "
            f"{'both' if len(e.one_shot_removed) == 2 else 'them'} and loses the second mixture. Greedy "
            f"re-measures after each removal and keeps one. At h = {wide}: one-shot "
            f"{one_shot}, greedy {greedy} evaluations."
        ),
    ]


def _ex6(e: ex.ex06_timing.Result, title: str) -> list:
    t = _table(
        6,
        title,
        ("h", "p = d/h", "forward ms", "score entries B·h·n²", "matmul FLOPs (Eq. 10.3.3)", "fit ms"),
        subtitle=f"d = {e.d}, n = {e.n}, batch {e.batch}, {e.device}, {e.threads} thread(s), "
        f"median of {e.repeats} after a warm-up",
        caption=f"fit time = {e.fixed_seconds * 1e3:.1f} ms + {e.ns_per_entry:.2f} ns × entries, "
        f"R² = {e.r_squared:.3f}",
    )
    for r in e.rows:
        t.add_row(
            str(r.h),
            str(r.p),
            f"{r.seconds * 1e3:.1f}",
            f"{r.score_entries:,}",
            f"{r.matmul_flops:.3e}",
            f"{e.fitted_seconds(r.score_entries) * 1e3:.1f}",
        )
    return [
        t,
        (
            f"slowest/fastest = {e.ratio:.1f} (h = {e.slowest_h} vs h = {e.fastest_h}). The "
            "multiply-adds are constant; the score tensor (B·h·n² entries: scaling, softmax, memory "
            "traffic) grows with h and accounts for the trend. Narrow heads also lose patterns: with "
            "p = 1 a query can be sharp only on the largest or smallest key; p = 2 already allows any "
            "assignment."
        ),
    ]


def _ex7(e: ex.ex07_cross_cost.Result, title: str) -> list:
    t = _table(
        7,
        title,
        ("n", "m", "4nd²", "4md²", "4nmd", "formula", "counted"),
        subtitle=f"d = {e.d}, h = {e.heads}; FLOPs counted by FlopCounterMode on the meta device",
        caption="4nd² (W_q, W_o: grows with n) + 4md² (W_k, W_v: grows with m) + 4nmd (scores and "
        "mixing: grows with nm)",
    )
    for r in e.rows:
        t.add_row(
            str(r.n),
            str(r.m),
            f"{r.q_and_out:.3e}",
            f"{r.k_and_v:.3e}",
            f"{r.scores_and_mix:.3e}",
            f"{r.formula:.4e}",
            styled(f"{r.counted:.4e}", *(() if r.counted == r.formula else ((" ≠", "red"),))),
        )
    p = _table(
        7,
        title,
        ("keys and values", "formula", "FLOPs", "counted"),
        left=("keys and values", "formula"),
        subtitle=f"one decoder step, m = {e.m} source tokens",
    )
    p.add_row("recomputed every step", "4d² + 4md² + 4md", f"{e.recompute_formula:,}", f"{e.recompute_counted:,}")
    p.add_row("computed once, cached", "4d² + 4md", f"{e.cached_formula:,}", f"{e.cached_counted:,}")
    return [
        t,
        p,
        (
            f"ratio {e.ratio_expression} = {e.ratio:.1f} (counted {e.ratio_counted:.1f}) for d = {e.d}, "
            f"m = {e.m}: caching turns the per-token cost from O(m d²) into O(m d)."
        ),
    ]


def _ex8(e: ex.ex08_gqa.Result, title: str) -> list:
    t = _table(
        8,
        title,
        ("scheme", "g", "parameters", "FLOPs", "KV cache / token / layer"),
        left=("scheme",),
        subtitle=f"d = {e.d}, h = {e.h}, p = {e.p}, 16-bit; FLOPs at n = {e.tokens} tokens",
        caption="parameters 2d² + 2(g/h)d²; FLOPs 4nd² + 4(g/h)nd² + 4n²d; cache 2·g·p numbers per token "
        "and layer; measured on the meta device",
    )

    def same(text: str, measured: int, formula: int) -> Text:
        return styled(f"{text} ", ("= formula", "green") if measured == formula else (f"≠ {formula:,}", "red"))

    for s in e.schemes:
        t.add_row(
            s.name,
            str(s.groups),
            same(f"{s.parameters:,}", s.parameters, s.parameters_formula),
            same(f"{s.flops:.4e}", s.flops, s.flops_formula),
            f"{s.kv_bytes_per_token:,} B = {s.kv_bytes_per_token / 1024:g} KiB",
        )
    p = _table(
        8,
        title,
        ("p", "readout error", "theory √(1 - min(p,c)/c)"),
        [(str(r.p), _g(r.error, 4), _g(r.theory, 4)) for r in e.shared],
        subtitle=f"part 3: two query heads {e.shared_weights} share one value head of width p; values "
        f"in R^{e.value_dim}",
    )
    return [
        t,
        p,
        (
            "Only the K/V half of the projection term shrinks (by g/h); the n²d term stays. Shared "
            "keys and values still allow distinct mixtures (different queries, different weights), but "
            "each source token can pass at most g·p numbers to the output."
        ),
    ]


def _ex9(e: ex.ex09_slices.Result, title: str) -> list:
    t = _table(
        9,
        title,
        (
            "valid_lens",
            "max |loop - folded|",
            "max |tiled - folded|",
            "detectable",
            "masks that differ (seq, head: repeated -> tiled)",
        ),
        left=("valid_lens", "masks that differ (seq, head: repeated -> tiled)"),
        subtitle=f"d = {e.d}, h = {e.h}, {e.n_k} keys",
        caption=f"rule: {e.rule}; checked against the masks for {e.rule_checked} (valid_lens, h) "
        f"combinations: {'agrees' if e.rule_agrees else 'DISAGREES'}",
    )
    for c in e.cases:
        differ = [m for m in c.heads_masks if m.split(": ")[1].split(" -> ")[0] != m.split(" -> ")[1]]
        t.add_row(
            str(c.valid_lens).replace(" ", ""),
            f"{c.loop_vs_folded:.1e}",
            f"{c.tiled_vs_folded:.1e}",
            _yes(c.tiled_vs_folded > e.TOL),
            (
                f"{len(differ)} of {len(c.heads_masks)}"
                + (": " + ", ".join(differ[:2]) if differ else "")
                + (" ..." if len(differ) > 2 else "")
            ),
        )
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
        (
            "Head i of sequence b sits at folded index b·h + i; repeat_interleave gives it valid_lens[b], "
            "tiling gives valid_lens[(b·h + i) mod B]. Lengths at or beyond the number of keys all mean "
            f"'no mask'{example}."
        ),
    ]


def _ex10(e: ex.ex10_permute.Result, title: str) -> list:
    t = _table(
        10,
        title,
        ("check", "max |difference|", "unchanged", "expected"),
        [
            (c.name, f"{c.max_diff:.1e}", _yes(c.unchanged), "unchanged" if c.expected_unchanged else "changed")
            for c in e.checks
        ],
        left=("check",),
        subtitle=f"d = {e.d}, h = {e.h}, n = {e.n} queries, m = {e.m} source rows",
        caption=f"unchanged: max |difference| < {e.tolerance:g}; every check as expected: "
        f"{'yes' if e.all_as_expected else 'NO'}",
    )
    return [
        t,
        (
            f"With valid_lens {e.valid}, exactly the permutations that map the first {e.valid} rows onto "
            "themselves are invisible. Word order must enter through positions before (or inside) the "
            "encoder: cross-attention over an order-blind encoder cannot recover it."
        ),
    ]


def _ex11(e: ex.ex11_projections.Result, title: str) -> list:
    t = _table(
        11,
        title,
        ("map", "rows sum to 1", "same rows", "same columns", "matching letter wins", "mean max weight", "regimes"),
        left=("map", "regimes"),
        subtitle=f"'{''.join(e.queries)}' attends to '{''.join(e.keys)}', width {e.d_model}, fresh "
        f"{e.heads}-head layer",
        caption="same rows/columns: max difference between rows (columns) of identical letters",
    )
    for p in e.props:
        regimes = ", ".join(f"{k} {p.regimes.count(k)}" for k in ("sharp", "split", "diffuse") if k in p.regimes)
        t.add_row(
            p.head,
            f"{p.row_sum_error:.0e}",
            f"{p.same_rows:.0e}",
            f"{p.same_columns:.0e}",
            f"{p.match_wins:.2f}",
            f"{p.mean_max_weight:.3f}",
            regimes,
        )
    return [
        t,
        (
            "hold in every head: "
            + "; ".join(e.hold_in_every_head)
            + ". lost: "
            + "; ".join(e.lost)
            + ". The score e^T W_q^T W_k e'/√p depends only on the letters (hence the ties) but is not a "
            "similarity: a trained map shows what W_q^T W_k favours, not what resembles what."
        ),
    ]


def _ex12(e: ex.ex12_learned.Result, title: str) -> list:
    t = _table(
        12,
        title,
        ("h", "error before", "error after", "head weights (α1, α2) after training", "kinds"),
        left=("head weights (α1, α2) after training", "kinds"),
        subtitle=f"d = {e.d}, Adam lr {e.lr}, {e.steps} steps of {e.batch}",
        caption=f"held-out relative error; one head cannot go below √½ = {e.bound:.3f}",
    )
    for r in e.runs:
        weights = " ".join(f"({a:.2f},{b:.2f})" for a, b in r.weights)
        kinds = " ".join(k.replace("one-hot", "1-hot").replace("duplicate", "dup") for k in r.kinds)
        t.add_row(str(r.h), _g(r.initial_error), _g(r.error), weights, kinds)
    start = uniform_start(e)
    return [
        t,
        (
            f"All heads start near {start}, where every pair's mixing matrix is nearly singular: early "
            f"gradients separate the values slowly, and heads that leave {start} on the same side stay "
            "near-duplicates. Two distinct heads suffice; the rest are redundant."
        ),
    ]


RENDERERS: dict[int, Callable[[Any, str], list]] = dict(
    enumerate((_ex1, _ex2, _ex3, _ex4, _ex5, _ex6, _ex7, _ex8, _ex9, _ex10, _ex11, _ex12), start=1)
)


def tables(result: ex.Result, outcomes: Mapping) -> list:
    """Every exercise that ran; ``outcomes`` is taken for the render contract (the exercises
    have no published value, so none is marked)."""
    out = []
    for n in result.ran():
        out.extend(RENDERERS[n](getattr(result, f"ex{n}"), result.TITLES[n]))
    return out


def listing(titles: dict[int, str]) -> list:
    """``attn exercise --list``: the twelve exercises (number -> title) and what each run shows."""
    from attn_cli.published.catalogue import BY_ID

    t = Table(title="D2L 10.3.5 exercises")
    t.add_column("N", justify="right")
    t.add_column("exercise")
    t.add_column("what a run shows")
    t.add_column("files")
    for n, title in titles.items():
        art = BY_ID.get(f"d2l-ex{n}")
        t.add_row(str(n), title, art.title if art else "", " ".join(art.files) if art else "")
    return [t]
