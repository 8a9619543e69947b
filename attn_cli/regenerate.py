"""``attn verify`` and ``attn all`` as library functions: select, plan, run, compare, and write their
files (design notes: ``docs/design.md``, section ``attn_cli.regenerate``)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli import experiment_registry, pipeline, records
from attn_cli.errors import BadConfig, WriteFailed
from attn_cli.experiment_registry import Experiment, Plan, Registry, plan
from attn_cli.published.compare import summary
from attn_cli.records import FIGURE_SUFFIXES, Section, check_seconds, junit_xml
from attn_cli.records import manifest as manifest_json
from attn_cli.render import files, html
from attn_cli.render.report import experiment_markdown, index_markdown

if TYPE_CHECKING:
    from attn_cli.published.compare import Outcome
    from attn_cli.published.types import Artifact, Check

QUICK_NOTE = (
    "a smoke run at reduced sizes that judges nothing against the texts, nothing trained included; "
    "without --quick every check is judged as `attn verify` judges it"
)

RunPlan = Callable[..., list]  # (plan, verb, *, on_done, cache_root, use_cache, numerics) -> list[pipeline.Run]


@dataclass(kw_only=True)
class _Report:
    runs: list  # pipeline.Run per experiment, in the plan's order
    outcomes: list  # Outcome per selected check, in the checks' order
    coverage: pipeline.Coverage
    where: dict  # versions, machine, numerics (pipeline.where_it_ran)
    files: list[Path] = field(default_factory=list)  # the files written

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


@dataclass(kw_only=True)
class VerifyReport(_Report):
    """``attn verify``: every selected check with its verdict, and where it was computed."""

    summary: str  # "85 measured and 10 rules passed; 33 identities shown"
    seconds: float  # the runs and the comparison
    header: dict = field(default_factory=dict)  # records.header: what verify.json says of the run

    @functools.cached_property
    def record(self) -> dict:
        """``verify.json``: the header and every check's record (built once)."""
        return records.record(self.outcomes, self.header)


@dataclass(kw_only=True)
class AllReport(_Report):
    """``attn all``: the sections written, the checks judged once, the manifest and the files."""

    quick: bool  # a smoke run: nothing judged
    sections: list  # Section per experiment
    summary: str | None  # the verdicts per kind; None with --quick
    quick_line: str | None  # what --quick judged (nothing); None without it
    manifest: dict = field(default_factory=dict)  # manifest.json

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
    """Regenerate the published values ``only`` selects (all without it) and judge them, each
    experiment run once as :func:`plan` says; ``out``: also write ``verify.json`` and ``verify.html``.
    Raises :class:`~attn_cli.experiment_registry.UnknownId` or
    :class:`~attn_cli.errors.SeedOutOfRange` before any work."""
    registry = experiment_registry.Registry.load()
    artifact_ids, selected = registry.select(only)
    needed = ordered(registry, {e for c in selected if (e := registry.experiment_of(c.artifact)) is not None})
    cluster: dict[str, Any] = dict(scheduler=scheduler, scheduler_from=scheduler_from, worker_wait=worker_wait)
    made = plan(needed, seed=seed, device=device, use_cache=use_cache, quick=quick, seeds=seeds, **cluster)
    started = time.perf_counter()
    done = _run(made, "verify", progress, cache_root=cache_root, use_cache=use_cache, numerics=numerics)
    outcomes = pipeline.compare(selected, registry, done)
    where = pipeline.where_it_ran(device, numerics)
    report = VerifyReport(
        runs=done,
        outcomes=outcomes,
        coverage=pipeline.coverage(registry, artifact_ids, everything=not only),
        summary=summary(outcomes),
        where=where,
        seconds=time.perf_counter() - started,
        header=records.header(command="attn verify", where=where, device=device, seed=seed, seeds=seeds, quick=quick),
    )
    if out is not None:
        report.files = _write_verify_page(registry, artifact_ids, Path(out), report)
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
    """Run the experiments ``only`` selects (all without it), write each one's tables, JSON and
    figures into ``out`` as it finishes, then ``manifest.json``, ``index.md`` and ``index.html``.
    Every check is judged once, as :func:`verify` judges it (``quick``: a smoke run, nothing
    judged); a failed experiment is recorded in its section, the rest still run."""
    started = time.perf_counter()
    out = Path(out)
    registry = experiment_registry.Registry.load()
    artifact_ids, _ = registry.select(only)
    if quick and seeds is not None:
        raise BadConfig("seeds with quick: a quick run trains one seed and judges nothing trained")
    wanted = {registry.experiment_of(a) for a in artifact_ids} - {None}
    experiments = ordered(registry, [e for e in registry.experiments if e in wanted or not only])
    cluster: dict[str, Any] = dict(scheduler=scheduler, scheduler_from=scheduler_from, worker_wait=worker_wait)
    made = plan(experiments, seed=seed, device=device, use_cache=use_cache, smoke=quick, seeds=seeds, **cluster)
    sections: list = []  # Section per experiment, as it finished
    judged: dict = {}  # check ID -> Outcome, judged as its experiment finished

    def write(run: pipeline.Run) -> None:
        mine = pipeline.compare(
            [c for c in registry.checks.values() if experiment_name(registry, c) == run.name], registry, [run]
        )
        judged.update((o.check.id, o) for o in mine)
        sections.append(write_section(run, registry, out, formats, command_of(registry, run.experiment), mine))

    done = _run(made, "all", progress, on_done=write, cache_root=cache_root, use_cache=use_cache, numerics=numerics)
    outcomes = _all_outcomes(registry, only, done, judged)
    report = AllReport(
        quick=quick,
        runs=done,
        sections=sections,
        outcomes=outcomes,
        coverage=pipeline.coverage(registry, artifact_ids, everything=not only),
        summary=None if quick else summary(outcomes),
        quick_line=quick_line(outcomes, registry, made) if quick else None,
        where=pipeline.where_it_ran(device, numerics),
    )
    report.manifest = _manifest(report, seed, seeds, device, time.perf_counter() - started)
    index = write_index(out, report.manifest, catalogued(registry, artifact_ids), sections, outcomes)
    report.files = [*(out / f for s in sections for f in (*s.figures, *s.data)), *index]
    return report


