"""The Python API: the CLI's commands as functions that return typed results.

    >>> import attn_cli
    >>> run = attn_cli.run("heads", quick=True)      # attn heads --quick
    >>> run.to_dict() == ...                          # what `attn heads --quick --json` prints

:func:`run` takes a command's name and its options (``--two-head-weights`` is
``two_head_weights``; arguments such as heatmap's words by position) and runs the click
command itself: its option types and callbacks are the one validation, so a bad value
raises :class:`attn_cli.ConfigError` with the message the CLI prints, and a failure at run
time raises :class:`attn_cli.errors.AttnError`.  The command returns its Job (the experiment
and its Config), which :func:`run` runs through the pipeline: the Result, the verdicts, the
tables and the Figures come back as values in a :class:`Run`, nothing is printed, and files
stay only when ``out=`` is given.  :func:`verify`, :func:`regenerate_all` and
:func:`artifacts` are ``attn verify``, ``attn all`` and ``attn list``.

Named ``api`` rather than ``pipeline``: this is the public face over the CLI's names; the
typed pipeline under it is :func:`attn_cli.pipeline.run` (run, compare once, write), whose
:class:`attn_cli.pipeline.Run` each :class:`Run` here carries.  Nothing heavy is imported until a
function is called (``import attn_cli`` stays instant).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import html
import io
import json
import os
import shlex
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

# what run() does not run: the catalogue commands have their own functions
NOT_A_RUN = {"all": "regenerate_all", "verify": "verify", "list": "artifacts", "cache": None}


# --------------------------------------------------------------------------- the command line


def _commands() -> dict[str, click.Command]:
    from attn_cli.cli import all_commands

    return all_commands()


def _command(name: str) -> click.Command:
    commands = _commands()
    if name not in commands:
        raise click.UsageError(f"No such command {name!r}; commands: {', '.join(sorted(commands))}.")
    return commands[name]


def command_line(command: str, *args: Any, **options: Any) -> list[str]:
    """The ``attn`` arguments that :func:`run` parses for these Python arguments.

    An option by its long name with underscores (``batch_size`` for ``--batch-size``) or by
    its parameter name (``formats``); a flag by a bool (``quick=True``); several values by a
    list (``lengths=[4, 8]``); None leaves the default.  A name the command lacks becomes
    ``--that-name``, which click refuses as the CLI does.

    >>> command_line("copy-task", lengths=[4, 8], steps=300, quick=True)
    ['--lengths', '4', '--lengths', '8', '--steps', '300', '--quick']
    >>> command_line("heatmap", "banana", "bandana", d_model=8)
    ['--d-model', '8', '--', 'banana', 'bandana']
    """
    cmd = _command(command)
    by_name: dict[str, click.Parameter] = {}
    for p in cmd.params:
        if isinstance(p, click.Option):
            for opt in (*p.opts, *getattr(p, "aliases", ())):  # a renamed flag's old name too
                if opt.startswith("--"):
                    by_name.setdefault(opt[2:].replace("-", "_"), p)
        by_name.setdefault(p.name, p)
    argv: list[str] = []
    named: dict[str, list] = {}  # arguments given by name, placed in the command's order
    for name, value in options.items():
        if value is None:  # the command's default
            continue
        param = by_name.get(name)
        if param is None:  # click says "No such option: --name", as on the command line
            argv += ["--" + name.replace("_", "-"), _token(value)]
            continue
        if isinstance(param, click.Argument):
            named[param.name] = list(value) if param.nargs != 1 and _many(value) else [value]
            continue
        flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        if param.is_flag:
            if click.BOOL.convert(value if isinstance(value, bool) else str(value), param, None):  # click's reading
                argv.append(flag)
        elif param.multiple:
            for v in (value if _many(value) else [value]):
                argv += [flag, _token(v)]
        else:
            argv += [flag, _token(value)]
    positional = [_token(v) for p in cmd.params if p.name in named and isinstance(p, click.Argument)
                  for v in named[p.name]] + [_token(a) for a in args]
    return argv + (["--", *positional] if positional else [])


def _many(value: Any) -> bool:
    return isinstance(value, (list, tuple, set, frozenset, range))


def _token(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)  # round-trips exactly
    return str(value)


@contextlib.contextmanager
def _out_folder(out):
    """``--out``: the caller's folder, or a private temporary one that nothing is written to."""
    if out is not None:
        yield str(out)
        return
    with tempfile.TemporaryDirectory(prefix="attn-api-") as tmp:
        yield tmp


# --------------------------------------------------------------------------- the caller's process


