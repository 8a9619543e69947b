"""Regenerated values against the published ones: the one ``compare()`` makes the :class:`Outcome` objects
every table, ``attn verify``, ``attn all`` and the report print, with how far each judged check lies inside
its rule (:meth:`Outcome.margin`); :func:`judged_by` says in words how a command's numbers are judged."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attn_cli.published import seed_rule
from attn_cli.published.settings import at_text_settings
from attn_cli.published.types import KINDS, MISSING, Check

NOT_TEXT = "n/a: settings differ from the text's"
SLACK = 1e-12  # the comparison's own allowance for rounding (types.Check.ok, seed_rule.Interval)


@dataclass
class Outcome:
    """One check against its regenerated value.

    status: "pass", "fail", "skipped" (shown, not judged: a quick run, another engine) or
    "n/a" (the run's settings are not the text's, so the published value does not apply)."""

    check: Check
    regenerated: Any = MISSING
    status: str = "fail"
    note: str = ""  # why it failed, was skipped or does not apply

    @property
    def ok(self) -> bool | None:
        return self.status == "pass" if self.status in ("pass", "fail") else None

    @property
    def published(self) -> Any:
        return self.check.published

    @property
    def tolerance(self) -> str:
        return self.check.tolerance_text()

    @property
    def kind(self) -> str:
        return self.check.kind

    def margin(self) -> dict[str, float | None] | None:
        """``{"margin", "needed_tolerance"}`` of a judged check (``docs/design.md``); None for an
        identity or a check not judged."""
        check, value = self.check, self.regenerated
        if check.kind == "identity" or self.status not in ("pass", "fail"):
            return None
        passed = self.status == "pass"
        if value is MISSING or value is None:
            return {"margin": -1.0, "needed_tolerance": None}  # not regenerated: nothing passes it
        if check.test == "seeds":
            iv = seed_rule.interval(seed_rule.seed_values(value))
            d = abs(float(check.published) - iv.mean)
            return {"margin": 1 - d / (iv.half_width + SLACK), "needed_tolerance": d}
        if check.test == "abs" and check.tolerance:
            dist = _distance(value, check.published)
            if dist is not None:
                return {"margin": 1 - dist / (check.tolerance + SLACK), "needed_tolerance": dist}
        if check.test == "below" and check.tolerance and _distance(value, 0) is not None:
            return {"margin": 1 - float(value) / check.tolerance, "needed_tolerance": float(value)}
        return {"margin": 1.0 if passed else -1.0, "needed_tolerance": 0.0 if passed else None}

    def as_json(self) -> dict:
        # a value judged over seeds adds its per-seed values and its rule (``record()``)
        extra = self.regenerated.record() if hasattr(self.regenerated, "record") else {}
        return {
            "id": self.check.id,
            "artifact": self.check.artifact,
            "published": self.check.published,
            "regenerated": None if self.regenerated is MISSING else self.regenerated,
            "tolerance": self.check.tolerance_text(),
            "kind": self.check.kind,
            "test": self.check.test,
            "ok": self.ok,
            "status": self.status,
            "reason": self.check.reason,
            "note": self.note,
            **extra,
            **(self.margin() or {}),
        }


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


def judge(
    check: Check,
    value: Any = MISSING,
    config: Mapping[str, Any] | None = None,
    *,
    unjudged: str | None = None,
    missing: str = "not regenerated",
) -> Outcome:
    """One check against one regenerated value of a run at ``config`` (does the published value
    apply?); ``unjudged``: why it is shown, not judged ("quick"); ``missing``: the note for none."""
    if unjudged:
        return Outcome(check, value, "skipped", f"skipped ({unjudged})")
    if not at_text_settings(check, config):
        return Outcome(check, value, "n/a", NOT_TEXT)
    if value is MISSING:
        return Outcome(check, note=missing)
    try:
        ok = check.ok(value)
    except Exception as exc:  # a value of the wrong type is a failure, not a crash
        return Outcome(check, value, "fail", f"cannot compare: {type(exc).__name__}: {exc}")
    return Outcome(check, value, "pass" if ok else "fail", "" if ok else "outside tolerance")


def compare(
    checks: Iterable[Check],
    measured: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    unjudged: str | None = None,
    missing: str = "not regenerated",
) -> dict[str, Outcome]:
    """Each check against ``measured[check.id]`` (check ID -> regenerated value), keyed by check ID."""
    return {c.id: judge(c, measured.get(c.id, MISSING), config, unjudged=unjudged, missing=missing) for c in checks}


def compare_result(result: Any, artifacts: Iterable[str] | None = None) -> dict[str, Outcome]:
    """The checks of ``artifacts`` (default: every artifact with a check in ``result.measured()``)
    against an experiment's Result: what the pipeline (:func:`attn_cli.pipeline.run`) hands the render module."""
    from attn_cli.published import all_checks

    measured = dict(result.measured())
    wanted = set(artifacts) if artifacts is not None else None
    checks = [c for c in all_checks().values() if (c.artifact in wanted if wanted is not None else c.id in measured)]
    return compare(checks, measured, getattr(result, "config", None))


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def summary(outcomes: Sequence[Outcome]) -> str:
    """ "96 measured and 8 rules passed; 23 identities shown", with failures, values that
    do not apply and skips appended.  Identities are never counted as evidence: a passing
    identity is "shown", a failing one is a failure (a bug) like any other."""
    passed = {k: sum(o.kind == k and o.status == "pass" for o in outcomes) for k in KINDS}
    failed = sum(o.status in ("fail", "n/a") for o in outcomes)
    text = f"{passed['measured']} measured and {_plural(passed['rule'], 'rule', 'rules')} passed"
    if failed:
        text += f", {failed} failed"
    text += f"; {_plural(passed['identity'], 'identity', 'identities')} shown"
    skipped = Counter(o.note for o in outcomes if o.status == "skipped")
    return text + "".join(f", {n} {note}" for note, n in skipped.items())


