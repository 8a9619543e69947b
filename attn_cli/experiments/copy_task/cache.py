"""The copy task's cache of finished runs (``<cache>/copy_task/<sha256>.json`` in the per-user
cache, opened by the pipeline): the runs' keys and what a valid run is.

Design notes: ``docs/design.md``, section ``attn_cli.experiments.copy_task.cache``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

from attn_cli.core import numerics
from attn_cli.core.copy_spec import BOS, RunOutcome, RunSpec
from attn_cli.experiments.copy_task.config import ENGINES
from attn_cli.published.copy_task import METRICS
from attn_cli.store import cache as results_cache
from attn_cli.store import entries
from attn_cli.store.typed import check, check_grid, check_len, check_range

CACHE_SUBDIR = Path("copy_task")  # the entries' folder in the cache
CACHE_FORMAT = 4  # bump when the cached fields change
# the sources that compute a run, relative to the package: a change to any of them is a cache miss
CODE_GLOBS = ("core/copy_*.py", "core/copy_*/**/*.py", "core/copy_*/**/*.c", "core/copy_*/**/*.h")


def code_digest() -> str:
    """SHA-256 over the source files that compute a run (:data:`CODE_GLOBS`), names and bytes."""
    return entries.code_digest(CODE_GLOBS)


def cache_key(spec: RunSpec, engine: str, device: str) -> dict:
    """Everything that determines a run's numbers (with the numeric mode, versions and code)."""
    fields = {"format": CACHE_FORMAT, "spec": dataclasses.asdict(spec), "engine": engine, "device": device}
    return entries.cache_key(fields, CODE_GLOBS, numerics.key(device))


def cache_path(root: str | os.PathLike, key: dict) -> Path:
    """Where ``key``'s entry lives under the cache folder ``root`` (to show, not to open)."""
    return results_cache.cache_path(root, CACHE_SUBDIR.name, key)


def max_entry_bytes(spec: dict) -> int:
    """The most bytes a run's payload can take: its attention map's floats (at most 26 characters
    each, ``-1.2345678901234567e-308, ``), its tokens, and a few hundred bytes of scalars."""
    return 4096 + 32 * (int(spec["length"]) + 2) ** 2


def load_cached(store: entries.Pieces, key: dict) -> RunOutcome | None:
    """The cached outcome for ``key`` if it is complete and was made for it; else None (none
    stored, or ``store.reuse`` False).  Raises ValueError (Refused, InvalidEntry: the reason) for
    an entry that cannot be trusted: its HMAC, size, key or types, or values its spec rules out."""
    return store.load(key, max_entry_bytes(key["spec"]), RunOutcome, check_outcome)


# what numerics.effective_isa() can record (torch.backends.cpu.get_cpu_capability's answers), and ""
ISAS = ("", "DEFAULT", "NO AVX", "AVX2", "AVX512", "VSX", "Z VECTOR", "SVE128", "SVE256", "SVE512", "unknown")
BACKENDS = ("torch", "kernel")  # RunOutcome.backend
KERNEL_ISAS = ("", "avx512", "avx2", "native", "baseline")  # RunOutcome.kernel_isa (core/copy_fast/kernel.py variants)
RAN_ON = ("worker", "host", "cpu")  # RunOutcome.ran_on's keys (attn_cli.experiments.copy_task.cluster.where)


def check_outcome(outcome: RunOutcome, key: dict) -> None:
    """What the run's spec implies (the spec and engine of ``key``, accuracies in [0, 1], for the
    attention model a length x length map and a diagonal fraction); InvalidEntry: the first misfit."""
    spec = outcome.spec
    check(dataclasses.asdict(spec) == key["spec"], "spec", "not the run it is stored for")
    check(
        outcome.engine == key["engine"] and outcome.engine in ENGINES,
        "engine",
        f"{outcome.engine[:40]!r} is not the {key['engine']!r} engine it is stored for",
    )
    check(outcome.isa in ISAS or outcome.isa == key["numerics"]["isa"], "isa", f"unknown ISA {outcome.isa[:40]!r}")
    check(outcome.backend in BACKENDS, "backend", f"unknown backend {outcome.backend[:40]!r}")
    check(outcome.kernel_isa in KERNEL_ISAS, "kernel_isa", f"unknown kernel variant {outcome.kernel_isa[:40]!r}")
    if outcome.ran_on is not None:  # a run from a Dask worker: its address, host and CPU model
        check(set(outcome.ran_on) == set(RAN_ON), "ran_on", f"expected the keys {', '.join(RAN_ON)}")
        check(all(len(v) <= 200 for v in outcome.ran_on.values()), "ran_on", "a value over 200 characters")
    for metric in METRICS:
        check_range([getattr(outcome, metric)], 0.0, 1.0, metric)
    check_range([outcome.final_loss], 0.0, math.inf, "final_loss")
    check_range([outcome.seconds, outcome.cpu_seconds], 0.0, math.inf, "seconds")
    L = spec.length
    if spec.model == "attention":
        check_len(outcome.example_src, L, "example_src")
        check_range(outcome.example_src, 0, BOS - 1, "example_src")  # digits: BOS is never a source token
        check_grid(outcome.example_weights, (L, L), "example_weights")
        check_range(outcome.example_weights, 0.0, 1.0, "example_weights")
        check(outcome.diagonal is not None, "diagonal", "missing for the attention model")
        check_range([outcome.diagonal], 0.0, 1.0, "diagonal")
    else:  # the plain model has no attention: the exact engine keeps its example sequence, the fast none
        check(len(outcome.example_src) in (0, L), "example_src", f"expected 0 or {L} items")
        check_range(outcome.example_src, 0, BOS - 1, "example_src")
        check(not outcome.example_weights, "example_weights", "the plain model has no attention map")
        check(outcome.diagonal is None, "diagonal", "the plain model has no attention map")
