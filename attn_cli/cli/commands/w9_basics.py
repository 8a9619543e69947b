"""W9 chapters 1, 3.1, 3.2 and 4.3: ``embeddings``, ``analogy``, ``formula`` and ``order``.

All four are instant, so ``--quick`` runs the same configuration as the default.
"""

from __future__ import annotations

import click

from attn_cli.cli.commands import option
from attn_cli.cli.commands.execute import Job, job
from attn_cli.cli.options import Common, JudgedCommand, common_options, format_option
from attn_cli.published.settings import TEXT


@click.command(
    cls=JudgedCommand, name="embeddings", short_help="One-hot vs embeddings; contextual 'bank' vectors (W9 1.1, 1.3)."
)
@option("--d-model", aliases=("--dim",), default=6, help="Model width d of the contextual vectors (W9 1.3).")
@option(
    "--vocab-size", default=TEXT["w9-onehot"]["vocab_size"], help="Vocabulary size V of the parameter count (W9 1.1)."
)
@option("--embed-dim", default=300, help="Embedding width d of the parameter count (W9 1.1).")
@common_options
@format_option
def embeddings(d_model: int, vocab_size: int, embed_dim: int, common: Common) -> Job | None:
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
    return job("embeddings", common, d_model=d_model, vocab_size=vocab_size, embed_dim=embed_dim)


@click.command(cls=JudgedCommand, name="analogy", short_help="PPMI + SVD word vectors; analogies A - B + C (W9 1.2).")
@click.argument("words", nargs=-1, metavar="[A B C]")
@click.option(
    "--nearest",
    "nearest_word",
    default="bank",
    show_default=True,
    metavar="WORD",
    help="List the words nearest to WORD.",
)
@option("--top", default=8, help="How many nearest words to list for --nearest.")
@option("--rank", aliases=("--dim",), default=8, help="SVD rank: dimensions kept (the text's k).")
@common_options
def analogy(words: tuple[str, ...], nearest_word: str, top: int, rank: int, common: Common) -> Job | None:
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
    query = {"query": tuple(words)} if words else {}
    return job("analogy", common, **query, nearest_word=nearest_word, nearest_top=top, rank=rank)


@click.command(cls=JudgedCommand, name="formula", short_help="Attention by hand, and its properties (W9 3.1, 3.2).")
@option("--n-q", default=3, help="Queries (W9 3.2).")
@option("--n-k", default=5, help="Keys and values (W9 3.2).")
@option("--d-k", default=4, help="Query/key width (W9 3.2).")
@option("--d-v", default=6, help="Value width (W9 3.2).")
@common_options
def formula(n_q: int, n_k: int, d_k: int, d_v: int, common: Common) -> Job | None:
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
    return job("formula", common, n_q=n_q, n_k=n_k, d_k=d_k, d_v=d_v)


@click.command(cls=JudgedCommand, name="order", short_help="Self-attention cannot tell the order (W9 4.3).")
@option("--d-model", aliases=("--dim",), default=6, help="Model width d of the word vectors.")
@common_options
def order(d_model: int, common: Common) -> Job | None:
    """Self-attention cannot tell the order (W9 4.3).

    The output for 'bites' in "dog bites man" and in "man bites dog" (same random weights)
    is identical; after adding a distinct vector per position it is not. Beside the text's
    numbers ([-0.72 0.958 1.767 0.24 1.691 0.924], True, False).

    \b
    Example:
        attn order
        attn order --d-model 16 --seed 1
    """
    return job("order", common, d_model=d_model)


COMMANDS = [embeddings, analogy, formula, order]
