"""``index.html``: the report as one page people open in a browser.

Design notes: ``docs/design.md``, section ``attn_cli.render.html``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from attn_cli.render.manifest import FIGURE_SUFFIXES, Section
from attn_cli.render.table import esc, to_html

if TYPE_CHECKING:
    from attn_cli.published.compare import Outcome
    from attn_cli.published.types import Artifact

KINDS = ("measured", "rule", "identity")  # STYLE.md "Checks"
VERDICT_CLASS = {"pass": "pass", "fail": "fail", "skipped": "skip"}
IMAGE_PREFERENCE = ("svg", "png")  # the page shows SVG where written, else PNG


def kind_counts(outcomes: Sequence) -> dict[str, dict[str, int]]:
    """{kind: {"pass": n, "fail": n, "skipped": n}} for the kinds present, in KINDS order."""
    counts: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = counts.setdefault(o.check.kind, {"pass": 0, "fail": 0, "skipped": 0})
        status = "fail" if o.status == "n/a" else o.status  # a value that does not apply fails verify
        row[status] = row.get(status, 0) + 1
    return {k: counts[k] for k in KINDS if k in counts}


def anchor(artifact_id: str) -> str:
    return "id-" + re.sub(r"[^A-Za-z0-9_-]", "-", artifact_id)


def _margin_cell(o: Outcome) -> str:
    """The margin as a number and a small bar: full at 1 (exact), empty at 0 (the edge), red below."""
    m = o.margin()
    if m is None:
        return "<td></td>"
    value = m["margin"]
    assert value is not None  # a judged check's margin is a number (only needed_tolerance may be None)
    width = max(0.0, min(1.0, value)) * 100
    kind = "pass" if value >= 0 else "fail"
    return (
        f'<td class="num margin"><span class="bar {kind}" title="margin {value:.3f}">'
        f'<span style="width:{width:.0f}%"></span></span> {value:.2f}</td>'
    )


def checks_html(outcomes: Sequence) -> str:
    from attn_cli.render.report import fmt_value

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


# --------------------------------------------------------------------------- the page


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
    """The page. ``sections`` as for ``index_markdown`` (each may carry ``tables``, the
    experiment's table blocks, and ``cached``: (runs from cache, runs)); ``outcomes`` every
    check's outcome; ``manifest`` as ``manifest.json`` (``machine``, ``versions``, and where
    present ``numerics``: mode and CPU kernels); ``links``: files of the run linked at the top."""
    by_artifact: dict[str, list] = {}
    for o in outcomes:
        by_artifact.setdefault(o.check.artifact, []).append(o)
    section_of = {aid: s for s in sections for aid in s.ids}
    body = [
        _header(title, manifest, outcomes, summary, coverage_line, sections, links),
        _contents(catalogue, by_artifact, section_of),
    ]
    shown_tables: set[str] = set()  # sections whose tables are shown (with their first artifact)
    body += [_artifact(a, section_of.get(a.id), manifest, by_artifact.get(a.id, []), shown_tables) for a in catalogue]
    body.append(f"<footer>Written by <code>{esc(manifest.get('command', 'attn'))}</code>.</footer>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'self\'; '
        "style-src 'unsafe-inline'; img-src 'self'\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + "\n</main>\n</body>\n</html>\n"
    )


TILE_LABELS = {"measured": "measured values", "rule": "rules", "identity": "identities (shown, not evidence)"}


def _header(
    title: str,
    manifest: dict,
    outcomes: Sequence[Outcome],
    summary: str | None,
    coverage_line: str | None,
    sections: Sequence[Section],
    links: Sequence[str],
) -> str:
    parts = [
        f"<header><h1>{esc(title)}</h1>",
        '<p class="sub">W9 = "Deep Learning, Week 9: embeddings and attention"; D2L = "10.3 Multi-Head '
        'and Cross-Attention".</p></header>',
        '<section class="summary" aria-label="summary">',
    ]
    if manifest.get("quick"):
        note = manifest.get("quick_note") or "reduced sizes, nothing judged"
        parts.append(
            f'<p class="banner skip"><strong>Quick run:</strong> {esc(note)}. Every check is listed '
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
    tiles = [_tile(kind, c) for kind, c in kind_counts(outcomes).items()]
    if tiles:
        parts.append('<div class="tiles">' + "".join(tiles) + "</div>")
    if summary:
        parts.append(f'<p class="line">Checks against the texts: {esc(summary)}.</p>')
    if coverage_line:
        parts.append(f'<p class="line">{esc(coverage_line[:1].upper() + coverage_line[1:])}.</p>')
    facts = _facts(manifest, sections, links)
    parts.append('<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{val}</dd>" for k, val in facts) + "</dl>")
    parts.append("</section>")
    return "\n".join(parts)


def _tile(kind: str, c: dict) -> str:
    """One kind's counts: how many were judged and passed, failed, or only shown."""
    judged = c["pass"] + c["fail"]
    state = "fail" if c["fail"] else "pass" if judged else "skip"
    detail = f"{c['pass']} of {judged} passed" if judged else "shown, not judged"
    if c["fail"]:
        detail += f", {c['fail']} failed"
    if c["skipped"] and judged:
        detail += f", {c['skipped']} not judged"
    return (
        f'<div class="tile {state}"><span class="n">{judged if judged else c["skipped"]}</span>'
        f'<span class="k">{esc(TILE_LABELS[kind])}</span><span class="d">{esc(detail)}</span></div>'
    )


