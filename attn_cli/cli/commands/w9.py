"""The W9 commands: ``embeddings``, ``analogy``, ``formula``, ``order`` (chapters 1, 3.1, 3.2, 4.3;
instant, so ``--quick`` runs the default configuration), ``sqrt-dk``, ``masks`` and ``scaling`` (3.3, 4.2, 5.2)."""

from __future__ import annotations

from typing import Any

import click

from attn_cli.cli.commands.execute import Job, bar, config_of, job
from attn_cli.cli.options import FORMAT, NO_FIGURES, Common, JudgedCommand, common_options
from attn_cli.cli.types import IntRange, MultiValueOption, option
from attn_cli.published.settings import TEXT


@click.command(cls=JudgedCommand, short_help="One-hot vs embeddings; contextual 'bank' vectors (W9 1.1, 1.3).")
@option("--d-model", aliases=("--dim",), default=6, help="Model width d of the contextual vectors (W9 1.3).")
@option(
    "--vocab-size", default=TEXT["w9-onehot"]["vocab_size"], help="Vocabulary size V of the parameter count (W9 1.1)."
)
@option("--embed-dim", default=300, help="Embedding width d of the parameter count (W9 1.1).")
@common_options(FORMAT, NO_FIGURES)
def embeddings(common: Common, **fields: Any) -> Job:
    """One-hot vectors vs an embedding table; contextual vectors for 'bank' (W9 1.1, 1.3).

    One-hot dot products (0.0), lookup == one-hot @ W, the V x d parameter count; then one
    untrained self-attention layer gives 'bank' different outputs in "the river bank was
    deep" and "the money bank was closed" (distance 2.841), beside the text's numbers.
    Writes embeddings_bank_attention.png (the two sentences' attention weights) and .csv.

    \b
    Example:
        attn embeddings
        attn embeddings --vocab-size 30000 --embed-dim 512 --json
    """
    from attn_cli.experiments import embeddings as exp

    return job(exp, common, **fields)


@click.command(cls=JudgedCommand, short_help="PPMI + SVD word vectors; analogies A - B + C (W9 1.2).")
@click.argument("words", nargs=-1, metavar="[A B C]")
@option("--nearest", "nearest_word", type=str, default="bank", metavar="WORD", help="List the words nearest to WORD.")
@option("--top", default=8, help="How many nearest words to list for --nearest.")
@option("--rank", aliases=("--dim",), default=8, help="SVD rank: dimensions kept (the text's k).")
@common_options()
def analogy(words: tuple[str, ...], nearest_word: str, top: int, rank: int, common: Common) -> Job:
    """Word vectors from counting (PPMI + SVD); analogies A - B + C (W9 1.2).

    Cosine similarities (king~prince 1.0, king~queen 0.997, ...), king - man + woman ->
    queen, princess, kingdom, and the 8 words nearest to bank, beside the text's. With
    A B C, also the words nearest to A - B + C; with --nearest WORD, those nearest to WORD.
    Deterministic numpy, as the text: --seed and --device play no part. An unknown word is
    an error that lists the vocabulary.

    \b
    Example:
        attn analogy
        attn analogy prince boy girl --nearest money
    """
    if len(words) not in (0, 3):
        raise click.BadParameter(
            f"give three words A B C (for A - B + C), or none; got {len(words)}", param_hint="'[A B C]'"
        )
    from attn_cli.render.console import note

    if common.device != "cpu":
        note(f"analogy runs in numpy on the CPU, as the text; --device {common.device} is not used")
    from attn_cli.experiments import analogy as exp

    return job(exp, common, query=words or None, nearest_word=nearest_word, nearest_top=top, rank=rank)


