"""The files of ``attn all``: one :class:`Section` per experiment run, then the index; and the JUnit XML."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.errors import WriteFailed
from attn_cli.render import files, html
from attn_cli.render.junit import check_seconds, junit_xml
from attn_cli.render.manifest import FIGURE_SUFFIXES, Section
from attn_cli.render.report import experiment_markdown, index_markdown
from attn_cli.render.table import to_markdown

if TYPE_CHECKING:
    from attn_cli.experiment_registry import Registry
    from attn_cli.pipeline import Run
    from attn_cli.published.compare import Outcome
    from attn_cli.published.types import Artifact


def write_section(
    run: Run, registry: Registry, out: Path, formats: Sequence[str], command: str, outcomes: Sequence[Outcome] = ()
) -> Section:
    """Write one run's ``<name>.json``, ``<name>.md`` and figures; its report section.
    ``outcomes``: its checks' outcomes, the verdicts its tables mark."""
    exp = run.experiment
    section = Section(
        name=exp.name,
        command=command,
        ids=list(exp.artifacts),
        artifacts=[registry.artifacts[a] for a in registry.artifacts if a in exp.artifacts],
        seconds=run.seconds,
        error=run.error,
        config=exp.recorded_config(run.config),
        outcomes=[o for o in outcomes if o.check.artifact in exp.artifacts],
    )
    if run.error:
        return section
    by_id = {o.check.id: o for o in outcomes}
    try:
        t0 = time.perf_counter()
        section.tables = exp.tables(run.result, by_id)
        section.markdown = to_markdown(section.tables)
        section.cached = run.result.cached_runs() if hasattr(run.result, "cached_runs") else None  # the copy task
        files.write_json(out / f"{exp.name}.json", files.result_json(run.result, by_id))
        written = [_relative(p, out) for p in exp.figures(run.result, out, formats, by_id)]
        section.figures = [f for f in written if f.lower().endswith(FIGURE_SUFFIXES)]
        section.data = [f"{exp.name}.md", f"{exp.name}.json"] + [f for f in written if f not in section.figures]
        section.data += [f for f in _beside(out, section.figures) if f not in section.data]
        files.write_text(out / f"{exp.name}.md", experiment_markdown(section))
        section.seconds += time.perf_counter() - t0
    except WriteFailed:  # disk full or read-only: stop here; files written so far are complete
        raise
    except Exception as exc:
        section.error = f"rendering failed: {type(exc).__name__}: {exc}"
    return section


def write_index(out: Path, manifest: dict, shown: list, sections: list, outcomes: list) -> list[Path]:
    """``manifest.json``, ``index.md`` and ``index.html`` written into ``out``; their paths."""
    both: dict[str, Any] = dict(catalogue=shown, sections=sections, manifest=manifest)  # what both pages show
    both.update(summary=manifest["checks"], coverage_line=manifest["coverage"])  # the summary and coverage lines
    files.write_json(out / "manifest.json", manifest)
    files.write_text(out / "index.md", index_markdown(**both))
    page = html.index_html(**both, outcomes=outcomes, links=("manifest.json", "index.md"))
    files.write_text(out / "index.html", page)
    return [out / "manifest.json", out / "index.md", out / "index.html"]


def catalogued(registry: Registry, artifact_ids: Iterable[str]) -> list[Artifact]:
    """The catalogue entries of these IDs (those the catalogue has), in the given order."""
    return [registry.artifacts[a] for a in artifact_ids if a in registry.artifacts]


def write_junit(path: Path, outcomes: Iterable[Outcome], runs: Sequence[Run], registry: Registry) -> Path:
    """The checks as JUnit XML (:mod:`attn_cli.render.junit`) at ``path``, written atomically."""
    checks = [o.as_json() for o in outcomes]
    files.write_text(Path(path), junit_xml(checks, registry.artifacts, check_seconds(runs, checks)))
    return Path(path)


def _relative(path: Path, out: Path) -> str:
    path = Path(path)
    try:
        return path.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        return str(path)


def _beside(out: Path, figures: list[str]) -> list[str]:
    """Raw-number files written beside each figure (same stem, another suffix)."""
    near = (Path(fig).with_suffix("").with_suffix(suffix) for fig in figures for suffix in (".csv", ".json"))
    return list(dict.fromkeys(p.as_posix() for p in near if (out / p).exists()))
