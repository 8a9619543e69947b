"""Exercise 7, the cost of cross-attention (one multiply-add = 2 FLOPs, as in Eq. 10.3.3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attn_cli.experiments.exercises.common import Config, ProgressCallback

TITLE = "cost of cross-attention"
D_MODEL, SOURCE = 512, 1000  # the exercise's d and m
HEADS = 8  # any h gives the same count
SHAPES = ((1, 1000), (10, 1000), (100, 1000), (1000, 1000), (100, 10))  # (n, m) for the general count


@dataclass
class CountRow:
    n: int
    m: int
    q_and_out: int  # 4 n d^2
    k_and_v: int  # 4 m d^2
    scores_and_mix: int  # 4 n m d
    formula: int
    counted: int  # FlopCounterMode on a real forward


@dataclass
class Result:
    d: int
    m: int
    heads: int
    rows: list[CountRow] = field(default_factory=list)
    recompute_formula: int = 0
    cached_formula: int = 0
    recompute_counted: int = 0
    cached_counted: int = 0
    ratio: float = 0.0  # recompute / cached, from the formula
    ratio_counted: float = 0.0
    ratio_expression: str = "(d + m d + m) / (d + m)"


def count_flops(fn: Callable[..., object], *args: Any) -> int:
    """The FLOPs torch counts in ``fn(*args)``."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import MultiHeadAttention
    from attn_cli.core.measure import attend_heads

    d, h = D_MODEL, HEADS
    with torch.device("meta"):
        mha = MultiHeadAttention(d, h, dropout=0.0)
    rows = []
    for n, m in SHAPES:
        A, B = torch.empty(1, n, d, device="meta"), torch.empty(1, m, d, device="meta")
        parts = (4 * n * d * d, 4 * m * d * d, 4 * n * m * d)  # W_q and W_o, W_k and W_v, scores and mixing
        rows.append(CountRow(n, m, *parts, formula=sum(parts), counted=count_flops(mha, A, B, B)))
    x = torch.empty(1, 1, d, device="meta")  # the new decoder token
    B = torch.empty(1, SOURCE, d, device="meta")
    K, V = mha.W_k(B), mha.W_v(B)  # cached once: (1, m, d)
    m = SOURCE  # one decoder step's FLOPs, recomputing K and V or reading them from the cache:
    recompute, cached = 4 * d * d + 4 * m * d * d + 4 * m * d, 4 * d * d + 4 * m * d
    recompute_counted = count_flops(mha, x, B, B)
    cached_counted = count_flops(lambda: attend_heads(mha.W_q(x), K, V, h, mha.W_o))  # (1, 1, d)
    ratio, ratio_counted = recompute / cached, recompute_counted / cached_counted
    return Result(d, SOURCE, h, rows, recompute, cached, recompute_counted, cached_counted, ratio, ratio_counted)
