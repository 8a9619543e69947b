"""What a run leaves for machines: the check record (``verify.json``, ``attn verify --json``: a header
naming where the numbers came from, then the checks), read back and two compared (``attn diff``);
``manifest.json`` of ``attn all`` (the same header, the checks as ``records``, each experiment's report
:class:`Section`); the checks as JUnit XML (valid under Jenkins' ``junit-10.xsd``) for CI dashboards."""

from __future__ import annotations

import datetime
import fnmatch
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attn_cli.published.types import KINDS, fmt_value

FORMAT = "attn-checks/1"
VERDICTS = ("pass", "fail", "n/a", "skipped")  # an Outcome's status (attn_cli.published.compare)
FAILING = ("fail", "n/a")
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")  # figure files among what an experiment writes
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
    head = data.get("header") if isinstance(data, dict) else None  # none in an earlier version's bare list
    checks = data.get("records", data.get("checks")) if isinstance(data, dict) else data  # manifest.json: records
    if not isinstance(checks, list):
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
        a, b = (json.dumps((c or {}).get("regenerated"), sort_keys=True) for c in (self.before, self.after))
        return a != b

    @property
    def verdict_changed(self) -> bool:
        return (self.before or {}).get("status") != (self.after or {}).get("status")

    @property
    def now_failing(self) -> bool:
        return (self.before or {}).get("status") == "pass" and (self.after or {}).get("status") in FAILING

    def delta(self) -> float | None:
        a, b = regenerated(self.before), regenerated(self.after)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        return float(b) - float(a) if numbers else None

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


def regenerated(record: dict | None) -> Any:
    """A record's regenerated value; for a value trained over seeds, its first seed's."""
    value = None if record is None else record.get("regenerated")
    return value.get("value") if isinstance(value, dict) else value


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
    rows = [Row(cid, old[cid], c) for cid, c in new.items() if cid in old]
    added, removed = [c for cid, c in new.items() if cid not in old], [c for cid, c in old.items() if cid not in new]
    return Diff(header, notes, rows, added, removed)


@dataclass
class Section:
    """One experiment's part of the report."""

    name: str  # the experiment module, e.g. "sqrt_dk"
    command: str = ""  # the subcommands that regenerate it, e.g. "sqrt-dk"
    ids: list[str] = field(default_factory=list)  # catalogue IDs it regenerates
    artifacts: list = field(default_factory=list)  # their catalogue entries (Artifact), in catalogue order
    figures: list[str] = field(default_factory=list)  # figure files, relative to --out
    data: list[str] = field(default_factory=list)  # the other files it wrote (md, json, csv)
    seconds: float = 0.0  # run and render
    error: str | None = None  # why it failed (run or render)
    config: Any = None  # its configuration as a dict
    outcomes: list = field(default_factory=list)  # its checks' outcomes
    tables: list = field(default_factory=list)  # its blocks (render.table), rendered by each page
    cached: tuple[int, int] | None = None  # (runs from the cache, runs) of an experiment caching runs


def matches(written: str, catalogued: str) -> bool:
    """A written file is a catalogue file; a figure in any --format counts (masks.svg for masks.png)."""
    pattern = re.sub(r"\{[^}]*\}", "*", catalogued)  # placeholders ("attention_L{length}.png") as a glob
    if pattern.lower().endswith(FIGURE_SUFFIXES):
        stem, _ = pattern.rsplit(".", 1)
        return any(fnmatch.fnmatch(written, f"{stem}{suffix}") for suffix in FIGURE_SUFFIXES)
    return fnmatch.fnmatch(written, pattern)


def manifest(
    sections: Sequence[Section],
    *,
    command: str,
    quick: bool,
    seed: int,
    device: str,
    where: dict,
    cache: list[str],
    seconds: float,
    checks: str | None,
    coverage: str,
    missing: list[str],
    outcomes: Sequence = (),
    quick_note: str | None = None,
) -> dict:
    """``manifest.json``: the run's facts, catalogue ID -> files, each experiment, the checks counted by
    status, those not judged with why, and (a trained value judged) check ID -> the seed rule's interval."""
    record = {
        "command": command,
        "quick": quick,
        "seed": seed,
        "device": device,
        **where,  # versions, machine, numerics (pipeline.where_it_ran)
        "cache": cache,
        "timing": {
            "seconds": round(seconds, 3),  # wall-clock values: the only part that varies between runs
            "experiments": {s.name: round(s.seconds, 3) for s in sections},
        },
        "engines": {
            s.name: engines_of(s.config) for s in sections if isinstance(s.config, dict) and "engine" in s.config
        },
        "checks": checks,
        "verdicts": {status: sum(o.status == status for o in outcomes) for status in VERDICTS},
        "not_judged": [{"id": o.check.id, "reason": o.note} for o in outcomes if o.status == "skipped"],
        "quick_note": quick_note,
        "coverage": coverage,
        "artifacts": _artifacts(sections),
        "missing": missing,
        "experiments": {
            s.name: dict(artifacts=s.ids, command=s.command, config=s.config, files=s.data + s.figures, error=s.error)
            for s in sections
        },
    }
    intervals = {  # none in a quick run
        o.check.id: o.regenerated.interval().record()
        for o in outcomes
        if o.status in ("pass", "fail") and callable(getattr(o.regenerated, "interval", None))
    }
    if intervals:
        record["intervals"] = intervals
    return record


