"""Table for ``attn self-cross`` (W9 4.1, D2L 10.3.3); no figure."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table


def _shape(s) -> str:
    return str(tuple(s))


def tables(result) -> list:
    w9 = Table(title="W9 4.1: nn.MultiheadAttention(8, 2, batch_first=True), seed 0; "
                     "encoder_out (1, 6, 8), decoder_in (1, 4, 8)")
    for col in ("attention", "Q from", "K, V from", "published output", "regenerated output",
                "published weights", "regenerated weights"):
        w9.add_column(col)
    w9.add_row("self", "source", "source", "(1, 6, 8)", _shape(result.w9_self_output),
               "(1, 6, 6)", _shape(result.w9_self_weights))
    w9.add_row("cross", "decoder", "encoder", "(1, 4, 8)", _shape(result.w9_cross_output),
               "(1, 4, 6)", _shape(result.w9_cross_weights))

    d2l = Table(title="D2L 10.3.3: MultiHeadAttention(100, 5, dropout 0.5), batch 2")
    for col in ("attention", "inputs", "published output", "regenerated output", "weights (B, h, n_q, n_k)"):
        d2l.add_column(col)
    d2l.add_row("self", "X (2, 4, 100), valid_lens [3, 2]", "(2, 4, 100)", _shape(result.d2l_self_output),
                _shape(result.d2l_self_weights))
    d2l.add_row("cross", "A (2, 4, 100) queries; B (2, 9, 100) keys, values", "(2, 4, 100)",
                _shape(result.d2l_cross_output), _shape(result.d2l_cross_weights))
    return [w9, d2l, "the output has the queries' length; keys and values only have to match each other"]


def figures(result, out: Path) -> list[Path]:
    return []
