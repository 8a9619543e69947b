"""Exercise 9, heads as slices: a loop over heads equals the folded implementation."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import TYPE_CHECKING, ClassVar

from attn_cli.experiments.exercises.common import Config, ProgressCallback

if TYPE_CHECKING:
    from torch import Tensor, nn

    from attn_cli.core.attention import MultiHeadAttention

TITLE = "heads as slices"
D_MODEL, HEADS = 16, 4
TOL = 1e-5  # a difference above this (float32 round-off) is detectable


@dataclass
class Case:
    valid_lens: list  # the test's valid_lens (1-D or 2-D)
    loop_vs_folded: float  # max |loop - MultiHeadAttention|
    tiled_vs_folded: float  # max |tiled - MultiHeadAttention|
    heads_masks: list[str]  # per (sequence, head): "b0 h1: text 3, tiled 2"


@dataclass
class Result:
    TOL: ClassVar[float] = TOL  # for the table: a difference above this is detectable

    d: int
    h: int
    n_k: int
    cases: list[Case] = field(default_factory=list)
    rule_checked: int = 0  # valid_lens vectors (with h, B) compared with the rule
    rule_agrees: bool = False  # mask difference == tiling_detectable for every one
    rule: str = "undetectable iff h = 1 or all min(valid_len, n_k) in the batch are equal (2-D: all rows equal)"


def _sliced(linear: nn.Linear, rows: slice, x: Tensor) -> Tensor:
    """Output features ``rows`` of a linear layer (weight rows and, if any, bias entries)."""
    y = x @ linear.weight[rows].T
    return y if linear.bias is None else y + linear.bias[rows]


def loop_forward(
    mha: MultiHeadAttention, queries: Tensor, keys: Tensor, values: Tensor, valid_lens: Tensor | None = None
) -> Tensor:
    """Multi-head attention with an explicit loop over heads and sliced projections."""
    from attn_cli.core.attention import scaled_dot_product_attention

    h = mha.num_heads
    p = mha.W_q.out_features // h
    out: Tensor | int = 0
    for i in range(h):
        rows = slice(i * p, (i + 1) * p)  # head i's output features of W_q, W_k, W_v
        q = _sliced(mha.W_q, rows, queries)  # (B, n_q, p)
        k = _sliced(mha.W_k, rows, keys)  # (B, n_k, p)
        v = _sliced(mha.W_v, rows, values)  # (B, n_k, p)
        head, _ = scaled_dot_product_attention(q, k, v, valid_lens=valid_lens)  # (B, n_q, p)
        out = out + head @ mha.W_o.weight[:, rows].T  # (B, n_q, d): W_o's input features of head i
    assert not isinstance(out, int)  # h >= 1 heads were added
    return out if mha.W_o.bias is None else out + mha.W_o.bias


def _tiled(valid_lens: Tensor, h: int) -> Tensor:
    """``valid_lens`` tiled h times along the batch: folded index b h + i gets sequence (b h + i) mod B's."""
    return valid_lens.repeat(h, *[1] * (valid_lens.dim() - 1))


def folded_forward(
    mha: MultiHeadAttention,
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    valid_lens: Tensor | None = None,
    tile: bool = False,
) -> Tensor:
    """The folded forward pass of MultiHeadAttention, with tiled valid_lens if ``tile``."""
    import torch

    from attn_cli.core.measure import attend_heads

    h = mha.num_heads
    if valid_lens is not None:
        valid_lens = _tiled(valid_lens, h) if tile else torch.repeat_interleave(valid_lens, h, dim=0)
    return attend_heads(mha.W_q(queries), mha.W_k(keys), mha.W_v(values), h, mha.W_o, valid_lens)


def tiling_detectable(valid_lens: list, h: int, n_k: int) -> bool:
    """The rule: can some input tell tiled from repeated valid_lens?"""
    if h == 1:
        return False
    clipped = [tuple(min(x, n_k) for x in (v if isinstance(v, (list, tuple)) else [v])) for v in valid_lens]
    return len(set(clipped)) > 1


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import MultiHeadAttention, valid_lens_mask

    torch.manual_seed(config.seed)
    n_q, n_k = 3, 5
    mha = MultiHeadAttention(D_MODEL, HEADS, dropout=0.0).eval()
    tests: list[list[int] | list[list[int]]] = [[3, 2], [4, 4], [5, 7], [2, 5, 1], [[1, 2, 3], [5, 4, 2]]]
    cases = []
    with torch.no_grad():
        for vl in tests:
            b = len(vl)
            Q, K, V = torch.randn(b, n_q, D_MODEL), torch.randn(b, n_k, D_MODEL), torch.randn(b, n_k, D_MODEL)
            lens = torch.tensor(vl)
            ref, _ = mha(Q, K, V, lens)
            loop = loop_forward(mha, Q, K, V, lens)
            tiled = folded_forward(mha, Q, K, V, lens, tile=True)
            tiled_lens = _tiled(lens, HEADS)
            masks = [
                f"b{s} h{i}: " + f"{vl[s]} -> {tiled_lens[s * HEADS + i].tolist()}".replace(", ", ",")
                for s in range(b)
                for i in range(HEADS)
            ]
            cases.append(Case(vl, (loop - ref).abs().max().item(), (tiled - ref).abs().max().item(), masks))
    combos = [(list(c), h) for b in (1, 2, 3) for h in (1, 2, 3, 4) for c in product(range(n_k + 2), repeat=b)]
    agrees = True
    for c, h in combos:  # do the masks of repeated and tiled valid_lens differ exactly where the rule says?
        lens = torch.tensor(c)
        rep, til = (valid_lens_mask(x, n_q, n_k) for x in (torch.repeat_interleave(lens, h, dim=0), _tiled(lens, h)))
        agrees = agrees and (not torch.equal(rep, til)) == tiling_detectable(c, h, n_k)
    return Result(D_MODEL, HEADS, n_k, cases, len(combos), agrees)
