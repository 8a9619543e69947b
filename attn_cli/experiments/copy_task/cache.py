"""The copy task's cache of finished runs: ``<cache>/copy_task/<sha256>.json`` in the per-user
cache (:mod:`attn_cli.cache`), shared by every ``--out``.

An entry is keyed by everything that determines a run (:func:`cache_key`): the RunSpec,
engine, device, the numeric mode and CPU kernels (:mod:`attn_cli.numerics`), the package
and torch versions and a digest of the source files that compute a run (:func:`code_digest`
over :data:`CODE_GLOBS`).  Each entry carries an HMAC under this user's cache key; a corrupt,
truncated, edited or foreign entry is reported and recomputed, never trusted.  An entry is
read only up to the size its spec allows (:func:`max_entry_bytes`).  The entry format is
:mod:`attn_cli.cache`'s, shared with every cached experiment.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from attn_cli import cache as results_cache
from attn_cli.core.copy_spec import RunOutcome, RunSpec
from attn_cli.experiments.copy_task.config import METRICS

CACHE_SUBDIR = Path("copy_task")  # the entries' folder in the cache
CACHE_FORMAT = 3  # bump when the cached fields change
# the sources that compute a run (models, data, training loop, both engines, the kernel), relative
# to the package: a change to any of them is a cache miss
CODE_GLOBS = ("core/copy_*.py", "core/copy_*/**/*.py", "core/copy_*/**/*.c", "core/copy_*/**/*.h")


def code_digest() -> str:
    """SHA-256 over the source files that compute a run (:data:`CODE_GLOBS`), names and bytes."""
    return results_cache.code_digest(CODE_GLOBS)


def cache_key(spec: RunSpec, engine: str, device: str) -> dict:
    """Everything that determines a run's numbers (with the numeric mode, versions and code)."""
    fields = {"format": CACHE_FORMAT, "spec": dataclasses.asdict(spec), "engine": engine, "device": device}
    return results_cache.cache_key(fields, CODE_GLOBS, device)


def cache_path(root: str | os.PathLike, key: dict) -> Path:
    """Where ``key``'s entry lives under the cache folder ``root`` (to show, not to open)."""
    return results_cache.cache_path(root, CACHE_SUBDIR.name, key)


def max_entry_bytes(spec: dict) -> int:
    """The most bytes a run's payload can take, from its spec: the attention map of one
    sequence, (length + 1) decoder steps x length inputs floats of at most 26 characters
    each (``-1.2345678901234567e-308, ``), its tokens, and a few hundred bytes of scalars."""
    length = int(spec["length"])
    return 4096 + 32 * (length + 2) ** 2


def load_cached(store: results_cache.Cache, key: dict) -> RunOutcome | None:
    """The cached outcome for ``key`` if it is complete and was made for it; else None.

    Raises ValueError (with the reason) for an entry that exists but cannot be trusted.
    """
    payload = store.load(CACHE_SUBDIR.name, key, max_entry_bytes(key["spec"]))
    if payload is None:
        return None
    try:
        outcome = results_cache.revive(RunOutcome, payload)
        if dataclasses.asdict(outcome.spec) != key["spec"]:
            raise ValueError("its run does not match")
        if not all(0.0 <= getattr(outcome, m) <= 1.0 for m in METRICS):
            raise ValueError("its accuracies are out of range")
        return outcome
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def store_cached(store: results_cache.Cache, key: dict, outcome: RunOutcome) -> None:
    """Store a finished run (atomic, signed); raises :class:`attn_cli.cache.Unavailable`."""
    store.store(CACHE_SUBDIR.name, key, dataclasses.asdict(outcome))
