"""The one progress event an experiment reports: ``progress(Progress(done, total, label))``.

Every experiment's ``run(config, progress=None)`` calls ``progress`` (when given) with this
dataclass and nothing else; the commands and ``attn all`` turn it into a progress bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class Progress:
    done: int  # units finished (d_k values, exercises, training runs, ...)
    total: Optional[int]  # units in all; None when not known
    label: str = ""  # what is running now, e.g. "run 3: step 120/2500, loss 0.412"


Report = Optional[Callable[[Progress], None]]  # the ``progress`` argument of every run()
