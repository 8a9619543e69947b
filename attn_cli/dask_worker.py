"""attn's set-up of a Dask worker: ``dask worker ADDR --nthreads 1 --preload attn_cli.dask_worker``.

A Dask preload module (https://docs.dask.org/en/stable/customize-initialization.html): the
``dask worker`` command imports it to read its option, the worker process imports it before it
connects to the scheduler and calls :func:`dask_setup`, which
(:func:`attn_cli.experiments.copy_task.cluster_worker.prepare_worker`):

- pins the numeric mode before torch loads in the worker (``--attn-numerics portable|native``,
  default ``ATTN_NUMERICS``, else portable: attn's own ``--numerics`` and its default);
- sets one intra-op thread;
- imports torch and the training code, as the local pool's fork server does, so the worker's
  first run pays no import (torch: a second or two).

Such a worker computes runs under that mode alone: a run asking for the other is refused with
an ``Error:`` naming the worker's mode and the fix (restart it with ``--attn-numerics MODE``).
A worker whose set-up failed (its torch already loaded with other kernels) logs it, and each
run it gets is refused as before.

Importing this module imports no torch.
"""

from __future__ import annotations

import click

from attn_cli.core.numerics import DEFAULT_MODE, MODE_VAR, MODES


@click.command()
@click.option("--attn-numerics", type=click.Choice(MODES), envvar=MODE_VAR, default=DEFAULT_MODE,
              show_default=True, show_envvar=True,
              help="The numeric mode of every run on this worker (attn's --numerics): pinned before torch loads.")
def dask_setup(worker, attn_numerics: str) -> None:
    """Pin the numeric mode, one intra-op thread, torch and the training code loaded."""
    from attn_cli.experiments.copy_task.cluster_worker import prepare_worker

    prepare_worker(attn_numerics)
