"""Tables and figure for ``attn embeddings`` (W9 1.1 one-hot, 1.3 contextual 'bank')."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.published.catalogue import BY_ID
from attn_cli.render.console import check_table, not_text_caption, verdict
from attn_cli.render.files import heatmap, new_figure, save_figure, write_csv

if TYPE_CHECKING:
    from attn_cli.experiments.embeddings import Result
    from attn_cli.render.table import Table

PNG, CSV = BY_ID["w9-contextual"].files


def vec(values: Iterable[float]) -> str:
    """A vector as the text prints it (numpy-style, rounded)."""
    return "[" + " ".join(f"{v:.2f}" for v in values) + "]"


def tables(result: Result, outcomes: Mapping) -> list:
    o, r, cfg, word = outcomes, result, result.config, result.WORD
    names = [" ".join(t) for t in r.tokens]
    comma, three = "{:,}".format, "{:.3f}".format
    onehot = [  # (quantity, regenerated, check ID after the artifact's, how the published value is shown)
        ("one-hot king . queen", repr(r.onehot_king_queen), "king.queen", repr),
        ("one-hot king . apple", repr(r.onehot_king_apple), "king.apple", repr),
        ("embedding lookup equals one-hot @ weight matrix", str(r.lookup_equals_matmul), "lookup_equals_matmul", repr),
        (f"parameters of a {cfg['vocab_size']:,} x {cfg['embed_dim']} table", comma(r.parameters), "parameters", comma),
        ("dimensions of a one-hot vector", comma(cfg["vocab_size"]), "onehot_dims", comma),
    ]
    contextual = [
        (f"static embedding of '{word}'", vec(r.static_bank), "static_bank", vec),
        (f"output for '{word}' in '{names[0]}'", vec(r.bank_outputs[0]), "river_bank", vec),
        (f"output for '{word}' in '{names[1]}'", vec(r.bank_outputs[1]), "money_bank", vec),
        ("distance between the two contextual vectors", three(r.distance), "distance", three),
    ]

    def table(title: str, artifact: str, rows: list, caption: str) -> Table:
        found = [o[f"{artifact}.{name}"] for _, _, name, _ in rows]
        checked = [(q, regenerated, show(x.published), verdict(x)) for (q, regenerated, _, show), x in zip(rows, found)]
        return check_table(title, checked, caption=caption + not_text_caption(found))

    return [
        table(
            "W9 1.1  one-hot vectors know nothing; an embedding is a lookup table",
            "w9-onehot",
            onehot,
            "every pair of one-hot vectors is orthogonal: no notion of similarity",
        ),
        table(
            f"W9 1.3  contextual vectors for '{word}' (one untrained self-attention layer, d = {cfg['d_model']}, "
            f"seed {cfg['seed']})",
            "w9-contextual",
            contextual,
            "same word, same input vector: the output depends on the neighbours (0 apart for a static embedding)",
        ),
    ]


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    from matplotlib.patches import Rectangle

    fig, axes = new_figure(1, len(result.tokens), figsize=(5.2 * len(result.tokens), 4.6), layout="constrained")
    rows = []  # the CSV: one per sentence, query and key
    for ax, tokens, weights in zip(axes, result.tokens, result.weights):
        rows += [(" ".join(tokens), q, k, weights[i][j]) for i, q in enumerate(tokens) for j, k in enumerate(tokens)]
        im = heatmap(ax, weights, tokens, tokens, annotate=True)  # one scale (0 to 1), both panels
        ax.set(title=f'"{" ".join(tokens)}"', xlabel="key (looked at)", ylabel="query (looking)")
        row = tokens.index(result.WORD)  # outlined
        ax.add_patch(Rectangle((-0.5, row - 0.5), len(tokens), 1, fill=False, edgecolor="crimson", linewidth=2))
    fig.colorbar(im, ax=list(axes), label="attention weight", shrink=0.85)
    fig.suptitle(
        f"W9 1.3: attention weights of one untrained layer; the '{result.WORD}' row (outlined) "
        f"differs with the neighbours (seed {result.config['seed']})"
    )
    images = save_figure(fig, Path(out) / PNG, formats, keep=keep)
    csv = write_csv(Path(out) / CSV, rows, header=("sentence", "query", "key", "weight"))
    return [*images, csv]