def _facts(manifest: dict, sections: Sequence[Section], links: Sequence[str]) -> list[tuple[str, str]]:
    """The run's facts (escaped HTML): command, time, cache, machine, numerics, versions, files."""
    facts = [
        ("command", f"<code>{esc(manifest.get('command', ''))}</code>"),
        ("took", esc(f"{(manifest.get('timing') or {}).get('seconds', manifest.get('seconds', 0)):.1f} s")),
    ]
    cached = [(s.name, s.cached) for s in sections if s.cached]
    if cached:
        facts.append(("from cache", "; ".join(esc(f"{name}: {c} of {n} runs") for name, (c, n) in cached)))
    machine = manifest.get("machine") or {}
    if machine:
        facts.append(
            ("machine", esc(", ".join(str(machine[k]) for k in ("cpu", "cores", "platform", "gpu") if machine.get(k))))
        )
    facts.append(("device, seed", esc(f"{manifest.get('device', '')}, {manifest.get('seed', '')}")))
    numerics = manifest.get("numerics") or {}
    if numerics:
        facts.append(("numerics", esc(f"{numerics.get('mode')} ({numerics.get('isa')} CPU kernels)")))
    if numerics.get("cuda"):
        from attn_cli.core.device import cuda_summary

        facts.append(("GPU", esc(cuda_summary(numerics["cuda"]))))
    facts.append(("versions", esc(", ".join(f"{k} {val}" for k, val in manifest.get("versions", {}).items()))))
    facts += [(f"{name} engine", esc(engine)) for name, engine in (manifest.get("engines") or {}).items()]
    if links:
        facts.append(("files", ", ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in links)))
    return facts


def _contents(
    catalogue: Sequence[Artifact], by_artifact: dict[str, list[Outcome]], section_of: dict[str, Section]
) -> str:
    items = []
    for a in catalogue:
        outs = by_artifact.get(a.id, [])
        state = (
            "fail"
            if any(o.status in ("fail", "n/a") for o in outs)
            else "pass"
            if any(o.status == "pass" for o in outs)
            else "skip"
            if outs
            else "none"
        )
        s = section_of.get(a.id)
        if s is not None and s.error:
            state = "fail"
        items.append(
            f'<li class="{state}"><a href="#{anchor(a.id)}"><span class="dot"></span>{esc(a.id)}</a>'
            f' <span class="where">{esc(a.source)} {esc(a.section)}</span></li>'
        )
    legend = (
        '<p class="legend"><span class="pass"><span class="dot"></span>passed</span> '
        '<span class="fail"><span class="dot"></span>failed</span> '
        '<span class="skip"><span class="dot"></span>shown, not judged</span> '
        '<span class="none"><span class="dot"></span>no published values</span></p>'
    )
    return f'<nav aria-label="contents"><h2>Contents</h2>{legend}<ol>{"".join(items)}</ol></nav>'


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
    if outcomes:
        parts.append(
            f"<details><summary>{len(outcomes)} published values (not judged in a quick run)"
            f"</summary>{checks_html(outcomes)}</details>"
            if manifest.get("quick")
            else checks_html(outcomes)
        )
    data = _data_files(section, files)
    if data:
        parts.append('<p class="data">Data: ' + ", ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in data) + "</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _data_files(section: Section | None, files: Sequence[str]) -> list[str]:
    """The artifact's files that are not figures, then its run's CSV and JSON that belong to it."""
    data = [f for f in files if not f.endswith(FIGURE_SUFFIXES)]
    if section is not None:
        data += [
            f for f in section.data if f not in data and f.rsplit(".", 1)[-1] in ("csv", "json") and _belongs(f, files)
        ]
    return data


def _tables_and_figures(a: Artifact, section: Section, files: Sequence[str], shown_tables: set[str]) -> list[str]:
    """The section's tables (once per run: a later artifact of the same run links to the first)
    and this artifact's own figures, each shown once with its other formats linked."""
    from attn_cli.render.figure_files import figure_views

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
    own = [f for f in section.figures if f in files]
    for shown, others in figure_views(own, IMAGE_PREFERENCE):
        image = f'<a href="{esc(shown)}"><img src="{esc(shown)}" alt="{esc(a.title)}"></a>' if shown else ""
        links = [shown] * bool(shown) + others
        parts.append(
            f"<figure>{image}<figcaption>"
            + " · ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in links)
            + "</figcaption></figure>"
        )
    return parts


def _belongs(name: str, files: Sequence[str]) -> bool:
    """A raw-number file written beside one of this artifact's figures (same stem)."""
    stem = name.rsplit(".", 1)[0]
    return any(f.rsplit(".", 1)[0] == stem for f in files)


CSS = """
:root{--fg:#1d2330;--muted:#5b6475;--line:#dde1e8;--bg:#f6f7f9;--card:#fff;--pass:#17803d;--pass-bg:#e6f4ea;
--fail:#b42318;--fail-bg:#fdecea;--skip:#8a6100;--skip-bg:#fff6dc;--accent:#2f5fb3}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:1.6rem;margin:0 0 4px}h2{font-size:1.15rem;margin:0 0 6px}
a{color:var(--accent)}code{font:0.9em ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
background:#eef1f5;padding:1px 4px;border-radius:4px}
.sub,.meta,.note,.where,.data,figcaption,footer{color:var(--muted)}
.summary,.artifact,nav{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;
margin:16px 0}
.tiles{display:flex;flex-wrap:wrap;gap:12px;margin:4px 0 12px}
.tile{flex:1 1 180px;border-radius:8px;padding:10px 14px;border:1px solid var(--line)}
.tile .n{display:block;font-size:1.8rem;font-weight:700;line-height:1.1}
.tile .k{display:block;font-weight:600}.tile .d{display:block;font-size:.85rem;color:var(--muted)}
.tile.pass{background:var(--pass-bg);border-color:#b7dfc3}.tile.pass .n{color:var(--pass)}
.tile.fail{background:var(--fail-bg);border-color:#f4b4ad}.tile.fail .n{color:var(--fail)}
.tile.skip{background:var(--skip-bg);border-color:#f0d68a}.tile.skip .n{color:var(--skip)}
.banner{border-radius:8px;padding:10px 14px;margin:8px 0}
.banner.fail{background:var(--fail-bg);border:1px solid #f4b4ad}
.banner.skip{background:var(--skip-bg);border:1px solid #f0d68a}
.banner ul{margin:6px 0 0;padding-left:20px}
.line{margin:6px 0}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:10px 0 0;font-size:.9rem}
.facts dt{color:var(--muted)}.facts dd{margin:0;overflow-wrap:anywhere}
nav ol{columns:3 220px;margin:0;padding-left:0;list-style:none}nav li{break-inside:avoid;padding:1px 0}
nav a{text-decoration:none}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:7px;background:#c3c8d1}
li.pass .dot,.legend .pass .dot{background:var(--pass)}li.fail .dot,.legend .fail .dot{background:var(--fail)}
li.skip .dot,.legend .skip .dot{background:#d9a521}.legend{font-size:.85rem;color:var(--muted);margin:0 0 8px}
.legend>span{margin-right:14px;white-space:nowrap}
.aid{font:600 .85em ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef1f5;border-radius:5px;
padding:2px 6px;margin-right:4px}
.new{font-size:.7rem;font-weight:600;text-transform:uppercase;background:#e8eefb;color:var(--accent);
border-radius:4px;padding:1px 5px;vertical-align:middle}
.scroll{overflow-x:auto;margin:10px 0}
table{border-collapse:collapse;font-size:.85rem;min-width:50%}
caption{text-align:left;font-weight:600;padding:0 0 4px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.pass,td.verdict.pass{color:var(--pass);font-weight:600}
td.fail,td.verdict.fail{color:var(--fail);font-weight:700}
td.skip,td.verdict.skip{color:var(--skip)}
span.pass{color:var(--pass)}span.fail{color:var(--fail)}span.skip{color:var(--skip)}span.dim{color:var(--muted)}
span.strong{font-weight:700}
.bar{display:inline-block;width:48px;height:8px;border:1px solid var(--line);border-radius:4px;vertical-align:middle;
background:#fff;overflow:hidden}.bar span{display:block;height:100%;background:var(--pass)}
.bar.fail{border-color:var(--fail);background:var(--fail-bg)}td.margin{white-space:nowrap}
tr.fail td{background:var(--fail-bg)}
td.id{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.8rem;white-space:nowrap}
figure{margin:12px 0}figure img{display:block;max-width:100%;height:auto;border:1px solid var(--line);
border-radius:6px;background:#fff}
figcaption{font-size:.85rem;margin-top:4px}
details summary{cursor:pointer;color:var(--muted);margin:8px 0}
pre{overflow-x:auto;background:#f0f2f5;padding:8px;border-radius:6px;font-size:.8rem}
@media (max-width:640px){main{padding:12px 8px}.summary,.artifact,nav{padding:12px;border-radius:8px}
h1{font-size:1.3rem}.tile{flex-basis:100%}.facts{grid-template-columns:1fr}.facts dt{margin-top:6px}
table{font-size:.8rem}}
@media print{body{background:#fff;font-size:11pt}main{max-width:none;padding:0}nav{display:none}
.summary,.artifact{border:none;padding:0;margin:0 0 14pt}.artifact{break-before:auto}
figure,table,.tile{break-inside:avoid}h2{break-after:avoid}figure img{max-height:16cm;border:none}
.scroll{overflow:visible}a{color:inherit;text-decoration:none}details>*{display:block}
.artifact a[href]:not([href^="#"])::after{content:" (" attr(href) ")";font-size:.8em;color:var(--muted)}
figure a[href]::after{content:none}}
"""
