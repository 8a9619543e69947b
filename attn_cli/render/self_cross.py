"""Table for ``attn self-cross`` (W9 4.1, D2L 10.3.3); no figure."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from attn_cli.render.files import DEFAULT_FORMATS


def _shape(s) -> str:
    return str(tuple(s))


def tables(result) -> list:
    table = Table(title="self- and cross-attention shapes (seed 0)")
    for col in ("text", "shape of", "published", "regenerated"):
        table.add_column(col, no_wrap=True)
    w9 = "W9 4.1"
    table.add_row(w9, "self: output", "(1, 6, 8)", _shape(result.w9_self_output))
    table.add_row(w9, "self: weights", "(1, 6, 6)", _shape(result.w9_self_weights))
    table.add_row(w9, "cross: output", "(1, 4, 8)", _shape(result.w9_cross_output))
    table.add_row(w9, "cross: weights", "(1, 4, 6)", _shape(result.w9_cross_weights), end_section=True)
    d2l = "D2L 10.3.3"
    table.add_row(d2l, "self: output", "(2, 4, 100)", _shape(result.d2l_self_output))
    table.add_row(d2l, "self: weights (B, h, n_q, n_k)", "", _shape(result.d2l_self_weights))
    table.add_row(d2l, "cross: output", "(2, 4, 100)", _shape(result.d2l_cross_output))
    table.add_row(d2l, "cross: weights (B, h, n_q, n_k)", "", _shape(result.d2l_cross_weights))
    notes = ("W9: nn.MultiheadAttention(8, 2, batch_first=True); self: Q, K, V = encoder_out (1, 6, 8); "
             "cross: Q = decoder_in (1, 4, 8), K, V = encoder_out.\n"
             "D2L: MultiHeadAttention(100, 5, dropout 0.5); self: X (2, 4, 100) with valid_lens [3, 2]; "
             "cross: 4 queries from A (2, 4, 100), 9 keys and values from B (2, 9, 100).\n"
             "The output has the queries' length; keys and values only have to match each other.")
    return [table, notes]


def figures(result, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    return []
