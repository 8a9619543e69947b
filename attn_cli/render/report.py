"""What ``attn list``, ``attn verify`` and ``attn diff`` print, and ``attn all``'s Markdown: ``index.md``
and each experiment's page, figures linked relatively (a figure in several formats shown once)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from os.path import commonprefix
from typing import TYPE_CHECKING, Any

from attn_cli.core.numerics import cuda_summary
from attn_cli.published.types import fmt_value
from attn_cli.records import Diff, Row, Section, regenerated
from attn_cli.render.table import Block, Cell, Column, Table, md_escape, styled, to_markdown

if TYPE_CHECKING:
    from attn_cli.experiment_registry import Registry
    from attn_cli.published.compare import Outcome
    from attn_cli.published.types import Artifact

STATUS_STYLE = {"pass": "green", "fail": "bold red", "skipped": "yellow", "n/a": "bold red"}
VERDICT_CLASS = {"pass": "pass", "fail": "fail", "n/a": "fail", "skipped": "skip"}  # n/a fails verify
SOURCES = 'W9 = "Deep Learning, Week 9: embeddings and attention"; D2L = "10.3 Multi-Head and Cross-Attention".'
KIND_LEGEND = (
    "status: pass = a measured value within tolerance; rule = a qualitative claim that holds; "
    "identity = true by construction or arithmetic, shown and not counted"
)
QUICK_NOTE = "reduced sizes, nothing judged"  # a quick run's note where the manifest has none
TERSE = {"box": "SIMPLE_HEAD", "padding": (0, 1), "pad_edge": False}  # the check tables' rich layout


def status_text(outcome: Outcome) -> str:
    """pass, rule or identity (each passed), FAIL, n/a (settings not the text's) or skipped."""
    if outcome.status == "pass":
        return {"measured": "pass", "rule": "rule", "identity": "identity"}[outcome.kind]
    return {"fail": "FAIL", "n/a": "n/a"}.get(outcome.status, outcome.status)


def catalogue_rows(artifacts: Iterable[Artifact], registry: Registry) -> list[dict]:
    return [
        {
            "id": a.id,
            "source": a.source,
            "section": a.section,
            "title": a.title,
            "subcommand": a.command,
            "files": list(a.files),
            "new": a.new,
            "experiment": exp.name if (exp := registry.experiment_of(a.id)) else None,
            "checks": len(registry.checks_of(a.id)),
        }
        for a in artifacts
    ]


def catalogue_table(rows: list[dict], width: int = 200) -> Table:
    """The catalogue; below 130 columns the title and files go under the ID (one row each)."""
    wide = width >= 130
    table = Table(title="Every table and figure of the two texts", terminal={"show_lines": not wide})
    table.add_column("ID", no_wrap=wide, ratio=None if wide else 1, overflow="fold")
    wide_columns = {"source": False, "section": False, "title": False, "subcommand": True, "files it writes": False}
    for header, no_wrap in (wide_columns if wide else {"section": True, "attn ...": True}).items():
        table.add_column(header, no_wrap=no_wrap)
    table.add_column("checks", justify="right")
    for r in rows:
        title = r["title"] + (" (new)" if r["new"] else "")
        if r["experiment"] is None:
            title += " [no experiment]"
        if wide:
            files = "\n".join(r["files"]) or "(table only)"
            cells = [r["id"], r["source"], r["section"], title, f"attn {r['subcommand']}", files]
        else:
            files_below = [("\n-> " + ", ".join(r["files"]), "dim")] if r["files"] else []
            id_cell = styled((r["id"], "bold"), "\n" + title, *files_below)
            cells = [id_cell, f"{r['source']} {r['section']}", r["subcommand"]]
        table.add_row(*cells, str(r["checks"]))
    return table


def _grouped(table: Table, rows: Iterable[tuple[str, str, list[Cell]]]) -> None:
    """``(check ID, artifact, cells)`` rows by the ID's last part, under a bold heading of the rest."""
    group = None
    for cid, artifact, cells in rows:
        head, name = split_id(cid, artifact)
        if head != group:
            table.add_row(styled((head, "bold")), *[""] * len(cells))
            group = head
        table.add_row("  " + name, *cells)


def verify_table(outcomes: Sequence, title: str = "Regenerated against published", width: int = 200) -> Table:
    """One line per check; each rule's reason and each failure or skip in the caption. Below 120
    columns the checks sit under a heading (their ID but its last part; a long one folds), so no number is cut."""
    wide = width >= 120
    headers = ("published" if wide else "text", "regenerated", "rule", "margin")
    columns = [Column("ID", no_wrap=wide, overflow="fold"), *(Column(h, "right", no_wrap=True) for h in headers)]
    columns.append(Column("status", no_wrap=not wide))
    table = Table(title=title, columns=columns, terminal=TERSE | {"padding": (0, 1 if wide else 0)})
    reasons: dict[str, int] = {}  # reason -> footnote number
    rows = ((o.check.id, o.check.artifact, _check_cells(o, wide, reasons)) for o in outcomes)
    if wide:
        for cid, _, cells in rows:
            table.add_row(cid, *cells)
    else:
        _grouped(table, rows)
    caption: list = [(KIND_LEGEND + "\n", "dim")] if any(o.status == "pass" for o in outcomes) else []
    caption += [(f"[{number}] {reason}\n", "dim") for reason, number in reasons.items()]
    skips = dict.fromkeys(o.note for o in outcomes if o.status == "skipped")
    caption += [(f"{note}: the value is shown, not judged against the text\n", "yellow") for note in skips]
    for o in outcomes:
        if o.status in ("fail", "n/a"):
            caption += [("FAIL ", "bold red"), (f"{o.check.id}: {o.note}\n", "")]
    if caption:
        table.caption = styled(*caption[:-1], (caption[-1][0].rstrip(), caption[-1][1]))
    return table


def _check_cells(o: Outcome, wide: bool, reasons: dict[str, int]) -> list[Cell]:
    status = (o.note if wide else "skipped") if o.status == "skipped" else status_text(o)
    rule = o.check.tolerance_text()
    if o.check.test == "seeds" and o.status in ("pass", "fail") and hasattr(o.regenerated, "interval"):
        iv = o.regenerated.interval()  # a value judged over seeds: its interval, mean ± half-width
        rule = f"{iv.mean:.3f} ± {iv.half_width:.3f}"
    if o.check.reason:
        rule += f" [{reasons.setdefault(o.check.reason, len(reasons) + 1)}]"
    limit = 16 if wide else 10
    verdict, style = ("", "dim") if status == "identity" else (VERDICT_CLASS[o.status], STATUS_STYLE[o.status])
    cells = [_short(o.check.published, limit), _short(_first(o.regenerated), limit), rule, _margin_text(o)]
    return [*cells, styled((status, style), verdict=verdict)]


def _margin_text(o: Outcome) -> str:
    margin = o.margin()
    return "" if margin is None else f"{margin['margin']:.3f}"


def split_id(cid: str, artifact: str) -> tuple[str, str]:
    """(heading, name): the ID's last part after its artifact, under the rest of it."""
    if not cid.startswith(artifact + "."):
        return artifact, cid
    parts = re.split(r"\.(?!\d)|(?<!\d)\.", cid[len(artifact) + 1 :])  # "0.5" is one part
    return ".".join([artifact, *parts[:-1]]), parts[-1]


def _first(value: Any) -> Any:
    """A value judged over seeds as its first seed's value (the interval goes to the rule)."""
    return value.value if hasattr(value, "interval") and hasattr(value, "value") else value


def _short(value: Any, limit: int = 16) -> str:
    """A number or a short word in full, a longer list or text by its size."""
    text = fmt_value(value, 1000)
    if len(text) <= limit or isinstance(value, (int, float)):
        return text
    if isinstance(value, (list, tuple)):
        return f"{_shape(value)} values" if len(_shape(value)) + 7 <= limit else f"{_shape(value)}"
    return f"{len(text)} chars"


def _shape(value: Any) -> str:
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        return f"{len(value)}×{_shape(value[0])}"
    return str(len(value)) if isinstance(value, (list, tuple)) else "1"


def tightest(outcomes: Sequence, n: int = 5) -> Table:
    """The ``n`` judged checks with the smallest margin: the ones nearest to failing."""
    margins = [(o, o.margin()) for o in outcomes]
    judged = sorted(((o, m) for o, m in margins if m is not None), key=lambda pair: pair[1]["margin"])[:n]
    table = Table(title=f"the {n} tightest checks (margin: 1 exact, 0 at the edge, below 0 failing)", terminal=TERSE)
    table.add_column("ID", no_wrap=True)
    for header in ("regenerated", "published", "margin"):
        table.add_column(header, justify="right", no_wrap=True)
    for o, m in judged:
        table.add_row(o.check.id, _short(_first(o.regenerated)), _short(o.check.published), f"{m['margin']:.3f}")
    return table


def diff_blocks(d: Diff, everything: bool = False) -> list[Block]:
    """``attn diff``: the header's differences, then a table of the checks that changed (or all)."""
    out: list[Block] = [f"{name}: {before} -> {after}" for name, before, after in d.header]
    out += d.notes
    rows = d.rows if everything else d.changed
    if rows:
        title = "checks that changed" if not everything else "every check on both sides"
        headers = ("id", "before", "after", "delta", "verdicts", "margins")
        columns = [Column(h, "left" if h in ("id", "verdicts") else "right", no_wrap=True) for h in headers]
        table = Table(title=title, columns=columns, terminal=TERSE | {"padding": (0, 0)})
        _grouped(table, ((r.id, (r.after or r.before or {}).get("artifact", ""), _diff_cells(r)) for r in rows))
        out.append(table)
    for word, records in (("new", d.new), ("removed", d.removed)):
        if records:
            out.append(f"{word}: " + ", ".join(c["id"] for c in records))
    out.append(styled((d.summary, "bold red" if d.exit_code else "bold")))
    return out


def _diff_cells(r: Row) -> list[Cell]:
    def value(c: dict | None) -> str:  # to 7 significant digits: a moved value differs in its last ones
        v = regenerated(c)
        text = f"{v:.7g}" if isinstance(v, float) else fmt_value(v, 1000)
        return text if isinstance(v, float) or len(text) <= 14 else f"{len(text)} chars"

    def status(c: dict | None) -> tuple[str, str]:
        s = "—" if c is None else c["status"]
        return s, STATUS_STYLE.get(s, "")

    def margin(c: dict | None) -> str:
        m = None if c is None else c.get("margin")
        return "—" if m is None else f"{m:.3f}"

    delta = "" if (d := r.delta()) is None else f"{d:+.2g}"
    verdicts = styled(status(r.before), "→", status(r.after), verdict="fail" if r.now_failing else "")
    return [value(r.before), value(r.after), delta, verdicts, f"{margin(r.before)}→{margin(r.after)}"]


def checks_markdown(outcomes: Sequence) -> str:
    lines = ["| ID | published | regenerated | tolerance | margin | status |", "| --- | --- | --- | --- | ---: | --- |"]
    for o in outcomes:
        status = {"pass": status_text(o), "fail": "**FAIL**", "n/a": "**n/a**"}.get(o.status, md_escape(o.note or ""))
        if o.status in ("fail", "n/a") and o.note:
            status += f" ({md_escape(o.note)})"
        cells = (o.check.id, fmt_value(o.check.published, 80), fmt_value(o.regenerated, 80), o.check.tolerance_text())
        lines.append("| " + " | ".join([*map(md_escape, cells), md_escape(_margin_text(o)), status]) + " |")
    return "\n".join(lines)


def figure_views(figures: Sequence[str], prefer: Sequence[str] = ("png", "svg")) -> list[tuple[str | None, list[str]]]:
    """``(shown, other formats)`` per figure, in the order written: ``shown`` is the first of
    ``prefer`` present (else None), the other formats are linked beside it (a PDF cannot be shown)."""
    stems: dict[str, list[str]] = {}
    for f in figures:
        stems.setdefault(f.rpartition(".")[0] or f, []).append(f)
    views = []
    for files in stems.values():
        by_suffix = {f.rpartition(".")[2].lower(): f for f in files}
        shown = next((by_suffix[p] for p in prefer if p in by_suffix), None)
        views.append((shown, [f for f in files if f != shown]))
    return views


def figure_markdown(figures: Sequence[str]) -> list[str]:
    """Markdown for figures: each once as an image (PNG preferred), its other formats linked."""
    return [
        "\n\n".join(([f"![{shown}]({shown})"] if shown else []) + ([f"Also: {_md_links(others)}."] if others else []))
        for shown, others in figure_views(figures)
    ]


def _pieces(section: Section) -> list[str]:
    tables = to_markdown(section.tables)
    return ([tables] if tables else []) + figure_markdown(section.figures)


def experiment_markdown(section: Section) -> str:
    """``<name>.md``: the experiment's tables and figures."""
    return "\n\n".join([f"# attn {section.command}: {', '.join(section.ids)}", *_pieces(section)]) + "\n"


def index_markdown(
    *, catalogue: Sequence, sections: Sequence[Section], manifest: dict, summary: str | None, coverage_line: str | None
) -> str:
    """``index.md``, paragraph by paragraph: an overview, the catalogue with each ID's files, then
    one section per experiment with its tables, figures and checks."""
    v, numerics, quick = manifest["versions"], manifest.get("numerics") or {}, manifest.get("quick")
    where = f"device {manifest['device']}, seed {manifest['seed']}"
    if numerics:
        where += f", numerics {numerics['mode']} with {numerics['isa']} kernels"
    paragraphs = [
        "# attn: every table and figure of the two texts",
        SOURCES,
        f"Generated by `{manifest['command']}` in {manifest['timing']['seconds']:.1f} s with attn {v['attn']}, "
        f"torch {v['torch']}, Python {v['python']}, NumPy {v['numpy']} ({where})."
        + (f" GPU: {cuda_summary(numerics['cuda'])}." if "cuda" in numerics else ""),
    ]
    paragraphs += [f"`{name}` engines: {engines}." for name, engines in manifest.get("engines", {}).items()]
    if quick:
        note = manifest.get("quick_note") or QUICK_NOTE
        paragraphs.append(f"> **Quick run**: {note}. Every check below is listed as not judged (skipped, quick).")
    if summary:
        paragraphs.append(f"**Checks against the texts: {summary}.**")
    if coverage_line:
        paragraphs.append(coverage_line + ".")
    paragraphs.append(_catalogue_rows(catalogue, manifest["artifacts"]))
    lead = "Published values, not judged (quick run):" if quick else "Checks against the published values:"
    for s in sections:
        where = _where(s.artifacts)
        paragraphs += [
            f"## `attn {s.command}`{f' ({where})' if where else ''}: {', '.join(s.ids)}",
            f"{s.seconds:.1f} s. Data: {_md_links(s.data)}.",
        ]
        if s.error:
            paragraphs.append(f"**Failed:** {md_escape(s.error, cell=False)}")
            continue
        paragraphs += _pieces(s)
        if s.outcomes:
            paragraphs += [lead, checks_markdown(s.outcomes)]
    return "\n\n".join(paragraphs) + "\n"


def _catalogue_rows(catalogue: Sequence, entries: dict) -> str:
    """The catalogue as a pipe table: each ID's command and files (links)."""
    lines = ["| ID | source | section | title | command | files |", "| --- | --- | --- | --- | --- | --- |"]
    for a in catalogue:
        entry = entries.get(a.id)
        title = a.title if entry else f"{a.title}: **not regenerated** (no experiment module)"
        links = _md_links(entry["files"]) if entry else ""
        if entry and entry.get("not_written"):
            links += " (not written: " + ", ".join(entry["not_written"]) + ")"
        cell = f" {links} " if entry else " "  # no experiment: an empty cell
        lines.append(f"| {a.id} | {a.source} | {a.section} | {title} | `attn {a.command}` |{cell}|")
    lines += [
        f"| {aid} | | | (not in the catalogue) | `attn {entry['command']}` | {_md_links(entry['files'])} |"
        for aid, entry in entries.items()
        if entry.get("catalogued") is False
    ]
    return "\n".join(lines)


def _md_links(names: Sequence[str]) -> str:
    return ", ".join(f"[{f}]({f})" for f in names)


def _where(artifacts: Sequence) -> str:
    """``W9 5.1; D2L 10.3.2.3, 10.3.2``; over three sections of a source by their common part (``D2L 10.3.5``)."""
    by_source: dict[str, dict[str, None]] = {}  # source -> its sections, in order
    for a in artifacts:
        by_source.setdefault(a.source, {})[a.section] = None
    parts = []
    for source, sections in by_source.items():
        common = commonprefix([sec.split() for sec in sections]) if len(sections) > 3 else []
        parts.append(f"{source} {' '.join(common) if common else ', '.join(sections)}")
    return "; ".join(parts)
