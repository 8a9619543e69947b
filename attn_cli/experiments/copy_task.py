"""W9 2.3: the copy task, with attention and without (the "Week 8" plain encoder-decoder).

One *run* is one (model, length, seed) training and evaluation (:class:`RunSpec`); the
table is the runs of a :class:`Config`, aggregated per (model, length) over the seeds.

- ``engine="exact"`` runs :func:`attn_cli.core.copy_train.train_and_evaluate`, equal to
  the W9 2.3 program bit for bit on CPU; runs are spread over ``jobs`` worker processes
  (forkserver, one intra-op thread each, longest runs first), which changes no number.
- ``engine="fast"`` hands the runs to :func:`attn_cli.core.copy_fast.run_fast` (other
  kernels, statistically equivalent numbers).
- ``extra_seed_engine``: the engine of every seed after the first (``attn verify`` trains
  seed 0 with the exact engine and seeds 1-4 with the fast one, whose seed distribution
  matches the exact engine's: see ``benchmarks/copy_task_seeds.py``).
- A finished run is cached under ``<cache_root>/.cache/copy_task/<sha256>.json``, keyed by
  everything that determines it: the RunSpec, engine, device, the numeric mode and the CPU
  kernels (:mod:`attn_cli.numerics`), the torch version and a digest of the source files
  that compute a run (:func:`code_digest`).  Each entry stores a digest of its own payload;
  a corrupt, truncated or edited entry is recomputed, never trusted.

torch is imported only when a run has to be computed, so a fully cached rerun is fast.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from attn_cli.core.copy_spec import MODELS, RunOutcome, RunSpec
from attn_cli.errors import AttnError

ARTIFACTS = ("w9-copy-task", "w9-copy-task-map")

TEXT_LENGTHS = (4, 8, 16, 32)  # the lengths W9 2.3 prints
MODEL_CHOICES = ("attention", "plain", "both")
ENGINES = ("exact", "fast")
CACHE_SUBDIR = Path(".cache") / "copy_task"
CACHE_FORMAT = 2  # bump when the cached fields change
# the sources that compute a run (models, data, training loop, both engines, the kernel), relative
# to the package: a change to any of them is a cache miss
CODE_GLOBS = ("core/copy_*.py", "core/copy_*/**/*.py", "core/copy_*/**/*.c", "core/copy_*/**/*.h")
PLAIN_COST = 0.5  # a plain run costs about half an attention run (no attention bmm; measured 0.45-0.5)
METRICS = ("teacher_forced", "free_running", "exact")

# (run index in plan order, step, total steps, loss, status: "running" | "cached" | "done")
Report = Optional[Callable[[int, int, int, float, str], None]]


@dataclass(frozen=True)
class Config:
    seed: int = 0  # the seed of the single run per cell when ``seeds`` is empty (text: 0)
    device: str = "cpu"  # cpu: bit-exact with the text's program; cuda: same draws, GPU kernels
    lengths: tuple[int, ...] = TEXT_LENGTHS  # sequence lengths to copy
    seeds: tuple[int, ...] = ()  # several seeds: each cell becomes mean ± std; empty: (seed,)
    model: str = "both"  # attention (W9 2.3), plain (Week 8) or both side by side
    steps: int = 2500  # Adam steps per run
    hidden: int = 32  # GRU hidden size
    batch_size: int = 64  # training batch
    lr: float = 3e-3  # Adam learning rate
    eval_size: int = 1000  # one evaluation batch, drawn after training
    jobs: Optional[int] = None  # worker processes; None: the CPU count
    engine: str = "exact"  # exact (bitwise the text's program) or fast (statistically equivalent)
    cache_root: Optional[str] = None  # folder whose .cache/copy_task/ holds finished runs; None: no cache
    use_cache: bool = True  # False: recompute (and overwrite) cached runs
    extra_seed_engine: Optional[str] = None  # engine of every seed after the first; None: ``engine``

    @classmethod
    def quick(cls, **overrides) -> "Config":
        """All four lengths, but 30 steps and 100 evaluation sequences: seconds, not minutes."""
        return cls(**{"steps": 30, "eval_size": 100, **overrides})

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(self.seeds) or (self.seed,)

    @property
    def model_list(self) -> tuple[str, ...]:
        return MODELS if self.model == "both" else (self.model,)

    def plan(self) -> list[RunSpec]:
        """Every run of this configuration, in display order (model, length, seed)."""
        return [RunSpec(model=m, length=L, seed=s, steps=self.steps, hidden=self.hidden,
                        batch_size=self.batch_size, lr=self.lr, eval_size=self.eval_size)
                for m in self.model_list for L in self.lengths for s in self.seed_list]

    def engine_of(self, spec: RunSpec) -> str:
        """The engine that trains ``spec``: ``engine`` for the first seed, else ``extra_seed_engine``."""
        if self.extra_seed_engine and spec.seed != self.seed_list[0]:
            return self.extra_seed_engine
        return self.engine

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.engine_of(s) for s in self.plan()))

    def worker_count(self) -> int:
        """Worker processes: ``jobs``, or the CPUs this process may use."""
        if self.jobs:
            return self.jobs
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            return os.cpu_count() or 1

    def is_text_setting(self) -> bool:
        """The text's training and evaluation sizes (published values apply)."""
        from attn_cli.published.copy_task import is_text_setting

        return is_text_setting(dataclasses.asdict(self))


