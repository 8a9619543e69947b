"""Tables for ``attn exercise`` (D2L 10.3.5 exercises 1-12), from :mod:`.exercises_1_6` and
:mod:`.exercises_7_12`; the figures are in :mod:`.exercise_figures`. No published numbers exist:
each table shows the measurement beside the value the exercise's analysis predicts, and a reading
below it quotes only numbers from the result or from the exercise module's named constants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from attn_cli.render import exercises_1_6, exercises_7_12
from attn_cli.render.exercise_cells import titled_table
from attn_cli.render.exercise_figures import FILES, figures  # noqa: F401 (FILES, figures: the family's)

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

    columns = ("N", "exercise", "what a run shows", "files")
    arts = {n: BY_ID[f"d2l-ex{n}"] for n in titles}  # every exercise is in the catalogue (tests/test_exercises.py)
    rows = [(str(n), title, arts[n].title, " ".join(arts[n].files)) for n, title in titles.items()]
    return [titled_table("D2L 10.3.5 exercises", columns, rows, left=columns[1:])]
