"""Multi-head attention: W9 5.1 (hand-written equals ``nn.MultiheadAttention``; 4 d^2 + 4 d parameters whatever
the head count) and D2L 10.3.2 (:class:`MultiHeadAttention`: its shapes, 4 d^2 parameters on concrete layers)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from attn_cli.errors import AttnError
from attn_cli.experiments import ProgressCallback, QuickConfig

ARTIFACTS = ("w9-heads", "d2l-mha-shape", "d2l-mha-params", "d2l-fig-10.3.2")
FIGURES = ("heads_layout.png",)
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant


@dataclass(frozen=True)
class Config(QuickConfig):
    d_model: int = 64  # W9's parameter table (nn.MultiheadAttention, with biases)
    d2l_d_model: int = 256  # D2L's parameter table (MultiHeadAttention(num_hiddens=...), bias off)
    heads: tuple[int, ...] = (1, 2, 4, 8)  # head counts h of both tables
    layout_heads: int = 4  # heads drawn in figure 10.3.2 (width d_model)


@dataclass
class Result:
    config: dict
    handwritten_matches: bool  # W9: hand-written == nn.MultiheadAttention (atol 1e-5)
    handwritten_max_diff: float
    w9_params: list[dict] = field(default_factory=list)  # {"heads", "params", "formula", "head_size"}
    mha_shape: list[int] = field(default_factory=list)  # D2L shape check output
    mha_weights_shape: list[int] = field(default_factory=list)  # (B, h, n_q, n_k)
    mha_masked_weight: float = 0.0  # largest weight on a key beyond valid_lens (exactly 0)
    d2l_params: list[dict] = field(default_factory=list)  # {"heads", "params", "formula"}
    layout: dict = field(default_factory=dict)  # figure 10.3.2: {"d", "h", "p", "params_drawn", "params_layer"}

    def measured(self) -> dict[str, Any]:
        out: dict[str, Any] = {"w9-heads.matches": self.handwritten_matches, "d2l-mha-shape.output": self.mha_shape}
        for row in self.w9_params:
            out[f"w9-heads.params.{row['heads']}"] = row["params"]
            out[f"w9-heads.head_size.{row['heads']}"] = row["head_size"]
        out.update({f"d2l-mha-params.{row['heads']}": row["params"] for row in self.d2l_params})
        if lay := self.layout:
            out["d2l-fig-10.3.2.layout"] = (
                lay["h"] * lay["p"] == lay["d"] and lay["params_drawn"] == lay["params_layer"]
            )
        return out


def estimate_bytes(config: Config) -> int:
    """Float32: two layers' 4 d^2 weights at the larger width, the (2, 10, d) input, (2, h, 10, 10) weights."""
    w = max(config.d_model, config.d2l_d_model)
    h = max(config.heads + (config.layout_heads,))
    return 4 * (2 * (4 * w * w + 4 * w) + 8 * 2 * 10 * w + 4 * 2 * h * 10 * 10)


def validate(config: Config) -> None:
    """Each head count divides its width (both in range already: the options' types)."""
    widths = (("--d-model", config.d_model), ("--d2l-d-model", config.d2l_d_model))
    checks = [(h, name, width) for h in config.heads for name, width in widths]
    checks.append((config.layout_heads, "--d-model", config.d_model))
    for h, name, width in checks:
        if width % h:
            raise AttnError(f"{h} heads do not divide {name} {width} (head size = width / heads)")


