"""``attn verify`` and ``attn all`` as library functions: select, plan, run, compare, write.

Design notes: ``docs/design.md``, section ``attn_cli.regenerate``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli import experiment_registry, pipeline, records
from attn_cli.errors import BadConfig
from attn_cli.experiment_registry import Experiment, Registry
from attn_cli.plan import QUICK_NOTE, Plan, judged, smoke
from attn_cli.published.compare import summary
from attn_cli.published.seed_rule import MIN_SEEDS
from attn_cli.render.manifest import manifest as manifest_json
from attn_cli.report_files import catalogued, write_index, write_section, write_verify_page

if TYPE_CHECKING:
    from attn_cli.published.compare import Outcome
    from attn_cli.published.types import Check

RunPlan = Callable[..., list]  # (plan, verb, *, on_done, cache_root, use_cache, numerics) -> list[pipeline.Run]


@dataclass
class _Report:
    runs: list  # pipeline.Run per experiment, in the plan's order
    outcomes: list  # Outcome per selected check, in the checks' order
    coverage: pipeline.Coverage
    where: dict  # versions, machine, numerics (pipeline.where_it_ran)

    @property
    def failed(self) -> list:
        return [o for o in self.outcomes if o.status == "fail"]

    @property
    def exit_code(self) -> int:
        """1 when a check failed (a published value not regenerated included), else 0."""
        return 1 if self.failed else 0

    @property
    def context_lines(self) -> list[str]:
        """The closing lines: cached work reused, then the numeric mode."""
        return [*pipeline.cache_lines(self.runs), pipeline.numerics_line(self.where["numerics"])]


@dataclass
class VerifyReport(_Report):
    """``attn verify``: every selected check with its verdict, and where it was computed."""

    summary: str  # "85 measured and 10 rules passed; 33 identities shown"
    seconds: float  # the runs and the comparison
    header: dict = field(default_factory=dict)  # records.header: what verify.json says of the run
    files: list[Path] = field(default_factory=list)  # verify.html and verify.json, when out was given

    @functools.cached_property
    def record(self) -> dict:
        """``verify.json``: the header and every check's record (built once)."""
        return records.record(self.outcomes, self.header)


@dataclass
class AllReport(_Report):
    """``attn all``: the sections written, the checks judged once, the manifest and the files."""

    out: Path
    quick: bool  # a smoke run: nothing judged
    sections: list  # report_files.Section per experiment
    summary: str | None  # the verdicts per kind; None with --quick
    quick_line: str | None  # what --quick judged (nothing); None without it
    manifest: dict  # manifest.json
    files: list[Path] = field(default_factory=list)  # every file written, the three report files last

    @property
    def errors(self) -> list:
        """The sections whose experiment or rendering failed."""
        return [s for s in self.sections if s.error]

    @property
    def failed(self) -> list:
        """The checks that failed (none with --quick, which judges nothing)."""
        return [] if self.quick else super().failed

    @property
    def exit_code(self) -> int:
        """1 when an experiment or a check failed (after every file was written), else 0."""
        return 1 if self.errors or self.failed else 0

    @property
    def not_written(self) -> list[str]:
        """One line per catalogue ID whose experiment did not write one of its catalogue files."""
        return [
            f"{aid}: {entry['experiment']} did not write {', '.join(entry['not_written'])}"
            for aid, entry in self.manifest["artifacts"].items()
            if entry.get("not_written")
        ]


def verify(
    only: Sequence[str] = (),
    *,
    seed: int = 0,
    device: str = "cpu",
    quick: bool = False,
    numerics: str | None = None,
    cache_root: str | Path | None = None,
    use_cache: bool = True,
    scheduler: str | None = None,
    scheduler_from: str | None = None,
    out: Path | None = None,
    seeds: int | None = None,
    progress: RunPlan | None = None,
    worker_wait: float | None = None,
) -> VerifyReport:
    """Regenerate the published values ``only`` selects (all without it) and judge them.

    Each experiment a selected check needs runs once at the configuration its checks are judged
    at (:func:`attn_cli.plan.judged`).  ``out``: also write ``verify.json`` and ``verify.html``
    there.  ``seeds``: how many seeds judge each trained value (None: the seed rule's default).
    Raises :class:`~attn_cli.experiment_registry.UnknownId` or
    :class:`~attn_cli.experiment_registry.SeedOutOfRange` before any work.
    """
    registry = experiment_registry.Registry.load()
    artifact_ids, selected = registry.select(only)
    needed = ordered(registry, {e for c in selected if (e := registry.experiment_of(c.artifact)) is not None})
    make = functools.partial(judged, quick=quick, seeds=seeds)
    plan = _plan(make, needed, seed, device, use_cache, scheduler, scheduler_from, worker_wait)
    started = time.perf_counter()
    done = _run(plan, "verify", progress, cache_root=cache_root, use_cache=use_cache, numerics=numerics)
    outcomes = pipeline.compare(selected, registry, done)
    cov = pipeline.coverage(registry, artifact_ids, everything=not only)
    where = pipeline.where_it_ran(device, numerics)
    report = VerifyReport(
        runs=done,
        outcomes=outcomes,
        coverage=cov,
        summary=summary(outcomes),
        where=where,
        seconds=time.perf_counter() - started,
        header=_header("attn verify", where, device, seed, seeds, quick),
    )
    if out is not None:
        report.files = write_verify_page(registry, artifact_ids, Path(out), report)
    return report


