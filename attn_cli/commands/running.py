"""The one path every command takes: build the Config, run (:func:`attn_cli.runs.run_one`),
render; with a rich progress display on stderr fed by the experiments' ``Progress`` events.

``attn all`` and ``attn verify`` (:mod:`attn_cli.regenerate`) run under :func:`run_plan`; the single commands (``attn sqrt-dk``,
``attn heads``, ...) use :func:`execute`: the same runner, the same thread settings.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import click

from attn_cli.options import Common


def config_of(experiment, common: Common, **fields) -> Any:
    """The experiment's Config (``Config.quick`` with --quick) with --seed, --device and ``fields``."""
    make = experiment.Config.quick if common.quick else experiment.Config
    return make(seed=common.seed, device=common.device, **fields)


def usage(validate: Callable, config) -> None:
    """Cross-option checks of an experiment as usage errors (exit 2)."""
    from attn_cli.errors import AttnError

    try:
        validate(config)
    except AttnError as exc:
        raise click.UsageError(str(exc)) from None


@contextlib.contextmanager
def bar(description: str | None):
    """A transient progress bar on stderr (None: none); yields the experiment's ``progress``."""
    if description is None:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from attn_cli.render.console import stderr

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=stderr, transient=True) as shown:
        task = shown.add_task(description, total=None)

        def update(event) -> None:
            shown.update(task, completed=event.done, total=event.total)

        yield update


def execute(experiment, render, config, common: Common, *, progress: str | None = None) -> None:
    """Run one experiment module and print its tables (or JSON); write its figures to --out.
    ``progress``: the description of a progress bar, or None for none."""
    from attn_cli import runs
    from attn_cli.render.console import emit, note
    from attn_cli.runner import Experiment

    exp = Experiment(experiment.__name__.rsplit(".", 1)[-1], experiment, render=render)
    with bar(progress) as update:
        run = runs.run_one(exp, config, progress=update, keep_going=False)
    paths = exp.figures(run.result, common.out, common.formats)
    emit(run.result, [] if common.json else exp.tables(run.result), common.json)
    for path in paths:
        note(f"wrote {path}")


def run_plan(plan, verb: str, *, on_done=None, cache_root=None, use_cache: bool = True, numerics: str | None = None):
    """Run the plan under one rich progress display on stderr: a bar over the set, and a
    second line for the steps inside an experiment that reports them (the ``progress`` of
    :func:`attn_cli.regenerate.verify` and :func:`attn_cli.regenerate.regenerate_all`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    from attn_cli import runs
    from attn_cli.render.console import stderr

    plan = list(plan)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=stderr, transient=True)
    task = progress.add_task(f"attn {verb}", total=len(plan))
    inner = {"task": None}

    def start(exp):
        unjudged = next(u for e, _, u in plan if e is exp)
        progress.update(task, description=f"attn {verb}: {exp.name}" + (f" ({unjudged})" if unjudged else ""))

        def report(event) -> None:
            try:
                if inner["task"] is None:
                    inner["task"] = progress.add_task("", total=event.total)
                progress.update(inner["task"], completed=event.done, total=event.total,
                                description=f"  {exp.name}" + (f": {event.label}" if event.label else ""))
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
        line = Text.from_markup(f"{mark} {run.name} ({run.seconds:.1f} s)")
        progress.console.print(line + Text(f": {run.error}") if run.error else line, highlight=False)  # data: no markup
        for note in [*run.notes, *(getattr(run.result, "notes", None) or [])]:
            progress.console.print(f"  {run.name}: {note}", style="yellow", highlight=False, markup=False)

    progress.start()
    try:
        return runs.run_experiments(plan, on_start=start, on_done=done, cache_root=cache_root, use_cache=use_cache,
                                    numerics=numerics)
    finally:
        progress.stop()
