"""D2L 10.3 (copy-both, heatmap, crossattn-map, heads, and exercise: the 10.3.5 exercises) and W9 4.1 (self-cross)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import click

from attn_cli.cli.commands.catalogue import usage_errors
from attn_cli.cli.commands.execute import Job, config_of, job
from attn_cli.cli.options import FORMAT, NO_FIGURES, Common, JudgedCommand, common_options
from attn_cli.cli.types import FiniteFloatRange, IntRange, MultiValueOption, option

if TYPE_CHECKING:
    from attn_cli.experiments import ProgressEvent

_WEIGHTS: dict[str, Any] = dict(cls=MultiValueOption, type=FiniteFloatRange(0.0, 1.0), metavar="A...")  # --weights ...


@click.command(cls=JudgedCommand)
@option("--samples", default=10_000, help="Examples N (the text: 10000).")
@option(
    "--d-v", aliases=("--dim",), default=16, help="Value width d_v: of each value vector V1, V2 (the text's d: 16)."
)
@option(
    "--weights",
    **_WEIGHTS,
    default=(0.5, 0.7, 0.9, 1.0),
    help="First weight a of the single head, (a, 1 - a); each in [0, 1].",
)
@option(
    "--two-head-weights",
    **_WEIGHTS,
    default=(1.0, 0.88),
    help="Two heads with weights (a, 1 - a) and (1 - a, a); each in [0, 1].",
)
@common_options(FORMAT, NO_FIGURES)
def copy_both(common: Common, **fields: Any) -> Job:
    """One head loses half the variance, two heads recover it (D2L 10.3.1, figure 10.3.1).

    Prints the relative error of the best linear readout of [v1; v2] from one attention
    mixture a v1 + (1-a) v2 (theory: sqrt(1/2) = 0.707 for every a) and from two mirrored
    mixtures (solver precision), and draws the error against a (copy_both.png + .csv).

    \b
    Example:
        attn copy-both
        attn copy-both --weights 0.5 0.6 --samples 20000 --d-v 8
    """
    from attn_cli.experiments import copy_both as exp

    return job(exp, common, **fields)


_d_model_option = option(
    "--d-model",
    aliases=("--dim",),
    type=IntRange(1, 1 << 20),
    default=32,
    help="Model width d_model: of the random letter embeddings (the text: 32).",
)
_heads_option = option(
    "--heads",
    metavar="N",
    help="Also pass the embeddings through a fresh N-head layer with random "
    "projections and draw one panel per head (exercise 11); N divides --d-model.",
)


@click.command(cls=JudgedCommand)
@click.argument("query_word")  # checked once, with the Config (attn_cli.experiments.crossattn.validate)
@click.argument("key_word")
@_d_model_option
@_heads_option
@common_options(FORMAT, NO_FIGURES)
def heatmap(query_word: str, key_word: str, d_model: int, heads: int | None, common: Common) -> Job:
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
    from attn_cli.experiments import crossattn as exp

    return job(exp, common, query_word=query_word, key_word=key_word, d_model=d_model, heads=heads or 0)


@click.command(cls=JudgedCommand)
@_d_model_option
@_heads_option
@common_options(FORMAT, NO_FIGURES)
def crossattn_map(d_model: int, heads: int | None, common: Common) -> Job:
    """The text's letter alignment: 'attention' queries 'translation' (D2L 10.3.3.3).

    The same as `attn heatmap attention translation`: i and o attend sharply, a, t and n
    split across their two copies, e is diffuse.

    \b
    Example:
        attn crossattn-map
        attn crossattn-map --heads 4      # exercise 11: a fresh 4-head layer
    """
    from attn_cli.experiments import crossattn as exp

    return job(exp, common, query_word="attention", key_word="translation", d_model=d_model, heads=heads or 0)


@click.command(cls=JudgedCommand)
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
@common_options(FORMAT, NO_FIGURES)
def heads(common: Common, **fields: Any) -> Job:
    """Multi-head attention: hand-written equals PyTorch; parameters do not grow with h.

    W9 5.1 (hand-written heads == nn.MultiheadAttention; 16640 parameters at d_model 64 for
    1, 2, 4, 8 heads), D2L 10.3.2.3 (output shape (2, 4, 100) with valid_lens; 262144
    parameters at 256 hidden units) and figure 10.3.2, the layout, as heads_layout.png.

    \b
    Example:
        attn heads
        attn heads --d-model 512 --heads 1 8 64 --layout-heads 8
    """
    from attn_cli.experiments import heads as exp

    return job(exp, common, **fields)


@click.command(cls=JudgedCommand)
@common_options()
def self_cross(common: Common) -> Job:
    """Self- and cross-attention shapes (W9 4.1, D2L 10.3.3).

    Self-attention returns the input's length; cross-attention returns the queries'
    length and chooses among the other sequence's keys.

    \b
    Example:
        attn self-cross
    """
    from attn_cli.experiments import self_cross as exp

    return job(exp, common)


def _selection(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[int, ...]:
    from attn_cli.errors import AttnError
    from attn_cli.experiments.exercises import parse_selection

    try:
        return parse_selection(value)
    except AttnError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@click.command(cls=JudgedCommand)
@click.argument("numbers", nargs=-1, metavar="N... | all", callback=_selection)
@click.option("--list", "list_", is_flag=True, help="List the twelve exercises and what each run shows.")
@common_options(FORMAT, NO_FIGURES)
def exercise(numbers: tuple[int, ...], list_: bool, common: Common) -> Job | None:
    """Run the measurable part of D2L 10.3.5 exercises 1-12 (or `all`).

    \b
     1 MLP vs linear readout     7 cross-attention FLOPs, K/V cache
     2 noisy, nearly equal heads 8 MHA / GQA / MQA counts and cache
     3 error = 1 - rank(A)/k     9 head loop = folded; tiled valid_lens
     4 key noise, c = 10, 100   10 permuting the source
     5 one-shot vs greedy prune 11 random projections, per-head maps
     6 forward time vs heads    12 trained copy-both heads

    Each exercise starts from --seed; tables show the measurement beside the value the
    exercise's analysis predicts. Writes exercise_2/6/11/12.png (and .csv) into --out.
    --quick shrinks the data, the training and the timing (n = 128) to seconds.

    \b
    Example:
        attn exercise 3
        attn exercise 2 5 12 --quick
        attn exercise all --json --out /tmp/ex
        attn exercise --list
    """
    from attn_cli.experiment_registry import check_seed_range, seeds_used
    from attn_cli.experiments import exercises as exp
    from attn_cli.render import exercises as render
    from attn_cli.render.console import emit, note

    if list_:
        emit(None, render.listing(exp.TITLES), False)
        return None
    if not numbers:
        raise click.UsageError("give exercise numbers (1-12), 'all', or --list")
    config = config_of(exp, common, exercises=numbers)
    with usage_errors():  # every seed the exercises draw from (seed + k), before any work
        check_seed_range(seeds_used(exp, config))

    def progress(event: ProgressEvent) -> None:  # label "N. title"
        if not common.json:
            note(f"exercise {event.label} ...")

    # torch's threads as they are: the command has always run the exercises so (attn all: one)
    return Job(exp, config, common, display=lambda _: contextlib.nullcontext(progress), threads=None)


COMMANDS = [copy_both, heatmap, crossattn_map, heads, self_cross, exercise]
