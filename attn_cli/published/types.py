"""Types of the published values: artifacts (tables, figures), checks and their kinds."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any


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


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # a check whose experiment produced no value


KINDS = ("measured", "rule", "identity")  # what a check is evidence of (STYLE.md, "Checks")
TESTS = ("abs", "exact", "below", "rule", "seeds")  # how a regenerated value is compared


@dataclass(frozen=True)
class Check:
    """One published value, how a regenerated value is compared with it, and what a pass is evidence of.

    test (how it is compared):
      "abs"   |regenerated - published| <= tolerance (numbers, or lists element-wise)
      "exact" regenerated == published (bools, ints, strings, lists of them)
      "below" regenerated < tolerance (solver-precision claims such as "1.4e-06")
      "rule"  a qualitative claim checked by a rule in code: regenerated is that rule's
              verdict (True) and published is the text's words
      "seeds" a trained value: regenerated is a sample over seeds, judged by ``judge``
              (:mod:`attn_cli.published.seed_rule`)

    ``judge(regenerated, published) -> bool``, where given, decides instead of the test's
    comparison (a rule whose data the experiment measures, e.g. over seeds).

    kind (what a pass is evidence of):
      "measured"  a regenerated value that could come out differently (the default)
      "rule"      a qualitative claim with a stated test
      "identity"  true by construction or by arithmetic (n^2, d/h, a config value echoed
                  back, a weight forced to 0 by masked_fill): shown, never counted as evidence
    """

    id: str  # e.g. "w9-sqrt-dk.1024.grad_scaled"
    artifact: str  # the catalogue ID it belongs to
    published: Any
    test: str = "abs"  # one of TESTS
    tolerance: float | None = None
    reason: str = ""  # why this tolerance: printed digits, a tie, training noise, ...
    meta: dict = field(default_factory=dict, compare=False)
    kind: str = "measured"  # one of KINDS
    judge: Callable[[Any, Any], bool] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"check {self.id}: unknown test {self.test!r}")
        if self.kind not in KINDS:
            raise ValueError(f"check {self.id}: unknown kind {self.kind!r}")

    def ok(self, regenerated: Any) -> bool:
        if regenerated is None:
            return False
        if self.judge is not None:
            return bool(self.judge(regenerated, self.published))
        if self.test == "abs":
            return _close(regenerated, self.published, self.tolerance or 0.0)
        if self.test == "exact":
            return as_lists(regenerated) == as_lists(self.published)
        if self.test == "below":
            assert self.tolerance is not None  # below() always sets the bound
            return isinstance(regenerated, (int, float)) and regenerated < self.tolerance
        return regenerated is True  # "rule"

    def tolerance_text(self) -> str:
        if self.test == "abs":
            return f"±{self.tolerance:g}"
        if self.test == "below":
            return f"< {self.tolerance:g}"
        if self.test == "seeds":
            return "seed rule"
        return self.test


def as_lists(x: Any) -> Any:
    """``x`` with its tuples, nested in lists and tuples, as lists: to compare values read back."""
    if isinstance(x, (list, tuple)):
        return [as_lists(v) for v in x]
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


def num(id: str, artifact: str, published: Any, tolerance: float, reason: str = "", *, kind: str = "measured") -> Check:
    """A numeric check; by default the tolerance is half a unit of the last printed digit."""
    return Check(id, artifact, published, "abs", tolerance, reason or f"printed digits (±{tolerance:g})", kind=kind)


def exact(id: str, artifact: str, published: Any, reason: str = "exact", *, kind: str = "measured") -> Check:
    return Check(id, artifact, published, "exact", reason=reason, kind=kind)


def below(id: str, artifact: str, published: Any, bound: float, reason: str) -> Check:
    return Check(id, artifact, published, "below", bound, reason)


def rule(
    id: str, artifact: str, published: str, reason: str, *, kind: str = "rule", judge: Callable[..., bool] | None = None
) -> Check:
    """A qualitative claim judged by a rule in code (kind "rule"; "identity" for a rule that
    holds by construction, such as a drawn layout that is right once its inputs validate)."""
    return Check(id, artifact, published, "rule", reason=reason, kind=kind, judge=judge)


def identity(check: Check, why: str) -> Check:
    """``check`` as an identity: true by construction or arithmetic (``why`` says which),
    shown beside the text but never counted as evidence."""
    return replace(check, kind="identity", reason=f"{check.reason}; identity: {why}")


def fmt_value(value: Any, limit: int = 60) -> str:
    """A short, readable rendering of a published or regenerated value."""
    if value is MISSING or value is None:
        return "—"
    text = _fmt(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6) else f"{value:.5g}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_fmt(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}"
    return str(value)
