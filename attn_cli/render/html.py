"""``index.html``, the report as one page for a browser (``docs/design.md``, ``attn_cli.render.html``),
and a Run's checks and figures for Jupyter."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import TYPE_CHECKING

from attn_cli.core.numerics import cuda_summary
from attn_cli.published.types import KINDS, fmt_value
from attn_cli.records import FIGURE_SUFFIXES, Section
from attn_cli.render.report import QUICK_NOTE, SOURCES, VERDICT_CLASS, figure_views
from attn_cli.render.table import esc, to_html

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from attn_cli.published.compare import Outcome
    from attn_cli.published.types import Artifact

TILE_LABELS = {"measured": "measured values", "rule": "rules", "identity": "identities (shown, not evidence)"}


def kind_counts(outcomes: Sequence) -> dict[str, dict[str, int]]:
    """{kind: {"pass": n, "fail": n, "skipped": n}} for the kinds present, in KINDS order."""
    counts: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = counts.setdefault(o.check.kind, {"pass": 0, "fail": 0, "skipped": 0})
        row["fail" if o.status == "n/a" else o.status] += 1  # a value that does not apply fails verify
    return {k: counts[k] for k in KINDS if k in counts}


def anchor(artifact_id: str) -> str:
    return "id-" + re.sub(r"[^A-Za-z0-9_-]", "-", artifact_id)


def _links(names: Sequence[str], sep: str = ", ") -> str:
    return sep.join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in names)


def _margin_cell(o: Outcome) -> str:
    """The margin as a number and a small bar: full at 1 (exact), empty at 0 (the edge), red below."""
    m = o.margin()
    if m is None:
        return "<td></td>"
    value = m["margin"]
    assert value is not None  # only needed_tolerance may be None
    return (
        f'<td class="num margin"><span class="bar {"pass" if value >= 0 else "fail"}" title="margin {value:.3f}">'
        f'<span style="width:{max(0.0, min(1.0, value)) * 100:.0f}%"></span></span> {value:.2f}</td>'
    )


def checks_html(outcomes: Sequence) -> str:
    rows = []
    for o in outcomes:
        verdict = {"pass": "pass", "fail": "FAIL"}.get(o.status, o.note or o.status)
        note = f" ({o.note})" if o.status == "fail" and o.note else ""
        rows.append(
            f'<tr class="{VERDICT_CLASS[o.status]}"><td class="id">{esc(o.check.id)}</td>'
            f"<td>{esc(fmt_value(o.check.published, 80))}</td><td>{esc(fmt_value(o.regenerated, 80))}</td>"
            f"<td>{esc(o.check.tolerance_text())}</td><td>{esc(o.check.kind)}</td>"
            f'<td class="verdict {VERDICT_CLASS[o.status]}">{esc(verdict + note)}</td>{_margin_cell(o)}</tr>'
        )
    return (
        '<div class="scroll"><table class="checks"><caption>Regenerated against published</caption>'
        "<thead><tr><th>check</th><th>published</th><th>regenerated</th><th>tolerance</th><th>kind</th>"
        f"<th>verdict</th><th>margin</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def outcomes_html(outcomes: Iterable[Outcome]) -> str:
    """The checks for Jupyter (a Run's ``_repr_html_``): ID, regenerated, published, tolerance, kind, verdict."""
    colour = {"pass": "#1a7f37", "fail": "#cf222e"}
    rows = []
    for o in outcomes:
        regenerated = "" if o.as_json()["regenerated"] is None else o.regenerated
        status = o.status if not o.note or o.status == "pass" else f"{o.status}: {o.note}"
        cells = "".join(f"<td>{esc(c)}</td>" for c in (o.check.id, regenerated, o.published, o.tolerance, o.kind))
        rows.append(f"<tr>{cells}<td style='color:{colour.get(o.status, '#6e7781')}'>{esc(status)}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("check", "regenerated", "published", "tolerance", "kind", "verdict"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def png64(fig: Figure) -> str:
    """A figure as base64 PNG, for an inline image in Jupyter."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def index_html(
    *,
    catalogue: Sequence,
    sections: Sequence[Section],
    manifest: dict,
    outcomes: Sequence,
    summary: str | None,
    coverage_line: str | None,
    links: Sequence[str] = (),
    title: str = "attn: every table and figure of the two texts",
) -> str:
    """The page: as ``index_markdown``'s, with every check's outcome and ``links`` (the run's files) on top."""
    by_artifact: dict[str, list] = {}
    for o in outcomes:
        by_artifact.setdefault(o.check.artifact, []).append(o)
    section_of = {aid: s for s in sections for aid in s.ids}
    items = []  # the contents: each artifact with its state's dot
    for a in catalogue:
        statuses = {o.status for o in by_artifact.get(a.id, [])}
        failed = statuses & {"fail", "n/a"} or (a.id in section_of and section_of[a.id].error)
        state = "fail" if failed else "pass" if "pass" in statuses else "skip" if statuses else "none"
        items.append(
            f'<li class="{state}"><a href="#{anchor(a.id)}"><span class="dot"></span>{esc(a.id)}</a>'
            f' <span class="where">{esc(a.source)} {esc(a.section)}</span></li>'
        )
    states = {"pass": "passed", "fail": "failed", "skip": "shown, not judged", "none": "no published values"}
    legend = " ".join(f'<span class="{k}"><span class="dot"></span>{text}</span>' for k, text in states.items())
    body = [
        _header(title, manifest, outcomes, summary, coverage_line, _facts(manifest, sections, links)),
        f'<nav aria-label="contents"><h2>Contents</h2><p class="legend">{legend}</p><ol>{"".join(items)}</ol></nav>',
    ]
    shown_tables: set[str] = set()  # sections whose tables are shown (with their first artifact)
    body += [_artifact(a, section_of.get(a.id), manifest, by_artifact.get(a.id, []), shown_tables) for a in catalogue]
    body.append(f"<footer>Written by <code>{esc(manifest.get('command', 'attn'))}</code>.</footer>")
    css = resources.files("attn_cli.render").joinpath("report.css").read_text("utf-8")  # package data
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'self\'; '
        "style-src 'unsafe-inline'; img-src 'self'\">\n"
        f"<title>{esc(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + "\n</main>\n</body>\n</html>\n"
    )


def _header(
    title: str, manifest: dict, outcomes: Sequence[Outcome], summary: str | None, coverage_line: str | None, facts: list
) -> str:
    parts = [
        f"<header><h1>{esc(title)}</h1>",
        f'<p class="sub">{SOURCES}</p></header>',  # not escaped: the page's own text
        '<section class="summary" aria-label="summary">',
    ]
    if manifest.get("quick"):
        note = esc(manifest.get("quick_note") or QUICK_NOTE)
        parts.append(
            f'<p class="banner skip"><strong>Quick run:</strong> {note}. Every check is listed '
            "as not judged (skipped, quick).</p>"
        )
    failures = [o for o in outcomes if o.status in ("fail", "n/a")]
    if failures:
        items = "".join(
            f'<li><a href="#{anchor(o.check.artifact)}">{esc(o.check.id)}</a>: '
            f"{esc(o.note or 'outside tolerance')}</li>"
            for o in failures
        )
        parts.append(f'<div class="banner fail"><strong>{len(failures)} failed</strong><ul>{items}</ul></div>')
    tiles = []
    for kind, c in kind_counts(outcomes).items():  # how many were judged and passed, failed, or only shown
        judged = c["pass"] + c["fail"]
        detail = f"{c['pass']} of {judged} passed" if judged else "shown, not judged"
        if c["fail"]:
            detail += f", {c['fail']} failed"
        if c["skipped"] and judged:
            detail += f", {c['skipped']} not judged"
        tiles.append(
            f'<div class="tile {"fail" if c["fail"] else "pass" if judged else "skip"}">'
            f'<span class="n">{judged if judged else c["skipped"]}</span>'
            f'<span class="k">{esc(TILE_LABELS[kind])}</span><span class="d">{esc(detail)}</span></div>'
        )
    if tiles:
        parts.append('<div class="tiles">' + "".join(tiles) + "</div>")
    if summary:
        parts.append(f'<p class="line">Checks against the texts: {esc(summary)}.</p>')
    if coverage_line:
        parts.append(f'<p class="line">{esc(coverage_line[:1].upper() + coverage_line[1:])}.</p>')
    parts.append('<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{val}</dd>" for k, val in facts) + "</dl>")
    parts.append("</section>")
    return "\n".join(parts)


def _facts(manifest: dict, sections: Sequence[Section], links: Sequence[str]) -> list[tuple[str, str]]:
    """The run's facts (escaped HTML): command, time, cache, machine, numerics, versions, files."""
    machine, numerics = manifest.get("machine") or {}, manifest.get("numerics") or {}
    cached = [f"{s.name}: {s.cached[0]} of {s.cached[1]} runs" for s in sections if s.cached]
    facts = {
        "took": f"{(manifest.get('timing') or {}).get('seconds', manifest.get('seconds', 0)):.1f} s",
        "from cache": "; ".join(cached) if cached else None,
        "machine": ", ".join(str(machine[k]) for k in ("cpu", "cores", "platform", "gpu") if machine.get(k))
        if machine
        else None,
        "device, seed": f"{manifest.get('device', '')}, {manifest.get('seed', '')}",
        "numerics": f"{numerics.get('mode')} ({numerics.get('isa')} CPU kernels)" if numerics else None,
        "GPU": cuda_summary(numerics["cuda"]) if numerics.get("cuda") else None,
        "versions": ", ".join(f"{k} {val}" for k, val in manifest.get("versions", {}).items()),
        **{f"{name} engine": engine for name, engine in (manifest.get("engines") or {}).items()},
    }
    command = [("command", f"<code>{esc(manifest.get('command', ''))}</code>")]
    files = [("files", _links(links))] if links else []
    return command + [(k, esc(v)) for k, v in facts.items() if v is not None] + files


def _artifact(a: Artifact, section: Section | None, manifest: dict, outcomes: list, shown_tables: set[str]) -> str:
    files = ((manifest.get("artifacts") or {}).get(a.id) or {}).get("files") or []
    new = ' <span class="new">new</span>' if a.new else ""
    took = "" if section is None else " · " + esc(f"{section.seconds:.1f} s")
    parts = [
        f'<section class="artifact" id="{anchor(a.id)}"><h2><span class="aid">{esc(a.id)}</span> '
        f"{esc(a.title)}{new}</h2>"
        f'<p class="meta">{esc(a.source)} {esc(a.section)} · <code>attn {esc(a.command)}</code>{took}</p>'
    ]
    if section is not None and section.error:
        parts.append(f'<p class="banner fail"><strong>Failed:</strong> {esc(section.error)}</p>')
    elif section is not None:
        parts += _tables_and_figures(a, section, files, shown_tables)
    if outcomes and manifest.get("quick"):
        folded = f"{len(outcomes)} published values (not judged in a quick run)"
        parts.append(f"<details><summary>{folded}</summary>{checks_html(outcomes)}</details>")
    elif outcomes:
        parts.append(checks_html(outcomes))
    data = _data_files(section, files)
    if data:
        parts.append(f'<p class="data">Data: {_links(data)}</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _data_files(section: Section | None, files: Sequence[str]) -> list[str]:
    """The artifact's files that are not figures, then its run's CSV and JSON beside its figures."""
    data = [f for f in files if not f.endswith(FIGURE_SUFFIXES)]
    stems = {f.rsplit(".", 1)[0] for f in files}
    if section is not None:
        beside = [f for f in section.data if f.rsplit(".", 1)[-1] in ("csv", "json") and f.rsplit(".", 1)[0] in stems]
        data += [f for f in beside if f not in data]
    return data


def _tables_and_figures(a: Artifact, section: Section, files: Sequence[str], shown_tables: set[str]) -> list[str]:
    """The run's tables once (a later artifact of the run links to them), this artifact's figures once each."""
    parts = []
    if section.name in shown_tables:
        first = next(i for i in section.ids if i != a.id)
        parts.append(
            f'<p class="note">Tables: with <a href="#{anchor(first)}">{esc(first)}</a> '
            "(one run of the same command).</p>"
        )
    elif section.tables:
        shown_tables.add(section.name)
        parts.append(to_html(section.tables))
    for shown, others in figure_views([f for f in section.figures if f in files], ("svg", "png")):  # SVG first
        image = f'<a href="{esc(shown)}"><img src="{esc(shown)}" alt="{esc(a.title)}"></a>' if shown else ""
        links = _links(([shown] if shown else []) + others, " · ")
        parts.append(f"<figure>{image}<figcaption>{links}</figcaption></figure>")
    return parts
