"""Tables and figure for ``attn embeddings`` (W9 1.1 one-hot, 1.3 contextual 'bank')."""

from __future__ import annotations

from pathlib import Path

from attn_cli.experiments.embeddings import CONTEXTUAL_SETTINGS, ONEHOT_SETTINGS, WORD, Result
from attn_cli.published import all_checks
from attn_cli.published.catalogue import BY_ID
from attn_cli.render.files import DEFAULT_FORMATS

PNG, CSV = BY_ID["w9-contextual"].files


def vec(values, decimals: int) -> str:
    """A vector as the text prints it (numpy-style, rounded)."""
    return "[" + " ".join(f"{v:.{decimals}f}" for v in values) + "]"


def tables(result: Result) -> list:
    from attn_cli.render.console import check_table

    checks, m = all_checks(), result.measured()
    same = {"w9-onehot": result.at_text_settings(ONEHOT_SETTINGS),
            "w9-contextual": result.at_text_settings(CONTEXTUAL_SETTINGS)}

    def verdict(check_id):
        return checks[check_id].ok(m[check_id]) if same[checks[check_id].artifact] else "n/a"

    cfg = result.config
    onehot = check_table(
        "W9 1.1  one-hot vectors know nothing; an embedding is a lookup table",
        [
            ("one-hot king . queen", repr(result.onehot_king_queen), "0.0", verdict("w9-onehot.king.queen")),
            ("one-hot king . apple", repr(result.onehot_king_apple), "0.0", verdict("w9-onehot.king.apple")),
            ("embedding lookup equals one-hot @ weight matrix", str(result.lookup_equals_matmul), "True",
             verdict("w9-onehot.lookup_equals_matmul")),
            (f"parameters of a {cfg['vocab_size']:,} x {cfg['embed_dim']} table", f"{result.parameters:,}",
             "15,000,000", verdict("w9-onehot.parameters")),
            ("dimensions of a one-hot vector", f"{cfg['vocab_size']:,}", "50,000", verdict("w9-onehot.onehot_dims")),
        ],
        caption="every pair of one-hot vectors is orthogonal: no notion of similarity"
                + ("" if same["w9-onehot"] else "; n/a: settings differ from the text's"),
    )
    names = [" ".join(t) for t in result.tokens]
    pub = {k: checks[k].published for k in ("w9-contextual.static_bank", "w9-contextual.river_bank",
                                            "w9-contextual.money_bank")}
    contextual = check_table(
        f"W9 1.3  contextual vectors for '{WORD}' (one untrained self-attention layer, d = {cfg['d']}, "
        f"seed {cfg['seed']})",
        [
            (f"static embedding of '{WORD}'", vec(result.static_bank, 2), vec(pub["w9-contextual.static_bank"], 2),
             verdict("w9-contextual.static_bank")),
            (f"output for '{WORD}' in '{names[0]}'", vec(result.bank_outputs[0], 2),
             vec(pub["w9-contextual.river_bank"], 2), verdict("w9-contextual.river_bank")),
            (f"output for '{WORD}' in '{names[1]}'", vec(result.bank_outputs[1], 2),
             vec(pub["w9-contextual.money_bank"], 2), verdict("w9-contextual.money_bank")),
            ("distance between the two contextual vectors", f"{result.distance:.3f}", "2.841",
             verdict("w9-contextual.distance")),
        ],
        caption="same word, same input vector: the output depends on the neighbours (0 apart for a static "
                "embedding)" + ("" if same["w9-contextual"] else "; n/a: settings differ from the text's"),
    )
    return [onehot, contextual]


def figures(result: Result, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    from attn_cli.render.figures import heatmap, new_figure
    from attn_cli.render.files import save_figure, write_csv

    fig, axes = new_figure(1, len(result.tokens), figsize=(5.2 * len(result.tokens), 4.6), layout="constrained")
    for ax, tokens, weights in zip(axes, result.tokens, result.weights):
        im = heatmap(ax, weights, tokens, tokens, vmin=0.0, vmax=1.0, annotate=True)  # one scale, both panels
        ax.set_title(f"\"{' '.join(tokens)}\"")
        ax.set_xlabel("key (looked at)")
        ax.set_ylabel("query (looking)")
        row = tokens.index(WORD)
        ax.add_patch(_outline(row, len(tokens)))
    fig.colorbar(im, ax=list(axes), label="attention weight", shrink=0.85)
    fig.suptitle(f"W9 1.3: attention weights of one untrained layer; the '{WORD}' row (outlined) "
                 f"differs with the neighbours (seed {result.config['seed']})")
    images = save_figure(fig, Path(out) / PNG, formats)
    rows = [(" ".join(tokens), q, k, weights[i][j])
            for tokens, weights in zip(result.tokens, result.weights)
            for i, q in enumerate(tokens) for j, k in enumerate(tokens)]
    csv = write_csv(Path(out) / CSV, rows, header=("sentence", "query", "key", "weight"))
    return [*images, csv]


def _outline(row: int, n: int):
    from matplotlib.patches import Rectangle

    return Rectangle((-0.5, row - 0.5), n, 1, fill=False, edgecolor="crimson", linewidth=2)