def _artifacts(sections: Sequence[Section]) -> dict[str, dict]:
    """Catalogue ID -> experiment, command, files (and catalogue files not written; IDs not catalogued)."""
    artifacts: dict[str, dict] = {}
    for s in sections:
        written = s.figures + s.data
        pages = [f"{s.name}.md", f"{s.name}.json"]
        for a in s.artifacts:
            own = [f for f in written if any(matches(f, p) for p in a.files)]
            artifacts[a.id] = {"experiment": s.name, "command": a.command, "files": pages + own}
            unwritten = [p for p in a.files if not any(matches(f, p) for f in written)]
            if unwritten and not s.error:
                artifacts[a.id]["not_written"] = unwritten
        for aid in s.ids:
            entry = {"experiment": s.name, "command": s.command, "files": list(pages), "catalogued": False}
            artifacts.setdefault(aid, entry)
    return artifacts


def engines_of(config: dict) -> str:
    """``"exact"``, or where the seeds after the first train on another engine, ``"exact for seed 0,
    fast for seeds 1 2 3 4"``."""
    seeds = list(config.get("seeds") or [config.get("seed")])
    extra = config.get("extra_seed_engine")
    if not extra or extra == config["engine"] or len(seeds) < 2:
        return str(config["engine"])
    return f"{config['engine']} for seed {seeds[0]}, {extra} for seeds {' '.join(map(str, seeds[1:]))}"


def _case(parent: ET.Element, c: dict, section: str, seconds: float) -> None:
    case = ET.SubElement(parent, "testcase", classname=section, name=c["id"], time=f"{seconds:.3f}")
    if c["status"] in ("fail", "n/a"):
        margin = "none" if c.get("margin") is None else f"{c['margin']:.3f}"
        message = (
            f"measured {fmt_value(c.get('regenerated'), 200)}, published {fmt_value(c.get('published'), 200)}, "
            f"rule {c.get('tolerance')}, margin {margin}: {c.get('note') or 'outside tolerance'}"
        )
        ET.SubElement(case, "failure", message=message, type=c["status"])
    elif c["status"] == "skipped":
        ET.SubElement(case, "skipped", message=c.get("note") or "not judged")


def _counts(element: ET.Element, cases: Sequence[dict], seconds: Mapping[str, float]) -> None:
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(c["status"] in ("fail", "n/a") for c in cases)))
    element.set("errors", "0")
    element.set("skipped", str(sum(c["status"] == "skipped" for c in cases)))
    element.set("time", f"{sum(seconds.get(c['artifact'], 0.0) for c in cases):.3f}")


def junit_xml(checks: Sequence[dict], artifacts: Mapping, seconds: Mapping[str, float]) -> str:
    """One ``<testsuite>`` per text holding one per kind of check (property ``kind``: a dashboard can
    leave identities out), one ``<testcase>`` per check (``checks``: ``Outcome.as_json`` records);
    ``seconds``: catalogue ID -> each of its checks' share of its experiment's seconds."""
    where = {c["artifact"]: artifacts.get(c["artifact"]) for c in checks}
    source = {aid: a.source if a is not None else "other" for aid, a in where.items()}
    root = ET.Element("testsuites", name="attn")
    for text in dict.fromkeys(["W9", "D2L", *source.values()]):
        ours = [c for c in checks if source[c["artifact"]] == text]
        if not ours:
            continue
        suite = ET.SubElement(root, "testsuite", name=text)
        _counts(suite, ours, seconds)
        for kind in KINDS:
            cases = [c for c in ours if c["kind"] == kind]
            if not cases:
                continue
            child = ET.SubElement(suite, "testsuite", name=f"{text} {kind}")
            ET.SubElement(ET.SubElement(child, "properties"), "property", name="kind", value=kind)
            _counts(child, cases, seconds)
            for c in cases:
                a = where[c["artifact"]]
                _case(child, c, f"{a.source} {a.section}" if a else c["artifact"], seconds.get(c["artifact"], 0.0))
    _counts(root, checks, seconds)
    del root.attrib["skipped"]  # not an attribute of <testsuites>
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def check_seconds(runs: Sequence, checks: Sequence[dict]) -> dict[str, float]:
    """Catalogue ID -> seconds per check: each experiment's time shared among its checks."""
    per_run = {}
    for run in runs:
        n = sum(c["artifact"] in run.experiment.artifacts for c in checks)
        for aid in run.experiment.artifacts:
            per_run[aid] = run.seconds / n if n else 0.0
    return per_run
