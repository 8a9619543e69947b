"""Published values of W9 chapters 1, 3.1, 3.2 and 4.3 (the closed-form basics), regenerated
by ``attn embeddings``, ``analogy``, ``formula`` and ``order``.  Numeric tolerances are half a
unit of the last printed digit; the two queen/princess slots of w9-ppmi are rules (``_TIE``)."""

from attn_cli.published.types import Check, exact, num, rule

_ID = "identity"  # kind: true by construction or arithmetic, shown and never counted

_R2 = "printed to 2 decimals (numpy .round(2))"
_R3 = "printed to 3 decimals (round(x, 3))"
_R3_NP = "printed to 3 decimals (.round(3))"
_KING_SIMILARITY = {"prince": 1.0, "queen": 0.997, "woman": 0.374, "bread": 0.316}  # W9 1.2
_BANK_VECTORS = {  # W9 1.3, seed 0: E in vocab order, then Wq, Wk, Wv
    "static_bank": [-0.89, -1.51, 0.37, 1.46, 0.94, 0.77],
    "river_bank": [0.12, 0.04, 0.07, -0.15, 0.2, 1.09],
    "money_bank": [0.22, 1.62, -0.44, 0.97, 0.03, -0.92],
}
_DOG_OUTPUT = [-0.72, 0.958, 1.767, 0.24, 1.691, 0.924]  # W9 4.3: the same for both orders
_TIE = (
    "queen and princess have identical co-occurrence rows, so their vectors are equal in "
    "exact arithmetic and their order is decided by rounding noise (~1e-16, varies with the "
    "LAPACK build); the rule accepts either order when their similarities agree to 1e-9"
)

CHECKS: tuple[Check, ...] = (
    # W9 1.1: one-hot vectors and the embedding table
    # identities: distinct rows of an identity matrix have dot product exactly 0; a one-hot
    # row times W selects a row of W exactly; V * d is arithmetic; V is the config echoed back
    exact("w9-onehot.king.queen", "w9-onehot", 0.0, "one-hot vectors are orthogonal: exactly 0", kind=_ID),
    exact("w9-onehot.king.apple", "w9-onehot", 0.0, "one-hot vectors are orthogonal: exactly 0", kind=_ID),
    exact("w9-onehot.lookup_equals_matmul", "w9-onehot", True, "torch.allclose verdict", kind=_ID),
    exact("w9-onehot.parameters", "w9-onehot", 15_000_000, "integer count V * d", kind=_ID),
    exact("w9-onehot.onehot_dims", "w9-onehot", 50_000, "integer count V (the setting echoed back)", kind=_ID),
    # W9 1.2: PPMI + SVD static embeddings (deterministic: no random draws)
    *(num(f"w9-ppmi.king~{word}", "w9-ppmi", value, 0.0005, _R3) for word, value in _KING_SIMILARITY.items()),
    rule("w9-ppmi.analogy.top2", "w9-ppmi", "queen, princess", _TIE),
    exact(
        "w9-ppmi.analogy.third",
        "w9-ppmi",
        "kingdom",
        "third by margins of ~6e-4 (to the tie) and ~2e-3 (to prince), far above rounding noise",
    ),
    exact(
        "w9-ppmi.bank_nearest.top7",
        "w9-ppmi",
        ["river", "money", "water", "loan", "market", "crown", "ruled"],
        "the first seven are separated by gaps of at least ~1e-3, far above rounding noise",
    ),
    rule("w9-ppmi.bank_nearest.8th", "w9-ppmi", "queen", _TIE),
    # W9 1.3: contextual 'bank' vectors (seed 0: E in vocab order, then Wq, Wk, Wv)
    *(num(f"w9-contextual.{name}", "w9-contextual", vector, 0.005, _R2) for name, vector in _BANK_VECTORS.items()),
    num("w9-contextual.distance", "w9-contextual", 2.841, 0.0005, _R3),
    # W9 3.1: the worked example
    num("w9-worked.scores", "w9-worked", [0.707, 0.0, 0.707], 0.0005, _R3_NP),
    num("w9-worked.weights", "w9-worked", [0.401, 0.198, 0.401], 0.0005, _R3_NP),
    # identities: softmax weights sum to 1 by construction; keys 1 and 3 score alike, so their
    # weights are equal and the output is 20 for any weights that sum to 1 (values 10, 20, 30)
    num("w9-worked.weights_sum", "w9-worked", 1.0, 0.0005, _R3_NP, kind=_ID),
    num("w9-worked.output", "w9-worked", 20.0, 0.005, "printed to 2 decimals (.round(2))", kind=_ID),
    # W9 3.2: shapes and properties (seed 0: Q, K, V drawn in that order)
    exact(
        "w9-properties.shapes",
        "w9-properties",
        {"Q": [3, 4], "K": [5, 4], "V": [5, 6], "scores": [3, 5], "output": [3, 6]},
        "shapes are integers",
    ),
    exact(
        "w9-properties.matches_sdpa",
        "w9-properties",
        True,
        "torch.allclose(out, F.scaled_dot_product_attention(Q, K, V), atol=1e-6) verdict",
    ),
    # identities: softmax rows sum to 1 and exp is positive by construction; non-negative
    # weights summing to 1 make every output a convex combination of the values
    num(
        "w9-properties.row_sums",
        "w9-properties",
        [1.0, 1.0, 1.0],
        1e-6,
        "printed as full float32 values (.tolist()); float32 rounding of a 5-term sum is ~1e-7",
        kind=_ID,
    ),
    exact("w9-properties.non_negative", "w9-properties", True, "boolean verdict", kind=_ID),
    exact("w9-properties.convex", "w9-properties", True, "boolean verdict (1e-6 slack, as the text)", kind=_ID),
    # W9 4.3: self-attention cannot tell the order (seed 0: emb, Wq, Wk, Wv, then pos)
    *(num(f"w9-order.{s}", "w9-order", _DOG_OUTPUT, 0.0005, _R3_NP) for s in ("dog_bites_man", "man_bites_dog")),
    # rules: the section's claim (attention sees a set) and its failing case (positions added)
    exact("w9-order.identical", "w9-order", True, "torch.allclose(atol=1e-6) verdict", kind="rule"),
    exact("w9-order.identical_with_positions", "w9-order", False, "torch.allclose(atol=1e-6) verdict", kind="rule"),
)
