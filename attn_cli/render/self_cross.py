"""Table for ``attn self-cross`` (W9 4.1, D2L 10.3.3); no figure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.render.table import Table

if TYPE_CHECKING:
    from attn_cli.experiments.self_cross import Result


def _shape(s: Iterable[int]) -> str:
    return str(tuple(s))


def tables(result: Result, outcomes: Mapping) -> list:
    """``outcomes``: check ID -> Outcome, the verdicts the marks show."""
    o = outcomes

    def pub(check_id: str) -> str:
        return _shape(o[check_id].published)

    table = Table(title="self- and cross-attention shapes (seed 0)")
    for col in ("text", "shape of", "published", "regenerated"):
        table.add_column(col, no_wrap=True)
    w9 = "W9 4.1"
    table.add_row(w9, "self: output", pub("w9-self-cross.self.output"), _shape(result.w9_self_output))
    table.add_row(w9, "self: weights", pub("w9-self-cross.self.weights"), _shape(result.w9_self_weights))
    table.add_row(w9, "cross: output", pub("w9-self-cross.cross.output"), _shape(result.w9_cross_output))
    table.add_row(
        w9, "cross: weights", pub("w9-self-cross.cross.weights"), _shape(result.w9_cross_weights), end_section=True
    )
    d2l = "D2L 10.3.3"
    table.add_row(d2l, "self: output", pub("d2l-self-cross.self"), _shape(result.d2l_self_output))
    table.add_row(d2l, "self: weights (B, h, n_q, n_k)", "", _shape(result.d2l_self_weights))
    table.add_row(d2l, "cross: output", pub("d2l-self-cross.cross"), _shape(result.d2l_cross_output))
    table.add_row(d2l, "cross: weights (B, h, n_q, n_k)", "", _shape(result.d2l_cross_weights))
    # an output has its queries' shape: the inputs' shapes are read off the regenerated outputs
    encoder_out, decoder_in = _shape(result.w9_self_output), _shape(result.w9_cross_output)
    x, a = _shape(result.d2l_self_output), _shape(result.d2l_cross_output)
    notes = (
        f"W9: nn.MultiheadAttention(8, 2, batch_first=True); self: Q, K, V = encoder_out {encoder_out}; "
        f"cross: Q = decoder_in {decoder_in}, K, V = encoder_out.\n"
        f"D2L: MultiHeadAttention(100, 5, dropout 0.5); self: X {x} with valid_lens [3, 2]; "
        f"cross: 4 queries from A {a}, 9 keys and values from B (2, 9, 100).\n"
        "The output has the queries' length; keys and values only have to match each other."
    )
    return [table, notes]


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    return []