@contextlib.contextmanager
def _callers_state():
    """The API leaves the caller's process as it found it: ``os.environ`` (the numeric mode's
    pins are set while attn computes, then removed) and torch's intra-op thread count.  A
    worker process that is importing the caller's script (a script without an ``if __name__
    == "__main__":`` guard) leaves at once with :data:`MAIN_GUARD_EXIT`, silently: the command
    in the script's own process then raises one :class:`attn_cli.errors.ConfigError`."""
    import multiprocessing

    from attn_cli.experiments.copy_task.engines import MAIN_GUARD_EXIT

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        os._exit(MAIN_GUARD_EXIT)
    environ = dict(os.environ)
    threads = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
    try:
        yield
    finally:
        if "torch" in sys.modules:  # fix torch's kernels under this call's pins: a later call in
            from attn_cli.core import numerics  # another mode is then refused before any work

            numerics.effective_isa()
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        if threads is not None and sys.modules["torch"].get_num_threads() != threads:
            sys.modules["torch"].set_num_threads(threads)


@contextlib.contextmanager
def _config_errors():
    """What the command line refuses with exit 2 (a click usage error: one bad value, an unknown
    option, a cross-option check) raised as :class:`attn_cli.ConfigError`, whose message is
    what the CLI prints after ``Error:``: a notebook never sees click's exceptions or SystemExit."""
    from attn_cli.errors import BadConfig, ConfigError

    try:
        yield
    except click.UsageError as exc:
        raise ConfigError(exc.format_message()) from None
    except BadConfig as exc:
        raise ConfigError(str(exc)) from None
    except click.exceptions.Exit as exc:  # --help, --version: nothing to run
        raise ConfigError(f"nothing to run (exit {exc.exit_code})") from None


def _checked_text(values) -> None:
    """A string the command line would refuse as not UTF-8 is refused here with its message."""
    from attn_cli.cli import check_utf8_words

    check_utf8_words([str(v) for v in values])


# --------------------------------------------------------------------------- run


@dataclass
class Run:
    """One command's run: its typed Result, the checks with their verdicts, its tables and figures.

    ``to_dict()`` is what ``attn COMMAND --json`` prints; ``figures()`` the matplotlib
    Figures (nothing is written); in Jupyter the Run shows its tables, verdicts and figures.
    """

    command: str
    argv: list[str]  # the equivalent command line: attn COMMAND ARGV
    result: Any  # the experiment's Result (a dataclass of plain values): pipeline.result
    outcomes: list  # attn_cli.Outcome per check of the command's catalogue IDs: pipeline.outcomes
    tables: list = field(repr=False)  # rich renderables: the table the CLI prints
    files: list[Path] = field(repr=False)  # written into out= (empty without it)
    notes: list[str] = field(repr=False)  # what the CLI prints on stderr (no progress display here)
    seconds: float = field(repr=False)
    _json: Any = field(repr=False, default=None)
    _figures: list = field(repr=False, default_factory=list)
    pipeline: Any = field(repr=False, default=None)  # the attn_cli.pipeline.Run the command went through

    def __repr__(self) -> str:
        return f"<Run {self.command_line!r}: {len(self.outcomes)} checks, {len(self._figures)} figures>"

    @property
    def command_line(self) -> str:
        return shlex.join(["attn", self.command, *self.argv])

    @property
    def ok(self) -> bool:
        """No check failed (a skipped or not applicable one does not count as failed)."""
        return not any(o.status == "fail" for o in self.outcomes)

    @property
    def summary(self) -> str:
        """The verdicts per kind, as ``attn verify`` counts them."""
        from attn_cli.published.compare import summary

        return summary(self.outcomes)

    def to_dict(self) -> Any:
        """What ``attn COMMAND --json`` prints, as Python data (a fresh copy)."""
        return copy.deepcopy(self._json)

    def figures(self) -> dict[str, Any]:
        """The Figures, by the file name the CLI gives them (``heads_layout.png``)."""
        return dict(self._figures)

    def text(self, width: int = 100) -> str:
        """The tables as the CLI prints them (no colour)."""
        return _console_text(self.tables, width)

    def _repr_html_(self) -> str:
        parts = [f"<p><code>{html.escape(self.command_line)}</code></p>", _tables_html(self.tables)]
        if self.outcomes:
            parts.append(outcomes_html(self.outcomes))
        for name, fig in self._figures:
            parts.append(f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{_png64(fig)}'/>"
                         f"<figcaption>{html.escape(name)}</figcaption></figure>")
        return "\n".join(parts)


