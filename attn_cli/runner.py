"""Find the experiments, build their configurations, run them, compare with the texts.

This is the library behind ``attn list``, ``attn all`` and ``attn verify``; it imports no
click and no rich.  Nothing here keeps a hand-written list of experiments:

* :func:`discover` imports every module of :mod:`attn_cli.experiments` and keeps the ones
  that define ``ARTIFACTS`` (the contract in ``attn_cli/experiments/__init__.py``); other
  modules there (helpers) are skipped;
* the catalogue (:mod:`attn_cli.published.catalogue`) says which artifacts exist;
* the check families (:func:`attn_cli.published.all_checks`) say which values are published.

An experiment is *slow* when its ``Config`` has a cache field (the copy task: training runs,
minutes, cached under ``--out``); every other experiment takes seconds at its defaults.
``attn verify --quick`` runs cheap experiments at their defaults (the published numbers hold
only there) and slow ones at ``Config.quick()``, reporting the slow ones' checks as skipped.
``attn all`` trains the copy task with its fast engine (statistically equivalent numbers): its
checks are shown there as skipped too; ``attn verify`` judges the exact engine's numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import pkgutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Sequence

from attn_cli.errors import AttnError, WriteFailed

EXPERIMENTS_PACKAGE = "attn_cli.experiments"
RENDER_PACKAGE = "attn_cli.render"

# Config fields that name a cache folder; they receive the --out folder.
CACHE_FIELDS = ("cache_dir", "cache", "cache_root")


from attn_cli.published.compare import MISSING, Outcome, summary  # noqa: F401  (re-exported)


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class Experiment:
    """One module of :mod:`attn_cli.experiments` that follows the contract."""

    name: str  # module name, e.g. "sqrt_dk"
    module: ModuleType = field(repr=False, compare=False)
    render: ModuleType | None = field(default=None, repr=False, compare=False)  # default: render.<name>

    @property
    def artifacts(self) -> tuple[str, ...]:
        return tuple(self.module.ARTIFACTS)

    @property
    def config_fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.module.Config))

    @property
    def cache_field(self) -> str | None:
        return next((f for f in CACHE_FIELDS if f in self.config_fields), None)

    @property
    def slow(self) -> bool:
        """Slow experiments cache their runs (the copy task); the others take seconds."""
        return self.cache_field is not None

    @property
    def has_fast_engine(self) -> bool:
        """A Config with ``engine`` and a module offering "fast" (the copy task)."""
        return "engine" in self.config_fields and "fast" in getattr(self.module, "ENGINES", ())

    def config(self, *, seed: int = 0, device: str = "cpu", quick: bool = False,
               out: Path | None = None, engine: str | None = None, use_cache: bool = True,
               verify: bool = False) -> Any:
        """Its default Config (the text's settings), or ``Config.quick()``, with seed, device
        and (for slow experiments) the cache folder ``out`` filled in; ``engine`` ("fast" or
        "exact") is set where the experiment has engines, else ignored; ``use_cache=False``
        recomputes cached runs.  ``verify``: the configuration ``attn verify`` judges (the
        module's ``verify_config(config)`` where it has one: the copy task's seeds)."""
        fields = self.config_fields
        overrides: dict[str, Any] = {}
        if "use_cache" in fields:
            overrides["use_cache"] = use_cache
        if engine is not None and self.has_fast_engine:
            overrides["engine"] = engine
        if "seed" in fields:
            overrides["seed"] = seed
        if "device" in fields:
            overrides["device"] = device
        if out is not None and self.cache_field:
            overrides[self.cache_field] = str(out)
        cls = self.module.Config
        config = cls.quick(**overrides) if quick else cls(**overrides)
        if verify and hasattr(self.module, "verify_config"):
            config = self.module.verify_config(config)
        return config

    def run(self, config: Any, progress: Callable | None = None) -> Any:
        """``module.run(config)``; ``progress`` is passed on where run() takes one (the copy task)."""
        if progress is not None and "progress" in inspect.signature(self.module.run).parameters:
            return self.module.run(config, progress=progress)
        return self.module.run(config)

    def render_module(self) -> ModuleType | None:
        if self.render is not None:
            return self.render
        try:
            return importlib.import_module(f"{RENDER_PACKAGE}.{self.name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{RENDER_PACKAGE}.{self.name}":
                return None
            raise

    def tables(self, result: Any) -> list:
        render = self.render_module()
        if render is None or not hasattr(render, "tables"):
            return []
        tables = render.tables(result)
        return list(tables) if isinstance(tables, (list, tuple)) else [tables]

    def figures(self, result: Any, out: Path, formats: Sequence[str] = ("png",)) -> list[Path]:
        """Its figures in each of ``formats`` (png, svg, pdf) and the numbers beside them."""
        render = self.render_module()
        if render is None or not hasattr(render, "figures"):
            return []
        return [Path(p) for p in (render.figures(result, Path(out), tuple(formats)) or [])]


def discover() -> list[Experiment]:
    """Every module of :mod:`attn_cli.experiments` that defines ``ARTIFACTS``, by name."""
    pkg = importlib.import_module(EXPERIMENTS_PACKAGE)
    found = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{EXPERIMENTS_PACKAGE}.{info.name}")
        except Exception as exc:  # a module that does not import is a failure to report
            raise AttnError(f"cannot import {EXPERIMENTS_PACKAGE}.{info.name}: "
                            f"{type(exc).__name__}: {exc}") from exc
        if hasattr(module, "ARTIFACTS"):
            found.append(Experiment(info.name, module))
    return found


def catalogue():
    """The catalogue of artifacts (a function, so tests can substitute one)."""
    from attn_cli.published.catalogue import ARTIFACTS

    return ARTIFACTS


def checks() -> dict:
    """Every published value, keyed by check ID (a function, so tests can substitute)."""
    from attn_cli.published import all_checks

    return all_checks()


@dataclass
class Registry:
    """The catalogue, the checks and the experiments, tied together."""

    artifacts: dict  # catalogue ID -> Artifact, in catalogue order
    checks: dict  # check ID -> Check
    experiments: list[Experiment]
    by_artifact: dict  # catalogue ID -> Experiment
    uncatalogued: dict = field(default_factory=dict)  # IDs an experiment names that the catalogue lacks

    @classmethod
    def load(cls) -> "Registry":
        artifacts = {a.id: a for a in catalogue()}
        experiments = discover()
        by_artifact: dict[str, Experiment] = {}
        uncatalogued: dict[str, Experiment] = {}
        for exp in experiments:
            for aid in exp.artifacts:
                claimed = by_artifact if aid in artifacts else uncatalogued
                if aid in claimed:
                    raise AttnError(f"{aid!r} is claimed by both {claimed[aid].name} and {exp.name}")
                claimed[aid] = exp
        return cls(artifacts=artifacts, checks=checks(), experiments=experiments, by_artifact=by_artifact,
                   uncatalogued=uncatalogued)

    def checks_of(self, artifact_id: str) -> list:
        return [c for c in self.checks.values() if c.artifact == artifact_id]

    def experiment_of(self, artifact_id: str) -> Experiment | None:
        return self.by_artifact.get(artifact_id) or self.uncatalogued.get(artifact_id)

    def known_ids(self) -> list[str]:
        return list(self.artifacts) + list(self.uncatalogued)

    def select(self, tokens: Sequence[str]) -> tuple[list[str], list]:
        """Catalogue IDs and checks picked by ``--only``: catalogue IDs, check IDs, dotted
        prefixes of check IDs (``w9-sqrt-dk.1024``) or a source (``w9``, ``d2l``).

        Raises :class:`UnknownId` for a token that matches nothing.
        """
        if not tokens:
            return list(self.artifacts), list(self.checks.values())
        chosen_artifacts: list[str] = []
        chosen_checks: dict[str, Any] = {}
        for token in tokens:
            arts, found = self._match(token)
            if not arts and not found:
                raise UnknownId(token, self.known_ids())
            for a in arts:
                if a not in chosen_artifacts:
                    chosen_artifacts.append(a)
            for c in found:
                chosen_checks.setdefault(c.id, c)
        order = {cid: i for i, cid in enumerate(self.checks)}
        checks_sorted = sorted(chosen_checks.values(), key=lambda c: order[c.id])
        # catalogue order for the artifacts
        arts_sorted = [a for a in self.known_ids() if a in chosen_artifacts]
        return arts_sorted, checks_sorted

    def _match(self, token: str) -> tuple[list[str], list]:
        if token in self.artifacts or token in self.uncatalogued:
            return [token], self.checks_of(token)
        found = [c for c in self.checks.values() if c.id == token or c.id.startswith(token + ".")]
        if found:
            return sorted({c.artifact for c in found}, key=list(self.artifacts).index), found
        arts = [a.id for a in self.artifacts.values() if a.source.lower() == token.lower()]
        return arts, [c for c in self.checks.values() if c.artifact in arts]


class UnknownId(AttnError):
    def __init__(self, token: str, known: list[str]):
        self.token = token
        self.known = known
        super().__init__(f"unknown ID {token!r}; known IDs: {_ranges(known)} "
                         "(or a check ID or its prefix, e.g. w9-sqrt-dk.1024; or w9, d2l)")


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    """One experiment run: what it was asked, what it returned, how long it took."""

    experiment: Experiment
    config: Any
    unjudged: str | None = None  # why its values are shown but not judged: "quick", "fast engine"
    result: Any = None
    measured: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None  # set when run() or measured() raised

    @property
    def name(self) -> str:
        return self.experiment.name


def run_experiments(plan: Iterable[tuple[Experiment, Any, str | None]], *,
                    on_start: Callable[[Experiment], Callable | None] | None = None,
                    on_done: Callable[[Run], None] | None = None,
                    keep_going: bool = True, threads: int | None = 1) -> list[Run]:
    """Run ``(experiment, config, unjudged)`` one after another (``unjudged``: see :class:`Run`).

    ``on_start(experiment)`` may return a progress callback, handed to experiments whose
    ``run`` takes one.  An experiment that raises is recorded in ``Run.error`` (with
    ``keep_going``) and the others still run: its checks then fail as "not regenerated".
    KeyboardInterrupt always propagates.

    ``threads``: torch's intra-op threads while the experiments run (restored after).  One by
    default: every experiment's tensors are small (the texts' sizes), where intra-op threads
    only add synchronisation, and on a shared machine they collapse (measured on the 2-core
    machine under load: the D2L exercises at quick sizes take 7 s on one thread, 131 s on
    two).  The copy task parallelises over processes or its own threads, one core per run.
    """
    runs = []
    for exp, config, unjudged in plan:
        progress = on_start(exp) if on_start else None
        run = Run(exp, config, unjudged)
        start = time.perf_counter()
        try:
            with _intra_op_threads(threads):
                run.result = exp.run(config, progress=progress)
            run.measured = dict(run.result.measured()) if hasattr(run.result, "measured") else {}
        except WriteFailed:  # a full or read-only disk stops the whole run, not one experiment
            raise
        except Exception as exc:
            if not keep_going:
                raise
            run.error = f"{type(exc).__name__}: {exc}"
        run.seconds = time.perf_counter() - start
        runs.append(run)
        if on_done:
            on_done(run)
    return runs


@contextlib.contextmanager
def _intra_op_threads(threads: int | None):
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


# --------------------------------------------------------------------------- comparing


def compare(selected_checks: Iterable, registry: Registry, runs: Iterable[Run]) -> list[Outcome]:
    """Every selected check against the value its experiment measured
    (:func:`attn_cli.published.compare.judge`, with the run's configuration)."""
    from attn_cli.published.compare import judge

    by_name = {r.name: r for r in runs}
    outcomes = []
    for check in selected_checks:
        exp = registry.experiment_of(check.artifact)
        run = by_name.get(exp.name) if exp else None
        if exp is None:
            outcomes.append(Outcome(check, note="not regenerated: no experiment module"))
        elif run is None:
            outcomes.append(Outcome(check, note=f"not regenerated: {exp.name} did not run"))
        elif run.error:
            outcomes.append(Outcome(check, note=f"not regenerated: {exp.name} failed ({run.error})"))
        else:  # reduced sizes or another engine (unjudged): the value, if any, is shown, not judged
            config = run.result.config if isinstance(getattr(run.result, "config", None), dict) else None
            outcomes.append(judge(check, run.measured.get(check.id, MISSING), config, unjudged=run.unjudged,
                                  missing=f"not regenerated: {exp.name} measured no value"))
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
            text += f"; no checks: {_ranges(self.no_checks)}"
        if self.no_experiment:
            text += f"; no experiment: {', '.join(self.no_experiment)}"
        if self.uncatalogued:
            text += f"; regenerated but not in the catalogue: {_ranges(self.uncatalogued)}"
        return text


def _ranges(ids: list[str]) -> str:
    """IDs joined by commas, numbered runs shortened: ``d2l-ex1, ..., d2l-ex12`` -> ``d2l-ex1..d2l-ex12``."""
    import re

    parts: list[list[str]] = []
    for i in ids:
        m = re.fullmatch(r"(.*?)(\d+)", i)
        last = parts[-1] if parts else None
        if m and last:
            prev = re.fullmatch(r"(.*?)(\d+)", last[-1])
            if prev and prev.group(1) == m.group(1) and int(prev.group(2)) + 1 == int(m.group(2)):
                last.append(i)
                continue
        parts.append([i])
    return ", ".join(", ".join(p) if len(p) < 3 else f"{p[0]}..{p[-1]}" for p in parts)


def coverage(registry: Registry, artifact_ids: Iterable[str], *, everything: bool = False) -> Coverage:
    """Coverage of the selected catalogue IDs; ``everything`` (no --only) also lists the IDs
    experiments regenerate that the catalogue does not name."""
    ids = list(artifact_ids)
    return Coverage(
        artifacts=ids,
        no_checks=[a for a in ids if not registry.checks_of(a)],
        no_experiment=[a for a in ids if registry.experiment_of(a) is None],
        uncatalogued=list(registry.uncatalogued) if everything else [],
    )


def cache_lines(runs: Iterable[Run]) -> list[str]:
    """One line per experiment that reuses cached work, e.g. "copy_task: 40 training runs: 40 from cache"."""
    return [f"{r.name}: {r.result.cache_line()}" for r in runs
            if r.result is not None and hasattr(r.result, "cache_line")]


# --------------------------------------------------------------------------- versions


def versions() -> dict[str, str]:
    import platform

    import numpy
    import torch

    from attn_cli import __version__

    return {"attn": __version__, "torch": torch.__version__, "python": platform.python_version(),
            "numpy": numpy.__version__}


def machine(device: str = "cpu") -> dict[str, Any]:
    """Where it ran: the CPU's model name, its logical cores, the OS, and the GPU when used."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cores": f"{os.cpu_count()} logical cores",
                            "platform": platform.platform(terse=True)}
    if device == "cuda":
        import torch

        info["gpu"] = torch.cuda.get_device_name(0)
    return info
