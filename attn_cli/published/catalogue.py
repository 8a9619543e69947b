"""The catalogue: every table and figure of the two texts (``../shared/ARTIFACTS.md``).

``files`` are the names each command writes into ``--out`` for that artifact; commands
must use exactly these names.
"""

from attn_cli.published.types import Artifact

ARTIFACTS: tuple[Artifact, ...] = (
    # W9: embeddings and attention
    Artifact("w9-onehot", "W9", "1.1", "one-hot vectors and the embedding table", "embeddings"),
    Artifact("w9-ppmi", "W9", "1.2", "PPMI + SVD static embeddings, analogy, nearest to bank", "analogy"),
    Artifact("w9-contextual", "W9", "1.3", "contextual vectors for 'bank'", "embeddings",
             ("embeddings_bank_attention.png", "embeddings_bank_attention.csv")),
    Artifact("w9-copy-task", "W9", "2.3", "copy task with attention vs plain encoder-decoder", "copy-task",
             ("copy_task_accuracy.png",)),
    Artifact("w9-copy-task-map", "W9", "2.3", "trained attention map on one sequence", "copy-task",
             ("copy_task_attention_L{length}.png",), new=True),
    Artifact("w9-worked", "W9", "3.1", "worked example of scaled dot-product attention", "formula"),
    Artifact("w9-properties", "W9", "3.2", "shapes and properties of attention", "formula"),
    Artifact("w9-sqrt-dk", "W9", "3.3", "why divide by sqrt(d_k)", "sqrt-dk"),
    Artifact("w9-sqrt-dk-plot", "W9", "3.3", "max weight and gradient norm against d_k", "sqrt-dk",
             ("sqrt_dk.png",), new=True),
    Artifact("w9-self-cross", "W9", "4.1", "self- and cross-attention shapes (nn.MultiheadAttention)", "self-cross"),
    Artifact("w9-masks", "W9", "4.2", "causal and padding masks", "masks", ("masks.png", "masks.csv")),
    Artifact("w9-order", "W9", "4.3", "self-attention cannot tell the order", "order"),
    Artifact("w9-heads", "W9", "5.1", "hand-written multi-head vs nn.MultiheadAttention; parameters", "heads"),
    Artifact("w9-scaling", "W9", "5.2", "quadratic cost of the score matrix", "scaling"),
    # D2L 10.3
    Artifact("d2l-copy-both-one-head", "D2L", "10.3.1", "one head loses half the variance", "copy-both"),
    Artifact("d2l-copy-both-two-heads", "D2L", "10.3.1", "two heads recover both values", "copy-both"),
    Artifact("d2l-fig-10.3.1", "D2L", "10.3.1", "relative error vs first head's weight", "copy-both",
             ("copy_both.png", "copy_both.csv")),
    Artifact("d2l-mha-shape", "D2L", "10.3.2.3", "MultiHeadAttention output shape with valid_lens", "heads"),
    Artifact("d2l-mha-params", "D2L", "10.3.2.3", "parameters independent of the head count", "heads"),
    Artifact("d2l-fig-10.3.2", "D2L", "10.3.2", "multi-head layout diagram", "heads", ("heads_layout.png",)),
    Artifact("d2l-self-cross", "D2L", "10.3.3", "self- and cross-attention shapes (MultiHeadAttention)", "self-cross"),
    Artifact("d2l-crossattn-map", "D2L", "10.3.3.3", "letter alignment of 'attention' vs 'translation'",
             "crossattn-map", ("heatmap_attention_translation.png", "heatmap_attention_translation.csv")),
)

BY_ID = {a.id: a for a in ARTIFACTS}
