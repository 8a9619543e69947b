"""The copy task's configuration, checked before any work, and its finished runs in the cache (their keys, what a
valid run is; ``<cache>/copy_task/<sha256>.json``).  Design notes: ``docs/design.md``, this package's sections."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from attn_cli.core import memory, numerics
from attn_cli.core.copy_spec import BOS, MODELS, RunOutcome, RunSpec, available_cpus
from attn_cli.errors import AttnError
from attn_cli.experiments import QuickConfig
from attn_cli.published import seed_rule
from attn_cli.published.copy_task import ATTENTION, METRICS
from attn_cli.store import entries
from attn_cli.store.typed import check, check_grid, check_len, check_range

TEXT_LENGTHS = tuple(ATTENTION)  # the lengths W9 2.3 prints (4 8 16 32)
MODEL_CHOICES = ("attention", "plain", "both")
ENGINES = ("exact", "fast")


@dataclass(frozen=True)
class Config(QuickConfig):
    QUICK: ClassVar[dict[str, Any]] = {"steps": 30, "eval_size": 100}  # all four lengths: seconds, not minutes
    seed: int = 0  # the seed of the single run per cell when ``seeds`` is empty (text: 0)
    device: str = "cpu"  # cpu: bit-exact with the text's program; cuda: same draws, GPU kernels
    lengths: tuple[int, ...] = TEXT_LENGTHS  # sequence lengths to copy
    seeds: tuple[int, ...] = ()  # several seeds: each cell becomes mean ± std; empty: (seed,)
    model: str = "both"  # attention (W9 2.3), plain (Week 8) or both side by side
    steps: int = 2500  # Adam steps per run
    hidden_size: int = 32  # GRU hidden size (RunSpec.hidden)
    batch_size: int = 64  # training batch
    lr: float = 3e-3  # Adam learning rate
    eval_size: int = 1000  # one evaluation batch, drawn after training
    jobs: int | None = None  # worker processes; None: the CPU count (cuda: one, the GPU's)
    engine: str = "exact"  # exact (bitwise the text's program) or fast (statistically equivalent)
    use_cache: bool = True  # False: recompute (and overwrite) cached runs (the cache: run()'s store)
    extra_seed_engine: str | None = None  # engine of every seed after the first; None: ``engine``
    scheduler: str | None = None  # a Dask scheduler's address: every run not cached trains there; never recorded
    scheduler_from: str | None = None  # where that address came from (--scheduler, ATTN_SCHEDULER): for errors
    worker_wait: float = 120.0  # seconds a cluster sweep waits without any worker before it gives up (--worker-wait)

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(self.seeds) or (self.seed,)

    @property
    def model_list(self) -> tuple[str, ...]:
        return MODELS if self.model == "both" else (self.model,)

    def plan(self) -> list[RunSpec]:
        """Every run of this configuration, in display order (model, length, seed)."""
        base = RunSpec(steps=self.steps, hidden=self.hidden_size, batch_size=self.batch_size, lr=self.lr)
        return [
            dataclasses.replace(base, model=m, length=L, seed=s, eval_size=self.eval_size)
            for m in self.model_list
            for L in self.lengths
            for s in self.seed_list
        ]

    def engine_of(self, spec: RunSpec) -> str:
        """The engine that trains ``spec``: ``engine`` for the first seed, else ``extra_seed_engine``."""
        return self.extra_seed_engine if self.extra_seed_engine and spec.seed != self.seed_list[0] else self.engine

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.engine_of(s) for s in self.plan()))

    def worker_count(self) -> int:
        """Worker processes: ``jobs``, else the CPUs this process may use; cuda: one (the GPU's)."""
        return self.jobs or (1 if self.device.split(":")[0] == "cuda" else available_cpus())


# this machine's set-up: never in a Result, its JSON or a report
LOCAL_FIELDS = ("scheduler", "scheduler_from", "worker_wait")


def recorded(config: Config) -> dict:
    """The configuration as a Result records it: every field but :data:`LOCAL_FIELDS`."""
    return {k: v for k, v in dataclasses.asdict(config).items() if k not in LOCAL_FIELDS}


def verify_config(config: Config, seeds: int | None = None) -> Config:
    """What ``attn verify`` trains: ``seeds`` seeds (default ``MIN_SEEDS``) from ``--seed`` on, the first
    with ``config.engine``, the others with the fast engine (the same seed distribution, in less time)."""
    first, n = config.seed_list[0], seed_rule.MIN_SEEDS if seeds is None else seeds
    if n < 1:
        raise AttnError(f"the seed rule needs at least one seed, not {n}")
    return dataclasses.replace(config, seeds=tuple(range(first, first + n)), extra_seed_engine="fast")


def validate(config: Config) -> None:
    """Domain checks (the CLI checks the same earlier, with click's messages)."""
    if not config.lengths:
        raise AttnError("copy-task needs at least one length")
    for name in ("steps", "hidden_size", "batch_size", "eval_size"):
        if getattr(config, name) < 1:
            raise AttnError(f"copy-task {name.replace('_', '-')} must be at least 1, not {getattr(config, name)}")
    if any(L < 1 for L in config.lengths):
        raise AttnError(f"copy-task lengths must be at least 1, not {min(config.lengths)}")
    if config.jobs is not None and config.jobs < 1:
        raise AttnError(f"--jobs must be at least 1, not {config.jobs}")
    if not (config.lr > 0 and math.isfinite(config.lr)):
        raise AttnError(f"--lr must be a positive number, not {config.lr}")
    if config.model not in MODEL_CHOICES:
        raise AttnError(f"unknown model {config.model!r}; choose from {', '.join(MODEL_CHOICES)}")
    for engine in (config.engine, config.extra_seed_engine or config.engine):
        if engine not in ENGINES:
            raise AttnError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


def run_peak_bytes(spec: RunSpec) -> int:
    """Estimated peak memory of one run (float32), the larger of training and evaluation: per sequence
    and decoder step about (4 T + 10 h + 100) autograd floats in training, (3 h + 2 V + 16) in evaluation;
    the parameters, their gradients and Adam's moments add 4 x (10 h^2 + 200 h)."""
    L, h = spec.length, spec.hidden
    train = spec.batch_size * L * (4 * L + 10 * h + 100)
    evaluate = spec.eval_size * L * (3 * h + 2 * 12 + 16) + spec.eval_size * (4 * L + 4 * h)
    params = 4 * (10 * h * h + 200 * h)
    return 4 * (max(train, evaluate) + params)


def _concurrent(config: Config, specs: list[RunSpec]) -> int:
    """Runs held in memory at once: one per worker (exact), or all of them (fast: one batch)."""
    return min(config.worker_count(), len(specs)) if config.engines == ("exact",) else len(specs)


def estimate_bytes(config: Config) -> int:
    """The largest run's peak times the runs held at once."""
    specs = config.plan()
    return max(map(run_peak_bytes, specs)) * _concurrent(config, specs) if specs else 0


def check_memory(config: Config) -> None:
    """Refuse up front runs that would not fit (all workers at once); not with a Dask scheduler (its workers train)."""
    specs = config.plan()
    if not specs or config.scheduler:
        return
    worst = max(specs, key=run_peak_bytes)
    what = (
        f"copy-task at length {worst.length} (hidden {worst.hidden}, batch {worst.batch_size}, "
        f"eval size {worst.eval_size}, {_concurrent(config, specs)} run(s) at once)"
    )
    n = processes(config, specs)
    memory.guard(estimate_bytes(config), what, config.device, processes=n, workers=n - 1)


def processes(config: Config, specs: list[RunSpec]) -> int:
    """Processes that compute (each with a CUDA context on a GPU): this one and the exact engine's pool workers."""
    workers = min(config.worker_count(), sum(config.engine_of(s) == "exact" for s in specs))
    return 1 + (workers if workers > 1 else 0)


# --------------------------------------------------------------------------- the cache of finished runs

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


def max_entry_bytes(spec: dict) -> int:
    """The most bytes a run's payload can take: its map's floats (26 characters at most), tokens and scalars."""
    return 4096 + 32 * (int(spec["length"]) + 2) ** 2


def load_cached(store: entries.Pieces, key: dict) -> RunOutcome | None:
    """The cached outcome for ``key``, else None (none stored, or ``store.reuse`` False); ValueError (Refused,
    InvalidEntry) for an entry that cannot be trusted: its HMAC, size, key, types, or values its spec rules out."""
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
