"""The one progress event an experiment's ``run(config, progress)`` reports; the commands and
``attn all`` turn it into a progress bar."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressEvent:
    done: int  # units finished (d_k values, exercises, training runs, ...)
    total: int | None  # units in all; None when not known
    label: str = ""  # what is running now, e.g. "run 3: step 120/2500, loss 0.412"
    # where units run side by side (the copy task's training runs): which unit this event is
    # about, how far that unit is, and its current value (a loss); status "running", "done" or "cached"
    item: int | None = None
    item_done: int = 0
    item_total: int | None = None
    value: float | None = None
    status: str = "running"


ProgressCallback = Callable[[ProgressEvent], None] | None  # the ``progress`` argument of every run()
