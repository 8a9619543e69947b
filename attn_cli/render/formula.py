"""Tables for ``attn formula`` (W9 3.1 worked example, 3.2 properties)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attn_cli.render.console import CheckRow, check_table, not_text_caption, verdict
from attn_cli.render.files import no_figures

if TYPE_CHECKING:
    from attn_cli.experiments.formula import Result


def _list(values: Iterable[float]) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"


def _sums(sums: list[float]) -> str:
    """Row sums as the text prints them (.tolist()), with a note where float32 rounding shows."""
    text = repr(sums)
    worst = max(abs(v - 1.0) for v in sums)
    return text if worst == 0 else f"{text} (float32 rounding: max |sum - 1| = {worst:.0e})"


def _shapes_text(shapes: Mapping[str, Iterable[int]]) -> str:
    q, k, v, scores, out = ("(" + ", ".join(map(str, shapes[n])) + ")" for n in ("Q", "K", "V", "scores", "output"))
    return f"Q {q} K {k} V {v} -> scores {scores} -> output {out}"


def tables(result: Result, outcomes: Mapping) -> list:
    def checked(quantity: str, regenerated: str, check_id: str, show: Callable[[Any], str] = repr) -> CheckRow:
        return (quantity, regenerated, show(outcomes[check_id].published), verdict(outcomes[check_id]))

    closed = _list(result.closed_form)
    worked = check_table(
        "W9 3.1  worked example: q = [1, 0]; keys [1, 0], [0, 1], [1, 1]; values 10, 20, 30; d_k = 2",
        [
            checked("scores q.k / sqrt(2)", _list(result.scores), "w9-worked.scores", _list),
            checked("softmax weights", _list(result.weights), "w9-worked.weights", _list),
            ("  closed form e^s/(2e^s+1), 1/(2e^s+1)", closed, f"max diff {result.closed_form_max_diff:.0e}", None),
            checked("sum of the weights", f"{result.weights_sum:.3f}", "w9-worked.weights_sum"),
            checked("output = weights @ V", f"{result.output:.2f}", "w9-worked.output"),
        ],
        caption="core scaled_dot_product_attention in float64; keys 1 and 3 match the query equally, "
        "key 2 (orthogonal) gets less but not zero",
    )
    cfg = result.config
    sdpa = f"{result.matches_sdpa} (max diff {result.sdpa_max_diff:.1e})"
    properties = check_table(
        f"W9 3.2  properties of attention on random Q, K, V (seed {cfg['seed']}, device {cfg['device']})",
        [
            checked("shapes", _shapes_text(result.shapes), "w9-properties.shapes", _shapes_text),
            checked("matches F.scaled_dot_product_attention (atol 1e-6)", sdpa, "w9-properties.matches_sdpa", str),
            ("  core attention equals the text's explicit formula", f"max diff {result.core_max_diff:.1e}", "", None),
            checked("each row of weights sums to 1", _sums(result.row_sums), "w9-properties.row_sums"),
            checked("weights are non-negative", str(result.non_negative), "w9-properties.non_negative", str),
            checked(
                "every output within the range of its value column (convex combination)",
                str(result.convex),
                "w9-properties.convex",
                str,
            ),
        ],
        caption=not_text_caption(outcomes.values())[2:] or None,
    )
    return [worked, properties]


figures = no_figures
