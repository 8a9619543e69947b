"""W9 2.3: the copy task, with attention and without (the "Week 8" plain encoder-decoder); design notes:
``docs/design.md``, section ``attn_cli.experiments.copy_task``."""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, cast

from attn_cli.core.copy_spec import RunOutcome
from attn_cli.errors import AttnError
from attn_cli.experiments import ProgressCallback, ProgressEvent
from attn_cli.experiments.copy_task.config import (
    ENGINES,
    LOCAL_FIELDS,
    Config,
    cache_key,
    check_memory,
    estimate_bytes,
    load_cached,
    recorded,
    validate,
    verify_config,
)
from attn_cli.experiments.copy_task.engines import Done, Report, Todo, fast_engine, run_exact_engine, run_fast_engine
from attn_cli.published.copy_task import CHECK_IDS, MAP_RULE_ID, METRICS, MapSample, check_id
from attn_cli.published.seed_rule import SeedSample
from attn_cli.store.cache import Unavailable
from attn_cli.store.entries import Pieces

if TYPE_CHECKING:
    from attn_cli.published.compare import Outcome

ARTIFACTS = ("w9-copy-task", "w9-copy-task-map")
SLOW = True  # minutes of training at the text's settings
CACHED = False  # not its Result: each training run is cached on its own (config.py), keyed by its code
CACHES_PIECES = True  # the pipeline hands run() the opened cache (store=): a Ctrl-C keeps the finished runs
INTERRUPTED = "workers stopped; finished runs are cached, a rerun resumes from them"  # said after Ctrl-C
# the catalogue's figures; with several seeds per cell also copy_task_seeds.png (+ .csv), which no entry lists
FIGURES = ("copy_task_accuracy.png", "copy_task_attention_L{length}.png")

__all__ = [
    "ARTIFACTS",
    "ENGINES",
    "LOCAL_FIELDS",
    "METRICS",
    "Config",
    "Result",
    "assemble",
    "cache_key",
    "check_memory",
    "diagonal_fraction",
    "estimate_bytes",
    "load_cached",
    "preflight",
    "run",
    "validate",
    "verify_config",
]


@dataclass
class Result:
    config: dict  # config.recorded(config): the Config without this machine's set-up
    rows: list[dict] = field(default_factory=list)  # per run: model, length, seed, engine, accuracies, diagonal
    cells: list[dict] = field(default_factory=list)  # per (model, length): mean, std, min, max per metric
    maps: list[dict] = field(default_factory=list)  # attention, per length (first seed): src, weights, diagonal
    runs: list[dict] = field(default_factory=list)  # per run: seconds, loss, engine, isa, backend, kernel_isa, cached
    seconds: float = 0.0  # wall time of run()
    notes: list[str] = field(default_factory=list)  # cache repairs and other remarks for stderr
    TIMING: ClassVar[tuple[str, ...]] = ("seconds", "runs.*.seconds", "runs.*.cpu_seconds")  # JSON: under "timing"

    def cell(self, model: str, length: int) -> dict | None:
        return next((c for c in self.cells if c["model"] == model and c["length"] == length), None)

    def cached_runs(self) -> tuple[int, int]:
        """(training runs taken from the cache, training runs)."""
        return sum(bool(r["cached"]) for r in self.runs), len(self.runs)

    def cache_line(self) -> str:
        """How many training runs came from the cache, e.g. "8 training runs: 8 from cache"."""
        cached, n = self.cached_runs()
        return f"{n} training run{'s' if n != 1 else ''}: {cached} from cache, {n - cached} computed"

    def published_beside(self, outcomes: Mapping[str, Outcome]) -> dict[str, Any]:
        """The JSON's cells, each metric with its ``published`` value and ``status`` (None where the text has none)."""
        cells = copy.deepcopy(self.cells)
        for c in cells:
            for metric in METRICS:
                found = outcomes.get(check_id(c["model"], c["length"], metric))
                c[metric]["published"] = None if found is None else found.published
                c[metric]["status"] = None if found is None else found.status
        return {"cells": cells}

    def measured(self) -> dict[str, Any]:
        """Check ID -> regenerated value: per published cell a SeedSample (the first seed's value,
        and every seed's, judged by the seed rule); for the map, a MapSample of every attention run."""
        out: dict[str, Any] = {}
        for c in self.cells:
            rows = [r for r in self.rows if r["model"] == c["model"] and r["length"] == c["length"]]
            for metric in METRICS:
                cid = check_id(c["model"], c["length"], metric)
                if cid in CHECK_IDS:
                    values, seeds, engines = ([r[k] for r in rows] for k in (metric, "seed", "engine"))
                    out[cid] = SeedSample(value=values[0], values=values, seeds=seeds, engines=engines)
        att = [r for r in self.rows if r["model"] == "attention"]
        if att:
            lengths, seeds, diag, free = ([r[k] for r in att] for k in ("length", "seed", "diagonal", "free_running"))
            out[MAP_RULE_ID] = MapSample(lengths=lengths, seeds=seeds, diagonal=diag, free_running=free)
        return out


