"""Table and heatmap for ``attn heatmap`` / ``attn crossattn-map`` (D2L 10.3.3.3)."""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attn_cli.render.console import stdout
from attn_cli.render.files import heatmap, new_figure, plain_text, save_figure, write_csv
from attn_cli.render.table import Column, Table, styled

if TYPE_CHECKING:
    from attn_cli.experiments.crossattn import Result
    from attn_cli.published.compare import Outcome

_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_REGIME_STYLE = {"sharp": "bold green", "split": "yellow", "diffuse": "red"}
_REGIME_TEXT = {"sharp": "one matching key", "split": "repeated matching keys", "diffuse": "no matching key"}


def safe_name(word: str, limit: int = 40) -> str:
    """A file-name-safe form of a word: anything but ASCII letters, digits, '_' and '-' replaced by '_',
    with a short hash of the word appended so that different words never share a file."""
    if _SAFE.fullmatch(word) and len(word) <= limit:
        return word
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", word)[:limit]
    return f"{cleaned}-{hashlib.sha1(word.encode('utf-8')).hexdigest()[:8]}"


def label(ch: str) -> str:
    """A visible tick label for one character (spaces and control characters shown)."""
    if ch == " ":
        return "␣"
    return ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")


def tables(result: Result, outcomes: Mapping, width: int | None = None) -> list:
    """The weights (in % where the key word fits the console, else each row's peaks), the regimes, their summary."""
    width = stdout.width if width is None else width
    agree = "yes" if result.agrees_with_letters() else "no: random embeddings this narrow do not separate every pair"
    out = [
        _weights_table(result, full=4 * len(result.keys) + 28 <= width),
        _regimes_table(result, outcomes["d2l-crossattn-map.regimes"]),
        f"regimes agree with the letter counts (1 / >1 / 0 matching keys): {agree}",
    ]
    if result.head_weights:
        n = len(result.head_weights)
        heads = Table(
            title=f"exercise 11: regimes per head after a fresh {result.config['heads']}-head layer "
            "(random projections)",
            columns=[Column("query", "center"), Column("plain"), *(Column(f"head {h}") for h in range(1, n + 1))],
        )
        for i, q in enumerate(result.queries):
            heads.add_row(label(q), result.regimes[i], *(hr[i] for hr in result.head_regimes))
        out.append(heads)
    return out


def _weights_table(result: Result, full: bool) -> Table:
    cfg = result.config
    query, key = (repr(cfg[w]) for w in ("query_word", "key_word"))
    each_key = [Column(label(k), "right", no_wrap=True) for k in result.keys] if full else []
    found = [] if full else [Column("peaks (key@position: weight)")]
    weights = Table(
        title=f"cross-attention weights in % (rows sum to 100): queries = {query} (rows), keys = {key}; "
        f"d={cfg['d_model']}, seed {cfg['seed']}, no projections",
        columns=[Column("query", "center"), *each_key, Column("regime", no_wrap=True), *found],
        terminal={"box": "SIMPLE_HEAD", "padding": (0, 1)},
    )
    for i, q in enumerate(result.queries):
        peaks, regime = result.peaks[i], result.regimes[i]
        tag = styled((regime, _REGIME_STYLE[regime]))
        if full:
            cells = [
                styled((f"{100 * w:.0f}", "bold")) if j in peaks and regime != "diffuse" else f"{100 * w:.0f}"
                for j, w in enumerate(result.weights[i])
            ]
            weights.add_row(label(q), *cells, tag)
        else:
            text = ", ".join(f"{label(result.keys[j])}@{j + 1}: {result.weights[i][j]:.2f}" for j in peaks[:4])
            weights.add_row(label(q), tag, text + (" ..." if len(peaks) > 4 else ""))
    return weights


def _regimes_table(result: Result, rule: Outcome) -> Table:
    """The three regimes: their meaning, the query letters found, the text's letters."""
    headers = ("regime", "meaning", "query letters (regenerated)", "published (attention vs translation)")
    summary = Table(
        title="three regimes (D2L 10.3.3.3), found from the weights: the top weight (ties "
        "included) >= 5 x every other key -> sharp (1 key) / split (tied keys); else diffuse",
        columns=[Column(h) for h in headers],
    )
    text_regimes = rule.published if rule.status != "n/a" else None  # the text's letters, at its settings
    found = result.regime_letters()
    for regime in ("sharp", "split", "diffuse"):
        letters = ", ".join(label(c) for c in found[regime]) or "-"
        published = ", ".join(text_regimes[regime]) if text_regimes else ""
        summary.add_row(styled((regime, _REGIME_STYLE[regime])), _REGIME_TEXT[regime], letters, published)
    return summary


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    out, cfg = Path(out), result.config
    base = f"heatmap_{safe_name(cfg['query_word'])}_{safe_name(cfg['key_word'])}"
    base += f"_heads{cfg['heads']}" if cfg["heads"] else ""
    keys, queries = [label(k) for k in result.keys], [label(q) for q in result.queries]
    panels = [("plain (no projections)", result.weights)]
    panels += [(f"head {h + 1}", w) for h, w in enumerate(result.head_weights)]

    rows = [[f"{q}"] + [repr(w) for w in row] for q, row in zip(result.queries, result.weights)]
    paths = [write_csv(out / f"{base}.csv", rows, header=["query \\ key", *result.keys])]
    if result.head_weights:
        head_rows = [[h + 1, q, *row] for h, hw in enumerate(result.head_weights) for q, row in zip(result.queries, hw)]
        paths.append(write_csv(out / f"{base}_per_head.csv", head_rows, header=["head", "query \\ key", *result.keys]))

    cell = 0.32  # inches per cell: the text's 4 x 3.5 for 9 x 11
    width, height = max(2.5, len(keys) * cell + 1.0), max(2.0, len(queries) * cell + 1.0)
    fig, axes = new_figure(1, len(panels), figsize=(width * len(panels) + 0.8, height), squeeze=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing")  # fonts without CJK, emoji ...
        for ax, (title, w) in zip(axes[0], panels):
            im = heatmap(ax, w, queries, keys)
            ax.set_xlabel(plain_text("keys: " + "".join(keys)))
            ax.set_title(title, fontsize=9)
            ax.tick_params(length=0)
        axes[0][0].set_ylabel(plain_text("queries: " + "".join(queries)))
        fig.colorbar(im, ax=list(axes[0]), shrink=0.9, label="attention weight")
        fig.suptitle(f"cross-attention, letter embeddings d={cfg['d_model']}, seed {cfg['seed']}", fontsize=9, y=1.04)
        paths[:0] = save_figure(fig, out / f"{base}.png", formats, keep=keep)
    return paths
