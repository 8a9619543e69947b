"""W9 4.2: causal and padding masks (design notes: ``docs/design.md``, this module's section)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

from attn_cli.experiments import MeasuredResult, ProgressCallback, QuickConfig

ARTIFACTS = ("w9-masks",)
FIGURES = ("masks.png",)
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant


@dataclass(frozen=True)
class Config(QuickConfig):
    n: int = 5  # tokens (positions)
    d_k: int = 4  # d: token width = d_k (no projections)
    changed_from: int = 3  # the "future" tokens changed in the leak test: positions changed_from..n-1
    padding_from: int = 3  # padding mask: positions padding_from..n-1 are padding


@dataclass
class Result(MeasuredResult):
    config: dict
    positions: list[int]
    causal_weights: list[list[float]]  # full float32 precision, row = query position
    causal_weights_rounded: list[list[float]]  # rounded to 2 decimals as the text prints them
    row_sums: list[float]  # should be 1 (float32 noise in the last bits)
    core_equals_text: bool  # core masked_softmax == text's masked_fill(-inf) recipe, bit for bit
    core_max_abs_diff: float  # max |core - text| over causal and padding weights
    past_unchanged_with_mask: bool  # allclose(outputs[:3]) when tokens 3, 4 change, causal mask
    past_changes_without_mask: bool  # not allclose(...) without a mask
    past_max_abs_change_with_mask: float
    past_max_abs_change_without_mask: float
    padding_weights: list[list[float]]  # weights with the padding mask (no causal mask)
    padding_weight: float  # total weight on the padding positions, package core (0 by masked_fill)
    padding_weight_text: float  # the same through the text's recipe, softmax(masked_fill(pad, -inf))

    MEASURED: ClassVar[dict[str, str]] = {  # check ID -> its value's path in this Result
        "w9-masks.causal_weights": "causal_weights",
        "w9-masks.row_sums": "row_sums",
        "w9-masks.past_unchanged": "past_unchanged_with_mask",
        "w9-masks.changes_without_mask": "past_changes_without_mask",
        "w9-masks.padding_weight": "padding_weight",
        "w9-masks.padding_weight.text_recipe": "padding_weight_text",
    }


def estimate_bytes(config: Config) -> int:
    """Float32 tensors held at once: the (n, d) tokens and about eight (n, n) matrices."""
    n, d = config.n, config.d_k
    return 4 * (4 * n * d + 8 * n * n)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import causal_mask, masked_softmax, scaled_dot_product_attention
    from attn_cli.core.memory import guard

    guard(estimate_bytes(config), f"masks with n={config.n}, d_k={config.d_k}", config.device)
    n, d, dev = config.n, config.d_k, config.device
    gen = torch.Generator().manual_seed(config.seed)  # same stream as torch.manual_seed(seed)
    x = torch.randn(n, d, generator=gen).to(dev)  # (n, d)
    x2 = x.clone()
    x2[config.changed_from :] = torch.randn(n - config.changed_from, d, generator=gen).to(dev)  # change the future

    scores = x @ x.T / d**0.5  # (n, n)
    keep_causal = causal_mask(n, device=dev)  # (n, n) True = may attend (key <= query)
    weights = masked_softmax(scores, keep_causal)  # (n, n)

    # the text's recipe: True = blocked, -inf before the softmax
    future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=dev), diagonal=1)
    text_weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)

    is_pad = torch.arange(n, device=dev) >= config.padding_from  # (n,) True = padding
    pad_weights = masked_softmax(scores, ~is_pad[None, :])  # (n, n)
    text_pad = torch.softmax(scores.masked_fill(is_pad[None, :], float("-inf")), -1)

    def attend(tokens: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:  # softmax(x x^T / sqrt(d)) x
        return scaled_dot_product_attention(tokens, tokens, tokens, mask=keep)[0]  # (n, d): no projections

    past = slice(0, config.changed_from)
    with_mask = (attend(x, keep_causal)[past], attend(x2, keep_causal)[past])
    without = (attend(x, None)[past], attend(x2, None)[past])

    return Result(
        config=asdict(config),
        positions=list(range(n)),
        causal_weights=weights.cpu().tolist(),
        # rounded as the text does (numpy float32 .round(2)), then the float repr tidied
        causal_weights_rounded=[[round(float(v), 2) for v in row] for row in weights.cpu().numpy().round(2)],
        row_sums=weights.sum(-1).cpu().tolist(),
        core_equals_text=bool(torch.equal(weights, text_weights) and torch.equal(pad_weights, text_pad)),
        core_max_abs_diff=max((weights - text_weights).abs().max().item(), (pad_weights - text_pad).abs().max().item()),
        past_unchanged_with_mask=bool(torch.allclose(*with_mask)),
        past_changes_without_mask=not torch.allclose(*without),
        past_max_abs_change_with_mask=(with_mask[0] - with_mask[1]).abs().max().item(),
        past_max_abs_change_without_mask=(without[0] - without[1]).abs().max().item(),
        padding_weights=pad_weights.cpu().tolist(),
        padding_weight=pad_weights[:, config.padding_from :].sum().item(),
        padding_weight_text=text_pad[:, config.padding_from :].sum().item(),  # the text's w[:, 3:].sum()
    )
