"""W9 3.1 and 3.2: scaled dot-product attention by hand, and its properties
(design notes: ``docs/design.md``, this module's section)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import ClassVar

from attn_cli.experiments import MeasuredResult, ProgressCallback, QuickConfig

ARTIFACTS = ("w9-worked", "w9-properties")
FIGURES = ()
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant

WORKED_Q = [[1.0, 0.0]]  # (1, 2)
WORKED_K = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # (3, 2)
WORKED_V = [[10.0], [20.0], [30.0]]  # (3, 1)


@dataclass(frozen=True)
class Config(QuickConfig):
    n_q: int = 3  # queries (3.2)
    n_k: int = 5  # keys and values (3.2)
    d_k: int = 4  # query/key width (3.2)
    d_v: int = 6  # value width (3.2)


@dataclass
class Result(MeasuredResult):
    config: dict
    scores: list[float]  # 3.1: q . k / sqrt(d_k) for the three keys
    weights: list[float]  # softmax of the scores
    weights_sum: float
    output: float  # weights @ V
    closed_form: list[float]  # e^s / (2 e^s + 1), 1 / (2 e^s + 1), e^s / (2 e^s + 1)
    closed_form_max_diff: float  # | core weights - closed form |, max
    shapes: dict[str, list[int]]  # 3.2: Q, K, V, scores, output
    matches_sdpa: bool  # torch.allclose(out, F.scaled_dot_product_attention(Q, K, V), atol=1e-6)
    sdpa_max_diff: float  # | out - F.sdpa |, max
    core_max_diff: float  # | text's explicit formula - core attention |, max
    row_sums: list[float]  # weights.sum(-1)
    non_negative: bool  # all weights >= 0
    convex: bool  # every output within [min, max] of its value column (1e-6 slack)

    MEASURED: ClassVar[dict[str, str]] = {  # check ID -> its value's path in this Result
        "w9-worked.scores": "scores",
        "w9-worked.weights": "weights",
        "w9-worked.weights_sum": "weights_sum",
        "w9-worked.output": "output",
        "w9-properties.shapes": "shapes",
        "w9-properties.matches_sdpa": "matches_sdpa",
        "w9-properties.row_sums": "row_sums",
        "w9-properties.non_negative": "non_negative",
        "w9-properties.convex": "convex",
    }


def estimate_bytes(config: Config) -> int:
    """Float32 tensors held at once: Q, K, V, about six (n_q, n_k) scores and weights, the outputs."""
    n_q, n_k, d_k, d_v = config.n_q, config.n_k, config.d_k, config.d_v
    return 4 * (n_q * d_k + n_k * (d_k + d_v) + 6 * n_q * n_k + 4 * n_q * d_v)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch
    import torch.nn.functional as F

    from attn_cli.core.attention import scaled_dot_product_attention
    from attn_cli.core.memory import guard

    what = f"formula with --n-q {config.n_q} --n-k {config.n_k} --d-k {config.d_k} --d-v {config.d_v}"
    guard(estimate_bytes(config), what, config.device)
    dev = torch.device(config.device)

    # 3.1: the worked example in float64
    Q, K, V = (torch.tensor(t, dtype=torch.float64, device=dev) for t in (WORKED_Q, WORKED_K, WORKED_V))
    scores = Q @ K.T / math.sqrt(K.shape[1])  # (1, 3)
    out, w = scaled_dot_product_attention(Q, K, V)  # (1, 1), (1, 3)
    s = 1 / math.sqrt(2)
    closed = [math.exp(s) / (2 * math.exp(s) + 1), 1 / (2 * math.exp(s) + 1), math.exp(s) / (2 * math.exp(s) + 1)]
    weights = w[0].cpu().tolist()

    # 3.2: random Q, K, V drawn on the CPU
    n_q, n_k, d_k, d_v = config.n_q, config.n_k, config.d_k, config.d_v
    torch.manual_seed(config.seed)
    Qr, Kr, Vr = (torch.randn(*shape).to(dev) for shape in ((n_q, d_k), (n_k, d_k), (n_k, d_v)))  # in this order
    s_r = Qr @ Kr.T / d_k**0.5  # (n_q, n_k): how well each query matches each key
    o_r, w_r = scaled_dot_product_attention(Qr, Kr, Vr)  # (n_q, d_v), (n_q, n_k): the core
    w_text = torch.softmax(s_r, dim=-1)  # the text's explicit formula, for comparison
    o_text = w_text @ Vr
    o_sdpa = F.scaled_dot_product_attention(Qr, Kr, Vr)
    inside = ((o_r >= Vr.min(0).values - 1e-6) & (o_r <= Vr.max(0).values + 1e-6)).all()
    return Result(
        config=asdict(config),
        scores=scores[0].cpu().tolist(),
        weights=weights,
        weights_sum=w.sum().item(),
        output=out.item(),
        closed_form=closed,
        closed_form_max_diff=max(abs(a - b) for a, b in zip(weights, closed)),
        shapes={k: list(t.shape) for k, t in zip(("Q", "K", "V", "scores", "output"), (Qr, Kr, Vr, s_r, o_r))},
        matches_sdpa=bool(torch.allclose(o_r, o_sdpa, atol=1e-6)),
        sdpa_max_diff=(o_r - o_sdpa).abs().max().item(),
        core_max_diff=max((o_r - o_text).abs().max().item(), (w_r - w_text).abs().max().item()),
        row_sums=w_r.sum(-1).cpu().tolist(),
        non_negative=bool((w_r >= 0).all()),
        convex=bool(inside),
    )
