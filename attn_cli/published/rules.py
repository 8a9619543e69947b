"""How a command's numbers are judged, in words, made from its checks (their tests, tolerances
and rules) for its ``--help`` and docs/checking.md, so help never quotes a tolerance that the
checks no longer use.  Nothing here is a published value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from attn_cli.published import seed_rule

if TYPE_CHECKING:
    from attn_cli.published.types import Check

WHOLE_CATALOGUE = ("verify", "all")  # commands that judge every check


def _checks_of(command: str) -> list[Check]:
    from attn_cli.published import ARTIFACTS, all_checks

    if command in WHOLE_CATALOGUE:
        return list(all_checks().values())
    ids = {a.id for a in ARTIFACTS if a.command == command}
    return [c for c in all_checks().values() if c.artifact in ids]


def _span(values: Sequence[float], sign: str = "±") -> str:
    lo, hi = min(values), max(values)
    return f"{sign}{lo:g}" if lo == hi else f"{sign}{lo:g} to {sign}{hi:g}"


def seed_rule_formula() -> str:
    """The seed rule's interval as docs/checking.md and help write it, from the module's constants."""
    return f"mean ± max({seed_rule.FLOOR:g}, t({(1 + seed_rule.LEVEL) / 2:g}, n-1) · std · √(1 + 1/n))"


def seed_rule_text() -> str:
    """The copy task's rule, from :mod:`attn_cli.published.seed_rule`'s constants."""
    return (
        f"each trained accuracy by the seed rule: the published value must lie inside the "
        f"{seed_rule.LEVEL:.0%} prediction interval of {seed_rule.MIN_SEEDS} regenerated seeds, "
        f"{seed_rule_formula()} (one seed alone: within ±{seed_rule.FLOOR:g})"
    )


REGENERATE_NOTHING = ("list", "cache", "diff")  # commands that print the catalogue, the cache or a comparison


def judged_by(command: str) -> str:
    """One paragraph: how ``attn verify`` judges what ``attn <command>`` regenerates (derived
    from the checks of the artifacts the catalogue gives that command); "" for a command
    that regenerates nothing (:data:`REGENERATE_NOTHING`)."""
    if command in REGENERATE_NOTHING:
        return ""
    checks = _checks_of(command)
    if not checks:
        return (
            "Judged: nothing. The texts publish no value for what this command prints; `attn verify` checks none of it."
        )
    parts = _how_judged(checks)
    kinds = sorted({c.kind for c in checks})
    counted = "" if "identity" not in kinds else " Identities (true by construction) are shown, never counted."
    return (
        f"Judged (as `attn verify` checks {len(checks)} published value{'s' if len(checks) > 1 else ''}): "
        + "; ".join(parts)
        + "."
        + counted
    )


def _how_judged(checks: Sequence[Check]) -> list[str]:
    """One phrase per way these checks are judged: tolerances, equality, bounds, seeds, rules."""
    parts = []
    abs_tol = [c.tolerance or 0.0 for c in checks if c.test == "abs" and c.judge is None]
    if abs_tol:
        parts.append(
            f"a number within its tolerance of the published one ({_span(abs_tol)}: the digits "
            "the text prints, or the stated reason)"
        )
    if any(c.test == "exact" and c.judge is None for c in checks):
        parts.append("a count, flag, word or rounded value equal to the published one")
    below = [c.tolerance for c in checks if c.test == "below" and c.tolerance is not None]
    if below:
        parts.append(f"a solver-precision value below its bound ({_span(below, '')})")
    return parts + _seeds_and_rules(checks)


def _seeds_and_rules(checks: Sequence[Check]) -> list[str]:
    """The phrases for trained values (the seed rule) and for qualitative claims (rules)."""
    parts = []
    if any(c.test == "seeds" or (c.judge is not None and c.test != "rule") for c in checks):
        parts.append(seed_rule_text())
    rules = sum(c.test == "rule" for c in checks)
    if rules:
        parts.append(
            f"{rules} qualitative claim{'s' if rules > 1 else ''} by the rule stated with "
            f"{'each' if rules > 1 else 'it'} (printed with the verdict)"
        )
    return parts