def verify_config(config: Config) -> Config:
    """What ``attn verify`` trains: the text's configuration over the seeds the seed rule
    needs (``--seed`` and the next ones), the first with ``config.engine`` (exact: the text's
    program, bit for bit), the others with the fast engine (same seed distribution, a
    fraction of the time)."""
    from attn_cli.published.seed_rule import MIN_SEEDS

    first = config.seed_list[0]
    return dataclasses.replace(config, seeds=tuple(range(first, first + MIN_SEEDS)), extra_seed_engine="fast")


def run_peak_bytes(spec: RunSpec) -> int:
    """Estimated peak memory of one run (float32), the larger of training and evaluation.

    Training keeps, per decoder step, the autograd tensors of a batch: embeddings, the cell's
    inputs and gates, two attention score and weight rows over the input (2 x 2 x T), two
    contexts and the logits: about (4 T + 10 h + 100) floats per sequence and step.
    Evaluation keeps the encoder states (T x h), the stacked logits (T x V), the int64
    batch and per-step temporaries: about (3 h + 2 V + 16) floats per sequence and step.
    The parameters, their gradients and Adam's moments add 4 x (10 h^2 + 200 h) floats.
    """
    L, h = spec.length, spec.hidden
    train = spec.batch_size * L * (4 * L + 10 * h + 100)
    evaluate = spec.eval_size * L * (3 * h + 2 * 12 + 16) + spec.eval_size * (4 * L + 4 * h)
    # parameters (two GRUs, attention, readout: about 10 h^2 + 200 h) with gradients and Adam's two moments
    params = 4 * (10 * h * h + 200 * h)
    return 4 * (max(train, evaluate) + params)


def check_memory(config: Config) -> None:
    """Refuse up front a configuration whose largest run would not fit (all workers at once)."""
    from attn_cli.core.memory import guard

    specs = config.plan()
    if not specs:
        return
    worst = max(specs, key=run_peak_bytes)
    concurrent = _concurrent(config, specs)
    what = (f"copy-task at length {worst.length} (hidden {worst.hidden}, batch {worst.batch_size}, "
            f"eval size {worst.eval_size}, {concurrent} run(s) at once)")
    guard(estimate_bytes(config), what, config.device)


def _concurrent(config: Config, specs) -> int:
    return min(config.worker_count(), len(specs)) if config.engines == ("exact",) else len(specs)


