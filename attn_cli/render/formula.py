"""Tables for ``attn formula`` (W9 3.1 worked example, 3.2 properties)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attn_cli.experiments.formula import Result


def _list(values: Iterable[float], decimals: int) -> str:
    return "[" + ", ".join(f"{v:.{decimals}f}" for v in values) + "]"


def _shape(shape: Iterable[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _sums(sums: list[float]) -> str:
    """Row sums as the text prints them (.tolist()), with a note where float32 rounding shows."""
    text = repr(sums)
    worst = max(abs(v - 1.0) for v in sums)
    return text if worst == 0 else f"{text} (float32 rounding: max |sum - 1| = {worst:.0e})"


def tables(result: Result, outcomes: Mapping) -> list:
    """``outcomes``: check ID -> Outcome, the verdicts the marks show."""
    from attn_cli.render.console import check_table, not_text_caption, verdict

    o = outcomes

    def pub(check_id: str, decimals: int) -> str:
        return _list(o[check_id].published, decimals)

    worked = check_table(
        "W9 3.1  worked example: q = [1, 0]; keys [1, 0], [0, 1], [1, 1]; values 10, 20, 30; d_k = 2",
        [
            (
                "scores q.k / sqrt(2)",
                _list(result.scores, 3),
                pub("w9-worked.scores", 3),
                verdict(o["w9-worked.scores"]),
            ),
            ("softmax weights", _list(result.weights, 3), pub("w9-worked.weights", 3), verdict(o["w9-worked.weights"])),
            (
                "  closed form e^s/(2e^s+1), 1/(2e^s+1)",
                _list(result.closed_form, 3),
                f"max diff {result.closed_form_max_diff:.0e}",
                None,
            ),
            (
                "sum of the weights",
                f"{result.weights_sum:.3f}",
                repr(o["w9-worked.weights_sum"].published),
                verdict(o["w9-worked.weights_sum"]),
            ),
            (
                "output = weights @ V",
                f"{result.output:.2f}",
                repr(o["w9-worked.output"].published),
                verdict(o["w9-worked.output"]),
            ),
        ],
        caption="core scaled_dot_product_attention in float64; keys 1 and 3 match the query equally, "
        "key 2 (orthogonal) gets less but not zero",
    )
    s = result.shapes
    cfg = result.config

    def shapes_text(shapes: Mapping[str, Iterable[int]]) -> str:
        return (
            f"Q {_shape(shapes['Q'])} K {_shape(shapes['K'])} V {_shape(shapes['V'])} -> scores "
            f"{_shape(shapes['scores'])} -> output {_shape(shapes['output'])}"
        )

    properties = check_table(
        f"W9 3.2  properties of attention on random Q, K, V (seed {cfg['seed']}, device {cfg['device']})",
        [
            (
                "shapes",
                shapes_text(s),
                shapes_text(o["w9-properties.shapes"].published),
                verdict(o["w9-properties.shapes"]),
            ),
            (
                "matches F.scaled_dot_product_attention (atol 1e-6)",
                f"{result.matches_sdpa} (max diff {result.sdpa_max_diff:.1e})",
                str(o["w9-properties.matches_sdpa"].published),
                verdict(o["w9-properties.matches_sdpa"]),
            ),
            ("  core attention equals the text's explicit formula", f"max diff {result.core_max_diff:.1e}", "", None),
            (
                "each row of weights sums to 1",
                _sums(result.row_sums),
                repr(o["w9-properties.row_sums"].published),
                verdict(o["w9-properties.row_sums"]),
            ),
            (
                "weights are non-negative",
                str(result.non_negative),
                str(o["w9-properties.non_negative"].published),
                verdict(o["w9-properties.non_negative"]),
            ),
            (
                "every output within the range of its value column (convex combination)",
                str(result.convex),
                str(o["w9-properties.convex"].published),
                verdict(o["w9-properties.convex"]),
            ),
        ],
        caption=not_text_caption(o.values())[2:] or None,
    )
    return [worked, properties]


def figures(
    result: Result, out: Path, formats: Sequence[str], outcomes: Mapping, keep: list | None = None
) -> list[Path]:
    return []  # tables only
