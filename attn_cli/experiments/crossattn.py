"""D2L 10.3.3.3: letters of one word attend to the letters of another (cross-attention)
(design notes: ``docs/design.md``, this module's section)."""

from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

from attn_cli.errors import AttnError
from attn_cli.experiments import ProgressCallback, QuickConfig

ARTIFACTS = ("d2l-crossattn-map",)
FIGURES = ("heatmap_attention_translation.png",)
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant

MAX_WORD_LENGTH = 64  # longer words make an unreadable map (cells under ~5 px at 4 inches)

TIE_RTOL = 1e-4  # identical keys get identical weights: ties within this relative tolerance
STAND_OUT = 5.0  # the tied top weight must be this many times the best other key (ln 5 = 1.6 in score)


@dataclass(frozen=True)
class Config(QuickConfig):
    query_word: str = "attention"  # its characters are the queries (rows)
    key_word: str = "translation"  # its characters are the keys and values (columns)
    d_model: int = 32  # embedding width
    heads: int = 0  # 0: plain attention (the text); N: a fresh N-head layer (exercise 11)


@dataclass
class Result:
    config: dict
    queries: list[str]  # query characters, in order (rows)
    keys: list[str]  # key characters, in order (columns)
    letters: list[str]  # the sorted alphabet: row i of the embedding table is letters[i]
    weights: list[list[float]]  # (len(queries), len(keys)), rows sum to 1
    regimes: list[str]  # one per query row: sharp / split / diffuse
    peaks: list[list[int]]  # key positions the rule counted as peaks, per row
    matches: list[int]  # how many keys carry the same character, per row (for comparison)
    head_weights: list[list[list[float]]] = field(default_factory=list)  # (heads, n_q, n_k)
    head_regimes: list[list[str]] = field(default_factory=list)

    def regime_letters(self) -> dict[str, list[str]]:
        """Distinct query characters per regime (a character keeps its first row's regime)."""
        first = dict(reversed(list(zip(self.queries, self.regimes))))  # character -> its first row's regime
        return {k: sorted(ch for ch, r in first.items() if r == k) for k in ("sharp", "split", "diffuse")}

    def agrees_with_letters(self) -> bool:
        """The weight-derived regimes are those the letter counts predict (1, >1, 0 matches)."""
        expected = ["sharp" if m == 1 else "split" if m > 1 else "diffuse" for m in self.matches]
        return expected == self.regimes

    def measured(self) -> dict[str, Any]:
        return {"d2l-crossattn-map.regimes": self.regime_letters()}


def classify_row(row: list[float]) -> tuple[str, list[int]]:
    """Regime of one row of weights, and its peaks: the keys tied (within ``TIE_RTOL``) with the
    largest weight (identical keys tie exactly, others practically never).  Peaks at least
    ``STAND_OUT`` times every other key: ``sharp`` (one) or ``split`` (several); else ``diffuse``,
    as is a row where every key ties; a single key is ``sharp``."""
    top = max(row)
    peaks = [j for j, w in enumerate(row) if w >= top * (1 - TIE_RTOL)]
    if len(peaks) == len(row):
        return ("sharp" if len(row) == 1 else "diffuse"), peaks
    rest = max(w for j, w in enumerate(row) if j not in peaks)
    if top < STAND_OUT * rest:
        return "diffuse", peaks
    return ("sharp" if len(peaks) == 1 else "split"), peaks


def validate(config: Config) -> None:
    for which, word in (("query", config.query_word), ("key", config.key_word)):
        word = unicodedata.normalize("NFC", word)  # so 'é' typed either way is one character
        if not word:
            raise AttnError(f"the {which} word is empty; give at least one character")
        if not word.strip():
            raise AttnError(f"the {which} word is only whitespace; give at least one visible character")
        control = [c for c in word if unicodedata.category(c) == "Cc"]
        if control:
            raise AttnError(
                f"the {which} word contains the control character {control[0]!r}; give printable characters"
            )
        if len(word) > MAX_WORD_LENGTH:
            raise AttnError(
                f"the {which} word has {len(word):,} characters; at most {MAX_WORD_LENGTH} are allowed "
                f"(a longer map is unreadable)"
            )
    if config.heads and config.d_model % config.heads:
        raise AttnError(
            f"--heads {config.heads} must divide --d-model {config.d_model} (each head gets d_model / heads)"
        )


def estimate_bytes(config: Config) -> int:
    """Float32 embeddings, queries, keys, values, per-head scores and the four d x d projections."""
    letters = len(set(config.query_word + config.key_word))
    n_q, n_k = len(config.query_word), len(config.key_word)
    return 4 * (
        4 * (letters + 2 * (n_q + n_k)) * config.d_model
        + 4 * max(config.heads, 1) * n_q * n_k
        + 4 * config.d_model**2 * (config.heads > 0)
    )


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import MultiHeadAttention, scaled_dot_product_attention
    from attn_cli.core.memory import guard

    query_word, key_word = (unicodedata.normalize("NFC", w) for w in (config.query_word, config.key_word))
    guard(estimate_bytes(config), f"letter embeddings of width {config.d_model}", config.device)
    letters = sorted(set(query_word + key_word))

    torch.manual_seed(config.seed)
    emb = torch.randn(len(letters), config.d_model).to(config.device)  # (|alphabet|, d): one call, as in the text
    # freshly initialised after the embeddings, so the plain map is unchanged by --heads
    heads_layer = MultiHeadAttention(config.d_model, config.heads, dropout=0.0) if config.heads else None
    queries = emb[[letters.index(c) for c in query_word]][None]  # (1, n_q, d)
    keys = emb[[letters.index(c) for c in key_word]][None]  # (1, n_k, d)

    with torch.no_grad():
        _, w = scaled_dot_product_attention(queries, keys, keys)  # (1, n_q, n_k)
        weights = w[0].cpu().tolist()
        head_weights: list = []
        if heads_layer is not None:
            _, hw = heads_layer.to(config.device).eval()(queries, keys, keys)  # (1, h, n_q, n_k)
            head_weights = hw[0].cpu().tolist()

    classified = [classify_row(row) for row in weights]
    return Result(
        config=asdict(config),
        queries=list(query_word),
        keys=list(key_word),
        letters=letters,
        weights=weights,
        regimes=[r for r, _ in classified],
        peaks=[p for _, p in classified],
        matches=[key_word.count(c) for c in query_word],
        head_weights=head_weights,
        head_regimes=[[classify_row(row)[0] for row in head] for head in head_weights],
    )
