"""Table for ``attn order`` (W9 4.3: self-attention cannot tell the order)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attn_cli.experiments.order import Result


def _vec(values: Iterable[float]) -> str:
    return "[" + " ".join(f"{v:.3f}" for v in values) + "]"


def tables(result: Result, outcomes: Mapping) -> list:
    """``outcomes``: check ID -> Outcome, the verdicts the marks show."""
    from attn_cli.render.console import check_table, not_text_caption, verdict

    o = outcomes
    a, b, w = " ".join(result.sentence_a), " ".join(result.sentence_b), result.word
    cfg = result.config
    table = check_table(
        f"W9 4.3  self-attention sees a set: output for '{w}' (d = {cfg['d_model']}, seed {cfg['seed']})",
        [
            (
                f"output for '{w}' in '{a}'",
                _vec(result.output_a),
                _vec(o["w9-order.dog_bites_man"].published),
                verdict(o["w9-order.dog_bites_man"]),
            ),
            (
                f"output for '{w}' in '{b}'",
                _vec(result.output_b),
                _vec(o["w9-order.man_bites_dog"].published),
                verdict(o["w9-order.man_bites_dog"]),
            ),
            (
                "identical without position information (atol 1e-6)",
                f"{result.identical} (max diff {result.max_diff:.1e})",
                str(o["w9-order.identical"].published),
                verdict(o["w9-order.identical"]),
            ),
            (
                "  with a position vector added to each token",
                f"{_vec(result.output_a_positions)} vs {_vec(result.output_b_positions)}",
                "",
                None,
            ),
            (
                "identical with position vectors",
                f"{result.identical_with_positions} (max diff {result.max_diff_positions:.3f})",
                str(o["w9-order.identical_with_positions"].published),
                verdict(o["w9-order.identical_with_positions"]),
            ),
        ],
        caption="without positions the two sentences are indistinguishable; a distinct vector per position "
        "tells them apart (positional encoding, Week 10)" + not_text_caption(o.values()),
    )
    return [table]


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    return []  # a table only
