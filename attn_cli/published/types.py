"""Types of the registry of published values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class Artifact:
    """One table or figure of the catalogue (``../shared/ARTIFACTS.md``)."""

    id: str  # catalogue ID, e.g. "w9-sqrt-dk"
    source: str  # "W9" or "D2L"
    section: str  # e.g. "3.3"
    title: str  # a few words
    command: str  # the subcommand that regenerates it, e.g. "sqrt-dk"
    files: tuple[str, ...] = ()  # files the command writes into --out for it
    new: bool = False  # a figure the texts do not draw, added beside a table


@dataclass(frozen=True)
class Check:
    """One published value and how a regenerated value is compared with it.

    kind:
      "abs"   |regenerated - published| <= tolerance (numbers, or lists element-wise)
      "exact" regenerated == published (bools, ints, strings, lists of them)
      "below" regenerated < tolerance (solver-precision claims such as "1.4e-06")
      "rule"  a qualitative claim checked by a rule in code: regenerated is that rule's
              verdict (True) and published is the text's words
      "seeds" a trained value: regenerated is a sample over seeds, judged by ``judge``
              (:mod:`attn_cli.published.seed_rule`)

    ``judge(regenerated, published) -> bool``, where given, decides instead of the kind's
    comparison (a rule whose data the experiment measures, e.g. over seeds).
    """

    id: str  # e.g. "w9-sqrt-dk.1024.grad_scaled"
    artifact: str  # the catalogue ID it belongs to
    published: Any
    kind: str = "abs"
    tolerance: float | None = None
    reason: str = ""  # why this tolerance: printed digits, a tie, training noise, ...
    meta: dict = field(default_factory=dict, compare=False)
    judge: Optional[Callable[[Any, Any], bool]] = field(default=None, compare=False, repr=False)

    def ok(self, regenerated: Any) -> bool:
        if regenerated is None:
            return False
        if self.judge is not None:
            return bool(self.judge(regenerated, self.published))
        if self.kind == "abs":
            return _close(regenerated, self.published, self.tolerance or 0.0)
        if self.kind == "exact":
            return _normalise(regenerated) == _normalise(self.published)
        if self.kind == "below":
            return isinstance(regenerated, (int, float)) and regenerated < self.tolerance
        if self.kind == "rule":
            return regenerated is True
        raise ValueError(f"unknown check kind {self.kind!r}")

    def tolerance_text(self) -> str:
        if self.kind == "abs":
            return f"±{self.tolerance:g}"
        if self.kind == "below":
            return f"< {self.tolerance:g}"
        if self.kind == "seeds":
            return "seed rule"
        return self.kind


def _normalise(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_normalise(v) for v in x]
    return x


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b):
            return False
        return all(_close(x, y, tol) for x, y in zip(a, b))
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return math.isfinite(a) and abs(a - b) <= tol + 1e-12


def num(id: str, artifact: str, published: Any, tolerance: float, reason: str = "") -> Check:
    """A numeric check; by default the tolerance is half a unit of the last printed digit."""
    return Check(id=id, artifact=artifact, published=published, kind="abs", tolerance=tolerance,
                 reason=reason or f"printed digits (±{tolerance:g})")


def exact(id: str, artifact: str, published: Any, reason: str = "exact") -> Check:
    return Check(id=id, artifact=artifact, published=published, kind="exact", reason=reason)


def below(id: str, artifact: str, published: Any, bound: float, reason: str) -> Check:
    return Check(id=id, artifact=artifact, published=published, kind="below", tolerance=bound, reason=reason)


def rule(id: str, artifact: str, published: str, reason: str) -> Check:
    return Check(id=id, artifact=artifact, published=published, kind="rule", reason=reason)
