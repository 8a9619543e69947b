"""The pipeline: run an experiment, compare it with the texts once, write its figures (design notes:
``docs/design.md``, section ``attn_cli.pipeline``)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.errors import AttnError, BadConfig, WriteFailed
from attn_cli.experiment_registry import Experiment, Registry, ranges
from attn_cli.published.compare import Outcome
from attn_cli.published.types import MISSING, Check

if TYPE_CHECKING:
    from attn_cli.store.cache import Cache
    from attn_cli.store.entries import Pieces

# config -> a block that yields the progress callback
Display = Callable[[Any], AbstractContextManager[Callable | None]]


@dataclass
class Run:
    """One experiment run: what it was asked, what it returned, how it compares with the text,
    what it wrote, how long it took."""

    experiment: Experiment
    config: Any
    unjudged: str | None = None  # why its values are shown but not judged: "quick"
    result: Any = None
    measured: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None  # set when run() or measured() raised
    from_cache: bool = False  # the Result was read from the per-user cache
    notes: list[str] = field(default_factory=list)  # cache entries refused and recomputed, the Result's notes
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # check ID -> Outcome (empty: not judged here)
    files: list[Path] = field(default_factory=list)  # figures and the numbers beside them, written into out

    @property
    def name(self) -> str:
        return self.experiment.name

    def json(self) -> Any:
        """The Result as ``attn COMMAND --json`` prints it."""
        from attn_cli.render.files import result_json

        return result_json(self.result, self.outcomes)

    def tables(self) -> list:
        """The blocks (tables, lines) of its render module, marked with its outcomes."""
        return self.experiment.tables(self.result, self.outcomes)


def check(exp: Experiment, config: Any) -> None:
    """The experiment's optional hooks, before any work: ``validate(config)`` (an AttnError becomes
    :class:`~attn_cli.errors.BadConfig`, a usage error), then ``preflight(config)`` (errors pass unchanged)."""
    if (validate := getattr(exp.module, "validate", None)) is not None:
        try:
            validate(config)
        except BadConfig:
            raise
        except AttnError as exc:
            raise BadConfig(str(exc)) from exc
    if (preflight := getattr(exp.module, "preflight", None)) is not None:
        preflight(config)


def run(
    exp: Experiment,
    config: Any,
    *,
    out: str | Path | None = None,
    formats: Sequence[str] = ("png",),
    progress: Callable | None = None,
    display: Display | None = None,
    cache_root: str | Path | Callable[[], str | Path | None] | None = None,
    use_cache: bool = True,
    unjudged: str | None = None,
    judged: bool = True,
    keep_going: bool = False,
    threads: int | None = 1,
    numerics: str | None = None,
    keep: list | None = None,
) -> Run:
    """Check ``config``, run the experiment (via the per-user cache ``cache_root``, a callable called
    after the checks), compare it once when ``judged``, write its figures into ``out``.
    ``display(config)`` opens a progress block yielding ``progress``; ``keep_going`` records an
    error in ``Run.error`` (a failed write and KeyboardInterrupt propagate); ``numerics``: the mode
    the command applied, in the cache key."""
    run = Run(exp, config, unjudged)
    start = time.perf_counter()
    try:
        check(exp, config)
        root = cache_root() if callable(cache_root) else cache_root
        key = _cache_key(exp, config, root, numerics)
        with _opened(root if key or exp.caches_pieces else None, run.notes) as store:
            if store is not None and key and use_cache:
                run.result = _load(exp, config, store, key, run.notes)
                run.from_cache = run.result is not None
            if run.result is None:
                shown = display(config) if display is not None else contextlib.nullcontext(progress)
                with shown as report, intra_op_threads(threads):
                    pieces = _pieces(exp, store, use_cache) if store is not None and exp.caches_pieces else None
                    run.result = exp.run(config, progress=report, store=pieces)
                if store is not None and key:
                    from attn_cli.store import cache, entries

                    try:
                        entries.store_result(store, exp.name, key, run.result)
                    except cache.Unavailable as exc:
                        run.notes.append(f"not cached: {exc}")
        _judge_and_draw(run, judged, out, formats, keep)
    except Exception as exc:
        if not keep_going or isinstance(exc, WriteFailed):  # a full disk stops every experiment
            raise
        from attn_cli.core.memory import out_of_memory

        run.error = out_of_memory(exc) or f"{type(exc).__name__}: {exc}"
    run.seconds = time.perf_counter() - start
    return run


def _judge_and_draw(run: Run, judged: bool, out: str | Path | None, formats: Sequence[str], keep: list | None) -> None:
    """The Result's notes and measured values, its outcomes when ``judged``, its figures when ``out``."""
    run.notes += list(getattr(run.result, "notes", None) or [])
    run.measured = dict(run.result.measured()) if hasattr(run.result, "measured") else {}
    if judged:
        from attn_cli.published.compare import compare_result

        run.outcomes = compare_result(run.result, run.experiment.artifacts)
    if out is not None:
        run.files = run.experiment.figures(run.result, Path(out), formats, run.outcomes, keep)