def regenerate_all(
    out: str | Path,
    only: Sequence[str] = (),
    *,
    seed: int = 0,
    device: str = "cpu",
    quick: bool = False,
    numerics: str | None = None,
    formats: Sequence[str] = ("png",),
    cache_root: str | Path | None = None,
    use_cache: bool = True,
    scheduler: str | None = None,
    scheduler_from: str | None = None,
    seeds: int | None = None,
    progress: RunPlan | None = None,
    worker_wait: float | None = None,
) -> AllReport:
    """Run the experiments ``only`` selects (every one without it) and write into ``out`` each
    one's tables, JSON and figures as it finishes, then ``manifest.json``, ``index.md`` and
    ``index.html``.  Every check is judged once, as :func:`verify` judges it (``quick``: a smoke
    run that judges nothing).  An experiment that fails is recorded in its section; the rest
    still run.  Raises as :func:`verify` does, and :class:`~attn_cli.errors.BadConfig` for
    ``seeds`` with ``quick``.
    """
    started = time.perf_counter()
    out = Path(out)
    registry = experiment_registry.Registry.load()
    artifact_ids, _ = registry.select(only)
    if quick and seeds is not None:
        raise BadConfig("seeds with quick: a quick run trains one seed and judges nothing trained")
    wanted = {registry.experiment_of(a) for a in artifact_ids} - {None}
    experiments = ordered(registry, [e for e in registry.experiments if e in wanted or not only])
    make = smoke if quick else functools.partial(judged, seeds=seeds)
    plan = _plan(make, experiments, seed, device, use_cache, scheduler, scheduler_from, worker_wait)
    job = _AllRun(registry, out, formats, only, artifact_ids, quick, seed, seeds, device, numerics, started)
    done = _run(plan, "all", progress, on_done=job.write, cache_root=cache_root, use_cache=use_cache, numerics=numerics)
    return job.report(plan, done)


@dataclass
class _AllRun:
    """``attn all`` under way: what it was asked, and the sections written as each experiment finished."""

    registry: Registry
    out: Path
    formats: Sequence[str]
    only: Sequence[str]
    artifact_ids: list[str]
    quick: bool
    seed: int
    seeds: int | None
    device: str
    numerics: str | None
    started: float  # time.perf_counter() when attn all began
    sections: list = field(default_factory=list)  # report_files.Section per experiment, as it finished
    judged: dict = field(default_factory=dict)  # check ID -> Outcome, judged as its experiment finished

    def write(self, run: pipeline.Run) -> None:
        """``on_done``: judge a finished run's checks, then write its section (tables, JSON, figures)."""
        registry = self.registry
        mine = pipeline.compare(
            [c for c in registry.checks.values() if experiment_name(registry, c) == run.name], registry, [run]
        )
        self.judged.update((o.check.id, o) for o in mine)
        command = command_of(registry, run.experiment)
        self.sections.append(write_section(run, registry, self.out, self.formats, command, mine))

    def report(self, plan: Plan, done: list[pipeline.Run]) -> AllReport:
        """Every selected check's verdict, then ``manifest.json``, ``index.md`` and ``index.html``."""
        registry, only, quick, device = self.registry, self.only, self.quick, self.device
        outcomes = _all_outcomes(registry, only, done, self.judged)
        cov = pipeline.coverage(
            registry, list(registry.artifacts) if not only else self.artifact_ids, everything=not only
        )
        line = None if quick else summary(outcomes)
        where = pipeline.where_it_ran(device, self.numerics)
        manifest = manifest_json(
            self.sections,
            command="attn all" + (" --quick" if quick else ""),
            quick=quick,
            seed=self.seed,
            device=device,
            where=where,
            cache=pipeline.cache_lines(done),
            seconds=time.perf_counter() - self.started,
            checks=line,
            coverage=cov.line(),
            missing=cov.no_experiment,
            outcomes=outcomes,
            quick_note=QUICK_NOTE if quick else None,
        )
        record = records.record(outcomes, _header("attn all", where, device, self.seed, self.seeds, quick))
        manifest.update(header=record["header"], records=record["checks"])  # "checks" is the summary line
        index = write_index(self.out, manifest, catalogued(registry, self.artifact_ids), self.sections, outcomes)
        written = [self.out / f for s in self.sections for f in (*s.figures, *s.data)]
        return AllReport(
            out=self.out,
            quick=quick,
            runs=done,
            sections=self.sections,
            outcomes=outcomes,
            coverage=cov,
            summary=line,
            quick_line=quick_line(outcomes, registry, plan) if quick else None,
            manifest=manifest,
            where=where,
            files=[*written, *index],
        )