def _manifest(report: AllReport, seed: int, seeds: int | None, device: str, seconds: float) -> dict:
    """``manifest.json``: the sections, the verdicts, and verify.json's header and records."""
    quick, cov = report.quick, report.coverage
    head = records.header(command="attn all", where=report.where, device=device, seed=seed, seeds=seeds, quick=quick)
    manifest = manifest_json(
        report.sections,
        command=head["command"],
        quick=quick,
        seed=seed,
        device=device,
        where=report.where,
        cache=pipeline.cache_lines(report.runs),
        seconds=seconds,
        checks=report.summary,
        coverage=cov.line(),
        missing=cov.no_experiment,
        outcomes=report.outcomes,
        quick_note=QUICK_NOTE if quick else None,
    )
    manifest.update(header=head, records=records.record(report.outcomes, head)["checks"])  # "checks": the summary
    return manifest


def _write_verify_page(registry: Registry, artifact_ids: Iterable[str], out: Path, report: VerifyReport) -> list[Path]:
    """``verify.json`` (the --json record) and ``verify.html``: names of their own, so an ``attn all``
    report in the same folder is left alone."""
    files.write_json(out / "verify.json", report.record)
    manifest = {**report.header, "quick": False, "timing": {"seconds": round(report.seconds, 3)}}  # the page's facts
    page = html.index_html(
        catalogue=catalogued(registry, artifact_ids),
        sections=[],
        manifest=manifest,
        outcomes=report.outcomes,
        summary=report.summary,
        coverage_line=report.coverage.line(),
        links=("verify.json",),
        title="attn verify: the texts' numbers, regenerated",
    )
    files.write_text(out / "verify.html", page)
    return [out / "verify.html", out / "verify.json"]


def _all_outcomes(registry: Registry, only: Sequence[str], done: list[pipeline.Run], judged_now: dict) -> list:
    """Every selected check's verdict: the one judged as its experiment finished, or judged here
    (a check whose experiment did not run: not regenerated)."""
    ran = {r.name for r in done}
    selected = [c for c in registry.checks.values() if not only or experiment_name(registry, c) in ran]
    rest = {o.check.id: o for o in pipeline.compare([c for c in selected if c.id not in judged_now], registry, done)}
    return [judged_now.get(c.id) or rest[c.id] for c in selected]


