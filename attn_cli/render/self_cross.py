"""Table for ``attn self-cross`` (W9 4.1, D2L 10.3.3); no figure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from attn_cli.render.files import no_figures
from attn_cli.render.table import Column, Table

if TYPE_CHECKING:
    from attn_cli.experiments.self_cross import Result


def _shape(s: Iterable[int]) -> str:
    return str(tuple(s))


def tables(result: Result, outcomes: Mapping) -> list:
    r = result
    columns = [Column(c, no_wrap=True) for c in ("text", "shape of", "published", "regenerated")]
    table = Table(title="self- and cross-attention shapes (seed 0)", columns=columns)
    rows = (  # (text, shape of, check ID of the published shape, regenerated shape)
        ("W9 4.1", "self: output", "w9-self-cross.self.output", r.w9_self_output),
        ("W9 4.1", "self: weights", "w9-self-cross.self.weights", r.w9_self_weights),
        ("W9 4.1", "cross: output", "w9-self-cross.cross.output", r.w9_cross_output),
        ("W9 4.1", "cross: weights", "w9-self-cross.cross.weights", r.w9_cross_weights),
        ("D2L 10.3.3", "self: output", "d2l-self-cross.self", r.d2l_self_output),
        ("D2L 10.3.3", "self: weights (B, h, n_q, n_k)", None, r.d2l_self_weights),
        ("D2L 10.3.3", "cross: output", "d2l-self-cross.cross", r.d2l_cross_output),
        ("D2L 10.3.3", "cross: weights (B, h, n_q, n_k)", None, r.d2l_cross_weights),
    )
    for i, (text, what, check_id, shape) in enumerate(rows):
        published = _shape(outcomes[check_id].published) if check_id else ""
        table.add_row(text, what, published, _shape(shape), end_section=i == 3)  # W9, then D2L
    # an output has its queries' shape: the inputs' shapes are read off the regenerated outputs
    encoder_out, decoder_in = _shape(r.w9_self_output), _shape(r.w9_cross_output)
    x, a = _shape(r.d2l_self_output), _shape(r.d2l_cross_output)
    notes = (
        f"W9: nn.MultiheadAttention(8, 2, batch_first=True); self: Q, K, V = encoder_out {encoder_out}; "
        f"cross: Q = decoder_in {decoder_in}, K, V = encoder_out.\n"
        f"D2L: MultiHeadAttention(100, 5, dropout 0.5); self: X {x} with valid_lens [3, 2]; "
        f"cross: 4 queries from A {a}, 9 keys and values from B (2, 9, 100).\n"
        "The output has the queries' length; keys and values only have to match each other."
    )
    return [table, notes]


figures = no_figures
