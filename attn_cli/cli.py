"""The ``attn`` command group.

Each module in :mod:`attn_cli.commands` lists its click commands in ``COMMANDS``; they are
collected here.  Command modules import torch and matplotlib only inside the command
bodies, so ``attn --help`` stays instant.  Domain errors (:class:`attn_cli.errors.AttnError`)
become a one-line ``Error: ...`` here, in one place.
"""

from __future__ import annotations

import errno
import importlib
import pkgutil
import sys

import click

from attn_cli import __version__, signals
from attn_cli.errors import AttnError

# an OSError that reaches the CLI with one of these is a condition of the machine (a full or
# read-only disk, a folder the user may not write), reported in one line, never a traceback
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO,
                       errno.EFBIG, errno.ENAMETOOLONG}


class AttnGroup(click.Group):
    def parse_args(self, ctx, args):
        from attn_cli.options import check_utf8_words

        check_utf8_words(args)  # before any option converts (or prints) a word
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        from attn_cli import streams
        from attn_cli.core.memory import out_of_memory

        try:
            returned = super().invoke(ctx)
            streams.flush()  # a full stdout fails here, inside the command, as an Error line
            return returned
        except streams.ReaderGone:  # `attn list | head`: the reader left; quiet, as git and cat are
            sys.exit(streams.READER_GONE)
        except AttnError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            if exc.errno not in _ENVIRONMENT_ERRNOS:
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror}") from None
        except (MemoryError, RuntimeError) as exc:  # an allocation the up-front guard did not foresee
            message = out_of_memory(exc)
            if message is None:
                raise
            raise click.ClickException(message) from None
        except (KeyboardInterrupt, click.Abort) as exc:  # Ctrl-C, SIGTERM, SIGHUP (signals.Terminated)
            _interrupted(exc)

    def format_commands(self, ctx, formatter):
        """List every command with its whole one-line summary (wrapped, never cut with '...')."""
        rows = [(name, cmd.get_short_help_str(limit=200)) for name, cmd in
                ((n, self.get_command(ctx, n)) for n in self.list_commands(ctx)) if not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _interrupted(exc: BaseException) -> None:
    """Ctrl-C, SIGTERM or SIGHUP: one line on stderr (``Error: interrupted``, ``terminated``,
    ``hung up``), exit 128 + the signal; workers are stopped and atomic writes have left no
    partial file (see :mod:`attn_cli.signals`)."""
    click.echo(f"\nError: {signals.describe(exc)}", err=True)
    sys.exit(signals.exit_code(exc))


@click.group(cls=AttnGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="attn")
def cli():
    """Regenerate every table and figure of two texts on attention, and check each number.

    \b
    Examples:
        attn list                         # every table and figure, and who makes it
        attn copy-task --lengths 4 8 16 32
        attn heatmap attention translation
        attn verify                       # regenerate and compare with the texts
    """


def _load_commands() -> None:
    import attn_cli.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)


_load_commands()


def main() -> None:
    from attn_cli import streams

    streams.install()  # any terminal encoding prints; a closed or full stdout is an Error line
    signals.install()  # SIGTERM and SIGHUP unwind like Ctrl-C
    try:
        cli(prog_name="attn")
    except KeyboardInterrupt as exc:  # a signal outside a command (while starting up)
        _interrupted(exc)
