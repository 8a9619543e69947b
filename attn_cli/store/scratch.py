"""This process's own private scratch folder (removed when it ends), matplotlib's config kept
out of folders others could change, and one warning per refused cache folder."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from attn_cli.store import private

_scratch: Path | None = None
_scratch_owner = 0  # the process that made it (a forked child inherits the name, not the folder)
_scratch_lock = threading.Lock()


def _remove(path: Path, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # not from a forked child that inherited the handler
        shutil.rmtree(path, ignore_errors=True)


def scratch_dir() -> Path:
    """This process's own private folder (mkdtemp, 0700), made on first use, removed at exit;
    :class:`NotPrivate` when no temp folder passes the walk."""
    global _scratch, _scratch_owner
    with _scratch_lock:
        if _scratch is not None:
            return _scratch
        reasons = []
        for base in dict.fromkeys([tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"]):
            try:
                fd, _ = private._walk(base, create=False)  # a place others cannot rename our folder in
                os.close(fd)
                path = Path(tempfile.mkdtemp(prefix="attn_", dir=base))
                os.close(private.open_private_dir(path, create=False))
            except (private.NotPrivate, OSError) as exc:
                reasons.append(str(exc))
                continue
            atexit.register(_remove, path, os.getpid())
            _scratch, _scratch_owner = path, os.getpid()
            return path
        raise private.NotPrivate("no private temp folder: " + "; ".join(reasons))


def remove_own_scratch() -> None:
    """Remove this process's scratch folder now, if this process made it (not one inherited):
    for a worker that leaves with ``os._exit``, where no atexit handler runs."""
    global _scratch
    with _scratch_lock:
        path = _scratch
        if path is None or _scratch_owner != os.getpid():
            return
        _scratch = None
    shutil.rmtree(path, ignore_errors=True)


def _reset_scratch_for_tests() -> Path | None:
    """Forget this process's scratch folder (the next call makes a fresh one); returns it."""
    global _scratch
    with _scratch_lock:
        old, _scratch = _scratch, None
    return old


_WARNED_ROOTS: set[str] = set()  # per-user cache folders this process has warned about


def warn_unusable(root: Path, message: str) -> None:
    """Write ``message`` (one warning line) unless this process has already warned about the
    per-user cache folder ``root``: one warning per refused folder, whatever keeps files there."""
    key = os.path.abspath(root)
    if key not in _WARNED_ROOTS:
        _WARNED_ROOTS.add(key)
        print(message.rstrip("\n"), file=sys.stderr, flush=True)


_matplotlib_checked = False


def keep_matplotlib_private() -> None:
    """Call before importing matplotlib: where its default config or cache folder (under
    ``$XDG_CONFIG_HOME``, ``$XDG_CACHE_HOME``) could be changed by another user, is relative or
    lies in a home folder that does not exist, point ``MPLCONFIGDIR`` at ``<scratch>/matplotlib``
    instead.  An ``MPLCONFIGDIR`` the user set is kept, as matplotlib keeps it."""
    global _matplotlib_checked
    if _matplotlib_checked or "matplotlib" in sys.modules:
        return  # once per process, and only before matplotlib has chosen its folders
    _matplotlib_checked = True
    if os.environ.get("MPLCONFIGDIR") or not sys.platform.startswith(("linux", "freebsd")):
        return
    home = os.path.expanduser("~")
    for var, default in (("XDG_CACHE_HOME", ".cache"), ("XDG_CONFIG_HOME", ".config")):
        base = os.environ.get(var) or ""
        if base and not os.path.isabs(base):
            break  # matplotlib would write under the current folder: the XDG rule ignores it, so do we
        base = base or os.path.join(home, default)
        if private.missing_home(base) or private.shared_reason(os.path.join(base, "matplotlib")) is not None:
            break
    else:
        return
    try:
        folder = scratch_dir() / "matplotlib"
        os.close(private.open_private_dir(folder))
    except private.NotPrivate:
        return  # matplotlib falls back to a temporary folder of its own
    os.environ["MPLCONFIGDIR"] = str(folder)
