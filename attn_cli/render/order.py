"""Table for ``attn order`` (W9 4.3: self-attention cannot tell the order)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attn_cli.render.console import CheckRow, check_table, not_text_caption, verdict
from attn_cli.render.files import no_figures

if TYPE_CHECKING:
    from attn_cli.experiments.order import Result


def _vec(values: Iterable[float]) -> str:
    return "[" + " ".join(f"{v:.3f}" for v in values) + "]"


def tables(result: Result, outcomes: Mapping) -> list:
    def checked(quantity: str, regenerated: str, check_id: str, show: Callable[[Any], str] = str) -> CheckRow:
        return (quantity, regenerated, show(outcomes[check_id].published), verdict(outcomes[check_id]))

    a, b, w, r = " ".join(result.sentence_a), " ".join(result.sentence_b), result.word, result
    identical = f"{r.identical} (max diff {r.max_diff:.1e})"
    positions = f"{_vec(r.output_a_positions)} vs {_vec(r.output_b_positions)}"
    with_positions = f"{r.identical_with_positions} (max diff {r.max_diff_positions:.3f})"
    rows = [
        checked(f"output for '{w}' in '{a}'", _vec(r.output_a), "w9-order.dog_bites_man", _vec),
        checked(f"output for '{w}' in '{b}'", _vec(r.output_b), "w9-order.man_bites_dog", _vec),
        checked("identical without position information (atol 1e-6)", identical, "w9-order.identical"),
        ("  with a position vector added to each token", positions, "", None),
        checked("identical with position vectors", with_positions, "w9-order.identical_with_positions"),
    ]
    title = f"W9 4.3  self-attention sees a set: output for '{w}' (d = {r.config['d_model']}, seed {r.config['seed']})"
    caption = "without positions the two sentences are indistinguishable; a distinct vector per position tells them "
    caption += "apart (positional encoding, Week 10)" + not_text_caption(outcomes.values())
    return [check_table(title, rows, caption=caption)]


figures = no_figures
