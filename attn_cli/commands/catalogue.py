"""``attn list``, ``attn all`` and ``attn verify``: the whole catalogue at once.

The experiments are found, not listed (:func:`attn_cli.runner.discover`); the catalogue and
the published values come from :mod:`attn_cli.published`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import re
import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from attn_cli.errors import WriteFailed
from attn_cli.options import Common, MultiValueOption, common_options, format_option

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")  # figure files among what an experiment writes


@click.command(name="list")
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


@click.command(name="verify")
@click.option("--only", cls=MultiValueOption, metavar="ID...",
              help="Check only these: catalogue IDs (see `attn list`), check IDs or their prefixes "
                   "(w9-sqrt-dk.1024), or a source (w9, d2l).")
@click.option("--no-cache", is_flag=True, help="Retrain the copy-task runs cached under OUT/.cache/copy_task.")
@common_options
def verify(only: tuple[str, ...], no_cache: bool, common: Common):
    """Regenerate every published value and compare it with the text.

    Each experiment runs once at its default configuration (the texts' settings), with
    --seed and --device. Trained values (the copy task) are judged by where the published
    value falls among 5 seeds (--seed with the exact engine, the next 4 with the fast one);
    training runs cached under --out are reused (--no-cache retrains). Prints
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
    from attn_cli import runner
    from attn_cli.render import console, report

    registry = runner.Registry.load()
    try:
        artifact_ids, selected = registry.select(only)
    except runner.UnknownId as exc:
        raise click.BadParameter(str(exc), param_hint="'--only'") from None

    needed = _ordered(registry, {registry.experiment_of(c.artifact) for c in selected} - {None})
    plan = []
    for exp in needed:
        quick = common.quick and exp.slow
        plan.append((exp, exp.config(seed=common.seed, device=common.device, quick=quick, out=common.out,
                                     use_cache=not no_cache, verify=not quick),
                     "quick" if quick else None))

    started = time.perf_counter()
    runs = _run_with_progress(plan, "verify")
    outcomes = runner.compare(selected, registry, runs)
    cov = runner.coverage(registry, artifact_ids, everything=not only)
    line = runner.summary(outcomes)
    if click.get_current_context().get_parameter_source("out") is not ParameterSource.DEFAULT:
        _write_verify_page(registry, artifact_ids, outcomes, common, time.perf_counter() - started, line, cov)

    context = [*runner.cache_lines(runs), _numerics_line()]
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


@click.command(name="all")
@click.option("--only", cls=MultiValueOption, metavar="ID...",
              help="Run only the experiments that regenerate these catalogue IDs (or a source: w9, d2l).")
@click.option("--engine", type=click.Choice(["fast", "exact"]), default="fast", show_default=True,
              help="Copy-task training engine: fast (statistically equivalent numbers) or exact "
                   "(bit for bit the text's program; what `attn verify` checks).")
@click.option("--no-cache", is_flag=True, help="Retrain the copy-task runs cached under OUT/.cache/copy_task.")
@common_options
@format_option
def all_(only: tuple[str, ...], engine: str, no_cache: bool, common: Common):
    """Run every experiment and write every table and figure, with a report, into --out.

    For each experiment: its tables as Markdown (<name>.md) and its result as JSON
    (<name>.json), every figure (PNG, raw numbers beside it); then manifest.json (catalogue
    ID -> files, configurations, versions, machine, seconds), index.html (the report as one
    page that works offline in a browser: verdicts per kind, then every catalogue ID with its
    tables, figures and checks) and index.md (the same in any Markdown viewer). --format svg
    pdf writes each figure in those formats (the page shows SVG where written). Cached
    copy-task training runs under --out are reused (--no-cache retrains). --quick is a smoke
    run at reduced sizes (not compared with the texts). Exits 1 when a check fails or an
    experiment fails, after writing every file.

    The copy task trains with its fast engine here (same models, data and initial weights;
    numbers statistically equivalent to the text's program, in a fraction of the time);
    `attn verify` checks the exact engine's numbers, and `--engine exact` uses it here too
    (reusing the runs `attn verify` cached under the same --out).

    \b
    Examples:
        attn all --out report/
        attn all --quick --out /tmp/smoke
        attn all --only w9-masks d2l-crossattn-map
    """
    from attn_cli import runner
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
    plan = [(exp, exp.config(seed=common.seed, device=common.device, quick=common.quick, out=out, engine=engine,
                             use_cache=not no_cache),
             "quick" if common.quick else "fast engine" if engine == "fast" and exp.has_fast_engine else None)
            for exp in experiments]

    sections: list[dict] = []

    def write(run: runner.Run) -> None:
        exp = run.experiment
        section = {"name": exp.name, "command": _command_of(registry, exp), "ids": list(exp.artifacts),
                   "artifacts": [registry.artifacts[a] for a in registry.artifacts if a in exp.artifacts],
                   "markdown": "", "figures": [], "data": [], "seconds": run.seconds, "error": run.error,
                   "config": _asdict(run.config), "outcomes": []}
        sections.append(section)
        if run.error:
            return
        try:
            t0 = time.perf_counter()
            renderables = exp.tables(run.result)
            markdown = report.to_markdown(renderables)
            section["renderables"] = renderables
            section["cached"] = _cached(run.result)
            files.write_json(out / f"{exp.name}.json", files.result_json(run.result))
            figure_paths = exp.figures(run.result, out, common.formats)
            written = [_relative(p, out) for p in figure_paths]
            section["figures"] = [f for f in written if f.lower().endswith(FIGURE_SUFFIXES)]
            section["data"] = [f"{exp.name}.md", f"{exp.name}.json"] + [f for f in written if f not in section["figures"]]
            section["data"] += [f for f in _beside(out, section["figures"]) if f not in section["data"]]
            section["markdown"] = markdown
            files.write_text(out / f"{exp.name}.md", _experiment_markdown(section))
            section["seconds"] += time.perf_counter() - t0
        except WriteFailed:  # disk full or read-only: stop here; files written so far are complete
            raise
        except Exception as exc:
            section["error"] = f"rendering failed: {type(exc).__name__}: {exc}"

    runs = _run_with_progress(plan, "all", on_done=write)

    ran = {r.name for r in runs}
    outcomes = runner.compare([c for c in registry.checks.values()
                               if not only or (registry.experiment_of(c.artifact) and
                                               registry.experiment_of(c.artifact).name in ran)],
                              registry, runs)
    by_artifact: dict[str, list] = {}
    for o in outcomes:
        by_artifact.setdefault(o.check.artifact, []).append(o)
    for s in sections:
        s["outcomes"] = [o for a in s["artifacts"] for o in by_artifact.get(a.id, [])]
    cov = runner.coverage(registry, list(registry.artifacts) if not only else artifact_ids, everything=not only)
    line = None if common.quick else runner.summary(outcomes)

    manifest = _manifest(registry, sections, common, time.perf_counter() - started, line, cov, runs)
    files.write_json(out / "manifest.json", manifest)
    shown = [registry.artifacts[a] for a in artifact_ids if a in registry.artifacts]
    files.write_text(out / "index.md", report.index_markdown(
        catalogue=shown, sections=sections, manifest=manifest, summary=line, coverage_line=cov.line()))
    files.write_text(out / "index.html", html.index_html(
        catalogue=shown, sections=sections, manifest=manifest, outcomes=outcomes, summary=line,
        coverage_line=cov.line(), links=("manifest.json", "index.md")))

    errors = [s for s in sections if s["error"]]
    for aid, entry in manifest["artifacts"].items():
        if entry.get("not_written"):
            console.note(f"{aid}: {entry['experiment']} did not write {', '.join(entry['not_written'])}")
    if common.json:
        print(json.dumps(manifest, indent=2, default=_json_default))
    else:
        n_files = sum(len(s["figures"]) + len(s["data"]) for s in sections) + 3
        console.stdout.print(f"wrote {n_files} files to {out}/ (report: {out / 'index.html'}, {out / 'index.md'}) "
                             f"in {manifest['timing']['seconds']:.1f} s", highlight=False)
        if line:
            console.stdout.print(f"checks against the texts: {line}", highlight=False)
        console.stdout.print(cov.line(), highlight=False)
        for text in (*runner.cache_lines(runs), _numerics_line()):
            console.stdout.print(text, style="dim", highlight=False)
    for s in errors:
        console.stderr.print(f"{s['name']} failed: {s['error']}", style="red", highlight=False)
    failed = [] if common.quick else [o for o in outcomes if o.status == "fail"]  # --quick judges nothing
    if failed:
        console.stderr.print(f"{len(failed)} check(s) failed against the texts: "
                             + ", ".join(o.check.id for o in failed[:5]) + (", ..." if len(failed) > 5 else ""),
                             style="red", highlight=False)
    if errors or failed:
        sys.exit(1)


COMMANDS = [list_, all_, verify]


def _write_verify_page(registry, artifact_ids, outcomes, common: Common, seconds: float, line, cov) -> None:
    """``verify.json`` (the --json records) and ``verify.html`` (the checks as a page) in --out.
    Their own names: an ``attn all`` report in the same folder (index.html) is left alone."""
    from attn_cli import numerics, runner
    from attn_cli.render import console, files, html

    out = common.out
    files.write_json(out / "verify.json", [o.as_json() for o in outcomes])
    manifest = {"command": "attn verify" + (" --quick" if common.quick else ""), "quick": False,
                "seed": common.seed, "device": common.device, "timing": {"seconds": round(seconds, 3)},
                "versions": runner.versions(), "machine": runner.machine(common.device),
                "numerics": numerics.describe()}
    shown = [registry.artifacts[a] for a in artifact_ids if a in registry.artifacts]
    files.write_text(out / "verify.html", html.index_html(
        catalogue=shown, sections=[], manifest=manifest, outcomes=outcomes, summary=line,
        coverage_line=cov.line(), links=("verify.json",), title="attn verify: the texts' numbers, regenerated"))
    console.note(f"wrote {out / 'verify.html'} and {out / 'verify.json'}")


# --------------------------------------------------------------------------- helpers


def _numerics_line() -> str:
    from attn_cli import numerics

    d = numerics.describe()
    return f"numerics: {d['mode']} ({d['isa']} CPU kernels)"


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


def _run_with_progress(plan, verb: str, on_done=None):
    """Run the plan under one rich progress display on stderr: a bar over the set, and a
    second line for the runs inside an experiment that reports them (the copy task)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from attn_cli import runner
    from attn_cli.render import console

    plan = list(plan)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console.stderr, transient=True)
    task = progress.add_task(f"attn {verb}", total=len(plan))
    inner = {"task": None}

    def start(exp):
        unjudged = next(u for e, _, u in plan if e is exp)
        progress.update(task, description=f"attn {verb}: {exp.name}" + (f" ({unjudged})" if unjudged else ""))
        config = next(c for e, c, _ in plan if e is exp)
        total = len(config.plan()) if hasattr(config, "plan") else None
        finished: set = set()

        def report(*args):
            """Experiments report in their own shapes: (done, total) counts; the copy task's
            (run, step, steps, loss, status); anything else is shown as text."""
            try:
                if inner["task"] is None:
                    inner["task"] = progress.add_task("", total=total)
                ints = all(isinstance(a, int) for a in args)
                if len(args) == 2 and ints:
                    progress.update(inner["task"], completed=args[0], total=args[1],
                                    description=f"  {exp.name}")
                elif len(args) == 5 and isinstance(args[-1], str):
                    index, step, steps, loss, status = args
                    if status in ("done", "cached"):
                        finished.add(index)
                    progress.update(inner["task"], completed=len(finished), description=(
                        f"  {exp.name} runs (run {index}: step {step}/{steps}, loss {loss:.3f})"))
                else:
                    progress.update(inner["task"], description=f"  {exp.name}: " + " ".join(map(str, args)))
            except Exception:  # a progress display never stops a run
                pass

        return report

    def done(run):
        if inner["task"] is not None:
            progress.remove_task(inner["task"])
            inner["task"] = None
        if on_done:
            on_done(run)
        progress.advance(task)
        mark = "[red]failed[/]" if run.error else "[green]done[/]"
        progress.console.print(f"{mark} {run.name} ({run.seconds:.1f} s)"
                               + (f": {run.error}" if run.error else ""), highlight=False)
        for note in getattr(run.result, "notes", None) or []:
            progress.console.print(f"  {run.name}: {note}", style="yellow", highlight=False)

    with _live(progress):
        return runner.run_experiments(plan, on_start=start, on_done=done)


@contextlib.contextmanager
def _live(progress):
    progress.start()
    try:
        yield
    finally:
        progress.stop()


def _asdict(obj):
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def _json_default(obj):
    from attn_cli.render.files import _json_default as default

    return default(obj)


def _relative(path: Path, out: Path) -> str:
    path = Path(path)
    try:
        return path.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        return str(path)


def _cached(result) -> tuple[int, int] | None:
    """(runs taken from the cache, runs) of an experiment that caches its runs (the copy task's
    ``runs`` records carry ``cached``); None for the others."""
    runs = getattr(result, "runs", None)
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) and "cached" in r for r in runs):
        return None
    return sum(bool(r["cached"]) for r in runs), len(runs)


def _beside(out: Path, figures: list[str]) -> list[str]:
    """Raw-number files written beside each figure (same stem, another suffix)."""
    found = []
    for fig in figures:
        stem = Path(fig).with_suffix("")
        for suffix in (".csv", ".json"):
            name = stem.with_suffix(suffix).as_posix()
            if (out / stem).with_suffix(suffix).exists() and name not in found:
                found.append(name)
    return found


def _experiment_markdown(section: dict) -> str:
    ids = ", ".join(section["ids"])
    lines = [f"# attn {section['command']}: {ids}", ""]
    if section["markdown"]:
        lines += [section["markdown"], ""]
    from attn_cli.render.report import figure_markdown

    for fig in figure_markdown(section["figures"]):
        lines += [fig, ""]
    return "\n".join(lines)


def _pattern(name: str) -> str:
    """A catalogue file name with placeholders ("copy_task_attention_L{length}.png") as a glob."""
    return re.sub(r"\{[^}]*\}", "*", name)


def _matches(written: str, catalogued: str) -> bool:
    """A written file is a catalogue file; a figure in any --format counts (masks.svg for masks.png)."""
    pattern = _pattern(catalogued)
    if pattern.lower().endswith(FIGURE_SUFFIXES):
        stem, _ = pattern.rsplit(".", 1)
        return any(fnmatch.fnmatch(written, f"{stem}{suffix}") for suffix in FIGURE_SUFFIXES)
    return fnmatch.fnmatch(written, pattern)


def _manifest(registry, sections, common: Common, seconds: float, line, cov, runs=()) -> dict:
    from attn_cli import numerics, runner

    artifacts = {}
    for s in sections:
        written = s["figures"] + s["data"]
        for a in s["artifacts"]:
            own = [f for f in written if any(_matches(f, p) for p in a.files)]
            artifacts[a.id] = {"experiment": s["name"], "command": a.command,
                               "files": [f"{s['name']}.md", f"{s['name']}.json"] + own}
            # catalogue files that the experiment's renderer did not write
            unwritten = [p for p in a.files if not any(_matches(f, p) for f in written)]
            if unwritten and not s["error"]:
                artifacts[a.id]["not_written"] = unwritten
        for aid in s["ids"]:
            artifacts.setdefault(aid, {"experiment": s["name"], "command": s["command"],
                                       "files": [f"{s['name']}.md", f"{s['name']}.json"], "catalogued": False})
    return {
        "command": "attn all" + (" --quick" if common.quick else ""),
        "quick": common.quick,
        "seed": common.seed,
        "device": common.device,
        "versions": runner.versions(),
        "machine": runner.machine(common.device),
        "numerics": numerics.describe(),
        "cache": runner.cache_lines(runs),
        "timing": {"seconds": round(seconds, 3),  # wall-clock values: the only part that varies between runs
                   "experiments": {s["name"]: round(s["seconds"], 3) for s in sections}},
        "engines": {s["name"]: s["config"]["engine"] for s in sections
                    if isinstance(s["config"], dict) and "engine" in s["config"]},
        "checks": line,
        "coverage": cov.line(),
        "artifacts": artifacts,
        "missing": cov.no_experiment,
        "experiments": {s["name"]: {"artifacts": s["ids"], "command": s["command"],
                                    "config": s["config"],
                                    "files": s["data"] + s["figures"], "error": s["error"]}
                        for s in sections},
    }
