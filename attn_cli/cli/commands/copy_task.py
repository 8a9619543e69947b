"""W9 2.3: ``attn copy-task``, under a progress display on stderr: one bar per run, or, with ``--scheduler``,
one bar over the runs of a Dask cluster (done, running and failed runs, an ETA)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence, Sized
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from attn_cli.cli.commands.execute import Job, config_of, progress_display
from attn_cli.cli.options import CACHED_RUNS, FORMAT, NO_FIGURES, Common, JudgedCommand, common_options
from attn_cli.cli.types import SEEDS, FiniteFloatRange, IntRange, MultiValueOption, option

if TYPE_CHECKING:
    from attn_cli.core.copy_spec import RunSpec
    from attn_cli.experiments import ProgressEvent

MAX_STEPS = 1_000_000  # 400 times the text's 2500: hours per run; more is a typo
MAX_JOBS = 1024  # worker processes; each is a Python process with torch loaded


@contextmanager
def _bars(specs: Sequence[RunSpec]) -> Iterator[Callable[[ProgressEvent], None]]:
    """One rich progress bar per run on stderr; yields the experiment's ``progress`` callback."""
    from rich.progress import TextColumn, TimeElapsedColumn

    progress = progress_display(
        TextColumn("step {task.completed:>5.0f}/{task.total:.0f}"),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )
    tasks = [
        progress.add_task(
            f"{s.model:<9} L{s.length:<3} seed {s.seed}", total=s.steps, start=False, loss="  -   ", status=""
        )
        for s in specs
    ]

    def update(event: ProgressEvent) -> None:  # about one training run (event.item)
        assert event.item is not None
        progress.start_task(tasks[event.item])  # once: a started task stays as it is
        progress.update(
            tasks[event.item],
            completed=event.item_done,
            total=event.item_total,
            loss=f"{event.value:.4f}",
            status="" if event.status == "running" else event.status,
        )

    with progress:
        yield update


