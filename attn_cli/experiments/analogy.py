"""W9 1.2: static word vectors from counting (PPMI + SVD), analogies, nearest words
(design notes: ``docs/design.md``, this module's section)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from attn_cli.errors import AttnError
from attn_cli.experiments import ProgressCallback, QuickConfig

if TYPE_CHECKING:
    import numpy as np

ARTIFACTS = ("w9-ppmi",)
FIGURES = ()
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant (numpy)

TEMPLATES = (
    ("the {} wore a crown and he ruled the kingdom", ("king", "prince")),
    ("the {} wore a crown and she ruled the kingdom", ("queen", "princess")),
    ("the {} went to the market and he sold bread", ("man", "boy")),
    ("the {} went to the market and she sold bread", ("woman", "girl")),
    ("we sat on the {} of the river near the water", ("bank",)),
    ("she kept her money at the {} to get a loan", ("bank",)),
)
STOP = frozenset(
    {"the", "a", "of", "at", "to", "on", "we", "she", "he", "and", "her", "near", "get", "kept", "sat", "went"}
)  # never returned as a neighbour (the text's list)
PAIRS = (("king", "prince"), ("king", "queen"), ("king", "woman"), ("king", "bread"))  # published similarities
TIED = ("queen", "princess")  # identical contexts: equal vectors in exact arithmetic
TIE_TOLERANCE = 1e-9  # two similarities closer than this are an exact tie up to rounding


@dataclass(frozen=True)
class Config(QuickConfig):
    seed: int = 0  # unused: the computation has no random draws (kept for the common contract)
    device: str = "cpu"  # unused: numpy on the CPU, as the text
    window: int = 6  # co-occurrence window, words either side
    repeats: int = 20  # copies of each filled template in the corpus
    rank: int = 8  # k: number of SVD dimensions kept (--rank)
    query: tuple[str, str, str] = ("king", "man", "woman")  # A - B + C
    nearest_word: str = "bank"  # whose nearest words to list
    analogy_top: int = 3  # how many answers to an analogy
    nearest_top: int = 8  # how many nearest words


@dataclass
class Result:
    TIED: ClassVar[tuple[str, str]] = TIED  # for the table: the pair whose tie the checks judge

    config: dict
    vocab: list[str]  # sorted vocabulary of the corpus
    similarities: dict[str, float]  # "king~queen" -> cosine similarity
    analogy: list[str]  # top answers to king - man + woman (published: always computed, as bank's below)
    analogy_similarities: list[float]  # their cosine with the query vector (not normalised)
    bank_nearest: list[str]  # nearest words to bank, stop words skipped
    bank_similarities: list[float]
    tie: dict[str, float]  # similarity of queen and princess to the analogy vector and to bank
    query: list[str]  # [A, B, C] for A - B + C: from here, what the user asked for (by default the above)
    query_answer: list[str]
    query_similarities: list[float]
    nearest_word: str
    nearest: list[str]
    nearest_similarities: list[float]

    def measured(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"w9-ppmi.{pair}": value for pair, value in self.similarities.items()}
        a, b = TIED
        tie_analogy = abs(self.tie[f"analogy.{a}"] - self.tie[f"analogy.{b}"]) < TIE_TOLERANCE
        tie_bank = abs(self.tie[f"bank.{a}"] - self.tie[f"bank.{b}"]) < TIE_TOLERANCE
        # the rule: the two tied words fill the two slots (either order), and they do tie
        out["w9-ppmi.analogy.top2"] = sorted(self.analogy[:2]) == sorted(TIED) and tie_analogy
        out["w9-ppmi.analogy.third"] = self.analogy[2] if len(self.analogy) > 2 else None
        out["w9-ppmi.bank_nearest.top7"] = self.bank_nearest[:7]
        out["w9-ppmi.bank_nearest.8th"] = len(self.bank_nearest) > 7 and self.bank_nearest[7] in TIED and tie_bank
        return out


@dataclass(frozen=True)
class Space:
    """The word vectors: ``E`` (len(vocab), rank), unit rows."""

    vocab: list[str]
    index: dict[str, int]
    E: Any  # numpy array

    def vector(self, word: str) -> np.ndarray:  # a known word (run checks the user's)
        return self.E[self.index[word]]

    def similarity(self, a: str, b: str) -> float:
        return float(self.vector(a) @ self.vector(b))

    def ranked(self, v: np.ndarray, n: int, skip: tuple[str, ...] = ()) -> tuple[list[str], list[float]]:
        """The n words nearest to v by dot product, skipping stop words and ``skip`` (the text's
        ``np.argsort(-(E @ v))``, so ties are broken as the text breaks them)."""
        import numpy as np

        scores = self.E @ v
        ranked = [self.vocab[i] for i in np.argsort(-scores)]
        words = [w for w in ranked if w not in skip and w not in STOP][:n]
        return words, [float(scores[self.index[w]]) for w in words]

    def analogy(self, a: str, b: str, c: str, n: int) -> tuple[list[str], list[float]]:
        """Nearest words to a - b + c (the inputs themselves skipped)."""
        return self.ranked(self.vector(a) - self.vector(b) + self.vector(c), n, skip=(a, b, c))


def corpus(config: Config) -> list[list[str]]:
    return [t.format(w).split() for t, ws in TEMPLATES for w in ws for _ in range(config.repeats)]


def vocabulary(config: Config = Config()) -> list[str]:
    return sorted({w for s in corpus(config) for w in s})


def build_space(config: Config) -> Space:
    import numpy as np

    sentences = corpus(config)
    vocab = sorted({w for s in sentences for w in s})
    index = {w: i for i, w in enumerate(vocab)}
    if not 1 <= config.rank <= len(vocab):
        raise AttnError(f"--rank must be between 1 and the vocabulary size {len(vocab)}, got {config.rank}")
    C = np.zeros((len(vocab), len(vocab)))  # co-occurrence counts (word, context)
    for s in sentences:
        for i, w in enumerate(s):
            for j in range(max(0, i - config.window), min(len(s), i + config.window + 1)):
                if i != j:
                    C[index[w], index[s[j]]] += 1
    total = C.sum()
    pw = C.sum(1, keepdims=True) / total  # (V, 1)
    pc = C.sum(0, keepdims=True) / total  # (1, V)
    with np.errstate(divide="ignore"):
        ppmi = np.maximum(np.log(C / total / (pw * pc)), 0)  # positive pointwise mutual information
    U, S, _ = np.linalg.svd(ppmi)
    k = config.rank
    E = U[:, :k] * np.sqrt(S[:k])  # (V, k)
    E /= np.linalg.norm(E, axis=1, keepdims=True)  # unit rows: dot product = cosine
    return Space(vocab=vocab, index=index, E=E)


def estimate_bytes(config: Config) -> int:
    """About eight float64 V x V matrices (counts, PPMI, temporaries, the SVD's U), V the vocabulary."""
    return 8 * 8 * len(vocabulary(config)) ** 2


def run(config: Config, progress: ProgressCallback = None) -> Result:
    from attn_cli.core.memory import guard

    vocab = vocabulary(config)
    guard(estimate_bytes(config), f"analogy over a vocabulary of {len(vocab)} words", config.device)
    unknown = [w for w in (*config.query, config.nearest_word) if w not in vocab]  # named, with the vocabulary
    if unknown:
        listed = ", ".join(repr(w if len(w) <= 40 else w[:40] + "...") for w in unknown)
        raise AttnError(f"unknown word{'s' if len(unknown) > 1 else ''} {listed}; the vocabulary is: {' '.join(vocab)}")
    for name, n in (("--top", config.nearest_top), ("analogy_top", config.analogy_top)):
        if n > len(vocab):
            raise AttnError(f"{name} must be at most the vocabulary size {len(vocab)}, got {n}")
    space = build_space(config)

    analogy, analogy_sims = space.analogy("king", "man", "woman", 3)
    bank, bank_sims = space.ranked(space.vector("bank"), 8, skip=("bank",))
    q = space.vector("king") - space.vector("man") + space.vector("woman")
    tie = {f"analogy.{w}": float(space.vector(w) @ q) for w in TIED}
    tie.update({f"bank.{w}": space.similarity("bank", w) for w in TIED})

    answer, answer_sims = space.analogy(*config.query, config.analogy_top)
    nearest, nearest_sims = space.ranked(
        space.vector(config.nearest_word), config.nearest_top, skip=(config.nearest_word,)
    )
    return Result(
        config=asdict(config),
        vocab=vocab,
        similarities={f"{a}~{b}": space.similarity(a, b) for a, b in PAIRS},
        analogy=analogy,
        analogy_similarities=analogy_sims,
        bank_nearest=bank,
        bank_similarities=bank_sims,
        tie=tie,
        query=list(config.query),
        query_answer=answer,
        query_similarities=answer_sims,
        nearest_word=config.nearest_word,
        nearest=nearest,
        nearest_similarities=nearest_sims,
    )
