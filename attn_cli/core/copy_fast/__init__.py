"""The fast engine: the copy-task models trained with a hand-written step, several runs at once
(design notes: ``docs/design.md``, section ``attn_cli.core.copy_fast``)."""

from attn_cli.core.copy_fast.backward import loss_and_grads
from attn_cli.core.copy_fast.forward import ROLES, Layout, Weights, evaluate, param_layout
from attn_cli.core.copy_fast.training import (
    Adam,
    available_cpus,
    clip_per_run,
    draw_batch,
    init_run,
    run_fast,
    step_flops,
    train_kernel,
)

__all__ = [
    "Adam",
    "Layout",
    "ROLES",
    "Weights",
    "available_cpus",
    "clip_per_run",
    "draw_batch",
    "evaluate",
    "init_run",
    "loss_and_grads",
    "param_layout",
    "run_fast",
    "step_flops",
    "train_kernel",
]
