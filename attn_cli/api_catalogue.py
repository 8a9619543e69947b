"""The Python API of ``attn verify``, ``attn all`` and ``attn list``: their options read by the commands
themselves, their results returned as values (:class:`Verification`, :class:`Report`, :class:`Entry`)."""

from __future__ import annotations

import contextlib
import html
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attn_cli.api import _call, _context, _json_data
from attn_cli.render.html import outcomes_html

if TYPE_CHECKING:
    from attn_cli.cli.options import Common


@dataclass
class Verification:
    """``attn verify``: every selected check with its verdict, the summary and the coverage."""

    outcomes: list  # attn_cli.Outcome, in the checks' order
    summary: str  # "85 measured and 10 rules passed; 33 identities shown"
    coverage: str  # "coverage: 27/27 catalogue IDs checked"
    experiments: dict[str, float] = field(default_factory=dict)  # name -> seconds
    errors: dict[str, str] = field(default_factory=dict)  # name -> why it failed
    header: dict = field(default_factory=dict)  # versions, machine, numerics, seeds, date

    def __repr__(self) -> str:
        return f"<Verification: {self.summary}; {self.coverage}>"

    @property
    def ok(self) -> bool:
        """No check failed: ``attn verify`` exits 0."""
        return not any(o.status == "fail" for o in self.outcomes)

    def to_dict(self) -> dict:
        """What ``attn verify --json`` prints: the header and every check's record."""
        from attn_cli import records

        return _json_data(records.record(self.outcomes, self.header))

    def _repr_html_(self) -> str:
        head = f"<p><b>{html.escape(self.summary)}</b><br/>{html.escape(self.coverage)}</p>"
        return head + outcomes_html(self.outcomes)


def verify(*only: str, **options: Any) -> Verification:
    """``attn verify [--only ID...]``: regenerate the selected published values and judge them.

    ``options``: those of ``attn verify`` (``quick``, ``seed``, ``device``, ``no_cache``, ``cache_dir``,
    ``numerics``), read and run as the command does, without the progress display; writes no file.
    """
    from attn_cli import regenerate
    from attn_cli.errors import ConfigError

    if options.pop("out", None) is not None:
        raise ConfigError("verify() writes no file; regenerate_all(out) writes the report")
    with _read("verify", None, only, options) as (_, only, keywords):
        checked = regenerate.verify(only, **keywords)
    return Verification(
        outcomes=checked.outcomes,
        summary=checked.summary,
        coverage=checked.coverage.line(),
        experiments={r.name: r.seconds for r in checked.runs},
        errors={r.name: r.error for r in checked.runs if r.error},
        header=checked.header,
    )


@contextlib.contextmanager
def _read(
    command: str, out: str | Path | None, only: Iterable[str], options: dict
) -> Iterator[tuple[Common, Any, dict[str, Any]]]:
    """The command's own reading of these options (same checks, same errors): its Common, its ``--only``
    and the keywords of :mod:`attn_cli.regenerate`'s functions (no progress display), for a block run
    as one :func:`_call`, whose unknown ID or seed out of range is the CLI's usage error."""
    from attn_cli.cli.commands.catalogue import library_keywords, usage_errors
    from attn_cli.cli.options import common_of

    with _call(out) as folder:
        with _context(command, (), {"only": list(only) or None, **options}, folder) as ctx:
            params = dict(ctx.params)
            common = common_of(params)  # as the command builds it
        keywords = {**library_keywords(common, params["n_seeds"], params["no_cache"]), "progress": None}
        with usage_errors():
            yield common, params["only"], keywords


@dataclass
class Report:
    """``attn all``: the folder it wrote, its manifest and whether it succeeded."""

    out: Path
    manifest: dict = field(repr=False)  # manifest.json: catalogue ID -> files, configs, versions, checks
    ok: bool  # attn all exits 0: no experiment failed and no check failed
    notes: str = field(repr=False, default="")  # its warnings, one a line: files not written, --quick, failures

    @property
    def index(self) -> Path:
        """The report page (index.html)."""
        return self.out / "index.html"

    def _repr_html_(self) -> str:
        checks = self.manifest.get("checks") or "not judged (quick)"
        return (
            f"<p>attn all: <code>{html.escape(str(self.out))}</code>, "
            f"{len(self.manifest.get('artifacts', {}))} catalogue IDs; checks: {html.escape(str(checks))}; "
            f"{'ok' if self.ok else 'FAILED'}</p>"
        )


def regenerate_all(out: str | Path, *only: str, **options: Any) -> Report:
    """``attn all --out OUT [--only ID...]``: every table, figure and the report, written into ``out``.

    ``options``: those of ``attn all`` (``quick``, ``seed``, ``device``, ``no_cache``, ``cache_dir``,
    ``format``, ``numerics``), read and run as the command does (same files); returns its manifest.
    """
    from attn_cli import regenerate

    with _read("all", out, only, options) as (common, only, keywords):
        done = regenerate.regenerate_all(out, only, formats=common.formats, **keywords)
    failed = [f"{s.name} failed: {s.error}" for s in done.errors]
    notes = "\n".join([*done.not_written, *([done.quick_line] if done.quick_line else []), *failed])
    return Report(out=Path(out), manifest=_json_data(done.manifest), ok=done.exit_code == 0, notes=notes)


@dataclass(frozen=True)
class Entry:
    """One table or figure of the catalogue, as ``attn list`` shows it."""

    id: str  # "w9-sqrt-dk"
    source: str  # "W9" or "D2L"
    section: str  # "3.3"
    title: str
    subcommand: str  # the command that regenerates it: attn_cli.run(subcommand, ...)
    files: tuple[str, ...]  # what it writes into --out
    new: bool  # a figure the texts do not draw
    experiment: str | None  # the module of attn_cli.experiments that computes it
    checks: int  # published values attn verify checks for it

    def to_dict(self) -> dict:
        """One item of ``attn list --json``."""
        return {**asdict(self), "files": list(self.files)}


def artifacts() -> list[Entry]:
    """The catalogue (``attn list``), in its order."""
    from attn_cli import experiment_registry
    from attn_cli.render import report

    registry = experiment_registry.Registry.load()
    return [
        Entry(**{**row, "files": tuple(row["files"])})
        for row in report.catalogue_rows(registry.artifacts.values(), registry)
    ]
