"""The catalogue: every table and figure of the two texts (``../shared/ARTIFACTS.md``), in the texts' order, with
the files each command writes into ``--out``; a check family may declare more as ``CATALOGUE`` (:func:`placed`)."""

import importlib
import pkgutil
from types import ModuleType

from attn_cli.published.types import Artifact

# modules of this package that are not check families (they define no CHECKS)
NOT_FAMILIES = frozenset({"types", "catalogue", "settings", "compare", "seed_rule"})

_ROWS = (  # id, source, section, title, command
    # W9: embeddings and attention
    ("w9-onehot", "W9", "1.1", "one-hot vectors and the embedding table", "embeddings"),
    ("w9-ppmi", "W9", "1.2", "PPMI + SVD static embeddings, analogy, nearest to bank", "analogy"),
    ("w9-contextual", "W9", "1.3", "contextual vectors for 'bank'", "embeddings"),
    ("w9-copy-task", "W9", "2.3", "copy task with attention vs plain encoder-decoder", "copy-task"),
    ("w9-copy-task-map", "W9", "2.3", "trained attention map on one sequence", "copy-task"),
    ("w9-worked", "W9", "3.1", "worked example of scaled dot-product attention", "formula"),
    ("w9-properties", "W9", "3.2", "shapes and properties of attention", "formula"),
    ("w9-sqrt-dk", "W9", "3.3", "why divide by sqrt(d_k)", "sqrt-dk"),
    ("w9-sqrt-dk-plot", "W9", "3.3", "max weight and gradient norm against d_k", "sqrt-dk"),
    ("w9-self-cross", "W9", "4.1", "self- and cross-attention shapes (nn.MultiheadAttention)", "self-cross"),
    ("w9-masks", "W9", "4.2", "causal and padding masks", "masks"),
    ("w9-order", "W9", "4.3", "self-attention cannot tell the order", "order"),
    ("w9-heads", "W9", "5.1", "hand-written multi-head vs nn.MultiheadAttention; parameters", "heads"),
    ("w9-scaling", "W9", "5.2", "quadratic cost of the score matrix", "scaling"),
    # D2L 10.3
    ("d2l-copy-both-one-head", "D2L", "10.3.1", "one head loses half the variance", "copy-both"),
    ("d2l-copy-both-two-heads", "D2L", "10.3.1", "two heads recover both values", "copy-both"),
    ("d2l-fig-10.3.1", "D2L", "10.3.1", "relative error vs first head's weight", "copy-both"),
    ("d2l-mha-shape", "D2L", "10.3.2.3", "MultiHeadAttention output shape with valid_lens", "heads"),
    ("d2l-mha-params", "D2L", "10.3.2.3", "parameters independent of the head count", "heads"),
    ("d2l-fig-10.3.2", "D2L", "10.3.2", "multi-head layout diagram", "heads"),
    ("d2l-self-cross", "D2L", "10.3.3", "self- and cross-attention shapes (MultiHeadAttention)", "self-cross"),
    ("d2l-crossattn-map", "D2L", "10.3.3.3", "letter alignment of 'attention' vs 'translation'", "crossattn-map"),
    # D2L 10.3.5 exercises: no published numbers; `attn exercise N` (attn_cli/experiments/exercises/)
    ("d2l-ex1", "D2L", "10.3.5 ex1", "nonlinear readouts: MLP vs linear readout error", "exercise"),
    ("d2l-ex2", "D2L", "10.3.5 ex2", "nearly identical heads: error vs epsilon under noise, log-log", "exercise"),
    ("d2l-ex3", "D2L", "10.3.5 ex3", "what the bound counts: error = 1 - rank(A)/k", "exercise"),
    ("d2l-ex4", "D2L", "10.3.5 ex4", "averages under key noise: median error, failure fraction", "exercise"),
    ("d2l-ex5", "D2L", "10.3.5 ex5", "head pruning: one-shot vs greedy", "exercise"),
    ("d2l-ex6", "D2L", "10.3.5 ex6", "narrow heads: forward time against h", "exercise"),
    ("d2l-ex7", "D2L", "10.3.5 ex7", "cost of cross-attention: FLOPs, cached keys/values", "exercise"),
    ("d2l-ex8", "D2L", "10.3.5 ex8", "MQA and GQA: parameters, FLOPs, KV-cache bytes", "exercise"),
    ("d2l-ex9", "D2L", "10.3.5 ex9", "heads as slices; tiled vs repeated valid_lens", "exercise"),
    ("d2l-ex10", "D2L", "10.3.5 ex10", "permuting the source of cross-attention", "exercise"),
    ("d2l-ex11", "D2L", "10.3.5 ex11", "per-head maps through random projections", "exercise"),
    ("d2l-ex12", "D2L", "10.3.5 ex12", "learned copy-both heads, h = 1, 2, 4, 8", "exercise"),
)
FILES = {  # what the command writes into --out for the artifact
    "w9-contextual": ("embeddings_bank_attention.png", "embeddings_bank_attention.csv"),
    "w9-copy-task": ("copy_task_accuracy.png",),
    "w9-copy-task-map": ("copy_task_attention_L{length}.png",),
    "w9-sqrt-dk-plot": ("sqrt_dk.png",),
    "w9-masks": ("masks.png", "masks.csv"),
    "d2l-fig-10.3.1": ("copy_both.png", "copy_both.csv"),
    "d2l-fig-10.3.2": ("heads_layout.png",),
    "d2l-crossattn-map": ("heatmap_attention_translation.png", "heatmap_attention_translation.csv"),
    **{f"d2l-ex{n}": (f"exercise_{n}.png", f"exercise_{n}.csv") for n in (2, 6, 11, 12)},  # the exercises' figures
}
NEW = frozenset({"w9-copy-task-map", "w9-sqrt-dk-plot"})  # figures the texts do not draw, added beside a table
ARTIFACTS: tuple[Artifact, ...] = tuple(Artifact(*row, FILES.get(row[0], ()), row[0] in NEW) for row in _ROWS)


def families() -> list[str]:
    """The check families: every module of this package but :data:`NOT_FAMILIES`, by name."""
    import attn_cli.published as package  # also while the package itself is being imported

    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name not in NOT_FAMILIES)


def family_modules() -> list[ModuleType]:
    """The check families' modules, in :func:`families` order."""
    return [importlib.import_module(f"attn_cli.published.{family}") for family in families()]


def family_entries() -> tuple[Artifact, ...]:
    """The catalogue entries the check families declare (``CATALOGUE``), in family order."""
    return tuple(entry for module in family_modules() for entry in getattr(module, "CATALOGUE", ()))


def placed(listed: tuple[Artifact, ...], added: tuple[Artifact, ...]) -> tuple[Artifact, ...]:
    """``listed`` in its order, each of ``added`` after the last entry of its source (W9, D2L;
    at the end for a new source).  An ID given twice is an error."""
    entries = list(listed)
    for entry in added:
        if any(a.id == entry.id for a in entries):
            raise ValueError(f"catalogue ID {entry.id!r} is declared twice")
        last = max((i for i, a in enumerate(entries) if a.source == entry.source), default=len(entries) - 1)
        entries.insert(last + 1, entry)
    return tuple(entries)


ARTIFACTS = placed(ARTIFACTS, family_entries())
BY_ID = {a.id: a for a in ARTIFACTS}
