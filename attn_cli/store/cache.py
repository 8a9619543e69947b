"""The per-user cache: finished runs and Results, keyed by all that determines them, shared by every ``--out``."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attn_cli.store import private, typed

KEY_FILE, KEY_BYTES = "hmac.key", 32  # the per-user HMAC key, in the cache folder (secrets.token_bytes)
TAG_FILE = "CACHEDIR.TAG"
# the Cache Directory Tagging signature (https://bford.info/cachedir/): backup tools skip the folder
TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
TAG = (
    TAG_SIGNATURE + b"\n# This file is a cache directory tag created by attn (attn-cli).\n"
    b"# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
ENTRY_FILE = re.compile(r"[0-9a-f]{64}\.json")  # an entry's file name: the SHA-256 of its key
GROUP = re.compile(r"[a-z][a-z0-9_]*")  # an entry's folder: the experiment's name
# a Result entry's size bound, where no spec gives one: generous, and still bounds what is read
RESULT_MAX_BYTES = 16 * 2**20
CLEAR_MAX_BYTES = 4 * RESULT_MAX_BYTES  # an entry larger than this is not read to prove it ours: kept
_MAC_CONTEXT = b"attn cache entry v1\0"
_HEAD, _MID, _TAIL = b'{"hmac": "', b'", "entry": ', b"}\n"
_MAC_HEX = 64


class Unavailable(Exception):
    """The cache folder or its key cannot be used (not private, unwritable, not our key): no cache, one warning."""


class Refused(ValueError):
    """One entry that cannot be used (HMAC, not a regular file, too big, another key): recomputed, with a note."""


def digest(data: Any) -> str:
    """SHA-256 of bytes, or of a JSON value (keys sorted)."""
    raw = data if isinstance(data, bytes) else json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()


def entry_file(key: dict) -> str:
    """The file name of ``key``'s entry."""
    return f"{digest(key)}.json"


def cache_path(root: str | os.PathLike, name: str, key: dict) -> Path:
    """Where ``key``'s entry of ``name`` lives under ``root``, to show (the cache uses descriptors)."""
    return Path(root) / name / entry_file(key)


