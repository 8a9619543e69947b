"""attn's set-up of a Dask worker: ``dask worker ADDR --nthreads 1 --preload
attn_cli.dask_worker`` (design notes: ``docs/design.md``, section ``attn_cli.dask_worker``)."""

from __future__ import annotations

import click

from attn_cli.core.numerics import DEFAULT_MODE, MODE_VAR, MODES


@click.command()
@click.option(
    "--attn-numerics",
    type=click.Choice(MODES),
    envvar=MODE_VAR,
    default=DEFAULT_MODE,
    show_default=True,
    show_envvar=True,
    help="The numeric mode of every run on this worker (attn's --numerics): pinned before torch loads.",
)
def dask_setup(worker: object, attn_numerics: str) -> None:
    """Pin the numeric mode, one intra-op thread, torch and the training code loaded."""
    from attn_cli.experiments.copy_task.cluster import prepare_worker

    prepare_worker(attn_numerics)
