"""Folders proven private, files read and written only through them, and this process's scratch folder."""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import secrets
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

MAX_SYMLINKS = 40  # as the kernel's own limit on links in one lookup

_DIR_FLAGS = os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# parents are only looked at and looked through: O_PATH needs no read permission (Linux)
_WALK_FLAGS = _DIR_FLAGS | getattr(os, "O_PATH", os.O_RDONLY)


class NotPrivate(Exception):
    """A folder that cannot be proven private; the message names the component and why."""


class _Missing(NotPrivate):
    """A component that does not exist (and was not to be created)."""


def user_cache_root(override: str | os.PathLike | None = None) -> Path:
    """The per-user cache folder (not created), following the platform convention."""
    for value in (override, os.environ.get("ATTN_CACHE_DIR")):
        if value is not None and os.fspath(value) != "":
            return Path(os.path.abspath(os.path.expanduser(os.fspath(value))))
    xdg = os.environ.get("XDG_CACHE_HOME") or ""
    if xdg and not os.path.isabs(xdg):  # the XDG rule: a relative value is ignored
        return Path(os.path.expanduser("~")) / ".cache" / "attn"
    import platformdirs

    return Path(os.path.normpath(platformdirs.user_cache_dir("attn")))


def missing_home(path: str | os.PathLike) -> str | None:
    """Why ``path`` must not be created: it lies in a home folder that does not exist (``HOME=
    /nonexistent``; attn never makes a home folder); None otherwise."""
    home = os.path.expanduser("~")
    inside = os.path.commonpath([os.path.abspath(home), os.path.abspath(path)]) == os.path.abspath(home)
    if inside and not os.path.isdir(home):
        return (
            f"the home folder {home} does not exist and attn does not create it "
            "(set ATTN_CACHE_DIR or --cache-dir to keep a cache)"
        )
    return None


def _who(uid: int) -> str:
    return "root" if uid == 0 else f"uid {uid}"


def _check_component(where: str, st: os.stat_result) -> None:
    """Refuse a folder on the way that someone other than us or root could change."""
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise NotPrivate(f"{where} is owned by {_who(st.st_uid)}, not by this user ({_who(me)}) or root")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise NotPrivate(
            f"{where} is writable by group or others without the sticky bit (mode {stat.S_IMODE(st.st_mode):o})"
        )