class Cache:
    """The opened per-user cache: a descriptor of the proven private folder and the HMAC key.
    ``with Cache.open(root) as store:`` then ``store.load("sqrt_dk", key, max_bytes)`` (None: no
    entry; Refused: not usable) and ``store.store("sqrt_dk", key, payload)``."""

    def __init__(self, root: Path, fd: int, secret: bytes | None):
        self.root, self._fd, self._secret = root, fd, secret

    @classmethod
    def open(cls, root: str | os.PathLike, create: bool = True) -> Cache:
        """The cache at ``root`` (made 0700, tagged, keyed when ``create``); Unavailable (why) if not to be had."""
        root = Path(root)
        try:
            fd = open_cache_dir(root, create)  # private, tagged as attn's
        except private.NotPrivate as exc:
            raise Unavailable(str(exc)) from None  # names the component and why
        except OSError as exc:
            raise Unavailable(f"{root}: {exc.strerror or exc}") from None
        with private.closed_on_error(fd):
            return cls(root, fd, _key(fd, root, create))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load(self, name: str, key: dict, max_bytes: int) -> Any | None:
        """The payload (at most ``max_bytes``) stored for ``key`` under ``name``; None when there
        is none.  Raises :class:`Refused` (with the reason) for one that cannot be trusted or read."""
        if self._secret is None:
            return None
        sub = self._group(name, create=False)
        if sub is None:
            return None
        try:
            body = self._read(sub, entry_file(key), max_bytes + len(json.dumps(key)) + 256)  # + key, framing
        finally:
            os.close(sub)
        if body is None:
            return None
        try:
            obj = typed.parse_json(body)  # nested at most typed.MAX_DEPTH deep: never RecursionError
        except ValueError as exc:  # signed by us, so damaged by our own bug
            raise Refused(str(exc)) from None
        if not isinstance(obj, dict) or obj.get("key") != key or "payload" not in obj:
            raise Refused("its key does not match")
        return obj["payload"]

    def store(self, name: str, key: dict, payload: Any) -> None:
        """Store a JSON payload for ``key`` under ``name`` (atomic, 0600, signed); Unavailable when unwritable."""
        if self._secret is None:  # opened without create, before any key existed
            raise Unavailable("the cache has no key yet")
        payload = json.loads(json.dumps(payload))  # exactly as it reads back
        body = json.dumps({"key": key, "payload": payload}).encode()  # the payload's key order kept
        data = _HEAD + self._mac(body).encode() + _MID + body + _TAIL
        try:
            sub = self._group(name, create=True)
            assert sub is not None  # create=True: made, or Refused
            try:
                private.write_atomic(sub, entry_file(key), data, mode=0o600)
            finally:
                os.close(sub)
        except (OSError, Refused) as exc:
            # no path in the message: it may end in a Result's notes, which are shared
            raise Unavailable(
                f"cannot write {name}/{entry_file(key)[:12]}...: {getattr(exc, 'strerror', None) or exc}"
            ) from None

    def _mac(self, body: bytes) -> str:
        assert self._secret is not None  # callers return or raise first when there is no key
        return hmac.new(self._secret, _MAC_CONTEXT + body, hashlib.sha256).hexdigest()

    def _read(self, sub: int, fname: str, max_bytes: int) -> bytes | None:
        """The body of entry ``fname`` in group ``sub`` once its HMAC holds (before any parse); None: no such file."""
        try:
            data = private.read_regular(sub, fname, max_bytes)
        except (OSError, ValueError) as exc:  # EACCES; not a regular file, not ours, over the bound
            raise Refused(getattr(exc, "strerror", None) or str(exc)) from None
        if data is None:
            return None
        start = len(_HEAD) + _MAC_HEX + len(_MID)
        if not (data.startswith(_HEAD) and data[len(_HEAD) + _MAC_HEX : start] == _MID and data.endswith(_TAIL)):
            raise Refused("it carries no HMAC where an entry has one: edited, or not written by attn")
        body = data[start : -len(_TAIL)]
        if not hmac.compare_digest(data[len(_HEAD) : len(_HEAD) + _MAC_HEX], self._mac(body).encode()):
            raise Refused("its HMAC does not match: edited, or written by another cache")
        return body

    def _group(self, name: str, create: bool) -> int | None:
        """The entries' folder ``name`` (made 0700 when ``create``), or None; Refused when not a private one of ours."""
        if not GROUP.fullmatch(name):
            raise ValueError(f"bad cache group name {name!r}")
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            try:
                fd = os.open(name, flags, dir_fd=self._fd)
            except FileNotFoundError:
                if not create:
                    return None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=self._fd)
                fd = os.open(name, flags, dir_fd=self._fd)
        except OSError as exc:  # a symlink (ELOOP), a file (ENOTDIR), EACCES
            raise Refused(f"{name}/ is not a usable folder: {exc.strerror}") from None
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            os.close(fd)
            raise Refused(f"{name}/ is not a private folder of this user")
        return fd

    def summary(self) -> dict[str, tuple[int, int]]:
        """Entries and their bytes per group (experiment): ``{"copy_task": (40, 123456)}``."""
        return {name: (len(files), sum(size for _, size in files)) for name, _, files in self._groups() if files}

    def clear(self, dry_run: bool = False) -> Cleared:
        """Remove (``dry_run``: only list) every entry this cache proves its own (a regular file of attn's
        layout whose HMAC verifies under this key), each group folder it emptied, the key; nothing else."""
        cleared = Cleared()
        for name, sub, files in self._groups():
            for fname, size in files:
                if not self._signed(sub, fname):
                    cleared.kept.append(f"{name}/{fname}")
                    continue
                if not dry_run:
                    try:
                        os.unlink(fname, dir_fd=sub)
                    except FileNotFoundError:
                        continue
                n, b = cleared.removed.get(name, (0, 0))
                cleared.removed[name] = (n + 1, b + size)
            if not dry_run and name in cleared.removed and not os.listdir(sub):
                with contextlib.suppress(OSError):  # made by attn (it held attn's entries) and empty
                    os.rmdir(name, dir_fd=self._fd)
        cleared.key = self._secret is not None
        if not dry_run and cleared.key:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(KEY_FILE, dir_fd=self._fd)
            self._secret = None
        return cleared

    def _signed(self, sub: int, fname: str) -> bool:
        """Whether ``fname`` in the group ``sub`` is a regular file of ours signed by this key."""
        if self._secret is None:
            return False
        try:
            return self._read(sub, fname, CLEAR_MAX_BYTES) is not None
        except (ValueError, OSError):  # Refused is a ValueError: not ours to remove
            return False

    def _groups(self) -> Iterator[tuple[str, int, list[tuple[str, int]]]]:
        """Each private group folder of ours: its name, a descriptor (open meanwhile), its entries (name, size)."""
        with os.scandir(self._fd) as groups:
            names = sorted(g.name for g in groups if GROUP.fullmatch(g.name) and g.is_dir(follow_symlinks=False))
        for name in names:
            try:
                sub = self._group(name, create=False)
            except Refused:
                continue
            if sub is None:
                continue
            try:
                with os.scandir(sub) as files:
                    items = [
                        (f.name, f.stat(follow_symlinks=False).st_size)
                        for f in files
                        if ENTRY_FILE.fullmatch(f.name) and f.is_file(follow_symlinks=False)
                    ]
                yield name, sub, sorted(items)
            finally:
                os.close(sub)


