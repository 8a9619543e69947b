"""Check records as JUnit XML (valid under Jenkins' ``junit-10.xsd``), for CI dashboards: one
``<testsuite>`` per text holding one per kind of check (property ``kind``, so a dashboard can filter
identities out); one ``<testcase>`` per check, its experiment's seconds shared among its checks; a
failure names measured, published, rule and margin."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from attn_cli.published.types import KINDS
from attn_cli.render.report import fmt_value


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
    """``checks``: check records (``Outcome.as_json``); ``artifacts``: catalogue ID -> Artifact
    (its source and section); ``seconds``: catalogue ID -> the seconds of each of its checks."""
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
