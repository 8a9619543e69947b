"""A figure written in several formats, in a report: shown once (PNG, else SVG), its other
formats linked; and an experiment's own Markdown page (its tables and figures)."""

from __future__ import annotations

from collections.abc import Sequence

from attn_cli.render.manifest import Section


def figure_views(figures: Sequence[str], prefer: Sequence[str] = ("png", "svg")) -> list[tuple[str | None, list[str]]]:
    """One figure written in several formats, shown once: ``(shown, other formats)`` per figure,
    in the order written; ``shown`` is the first of ``prefer`` present (else the first file),
    ``other formats`` are linked beside it (a PDF cannot be shown inline)."""
    stems: dict[str, list[str]] = {}
    for f in figures:
        stem, _, _ = f.rpartition(".")
        stems.setdefault(stem or f, []).append(f)
    views = []
    for files in stems.values():
        by_suffix = {f.rpartition(".")[2].lower(): f for f in files}
        shown = next((by_suffix[p] for p in prefer if p in by_suffix), None)
        views.append((shown, [f for f in files if f != shown]))
    return views


def figure_markdown(figures: Sequence[str]) -> list[str]:
    """Markdown for figures: each once as an image (PNG preferred), its other formats linked."""
    blocks = []
    for shown, others in figure_views(figures):
        text = f"![{shown}]({shown})" if shown else ""
        if others:
            text += ("\n\n" if text else "") + "Also: " + ", ".join(f"[{f}]({f})" for f in others) + "."
        blocks.append(text)
    return blocks


def experiment_markdown(section: Section) -> str:
    """``<name>.md``: the experiment's tables and figures."""
    lines = [f"# attn {section.command}: {', '.join(section.ids)}", ""]
    if section.markdown:
        lines += [section.markdown, ""]
    for fig in figure_markdown(section.figures):
        lines += [fig, ""]
    return "\n".join(lines)