def estimate_bytes(config: Config) -> int:
    """The largest run's peak times the runs held at once."""
    specs = config.plan()
    return max(map(run_peak_bytes, specs)) * _concurrent(config, specs) if specs else 0


def validate(config: Config) -> None:
    """Domain checks (the CLI checks the same earlier, with click's messages)."""
    if not config.lengths:
        raise AttnError("copy-task needs at least one length")
    for name in ("steps", "hidden", "batch_size", "eval_size"):
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


# --------------------------------------------------------------------------- engines


def fast_engine() -> Callable:
    """``run_fast`` of :mod:`attn_cli.core.copy_fast`, or a clear AttnError if it is absent."""
    import importlib

    try:
        module = importlib.import_module("attn_cli.core.copy_fast")
    except ModuleNotFoundError as exc:
        if exc.name == "attn_cli.core.copy_fast":
            raise AttnError("--engine fast is not available in this build yet (attn_cli/core/copy_fast.py "
                            "is missing); use --engine exact") from None
        raise
    run_fast = getattr(module, "run_fast", None)
    if run_fast is None:
        raise AttnError("--engine fast is not available: attn_cli.core.copy_fast defines no run_fast")
    return run_fast


# one worker process: set up once (1 intra-op thread, Ctrl-C left to the parent)
_QUEUE = None


def _worker_init(queue) -> None:
    import signal

    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    torch.set_num_threads(1)
    global _QUEUE
    _QUEUE = queue


def _worker_run(index: int, spec: RunSpec, device: str) -> RunOutcome:
    from attn_cli.core.copy_train import train_and_evaluate

    def report(step: int, total: int, loss: float) -> None:
        _QUEUE.put((index, step, total, loss))

    return train_and_evaluate(spec, device, report)


def _cost(spec: RunSpec) -> float:
    """Relative wall time of a run: steps x length (x 0.5 for plain); longest first."""
    return spec.steps * spec.length * (1.0 if spec.model == "attention" else PLAIN_COST) \
        + spec.eval_size * spec.length / 64


def schedule(todo: list[tuple[int, RunSpec]]) -> list[tuple[int, RunSpec]]:
    """Longest runs first (cost ~ steps x length), so 4 8 16 32 on two workers splits as
    [32] and [16, 8, 4]; ties keep their display order."""
    return sorted(todo, key=lambda item: -_cost(item[1]))


def _run_exact(todo: list[tuple[int, RunSpec]], config: Config, report: Report,
               done: Callable[[int, RunOutcome], None]) -> None:
    """Run the exact engine: in this process for one run or one job, else a process pool."""
    todo = schedule(todo)
    workers = min(config.worker_count(), len(todo))
    if workers <= 1:
        from attn_cli.core.copy_train import train_and_evaluate

        for index, spec in todo:
            def progress(step, total, loss, _i=index):
                if report:
                    report(_i, step, total, loss, "running")
            done(index, train_and_evaluate(spec, config.device, progress))
        return
    _run_pool(todo, config, workers, report, done)