# --------------------------------------------------------------------------- the checks in words

WHOLE_CATALOGUE = ("verify", "all")  # commands that judge every check


def _span(values: Sequence[float], sign: str = "±") -> str:
    lo, hi = min(values), max(values)
    return f"{sign}{lo:g}" if lo == hi else f"{sign}{lo:g} to {sign}{hi:g}"


REGENERATE_NOTHING = ("list", "cache", "diff")  # commands that print the catalogue, the cache or a comparison


def judged_by(command: str) -> str:
    """One paragraph: how ``attn verify`` judges what ``attn <command>`` regenerates (derived
    from the checks of the artifacts the catalogue gives that command); "" for a command
    that regenerates nothing (:data:`REGENERATE_NOTHING`)."""
    if command in REGENERATE_NOTHING:
        return ""
    from attn_cli.published import all_checks
    from attn_cli.published.catalogue import ARTIFACTS

    checks = list(all_checks().values())
    if command not in WHOLE_CATALOGUE:
        ids = {a.id for a in ARTIFACTS if a.command == command}
        checks = [c for c in checks if c.artifact in ids]
    if not checks:
        return (
            "Judged: nothing. The texts publish no value for what this command prints; `attn verify` checks none of it."
        )
    identities = any(c.kind == "identity" for c in checks)
    counted = " Identities (true by construction) are shown, never counted." if identities else ""
    head = f"Judged (as `attn verify` checks {_plural(len(checks), 'published value', 'published values')}): "
    return head + "; ".join(_how_judged(checks)) + "." + counted


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
    """The phrases for trained values (the seed rule, from its constants) and for qualitative claims (rules)."""
    parts = []
    if any(c.test == "seeds" or (c.judge is not None and c.test != "rule") for c in checks):
        parts.append(
            f"each trained accuracy by the seed rule: the published value must lie inside the "
            f"{seed_rule.LEVEL:.0%} prediction interval of {seed_rule.MIN_SEEDS} regenerated seeds, "
            f"{seed_rule.formula()} (one seed alone: within ±{seed_rule.FLOOR:g})"
        )
    rules = sum(c.test == "rule" for c in checks)
    if rules:
        parts.append(
            f"{rules} qualitative claim{'s' if rules > 1 else ''} by the rule stated with "
            f"{'each' if rules > 1 else 'it'} (printed with the verdict)"
        )
    return parts
