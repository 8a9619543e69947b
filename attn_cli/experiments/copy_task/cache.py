"""The copy task's cache of finished runs: ``<cache_root>/.cache/copy_task/<sha256>.json``.

An entry is keyed by everything that determines a run (:func:`cache_key`): the RunSpec,
engine, device, the numeric mode and CPU kernels (:mod:`attn_cli.numerics`), the package
and torch versions and a digest of the source files that compute a run (:func:`code_digest`
over :data:`CODE_GLOBS`).  Each entry stores a digest of its own payload; a corrupt,
truncated or edited entry is reported and recomputed, never trusted.  The entry format and
the digests are :mod:`attn_cli.cache`'s, shared with every cached experiment.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from attn_cli import cache as results_cache
from attn_cli.core.copy_spec import RunOutcome, RunSpec
from attn_cli.experiments.copy_task.config import METRICS

CACHE_SUBDIR = Path(".cache") / "copy_task"
CACHE_FORMAT = 3  # bump when the cached fields change
# the sources that compute a run (models, data, training loop, both engines, the kernel), relative
# to the package: a change to any of them is a cache miss
CODE_GLOBS = ("core/copy_*.py", "core/copy_*/**/*.py", "core/copy_*/**/*.c", "core/copy_*/**/*.h")
payload_digest = results_cache.digest  # the digest an entry stores of its payload


def code_digest() -> str:
    """SHA-256 over the source files that compute a run (:data:`CODE_GLOBS`), names and bytes."""
    return results_cache.code_digest(CODE_GLOBS)


def cache_key(spec: RunSpec, engine: str, device: str) -> dict:
    """Everything that determines a run's numbers (with the numeric mode, versions and code)."""
    fields = {"format": CACHE_FORMAT, "spec": dataclasses.asdict(spec), "engine": engine, "device": device}
    return results_cache.cache_key(fields, CODE_GLOBS)


def cache_path(root: str | os.PathLike, key: dict) -> Path:
    return results_cache.cache_path(root, CACHE_SUBDIR.name, key)


def load_cached(path: Path, key: dict) -> RunOutcome | None:
    """The cached outcome at ``path`` if it is complete and was made for ``key``; else None.

    Raises ValueError (with the reason) for a file that exists but cannot be trusted.
    """
    payload = results_cache.load_json(path, key)
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


def store_cached(path: Path, key: dict, outcome: RunOutcome) -> None:
    results_cache.store_json(path, key, dataclasses.asdict(outcome))  # atomic, with its digest
