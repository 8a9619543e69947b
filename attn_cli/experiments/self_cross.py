"""Self- and cross-attention, the same operation on different arguments: the shapes of W9 4.1
(``nn.MultiheadAttention``) and D2L 10.3.3 (the package's :class:`MultiHeadAttention`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

from attn_cli.experiments import MeasuredResult, ProgressCallback, QuickConfig

ARTIFACTS = ("w9-self-cross", "d2l-self-cross")
FIGURES = ()
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant


Config = QuickConfig  # seed (set before each block, as in the texts) and device, nothing else


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
    """Float32 bytes at the texts' fixed sizes: a D2L layer of width 100 and its (2, 9, 100) inputs."""
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
        mha = nn.MultiheadAttention(d, heads, batch_first=True).to(dev)
        encoder_out = torch.randn(1, 6, d).to(dev)  # 6 source tokens
        decoder_in = torch.randn(1, 4, d).to(dev)  # 4 target tokens produced so far
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

    shapes = (s_out, s_w, c_out, c_w, ds_out, ds_w, dc_out, dc_w)  # in the Result's field order
    return Result(asdict(config), *(list(t.shape) for t in shapes))