def run(command: str, *args: Any, out: str | Path | None = None, **options: Any) -> Run:
    """Run ``attn COMMAND`` with these options and return its :class:`Run`.

    ``out``: also write the figures and data files there, as the CLI does (default: nothing
    is written).  Raises :class:`attn_cli.ConfigError` (a ``ValueError``) for what the CLI
    refuses with exit 2, with the message it prints, and :class:`attn_cli.errors.AttnError`
    for a failure at run time (exit 1 on the command line).
    """
    from attn_cli import pipeline
    from attn_cli.cli.commands.execute import Job
    from attn_cli.errors import ConfigError

    if command in NOT_A_RUN:
        instead = NOT_A_RUN[command]
        raise ConfigError(f"attn {command} is not one run" + (f"; use attn_cli.{instead}()" if instead else ""))
    with _config_errors():
        cmd = _command(command)
        argv = command_line(command, *args, **options)
        _checked_text([command, *argv])  # numbered as on the command line: attn COMMAND ARGV
    started = time.perf_counter()
    figures: list = []
    with _callers_state(), _config_errors(), _out_folder(out) as folder:
        shown = [a for a in argv if a != "--json"]
        with cmd.make_context(f"attn {command}", [*shown[:_split(shown)], "--out", folder,
                                                  *shown[_split(shown):]]) as ctx:
            job = cmd.invoke(ctx)  # the command's options read and checked: its Job, not yet run
        if not isinstance(job, Job):
            raise ConfigError(f"attn {shlex.join([command, *argv])} runs no experiment")
        done = pipeline.run(job.exp, job.config, out=folder, formats=job.common.formats, cache_root=job.cache_root,
                            use_cache=job.use_cache, threads=job.threads, numerics=job.common.numerics, keep=figures)
    files = done.files if out is not None else []
    return Run(command=command, argv=argv + (["--out", str(out)] if out is not None else []), result=done.result,
               outcomes=list(done.outcomes.values()), tables=done.tables(), files=files,
               notes=[*done.notes, *(f"wrote {p}" for p in files)], seconds=time.perf_counter() - started,
               _json=_json_data(done.json()), _figures=figures, pipeline=done)


def _split(argv: list[str]) -> int:
    """Where the options end (before ``--`` and the positional arguments)."""
    return argv.index("--") if "--" in argv else len(argv)


def _json_data(obj: Any) -> Any:
    """What ``emit`` prints for --json, as data (the same encoder, then parsed back)."""
    from attn_cli.render.files import _json_default

    return json.loads(json.dumps(obj, default=_json_default))


# --------------------------------------------------------------------------- verify


@dataclass
class Verification:
    """``attn verify``: every selected check with its verdict, the summary and the coverage."""

    outcomes: list  # attn_cli.Outcome, in the checks' order
    summary: str  # "85 measured and 10 rules passed; 33 identities shown"
    coverage: str  # "coverage: 27/27 catalogue IDs checked"
    experiments: dict[str, float] = field(repr=False, default_factory=dict)  # name -> seconds
    errors: dict[str, str] = field(repr=False, default_factory=dict)  # name -> why it failed

    def __repr__(self) -> str:
        return f"<Verification: {self.summary}; {self.coverage}>"

    @property
    def ok(self) -> bool:
        """No check failed: ``attn verify`` exits 0."""
        return not any(o.status == "fail" for o in self.outcomes)

    def to_dict(self) -> list[dict]:
        """What ``attn verify --json`` prints."""
        from attn_cli.render.files import _json_default

        return json.loads(json.dumps([o.as_json() for o in self.outcomes], default=_json_default))

    def _repr_html_(self) -> str:
        return (f"<p><b>{html.escape(self.summary)}</b><br/>{html.escape(self.coverage)}</p>"
                + outcomes_html(self.outcomes))


def verify(*only: str, **options: Any) -> Verification:
    """``attn verify [--only ID...]``: regenerate the selected published values and judge them.

    ``options``: those of ``attn verify`` (``quick``, ``seed``, ``device``, ``no_cache``,
    ``cache_dir``, ``numerics``), parsed by the ``verify`` command itself (same checks, same
    errors); the experiments run as there (each once, the copy task's seeds, the per-user
    cache; :func:`attn_cli.regenerate.verify`), without the progress display.  Writes no file.
    """
    from attn_cli import regenerate

    from attn_cli.errors import ConfigError

    if options.get("out") is not None:
        raise ConfigError("verify() writes no file; regenerate_all(out) writes the report")
    with _callers_state(), _config_errors(), tempfile.TemporaryDirectory(prefix="attn-api-") as folder:
        common, p = _parsed("verify", folder, only, {k: v for k, v in options.items() if k != "out"})
        checked = _translated(lambda: regenerate.verify(p["only"], **_library_options(common, p)))
    return Verification(outcomes=checked.outcomes, summary=checked.summary, coverage=checked.coverage.line(),
                        experiments={r.name: r.seconds for r in checked.runs},
                        errors={r.name: r.error for r in checked.runs if r.error})


