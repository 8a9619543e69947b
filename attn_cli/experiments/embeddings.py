"""W9 1.1 and 1.3: one-hot vectors know nothing; contextual vectors for 'bank'
(design notes: ``docs/design.md``, this module's section)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import ClassVar

from attn_cli.experiments import MeasuredResult, ProgressCallback, QuickConfig
from attn_cli.published.settings import TEXT

ARTIFACTS = ("w9-onehot", "w9-contextual")
FIGURES = ("embeddings_bank_attention.png",)
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, True  # a second or more (torch's first use)

ONEHOT_VOCAB = ("king", "queen", "man", "woman", "apple")  # W9 1.1
CONTEXT_VOCAB = ("the", "river", "money", "bank", "was", "deep", "closed")  # W9 1.3, draw order
SENTENCES = ("the river bank was deep", "the money bank was closed")  # W9 1.3
WORD = "bank"  # the ambiguous word whose two contextual vectors are compared


@dataclass(frozen=True)
class Config(QuickConfig):
    onehot_embed_dim: int = 4  # width of the small nn.Embedding of 1.1
    vocab_size: int = TEXT["w9-onehot"]["vocab_size"]  # V of the parameter count of 1.1 (the text's)
    embed_dim: int = 300  # d of the parameter count of 1.1
    d_model: int = 6  # d: width of the contextual vectors of 1.3
    weight_scale: float = 0.7  # Wq, Wk, Wv = randn(d, d) * weight_scale


@dataclass
class Result(MeasuredResult):
    WORD: ClassVar[str] = WORD  # for the table and the figure: the word compared

    config: dict
    onehot_king_queen: float  # 1.1: one-hot king . queen
    onehot_king_apple: float  # one-hot king . apple
    lookup_equals_matmul: bool  # emb(ids) == onehot[ids] @ emb.weight (torch.allclose)
    parameters: int  # vocab_size * embed_dim
    tokens: list[list[str]]  # 1.3: the two sentences, tokenised
    static_bank: list[float]  # E["bank"]: the one fixed input vector
    bank_outputs: list[list[float]]  # self-attention output for "bank" in each sentence
    distance: float  # || output(river) - output(money) ||
    weights: list[list[list[float]]] = field(default_factory=list)  # per sentence (n, n), rows = queries

    MEASURED: ClassVar[dict[str, str]] = {  # check ID -> its value's path in this Result
        "w9-onehot.king.queen": "onehot_king_queen",
        "w9-onehot.king.apple": "onehot_king_apple",
        "w9-onehot.lookup_equals_matmul": "lookup_equals_matmul",
        "w9-onehot.parameters": "parameters",
        "w9-onehot.onehot_dims": "config.vocab_size",
        "w9-contextual.static_bank": "static_bank",
        "w9-contextual.river_bank": "bank_outputs.0",
        "w9-contextual.money_bank": "bank_outputs.1",
        "w9-contextual.distance": "distance",
    }


def validate_result(result: Result, config: Config) -> None:
    """A cached Result's sizes follow from ``config`` (:mod:`attn_cli.store.typed`)."""
    from attn_cli.store.typed import check, check_grid, check_len, check_range

    tokens = [s.split() for s in SENTENCES]
    check(result.tokens == tokens, "tokens", "not the text's sentences")
    check_len(result.static_bank, config.d_model, "static_bank")
    check_grid(result.bank_outputs, (len(tokens), config.d_model), "bank_outputs")
    check_len(result.weights, len(tokens), "weights")
    for i, words in enumerate(tokens):
        check_grid(result.weights[i], (len(words), len(words)), f"weights[{i}]")
    check_range(result.weights, 0.0, 1.0, "weights")


def estimate_bytes(config: Config) -> int:
    """Float32 word vectors, Wq, Wk, Wv and products; the V x d table of 1.1 is only counted."""
    d, n = config.d_model, len(CONTEXT_VOCAB)
    return 4 * (3 * d * d + 4 * n * d + 4 * len(ONEHOT_VOCAB) * max(len(ONEHOT_VOCAB), config.onehot_embed_dim))


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch
    from torch import nn

    from attn_cli.core.attention import scaled_dot_product_attention
    from attn_cli.core.memory import guard

    guard(estimate_bytes(config), f"embeddings with --d-model {config.d_model}", config.device)
    dev = torch.device(config.device)

    # --- 1.1: one-hot vectors and the embedding table
    torch.manual_seed(config.seed)
    idx = {w: i for i, w in enumerate(ONEHOT_VOCAB)}
    onehot = torch.eye(len(ONEHOT_VOCAB), device=dev)  # (V, V)
    emb = nn.Embedding(len(ONEHOT_VOCAB), config.onehot_embed_dim).to(dev)  # drawn on CPU, then moved
    ids = torch.tensor([idx["king"], idx["apple"]], device=dev)
    with torch.no_grad():
        lookup = emb(ids)  # (2, d): a table lookup ...
        matmul = onehot[ids] @ emb.weight  # (2, d): ... equals one-hot times the weight matrix

    # --- 1.3: one untrained self-attention layer
    torch.manual_seed(config.seed)
    d = config.d_model
    E = {w: torch.randn(d).to(dev) for w in CONTEXT_VOCAB}  # one fixed vector per word, vocabulary order
    Wq, Wk, Wv = ((torch.randn(d, d) * config.weight_scale).to(dev) for _ in range(3))

    tokens = [s.split() for s in SENTENCES]
    outputs, weights = [], []
    for sentence in tokens:
        x = torch.stack([E[w] for w in sentence])  # (n, d)
        out, w = scaled_dot_product_attention(x @ Wq, x @ Wk, x @ Wv)  # (n, d), (n, n)
        outputs.append(out[sentence.index(WORD)])
        weights.append(w.cpu().tolist())

    return Result(
        config=asdict(config),
        onehot_king_queen=(onehot[idx["king"]] @ onehot[idx["queen"]]).item(),
        onehot_king_apple=(onehot[idx["king"]] @ onehot[idx["apple"]]).item(),
        lookup_equals_matmul=bool(torch.allclose(lookup, matmul)),
        parameters=config.vocab_size * config.embed_dim,
        tokens=tokens,
        static_bank=E[WORD].cpu().tolist(),
        bank_outputs=[o.cpu().tolist() for o in outputs],
        distance=(outputs[0] - outputs[1]).norm().item(),
        weights=weights,
    )
