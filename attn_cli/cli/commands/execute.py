"""The one path every command takes: a command returns a :class:`Job`, which :func:`execute` runs through
:func:`attn_cli.pipeline.run` and prints; ``attn all`` and ``attn verify`` run under :func:`run_plan`;
:func:`cache_root` finds the per-user cache of the commands that cache, and ``attn cache`` shows or clears it."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click

from attn_cli.cli.options import CACHE_DIR, Common, JudgedCommand
from attn_cli.units import human_bytes

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress, ProgressColumn, TaskID

    from attn_cli.experiment_registry import Experiment
    from attn_cli.experiments import ProgressEvent
    from attn_cli.pipeline import Run
    from attn_cli.regenerate import Plan
    from attn_cli.store.cache import Cache


def config_of(experiment: ModuleType, common: Common, **fields: Any) -> Any:
    """The experiment's Config (``Config.quick`` with --quick) at --seed, --device and ``fields`` (None: default)."""
    make = experiment.Config.quick if common.quick else experiment.Config
    return make(seed=common.seed, device=common.device, **{k: v for k, v in fields.items() if v is not None})


def job(name: str, common: Common, **fields: Any) -> Job:
    """The Job of the experiment ``attn_cli.experiments.<name>`` at ``fields`` (see :func:`config_of`)."""
    experiment = importlib.import_module(f"attn_cli.experiments.{name}")
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


def cache_root(common: Common) -> str | None:
    """The per-user cache folder, made and checked now; None (warned once) when unusable: the run goes on without it."""
    from attn_cli.store import cache, private

    root = None
    try:
        root = private.user_cache_root(common.cache_dir)
        cache.Cache.open(root).close()
    except (cache.Unavailable, RuntimeError, KeyError) as exc:  # Path.home(): RuntimeError, KeyError
        source = "" if common.cache_dir is not None or not os.environ.get("ATTN_CACHE_DIR") else ", from ATTN_CACHE_DIR"
        message = f"warning: the cache cannot be used ({exc}{source}); running without cache"
        if root is None:
            click.echo(message, err=True)
        else:  # one line for this folder, whatever else would keep files there (the C kernel)
            private.warn_unusable(root, f"{message}, nothing is kept in {root}")
        return None
    return str(root)


@click.command(cls=JudgedCommand, name="cache")
@click.argument("action", type=click.Choice(["show", "clear"]), default="show")
@CACHE_DIR
@click.option("--dry-run", is_flag=True, help="With clear: list what would be removed, remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout instead of the text.")
def cache_(action: str, cache_dir: Path | None, dry_run: bool, as_json: bool) -> None:
    """The per-user cache: its location, entries and size; `attn cache clear` empties it.

    The cache keeps the copy task's finished training runs and the Results of the slower
    experiments, keyed by everything that decides their numbers (configuration, code, numeric
    mode, versions), and is shared by every --out: a run cached by one command is reused by
    the next. Its folder is --cache-dir, else $ATTN_CACHE_DIR, else
    $XDG_CACHE_HOME/attn, else ~/.cache/attn. attn makes it itself (mode 0700) and tags it
    with a CACHEDIR.TAG naming attn (backup tools skip it); a folder that is not private, or
    not attn's, is left as it is, and commands warn once and run without cache. Each entry
    carries an HMAC under a random key kept there (hmac.key, 0600): an entry edited or copied
    from elsewhere is recomputed.

    `attn cache` (show) prints the location, whether it is usable, and the entries and bytes
    per experiment. `attn cache clear` removes, from a folder tagged as attn's only, the
    entries whose HMAC proves them attn's, the folders that held them, and the key; nothing
    else. It refuses /, the home folder and mount points by name. --dry-run lists what would
    go; --json prints the same as one object.

    \b
    Examples:
        attn cache
        attn cache clear --dry-run
        attn cache clear
        attn cache --cache-dir /tmp/attn-cache --json
    """
    from attn_cli.store import cache, private

    if dry_run and action != "clear":
        raise click.UsageError("--dry-run goes with attn cache clear")
    root = private.user_cache_root(cache_dir)
    info, store = _state(root)
    with store or contextlib.nullcontext():
        if action == "show":
            info = _counted(info, store.summary() if store else {}, "experiments")
        elif (special := cache.special_folder(root)) or (store is None and info["reason"] != "not created yet"):
            raise click.ClickException(
                f"{special or info['reason']}: nothing removed (attn clears only its own cache folder)"
            )
        else:
            info["dry_run"] = dry_run
            cleared = store.clear(dry_run=dry_run) if store else cache.Cleared()
            info = {**_counted(info, cleared.removed, "removed"), "key": cleared.key, "kept": cleared.kept}
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        click.echo("\n".join(_clear_lines(info) if action == "clear" else _show_lines(info)))


def _state(root: Path) -> tuple[dict, Cache | None]:
    """What ``root`` is (through symlinks), and the cache opened there without creating anything (None: none)."""
    from attn_cli.store import cache

    try:
        mode = stat.S_IFMT(os.stat(root).st_mode)
        kind = {stat.S_IFDIR: "folder", stat.S_IFREG: "a file"}.get(mode, "a device or other special file")
    except FileNotFoundError:
        kind = "missing" if not os.path.islink(root) else "a dangling symlink"
    except OSError as exc:
        kind = exc.strerror or "unreadable"
    reason = {"folder": None, "missing": "not created yet"}.get(kind, f"{root} is not a folder ({kind})")
    info: dict = {"location": str(root), "exists": kind == "folder", "private": False, "reason": reason}
    store = None
    if kind == "folder":
        try:
            store = cache.Cache.open(root, create=False)
            info["private"] = True
        except cache.Unavailable as exc:
            info["reason"] = str(exc)
    return info, store


def _counted(info: dict, per: dict, key: str) -> dict:
    info[key] = {name: {"entries": n, "bytes": b} for name, (n, b) in sorted(per.items())}
    info["entries"] = sum(n for n, _ in per.values())
    info["bytes"] = sum(b for _, b in per.values())
    return info


def _count(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _show_lines(info: dict) -> list[str]:
    state = "private" if info["private"] else f"not usable: {info['reason']}"
    rows = {**info["experiments"], "total": info}
    width = max(len(name) for name in rows)
    lines = [f"  {name:<{width}}  {_count(r['entries']):>12}  {human_bytes(r['bytes']):>9}" for name, r in rows.items()]
    return [f"cache: {info['location']} ({state})", *lines]


def _clear_lines(info: dict) -> list[str]:
    if not info["exists"]:
        return [f"nothing to remove: {info['location']} does not exist"]
    verb = "would remove" if info["dry_run"] else "removed"
    key = " and the key" if info["key"] else ""
    lines = [
        f"{verb} {_count(info['entries'])} ({human_bytes(info['bytes'])}){key} from {info['location']}",
        *(f"  {name}: {_count(row['entries'])}, {human_bytes(row['bytes'])}" for name, row in info["removed"].items()),
    ]
    if kept := info["kept"]:
        more = " ..." if len(kept) > 5 else ""
        lines.append(f"kept {len(kept)} file(s) whose HMAC does not prove them attn's: {', '.join(kept[:5])}{more}")
    return lines