@click.command(cls=JudgedCommand)
@option(
    "--lengths", cls=MultiValueOption, metavar="L...", help="Sequence lengths to copy  [default: 4 8 16 32, the text's]"
)
@option(
    "--steps",
    type=IntRange(1, MAX_STEPS),
    help=f"Adam steps per run, at most {MAX_STEPS:,}  [default: 2500; 30 with --quick]",
)
@option(
    "--hidden-size",
    aliases=("--hidden",),
    help="GRU hidden size (nn.GRU's hidden_size; not an attention width)  [default: 32]",
)
@option("--batch-size", help="Training batch  [default: 64]")
@option(
    "--lr", type=FiniteFloatRange(min=0, min_open=True, max=10), help="Adam learning rate, at most 10  [default: 0.003]"
)
@option("--eval-size", help="Sequences in the one evaluation batch  [default: 1000; 100 with --quick]")
@option(
    "--seeds",
    cls=MultiValueOption,
    type=SEEDS,
    metavar="K...",
    help="Several seeds (instead of --seed), listed or as inclusive ranges (0-63): each cell "
    "becomes mean ± std over them, every run listed  [default: --seed alone]",
)
@option(
    "--model",
    type=click.Choice(("attention", "plain", "both")),
    default="both",
    help="attention (W9 2.3), plain (the Week 8 encoder-decoder) or both side by side.",
)
@option(
    "--engine",
    type=click.Choice(("exact", "fast")),
    default="exact",
    help="exact: bit-identical to the text's program on CPU; fast: other kernels, statistically equivalent numbers.",
)
@option(
    "--jobs",
    type=IntRange(1, MAX_JOBS),
    help=f"Worker processes across lengths, seeds and models, at most {MAX_JOBS}  "
    "[default: the CPU count; one with --device cuda]",
)
@click.option("--no-cache", is_flag=True, help="Recompute (and re-cache) the runs in the cache (see `attn cache`).")
@common_options(FORMAT, NO_FIGURES, *CACHED_RUNS)
def copy_task(
    lengths: tuple[int, ...],
    seeds: tuple[tuple[int, ...], ...],
    no_cache: bool,
    common: Common,
    **given: Any,  # the options named as the Config's fields (steps, lr, model, ...); None: not given
) -> Job:
    """The copy task: attention lifts free-running accuracy at length 32 from 0.15 to 0.89 (W9 2.3).

    A GRU encoder-decoder copies a random digit sequence; with attention (the W9 2.3
    program) and without (the Week 8 plain model). Prints teacher-forced, free-running and
    whole-sequence accuracy per length, each beside the published value (judged by the seed
    rule below: training trajectories differ between PyTorch builds). The exact engine
    (default) equals the text's program bit for bit on CPU, spread over --jobs processes;
    finished runs are kept in the per-user cache (`attn cache`), shared by every --out. With
    --scheduler (or ATTN_SCHEDULER) every run not cached trains on that Dask cluster, with the
    same bits (see docs/cluster.md). Writes copy_task_accuracy.png
    (+ .csv) and, per length, copy_task_attention_L{length}.png (+ .csv): the trained
    model's attention on one evaluation sequence; with several seeds also copy_task_seeds.png
    (+ .csv): every seed as a dot, the seed rule's interval as a band, the published value.

    \b
    Example:
        attn copy-task --lengths 4 8 16 32
        attn copy-task --lengths 16 --seeds 0-4 --model attention
        attn copy-task --quick --json --out /tmp/copy
    """
    from attn_cli.cli.commands.cache import cache_root
    from attn_cli.experiments import copy_task as exp

    if seeds and click.get_current_context().get_parameter_source("seed") is not ParameterSource.DEFAULT:
        raise click.UsageError(
            "--seed and --seeds both given: --seeds lists every seed to train (put the --seed value in the list)"
        )
    flat = tuple(seed for group in seeds for seed in group)  # a range, 0-63, is a group of seeds
    given |= {"lengths": tuple(dict.fromkeys(lengths)) or None, "seeds": tuple(dict.fromkeys(flat))}
    if common.scheduler:  # a Dask scheduler that does not answer: one Error line, before any work
        from attn_cli.experiments.copy_task.cluster import plan_keywords

        given |= plan_keywords(common.scheduler, common.scheduler_from, common.worker_wait)
    return Job(
        exp,
        config_of(exp, common, use_cache=not no_cache, **given),
        common,
        display=lambda config: (
            cluster_bar(config.plan(), config.scheduler) if config.scheduler else _bars(config.plan())
        ),
        cache_root=lambda: cache_root(common),
        use_cache=not no_cache,
        threads=None,
    )


class RunCounts:
    """Done, running and failed runs of a sweep of ``total`` runs, from Progress events."""

    def __init__(self, total: int):
        self.total = total
        self.done: set[int] = set()
        self.running: set[int] = set()
        self.failed = 0  # failed attempts: restarted runs and runs that failed for good
        self._started: set[int] = set()
        self._lock = threading.Lock()  # events come from the client's event loop and the main thread

    def update(self, event: ProgressEvent) -> None:
        item, status = event.item, event.status
        if item is None:
            return
        with self._lock:
            if status in ("done", "cached"):
                self.done.add(item)
                self.running.discard(item)
            elif status == "failed":
                self.failed += 1
                self.running.discard(item)
            elif status in ("started", "running") and item not in self.done:
                if status == "started" and item in self._started:
                    self.failed += 1  # a second attempt: the first was lost (worker killed, task raised)
                self._started.add(item)
                self.running.add(item)

    def line(self) -> str:
        """E.g. "12/32 done, 2 running, 1 failed"."""
        return f"{len(self.done)}/{self.total} done, {len(self.running)} running, {self.failed} failed"


@contextmanager
def cluster_bar(specs: Sized, address: str) -> Iterator[Callable[[ProgressEvent], None]]:
    """One rich bar on stderr for the runs ``specs`` on the cluster at ``address``; yields the ``progress`` callback."""
    from rich.progress import TextColumn, TimeElapsedColumn, TimeRemainingColumn

    counts = RunCounts(len(specs))
    progress = progress_display(
        TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()
    )
    task = progress.add_task(f"runs on {address[:60]}", total=len(specs), counts=counts.line())

    def update(event: ProgressEvent) -> None:
        counts.update(event)
        progress.update(task, completed=len(counts.done), counts=counts.line())

    with progress:
        yield update


COMMANDS = [copy_task]