def run_experiments(
    plan: Iterable[tuple[Experiment, Any, str | None]],
    *,
    on_start: Callable[[Experiment], Callable | None] | None = None,
    on_done: Callable[[Run], None] | None = None,
    cache_root: str | Path | None = None,
    use_cache: bool = True,
    numerics: str | None = None,
) -> list[Run]:
    """:func:`run` for each ``(experiment, config, unjudged)``, not judged here (see :func:`compare`),
    no file written, a failure kept in its Run; ``on_start(exp)`` may return a progress callback."""
    shared: dict[str, Any] = dict(cache_root=cache_root, use_cache=use_cache, numerics=numerics)
    runs = []
    for exp, config, unjudged in plan:
        progress = on_start(exp) if on_start else None
        runs.append(run(exp, config, unjudged=unjudged, progress=progress, judged=False, keep_going=True, **shared))
        if on_done:
            on_done(runs[-1])
    return runs


@contextlib.contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _cache_key(exp: Experiment, config: Any, cache_root: str | Path | None, numerics: str | None = None) -> dict | None:
    if cache_root is None or not exp.cached or not dataclasses.is_dataclass(config):
        return None
    from attn_cli.core.numerics import key
    from attn_cli.store import entries

    return entries.cache_key(
        {"experiment": exp.name, "config": exp.recorded_config(config)},
        entries.RESULT_CODE_GLOBS,
        key(str(getattr(config, "device", "cpu")), numerics),
    )


def _pieces(exp: Experiment, store: Cache, use_cache: bool) -> Pieces:
    from attn_cli.store.entries import Pieces

    return Pieces(store, exp.name, reuse=use_cache)


def _opened(root: str | Path | None, notes: list[str]) -> AbstractContextManager[Cache | None]:
    if not root:
        return contextlib.nullcontext()
    from attn_cli.store import cache

    return cache.opened(root, notes)


def _load(exp: Experiment, config: Any, store: Cache, key: dict, notes: list[str]) -> Any:
    """The cached Result, or None: none stored, or one refused with a note (then recomputed)."""
    from attn_cli.store import cache, entries

    try:
        result = entries.load_result(store, exp.name, key, exp.module.Result)
        if result is not None:
            if isinstance(getattr(result, "config", None), dict) and result.config != key["config"]:
                raise entries.InvalidEntry("config: not the configuration it is stored for")
            if (validate := getattr(exp.module, "validate_result", None)) is not None:
                validate(result, config)
        return result
    except (cache.Refused, entries.InvalidEntry) as exc:
        entry = cache.cache_path("", exp.name, key).as_posix()
        notes.append(f"cache entry {entry} is unreadable ({exc}); recomputing it")
        return None


