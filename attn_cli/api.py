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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from attn_cli.render import table
from attn_cli.render.html import outcomes_html, png64

# what run() does not run: the catalogue commands have their own functions
NOT_A_RUN = {"all": "regenerate_all", "verify": "verify", "list": "artifacts", "cache": None, "diff": None}


def _command(name: str) -> click.Command:
    from attn_cli.cli import all_commands

    if (cmd := all_commands().get(name)) is None:
        raise click.UsageError(f"No such command {name!r}; commands: {', '.join(sorted(all_commands()))}.")
    return cmd


def _given(
    params: list[click.Parameter], args: tuple, options: dict[str, Any]
) -> tuple[list[tuple[str, click.Parameter | None, Any]], list]:
    """Each option given (not None) with its parameter, by long name with underscores, old name or
    parameter name (None: the command lacks it); and the positional words, named ones first."""
    by_name: dict[str, click.Parameter] = {}
    for p in params:
        for opt in (*p.opts, *getattr(p, "aliases", ())):
            if opt.startswith("--"):  # an argument's opts is its name
                by_name.setdefault(opt[2:].replace("-", "_"), p)
        by_name.setdefault(p.name, p)
    given = [(name, by_name.get(name), value) for name, value in options.items() if value is not None]
    named = {p.name: _listed(v) if p.nargs != 1 else [v] for _, p, v in given if isinstance(p, click.Argument)}
    words = [v for p in params if p.name in named for v in named[p.name]] + list(args)
    return [g for g in given if not isinstance(g[1], click.Argument)], words


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple, set, frozenset, range)) else [value]


def command_line(command: str, *args: Any, **options: Any) -> list[str]:
    """The ``attn`` arguments that stand for these Python arguments (as :func:`run` shows them).

    An option by its long name with underscores (``batch_size`` for ``--batch-size``) or its parameter
    name (``formats``); a flag by a bool (``quick=True``); several values by a list (``lengths=[4, 8]``);
    None leaves the default; a name the command lacks becomes ``--that-name``.

    Examples:
        >>> command_line("copy-task", lengths=[4, 8], steps=300, quick=True)
        ['--lengths', '4', '--lengths', '8', '--steps', '300', '--quick']
        >>> command_line("heatmap", "banana", "bandana", d_model=8)
        ['--d-model', '8', '--', 'banana', 'bandana']
    """
    given, words = _given(_command(command).params, args, options)
    argv: list[str] = []
    for name, param, value in given:
        flag = param.opts[0] if param else "--" + name.replace("_", "-")
        if getattr(param, "is_flag", False):  # click's own reading of a bool
            argv += [flag] if click.BOOL.convert(value if isinstance(value, bool) else str(value), param, None) else []
        else:
            argv += [t for v in (_listed(value) if param and param.multiple else [value]) for t in (flag, str(v))]
    return argv + (["--", *map(str, words)] if words else [])


def _context(command: str, args: tuple, options: dict[str, Any], out: str) -> click.Context:
    """The command's context, its parameters reading these values as click reads a command line's words
    (eager ones first; environment variables, defaults, types, callbacks), with no command line parsed."""
    from attn_cli.cli import check_utf8_words

    ctx = click.Context(_command(command), info_name=f"attn {command}")
    params = ctx.command.get_params(ctx)
    given, words = _given(params, args, options)
    check_utf8_words([str(v) for _, _, value in given for v in _listed(value)] + [str(w) for w in words])
    if unknown := [name for name, p, _ in given if p is None]:  # as click's parser refuses it
        shown = [o for p in params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)]
        raise click.NoSuchOption("--" + unknown[0].replace("_", "-"), possibilities=shown, ctx=ctx)
    values, order, words = _values(params, given, words, out)
    with ctx.scope(cleanup=False):
        for p in click.core.iter_params_for_processing(order, params):
            p.handle_parse_result(ctx, values, [])
        unset = getattr(click.core, "UNSET", None)  # click >= 8.3's "not given": None to the command
        ctx.params = {name: None if v is unset else v for name, v in ctx.params.items()}
        if words:
            ctx.fail(f"Got unexpected extra argument{'s' if len(words) > 1 else ''} ({' '.join(map(str, words))})")
    return ctx


