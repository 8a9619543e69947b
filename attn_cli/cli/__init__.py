"""The ``attn`` command group: the ``COMMANDS`` of the modules named below (which import torch and matplotlib
only inside their commands, so ``attn --help`` stays fast); failures at run time (:class:`attn_cli.errors.AttnError`,
a full disk, ...) become one ``Error: ...`` line here, in one place."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterable
from errno import EACCES, EDQUOT, EFBIG, EIO, ENAMETOOLONG, ENOSPC, EPERM, EROFS
from typing import Any, NoReturn

import click

from attn_cli import __version__, signals
from attn_cli.cli.commands import cache, catalogue, copy_task, d2l, w9
from attn_cli.cli.commands.execute import Job, execute
from attn_cli.errors import AttnError


def check_utf8_words(args: Iterable[str]) -> None:
    """A command-line word that is not valid UTF-8 (kept as surrogate escapes) is a usage error."""
    for word in args:
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            shown = repr(word.encode("utf-8", "surrogateescape"))[1:]  # 'ab\xff'
            raise click.UsageError(f"the argument {shown} is not valid UTF-8 text") from None


# an OSError with one of these is the machine's condition (a full or read-only disk, ...): one line, no traceback
_ENVIRONMENT_ERRNOS = {ENOSPC, EDQUOT, EACCES, EPERM, EROFS, EIO, EFBIG, ENAMETOOLONG}


class AttnGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        check_utf8_words(args)  # before any option converts (or prints) a word
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        from attn_cli.core.memory import out_of_memory

        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # a full stdout fails here, inside the command, as an Error line
        except BrokenPipeError:  # `attn list | head`: the reader left; quiet, as git and cat are
            _silence_stdout()
            sys.exit(141)  # 128 + SIGPIPE, as a shell reports it
        except AttnError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            if exc.errno not in _ENVIRONMENT_ERRNOS:
                raise
            if exc.filename is None:  # every file attn writes names itself (attn_cli.io): this is stdout
                _silence_stdout()
                raise click.ClickException(f"cannot write to stdout: {exc.strerror}; the output is lost") from None
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror}") from None
        except (MemoryError, RuntimeError) as exc:  # an allocation the up-front guard did not foresee
            if (message := out_of_memory(exc)) is None:
                raise
            raise click.ClickException(message) from None
        except (KeyboardInterrupt, click.Abort) as exc:  # Ctrl-C, SIGTERM, SIGHUP (signals.Terminated)
            _interrupted(exc)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List every command with its whole one-line summary (wrapped, never cut with '...')."""
        with formatter.section("Commands"):
            formatter.write_dl(
                [(n, c.get_short_help_str(limit=200)) for n, c in sorted(self.commands.items()) if not c.hidden]
            )


def _interrupted(exc: BaseException) -> NoReturn:
    """Ctrl-C, SIGTERM or SIGHUP: one line on stderr (``Error: interrupted``), exit 128 + the signal."""
    click.echo(f"\nError: {signals.describe(exc)}", err=True)
    sys.exit(signals.exit_code(exc))


@click.group(
    cls=AttnGroup,
    commands=[*cache.COMMANDS, *catalogue.COMMANDS, *copy_task.COMMANDS, *d2l.COMMANDS, *w9.COMMANDS],
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="attn")
def cli() -> None:
    """Regenerate every table and figure of two texts on attention, and check each number.

    \b
    Examples:
        attn list                         # every table and figure, and who makes it
        attn copy-task --lengths 4 8 16 32
        attn heatmap attention translation
        attn verify                       # regenerate and compare with the texts
    """


@cli.result_callback()
def _run(value: object, **_params: object) -> None:
    """A run command returns its :class:`~attn_cli.cli.commands.execute.Job`, run and printed here."""
    if isinstance(value, Job):
        execute(value)


def all_commands() -> dict[str, click.Command]:
    """Every command of ``attn``, by name."""
    return dict(cli.commands)


def _silence_stdout() -> None:
    """fd 1 pointed at /dev/null, so that the last flush says nothing (Python's signal docs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def main() -> None:
    if sys.stdout is None:  # `attn ... >&-`: every print would be dropped without a word
        sys.stderr.write("Error: cannot write to stdout: it is closed; the output is lost\n")
        sys.exit(1)
    for stream in (sys.stdout, sys.stderr):  # a character the terminal cannot show prints as \xe9
        if stream is not None:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]  # a TextIOWrapper
    signals.install()  # SIGTERM and SIGHUP unwind like Ctrl-C
    try:
        cli(prog_name="attn")
    except KeyboardInterrupt as exc:  # a signal outside a command (while starting up)
        _interrupted(exc)
    finally:
        gc.freeze()  # skip the collector's last passes over torch's objects at exit (atexit still runs)