def diagonal_fraction(weights: list[list[float]]) -> float:
    """Fraction of decoder steps t whose readout attention peaks at input position t (one sequence)."""
    if not weights:
        return float("nan")
    hits = sum(max(range(len(row)), key=row.__getitem__) == t for t, row in enumerate(weights))
    return hits / len(weights)


def _stats(values: list[float]) -> dict:
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "std": std, "min": min(values), "max": max(values)}


def _aggregate(config: Config, outcomes: list[RunOutcome]) -> tuple[list[dict], list[dict]]:
    cells, maps = [], []
    for model in config.model_list:
        for length in config.lengths:
            group = [o for o in outcomes if o.spec.model == model and o.spec.length == length]
            cell = {"model": model, "length": length, "n": len(group), "seeds": [o.spec.seed for o in group]}
            cells.append(cell | {metric: _stats([getattr(o, metric) for o in group]) for metric in METRICS})
            first = group[0]
            if first.example_weights:
                maps.append(
                    {
                        "model": model,
                        "length": length,
                        "seed": first.spec.seed,
                        "src": list(first.example_src),
                        "weights": first.example_weights,
                        "free_running": first.free_running,
                        "diagonal": diagonal_fraction(first.example_weights),
                        "diagonal_all": _stats([o.diagonal for o in group if o.diagonal is not None])["mean"],
                    }
                )
    return cells, maps


# a row's and a run's fields after the run's model, length and seed (RunOutcome's names)
ROW_FIELDS = ("engine", "teacher_forced", "free_running", "exact", "diagonal")
RUN_FIELDS = ("seconds", "cpu_seconds", "final_loss", "engine", "isa", "backend", "kernel_isa")


def assemble(
    config: Config,
    outcomes: list[RunOutcome],
    cached: list[bool] | None = None,
    seconds: float = 0.0,
    notes: list[str] | None = None,
) -> Result:
    """The Result of ``config`` from its runs' outcomes (in plan order)."""
    cached = cached or [False] * len(outcomes)
    which = [{"model": o.spec.model, "length": o.spec.length, "seed": o.spec.seed} for o in outcomes]
    rows = [{**w, **{k: getattr(o, k) for k in ROW_FIELDS}} for w, o in zip(which, outcomes)]
    runs = [
        {**w, **{k: getattr(o, k) for k in RUN_FIELDS}, "cached": c, **({"ran_on": o.ran_on} if o.ran_on else {})}
        for w, o, c in zip(which, outcomes, cached)
    ]
    cells, maps = _aggregate(config, outcomes)
    return Result(
        config=recorded(config), rows=rows, cells=cells, maps=maps, runs=runs, seconds=seconds, notes=list(notes or [])
    )


def preflight(config: Config) -> None:
    """Refused before any work (exit 1): the fast engine where this build lacks it, runs too big for memory."""
    if "fast" in config.engines:
        fast_engine()
    check_memory(config)


def run(config: Config, progress: ProgressCallback = None, store: Pieces | None = None) -> Result:
    """Every run of ``config``, aggregated; ``progress`` hears a ProgressEvent per report of a run.  ``store``:
    this experiment's pieces of the cache (None: none): cached runs reused, each finished run stored at once.
    With more than one job the runs go to forkserver processes: a script needs the ``__main__`` guard."""
    start = time.perf_counter()
    validate(config)
    preflight(config)  # a clear error now, before any work
    sweep = _Sweep(config, store, progress)
    _train(sweep.reuse_cached(), config, sweep.report, sweep.done)
    outcomes = cast(list[RunOutcome], sweep.outcomes)  # every run cached or trained
    return assemble(config, outcomes, sweep.cached, seconds=time.perf_counter() - start, notes=sweep.notes)


