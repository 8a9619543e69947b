"""``attn exercise``: the measurable part of the D2L 10.3.5 exercises."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from attn_cli.cli.commands.catalogue import usage_errors
from attn_cli.cli.commands.execute import Job, config_of
from attn_cli.cli.options import Common, JudgedCommand, common_options, format_option

if TYPE_CHECKING:
    from attn_cli.experiments.progress import ProgressEvent


def _selection(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[int, ...]:
    from attn_cli.errors import AttnError
    from attn_cli.experiments.exercises import parse_selection

    try:
        return parse_selection(value)
    except AttnError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@click.command(cls=JudgedCommand, name="exercise")
@click.argument("numbers", nargs=-1, metavar="N... | all", callback=_selection)
@click.option("--list", "list_", is_flag=True, help="List the twelve exercises and what each run shows.")
@common_options
@format_option
def exercise(numbers: tuple[int, ...], list_: bool, common: Common) -> Job | None:
    """Run the measurable part of D2L 10.3.5 exercises 1-12 (or `all`).

    \b
     1 MLP vs linear readout     7 cross-attention FLOPs, K/V cache
     2 noisy, nearly equal heads 8 MHA / GQA / MQA counts and cache
     3 error = 1 - rank(A)/k     9 head loop = folded; tiled valid_lens
     4 key noise, c = 10, 100   10 permuting the source
     5 one-shot vs greedy prune 11 random projections, per-head maps
     6 forward time vs heads    12 trained copy-both heads

    Each exercise starts from --seed; tables show the measurement beside the value the
    exercise's analysis predicts. Writes exercise_2/6/11/12.png (and .csv) into --out.
    --quick shrinks the data, the training and the timing (n = 128) to seconds.

    \b
    Example:
        attn exercise 3
        attn exercise 2 5 12 --quick
        attn exercise all --json --out /tmp/ex
        attn exercise --list
    """
    from attn_cli.experiments import exercises as exp
    from attn_cli.render import exercises as render
    from attn_cli.render.console import emit, note

    if list_:
        emit(None, render.listing(exp.TITLES), False)
        return None
    if not numbers:
        raise click.UsageError("give exercise numbers (1-12), 'all', or --list")
    from attn_cli.experiment_registry import check_seed_range, seeds_used

    config = config_of(exp, common, exercises=numbers)
    with usage_errors():  # every seed the exercises draw from (seed + k), before any work
        check_seed_range(seeds_used(exp, config))

    def progress(event: ProgressEvent) -> None:  # label "N. title"
        if not common.json:
            note(f"exercise {event.label} ...")

    # torch's threads as they are: the command has always run the exercises so (attn all: one)
    return Job(exp, render, config, common, report=progress, threads=None)


COMMANDS = [exercise]
