"""The one path every command takes: a command returns a :class:`Job`, which :func:`execute` runs through
:func:`attn_cli.pipeline.run` and prints; ``attn all`` and ``attn verify`` run under :func:`run_plan`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click

from attn_cli.cli.options import Common

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress, ProgressColumn, TaskID

    from attn_cli.experiment_registry import Experiment
    from attn_cli.experiments import ProgressEvent
    from attn_cli.pipeline import Run
    from attn_cli.regenerate import Plan


def config_of(experiment: ModuleType, common: Common, **fields: Any) -> Any:
    """The experiment's Config (``Config.quick`` with --quick) at --seed, --device and ``fields`` (None: default)."""
    make = experiment.Config.quick if common.quick else experiment.Config
    return make(seed=common.seed, device=common.device, **{k: v for k, v in fields.items() if v is not None})


def job(experiment: ModuleType, common: Common, **fields: Any) -> Job:
    """The Job of ``experiment`` at ``fields`` (see :func:`config_of`)."""
    return Job(experiment, config_of(experiment, common, **fields), common)


def progress_display(*columns: ProgressColumn, spinner: bool = False) -> Progress:
    """A transient progress display on stderr, not started: (a spinner,) the description, a bar, ``columns``."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

    from attn_cli.render.console import stderr

    first = (SpinnerColumn(),) if spinner else ()
    return Progress(*first, TextColumn("{task.description}"), BarColumn(), *columns, console=stderr, transient=True)


@contextlib.contextmanager
def bar(description: str) -> Iterator[Callable[[ProgressEvent], None]]:
    """A transient progress bar on stderr; yields the experiment's ``progress``."""
    from rich.progress import TextColumn, TimeElapsedColumn

    with progress_display(TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn()) as shown:
        task = shown.add_task(description, total=None)
        yield lambda event: shown.update(task, completed=event.done, total=event.total)


@dataclass(frozen=True)
class Job:
    """One command's run, as its options built it (the Python API runs it without printing)."""

    experiment: ModuleType
    config: Any
    common: Common
    display: Callable | None = None  # display(config): a block yielding the progress callback (e.g. a bar)
    cache_root: str | Callable[[], str | None] | None = None  # a callable: called after the checks
    use_cache: bool = True
    threads: int | None = 1  # torch's intra-op threads (None: as they are)

    @property
    def exp(self) -> Experiment:
        from attn_cli.experiment_registry import Experiment

        return Experiment(self.experiment.__name__.rsplit(".", 1)[-1], self.experiment)  # drawn by render.<name>

    def run(self, out: str | Path | None, **extra: Any) -> Run:
        """The job through :func:`attn_cli.pipeline.run`, its figures into ``out``."""
        from attn_cli import pipeline

        return pipeline.run(
            self.exp,
            self.config,
            out=out,
            formats=self.common.formats,
            cache_root=self.cache_root,
            use_cache=self.use_cache,
            threads=self.threads,
            numerics=self.common.numerics,
            **extra,
        )


def execute(job: Job) -> Run:
    """Run ``job`` through the pipeline into --out; print its notes, tables (or JSON) and files. A Config the
    experiment refuses is a usage error (exit 2); on Ctrl-C its ``INTERRUPTED`` line says what was kept."""
    from attn_cli.errors import BadConfig
    from attn_cli.render.console import emit, note
    from attn_cli.signals import describe

    exp, common = job.exp, job.common
    try:
        run = job.run(common.out, display=job.display)
    except BadConfig as exc:
        raise click.UsageError(str(exc)) from None
    except KeyboardInterrupt as exc:  # the CLI prints the last line and the exit status
        if exp.interrupted:
            note(f"{describe(exc)}: {exp.interrupted}")
        raise
    for line in run.notes:
        note(line)
    emit(run.result, [] if common.json else run.tables(), common.json, run=run)
    for path in run.files:
        note(f"wrote {path}")
    return run


def run_plan(plan: Plan, verb: str, *, on_done: Callable[[Run], None] | None = None, **keywords: Any) -> list[Run]:
    """:func:`attn_cli.pipeline.run_experiments` under one progress display on stderr: a bar over the set,
    and a line for the steps of an experiment that reports them (the ``progress`` of :mod:`attn_cli.regenerate`)."""
    from rich.progress import MofNCompleteColumn, TimeElapsedColumn
    from rich.text import Text

    from attn_cli import pipeline

    progress = progress_display(MofNCompleteColumn(), TimeElapsedColumn(), spinner=True)
    task = progress.add_task(f"attn {verb}", total=len(plan))
    inner: TaskID | None = None  # the steps inside the running experiment, while it reports them

    def start(exp: Experiment) -> Callable[[ProgressEvent], None]:
        unjudged = next(u for e, _, u in plan if e is exp)
        progress.update(task, description=f"attn {verb}: {exp.name}" + (f" ({unjudged})" if unjudged else ""))

        def report(event: ProgressEvent) -> None:
            nonlocal inner
            with contextlib.suppress(Exception):  # a progress display never stops a run
                if inner is None:
                    inner = progress.add_task("", total=event.total)
                label = f"  {exp.name}" + (f": {event.label}" if event.label else "")
                progress.update(inner, completed=event.done, total=event.total, description=label)

        return report

    def done(run: Run) -> None:
        nonlocal inner
        if inner is not None:
            progress.remove_task(inner)
            inner = None
        if on_done:
            on_done(run)
        progress.advance(task)
        mark = "[red]failed[/]" if run.error else "[green]done[/]"  # then the cache's and the Result's notes
        line = Text.from_markup(f"{mark} {run.name} ({run.seconds:.1f} s)")
        progress.console.print(line + Text(f": {run.error}") if run.error else line, highlight=False)  # data: no markup
        for note in run.notes:
            progress.console.print(f"  {run.name}: {note}", style="yellow", highlight=False, markup=False)

    with progress:
        return pipeline.run_experiments(plan, on_start=start, on_done=done, **keywords)
