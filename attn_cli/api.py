"""The Python API: the CLI's commands as functions that return typed results (design notes:
``docs/design.md``, section ``attn_cli.api``)."""

from __future__ import annotations

import contextlib
import copy
import html
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from attn_cli.render import notebook, table

# what run() does not run: the catalogue commands have their own functions
NOT_A_RUN = {"all": "regenerate_all", "verify": "verify", "list": "artifacts", "cache": None, "diff": None}


def _command(name: str) -> click.Command:
    from attn_cli.cli import all_commands

    commands = all_commands()
    if name not in commands:
        raise click.UsageError(f"No such command {name!r}; commands: {', '.join(sorted(commands))}.")
    return commands[name]


def command_line(command: str, *args: Any, **options: Any) -> list[str]:
    """The ``attn`` arguments that :func:`run` parses for these Python arguments.

    An option by its long name with underscores (``batch_size`` for ``--batch-size``) or by
    its parameter name (``formats``); a flag by a bool (``quick=True``); several values by a
    list (``lengths=[4, 8]``); None leaves the default.  A name the command lacks becomes
    ``--that-name``, which click refuses as the CLI does.

    Examples:
        >>> command_line("copy-task", lengths=[4, 8], steps=300, quick=True)
        ['--lengths', '4', '--lengths', '8', '--steps', '300', '--quick']
        >>> command_line("heatmap", "banana", "bandana", d_model=8)
        ['--d-model', '8', '--', 'banana', 'bandana']
    """
    cmd = _command(command)
    by_name = _parameters_by_name(cmd)
    argv: list[str] = []
    named: dict[str, list] = {}  # arguments given by name, placed in the command's order
    for name, value in options.items():
        param = by_name.get(name)
        if value is None:  # the command's default
            continue
        if isinstance(param, click.Argument):
            named[param.name] = list(value) if param.nargs != 1 and _many(value) else [value]
        else:
            argv += _option_tokens(name, param, value)
    positional = [
        _token(v) for p in cmd.params if p.name in named and isinstance(p, click.Argument) for v in named[p.name]
    ] + [_token(a) for a in args]
    return argv + (["--", *positional] if positional else [])


def _parameters_by_name(cmd: click.Command) -> dict[str, click.Parameter]:
    """Each parameter by its long names with underscores (a renamed flag's old name too) and by its name."""
    by_name: dict[str, click.Parameter] = {}
    for p in cmd.params:
        if isinstance(p, click.Option):
            for opt in (*p.opts, *getattr(p, "aliases", ())):
                if opt.startswith("--"):
                    by_name.setdefault(opt[2:].replace("-", "_"), p)
        by_name.setdefault(p.name, p)
    return by_name


def _option_tokens(name: str, param: click.Parameter | None, value: Any) -> list[str]:
    """The command-line words for one option; a name the command lacks becomes ``--that-name``,
    which click refuses as on the command line ("No such option")."""
    if param is None:
        return ["--" + name.replace("_", "-"), _token(value)]
    flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    if getattr(param, "is_flag", False):  # click's own reading of a bool
        return [flag] if click.BOOL.convert(value if isinstance(value, bool) else str(value), param, None) else []
    if getattr(param, "multiple", False):
        return [t for v in (value if _many(value) else [value]) for t in (flag, _token(v))]
    return [flag, _token(value)]


def _many(value: Any) -> bool:
    return isinstance(value, (list, tuple, set, frozenset, range))


def _token(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)  # a float's repr round-trips exactly


def _out_folder(out: str | Path | None) -> AbstractContextManager[str]:
    """``--out``: the caller's folder, or a private temporary one that nothing is written to."""
    return contextlib.nullcontext(str(out)) if out is not None else tempfile.TemporaryDirectory(prefix="attn-api-")