def _run(made: Plan, verb: str, progress: RunPlan | None, **keywords: Any) -> list[pipeline.Run]:
    return pipeline.run_experiments(made, **keywords) if progress is None else progress(made, verb, **keywords)


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


def quick_line(outcomes: Sequence[Outcome], registry: Registry, made: Plan) -> str:
    """What ``attn all --quick`` judged: nothing; how many checks it shows, the trained ones named."""
    trained = [exp.name for exp, _, _ in made if exp.slow]
    n_trained = sum(experiment_name(registry, o.check) in trained for o in outcomes)
    what = f"; {n_trained} of them trained: {', '.join(trained)}" if trained else ""
    return f"quick run: {QUICK_NOTE} ({len(outcomes)} checks shown, not judged{what})"


def write_section(
    run: pipeline.Run,
    registry: Registry,
    out: Path,
    formats: Sequence[str],
    command: str,
    outcomes: Sequence[Outcome] = (),
) -> Section:
    """Write one run's ``<name>.json``, ``<name>.md`` and figures, its tables marked with ``outcomes``."""
    exp = run.experiment
    section = Section(
        name=exp.name,
        command=command,
        ids=list(exp.artifacts),
        artifacts=[registry.artifacts[a] for a in registry.artifacts if a in exp.artifacts],
        seconds=run.seconds,
        error=run.error,
        config=exp.recorded_config(run.config),
        outcomes=[o for o in outcomes if o.check.artifact in exp.artifacts],
    )
    if run.error:
        return section
    by_id = {o.check.id: o for o in outcomes}
    try:
        t0 = time.perf_counter()
        section.tables = exp.tables(run.result, by_id)
        section.cached = run.result.cached_runs() if hasattr(run.result, "cached_runs") else None  # the copy task
        files.write_json(out / f"{exp.name}.json", files.result_json(run.result, by_id))
        written = [_relative(p, out) for p in exp.figures(run.result, out, formats, by_id)]
        section.figures = [f for f in written if f.lower().endswith(FIGURE_SUFFIXES)]
        section.data = [f"{exp.name}.md", f"{exp.name}.json"] + [f for f in written if f not in section.figures]
        section.data += [f for f in _beside(out, section.figures) if f not in section.data]
        files.write_text(out / f"{exp.name}.md", experiment_markdown(section))
        section.seconds += time.perf_counter() - t0
    except WriteFailed:  # disk full or read-only: stop here; files written so far are complete
        raise
    except Exception as exc:
        section.error = f"rendering failed: {type(exc).__name__}: {exc}"
    return section


def write_index(out: Path, manifest: dict, shown: list, sections: list, outcomes: list) -> list[Path]:
    """``manifest.json``, ``index.md`` and ``index.html`` written into ``out``; their paths."""
    both: dict[str, Any] = dict(catalogue=shown, sections=sections, manifest=manifest)  # what both pages show
    both.update(summary=manifest["checks"], coverage_line=manifest["coverage"])  # the summary and coverage lines
    files.write_json(out / "manifest.json", manifest)
    files.write_text(out / "index.md", index_markdown(**both))
    page = html.index_html(**both, outcomes=outcomes, links=("manifest.json", "index.md"))
    files.write_text(out / "index.html", page)
    return [out / "manifest.json", out / "index.md", out / "index.html"]


def catalogued(registry: Registry, artifact_ids: Iterable[str]) -> list[Artifact]:
    """The catalogue entries of these IDs (those the catalogue has), in the given order."""
    return [registry.artifacts[a] for a in artifact_ids if a in registry.artifacts]


def write_junit(path: Path, outcomes: Iterable[Outcome], runs: Sequence[pipeline.Run], registry: Registry) -> Path:
    """The checks as JUnit XML (:func:`attn_cli.records.junit_xml`) at ``path``, written atomically."""
    checks = [o.as_json() for o in outcomes]
    files.write_text(Path(path), junit_xml(checks, registry.artifacts, check_seconds(runs, checks)))
    return Path(path)


def _relative(path: Path, out: Path) -> str:
    path = Path(path)
    try:
        return path.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        return str(path)


def _beside(out: Path, figures: list[str]) -> list[str]:
    """Raw-number files written beside each figure (same stem, another suffix)."""
    near = (Path(fig).with_suffix("").with_suffix(suffix) for fig in figures for suffix in (".csv", ".json"))
    return list(dict.fromkeys(p.as_posix() for p in near if (out / p).exists()))