def _all_outcomes(registry: Registry, only: Sequence[str], done: list[pipeline.Run], judged_now: dict) -> list:
    """Every selected check's verdict: the one judged as its experiment finished, or judged here
    (a check whose experiment did not run: not regenerated)."""
    ran = {r.name for r in done}
    selected = [c for c in registry.checks.values() if not only or experiment_name(registry, c) in ran]
    rest = {o.check.id: o for o in pipeline.compare([c for c in selected if c.id not in judged_now], registry, done)}
    return [judged_now.get(c.id) or rest[c.id] for c in selected]


def _header(command: str, where: dict, device: str, seed: int, seeds: int | None, quick: bool) -> dict:
    return records.header(
        command=command + (" --quick" if quick else ""),
        where=where,
        device=device,
        seed=seed,
        seeds=None if quick else seeds or MIN_SEEDS,
        quick=quick,
    )


def _run(plan: Plan, verb: str, progress: RunPlan | None, **keywords: Any) -> list[pipeline.Run]:
    return pipeline.run_experiments(plan, **keywords) if progress is None else progress(plan, verb, **keywords)


def _plan(
    make: Callable[..., Plan],
    experiments: Sequence[Experiment],
    seed: int,
    device: str,
    use_cache: bool,
    scheduler: str | None,
    scheduler_from: str | None,
    worker_wait: float | None,
) -> Plan:
    """``make(experiments, ...)``, a :mod:`attn_cli.plan` function, with the Dask scheduler
    (--scheduler) checked to answer only when an experiment trains, and every seed the plan
    will hand to torch checked (:class:`experiment_registry.SeedOutOfRange`), before any work."""
    options: dict[str, Any] = {"seed": seed, "device": device, "use_cache": use_cache}
    if scheduler and any(exp.slow for exp in experiments):
        from attn_cli.experiments.copy_task.cluster import plan_keywords

        options.update(plan_keywords(scheduler, scheduler_from, worker_wait))
    plan = make(experiments, **options)
    for exp, config, _ in plan:
        experiment_registry.check_seed_range(experiment_registry.seeds_used(exp.module, config))
    return plan


def ordered(registry: Registry, experiments: Iterable[Experiment]) -> list[Experiment]:
    """Experiments in catalogue order of their first artifact (W9 1.1 first)."""
    position = {aid: i for i, aid in enumerate(registry.artifacts)}
    return sorted(
        experiments,
        key=lambda e: (min((position[a] for a in e.artifacts if a in position), default=len(position)), e.name),
    )


def experiment_name(registry: Registry, check: Check) -> str | None:
    exp = registry.experiment_of(check.artifact)
    return exp.name if exp else None


def command_of(registry: Registry, exp: Experiment) -> str:
    """The command(s) that regenerate an experiment's catalogue IDs, e.g. ``"masks"``."""
    default = exp.name.replace("_", "-")
    commands = dict.fromkeys(
        registry.artifacts[a].command if a in registry.artifacts else default for a in exp.artifacts
    )
    return ", ".join(commands) or exp.name


def quick_line(outcomes: Sequence[Outcome], registry: Registry, plan: Plan) -> str:
    """What ``attn all --quick`` judged: nothing; how many checks it shows, the trained ones named."""
    trained = [exp.name for exp, _, _ in plan if exp.slow]
    n_trained = sum(experiment_name(registry, o.check) in trained for o in outcomes)
    what = f"; {n_trained} of them trained: {', '.join(trained)}" if trained else ""
    return f"quick run: {QUICK_NOTE} ({len(outcomes)} checks shown, not judged{what})"
