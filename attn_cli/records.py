"""The check record of a run: a header naming where the numbers came from, then the checks;
read back, and two of them compared (``attn diff``).

``verify.json`` and ``attn verify --json`` are ``{"header": ..., "checks": [...]}``;
``manifest.json`` of ``attn all`` has the same header and the checks as ``records``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "attn-checks/1"
FAILING = ("fail", "n/a")
_IGNORED = ("timing", "format", "command")  # header fields that differ between any two runs
_NAMES = {"numerics.mode": "numerics", "numerics.isa": "CPU kernels"}  # else the key, less "versions."


def header(*, command: str, where: dict, device: str, seed: int, seeds: int | None, quick: bool) -> dict:
    """The command, versions, machine, numerics (``where``: :func:`attn_cli.pipeline.where_it_ran`),
    device, seeds (None: the seed rule's default; none with ``quick``) and the date."""
    from attn_cli.published.seed_rule import MIN_SEEDS

    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "format": FORMAT,
        "command": command + (" --quick" if quick else ""),
        "timing": {"date": date},  # wall clock: under timing
        **where,  # versions, machine, numerics
        "device": device,
        "seed": seed,
        "seeds": None if quick else seeds or MIN_SEEDS,
        "quick": quick,
    }


def record(outcomes: Sequence, head: dict) -> dict:
    return {"header": head, "checks": [o.as_json() for o in outcomes]}


class Unreadable(ValueError):
    """Not a check record: the message says what the path holds instead."""


@dataclass
class Loaded:
    header: dict | None  # None: an old bare list
    checks: list[dict]
    path: Path | str  # the file read, or a label (verify --diff: "this run")


def load(path: str | Path) -> Loaded:
    """A check record from ``verify.json`` (object or an earlier version's bare list),
    ``manifest.json`` or a report folder holding one of them (``verify.json`` first)."""
    path = Path(path)
    if path.is_dir():
        found = [path / name for name in ("verify.json", "manifest.json") if (path / name).is_file()]
        if not found:
            raise Unreadable(f"{path} holds neither verify.json nor manifest.json")
        path = found[0]
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Unreadable(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"{path} is not JSON ({exc})") from None
    listed = "records" if isinstance(data, dict) and "records" in data else "checks"  # manifest.json: records
    if isinstance(data, list):
        head, checks = None, data
    elif isinstance(data, dict) and isinstance(data.get(listed), list):
        head, checks = data.get("header"), data[listed]
    else:
        raise Unreadable(f"{path} holds no check records (a manifest from an earlier attn has none: rerun attn all)")
    if not all(isinstance(c, dict) and isinstance(c.get("id"), str) and "status" in c for c in checks):
        raise Unreadable(f"{path}: a check record without an id or a status")
    return Loaded(head if isinstance(head, dict) else None, checks, path)


@dataclass
class Row:
    id: str
    before: dict | None
    after: dict | None

    @property
    def moved(self) -> bool:
        return _value(self.before) != _value(self.after)

    @property
    def verdict_changed(self) -> bool:
        return (self.before or {}).get("status") != (self.after or {}).get("status")

    @property
    def now_failing(self) -> bool:
        return (self.before or {}).get("status") == "pass" and (self.after or {}).get("status") in FAILING

    def delta(self) -> float | None:
        a, b = _number(self.before), _number(self.after)
        return None if a is None or b is None else b - a

    def as_json(self) -> dict:
        def side(c: dict | None) -> dict | None:
            return None if c is None else {k: c.get(k) for k in ("regenerated", "status", "margin")}

        return {
            "id": self.id,
            "before": side(self.before),
            "after": side(self.after),
            "delta": self.delta(),
            "moved": self.moved,
            "verdict_changed": self.verdict_changed,
            "now_failing": self.now_failing,
        }


@dataclass
class Diff:
    header: list[tuple[str, Any, Any]]  # (name, before, after) of each header field that differs
    notes: list[str]  # a side without a header, and so on
    rows: list[Row] = field(default_factory=list)  # checks on both sides, in the later run's order
    new: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)

    @property
    def changed(self) -> list[Row]:
        return [r for r in self.rows if r.moved or r.verdict_changed]

    @property
    def now_failing(self) -> list[Row]:
        return [r for r in self.rows if r.now_failing]

    @property
    def summary(self) -> str:
        moved = sum(r.moved for r in self.rows)
        verdicts = sum(r.verdict_changed for r in self.rows)
        text = (
            f"{moved} value{'s' if moved != 1 else ''} moved, {verdicts} verdict{'s' if verdicts != 1 else ''} "
            f"changed ({len(self.now_failing)} now failing)"
        )
        if self.new or self.removed:
            text += f"; {len(self.new)} new, {len(self.removed)} removed"
        return text

    @property
    def exit_code(self) -> int:
        return 1 if self.now_failing else 0

    def as_json(self, everything: bool = False) -> dict:
        return {
            "header": [{"field": k, "before": a, "after": b} for k, a, b in self.header],
            "notes": self.notes,
            "checks": [r.as_json() for r in (self.rows if everything else self.changed)],
            "new": [c["id"] for c in self.new],
            "removed": [c["id"] for c in self.removed],
            "summary": self.summary,
            "now_failing": [r.id for r in self.now_failing],
        }


def _value(record: dict | None) -> str:
    return json.dumps(None if record is None else record.get("regenerated"), sort_keys=True)


def regenerated(record: dict | None) -> Any:
    """A record's regenerated value; for a value trained over seeds, its first seed's."""
    value = None if record is None else record.get("regenerated")
    return value.get("value") if isinstance(value, dict) else value


def _number(record: dict | None) -> float | None:
    value = regenerated(record)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k in _IGNORED and not prefix:
            continue
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def diff(before: Loaded, after: Loaded) -> Diff:
    notes = [
        f"{side.path} has no header (an earlier attn's bare list)" for side in (before, after) if side.header is None
    ]
    header = []
    if before.header is not None and after.header is not None:
        a, b = _flat(before.header), _flat(after.header)
        names = {k: _NAMES.get(k, k.removeprefix("versions.")) for k in dict.fromkeys([*a, *b])}
        header = [(name, a.get(k), b.get(k)) for k, name in names.items() if a.get(k) != b.get(k)]
    old = {c["id"]: c for c in before.checks}
    new = {c["id"]: c for c in after.checks}
    return Diff(
        header=header,
        notes=notes,
        rows=[Row(cid, old[cid], c) for cid, c in new.items() if cid in old],
        new=[c for cid, c in new.items() if cid not in old],
        removed=[c for cid, c in old.items() if cid not in new],
    )
