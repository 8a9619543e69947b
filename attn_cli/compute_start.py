"""The moment an experiment is about to compute (and import torch): one hook, called once.

A single command arms it (:func:`attn_cli.commands.execute.execute`, with the figure drawer of
:mod:`attn_cli.render.drawer`); :func:`attn_cli.pipeline.run` calls :func:`computing` before an
experiment's run when its Result is not cached, and the copy task (whose runs are cached one
by one) calls it only when some run has to be trained.  A fully cached rerun never calls it.
Nothing is armed in the Python API, ``attn all`` or ``attn verify``.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, Iterator

_HOOK: ContextVar["list[Callable[[], None]] | None"] = ContextVar("attn_compute_start", default=None)


@contextlib.contextmanager
def armed(hook: Callable[[], None]) -> Iterator[None]:
    """Within the block, the first :func:`computing` calls ``hook`` (once)."""
    token = _HOOK.set([hook])
    try:
        yield
    finally:
        _HOOK.reset(token)


def computing() -> None:
    """An experiment is about to compute: the armed hook runs now, the first time only."""
    hooks = _HOOK.get()
    if hooks:
        hooks.pop()()
