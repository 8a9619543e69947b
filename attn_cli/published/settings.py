"""The texts' settings: the one place that decides "is this run at the text's settings?" (a published value
holds only for the draws and sizes the text used).  ``TEXT`` maps a catalogue ID to the configuration fields
its values depend on and the text's value of each (a check family may declare its own as ``TEXT_SETTINGS``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attn_cli.published.types import Check, as_lists

SQRT_DK_DIMS = (4, 16, 64, 256, 1024)  # the d_k the text prints, in the order it draws them
SQRT_DK_TRIALS = 20000  # trials in the text
SQRT_DK_N_KEYS = 10  # keys per query in the text
SCALING_D_MODEL = 512  # the d in "n^2 * d operations (d = 512)"

TEXT: dict[str, dict[str, Any]] = {
    "w9-onehot": {"seed": 0, "onehot_embed_dim": 4, "vocab_size": 50_000, "embed_dim": 300},
    "w9-contextual": {"seed": 0, "d_model": 6, "weight_scale": 0.7},
    "w9-ppmi": {"window": 6, "repeats": 20, "rank": 8},
    "w9-worked": {},  # fixed inputs: every configuration computes the text's example
    "w9-properties": {"seed": 0, "n_q": 3, "n_k": 5, "d_k": 4, "d_v": 6},
    "w9-order": {"seed": 0, "d_model": 6, "weight_scale": 0.5, "words": ("dog", "bites", "man")},
    "w9-sqrt-dk": {"seed": 0, "trials": SQRT_DK_TRIALS, "n_keys": SQRT_DK_N_KEYS},
    "w9-sqrt-dk-plot": {"seed": 0, "trials": SQRT_DK_TRIALS, "n_keys": SQRT_DK_N_KEYS, "d_k": SQRT_DK_DIMS},
    "w9-masks": {"seed": 0, "n": 5, "d_k": 4, "changed_from": 3, "padding_from": 3},
    "w9-scaling": {},  # formulas: the text's lengths are the checks' own IDs; d for operations below
    # the text's training and evaluation sizes (one seed of them; the seed rule judges over several)
    "w9-copy-task": {"steps": 2500, "hidden_size": 32, "batch_size": 64, "lr": 3e-3, "eval_size": 1000},
    "d2l-copy-both-one-head": {"seed": 0, "samples": 10_000, "d_v": 16},
    "d2l-copy-both-two-heads": {"seed": 0, "samples": 10_000, "d_v": 16},
    "d2l-fig-10.3.1": {"seed": 0, "samples": 10_000, "d_v": 16},
    "d2l-crossattn-map": {"seed": 0, "query_word": "attention", "key_word": "translation", "d_model": 32},
}

ANY_SETTINGS = frozenset({"d2l-copy-both-one-head.theory"})  # a constant, sqrt(1/2): holds for any data


def sqrt_dk_text_draws(config: Mapping[str, Any]) -> list[bool]:
    """Per d_k of ``config["d_k"]``: are its random draws the text's?  They are when seed,
    trials and keys are the text's and the same d_k were drawn before it, in the same order."""
    dims = tuple(config["d_k"])
    same_setup = all(config.get(k) == v for k, v in TEXT["w9-sqrt-dk"].items())
    return [same_setup and dims[: i + 1] == SQRT_DK_DIMS[: i + 1] for i in range(len(dims))]


def text_settings(artifact_id: str) -> dict[str, Any]:
    """The settings a catalogue ID's values hold at: ``TEXT`` here, or the ``TEXT_SETTINGS`` of
    the check family that declares it (a new experiment's, beside its checks); {} for none."""
    if artifact_id in TEXT:
        return TEXT[artifact_id]
    from attn_cli.published.catalogue import family_modules

    declared = {k: v for module in family_modules() for k, v in getattr(module, "TEXT_SETTINGS", {}).items()}
    return declared.get(artifact_id, {})


def at_text_settings(check: Check, config: Mapping[str, Any] | None) -> bool:
    """True when ``config`` has every setting ``check``'s published value depends on (None: taken as the text's)."""
    if config is None or check.id in ANY_SETTINGS:
        return True
    required = text_settings(check.artifact)
    if not all(k in config and as_lists(config[k]) == as_lists(v) for k, v in required.items()):
        return False
    parts = check.id.split(".")  # what single checks depend on beyond their artifact's settings
    if parts[0] == "w9-sqrt-dk":
        d_k = int(parts[1])
        dims = tuple(config.get("d_k", ()))
        return d_k in dims and sqrt_dk_text_draws(config)[dims.index(d_k)]
    if parts[0] == "w9-scaling" and parts[-1] == "operations":
        return config.get("d_model") == SCALING_D_MODEL
    if check.id.startswith(("w9-heads.params.", "w9-heads.head_size.")):
        return config.get("d_model") == 64
    if check.id.startswith("d2l-mha-params."):
        return config.get("d2l_d_model") == 256
    return True