def _run_pool(todo, config: Config, workers: int, report: Report, done) -> None:
    import multiprocessing as mp
    import queue as queue_mod
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    try:
        ctx = mp.get_context("forkserver")
        # torch (and torch._dynamo, which Adam's constructor imports: seconds) imported once
        # in the fork server, then every worker starts from it already loaded
        ctx.set_forkserver_preload(["attn_cli.core.copy_train", "torch._dynamo"])
    except ValueError:  # pragma: no cover - platforms without forkserver
        ctx = mp.get_context("spawn")
    progress_queue = ctx.Queue()
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(progress_queue,))
    finished = False
    try:
        futures = {pool.submit(_worker_run, index, spec, config.device): (index, spec) for index, spec in todo}
        pending = set(futures)

        def drain():
            while True:
                try:
                    index, step, total, loss = progress_queue.get_nowait()
                except queue_mod.Empty:
                    return
                if report:
                    report(index, step, total, loss, "running")

        while pending:
            ready, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            drain()
            for fut in ready:
                index, spec = futures[fut]
                try:
                    outcome = fut.result()
                except BrokenProcessPool:
                    raise AttnError(f"a copy-task worker died during the {spec.model} run at length "
                                    f"{spec.length}, seed {spec.seed} (out of memory? or, from a script, a missing "
                                    "if __name__ == '__main__' guard)") from None
                except AttnError:
                    raise
                except Exception as exc:
                    raise AttnError(f"the {spec.model} run at length {spec.length}, seed {spec.seed} "
                                    f"failed: {type(exc).__name__}: {exc}") from None
                done(index, outcome)
        finished = True
    finally:
        if not finished:  # Ctrl-C or an error: stop every worker now, not at the end of its run
            _terminate(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        progress_queue.close()
        progress_queue.join_thread()


def _terminate(pool) -> None:
    processes = list(getattr(pool, "_processes", {}).values())  # no public API before 3.14
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
        if proc.is_alive():  # pragma: no cover
            proc.kill()


def _run_fast(todo: list[tuple[int, RunSpec]], config: Config, report: Report, done) -> None:
    run_fast = fast_engine()
    specs = [spec for _, spec in todo]

    def progress(spec_index, step, total, loss):
        if report:
            report(todo[spec_index][0], step, total, loss, "running")

    outcomes = run_fast(specs, config.device, progress, threads=config.jobs)  # None: one per core
    if len(outcomes) != len(specs):
        raise AttnError(f"the fast engine returned {len(outcomes)} results for {len(specs)} runs")
    for (index, _), outcome in zip(todo, outcomes):
        done(index, outcome)


# --------------------------------------------------------------------------- cache


def torch_version() -> str:
    """torch's version without importing torch (a cached rerun never needs it)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover
        import torch

        return torch.__version__


_CODE_DIGEST: dict[str, str] = {}


def code_digest() -> str:
    """SHA-256 over the source files that compute a run (:data:`CODE_GLOBS`), names and bytes."""
    root = Path(__file__).resolve().parent.parent  # the attn_cli package
    if str(root) not in _CODE_DIGEST:
        files = sorted({p for pattern in CODE_GLOBS for p in root.glob(pattern) if p.is_file()})
        h = hashlib.sha256()
        for path in files:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        _CODE_DIGEST[str(root)] = h.hexdigest()
    return _CODE_DIGEST[str(root)]


def cache_key(spec: RunSpec, engine: str, device: str) -> dict:
    """Everything that determines a run's numbers."""
    from attn_cli import __version__, numerics

    return {"format": CACHE_FORMAT, "spec": dataclasses.asdict(spec), "engine": engine, "device": device,
            "numerics": numerics.key(), "attn": __version__, "torch": torch_version(), "code": code_digest()}


def payload_digest(outcome: dict) -> str:
    return hashlib.sha256(json.dumps(outcome, sort_keys=True).encode()).hexdigest()


def cache_path(root: str | os.PathLike, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return Path(root) / CACHE_SUBDIR / f"{digest}.json"


def load_cached(path: Path, key: dict) -> RunOutcome | None:
    """The cached outcome at ``path`` if it is complete and was made for ``key``; else None.

    Raises ValueError (with the reason) for a file that exists but cannot be trusted.
    """
    if not path.exists():
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        if obj.get("key") != key:
            raise ValueError("its key does not match")
        o = obj["outcome"]
        if obj.get("digest") != payload_digest(o):
            raise ValueError("its payload does not match its digest (edited or damaged)")
        spec = RunSpec(**o["spec"])
        if dataclasses.asdict(spec) != key["spec"]:
            raise ValueError("its run does not match")
        floats = {name: float(o[name]) for name in (*METRICS, "seconds", "final_loss")}
        floats["diagonal"] = None if o["diagonal"] is None else float(o["diagonal"])
        if not all(0.0 <= floats[m] <= 1.0 for m in METRICS):
            raise ValueError("its accuracies are out of range")
        src = [int(t) for t in o["example_src"]]
        weights = [[float(w) for w in row] for row in o["example_weights"]]
        return RunOutcome(spec=spec, **floats, example_src=src, example_weights=weights,
                          engine=str(o["engine"]), cpu_seconds=float(o.get("cpu_seconds", 0.0)), isa=str(o["isa"]),
                          backend=str(o.get("backend", "torch" if o["engine"] == "exact" else "unknown")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def store_cached(path: Path, key: dict, outcome: RunOutcome) -> None:
    from attn_cli.render.files import write_json

    payload = json.loads(json.dumps(dataclasses.asdict(outcome)))  # exactly as it reads back
    write_json(path, {"key": key, "outcome": payload, "digest": payload_digest(payload)})  # atomic


# --------------------------------------------------------------------------- result


@dataclass
class Result:
    config: dict  # dataclasses.asdict(config)
    rows: list[dict] = field(default_factory=list)  # per run: model, length, seed, engine, accuracies, diagonal
    cells: list[dict] = field(default_factory=list)  # per (model, length): mean, std, n and published per metric
    maps: list[dict] = field(default_factory=list)  # attention, per length (first seed): src, weights, diagonal
    runs: list[dict] = field(default_factory=list)  # per run: seconds, final loss, engine, isa, cached
    seconds: float = 0.0  # wall time of run()
    notes: list[str] = field(default_factory=list)  # cache repairs and other remarks for stderr
    TIMING: ClassVar[tuple[str, ...]] = ("seconds", "runs.*.seconds", "runs.*.cpu_seconds")  # JSON: under "timing"

    def cell(self, model: str, length: int) -> dict | None:
        return next((c for c in self.cells if c["model"] == model and c["length"] == length), None)

    def cache_line(self) -> str:
        """How many training runs came from the cache, e.g. "8 training runs: 8 from cache"."""
        cached = sum(r["cached"] for r in self.runs)
        return (f"{len(self.runs)} training run{'s' if len(self.runs) != 1 else ''}: {cached} from cache, "
                f"{len(self.runs) - cached} computed")

    def measured(self) -> dict[str, Any]:
        """Check ID -> regenerated value: per published cell a SeedSample (the first seed's value,
        and every seed's, judged by the seed rule); for the map, a MapSample of every attention run."""
        from attn_cli.published.copy_task import CHECK_IDS, MAP_RULE_ID, MapSample
        from attn_cli.published.seed_rule import SeedSample

        out: dict[str, Any] = {}
        for c in self.cells:
            rows = [r for r in self.rows if r["model"] == c["model"] and r["length"] == c["length"]]
            for metric in METRICS:
                cid = f"w9-copy-task.{c['model']}.{c['length']}.{metric}"
                if cid in CHECK_IDS:
                    out[cid] = SeedSample(value=rows[0][metric], values=[r[metric] for r in rows],
                                          seeds=[r["seed"] for r in rows], engines=[r["engine"] for r in rows])
        att = [r for r in self.rows if r["model"] == "attention"]
        if att:
            out[MAP_RULE_ID] = MapSample(lengths=[r["length"] for r in att], seeds=[r["seed"] for r in att],
                                         diagonal=[r["diagonal"] for r in att],
                                         free_running=[r["free_running"] for r in att])
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
    from attn_cli.published.copy_task import published_value

    cells, maps = [], []
    for model in config.model_list:
        for length in config.lengths:
            group = [o for o in outcomes if o.spec.model == model and o.spec.length == length]
            cell: dict = {"model": model, "length": length, "n": len(group), "seeds": [o.spec.seed for o in group]}
            for metric in METRICS:
                cell[metric] = _stats([getattr(o, metric) for o in group])
                cell[metric]["published"] = published_value(model, length, metric)
            cells.append(cell)
            first = group[0]
            if first.example_weights:
                maps.append({"model": model, "length": length, "seed": first.spec.seed,
                             "src": list(first.example_src), "weights": first.example_weights,
                             "free_running": first.free_running,
                             "diagonal": diagonal_fraction(first.example_weights),
                             "diagonal_all": _stats([o.diagonal for o in group if o.diagonal is not None])["mean"]})
    return cells, maps


def run(config: Config, progress: Report = None) -> Result:
    """Every run of ``config`` (cached ones reused), aggregated; ``progress`` sees each run's steps.

    With more than one job the runs go to forkserver worker processes: a script calling this
    needs the usual ``if __name__ == "__main__":`` guard, as with any multiprocessing code.
    """
    start = time.perf_counter()
    validate(config)
    if "fast" in config.engines:
        fast_engine()  # a clear error now, before any work
    check_memory(config)

    specs = config.plan()
    outcomes: list[RunOutcome | None] = [None] * len(specs)
    cached = [False] * len(specs)
    notes: list[str] = []
    keys = [cache_key(spec, config.engine_of(spec), config.device) for spec in specs]
    paths = [cache_path(config.cache_root, k) if config.cache_root else None for k in keys]

    todo = []
    for i, spec in enumerate(specs):
        if paths[i] is not None and config.use_cache:
            try:
                outcomes[i] = load_cached(paths[i], keys[i])
            except ValueError as exc:
                notes.append(f"cache file {paths[i].name} for the {spec.model} run at length {spec.length}, "
                             f"seed {spec.seed} is unreadable ({exc}); recomputing it")
            if outcomes[i] is not None:
                cached[i] = True
                if progress:
                    progress(i, spec.steps, spec.steps, outcomes[i].final_loss, "cached")
                continue
        todo.append((i, spec))

    def done(index: int, outcome: RunOutcome) -> None:
        want = keys[index]["numerics"]["isa"]
        if config.device == "cpu" and outcome.isa and outcome.isa != want:
            raise AttnError(f"the {outcome.spec.model} run at length {outcome.spec.length} ran on {outcome.isa} "
                            f"kernels, not the {want} kernels of --numerics {keys[index]['numerics']['mode']}")
        outcomes[index] = outcome
        if paths[index] is not None:
            store_cached(paths[index], keys[index], outcome)  # each finished run at once: Ctrl-C keeps it
        if progress:
            progress(index, specs[index].steps, specs[index].steps, outcome.final_loss, "done")

    for engine in config.engines:  # exact first (the text's program), then the extra seeds
        mine = [(i, spec) for i, spec in todo if config.engine_of(spec) == engine]
        if mine:
            (_run_fast if engine == "fast" else _run_exact)(mine, config, progress, done)

    return assemble(config, outcomes, cached, seconds=time.perf_counter() - start, notes=notes)


def assemble(config: Config, outcomes: list[RunOutcome], cached: Optional[list[bool]] = None,
             seconds: float = 0.0, notes: Optional[list[str]] = None) -> Result:
    """The Result of ``config`` from its runs' outcomes (in plan order)."""
    cached = cached or [False] * len(outcomes)
    rows = [{"model": o.spec.model, "length": o.spec.length, "seed": o.spec.seed, "engine": o.engine,
             "teacher_forced": o.teacher_forced, "free_running": o.free_running, "exact": o.exact,
             "diagonal": o.diagonal} for o in outcomes]
    runs = [{"model": o.spec.model, "length": o.spec.length, "seed": o.spec.seed, "seconds": o.seconds,
             "cpu_seconds": o.cpu_seconds, "final_loss": o.final_loss, "engine": o.engine, "isa": o.isa,
             "backend": o.backend, "cached": c}
            for o, c in zip(outcomes, cached)]
    cells, maps = _aggregate(config, outcomes)
    return Result(config=dataclasses.asdict(config), rows=rows, cells=cells, maps=maps, runs=runs,
                  seconds=seconds, notes=list(notes or []))
