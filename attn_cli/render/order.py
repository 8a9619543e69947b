"""Table for ``attn order`` (W9 4.3: self-attention cannot tell the order)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attn_cli.experiments.order import Result
    from attn_cli.render.console import CheckRow


def _vec(values: Iterable[float]) -> str:
    return "[" + " ".join(f"{v:.3f}" for v in values) + "]"


def tables(result: Result, outcomes: Mapping) -> list:
    from attn_cli.render.console import check_table, not_text_caption, verdict

    o = outcomes

    def checked(quantity: str, regenerated: str, check_id: str, show: Callable[[Any], str] = str) -> CheckRow:
        """A row with its check's published value (``show`` formats it) and verdict."""
        return (quantity, regenerated, show(o[check_id].published), verdict(o[check_id]))

    a, b, w = " ".join(result.sentence_a), " ".join(result.sentence_b), result.word
    cfg = result.config
    table = check_table(
        f"W9 4.3  self-attention sees a set: output for '{w}' (d = {cfg['d_model']}, seed {cfg['seed']})",
        [
            checked(f"output for '{w}' in '{a}'", _vec(result.output_a), "w9-order.dog_bites_man", _vec),
            checked(f"output for '{w}' in '{b}'", _vec(result.output_b), "w9-order.man_bites_dog", _vec),
            checked(
                "identical without position information (atol 1e-6)",
                f"{result.identical} (max diff {result.max_diff:.1e})",
                "w9-order.identical",
            ),
            (
                "  with a position vector added to each token",
                f"{_vec(result.output_a_positions)} vs {_vec(result.output_b_positions)}",
                "",
                None,
            ),
            checked(
                "identical with position vectors",
                f"{result.identical_with_positions} (max diff {result.max_diff_positions:.3f})",
                "w9-order.identical_with_positions",
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