def _check_final(where: str, fd: int) -> None:
    """The folder itself: ours, and no one else may read or write it (else refused, never chmod'ed)."""
    st = os.fstat(fd)
    me = os.geteuid()
    if st.st_uid != me:
        raise NotPrivate(f"{where} is owned by {_who(st.st_uid)}, not by this user ({_who(me)})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise NotPrivate(f"{where} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise NotPrivate(
            f"{where} is readable by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
            "attn leaves it as it is: use a private folder (chmod 700) or a new name"
        )


def _open_root() -> int:
    fd = os.open("/", _WALK_FLAGS)
    with closed_on_error(fd):
        _check_component("/", os.fstat(fd))
    return fd


@contextlib.contextmanager
def closed_on_error(fd: int) -> Iterator[None]:
    """Close ``fd`` when the block raises (then re-raise)."""
    try:
        yield
    except BaseException:
        os.close(fd)
        raise


def _step(parent: int, where: str, name: str, create: bool) -> tuple[int | None, str | None]:
    """``name`` in proven ``parent``: (fd, None), or (None, target) for our or root's symlink; ``create``: 0700."""
    for _ in range(2):
        try:
            return os.open(name, _WALK_FLAGS, dir_fd=parent), None
        except FileNotFoundError:
            if not create:
                raise _Missing(f"{where} does not exist") from None
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
            except FileExistsError:
                pass  # another process made it meanwhile: open and check it like any other
            except OSError as exc:
                raise NotPrivate(f"cannot create {where}: {exc.strerror}") from None
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise NotPrivate(f"cannot open {where}: {exc.strerror}") from None
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as exc2:
                raise NotPrivate(f"cannot open {where}: {exc2.strerror}") from None
            if not stat.S_ISLNK(st.st_mode):
                raise NotPrivate(f"{where} is not a folder") from None
            if st.st_uid not in (os.geteuid(), 0):
                raise NotPrivate(f"{where} is a symlink owned by {_who(st.st_uid)}") from None
            try:
                return None, os.readlink(name, dir_fd=parent)
            except OSError as exc2:
                raise NotPrivate(f"cannot read the symlink {where}: {exc2.strerror}") from None
    raise NotPrivate(f"cannot create {where}")


def _walk(path: str | os.PathLike, create: bool) -> tuple[int, str]:
    """The descriptor of ``path`` walked from ``/``, every component checked, and its symlink-free path."""
    todo = list(Path(os.path.abspath(os.fspath(path))).parts[1:])
    done: list[str] = []
    fd = _open_root()
    links = 0
    try:
        while todo:  # normalised paths: no "", "." or ".." (the folders walked hold no links)
            name = todo.pop(0)
            where = "/" + "/".join([*done, name])
            child, target = _step(fd, where, name, create)
            if child is None:
                assert target is not None  # (None, target): a symlink
                links += 1
                if links > MAX_SYMLINKS:
                    raise NotPrivate(f"too many symlinks on the way to {os.fspath(path)}")
                base = target if os.path.isabs(target) else "/".join(["", *done, target])
                todo = list(Path(os.path.normpath(base)).parts[1:]) + todo
                done = []
                os.close(fd)
                fd = _open_root()
                continue
            os.close(fd)
            fd = child
            _check_component(where, os.fstat(fd))
            done.append(name)
        return fd, "/" + "/".join(done)
    except BaseException:
        os.close(fd)
        raise


def open_private_dir(path: str | os.PathLike, create: bool = True) -> int:
    """An ``O_DIRECTORY`` descriptor of ``path``, proven private (``docs/design.md``)."""
    fd, real = _walk(path, create)
    try:
        # the walk used O_PATH where there is one: reopen the same folder for reading
        rd = os.open(".", os.O_RDONLY | _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        raise NotPrivate(f"cannot open {real}: {exc.strerror}") from None
    finally:
        os.close(fd)
    with closed_on_error(rd):
        _check_final(real, rd)
    return rd


def shared_reason(path: str | os.PathLike) -> str | None:
    """Why someone other than us or root could change what ``path`` holds, or None: its existing part
    walked as :func:`open_private_dir` walks it, a missing part only below a folder no one else can
    write (in a sticky folder another user could create it first)."""
    current, missing = os.path.abspath(os.fspath(path)), False
    while True:
        try:
            fd, real = _walk(current, create=False)
            break
        except _Missing:
            current, missing = os.path.dirname(current), True
        except NotPrivate as exc:
            return str(exc)
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if missing and mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{real} is writable by group or others (mode {stat.S_IMODE(mode):o})"
    return None


def _plain_name(name: str) -> None:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is not a plain file name")


def read_regular(dir_fd: int, name: str, max_bytes: int) -> bytes | None:
    """The bytes of the regular file ``name`` in ``dir_fd``, or None where there is none."""
    _plain_name(name)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{name} is a symlink") from None
        raise ValueError(f"cannot open {name}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{name} is not a regular file")
        if st.st_uid != os.geteuid():
            raise ValueError(f"{name} is owned by {_who(st.st_uid)}, not by this user")
        if st.st_size > max_bytes:
            raise ValueError(f"{name} has {st.st_size} bytes, more than the {max_bytes} allowed")
        with open(fd, "rb", closefd=False) as f:  # reads until max_bytes + 1 or the end
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{name} has more than the {max_bytes} bytes allowed")
        return data
    except OSError as exc:
        raise ValueError(f"cannot read {name}: {exc.strerror}") from None
    finally:
        os.close(fd)


def write_atomic(dir_fd: int, name: str, data: bytes, mode: int | None = None, replace: bool = True) -> None:
    """Write ``data`` to ``dir_fd/name`` atomically (temp file, fsync, rename in the folder);
    ``replace`` False: linked in place instead, so that an existing file wins."""
    from attn_cli import io

    _plain_name(name)
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, io.file_mode() if mode is None else mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if not replace:  # linked: the temp name goes
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
    with contextlib.suppress(OSError):  # make the rename itself durable
        os.fsync(dir_fd)


_scratch: Path | None = None
_scratch_owner = 0  # the process that made it (a forked child inherits the name, not the folder)
_scratch_lock = threading.Lock()


def _remove(path: Path, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # not from a forked child that inherited the handler
        shutil.rmtree(path, ignore_errors=True)


def scratch_dir() -> Path:
    """This process's own private folder (mkdtemp, 0700), made on first use, removed at exit; else NotPrivate."""
    global _scratch, _scratch_owner
    with _scratch_lock:
        if _scratch is not None:
            return _scratch
        reasons = []
        for base in dict.fromkeys([tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"]):
            try:
                fd, _ = _walk(base, create=False)  # a place others cannot rename our folder in
                os.close(fd)
                path = Path(tempfile.mkdtemp(prefix="attn_", dir=base))
                os.close(open_private_dir(path, create=False))
            except (NotPrivate, OSError) as exc:
                reasons.append(str(exc))
                continue
            atexit.register(_remove, path, os.getpid())
            _scratch, _scratch_owner = path, os.getpid()
            return path
        raise NotPrivate("no private temp folder: " + "; ".join(reasons))


def remove_own_scratch() -> None:
    """Remove the scratch folder this process made (not one inherited) now: a worker leaves with ``os._exit``."""
    global _scratch
    with _scratch_lock:
        path = _scratch
        if path is None or _scratch_owner != os.getpid():
            return
        _scratch = None
    shutil.rmtree(path, ignore_errors=True)


_WARNED_ROOTS: set[str] = set()  # per-user cache folders this process has warned about


def warn_unusable(root: Path, message: str) -> None:
    """Print ``message`` on stderr once per per-user cache folder ``root``, whatever keeps files there."""
    key = os.path.abspath(root)
    if key not in _WARNED_ROOTS:
        _WARNED_ROOTS.add(key)
        print(message.rstrip("\n"), file=sys.stderr, flush=True)


def keep_matplotlib_private() -> None:
    """Call before importing matplotlib: where its default config or cache folder could be changed by
    another user, is relative or lies in a missing home folder, point ``MPLCONFIGDIR`` (unless the
    user set it) at ``<scratch>/matplotlib``."""
    xdg_platform = sys.platform.startswith(("linux", "freebsd"))
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR") or not xdg_platform:
        return  # only before matplotlib has chosen its folders
    home = os.path.expanduser("~")
    for var, default in (("XDG_CACHE_HOME", ".cache"), ("XDG_CONFIG_HOME", ".config")):
        base = os.environ.get(var) or ""
        if base and not os.path.isabs(base):
            break  # matplotlib would write under the current folder: the XDG rule ignores it, so do we
        base = base or os.path.join(home, default)
        if missing_home(base) or shared_reason(os.path.join(base, "matplotlib")) is not None:
            break
    else:
        return
    try:
        folder = scratch_dir() / "matplotlib"
        os.close(open_private_dir(folder))
    except NotPrivate:
        return  # matplotlib falls back to a temporary folder of its own
    os.environ["MPLCONFIGDIR"] = str(folder)