def _values(params: list[click.Parameter], given: list, words: list, out: str) -> tuple[dict, list, list]:
    """What click's parser hands the parameters: the values by name (a list for a multiple option, a
    tuple for ``nargs=-1``), the parameters in the order given (options, ``--out``, arguments), the
    words no argument takes."""
    known = [(p, value) for _, p, value in given if p.name != "as_json"]  # nothing is printed
    values: dict[str, Any] = {"out": out}
    for p, value in known:
        if p.multiple:
            values[p.name] = [*values.get(p.name, []), *map(_word, _listed(value))]
        else:
            values[p.name] = tuple(map(_word, value)) if isinstance(value, (list, tuple)) else _word(value)
    arguments = [p for p in params if isinstance(p, click.Argument)]
    for p in arguments:
        n = len(words) if p.nargs == -1 else p.nargs
        if words[:n]:
            values[p.name] = _word(words[0]) if p.nargs == 1 else tuple(map(_word, words[:n]))
        words = words[n:]
    return values, [p for p, _ in known] + [p for p in params if p.name == "out"] + arguments, words


def _word(value: Any) -> Any:
    """A value as the word the command line would give its type (3.5 for an integer is refused, not
    cut to 3); a bool stays a bool for a flag."""
    return value if isinstance(value, (bool, str)) else str(value)


@contextlib.contextmanager
def _call(out: str | Path | None) -> Iterator[str]:
    """One call in ``--out`` (the caller's folder, or a private temporary one nothing is written to):
    what the CLI refuses with exit 2 raises ConfigError with the message it prints after ``Error:``;
    the caller's ``os.environ`` (the numeric mode's pins) and torch's thread count are restored after.
    A worker process importing the caller's script (no ``__main__`` guard) leaves at once."""
    import multiprocessing

    from attn_cli.errors import BadConfig, ConfigError
    from attn_cli.experiments.copy_task.engines import MAIN_GUARD_EXIT

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        os._exit(MAIN_GUARD_EXIT)
    environ = dict(os.environ)
    threads = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
    folder = contextlib.nullcontext(str(out)) if out is not None else tempfile.TemporaryDirectory(prefix="attn-api-")
    try:
        with folder as where:
            yield where
    except click.UsageError as exc:
        raise ConfigError(exc.format_message()) from None
    except BadConfig as exc:
        raise ConfigError(str(exc)) from None
    except click.exceptions.Exit as exc:  # --help: nothing to run
        raise ConfigError(f"nothing to run (exit {exc.exit_code})") from None
    finally:
        if "torch" in sys.modules:  # fix torch's kernels under this call's pins: a later call in
            from attn_cli.core import numerics  # another mode is then refused before any work

            numerics.effective_isa()
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        if threads is not None and sys.modules["torch"].get_num_threads() != threads:
            sys.modules["torch"].set_num_threads(threads)


@dataclass
class Run:
    """One command's run: its typed Result, the checks with their verdicts, its tables and figures
    (shown in Jupyter)."""

    command: str
    argv: list[str]  # the equivalent command line: attn COMMAND ARGV
    result: Any  # the experiment's Result (a dataclass of plain values): pipeline.result
    outcomes: list  # attn_cli.Outcome per check of the command's catalogue IDs: pipeline.outcomes
    tables: list  # blocks (attn_cli.render.table): the tables the CLI prints
    files: list[Path]  # written into out= (empty without it)
    notes: list[str]  # what the CLI prints on stderr (no progress display here)
    seconds: float
    _json: Any = None
    _figures: list = field(default_factory=list)
    pipeline: Any = None  # the attn_cli.pipeline.Run the command went through

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
            parts.append(outcomes_html(self.outcomes))
        for name, fig in self._figures:
            parts.append(
                f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{png64(fig)}'/>"
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
    from attn_cli.cli.commands.execute import Job
    from attn_cli.errors import ConfigError

    if command in NOT_A_RUN:
        instead = NOT_A_RUN[command]
        raise ConfigError(f"attn {command} is not one run" + (f"; use attn_cli.{instead}()" if instead else ""))
    started = time.perf_counter()
    figures: list = []
    with _call(out) as folder:
        with _context(command, args, options, folder) as ctx:
            job = ctx.command.invoke(ctx)  # the command's options read and checked: its Job, not yet run
        argv = command_line(command, *args, **options)
        if not isinstance(job, Job):
            raise ConfigError(f"attn {shlex.join([command, *argv])} runs no experiment")
        done = job.run(folder, keep=figures)
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
