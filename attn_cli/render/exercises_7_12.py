"""The tables of D2L 10.3.5 exercises 7-12: cross-attention cost, grouped queries, slices,
permutations, projections and learned heads (see :mod:`.exercises`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_cli.render.exercise_cells import fmt, titled_table, yes_no
from attn_cli.render.exercise_figures import uniform_start
from attn_cli.render.table import Text, styled

if TYPE_CHECKING:
    from attn_cli.experiments import exercises as ex


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
        (
            f"ratio {e.ratio_expression} = {e.ratio:.1f} (counted {e.ratio_counted:.1f}) for d = {e.d}, "
            f"m = {e.m}: caching turns the per-token cost from O(m d²) into O(m d)."
        ),
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
        return styled(
            f"{measured:{form}} ", ("= formula", "green") if measured == formula else (f"≠ {formula:,}", "red")
        )

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
        (
            "Only the K/V half of the projection term shrinks (by g/h); the n²d term stays. Shared "
            "keys and values still allow distinct mixtures (different queries, different weights), but "
            "each source token can pass at most g·p numbers to the output."
        ),
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
        (
            "Head i of sequence b sits at folded index b·h + i; repeat_interleave gives it valid_lens[b], "
            "tiling gives valid_lens[(b·h + i) mod B]. Lengths at or beyond the number of keys all mean "
            f"'no mask'{example}."
        ),
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
        (
            f"With valid_lens {e.valid}, exactly the permutations that map the first {e.valid} rows onto "
            "themselves are invisible. Word order must enter through positions before (or inside) the "
            "encoder: cross-attention over an order-blind encoder cannot recover it."
        ),
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
        (
            f"hold in every head: {'; '.join(e.hold_in_every_head)}. lost: {'; '.join(e.lost)}. The score "
            "e^T W_q^T W_k e'/√p depends only on the letters (hence the ties) but is not a "
            "similarity: a trained map shows what W_q^T W_k favours, not what resembles what."
        ),
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
        (
            f"All heads start near {start}, where every pair's mixing matrix is nearly singular: early "
            f"gradients separate the values slowly, and heads that leave {start} on the same side stay "
            "near-duplicates. Two distinct heads suffice; the rest are redundant."
        ),
    ]


TABLES = (ex7_tables, ex8_tables, ex9_tables, ex10_tables, ex11_tables, ex12_tables)  # exercises 7-12, in order