def _parsed(command: str, folder: str, only, options: dict):
    """The command's own parsing of these options (same checks, same errors): its Common and params."""
    from attn_cli.cli.options import Common

    cmd = _command(command)
    argv = command_line(command, only=list(only) or None, **options)
    _checked_text([command, *argv])
    with cmd.make_context(f"attn {command}", [*argv, "--out", folder]) as ctx:
        p = ctx.params
        from_env = ctx.get_parameter_source("scheduler") is click.core.ParameterSource.ENVIRONMENT
    common = Common(device=p["device"], seed=p["seed"], out=Path(folder), json=False, quick=p["quick"],
                    numerics=p["numerics"], formats=tuple(dict.fromkeys(p.get("formats") or ())) or ("png",),
                    cache_dir=p["cache_dir"], scheduler=p.get("scheduler"),
                    scheduler_from=("ATTN_SCHEDULER" if from_env else "--scheduler") if p.get("scheduler") else None,
                    worker_wait=p.get("worker_wait", 120.0))
    return common, p


def _library_options(common, p: dict) -> dict:
    """The keywords of :mod:`attn_cli.regenerate`'s functions for a parsed command line."""
    from attn_cli.cli.commands.cache import cache_root
    from attn_cli.cli.commands.catalogue import seed_count

    return dict(seed=common.seed, device=common.device, quick=common.quick, numerics=common.numerics,
                cache_root=cache_root(common), use_cache=not p["no_cache"], scheduler=common.scheduler,
                scheduler_from=common.scheduler_from, worker_wait=common.worker_wait,
                **seed_count(p.get("n_seeds"), common))


def _translated(call):
    """The library's errors as the command reports them (usage errors, exit 2 on the command line)."""
    from attn_cli import experiment_registry

    try:
        return call()
    except experiment_registry.UnknownId as exc:
        raise click.BadParameter(str(exc), param_hint="'--only'") from None
    except experiment_registry.SeedOutOfRange as exc:
        raise click.BadParameter(str(exc), param_hint="'--seed'") from None


# --------------------------------------------------------------------------- all


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
        return (f"<p>attn all: <code>{html.escape(str(self.out))}</code>, "
                f"{len(self.manifest.get('artifacts', {}))} catalogue IDs; checks: {html.escape(str(checks))}; "
                f"{'ok' if self.ok else 'FAILED'}</p>")


def regenerate_all(out: str | Path, *only: str, **options: Any) -> Report:
    """``attn all --out OUT [--only ID...]``: every table, figure and the report, written into ``out``.

    ``options``: those of ``attn all`` (``quick``, ``seed``, ``device``, ``no_cache``,
    ``cache_dir``, ``format``, ``numerics``), parsed by the ``all`` command itself (same
    checks, same errors), then :func:`attn_cli.regenerate.regenerate_all` (same files);
    returns its manifest.
    """
    from attn_cli import regenerate
    from attn_cli.render.files import _json_default

    with _callers_state(), _config_errors():
        common, p = _parsed("all", str(out), only, {k: v for k, v in options.items() if k != "json"})
        done = _translated(lambda: regenerate.regenerate_all(out, p["only"], formats=common.formats,
                                                             **_library_options(common, p)))
    notes = [*done.not_written, *([done.quick_line] if done.quick_line else []),
             *(f"{s.name} failed: {s.error}" for s in done.errors)]
    return Report(out=Path(out), manifest=json.loads(json.dumps(done.manifest, default=_json_default)),
                  ok=done.exit_code == 0, notes="\n".join(notes))


# --------------------------------------------------------------------------- list


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
    return [Entry(**{**row, "files": tuple(row["files"])})
            for row in report.catalogue_rows(registry.artifacts.values(), registry)]


# --------------------------------------------------------------------------- HTML for Jupyter


def outcomes_html(outcomes) -> str:
    """The checks as an HTML table: ID, regenerated, published, tolerance, kind, verdict."""
    rows = []
    colour = {"pass": "#1a7f37", "fail": "#cf222e"}
    for o in outcomes:
        regenerated = "" if o.as_json()["regenerated"] is None else o.regenerated
        status = o.status if not o.note or o.status == "pass" else f"{o.status}: {o.note}"
        cells = [o.check.id, regenerated, o.published, o.tolerance, o.kind]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
                    + f"<td style='color:{colour.get(o.status, '#6e7781')}'>{html.escape(status)}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("check", "regenerated", "published", "tolerance", "kind", "verdict"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _console_text(renderables, width: int) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, record=True, color_system=None, soft_wrap=False)
    for r in renderables:
        console.print(r)
    return console.export_text()


def _tables_html(renderables) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=110, record=True, force_terminal=True)
    for r in renderables:
        console.print(r)
    return console.export_html(inline_styles=True, code_format="<pre style='font-family:monospace'>{code}</pre>")


def _png64(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")