@click.command(cls=JudgedCommand, short_help="Attention by hand, and its properties (W9 3.1, 3.2).")
@option("--n-q", default=3, help="Queries (W9 3.2).")
@option("--n-k", default=5, help="Keys and values (W9 3.2).")
@option("--d-k", default=4, help="Query/key width (W9 3.2).")
@option("--d-v", default=6, help="Value width (W9 3.2).")
@common_options()
def formula(common: Common, **fields: Any) -> Job:
    """Scaled dot-product attention by hand, and its properties (W9 3.1, 3.2).

    The worked example (scores [0.707, 0.0, 0.707], weights [0.401, 0.198, 0.401], output
    20.0) through the package's attention, then random Q, K, V: the shapes, agreement with
    F.scaled_dot_product_attention, rows summing to 1, non-negative weights and outputs
    that are convex combinations of the values, beside the text's.

    \b
    Example:
        attn formula
        attn formula --n-k 50 --d-k 64 --device auto
    """
    from attn_cli.experiments import formula as exp

    return job(exp, common, **fields)


@click.command(cls=JudgedCommand, short_help="Self-attention cannot tell the order (W9 4.3).")
@option("--d-model", aliases=("--dim",), default=6, help="Model width d of the word vectors.")
@common_options()
def order(d_model: int, common: Common) -> Job:
    """Self-attention cannot tell the order (W9 4.3).

    The output for 'bites' in "dog bites man" and in "man bites dog" (same random weights)
    is identical; after adding a distinct vector per position it is not. Beside the text's
    numbers ([-0.72 0.958 1.767 0.24 1.691 0.924], True, False).

    \b
    Example:
        attn order
        attn order --d-model 16 --seed 1
    """
    from attn_cli.experiments import order as exp

    return job(exp, common, d_model=d_model)


@click.command(cls=JudgedCommand)
@option(
    "--d-k",
    cls=MultiValueOption,
    aliases=("--dims",),
    default=(4, 16, 64, 256, 1024),
    metavar="D_K...",
    help="Query/key widths d_k, drawn in this order.",
)
@option("--trials", help="(query, key set) pairs per d_k  [default: 20000, the text's; 2000 with --quick]")
@common_options(FORMAT, NO_FIGURES)
def sqrt_dk(d_k: tuple[int, ...], trials: int | None, common: Common) -> Job:
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

    config = config_of(exp, common, d_k=d_k, trials=trials)
    big = config.trials * max(config.d_k) > 2_000_000
    return Job(exp, config, common, display=(lambda _: bar("sqrt-dk: d_k")) if big else None)


@click.command(cls=JudgedCommand)
@common_options(FORMAT, NO_FIGURES)
def masks(common: Common) -> Job:
    """Causal and padding masks: no peeking at the future (W9 4.2).

    Causal weights of 5 random tokens (rows sum to 1), the leak test (past outputs do not
    change when the future does, with the mask; they do without), and the padding mask's
    weight 0.0, beside the text's; the core's keep-mask equals the text's -inf recipe.
    Writes masks.png (causal and padding heatmaps) and masks.csv.

    \b
    Example:
        attn masks
    """
    from attn_cli.experiments import masks as exp

    return job(exp, common)


@click.command(cls=JudgedCommand)
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
    help="Timed passes per n for --measure (the fastest is kept), at most 1000  [default: 3; 2 with --quick]",
)
@common_options(FORMAT, NO_FIGURES)
def scaling(lengths: tuple[int, ...], common: Common, **fields: Any) -> Job:
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

    given = lengths or None
    measured = given or (exp.QUICK_MEASURE_LENGTHS if common.quick else exp.MEASURE_LENGTHS)[common.device]
    config = config_of(exp, common, lengths=given, measure_lengths=measured, **fields)
    if config.measure:
        exp.check_measurable(config)  # refuse up front (a GPU drops only what won't fit), before any allocation
    timing = f"timing attention on {config.device}"
    return Job(exp, config, common, display=(lambda _: bar(timing)) if config.measure else None)


COMMANDS = [embeddings, analogy, formula, order, sqrt_dk, masks, scaling]
