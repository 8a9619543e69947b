"""``attn list``, ``attn all`` and ``attn verify``: the whole catalogue at once; ``attn diff``: two runs compared.
``all`` and ``verify`` call :mod:`attn_cli.regenerate`, print the report and exit with its code."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from attn_cli.cli.options import CACHED_RUNS, FORMAT, JUNIT, Common, JudgedCommand, common_options
from attn_cli.cli.types import IntRange, MultiValueOption, option
from attn_cli.published.seed_rule import MAX_SEEDS, MIN_SEEDS

if TYPE_CHECKING:
    from pathlib import Path

    from attn_cli.records import Diff
    from attn_cli.regenerate import AllReport, VerifyReport


seed_count_option = option(  # verify, all
    "--seeds",
    "n_seeds",
    type=IntRange(1, MAX_SEEDS),
    metavar="N",
    help=f"Judge each trained cell by N seeds: --seed with the exact engine, the next N-1 "
    f"with the fast one  [default: {MIN_SEEDS}; 1 to {MAX_SEEDS}]",
)


@click.command(cls=JudgedCommand, name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as a JSON list instead of the table.")
def list_(as_json: bool) -> None:
    """Every table and figure of the two texts, and the command that regenerates it.

    Columns: catalogue ID, source text, section, title, subcommand, the files it writes into
    --out, and how many published values `attn verify` checks for it.

    \b
    Examples:
        attn list
        attn list --json
    """
    from attn_cli import experiment_registry
    from attn_cli.render import console, report
    from attn_cli.render.table import to_rich

    registry = experiment_registry.Registry.load()
    rows = report.catalogue_rows(registry.artifacts.values(), registry)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    console.stdout.print(to_rich(report.catalogue_table(rows, width=console.stdout.width)))


@click.command(cls=JudgedCommand)
@click.option(
    "--only",
    cls=MultiValueOption,
    metavar="ID...",
    help="Check only these: catalogue IDs (see `attn list`), check IDs or their prefixes "
    "(w9-sqrt-dk.1024), or a source (w9, d2l).",
)
@click.option("--no-cache", is_flag=True, help="Recompute (and re-cache) what the per-user cache holds.")
@JUNIT
@click.option(
    "--diff",
    "before",
    type=click.Path(exists=True),
    metavar="BEFORE",
    help="Compare with an earlier run (a verify.json, report folder or manifest) as `attn diff` does.",
)
@common_options(*CACHED_RUNS)
@seed_count_option
def verify(
    only: tuple[str, ...], no_cache: bool, junit: Path | None, before: str | None, n_seeds: int | None, common: Common
) -> None:
    """Regenerate every published value and compare it with the text.

    Each experiment runs once at its default configuration (the texts' settings), with
    --seed and --device. Trained values (the copy task) are judged by where the published
    value falls among 5 seeds (--seed with the exact engine, the next 4 with the fast one;
    --seeds N: N seeds); each record carries the seed rule's interval;
    runs in the per-user cache are reused (`attn cache`; --no-cache retrains). Prints one
    line per check: ID | published | regenerated | rule | margin | status (reasons and
    failures in the footnotes), the 5 tightest checks (margin 1 is exact, 0 the edge, below
    0 a failure), the summary per kind, e.g. "85 measured and 10 rules passed; 33
    identities shown" (identities are shown, never counted), and the catalogue's coverage.
    Exits 1 if any check fails, a value not regenerated included. --json prints the record:
    a header (versions, machine, numerics, device, seeds, date) and every check with its
    verdict, margin and, for a trained value, the seed rule's interval (docs/ci.md).

    --junit FILE writes the checks as JUnit XML; --diff BEFORE compares this run with an
    earlier one (exit 1 also when a check that passed there fails now).

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
        attn verify --only w9-copy-task --seeds 16
        attn verify --out report/ --junit report/junit.xml
    """
    from attn_cli import records, regenerate
    from attn_cli.render import console

    given_out = click.get_current_context().get_parameter_source("out") is not ParameterSource.DEFAULT
    keywords = library_keywords(common, n_seeds, no_cache)
    with usage_errors():
        checked = regenerate.verify(only, **keywords, out=common.out if given_out else None)
    if checked.files:
        console.note(f"wrote {' and '.join(str(f) for f in checked.files)}")
    _write_junit(junit, checked)
    _show_verify(checked, common.json)
    moved = 0
    if before is not None:  # this run against an earlier one, as `attn diff` prints it (on stderr under --json)
        try:
            this_run = records.Loaded(checked.record["header"], checked.record["checks"], "this run")
            d = records.diff(records.load(before), this_run)
        except records.Unreadable as exc:
            raise click.BadParameter(str(exc), param_hint="'--diff'") from None
        show(d, everything=False, as_json=False, stderr=common.json)
        moved = d.exit_code
    if checked.exit_code or moved:
        sys.exit(1)


def _show_verify(checked: VerifyReport, as_json: bool) -> None:
    """The record (JSON) or the check table, the 5 tightest checks and the summary lines."""
    from attn_cli.render import console, report
    from attn_cli.render.files import _json_default
    from attn_cli.render.table import to_rich

    outcomes, cov = checked.outcomes, checked.coverage
    if as_json:
        print(json.dumps(checked.record, indent=2, default=_json_default))
        for text in (checked.summary, cov.line(), *checked.context_lines):
            console.stderr.print(text, highlight=False)
        return
    console.stdout.print(to_rich(report.verify_table(outcomes, width=console.stdout.width)))
    if any(o.margin() is not None for o in outcomes):
        console.stdout.print(to_rich(report.tightest(outcomes)))
    console.stdout.print(checked.summary, style="bold red" if checked.failed else "bold green", highlight=False)
    console.stdout.print(cov.line(), style="" if cov.complete else "yellow", highlight=False)
    for text in checked.context_lines:
        console.stdout.print(text, style="dim", highlight=False)


@click.command(cls=JudgedCommand, name="all")
@click.option(
    "--only",
    cls=MultiValueOption,
    metavar="ID...",
    help="Run only the experiments that regenerate these catalogue IDs (or a source: w9, d2l).",
)
@click.option(
    "--no-cache", is_flag=True, help="Recompute (and re-cache) what the per-user cache holds (see `attn cache`)."
)
@JUNIT
@common_options(FORMAT, *CACHED_RUNS)
@seed_count_option
def all_(only: tuple[str, ...], no_cache: bool, junit: Path | None, n_seeds: int | None, common: Common) -> None:
    """Run every experiment and write every table and figure, with a report, into --out.

    For each experiment: its tables as Markdown (<name>.md) and its result as JSON
    (<name>.json), every figure (PNG, raw numbers beside it); then manifest.json (catalogue
    ID -> files, configurations, versions, machine, seconds, verdicts, and verify.json's
    header and records), index.html (the report as one page that works offline in a
    browser) and index.md (the same in any Markdown viewer). --format svg pdf writes each
    figure in those formats. Exits 1 when a check or an experiment fails, after writing
    every file.

    Every check is judged exactly as `attn verify` judges it (the copy task over 5 seeds,
    --seeds N: N), and every mark in a table is its check's verdict. Training runs are
    cached per user (`attn cache`; --no-cache retrains), so `attn all` after `attn verify`
    trains nothing.

    --quick is a smoke run at reduced sizes that judges nothing, nothing trained included:
    every check is listed as "skipped (quick)".

    \b
    Examples:
        attn all --out report/
        attn all --quick --out /tmp/smoke
        attn all --only w9-masks d2l-crossattn-map
        attn all --quick --junit junit.xml --out report/
    """
    from attn_cli import regenerate
    from attn_cli.render import console

    keywords = library_keywords(common, n_seeds, no_cache)
    with usage_errors():
        done = regenerate.regenerate_all(common.out, only, **keywords, formats=common.formats)
    for text in done.not_written:
        console.note(text)
    _write_junit(junit, done)
    _show_all(done, common.out, common.json)
    for s in done.errors:
        console.stderr.print(f"{s.name} failed: {s.error}", style="red", highlight=False, markup=False)
    if failed := done.failed:
        ids = ", ".join(o.check.id for o in failed[:5]) + (", ..." if len(failed) > 5 else "")
        console.stderr.print(f"{len(failed)} check(s) failed against the texts: {ids}", style="red", highlight=False)
    if done.exit_code:
        sys.exit(done.exit_code)


def _show_all(done: AllReport, out: Path, as_json: bool) -> None:
    """The manifest (JSON) or what was written, the verdicts, the coverage and the context lines."""
    from attn_cli.render import console
    from attn_cli.render.files import _json_default

    if as_json:
        print(json.dumps(done.manifest, indent=2, default=_json_default))
        if done.quick_line:
            console.stderr.print(done.quick_line, style="yellow", highlight=False)
        return
    console.stdout.print(
        f"wrote {len(done.files)} files to {out}/ (report: {out / 'index.html'}, {out / 'index.md'}) "
        f"in {done.manifest['timing']['seconds']:.1f} s",
        highlight=False,
        markup=False,
    )
    if done.summary:
        console.stdout.print(f"checks against the texts: {done.summary}", highlight=False)
    if done.quick_line:
        console.stdout.print(done.quick_line, style="yellow", highlight=False)
    console.stdout.print(done.coverage.line(), highlight=False)
    for text in done.context_lines:
        console.stdout.print(text, style="dim", highlight=False)


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """An unknown --only ID or a seed out of range as the option's usage error (exit 2)."""
    from attn_cli import experiment_registry

    try:
        yield
    except experiment_registry.UnknownId as exc:
        raise click.BadParameter(str(exc), param_hint="'--only'") from None
    except experiment_registry.SeedOutOfRange as exc:
        raise click.BadParameter(str(exc), param_hint="'--seed'") from None


def library_keywords(common: Common, n_seeds: int | None, no_cache: bool) -> dict[str, Any]:
    """The keywords :func:`attn_cli.regenerate.verify` and ``regenerate_all`` share, from the options."""
    from attn_cli.cli.commands import execute  # its run_plan looked up now: tests replace it
    from attn_cli.cli.commands.cache import cache_root

    if n_seeds is not None and common.quick:
        raise click.UsageError("--seeds with --quick: a quick run trains one seed and judges nothing trained")
    shared = ("seed", "device", "quick", "numerics", "scheduler", "scheduler_from", "worker_wait")
    return (
        {name: getattr(common, name) for name in shared}
        | ({} if n_seeds is None else {"seeds": n_seeds})
        | dict(cache_root=cache_root(common), use_cache=not no_cache, progress=execute.run_plan)
    )


def _write_junit(junit: Path | None, checked: VerifyReport | AllReport) -> None:
    """``--junit FILE``: the checks as JUnit XML."""
    if junit:
        from attn_cli import experiment_registry
        from attn_cli.regenerate import write_junit
        from attn_cli.render import console

        console.note(f"wrote {write_junit(junit, checked.outcomes, checked.runs, experiment_registry.Registry.load())}")


@click.command()
@click.argument("before", type=click.Path(exists=True))
@click.argument("after", type=click.Path(exists=True))
@click.option("--all", "everything", is_flag=True, help="List the unchanged checks too.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def diff(before: str, after: str, everything: bool, as_json: bool) -> None:
    """Compare two runs: which values moved and which verdicts changed.

    BEFORE and AFTER are each a verify.json (attn verify --out), a report folder
    (attn all --out, attn verify --out) or a manifest.json; an earlier attn's bare list of
    records is read too. Prints the header fields that differ (torch, numerics, machine:
    usually why values moved), then per changed check: id, before, after, delta, both
    verdicts and both margins; then new and removed checks and a summary line
    "N values moved, M verdicts changed (K now failing)".

    Exits 1 when a check that passed now fails, otherwise 0.

    \b
    Examples:
        attn verify --out before/ && attn verify --out after/ && attn diff before/ after/
        attn diff old/verify.json new/verify.json --json
        attn verify --diff before/verify.json
    """
    from attn_cli import records

    try:
        d = records.diff(records.load(before), records.load(after))
    except records.Unreadable as exc:
        raise click.BadParameter(str(exc)) from None
    show(d, everything, as_json)
    sys.exit(d.exit_code)


def show(d: Diff, everything: bool, as_json: bool, stderr: bool = False) -> None:
    """The comparison as JSON or as tables, on stdout (or on ``stderr``, beside another command's JSON)."""
    from attn_cli.render import console
    from attn_cli.render.report import diff_blocks
    from attn_cli.render.table import to_rich

    if as_json:
        print(json.dumps(d.as_json(everything), indent=2, default=str))
        return
    for b in diff_blocks(d, everything):
        (console.stderr if stderr else console.stdout).print(to_rich(b))


COMMANDS = [list_, all_, verify, diff]
