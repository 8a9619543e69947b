"""The process's standard streams, made safe once at start-up (:func:`attn_cli.cli.main`).

* Any terminal encoding prints: characters the encoding lacks (``PYTHONIOENCODING=ascii``,
  a C locale) are written as ``\\uXXXX`` escapes instead of raising ``UnicodeEncodeError``
  (rich, ``print`` and click all write through ``sys.stdout``/``sys.stderr``).
* Output is never lost silently: a write to a closed stdout (``attn heads --json >&-``:
  Python then sets ``sys.stdout`` to None and every ``print`` is dropped) or to a full one
  (``> /dev/full``: ``ENOSPC`` at the flush) raises :class:`StdoutFailed`, which the CLI
  reports as one ``Error:`` line on stderr with exit 1.
* A reader that left (``attn list | head``: ``EPIPE``) is no error of ours: :class:`ReaderGone`
  ends the command quietly with exit 141 (128 + SIGPIPE, what a shell reports for the
  default SIGPIPE action), as ``git`` and ``cat`` do.

No rich or torch import here: ``attn --help`` stays instant.
"""

from __future__ import annotations

import atexit
import errno
import io
import os
import sys

from attn_cli.errors import AttnError

ENCODING_ERRORS = "backslashreplace"  # what a character the terminal cannot show becomes


class StdoutFailed(AttnError):
    """stdout is closed or cannot take more (disk full, a broken pipe)."""


class ReaderGone(StdoutFailed):
    """stdout is a pipe whose reader has closed it (``EPIPE``)."""


READER_GONE = 141  # 128 + SIGPIPE


class _CheckedStdout(io.TextIOBase):
    """``sys.stdout`` with every failed write or flush raised as :class:`StdoutFailed`;
    ``stream`` None stands for a closed file descriptor 1."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _failed(self, exc: OSError | None) -> StdoutFailed:
        reason = "it is closed" if exc is None else (exc.strerror or str(exc) or type(exc).__name__)
        _silence()
        if exc is not None and exc.errno == errno.EPIPE:
            return ReaderGone(f"cannot write to stdout: {reason}")
        return StdoutFailed(f"cannot write to stdout: {reason}; the output is lost")

    def write(self, text: str) -> int:
        if self._stream is None:
            raise self._failed(None)
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def fileno(self) -> int:
        if self._stream is None:
            raise OSError(errno.EBADF, "stdout is closed")
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return ENCODING_ERRORS

    @property
    def buffer(self):
        if self._stream is None:
            raise self._failed(None)
        return self._stream.buffer


def _silence() -> None:
    """After a failed write: point fd 1 at /dev/null, so that the interpreter's own flush at
    exit does not print a second message (the recipe of Python's signal docs for EPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def install() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` safe for this process (called once by ``main``)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=ENCODING_ERRORS)
            except (ValueError, OSError):  # pragma: no cover - a detached stream
                pass
    if not isinstance(sys.stdout, _CheckedStdout):
        sys.stdout = _CheckedStdout(sys.stdout)
        atexit.register(_flush_at_exit)  # registered first, so it runs after every other handler


def _flush_at_exit() -> None:
    """The last word: output still buffered when the process ends (``sys.exit`` inside a
    command) is flushed here; a failure is one Error line and exit 1 (not the interpreter's
    "Exception ignored" and exit 120)."""
    try:
        flush()
    except ReaderGone:
        os._exit(READER_GONE)
    except StdoutFailed as exc:
        try:
            sys.stderr.write(f"Error: {exc}\n")
            sys.stderr.flush()
        finally:
            os._exit(1)


def flush() -> None:
    """Flush stdout now (at the end of ``main``), so a full disk is an error, not a warning
    the interpreter prints at exit."""
    if sys.stdout is not None:
        sys.stdout.flush()