def _w9_block(config: Config) -> dict[str, Any]:
    """W9 5.1, draws in the text's order: heads by hand against nn.MultiheadAttention; its parameter table."""
    import torch
    from torch import nn

    from attn_cli.core.attention import count_parameters

    dev = config.device
    torch.manual_seed(config.seed)
    d, h, n = 8, 2, 5
    mha = nn.MultiheadAttention(d, h, batch_first=True).to(dev)
    x = torch.randn(1, n, d).to(dev)
    # by hand: one projection each, slice per head, softmax, concatenate, W_O
    dk = d // h  # each head works in a d/h dimensional subspace
    Wq, Wk, Wv = mha.in_proj_weight.chunk(3, 0)
    bq, bk, bv = mha.in_proj_bias.chunk(3, 0)
    Q, K, V = x[0] @ Wq.T + bq, x[0] @ Wk.T + bk, x[0] @ Wv.T + bv  # (n, d) each
    heads = []
    for i in range(h):
        sl = slice(i * dk, (i + 1) * dk)
        w = torch.softmax(Q[:, sl] @ K[:, sl].T / dk**0.5, -1)  # (n, n): this head's pattern
        heads.append(w @ V[:, sl])  # (n, dk)
    concat = torch.cat(heads, dim=-1)  # (n, d): concatenate, not average
    mine = concat @ mha.out_proj.weight.T + mha.out_proj.bias  # (n, d)
    theirs = mha(x, x, x)[0][0]
    matches = bool(torch.allclose(mine, theirs, atol=1e-5))
    max_diff = float((mine - theirs).abs().max())

    dm = config.d_model
    formula = 4 * dm * dm + 4 * dm
    w9_params = [
        {"heads": h, "params": count_parameters(nn.MultiheadAttention(dm, h)), "formula": formula, "head_size": dm // h}
        for h in config.heads
    ]
    return {"handwritten_matches": matches, "handwritten_max_diff": max_diff, "w9_params": w9_params}


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import MultiHeadAttention, count_parameters
    from attn_cli.core.memory import guard

    what = f"heads with --d-model {config.d_model} --d2l-d-model {config.d2l_d_model}"
    guard(estimate_bytes(config), what, config.device)
    dev = config.device
    with torch.no_grad():  # the blocks in the texts' order: their draws follow one another
        w9 = _w9_block(config)
        # D2L 10.3.2.3 shape check (dropout 0.5 in training mode, as the text: shape unaffected)
        torch.manual_seed(config.seed)
        attention = MultiHeadAttention(100, 5, 0.5).to(dev)  # num_hiddens, num_heads, dropout
        valid_lens = torch.tensor([3, 2], device=dev)
        X, Y = torch.ones((2, 4, 100), device=dev), torch.ones((2, 6, 100), device=dev)  # 4 queries, 6 kv pairs
        out, weights = attention(X, Y, Y, valid_lens)  # (2, 4, 100), (2, 5, 4, 6)
        beyond = torch.arange(6, device=dev)[None, :] >= valid_lens[:, None]  # (B, n_k): keys beyond valid_lens
        masked_weight = float(weights.masked_select(beyond[:, None, None, :].expand_as(weights)).abs().max())
        # D2L parameter table: concrete layers, materialised by a forward pass as in the text
        nh = config.d2l_d_model
        X = torch.ones((2, 10, nh), device=dev)
        d2l_params = []
        for heads in config.heads:
            layer = MultiHeadAttention(num_hiddens=nh, num_heads=heads, dropout=0).to(dev)
            layer(X, X, X, None)
            d2l_params.append({"heads": heads, "params": count_parameters(layer), "formula": 4 * nh * nh})
        # figure 10.3.2: the layout drawn for (d_model, layout_heads), and the concrete layer it stands for
        d, h = config.d_model, config.layout_heads
        p = d // h
        drawn = 3 * h * d * p + (h * p) * d  # h heads x (W_q, W_k, W_v: d -> p) + W_o
        layer_params = count_parameters(MultiHeadAttention(d, h))
    layout = {"d": d, "h": h, "p": p, "params_drawn": drawn, "params_layer": layer_params}
    return Result(
        asdict(config),
        **w9,
        mha_shape=list(out.shape),
        mha_weights_shape=list(weights.shape),
        mha_masked_weight=masked_weight,
        d2l_params=d2l_params,
        layout=layout,
    )