@dataclasses.dataclass
class Cleared:
    """What ``attn cache clear`` removed (or would): entries and bytes per group, the key, the files not proven ours."""

    removed: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    key: bool = False
    kept: list[str] = dataclasses.field(default_factory=list)


def open_cache_dir(root: str | os.PathLike, create: bool = True) -> int:
    """A descriptor of attn's cache folder ``root``: proven private, tagged with attn's ``CACHEDIR.TAG``
    (with ``create``, tagged now when missing, empty or an earlier attn's: its key or ``kernels/``);
    NotPrivate for one holding anything else, or in a home folder that does not exist."""
    reason = private.missing_home(root) if create else None
    if reason:
        raise private.NotPrivate(reason)
    fd = private.open_private_dir(root, create=create)
    with private.closed_on_error(fd):
        try:  # attn's tag: a regular file of ours, the standard's signature, attn's name
            tag = private.read_regular(fd, TAG_FILE, 4096)
        except ValueError:
            tag = None
        if not (tag and tag.startswith(TAG_SIGNATURE) and b"attn" in tag):
            names = set(os.listdir(fd))
            earlier = not names or names <= {KEY_FILE, "kernels"} or KEY_FILE in names and _a_key(fd)
            if not earlier:
                raise private.NotPrivate(
                    f"{root} is not attn's cache folder (it has no {TAG_FILE} naming attn and holds other files)"
                )
            if not create:
                raise private.NotPrivate(
                    f"{root} has no {TAG_FILE} naming attn yet"
                    + (" (an earlier attn's cache: the next command that caches adopts it)" if names else "")
                )
            try:
                private.write_atomic(fd, TAG_FILE, TAG, mode=0o600)
            except OSError as exc:
                raise private.NotPrivate(f"cannot write {os.path.join(root, TAG_FILE)}: {exc.strerror}") from None
    return fd


def _a_key(fd: int) -> bool:
    try:
        return is_key(os.stat(KEY_FILE, dir_fd=fd, follow_symlinks=False))
    except OSError:
        return False


def is_key(st: os.stat_result) -> bool:
    """Whether ``st`` is that of an attn cache key: a regular 0600 file of ours of its size."""
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_uid == os.geteuid()
        and stat.S_IMODE(st.st_mode) == 0o600
        and st.st_size == KEY_BYTES
    )


def special_folder(path: Path) -> str | None:
    """Why ``path`` is never a cache to clear (``/``, the home folder, a mount point; through symlinks), or None."""
    try:
        st = os.stat(path)
        up = os.stat(os.path.join(path, ".."))
    except OSError:
        return None
    if (st.st_dev, st.st_ino) == (up.st_dev, up.st_ino):
        return f"{path} is the root folder"
    with contextlib.suppress(OSError, RuntimeError, KeyError):
        home = os.stat(os.path.expanduser("~"))
        if (st.st_dev, st.st_ino) == (home.st_dev, home.st_ino):
            return f"{path} is the home folder"
    if st.st_dev != up.st_dev:
        return f"{path} is a mount point"
    return None


def _key(fd: int, root: Path, create: bool) -> bytes | None:
    """This user's HMAC key in ``fd``, made on first use (first writer wins); trusted only as :func:`is_key`."""
    for _ in range(2):
        try:
            kfd = os.open(KEY_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                return None
            _make_key(fd, root)
            continue
        except OSError as exc:
            raise Unavailable(f"its key {root / KEY_FILE} cannot be read: {exc.strerror}") from None
        try:
            st = os.fstat(kfd)
            data = os.read(kfd, KEY_BYTES + 1) if stat.S_ISREG(st.st_mode) else b""
        finally:
            os.close(kfd)
        if not is_key(st) or len(data) != KEY_BYTES:
            raise Unavailable(
                f"its key {root / KEY_FILE} is not trusted (it must be a regular file of "
                f"this user, mode 0600, of {KEY_BYTES} bytes)"
            )
        return data
    raise Unavailable(f"its key {root / KEY_FILE} vanished while it was made")  # pragma: no cover


def _make_key(fd: int, root: Path) -> None:
    """Write a fresh key and link it in place; an existing key wins."""
    try:
        private.write_atomic(fd, KEY_FILE, secrets.token_bytes(KEY_BYTES), mode=0o600, replace=False)
    except OSError as exc:
        raise Unavailable(f"cannot write its key in {root}: {exc.strerror}") from None


@contextlib.contextmanager
def opened(root: str | os.PathLike | None, notes: list[str]) -> Iterator[Cache | None]:
    """The cache at ``root`` while the block runs, or None: no ``root``, or one that cannot be
    used now (a note in ``notes``; the CLI has warned about the folder already)."""
    store = None
    if root is not None:
        try:
            store = Cache.open(root)
        except Unavailable:
            notes.append("the cache folder cannot be used now; running without cache")
    with store or contextlib.nullcontext():
        yield store
