"""W9 2.3: the copy task, with attention and without (the "Week 8" plain encoder-decoder).

Design notes: ``docs/design.md``, section ``attn_cli.experiments.copy_task``.
"""

from __future__ import annotations

import threading
import time
from typing import cast

from attn_cli.core.copy_spec import RunOutcome
from attn_cli.errors import AttnError
from attn_cli.experiments.copy_task.cache import (
    CACHE_SUBDIR,
    CODE_GLOBS,
    cache_key,
    cache_path,
    load_cached,
    max_entry_bytes,
)
from attn_cli.experiments.copy_task.config import (
    ENGINES,
    LOCAL_FIELDS,
    TEXT_LENGTHS,
    Config,
    check_memory,
    estimate_bytes,
    validate,
    verify_config,
)
from attn_cli.experiments.copy_task.engines import (
    Done,
    Report,
    Todo,
    fast_engine,
    run_exact_engine,
    run_fast_engine,
    schedule,
)
from attn_cli.experiments.copy_task.results import Result, assemble, diagonal_fraction
from attn_cli.experiments.progress import ProgressCallback, ProgressEvent
from attn_cli.published.copy_task import METRICS
from attn_cli.store.cache import Unavailable
from attn_cli.store.entries import Pieces

ARTIFACTS = ("w9-copy-task", "w9-copy-task-map")
SLOW = True  # minutes of training at the text's settings
CACHED = False  # not its Result: each training run is cached on its own (cache.py), keyed by its code
CACHES_PIECES = True  # the pipeline hands run() the opened cache (store=): a Ctrl-C keeps the finished runs
INTERRUPTED = "workers stopped; finished runs are cached, a rerun resumes from them"  # said after Ctrl-C
# the catalogue's figures; with several seeds per cell also copy_task_seeds.png (+ .csv), which no entry lists
FIGURES = ("copy_task_accuracy.png", "copy_task_attention_L{length}.png")

__all__ = [
    "ARTIFACTS",
    "CACHE_SUBDIR",
    "CODE_GLOBS",
    "ENGINES",
    "LOCAL_FIELDS",
    "METRICS",
    "TEXT_LENGTHS",
    "Config",
    "Result",
    "assemble",
    "cache_key",
    "cache_path",
    "check_memory",
    "diagonal_fraction",
    "estimate_bytes",
    "load_cached",
    "max_entry_bytes",
    "preflight",
    "run",
    "schedule",
    "validate",
    "verify_config",
]


def preflight(config: Config) -> None:
    """Refused before any work (exit 1): the fast engine where this build lacks it, runs too big for memory."""
    if "fast" in config.engines:
        fast_engine()
    check_memory(config)


def run(config: Config, progress: ProgressCallback = None, store: Pieces | None = None) -> Result:
    """Every run of ``config``, aggregated; ``progress`` hears a ProgressEvent per report of a run
    (``item``: its index in ``config.plan()``, ``item_done``: its steps, ``value``: its loss).
    ``store``: this experiment's pieces of the cache (None: none): cached runs are reused (unless
    ``store.reuse`` or ``config.use_cache`` is False), each finished run is stored at once.  With more
    than one job the runs go to forkserver processes: a script needs the ``__main__`` guard."""
    start = time.perf_counter()
    validate(config)
    preflight(config)  # a clear error now, before any work
    sweep = _Sweep(config, store, progress)
    _train(sweep.reuse_cached(), config, sweep.report, sweep.done)
    outcomes = cast(list[RunOutcome], sweep.outcomes)
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
        """The runs still to train; each cached outcome (where reuse is on) kept and reported as
        "cached", an unreadable entry noted."""
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
        """Refuse an outcome computed on other CPU kernels than its key's; keep it, store it at once
        (Ctrl-C keeps it), and report it as "done"."""
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
    """Train the fast seeds beside the exact ones: only where the exact runs go to worker
    processes (an in-process exact run shares torch's thread setting: its bits must not)."""
    return config.device == "cpu" and min(config.worker_count(), len(exact)) > 1


def _exact_beside_fast(exact: Todo, fast: Todo, config: Config, report: Report, done: Done) -> None:
    """The exact runs in their worker processes and meanwhile the fast ones in a thread here (on the
    cores the short exact runs leave idle); each run computes as alone.  An error or Ctrl-C stops both."""
    lock, stop = threading.Lock(), threading.Event()
    failure: list[BaseException] = []

    def locked(index: int, outcome: RunOutcome) -> None:
        with lock:
            done(index, outcome)

    def fast_thread() -> None:
        try:
            run_fast_engine(fast, config, report, locked, stop)  # one thread per core
        except BaseException as exc:  # handed to the main thread
            failure.append(exc)

    thread = threading.Thread(target=fast_thread, name="copy-task fast seeds", daemon=True)
    thread.start()
    try:
        run_exact_engine(exact, config, report, locked)
    except BaseException:
        stop.set()
        raise
    finally:
        thread.join()
    if failure:
        raise failure[0]
