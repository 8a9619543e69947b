"""``attn list``, ``attn all`` and ``attn verify``: the whole catalogue at once.

The experiments are found, not listed (:func:`attn_cli.runner.discover`); the catalogue and
the published values come from :mod:`attn_cli.published`.
"""

from __future__ import annotations

import json
import sys
import time

import click
from click.core import ParameterSource

from attn_cli.options import (Common, JudgedCommand, MultiValueOption, cache_dir_option, check_seeds, common_options,
                              format_option, scheduler_option)
from attn_cli.plan import QUICK_NOTE
from attn_cli.plan import judged as judged_plan
from attn_cli.plan import smoke as smoke_plan
from attn_cli.published.compare import summary


@click.command(cls=JudgedCommand, name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as a JSON list instead of the table.")
def list_(as_json: bool):
    """Every table and figure of the two texts, and the command that regenerates it.

    Columns: catalogue ID, source text, section, title, subcommand, the files it writes into
    --out, and how many published values `attn verify` checks for it.

    \b
    Examples:
        attn list
        attn list --json
    """
    from attn_cli import runner
    from attn_cli.render import console, report

    registry = runner.Registry.load()
    rows = report.catalogue_rows(registry.artifacts.values(), registry)
    if as_json:
        print(report.catalogue_json(rows))
        return
    console.stdout.print(report.catalogue_table(rows, width=console.stdout.width))


@click.command(cls=JudgedCommand, name="verify")
@click.option("--only", cls=MultiValueOption, metavar="ID...",
              help="Check only these: catalogue IDs (see `attn list`), check IDs or their prefixes "
                   "(w9-sqrt-dk.1024), or a source (w9, d2l).")
@click.option("--no-cache", is_flag=True, help="Recompute (and re-cache) what the per-user cache holds.")
@common_options
@cache_dir_option
@scheduler_option
def verify(only: tuple[str, ...], no_cache: bool, common: Common):
    """Regenerate every published value and compare it with the text.

    Each experiment runs once at its default configuration (the texts' settings), with
    --seed and --device. Trained values (the copy task) are judged by where the published
    value falls among 5 seeds (--seed with the exact engine, the next 4 with the fast one);
    runs in the per-user cache are reused (`attn cache`; --no-cache retrains). Prints
    ID | published | regenerated | tolerance | status (each tolerance's reason and each
    failure in the footnotes), then the summary per kind, e.g. "85 measured and 10 rules
    passed; 33 identities shown" (identities, true by construction, are shown and never
    counted), and the coverage of the catalogue (IDs with no checks or no experiment).
    Exits 1 if any check fails, including a published value whose experiment produced
    nothing ("not regenerated"). --json prints a list of objects: id, artifact, published,
    regenerated, tolerance, kind (measured, rule, identity), test (abs, exact, below, rule),
    ok (null when skipped), status, reason (of the tolerance), note; a trained value adds
    values (one per seed or run) and rule.

    --quick runs the cheap experiments at their defaults all the same (seconds; the
    published values hold only there) and the slow copy task at its quick configuration,
    whose checks are then reported as "skipped (quick)".

    With --out given, also writes verify.json (the --json records) and verify.html (the
    checks as a page for a browser: counts per kind, failures first, one section per ID).

    \b
    Examples:
        attn verify
        attn verify --only w9 --out report/
        attn verify --only w9-sqrt-dk d2l-mha-params --json
        attn verify --quick
    """
    from attn_cli import runner, runs
    from attn_cli.commands import running, writing
    from attn_cli.commands.cache import cache_root
    from attn_cli.render import console, report

    registry = runner.Registry.load()
    try:
        artifact_ids, selected = registry.select(only)
    except runner.UnknownId as exc:
        raise click.BadParameter(str(exc), param_hint="'--only'") from None

    needed = _ordered(registry, {registry.experiment_of(c.artifact) for c in selected} - {None})
    root = cache_root(common)
    plan = judged_plan(needed, seed=common.seed, device=common.device, cache_root=root, use_cache=not no_cache,
                       quick=common.quick, **_cluster(common, needed))

    for exp, config, _ in plan:  # every seed verify will train with, before any work
        check_seeds(runner.seeds_used(exp.module, config))
    started = time.perf_counter()
    runs_done = running.run_plan(plan, "verify", cache_root=root, use_cache=not no_cache)
    outcomes = runs.compare(selected, registry, runs_done)
    cov = runs.coverage(registry, artifact_ids, everything=not only)
    line = summary(outcomes)
    if click.get_current_context().get_parameter_source("out") is not ParameterSource.DEFAULT:
        writing.write_verify_page(registry, artifact_ids, outcomes, common, time.perf_counter() - started, line, cov)

    context = [*runs.cache_lines(runs_done), _numerics_line(common.device)]
    if common.json:
        print(json.dumps([o.as_json() for o in outcomes], indent=2, default=_json_default))
        for text in (line, cov.line(), *context):
            console.stderr.print(text, highlight=False)
    else:
        console.stdout.print(report.verify_table(outcomes, width=console.stdout.width))
        failed = any(o.status == "fail" for o in outcomes)
        console.stdout.print(line, style="bold red" if failed else "bold green", highlight=False)
        console.stdout.print(cov.line(), style="" if cov.complete else "yellow", highlight=False)
        for text in context:
            console.stdout.print(text, style="dim", highlight=False)
    if any(o.status == "fail" for o in outcomes):
        sys.exit(1)


@click.command(cls=JudgedCommand, name="all")
@click.option("--only", cls=MultiValueOption, metavar="ID...",
              help="Run only the experiments that regenerate these catalogue IDs (or a source: w9, d2l).")
@click.option("--no-cache", is_flag=True, help="Recompute (and re-cache) what the per-user cache holds (see `attn cache`).")
@common_options
@format_option
@cache_dir_option
@scheduler_option
def all_(only: tuple[str, ...], no_cache: bool, common: Common):
    """Run every experiment and write every table and figure, with a report, into --out.

    For each experiment: its tables as Markdown (<name>.md) and its result as JSON
    (<name>.json), every figure (PNG, raw numbers beside it); then manifest.json (catalogue
    ID -> files, configurations, versions, machine, seconds, verdicts), index.html (the
    report as one page that works offline in a browser: verdicts per kind, then every
    catalogue ID with its tables, figures and checks) and index.md (the same in any Markdown
    viewer). --format svg pdf writes each figure in those formats (the page shows SVG where
    written). Exits 1 when a check fails or an experiment fails, after writing every file.

    Every check is judged exactly as `attn verify` judges it, at the same configuration:
    the copy task trains 5 seeds (--seed with the exact engine, the next 4 with the fast
    one) and each published cell is judged by the seed rule. Its training runs are cached
    in the per-user cache (`attn cache`) and reused by both commands, whatever their --out
    (--no-cache retrains), so `attn all` after
    `attn verify` trains nothing; cold, it takes about as long as a cold `attn verify`.
    Every mark in a table is the verdict of its check.

    --quick is a smoke run at reduced sizes that judges nothing, nothing trained included:
    every check is listed as "skipped (quick)".

    \b
    Examples:
        attn all --out report/
        attn all --quick --out /tmp/smoke
        attn all --only w9-masks d2l-crossattn-map
    """
    from attn_cli import runner, runs
    from attn_cli.commands import running, writing
    from attn_cli.commands.cache import cache_root
    from attn_cli.render import console, files, html, report

    started = time.perf_counter()
    registry = runner.Registry.load()
    out = common.out
    try:
        artifact_ids, _ = registry.select(only)
    except runner.UnknownId as exc:
        raise click.BadParameter(str(exc), param_hint="'--only'") from None
    wanted = {registry.experiment_of(a) for a in artifact_ids} - {None}
    experiments = _ordered(registry, [e for e in registry.experiments if e in wanted or not only])
    root = cache_root(common)
    make_plan = smoke_plan if common.quick else judged_plan
    plan = make_plan(experiments, seed=common.seed, device=common.device, cache_root=root, use_cache=not no_cache,
                     **_cluster(common, experiments))
    for exp, config, _ in plan:  # every seed the run will use, before any work
        check_seeds(runner.seeds_used(exp.module, config))

    sections = []
    judged: dict = {}  # check ID -> Outcome: the one verdict its tables, report and manifest show

    def write(run) -> None:
        mine = runs.compare([c for c in registry.checks.values() if _experiment_name(registry, c) == run.name],
                            registry, [run])
        judged.update((o.check.id, o) for o in mine)
        sections.append(writing.write_section(run, registry, out, common.formats,
                                              _command_of(registry, run.experiment), mine))

    runs_done = running.run_plan(plan, "all", on_done=write, cache_root=root, use_cache=not no_cache)

    ran = {r.name for r in runs_done}
    selected = [c for c in registry.checks.values() if not only or _experiment_name(registry, c) in ran]
    rest = {o.check.id: o for o in runs.compare([c for c in selected if c.id not in judged], registry, runs_done)}
    outcomes = [judged.get(c.id) or rest[c.id] for c in selected]  # not regenerated: judged here
    cov = runs.coverage(registry, list(registry.artifacts) if not only else artifact_ids, everything=not only)
    line = None if common.quick else summary(outcomes)
    quick_line = _quick_line(outcomes, registry, plan) if common.quick else None

    manifest = writing.manifest_of(sections, common, time.perf_counter() - started, line, cov, runs_done,
                                   outcomes, QUICK_NOTE if common.quick else None)
    files.write_json(out / "manifest.json", manifest)
    shown = [registry.artifacts[a] for a in artifact_ids if a in registry.artifacts]
    files.write_text(out / "index.md", report.index_markdown(
        catalogue=shown, sections=sections, manifest=manifest, summary=line, coverage_line=cov.line()))
    files.write_text(out / "index.html", html.index_html(
        catalogue=shown, sections=sections, manifest=manifest, outcomes=outcomes, summary=line,
        coverage_line=cov.line(), links=("manifest.json", "index.md")))

    errors = [s for s in sections if s.error]
    for aid, entry in manifest["artifacts"].items():
        if entry.get("not_written"):
            console.note(f"{aid}: {entry['experiment']} did not write {', '.join(entry['not_written'])}")
    if common.json:
        print(json.dumps(manifest, indent=2, default=_json_default))
        if quick_line:
            console.stderr.print(quick_line, style="yellow", highlight=False)
    else:
        n_files = sum(len(s.figures) + len(s.data) for s in sections) + 3
        console.stdout.print(f"wrote {n_files} files to {out}/ (report: {out / 'index.html'}, {out / 'index.md'}) "
                             f"in {manifest['timing']['seconds']:.1f} s", highlight=False, markup=False)
        if line:
            console.stdout.print(f"checks against the texts: {line}", highlight=False)
        if quick_line:
            console.stdout.print(quick_line, style="yellow", highlight=False)
        console.stdout.print(cov.line(), highlight=False)
        for text in (*runs.cache_lines(runs_done), _numerics_line(common.device)):
            console.stdout.print(text, style="dim", highlight=False)
    for s in errors:
        console.stderr.print(f"{s.name} failed: {s.error}", style="red", highlight=False, markup=False)
    failed = [] if common.quick else [o for o in outcomes if o.status == "fail"]  # --quick judges nothing
    if failed:
        console.stderr.print(f"{len(failed)} check(s) failed against the texts: "
                             + ", ".join(o.check.id for o in failed[:5]) + (", ..." if len(failed) > 5 else ""),
                             style="red", highlight=False)
    if errors or failed:
        sys.exit(1)


def _cluster(common: Common, experiments) -> dict:
    """The Dask scheduler (--scheduler) as plan keywords, checked to answer before any work;
    empty without one, or when no experiment of the plan trains (only the copy task does)."""
    if not common.scheduler or not any(exp.slow for exp in experiments):
        return {}
    from attn_cli.experiments.copy_task.cluster import plan_keywords

    return plan_keywords(common.scheduler, common.scheduler_from)


def _experiment_name(registry, check) -> str | None:
    exp = registry.experiment_of(check.artifact)
    return exp.name if exp else None


def _quick_line(outcomes, registry, plan) -> str:
    """What ``attn all --quick`` judged: nothing; how many checks it shows, the trained ones named."""
    trained = [exp.name for exp, _, _ in plan if exp.slow]
    n_trained = sum(_experiment_name(registry, o.check) in trained for o in outcomes)
    what = f"; {n_trained} of them trained: {', '.join(trained)}" if trained else ""
    return f"quick run: {QUICK_NOTE} ({len(outcomes)} checks shown, not judged{what})"


COMMANDS = [list_, all_, verify]


def _numerics_line(device: str = "cpu") -> str:
    from attn_cli import numerics
    from attn_cli.core.device import cuda_summary

    d = numerics.describe(device)
    gpu = f"; GPU {cuda_summary(d['cuda'])}" if "cuda" in d else ""
    return f"numerics: {d['mode']} ({d['isa']} CPU kernels){gpu}"


def _ordered(registry, experiments):
    """Experiments in catalogue order of their first artifact (W9 1.1 first)."""
    position = {aid: i for i, aid in enumerate(registry.artifacts)}
    return sorted(experiments, key=lambda e: (min((position[a] for a in e.artifacts if a in position),
                                                       default=len(position)), e.name))


def _command_of(registry, exp) -> str:
    commands = []
    for aid in exp.artifacts:
        c = registry.artifacts[aid].command if aid in registry.artifacts else exp.name.replace("_", "-")
        if c not in commands:
            commands.append(c)
    return ", ".join(commands) or exp.name


def _json_default(obj):
    from attn_cli.render.files import _json_default as default

    return default(obj)