def compare(selected_checks: Iterable[Check], registry: Registry, runs: Iterable[Run]) -> list[Outcome]:
    """Every selected check judged against the value its experiment's run measured."""
    from attn_cli.published.compare import judge

    by_name = {r.name: r for r in runs}
    outcomes = []
    for check in selected_checks:
        exp = registry.experiment_of(check.artifact)
        run = by_name.get(exp.name) if exp else None
        if exp is None:
            outcomes.append(Outcome(check, note="not regenerated: no experiment module"))
        elif run is None or run.error:
            why = f"failed ({run.error})" if run else "did not run"
            outcomes.append(Outcome(check, note=f"not regenerated: {exp.name} {why}"))
        else:  # unjudged (reduced sizes): the value, if any, is shown, not judged
            config = run.result.config if isinstance(getattr(run.result, "config", None), dict) else None
            missing = f"not regenerated: {exp.name} measured no value"
            value = run.measured.get(check.id, MISSING)
            outcomes.append(judge(check, value, config, unjudged=run.unjudged, missing=missing))
    return outcomes


@dataclass
class Coverage:
    """Catalogue IDs (of those selected) that verify cannot vouch for."""

    artifacts: list[str]
    no_checks: list[str]
    no_experiment: list[str]
    uncatalogued: list[str] = field(default_factory=list)  # regenerated, but not in the catalogue

    @property
    def complete(self) -> bool:
        return not self.no_checks and not self.no_experiment

    def line(self) -> str:
        checked = [a for a in self.artifacts if a not in self.no_checks and a not in self.no_experiment]
        text = f"coverage: {len(checked)}/{len(self.artifacts)} catalogue IDs checked"
        if self.no_checks:
            text += f"; no checks: {ranges(self.no_checks)}"
        if self.no_experiment:
            text += f"; no experiment: {', '.join(self.no_experiment)}"
        if self.uncatalogued:
            text += f"; regenerated but not in the catalogue: {ranges(self.uncatalogued)}"
        return text


def coverage(registry: Registry, artifact_ids: Iterable[str], *, everything: bool = False) -> Coverage:
    """Coverage of the selected IDs; ``everything`` (no --only) adds those the catalogue lacks."""
    ids = list(artifact_ids)
    return Coverage(
        artifacts=ids,
        no_checks=[a for a in ids if not registry.checks_of(a)],
        no_experiment=[a for a in ids if registry.experiment_of(a) is None],
        uncatalogued=list(registry.uncatalogued) if everything else [],
    )


def cache_lines(runs: Iterable[Run]) -> list[str]:
    """E.g. "copy_task: 40 training runs: 40 from cache": one line per experiment that reused cached work."""
    return [
        f"{r.name}: {r.result.cache_line()}" for r in runs if r.result is not None and hasattr(r.result, "cache_line")
    ]


def where_it_ran(device: str = "cpu", numerics: str | None = None) -> dict[str, Any]:
    """``{"versions", "machine", "numerics"}``: where a report's numbers were computed (the CPU's model
    name, its logical cores, the OS, the GPU when used); ``numerics``: the mode the command applied."""
    import os
    import platform

    import numpy
    import torch

    from attn_cli import __version__
    from attn_cli.core import numerics as modes

    versions = dict(
        attn=__version__, torch=torch.__version__, python=platform.python_version(), numpy=numpy.__version__
    )
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    machine: dict[str, Any] = {"cpu": cpu, "cores": f"{os.cpu_count()} logical cores"}
    machine["platform"] = platform.platform(terse=True)
    if device == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(0)
    return {"versions": versions, "machine": machine, "numerics": modes.describe(device, numerics)}


def numerics_line(numerics: dict) -> str:
    """The closing line of ``attn all`` and ``attn verify``: the mode, the CPU kernels, the GPU."""
    from attn_cli.core.numerics import cuda_summary

    gpu = f"; GPU {cuda_summary(numerics['cuda'])}" if "cuda" in numerics else ""
    return f"numerics: {numerics['mode']} ({numerics['isa']} CPU kernels){gpu}"