@contextlib.contextmanager
def _callers_state() -> Iterator[None]:
    """The caller's ``os.environ`` (the numeric mode's pins) and torch's thread count, restored after
    the block.  A worker process importing the caller's script (no ``if __name__ == "__main__":``
    guard) leaves at once with :data:`MAIN_GUARD_EXIT`; the script's own process raises a ConfigError."""
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
def _config_errors() -> Iterator[None]:
    """What the command line refuses with exit 2 raised as :class:`attn_cli.ConfigError`, with the
    message the CLI prints after ``Error:``: a notebook never sees click's exceptions or SystemExit."""
    from attn_cli.errors import BadConfig, ConfigError

    try:
        yield
    except click.UsageError as exc:
        raise ConfigError(exc.format_message()) from None
    except BadConfig as exc:
        raise ConfigError(str(exc)) from None
    except click.exceptions.Exit as exc:  # --help, --version: nothing to run
        raise ConfigError(f"nothing to run (exit {exc.exit_code})") from None


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
    tables: list = field(repr=False)  # blocks (attn_cli.render.table): the tables the CLI prints
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
        return table.to_text(self.tables, width)

    def _repr_html_(self) -> str:
        parts = [f"<p><code>{html.escape(self.command_line)}</code></p>", table.to_html(self.tables)]
        if self.outcomes:
            parts.append(notebook.outcomes_html(self.outcomes))
        for name, fig in self._figures:
            parts.append(
                f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{notebook.png64(fig)}'/>"
                f"<figcaption>{html.escape(name)}</figcaption></figure>"
            )
        return "\n".join(parts)


def run(command: str, *args: Any, out: str | Path | None = None, **options: Any) -> Run:
    """Run ``attn COMMAND`` with these options and return its :class:`Run`.

    ``out``: also write the figures and data files there, as the CLI does (default: nothing
    is written).  Raises :class:`attn_cli.ConfigError` (a ``ValueError``) for what the CLI
    refuses with exit 2, with the message it prints, and :class:`attn_cli.errors.AttnError`
    for a failure at run time (exit 1 on the command line).
    """
    from attn_cli import pipeline
    from attn_cli.cli import check_utf8_words
    from attn_cli.cli.commands.execute import Job
    from attn_cli.errors import ConfigError

    if command in NOT_A_RUN:
        instead = NOT_A_RUN[command]
        raise ConfigError(f"attn {command} is not one run" + (f"; use attn_cli.{instead}()" if instead else ""))
    with _config_errors():
        cmd = _command(command)
        argv = command_line(command, *args, **options)
        check_utf8_words([command, *argv])  # as on the command line: attn COMMAND ARGV
    started = time.perf_counter()
    figures: list = []
    with _callers_state(), _config_errors(), _out_folder(out) as folder:
        shown = [a for a in argv if a != "--json"]
        split = shown.index("--") if "--" in shown else len(shown)  # --out before the positional arguments
        with cmd.make_context(f"attn {command}", [*shown[:split], "--out", folder, *shown[split:]]) as ctx:
            job = cmd.invoke(ctx)  # the command's options read and checked: its Job, not yet run
        if not isinstance(job, Job):
            raise ConfigError(f"attn {shlex.join([command, *argv])} runs no experiment")
        done = pipeline.run(
            job.exp,
            job.config,
            out=folder,
            formats=job.common.formats,
            cache_root=job.cache_root,
            use_cache=job.use_cache,
            threads=job.threads,
            numerics=job.common.numerics,
            keep=figures,
        )
    files = done.files if out is not None else []
    return Run(
        command=command,
        argv=argv + (["--out", str(out)] if out is not None else []),
        result=done.result,
        outcomes=list(done.outcomes.values()),
        tables=done.tables(),
        files=files,
        notes=[*done.notes, *(f"wrote {p}" for p in files)],
        seconds=time.perf_counter() - started,
        _json=_json_data(done.json()),
        _figures=figures,
        pipeline=done,
    )


def _json_data(obj: Any) -> Any:
    """What ``emit`` prints for --json, as data (the same encoder, then parsed back)."""
    from attn_cli.render.files import _json_default

    return json.loads(json.dumps(obj, default=_json_default))
