"""Tables and figure for ``attn embeddings`` (W9 1.1 one-hot, 1.3 contextual 'bank')."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.published.catalogue import BY_ID

if TYPE_CHECKING:
    from attn_cli.experiments.embeddings import Result
    from attn_cli.render.console import CheckRow
    from attn_cli.render.table import Table

PNG, CSV = BY_ID["w9-contextual"].files


def vec(values: Iterable[float], decimals: int = 2) -> str:
    """A vector as the text prints it (numpy-style, rounded)."""
    return "[" + " ".join(f"{v:.{decimals}f}" for v in values) + "]"


def tables(result: Result, outcomes: Mapping) -> list:
    """``outcomes``: check ID -> Outcome, the verdicts the marks show."""
    return [_onehot_table(result, outcomes), _contextual_table(result, outcomes)]


def _row(o: Mapping, quantity: str, regenerated: str, check_id: str, show: Callable[[Any], str] = repr) -> CheckRow:
    """A row with its check's published value (``show`` formats it) and verdict."""
    from attn_cli.render.console import verdict

    return (quantity, regenerated, show(o[check_id].published), verdict(o[check_id]))


def _onehot_table(result: Result, o: Mapping) -> Table:
    """W9 1.1: one-hot dot products, the lookup as a product, the table's size."""
    from attn_cli.render.console import check_table, not_text_caption

    cfg = result.config
    return check_table(
        "W9 1.1  one-hot vectors know nothing; an embedding is a lookup table",
        [
            _row(o, "one-hot king . queen", repr(result.onehot_king_queen), "w9-onehot.king.queen"),
            _row(o, "one-hot king . apple", repr(result.onehot_king_apple), "w9-onehot.king.apple"),
            _row(
                o,
                "embedding lookup equals one-hot @ weight matrix",
                str(result.lookup_equals_matmul),
                "w9-onehot.lookup_equals_matmul",
            ),
            _row(
                o,
                f"parameters of a {cfg['vocab_size']:,} x {cfg['embed_dim']} table",
                f"{result.parameters:,}",
                "w9-onehot.parameters",
                "{:,}".format,
            ),
            _row(o, "dimensions of a one-hot vector", f"{cfg['vocab_size']:,}", "w9-onehot.onehot_dims", "{:,}".format),
        ],
        caption="every pair of one-hot vectors is orthogonal: no notion of similarity"
        + not_text_caption([o[k] for k in o if k.startswith("w9-onehot.")]),
    )


def _contextual_table(result: Result, o: Mapping) -> Table:
    """W9 1.3: the static vector of the word, its two contextual outputs and their distance."""
    from attn_cli.render.console import check_table, not_text_caption

    cfg = result.config
    names = [" ".join(t) for t in result.tokens]
    return check_table(
        f"W9 1.3  contextual vectors for '{result.WORD}' (one untrained self-attention layer, d = {cfg['d_model']}, "
        f"seed {cfg['seed']})",
        [
            _row(o, f"static embedding of '{result.WORD}'", vec(result.static_bank), "w9-contextual.static_bank", vec),
            _row(
                o,
                f"output for '{result.WORD}' in '{names[0]}'",
                vec(result.bank_outputs[0]),
                "w9-contextual.river_bank",
                vec,
            ),
            _row(
                o,
                f"output for '{result.WORD}' in '{names[1]}'",
                vec(result.bank_outputs[1]),
                "w9-contextual.money_bank",
                vec,
            ),
            _row(
                o,
                "distance between the two contextual vectors",
                f"{result.distance:.3f}",
                "w9-contextual.distance",
                "{:.3f}".format,
            ),
        ],
        caption="same word, same input vector: the output depends on the neighbours (0 apart for a static "
        "embedding)" + not_text_caption([o[k] for k in o if k.startswith("w9-contextual.")]),
    )


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    from matplotlib.patches import Rectangle

    from attn_cli.render.figures import heatmap, new_figure
    from attn_cli.render.files import save_figure, write_csv

    fig, axes = new_figure(1, len(result.tokens), figsize=(5.2 * len(result.tokens), 4.6), layout="constrained")
    for ax, tokens, weights in zip(axes, result.tokens, result.weights):
        im = heatmap(ax, weights, tokens, tokens, vmin=0.0, vmax=1.0, annotate=True)  # one scale, both panels
        ax.set_title(f'"{" ".join(tokens)}"')
        ax.set_xlabel("key (looked at)")
        ax.set_ylabel("query (looking)")
        row = tokens.index(result.WORD)  # outlined
        ax.add_patch(Rectangle((-0.5, row - 0.5), len(tokens), 1, fill=False, edgecolor="crimson", linewidth=2))
    fig.colorbar(im, ax=list(axes), label="attention weight", shrink=0.85)
    fig.suptitle(
        f"W9 1.3: attention weights of one untrained layer; the '{result.WORD}' row (outlined) "
        f"differs with the neighbours (seed {result.config['seed']})"
    )
    images = save_figure(fig, Path(out) / PNG, formats, keep=keep)
    rows = [
        (" ".join(tokens), q, k, weights[i][j])
        for tokens, weights in zip(result.tokens, result.weights)
        for i, q in enumerate(tokens)
        for j, k in enumerate(tokens)
    ]
    csv = write_csv(Path(out) / CSV, rows, header=("sentence", "query", "key", "weight"))
    return [*images, csv]
