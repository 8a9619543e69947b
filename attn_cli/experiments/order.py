"""W9 4.3: self-attention cannot tell the order: "dog bites man" and "man bites dog" give "bites"
the same output; a distinct vector per position tells them apart.  Draws on the CPU after
``manual_seed(seed)``, in the text's order: one vector per word, Wq, Wk, Wv, the position vectors."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

from attn_cli.experiments import MeasuredResult, ProgressCallback, QuickConfig

ARTIFACTS = ("w9-order",)
FIGURES = ()
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant

ATOL = 1e-6  # "identical" means torch.allclose(..., atol=1e-6), as the text


@dataclass(frozen=True)
class Config(QuickConfig):
    d_model: int = 6  # d: width of the word vectors
    weight_scale: float = 0.5  # Wq, Wk, Wv = randn(d, d) * weight_scale
    words: tuple[str, str, str] = ("dog", "bites", "man")  # sentence a; sentence b is it reversed


@dataclass
class Result(MeasuredResult):
    config: dict
    sentence_a: list[str]  # e.g. dog bites man
    sentence_b: list[str]  # the same words reversed: man bites dog
    word: str  # the middle word, at the same position in both
    output_a: list[float]  # self-attention output for the middle word in sentence a
    output_b: list[float]  # ... in sentence b
    identical: bool  # allclose(output_a, output_b, atol=1e-6)
    max_diff: float  # | output_a - output_b |, max
    output_a_positions: list[float]  # the same with a position vector added to each token
    output_b_positions: list[float]
    identical_with_positions: bool
    max_diff_positions: float

    MEASURED: ClassVar[dict[str, str]] = {  # check ID -> its value's path in this Result
        "w9-order.dog_bites_man": "output_a",
        "w9-order.man_bites_dog": "output_b",
        "w9-order.identical": "identical",
        "w9-order.identical_with_positions": "identical_with_positions",
    }


def estimate_bytes(config: Config) -> int:
    """Float32 Wq, Wk, Wv and a few (3, d) rows; on another device the CPU copies count too."""
    d = config.d_model
    return 4 * (3 * d * d + 16 * 3 * d) * (2 if config.device != "cpu" else 1)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import scaled_dot_product_attention
    from attn_cli.core.memory import guard

    guard(estimate_bytes(config), f"order with --d-model {config.d_model}", config.device)
    if len(config.words) != 3 or len(set(config.words)) != 3:
        raise ValueError(f"words must be three distinct words, got {config.words}")
    dev = torch.device(config.device)
    d = config.d_model
    torch.manual_seed(config.seed)
    emb = {w: torch.randn(d).to(dev) for w in config.words}
    Wq, Wk, Wv = ((torch.randn(d, d) * config.weight_scale).to(dev) for _ in range(3))
    pos = torch.randn(3, d).to(dev)  # any distinct vector per position will do

    def self_attention(x: torch.Tensor) -> torch.Tensor:  # x: (n, d) -> (n, d)
        return scaled_dot_product_attention(x @ Wq, x @ Wk, x @ Wv)[0]

    sentence_a = list(config.words)
    sentence_b = sentence_a[::-1]
    a, b = (torch.stack([emb[w] for w in s]) for s in (sentence_a, sentence_b))  # (3, d) each
    oa, ob = self_attention(a)[1], self_attention(b)[1]
    oa2, ob2 = self_attention(a + pos)[1], self_attention(b + pos)[1]
    return Result(
        config=asdict(config),
        sentence_a=sentence_a,
        sentence_b=sentence_b,
        word=sentence_a[1],
        output_a=oa.cpu().tolist(),
        output_b=ob.cpu().tolist(),
        identical=bool(torch.allclose(oa, ob, atol=ATOL)),
        max_diff=(oa - ob).abs().max().item(),
        output_a_positions=oa2.cpu().tolist(),
        output_b_positions=ob2.cpu().tolist(),
        identical_with_positions=bool(torch.allclose(oa2, ob2, atol=ATOL)),
        max_diff_positions=(oa2 - ob2).abs().max().item(),
    )
