"""Exercise 8, multi-query and grouped-query attention: parameters, FLOPs, KV cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attn_cli.experiments.exercises.common import Config, ProgressCallback

if TYPE_CHECKING:
    from torch import Tensor, nn

TITLE = "multi-query and grouped-query attention"
D_MODEL, HEADS, GROUPS, BYTES = 4096, 32, 8, 2  # the exercise's d, h, g, 16-bit
TOKENS = 128  # n for the measured FLOP count (any n gives the same coefficients)
VALUE_DIM = 4  # c of the part-3 check
SHARED_WEIGHTS = ((1.0, 0.0), (0.88, 0.12))  # part 3: the two query heads' weights on (v1, v2)
SHARED_SAMPLES = 2000  # part 3: examples of the readout
SHARED_WIDTHS = (4, 3, 2, 1)  # part 3: widths p of the shared value head


@dataclass
class Scheme:
    name: str  # "MHA", "GQA", "MQA"
    groups: int  # key/value heads g
    parameters: int  # measured
    parameters_formula: int  # 2 d^2 + 2 (g/h) d^2
    flops: int  # measured at n = TOKENS
    flops_formula: int  # 4 n d^2 + 4 (g/h) n d^2 + 4 n^2 d
    kv_bytes_per_token: int  # 2 g p * BYTES
    kv_numbers_per_token: int  # 2 g p


@dataclass
class SharedRow:
    p: int  # width of the shared value head
    error: float  # relative error of the best readout of [v1; v2] from the two heads
    theory: float  # sqrt(1 - min(p, c) / c)


@dataclass
class Result:
    d: int
    h: int
    p: int
    tokens: int
    schemes: list[Scheme] = field(default_factory=list)
    shared_weights: list[list[float]] = field(default_factory=list)  # the two query heads' weights
    shared: list[SharedRow] = field(default_factory=list)
    value_dim: int = VALUE_DIM


def grouped_forward(layers: nn.ModuleList, x: Tensor, h: int, g: int) -> Tensor:
    """Self-attention (x: (B, n, d)) of h query heads over g key/value heads; ``layers``: W_q, W_k, W_v, W_o."""
    from attn_cli.core.measure import attend_heads

    W_q, W_k, W_v, W_o = layers
    return attend_heads(W_q(x), W_k(x), W_v(x), h, W_o, kv_heads=g)  # (B, n, d)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch
    from torch import nn

    from attn_cli.core.attention import count_parameters
    from attn_cli.core.measure import readout_error
    from attn_cli.experiments.exercises.ex07_cross_cost import count_flops

    d, h, n = D_MODEL, HEADS, TOKENS
    p = d // h
    schemes = []
    for name, g in (("MHA", h), ("GQA", GROUPS), ("MQA", 1)):
        with torch.device("meta"):  # W_q, W_k, W_v, W_o
            layers = nn.ModuleList(nn.Linear(d, width, bias=False) for width in (d, g * p, g * p, d))
        x = torch.empty(1, n, d, device="meta")
        params, params_formula = count_parameters(layers), 2 * d * d + 2 * d * g * p
        flops = count_flops(grouped_forward, layers, x, h, g)
        flops_formula = 4 * n * d * d + 4 * n * d * g * p + 4 * n * n * d
        schemes.append(Scheme(name, g, params, params_formula, flops, flops_formula, 2 * g * p * BYTES, 2 * g * p))
    gen = torch.Generator().manual_seed(config.seed)
    shared = []
    for q in SHARED_WIDTHS:  # part 3: two query heads (SHARED_WEIGHTS) sharing a random W_v (q x c)
        V = torch.randn(2, SHARED_SAMPLES, VALUE_DIM, generator=gen, dtype=torch.float64)  # v1, v2: (N, c)
        W_v = torch.randn(q, VALUE_DIM, generator=gen, dtype=torch.float64)
        M = torch.cat([(a * V[0] + b * V[1]) @ W_v.T for a, b in SHARED_WEIGHTS], 1)  # (N, 2q): what W_v passes on
        error = readout_error(M, torch.cat([V[0], V[1]], 1), driver="gelsd")
        shared.append(SharedRow(q, error, (1 - min(q, VALUE_DIM) / VALUE_DIM) ** 0.5))
    return Result(d, h, p, n, schemes, [list(w) for w in SHARED_WEIGHTS], shared)
