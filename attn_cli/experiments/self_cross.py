"""Self- and cross-attention: the same operation, different argument sources.

* W9 4.1: ``nn.MultiheadAttention(8, 2, batch_first=True)`` after seed 0, then
  ``encoder_out = randn(1, 6, 8)`` and ``decoder_in = randn(1, 4, 8)``.  Self-attention
  over the source gives output (1, 6, 8) and (head-averaged) weights (1, 6, 6);
  cross-attention from the decoder gives (1, 4, 8) and (1, 4, 6).
* D2L 10.3.3: the package's :class:`MultiHeadAttention` (100 hidden, 5 heads, dropout 0.5):
  self-attention on (2, 4, 100) with ``valid_lens = [3, 2]`` gives (2, 4, 100);
  cross-attention from 4 queries to 9 keys gives (2, 4, 100).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

from attn_cli.experiments.base import MeasuredResult, QuickConfig
from attn_cli.experiments.progress import ProgressCallback

ARTIFACTS = ("w9-self-cross", "d2l-self-cross")
FIGURES = ()
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant


@dataclass(frozen=True)
class Config(QuickConfig):
    seed: int = 0  # torch.manual_seed(0) before each block, as in the texts
    device: str = "cpu"  # layers and data are created on the CPU, then moved


@dataclass
class Result(MeasuredResult):
    config: dict
    w9_self_output: list[int]
    w9_self_weights: list[int]
    w9_cross_output: list[int]
    w9_cross_weights: list[int]
    d2l_self_output: list[int]
    d2l_self_weights: list[int]  # (B, heads, n_q, n_k): the package keeps per-head weights
    d2l_cross_output: list[int]
    d2l_cross_weights: list[int]

    MEASURED: ClassVar[dict[str, str]] = {  # check ID -> its value's path in this Result
        "w9-self-cross.self.output": "w9_self_output",
        "w9-self-cross.self.weights": "w9_self_weights",
        "w9-self-cross.cross.output": "w9_cross_output",
        "w9-self-cross.cross.weights": "w9_cross_weights",
        "d2l-self-cross.self": "d2l_self_output",
        "d2l-self-cross.cross": "d2l_cross_output",
    }


def estimate_bytes(config: Config) -> int:
    """Largest tensors held at once (float32): the texts' fixed sizes, a D2L layer of width
    100 (4 x 100 x 100 weights) and its (2, 9, 100) inputs dominate."""
    return 4 * (2 * 4 * 100 * 100 + 8 * 2 * 9 * 100)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch
    from torch import nn

    from attn_cli.core.attention import MultiHeadAttention
    from attn_cli.core.memory import guard

    guard(estimate_bytes(config), "self-cross", config.device)
    dev = config.device
    with torch.no_grad():
        # W9 4.1, draws in the text's order: the layer, then encoder_out, then decoder_in
        torch.manual_seed(config.seed)
        d, heads = 8, 2
        mha = nn.MultiheadAttention(d, heads, batch_first=True)
        encoder_out = torch.randn(1, 6, d)  # 6 source tokens
        decoder_in = torch.randn(1, 4, d)  # 4 target tokens produced so far
        mha, encoder_out, decoder_in = mha.to(dev), encoder_out.to(dev), decoder_in.to(dev)
        s_out, s_w = mha(encoder_out, encoder_out, encoder_out, average_attn_weights=True)
        c_out, c_w = mha(decoder_in, encoder_out, encoder_out, average_attn_weights=True)

        # D2L 10.3.3.1-2
        torch.manual_seed(config.seed)
        num_hiddens, num_heads = 100, 5
        attention = MultiHeadAttention(num_hiddens, num_heads, 0.5).to(dev)
        batch_size, num_queries, valid_lens = 2, 4, torch.tensor([3, 2], device=dev)
        X = torch.ones((batch_size, num_queries, num_hiddens), device=dev)
        ds_out, ds_w = attention(X, X, X, valid_lens)  # self: (2, 4, 100)
        A = torch.ones((batch_size, 4, num_hiddens), device=dev)
        B = torch.ones((batch_size, 9, num_hiddens), device=dev)
        dc_out, dc_w = attention(A, B, B, None)  # cross: (2, 4, 100)

    return Result(
        config=asdict(config),
        w9_self_output=list(s_out.shape),
        w9_self_weights=list(s_w.shape),
        w9_cross_output=list(c_out.shape),
        w9_cross_weights=list(c_w.shape),
        d2l_self_output=list(ds_out.shape),
        d2l_self_weights=list(ds_w.shape),
        d2l_cross_output=list(dc_out.shape),
        d2l_cross_weights=list(dc_w.shape),
    )
