"""Tables for ``attn analogy`` (W9 1.2: PPMI + SVD word vectors)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from attn_cli.render.console import CheckRow, check_table, not_text_caption, verdict
from attn_cli.render.files import no_figures
from attn_cli.render.table import Column, Table

if TYPE_CHECKING:
    from attn_cli.experiments.analogy import Result


def _ranked(words: Iterable[str], scores: Iterable[float]) -> str:
    return ", ".join(f"{w} ({s:.3f})" for w, s in zip(words, scores))


def tables(result: Result, outcomes: Mapping) -> list:
    def checked(quantity: str, regenerated: str, check_id: str) -> CheckRow:
        value = outcomes[check_id].published  # a list: joined by commas
        shown = ", ".join(value) if isinstance(value, (list, tuple)) else str(value)
        return (quantity, regenerated, shown, verdict(outcomes[check_id]))

    a, b = result.TIED

    def tie(quantity: str, kind: str) -> CheckRow:  # the two tied words' values and their gap (unjudged)
        x, y = result.tie[f"{kind}.{a}"], result.tie[f"{kind}.{b}"]
        return (quantity, f"{x:.6f} / {y:.6f} ({x - y:.1e})", "", None)

    rows = [checked(f"cosine {pair}", f"{value:.3f}", f"w9-ppmi.{pair}") for pair, value in result.similarities.items()]
    rows += [
        checked("king - man + woman: top two (tied)", ", ".join(result.analogy[:2]), "w9-ppmi.analogy.top2"),
        tie(f"  E.v of {a} / {b} (gap)", "analogy"),
        checked("king - man + woman: third", result.analogy[2], "w9-ppmi.analogy.third"),
        checked("nearest to bank: 1-7", ", ".join(result.bank_nearest[:7]), "w9-ppmi.bank_nearest.top7"),
        checked("nearest to bank: 8th (tie)", result.bank_nearest[7], "w9-ppmi.bank_nearest.8th"),
        tie(f"  cosine bank~{a} / bank~{b} (gap)", "bank"),
    ]
    cfg = result.config
    published = check_table(
        f"W9 1.2  PPMI + SVD word vectors ({len(result.vocab)} words, {cfg['rank']} dimensions, window "
        f"{cfg['window']})",
        rows,
        caption=f"{a} and {b} occur in identical contexts, so their vectors are equal in exact arithmetic: "
        "their order (the analogy's top two, bank's 8th neighbour) is decided by rounding noise "
        "and can flip with the LAPACK build; the checks accept either order. Singular-vector "
        "signs are arbitrary but leave cosines unchanged." + not_text_caption(outcomes.values()),
    )
    x, y, z = result.query
    asked = Table(
        title="the query (score E.v; stop words and the query's own words skipped)",
        columns=[Column("query"), Column("nearest words (score)")],
    )
    asked.add_row(f"{x} - {y} + {z}", _ranked(result.query_answer, result.query_similarities))
    asked.add_row(f"nearest to {result.nearest_word}", _ranked(result.nearest, result.nearest_similarities))
    return [published, asked]


figures = no_figures
