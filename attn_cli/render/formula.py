"""Tables for ``attn formula`` (W9 3.1 worked example, 3.2 properties)."""

from __future__ import annotations

from pathlib import Path

from attn_cli.experiments.formula import Result
from attn_cli.published import all_checks
from attn_cli.render.files import DEFAULT_FORMATS


def _list(values, decimals: int) -> str:
    return "[" + ", ".join(f"{v:.{decimals}f}" for v in values) + "]"


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _sums(sums) -> str:
    """Row sums as the text prints them (.tolist()), with a note where float32 rounding shows."""
    text = repr(sums)
    worst = max(abs(v - 1.0) for v in sums)
    return text if worst == 0 else f"{text} (float32 rounding: max |sum - 1| = {worst:.0e})"


def tables(result: Result) -> list:
    from attn_cli.render.console import check_table

    checks, m = all_checks(), result.measured()
    same = result.at_text_settings()

    def verdict(check_id, always=False):
        return checks[check_id].ok(m[check_id]) if same or always else "n/a"

    def pub(check_id, decimals):
        return _list(checks[check_id].published, decimals)

    worked = check_table(
        "W9 3.1  worked example: q = [1, 0]; keys [1, 0], [0, 1], [1, 1]; values 10, 20, 30; d_k = 2",
        [
            ("scores q.k / sqrt(2)", _list(result.scores, 3), pub("w9-worked.scores", 3),
             verdict("w9-worked.scores", True)),
            ("softmax weights", _list(result.weights, 3), pub("w9-worked.weights", 3),
             verdict("w9-worked.weights", True)),
            ("  closed form e^s/(2e^s+1), 1/(2e^s+1)", _list(result.closed_form, 3),
             f"max diff {result.closed_form_max_diff:.0e}", None),
            ("sum of the weights", f"{result.weights_sum:.3f}", "1.0", verdict("w9-worked.weights_sum", True)),
            ("output = weights @ V", f"{result.output:.2f}", "20.0", verdict("w9-worked.output", True)),
        ],
        caption="core scaled_dot_product_attention in float64; keys 1 and 3 match the query equally, "
                "key 2 (orthogonal) gets less but not zero",
    )
    s = result.shapes
    cfg = result.config
    shapes = (f"Q {_shape(s['Q'])} K {_shape(s['K'])} V {_shape(s['V'])} -> scores {_shape(s['scores'])} "
              f"-> output {_shape(s['output'])}")
    properties = check_table(
        f"W9 3.2  properties of attention on random Q, K, V (seed {cfg['seed']}, device {cfg['device']})",
        [
            ("shapes", shapes, "Q (3, 4) K (5, 4) V (5, 6) -> scores (3, 5) -> output (3, 6)",
             verdict("w9-properties.shapes")),
            ("matches F.scaled_dot_product_attention (atol 1e-6)",
             f"{result.matches_sdpa} (max diff {result.sdpa_max_diff:.1e})", "True",
             verdict("w9-properties.matches_sdpa")),
            ("  core attention equals the text's explicit formula", f"max diff {result.core_max_diff:.1e}",
             "", None),
            ("each row of weights sums to 1", _sums(result.row_sums), "[1.0, 1.0, 1.0]",
             verdict("w9-properties.row_sums")),
            ("weights are non-negative", str(result.non_negative), "True", verdict("w9-properties.non_negative")),
            ("every output within the range of its value column (convex combination)", str(result.convex),
             "True", verdict("w9-properties.convex")),
        ],
        caption="n/a: settings differ from the text's" if not same else None,
    )
    return [worked, properties]


def figures(result: Result, out: Path, formats=DEFAULT_FORMATS) -> list[Path]:
    return []  # tables only
