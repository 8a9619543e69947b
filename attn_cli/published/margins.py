"""How far a judged check lies inside its rule: its margin and the tolerance it needs (design
notes: ``docs/design.md``, section ``attn_cli.published.margins``)."""

from __future__ import annotations

import math
from typing import Any

from attn_cli.published.types import MISSING

SLACK = 1e-12  # the comparison's own allowance for rounding (types.Check.ok, seed_rule.Interval)


def _distance(a: Any, b: Any) -> float | None:
    """The largest ``|a - b|`` (element-wise over lists); None where either is not a number."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))) or len(a) != len(b) or not a:
            return None
        parts = [_distance(x, y) for x, y in zip(a, b)]
        return None if None in parts else max(p for p in parts if p is not None)
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    try:
        d = abs(float(a) - float(b))
    except (TypeError, ValueError):
        return None
    return d if math.isfinite(d) else None


def margin(check: Any, regenerated: Any, status: str) -> dict[str, float | None] | None:
    """``{"margin", "needed_tolerance"}`` of a judged check (status pass or fail); None for an
    identity or a check not judged."""
    if check.kind == "identity" or status not in ("pass", "fail"):
        return None
    passed = status == "pass"
    if regenerated is MISSING or regenerated is None:
        return {"margin": -1.0, "needed_tolerance": None}  # not regenerated: nothing passes it
    if check.test == "seeds":
        from attn_cli.published.seed_rule import interval, seed_values

        iv = interval(seed_values(regenerated))
        d = abs(float(check.published) - iv.mean)
        return {"margin": 1 - d / (iv.half_width + SLACK), "needed_tolerance": d}
    if check.test == "abs" and check.tolerance:
        dist = _distance(regenerated, check.published)
        if dist is not None:
            return {"margin": 1 - dist / (check.tolerance + SLACK), "needed_tolerance": dist}
    if check.test == "below" and check.tolerance and _distance(regenerated, 0) is not None:
        return {"margin": 1 - float(regenerated) / check.tolerance, "needed_tolerance": float(regenerated)}
    return {"margin": 1.0 if passed else -1.0, "needed_tolerance": 0.0 if passed else None}
