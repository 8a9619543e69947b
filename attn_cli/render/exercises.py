"""Tables for ``attn exercise`` (D2L 10.3.5 exercises 1-12): each exercise's tables are in
:mod:`.exercises_1_6` and :mod:`.exercises_7_12`, their shared cells in :mod:`.exercise_cells`,
the figures in :mod:`.exercise_figures`.

No published numbers exist for the exercises: each table shows the measurement beside
the value the exercise's analysis predicts (``theory``), and a one-line reading below.
Every number a reading quotes comes from the result or from a named constant of the
exercise's module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from attn_cli.render.exercise_figures import FILES, figures  # noqa: F401 (FILES, figures: the family's)
from attn_cli.render.exercises_1_6 import ex1_tables, ex2_tables, ex3_tables, ex4_tables, ex5_tables, ex6_tables
from attn_cli.render.exercises_7_12 import ex7_tables, ex8_tables, ex9_tables, ex10_tables, ex11_tables, ex12_tables
from attn_cli.render.table import Table

if TYPE_CHECKING:
    from attn_cli.experiments import exercises as ex

RENDERERS: dict[int, Callable[[Any, str], list]] = dict(
    enumerate(
        (
            ex1_tables,
            ex2_tables,
            ex3_tables,
            ex4_tables,
            ex5_tables,
            ex6_tables,
            ex7_tables,
            ex8_tables,
            ex9_tables,
            ex10_tables,
            ex11_tables,
            ex12_tables,
        ),
        start=1,
    )
)


def tables(result: ex.Result, outcomes: Mapping) -> list:
    """Every exercise that ran; ``outcomes`` is taken for the render contract (the exercises
    have no published value, so none is marked)."""
    out = []
    for n in result.ran():
        out.extend(RENDERERS[n](getattr(result, f"ex{n}"), result.TITLES[n]))
    return out


def listing(titles: dict[int, str]) -> list:
    """``attn exercise --list``: the twelve exercises (number -> title) and what each run shows."""
    from attn_cli.published.catalogue import BY_ID

    t = Table(title="D2L 10.3.5 exercises")
    t.add_column("N", justify="right")
    t.add_column("exercise")
    t.add_column("what a run shows")
    t.add_column("files")
    for n, title in titles.items():
        art = BY_ID.get(f"d2l-ex{n}")
        t.add_row(str(n), title, art.title if art else "", " ".join(art.files) if art else "")
    return [t]
