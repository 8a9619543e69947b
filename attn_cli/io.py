"""Atomic writes (temp file, fsync, ``os.replace``) with the mode ``open()`` would give under the umask;
an ``OSError`` becomes one line naming the path and the reason (:class:`attn_cli.errors.WriteFailed`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from attn_cli.errors import WriteFailed

_umask_lock = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (thread-safe)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _umask_lock:  # elsewhere: set and restore (briefly visible to other threads)
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """What ``open(path, "w")`` would create: 0o666 less the umask."""
    return 0o666 & ~current_umask()


def failure(path: str | os.PathLike, exc: OSError) -> WriteFailed:
    """One line naming the path and the reason: "cannot write out/x.png: No space left on device"."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return WriteFailed(f"cannot write {os.fspath(path)}: {reason}")


def _fsync(path: str | os.PathLike, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside ``path`` to write; on success fsync it, give it the umask's mode and
    rename it onto ``path``; on any failure delete it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise failure(path.parent, exc) from None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or path.suffix + ".tmp", dir=path.parent)
    except OSError as exc:
        raise failure(path, exc) from None
    os.close(fd)
    try:
        yield Path(tmp)
        _fsync(tmp)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise failure(path, exc) from None
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable; a folder that cannot be opened is no error
        _fsync(path.parent, directory=True)


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(text.encode("utf-8"))
    return Path(path)
