"""W9 2.3: ``attn copy-task``, the copy task with and without attention, under a progress
display on stderr (one bar per run, or one over the runs of a Dask cluster)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from attn_cli.cli.commands import option
from attn_cli.cli.commands.execute import Job, config_of, progress_display
from attn_cli.cli.options import (
    Common,
    JudgedCommand,
    cache_dir_option,
    common_options,
    format_option,
    scheduler_option,
)
from attn_cli.cli.types import SEEDS, FiniteFloatRange, IntRange, MultiValueOption

if TYPE_CHECKING:
    from attn_cli.core.copy_spec import RunSpec
    from attn_cli.experiments.copy_task import Config
    from attn_cli.experiments.progress import ProgressEvent

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


@click.command(cls=JudgedCommand, name="copy-task")
@option(
    "--lengths", cls=MultiValueOption, metavar="L...", help="Sequence lengths to copy  [default: 4 8 16 32, the text's]"
)
@option(
    "--steps",
    type=IntRange(1, MAX_STEPS),
    default=None,
    help=f"Adam steps per run, at most {MAX_STEPS:,}  [default: 2500; 30 with --quick]",
)
@option(
    "--hidden-size",
    aliases=("--hidden",),
    default=None,
    help="GRU hidden size (nn.GRU's hidden_size; not an attention width)  [default: 32]",
)
@option("--batch-size", default=None, help="Training batch  [default: 64]")
@option(
    "--lr",
    type=FiniteFloatRange(min=0, min_open=True, max=10),
    default=None,
    help="Adam learning rate, at most 10  [default: 0.003]",
)
@option("--eval-size", default=None, help="Sequences in the one evaluation batch  [default: 1000; 100 with --quick]")
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
    default=None,
    help=f"Worker processes across lengths, seeds and models, at most {MAX_JOBS}  "
    "[default: the CPU count; one with --device cuda]",
)
@click.option("--no-cache", is_flag=True, help="Recompute (and re-cache) the runs in the cache (see `attn cache`).")
@common_options
@format_option
@cache_dir_option
@scheduler_option
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
    from attn_cli.render import copy_task as render

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
        render,
        config_of(exp, common, use_cache=not no_cache, **given),
        common,
        display=_display,
        cache_root=lambda: cache_root(common),
        use_cache=not no_cache,
        threads=None,
    )


def _display(config: Config) -> AbstractContextManager[Callable[[ProgressEvent], None]]:
    """The copy task's progress: one bar over the runs of a Dask cluster, else one bar per run."""
    from attn_cli.cli.commands.cluster_progress import cluster_bar

    return cluster_bar(config.plan(), config.scheduler) if config.scheduler else _bars(config.plan())


COMMANDS = [copy_task]
