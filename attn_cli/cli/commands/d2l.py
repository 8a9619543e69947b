"""D2L 10.3 commands (copy-both, heatmap, crossattn-map, heads) and W9 4.1 (self-cross)."""

from __future__ import annotations

import click

from attn_cli.cli.commands import option
from attn_cli.cli.commands.execute import Job, job
from attn_cli.cli.options import Common, JudgedCommand, common_options, format_option
from attn_cli.cli.types import FiniteFloatRange, IntRange, MultiValueOption


@click.command(cls=JudgedCommand, name="copy-both")
@option("--samples", default=10_000, help="Examples N (the text: 10000).")
@option(
    "--d-v", aliases=("--dim",), default=16, help="Value width d_v: of each value vector V1, V2 (the text's d: 16)."
)
@option(
    "--weights",
    cls=MultiValueOption,
    type=FiniteFloatRange(0.0, 1.0),
    default=(0.5, 0.7, 0.9, 1.0),
    metavar="A...",
    help="First weight a of the single head, (a, 1 - a); each in [0, 1].",
)
@option(
    "--two-head-weights",
    cls=MultiValueOption,
    type=FiniteFloatRange(0.0, 1.0),
    default=(1.0, 0.88),
    metavar="A...",
    help="Two heads with weights (a, 1 - a) and (1 - a, a); each in [0, 1].",
)
@common_options
@format_option
def copy_both(
    samples: int, d_v: int, weights: tuple[float, ...], two_head_weights: tuple[float, ...], common: Common
) -> Job:
    """One head loses half the variance, two heads recover it (D2L 10.3.1, figure 10.3.1).

    Prints the relative error of the best linear readout of [v1; v2] from one attention
    mixture a v1 + (1-a) v2 (theory: sqrt(1/2) = 0.707 for every a) and from two mirrored
    mixtures (solver precision), and draws the error against a (copy_both.png + .csv).

    \b
    Example:
        attn copy-both
        attn copy-both --weights 0.5 0.6 --samples 20000 --d-v 8
    """
    return job(
        "copy_both", common, samples=samples, d_v=d_v, weights=tuple(weights), two_head_weights=tuple(two_head_weights)
    )


_d_model_option = option(
    "--d-model",
    aliases=("--dim",),
    type=IntRange(1, 1 << 20),
    default=32,
    help="Model width d_model: of the random letter embeddings (the text: 32).",
)
_heads_option = option(
    "--heads",
    default=None,
    metavar="N",
    help="Also pass the embeddings through a fresh N-head layer with random "
    "projections and draw one panel per head (exercise 11); N divides --d-model.",
)


@click.command(cls=JudgedCommand, name="heatmap")
@click.argument("query_word")  # checked once, with the Config (attn_cli.experiments.crossattn.validate)
@click.argument("key_word")
@_d_model_option
@_heads_option
@common_options
@format_option
def heatmap(query_word: str, key_word: str, d_model: int, heads: int | None, common: Common) -> Job | None:
    """Cross-attention map of the letters of QUERY_WORD against those of KEY_WORD.

    The recipe of D2L 10.3.3.3 for any two words: one random embedding per character of the
    sorted alphabet of both words (seed, one randn call), plain scaled dot-product
    attention, no projections.  Prints the weights and names each query row's regime
    (sharp / split / diffuse, found from the weights); writes heatmap_<query>_<key>.png and
    the raw weights as .csv.  Words of up to 64 characters, any Unicode.

    \b
    Example:
        attn heatmap attention translation
        attn heatmap banana bandana --d-model 64
        attn heatmap attention translation --heads 4
    """
    return job("crossattn", common, query_word=query_word, key_word=key_word, d_model=d_model, heads=heads or 0)


@click.command(cls=JudgedCommand, name="crossattn-map")
@_d_model_option
@_heads_option
@common_options
@format_option
def crossattn_map(d_model: int, heads: int | None, common: Common) -> Job | None:
    """The text's letter alignment: 'attention' queries 'translation' (D2L 10.3.3.3).

    The same as `attn heatmap attention translation`: i and o attend sharply, a, t and n
    split across their two copies, e is diffuse.

    \b
    Example:
        attn crossattn-map
        attn crossattn-map --heads 4      # exercise 11: a fresh 4-head layer
    """
    return job("crossattn", common, query_word="attention", key_word="translation", d_model=d_model, heads=heads or 0)


@click.command(cls=JudgedCommand, name="heads")
@option(
    "--d-model",
    type=IntRange(1, 8192),
    default=64,
    help="Model width d_model of W9's nn.MultiheadAttention parameter table (and of the layout figure).",
)
@option(
    "--d2l-d-model",
    aliases=("--num-hiddens",),
    type=IntRange(1, 8192),
    default=256,
    help="Model width of D2L's MultiHeadAttention parameter table (D2L's num_hiddens; bias off).",
)
@option(
    "--heads",
    cls=MultiValueOption,
    aliases=("--num-heads",),
    default=(1, 2, 4, 8),
    metavar="H...",
    help="Head counts h of both parameter tables.",
)
@option("--layout-heads", default=4, help="Heads drawn in the layout figure heads_layout.png (divides --d-model).")
@common_options
@format_option
def heads(d_model: int, d2l_d_model: int, heads: tuple[int, ...], layout_heads: int, common: Common) -> Job:
    """Multi-head attention: hand-written equals PyTorch; parameters do not grow with h.

    W9 5.1 (hand-written heads == nn.MultiheadAttention; 16640 parameters at d_model 64 for
    1, 2, 4, 8 heads), D2L 10.3.2.3 (output shape (2, 4, 100) with valid_lens; 262144
    parameters at 256 hidden units) and figure 10.3.2, the layout, as heads_layout.png.

    \b
    Example:
        attn heads
        attn heads --d-model 512 --heads 1 8 64 --layout-heads 8
    """
    return job("heads", common, d_model=d_model, d2l_d_model=d2l_d_model, heads=tuple(heads), layout_heads=layout_heads)


@click.command(cls=JudgedCommand, name="self-cross")
@common_options
def self_cross(common: Common) -> Job:
    """Self- and cross-attention shapes (W9 4.1, D2L 10.3.3).

    Self-attention returns the input's length; cross-attention returns the queries'
    length and chooses among the other sequence's keys.

    \b
    Example:
        attn self-cross
    """
    return job("self_cross", common)


COMMANDS = [copy_both, heatmap, crossattn_map, heads, self_cross]
