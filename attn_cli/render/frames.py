"""Figures built as far as they go before their numbers exist, to be finished when they come.

A figure drawer (:mod:`attn_cli.render.drawer`) has matplotlib warm within a second and then
waits, its core idle, while the command imports torch and trains.  An experiment's render
module may use that wait: its ``prepare(config, formats)`` builds here what its figures draw
whatever the numbers (the copy task: each attention map's figure, axes, ticks and colour bar,
most of its building) and :func:`keep` s it; the figure code then :func:`take` s the frame
it would otherwise build, and fills in the numbers.  The code that builds a frame is the same
either way, so the figure is the same (tested byte for byte); only the moment differs.

A frame is taken out of this process's store: inside the drawer each figure is finished by a
forked child, which takes the child's copy, so the drawer's own stays as built.  Nothing is
kept outside a drawer (the Python API, ``attn all``, tests): figures are then built at once.
"""

from __future__ import annotations

from typing import Any, Hashable

_FRAMES: dict[Hashable, Any] = {}


def keep(key: Hashable, frame: Any) -> None:
    """Keep ``frame`` (a figure built this far) for the figure code that asks for ``key``."""
    _FRAMES[key] = frame


def take(key: Hashable) -> Any:
    """The frame kept for ``key``, out of the store (None: build it now)."""
    return _FRAMES.pop(key, None)


def clear() -> None:
    """Forget every frame kept (their figures closed)."""
    import sys

    frames = list(_FRAMES.values())
    _FRAMES.clear()
    if "matplotlib.pyplot" in sys.modules:
        import matplotlib.pyplot as plt

        for frame in frames:
            plt.close(frame[0] if isinstance(frame, tuple) else frame)
