"""W9 chapters 3.3, 4.2 and 5.2: ``sqrt-dk``, ``masks`` and ``scaling``."""

from __future__ import annotations

import click

from attn_cli.cli.commands import option
from attn_cli.cli.commands.execute import Job, config_of, job
from attn_cli.cli.options import Common, JudgedCommand, common_options, format_option
from attn_cli.cli.types import IntRange, MultiValueOption


@click.command(cls=JudgedCommand, name="sqrt-dk")
@option(
    "--d-k",
    cls=MultiValueOption,
    aliases=("--dims",),
    default=(4, 16, 64, 256, 1024),
    metavar="D_K...",
    help="Query/key widths d_k, drawn in this order.",
)
@option(
    "--trials", default=None, help="(query, key set) pairs per d_k  [default: 20000, the text's; 2000 with --quick]"
)
@common_options
@format_option
def sqrt_dk(d_k: tuple[int, ...], trials: int | None, common: Common) -> Job | None:
    """Why scores are divided by sqrt(d_k): saturation and vanishing gradients (W9 3.3).

    For each d_k: std of q.k unscaled and scaled, the mean largest softmax weight over 10
    keys, and the softmax gradient norm, beside the text's numbers (identical at the
    defaults); writes sqrt_dk.png (both curves against d_k, log axis) and sqrt_dk.csv.

    \b
    Example:
        attn sqrt-dk
        attn sqrt-dk --d-k 16 64 --trials 5000
    """
    from attn_cli.experiments import sqrt_dk as exp
    from attn_cli.render import sqrt_dk as render

    config = config_of(exp, common, d_k=tuple(d_k), trials=trials)
    big = config.trials * max(config.d_k) > 2_000_000
    return Job(exp, render, config, common, progress="sqrt-dk: d_k" if big else None)


@click.command(cls=JudgedCommand, name="masks")
@common_options
@format_option
def masks(common: Common) -> Job | None:
    """Causal and padding masks: no peeking at the future (W9 4.2).

    Causal weights of 5 random tokens (rows sum to 1), the leak test (past outputs do not
    change when the future does, with the mask; they do without), and the padding mask's
    weight 0.0, beside the text's; the core's keep-mask equals the text's -inf recipe.
    Writes masks.png (causal and padding heatmaps) and masks.csv.

    \b
    Example:
        attn masks
    """
    return job("masks", common)


@click.command(cls=JudgedCommand, name="scaling")
@option(
    "--lengths",
    cls=MultiValueOption,
    default=None,
    metavar="N...",
    help="Sequence lengths n  [default: 512 2048 8192 32768 131072 for the table; with --measure "
    "and no --lengths, sizes that run in seconds are measured]",
)
@option("--d-model", default=512, help="Width d in n^2 d (and the head width of --measure).")
@click.option(
    "--measure",
    is_flag=True,
    help="Also time real attention forward passes on --device, fit the exponent, draw a log-log PNG.",
)
@option(
    "--repeats",
    type=IntRange(1, 1000),
    default=None,
    help="Timed passes per n for --measure (the fastest is kept), at most 1000  [default: 3; 2 with --quick]",
)
@common_options
@format_option
def scaling(lengths: tuple[int, ...], d_model: int, measure: bool, repeats: int | None, common: Common) -> Job | None:
    """The price of attention: quadratic cost in the sequence length (W9 5.2).

    The text's table (score entries, float32 memory, n^2 d operations) beside its numbers.
    With --measure, times real forward passes for growing n, prints time and peak memory
    beside the formula, fits the exponent of time against n (about 2) and writes
    scaling_measured.png and .csv. A size whose pass would not fit comfortably in free
    memory is refused before anything is allocated.

    \b
    Example:
        attn scaling
        attn scaling --measure
        attn scaling --measure --device cuda --lengths 4096 8192 16384
    """
    from attn_cli.experiments import scaling as exp
    from attn_cli.render import scaling as render

    given = tuple(lengths) or None
    measured = given or exp.Config.default_measure_lengths(common.device, common.quick)
    config = config_of(
        exp, common, d_model=d_model, measure=measure, lengths=given, measure_lengths=measured, repeats=repeats
    )
    if measure:
        exp.check_measurable(config)  # refuse up front (a GPU drops only what won't fit), before any allocation
    return Job(exp, render, config, common, progress=f"timing attention on {config.device}" if measure else None)


COMMANDS = [sqrt_dk, masks, scaling]
