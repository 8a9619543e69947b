"""The experiments tied to the catalogue and the published checks (design notes: ``docs/design.md``,
section ``attn_cli.experiment_registry``)."""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from attn_cli.errors import SEED_MAX, SEED_MIN, AttnError, SeedOutOfRange

if TYPE_CHECKING:
    from attn_cli.published.types import Artifact

RENDER_PACKAGE = "attn_cli.render"
QUICK = "quick"  # the ``unjudged`` reason of a --quick run: its checks are "skipped (quick)"
CONTRACT = ("SLOW", "CACHED", "ENGINES", "FIGURES")  # what every experiment module declares


@dataclass(frozen=True)
class Experiment:
    """One module of :mod:`attn_cli.experiments` that follows the contract."""

    name: str  # module name, e.g. "sqrt_dk"
    module: ModuleType = field(repr=False, compare=False)
    render: ModuleType | None = field(default=None, repr=False, compare=False)  # default: render.<name>

    def _declared(self, attribute: str, default: Any = None) -> Any:
        if hasattr(self.module, attribute):
            return getattr(self.module, attribute)
        if attribute in CONTRACT:
            raise AttnError(
                f"experiment {self.name} does not declare {attribute} (see attn_cli/experiments/__init__.py)"
            )
        return default

    @property
    def artifacts(self) -> tuple[str, ...]:
        return tuple(self.module.ARTIFACTS)

    @property
    def slow(self) -> bool:  # minutes at the text's settings (the copy task's training)
        return bool(self._declared("SLOW"))

    @property
    def cached(self) -> bool:  # the pipeline keeps its Result in the per-user cache
        return bool(self._declared("CACHED"))

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(self._declared("ENGINES", ()))

    @property
    def caches_pieces(self) -> bool:  # its run(config, progress, store=) caches pieces of its work
        return bool(self._declared("CACHES_PIECES", False))

    @property
    def interrupted(self) -> str | None:  # what to tell the user after Ctrl-C stopped it
        return self._declared("INTERRUPTED")

    def recorded_config(self, config: Any) -> Any:
        """``config`` as plain data to record (a cache key, a manifest), without this machine's
        set-up (``LOCAL_FIELDS``: the copy task's cluster)."""
        if not dataclasses.is_dataclass(config) or isinstance(config, type):
            return config
        local = self._declared("LOCAL_FIELDS", ())
        return {k: v for k, v in dataclasses.asdict(config).items() if k not in local}

    def config(
        self,
        *,
        seed: int = 0,
        device: str = "cpu",
        quick: bool = False,
        engine: str | None = None,
        use_cache: bool = True,
        verify: bool = False,
        verify_seeds: int | None = None,
        **cluster: Any,
    ) -> Any:
        """Its default Config (or ``Config.quick()``) with seed and device, each other option (the
        ``cluster``'s too) only where the Config has that field; ``verify``: the module's
        ``verify_config`` (``verify_seeds``)."""
        overrides: dict[str, Any] = {"seed": seed, "device": device, "use_cache": use_cache, **cluster}
        if engine is not None and "fast" in self.engines:
            overrides["engine"] = engine
        cls = self.module.Config
        known = {f.name for f in dataclasses.fields(cls)}
        overrides = {k: v for k, v in overrides.items() if k in known}
        config = cls.quick(**overrides) if quick else cls(**overrides)
        if verify and hasattr(self.module, "verify_config"):
            config = self.module.verify_config(config, **({"seeds": verify_seeds} if verify_seeds else {}))
        return config

    def run(self, config: Any, progress: Callable | None = None, store: Any = None) -> Any:
        """``module.run(config, progress)``, with ``store`` (the cache's Pieces) where it ``caches_pieces``."""
        return self.module.run(config, progress=progress, **({"store": store} if self.caches_pieces else {}))

    def render_module(self) -> ModuleType | None:
        if self.render is not None:
            return self.render
        try:
            return importlib.import_module(f"{RENDER_PACKAGE}.{self.name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{RENDER_PACKAGE}.{self.name}":
                return None
            raise

    def tables(self, result: Any, outcomes: Mapping) -> list:
        """Its render module's tables, marked with ``outcomes`` (check ID -> Outcome)."""
        tables = getattr(self.render_module(), "tables", None)
        return list(tables(result, outcomes)) if tables else []

    def figures(
        self, result: Any, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
    ) -> list[Path]:
        """Its figures in each of ``formats`` and the numbers beside them, saved into ``out``."""
        figures = getattr(self.render_module(), "figures", None)
        return [Path(p) for p in figures(result, Path(out), tuple(formats), outcomes, keep)] if figures else []


Plan = list[tuple[Any, Any, str | None]]  # (Experiment, its Config, why it is not judged or None)


def plan(
    experiments: Sequence[Experiment],
    *,
    seed: int,
    device: str,
    use_cache: bool = True,
    quick: bool = False,
    seeds: int | None = None,
    smoke: bool = False,
    scheduler: str | None = None,
    scheduler_from: str | None = None,
    worker_wait: float | None = None,
) -> Plan:
    """Each experiment at the configuration its checks are judged at (``quick``: the slow ones at
    ``Config.quick()``, not judged); ``smoke`` (``attn all --quick``): every one at ``Config.quick()``
    on its fast engine, nothing judged; ``seeds``: how many seeds judge a trained value.  Before any
    work, the Dask ``scheduler`` must answer (asked only when an experiment trains) and every seed
    the plan hands to torch must be in its range (:class:`~attn_cli.errors.SeedOutOfRange`)."""
    from attn_cli.published.seed_rule import MAX_SEEDS

    fields: dict[str, Any] = dict(seed=seed, device=device, use_cache=use_cache)
    if scheduler and any(exp.slow for exp in experiments):
        from attn_cli.experiments.copy_task.cluster import plan_keywords

        fields.update(plan_keywords(scheduler, scheduler_from, worker_wait))
    if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
        raise ValueError(f"the seed rule takes 1 to {MAX_SEEDS} seeds, not {seeds}")
    made: Plan = []
    for exp in experiments:
        reduced = smoke or (quick and exp.slow)
        config = exp.config(
            quick=reduced, engine="fast" if smoke else None, verify=not reduced, verify_seeds=seeds, **fields
        )
        made.append((exp, config, QUICK if reduced else None))
    for exp, config, _ in made:
        check_seed_range(seeds_used(exp.module, config))
    return made


def check_seed_range(seeds: Iterable[int]) -> None:
    """Raise :class:`SeedOutOfRange` for the first seed torch would refuse."""
    for seed in seeds:
        if not SEED_MIN <= seed <= SEED_MAX:
            raise SeedOutOfRange(seed)


def seeds_used(module: ModuleType, config: Any) -> list[int]:
    """Every seed a run at ``config`` hands to torch: each of ``config.seed_list`` (or
    ``config.seed``) plus each of the module's ``SEED_OFFSETS`` (default ``(0,)``)."""
    seeds = getattr(config, "seed_list", None) or (config.seed,)
    offsets = getattr(module, "SEED_OFFSETS", (0,))
    return list(dict.fromkeys(seed + k for seed in seeds for k in offsets))


def discover() -> list[Experiment]:
    """The experiments, imported here by name so that readers and mypy follow the list (a test names
    a module left out), and only when asked, so a single command imports its own alone."""
    from attn_cli.experiments import (
        analogy,
        copy_both,
        copy_task,
        crossattn,
        embeddings,
        exercises,
        formula,
        heads,
        masks,
        order,
        scaling,
        self_cross,
        sqrt_dk,
    )

    modules = [analogy, copy_both, copy_task, crossattn, embeddings, exercises, formula, heads, masks, order]
    return [Experiment(m.__name__.rsplit(".", 1)[-1], m) for m in [*modules, scaling, self_cross, sqrt_dk]]


def catalogue() -> tuple[Artifact, ...]:
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
    def load(cls) -> Registry:
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
        return cls(artifacts, checks(), experiments, by_artifact, uncatalogued)

    def checks_of(self, artifact_id: str) -> list:
        return [c for c in self.checks.values() if c.artifact == artifact_id]

    def experiment_of(self, artifact_id: str) -> Experiment | None:
        return self.by_artifact.get(artifact_id) or self.uncatalogued.get(artifact_id)

    def known_ids(self) -> list[str]:
        return [*self.artifacts, *self.uncatalogued]

    def select(self, tokens: Sequence[str]) -> tuple[list[str], list]:
        """Catalogue IDs and checks picked by ``--only``: catalogue IDs, check IDs, dotted prefixes of
        check IDs (``w9-sqrt-dk.1024``) or a source (``w9``, ``d2l``); :class:`UnknownId` for no match."""
        if not tokens:
            return list(self.artifacts), list(self.checks.values())
        chosen_artifacts: set[str] = set()
        chosen_checks: set[str] = set()
        for token in tokens:
            arts, found = self._match(token)
            if not arts and not found:
                raise UnknownId(token, self.known_ids())
            chosen_artifacts.update(arts)
            chosen_checks.update(c.id for c in found)
        artifacts = [a for a in self.known_ids() if a in chosen_artifacts]  # catalogue order
        return artifacts, [c for cid, c in self.checks.items() if cid in chosen_checks]

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
        super().__init__(
            f"unknown ID {token!r}; known IDs: {ranges(known)} "
            "(or a check ID or its prefix, e.g. w9-sqrt-dk.1024; or w9, d2l)"
        )


def ranges(ids: list[str]) -> str:
    """IDs joined by commas, numbered runs shortened: ``d2l-ex1, ..., d2l-ex12`` -> ``d2l-ex1..d2l-ex12``."""
    parts: list[list[str]] = []
    for i in ids:
        m = re.fullmatch(r"(.*?)(\d+)", i)
        prev = re.fullmatch(r"(.*?)(\d+)", parts[-1][-1]) if parts else None
        if m and prev and prev.group(1) == m.group(1) and int(prev.group(2)) + 1 == int(m.group(2)):
            parts[-1].append(i)
        else:
            parts.append([i])
    return ", ".join(", ".join(p) if len(p) < 3 else f"{p[0]}..{p[-1]}" for p in parts)
