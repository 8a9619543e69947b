"""How a run ends on a signal, in ``attn`` and in its worker processes (``docs/design.md``)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

STOPPING = (signal.SIGTERM, signal.SIGHUP)  # raised as Terminated; SIGINT stays KeyboardInterrupt
WORDS: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
PARENT_GONE = 128 + signal.SIGHUP  # a worker's exit status when attn is gone (as if hung up)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C; ``signum`` says which signal ended the run."""

    def __init__(self, signum: int) -> None:
        super().__init__(WORDS.get(signum, f"signal {signum}"))
        self.signum = signum


_stopping = False


def _raise(signum: int, frame: FrameType | None) -> None:
    """Raise once; a second signal during the first one's cleanup is ignored."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    raise Terminated(signum)


def install() -> None:
    """Make SIGTERM and SIGHUP raise :class:`Terminated` (main thread only), unless ignored at start (``nohup``)."""
    for signum in STOPPING:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, _raise)


def signal_of(exc: BaseException) -> int:
    """The signal that ended the run: a Terminated's own, also behind an exception raised while
    handling it (``raise click.Abort() from None`` keeps it as the context); else SIGINT."""
    seen: BaseException | None = exc
    for _ in range(100):  # a chain is short; a cycle must not hang the exit
        if seen is None or isinstance(seen, Terminated):
            break
        seen = seen.__cause__ or seen.__context__
    return seen.signum if isinstance(seen, Terminated) else signal.SIGINT


def describe(exc: BaseException) -> str:
    """What ended the run, in words: ``interrupted``, ``terminated`` or ``hung up``."""
    signum = signal_of(exc)
    return WORDS.get(signum, f"signal {signum}")


def exit_code(exc: BaseException) -> int:
    """128 + the signal number, as a shell reports a process ended by that signal."""
    return 128 + signal_of(exc)


@contextmanager
def terminal_signals_blocked() -> Iterator[None]:
    """SIGHUP and SIGINT blocked in this thread meanwhile: worker processes started inside inherit the
    block and leave a terminal's hang-up and Ctrl-C to attn, which handles one right after."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP, signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def exit_with_parent(reader: Connection) -> None:
    """In a worker: end this process when ``reader`` reaches end of file (attn exited or was killed):
    the parent is the fork server, which outlives attn, so a thread watches attn's pipe instead."""

    def watch() -> None:
        try:
            reader.poll(None)  # readable only at end of file: attn never writes to it
        except (OSError, EOFError):
            pass
        from attn_cli.store.private import remove_own_scratch

        remove_own_scratch()
        os._exit(PARENT_GONE)

    threading.Thread(target=watch, name="attn parent watch", daemon=True).start()