class _Sweep:
    """The runs of one :func:`run`: their cache keys, their outcomes (cached or trained), the notes."""

    def __init__(self, config: Config, store: Pieces | None, progress: ProgressCallback) -> None:
        self.config, self.store, self.progress, self.specs = config, store, progress, config.plan()
        self.finished: set[int] = set()  # runs done or cached
        self.keys = [cache_key(spec, config.engine_of(spec), config.device) for spec in self.specs]
        self.outcomes: list[RunOutcome | None] = [None] * len(self.specs)
        self.cached = [False] * len(self.specs)
        self.notes: list[str] = []
        self.writable = store is not None  # until a write fails: then one note, and no more writes

    def report(self, index: int, step: int, steps: int, loss: float, status: str) -> None:
        """An engine's ``(run, step, steps, loss, status)`` report, as a ProgressEvent."""
        if status in ("done", "cached"):
            self.finished.add(index)
        if self.progress is not None:
            self.progress(
                ProgressEvent(
                    len(self.finished),
                    len(self.specs),
                    f"run {index}: step {step}/{steps}, loss {loss:.3f}",
                    item=index,
                    item_done=step,
                    item_total=steps,
                    value=loss,
                    status=status,
                )
            )

    def reuse_cached(self) -> Todo:
        """The runs still to train; each cached outcome kept and reported, an unreadable entry noted."""
        store, todo = self.store, []
        for i, spec in enumerate(self.specs):
            if store is not None and store.reuse and self.config.use_cache:
                try:
                    self.outcomes[i] = load_cached(store, self.keys[i])
                except ValueError as exc:
                    self.notes.append(
                        f"cache entry {store.path(self.keys[i]).as_posix()} for the {spec.model} run at length "
                        f"{spec.length}, seed {spec.seed} is unreadable ({exc}); recomputing it"
                    )
                if (found := self.outcomes[i]) is not None:
                    self.cached[i] = True
                    self.report(i, spec.steps, spec.steps, found.final_loss, "cached")
                    continue
            todo.append((i, spec))
        return todo

    def done(self, index: int, outcome: RunOutcome) -> None:
        """Refuse an outcome computed on other CPU kernels than its key's; keep it, store it, report it."""
        key, steps = self.keys[index], self.specs[index].steps
        want = key["numerics"]["isa"]
        if self.config.device == "cpu" and outcome.isa and outcome.isa != want:
            raise AttnError(
                f"the {outcome.spec.model} run at length {outcome.spec.length} ran on {outcome.isa} "
                f"kernels, not the {want} kernels of --numerics {key['numerics']['mode']}"
            )
        self.outcomes[index] = outcome
        if self.writable and self.store is not None:
            try:
                self.store.store(key, outcome)  # each finished run at once: Ctrl-C keeps it
            except Unavailable as exc:
                self.writable = False
                self.notes.append(f"runs are no longer cached: {exc}")
        self.report(index, steps, steps, outcome.final_loss, "done")


def _train(todo: Todo, config: Config, report: Report, done: Done) -> None:
    """Every run of ``todo`` on its engine: the Dask cluster, exact beside fast, or one after the other."""
    exact = [(i, spec) for i, spec in todo if config.engine_of(spec) == "exact"]
    fast = [(i, spec) for i, spec in todo if config.engine_of(spec) == "fast"]
    if config.scheduler and todo:  # every run not cached, of either engine, on the Dask cluster
        from attn_cli.experiments.copy_task.cluster import run_cluster_engine

        run_cluster_engine(todo, config, report, done)
    elif exact and fast and _overlap(config, exact):
        _exact_beside_fast(exact, fast, config, report, done)
    else:  # exact first (the text's program), then the extra seeds
        if exact:
            run_exact_engine(exact, config, report, done)
        if fast:
            run_fast_engine(fast, config, report, done)


def _overlap(config: Config, exact: Todo) -> bool:
    """Fast seeds beside exact ones only where the exact runs are in worker processes (not sharing our threads)."""
    return config.device == "cpu" and min(config.worker_count(), len(exact)) > 1


def _exact_beside_fast(exact: Todo, fast: Todo, config: Config, report: Report, done: Done) -> None:
    """The exact runs in worker processes, meanwhile the fast ones in a thread here; an error or Ctrl-C stops both."""
    lock, stop = threading.Lock(), threading.Event()

    def locked(index: int, outcome: RunOutcome) -> None:
        with lock:
            done(index, outcome)

    with ThreadPoolExecutor(1, thread_name_prefix="copy-task fast seeds") as pool:
        fast_seeds = pool.submit(run_fast_engine, fast, config, report, locked, stop)  # one thread per core
        try:
            run_exact_engine(exact, config, report, locked)
        except BaseException:
            stop.set()
            raise
        fast_seeds.result()
