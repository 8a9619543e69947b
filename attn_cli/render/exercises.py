"""Tables for ``attn exercise`` (D2L 10.3.5 exercises 1-12), from :mod:`.exercises_1_6` and
:mod:`.exercises_7_12`; the figures are in :mod:`.exercise_figures`. No published numbers exist:
each table shows the measurement beside the value the exercise's analysis predicts, and a reading
below it quotes only numbers from the result or from the exercise module's named constants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from attn_cli.render import exercises_1_6, exercises_7_12
from attn_cli.render.exercise_figures import FILES, figures  # noqa: F401 (FILES, figures: the family's)
from attn_cli.render.table import Table

if TYPE_CHECKING:
    from attn_cli.experiments import exercises as ex

# exercise -> its tables(result, heading)
RENDERERS: dict[int, Callable[[Any, str], list]] = dict(enumerate(exercises_1_6.TABLES + exercises_7_12.TABLES, 1))


def tables(result: ex.Result, outcomes: Mapping) -> list:
    """Every exercise that ran; ``outcomes`` is taken for the render contract (the exercises
    have no published value, so none is marked)."""
    out = []
    for n in result.ran():
        out.extend(RENDERERS[n](getattr(result, f"ex{n}"), f"D2L 10.3.5 exercise {n}: {result.TITLES[n]}"))
    return out


def listing(titles: dict[int, str]) -> list:
    """``attn exercise --list``: the twelve exercises (number -> title) and what each run shows."""
    from attn_cli.published.catalogue import BY_ID

    t = Table(title="D2L 10.3.5 exercises")
    t.add_column("N", justify="right")
    for header in ("exercise", "what a run shows", "files"):
        t.add_column(header)
    for n, title in titles.items():
        art = BY_ID.get(f"d2l-ex{n}")
        t.add_row(str(n), title, art.title if art else "", " ".join(art.files) if art else "")
    return [t]
