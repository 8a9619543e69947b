"""The fast engine's C kernel (``kernel.c``, package data): build, verify, load, call.

Design notes: ``docs/design.md``, section ``attn_cli.core.copy_fast.kernel``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from attn_cli.core.copy_fast import kernel_build as build
from attn_cli.core.copy_fast.layout import ROLES, param_layout
from attn_cli.store import private, scratch


@dataclass
class _State:
    """What :func:`load` found, once per process (a fresh one: the next load resolves and loads again)."""

    lib: ctypes.CDLL | None = None
    tried: bool = False
    error: str | None = None  # see load_error()
    warned: frozenset[str] = frozenset()  # the one-time warnings given ("load", "place")
    loaded: tuple[Path | None, str | None] = (None, None)  # see loaded()
    isa: str = ""  # the variant of lib (see kernel_isa())


_state = _State()
_lock = threading.Lock()
_variants: dict[str, ctypes.CDLL] = {}  # load_variant's libraries
_held: list[int] = []  # memfds of loaded libraries, kept open: no /proc/self/fd/N name is reused
MAX_RECORD_BYTES = 256


def cache_folder() -> Path:
    """Where built kernels are kept between runs: ``<per-user cache>/kernels`` (not created)."""
    return private.user_cache_root() / "kernels"


def _open_kernel_folder() -> tuple[int, Path]:
    """The cache folder opened and proven private, else this process's scratch folder after one
    warning naming the folder and the reason: its descriptor (the caller closes it) and its name."""
    folder = cache_folder()
    try:
        os.close(private.open_cache_dir(folder.parent))  # attn's own tagged folder, made if missing
        return private.open_private_dir(folder), folder
    except private.NotPrivate as exc:
        if _once("place"):  # the per-user cache folder's own warning (commands/cache.py) covers this one
            scratch.warn_unusable(
                folder.parent,
                f"warning: the copy-task C kernel is not kept in {folder} ({exc}); "
                "it is built in a private folder of this run",
            )
    elsewhere = scratch.scratch_dir() / "kernels"
    return private.open_private_dir(elsewhere), elsewhere


def _once(warning: str) -> bool:
    """True the first time ``warning`` is named in this loader state."""
    first = warning not in _state.warned
    _state.warned = _state.warned | {warning}
    return first


def _install(dir_fd: int, name: str, data: bytes) -> None:
    """Keep the built library in the cache folder with its SHA-256 beside it (both atomic)."""
    private.write_atomic(dir_fd, name, data)
    private.write_atomic(dir_fd, name + ".sha256", (hashlib.sha256(data).hexdigest() + "\n").encode())


def _verified(dir_fd: int, name: str) -> bytes | None:
    """The cached library's bytes when they match the SHA-256 recorded beside it, else None
    (a symlink, FIFO or oversized file counts as no library); the bytes hashed are those loaded."""
    try:
        data = private.read_regular(dir_fd, name, build.MAX_LIBRARY_BYTES)
        record = private.read_regular(dir_fd, name + ".sha256", MAX_RECORD_BYTES)
    except ValueError:
        return None
    if data is None or record is None:
        return None
    return data if record.decode("ascii", "replace").strip() == hashlib.sha256(data).hexdigest() else None


def _dlopen(data: bytes) -> ctypes.CDLL:
    """Load exactly ``data``: from a sealed memfd through ``/proc/self/fd/N`` (no file that
    anyone can replace, no noexec mount), else from a copy in a fresh private scratch folder."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("attn_copy_fast.so", os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 0))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            try:
                import fcntl

                seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            except (ImportError, AttributeError, OSError):
                pass  # no sealing (old kernel): the memfd is still reachable by this user only
            lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
        except OSError:
            os.close(fd)  # memfds not executable here (vm.memfd_noexec): try a file copy
        else:
            _held.append(fd)
            return lib
    with tempfile.TemporaryDirectory(prefix="load_", dir=scratch.scratch_dir()) as tmp:  # 0700
        path = Path(tmp) / "copy_fast.so"
        path.write_bytes(data)
        return ctypes.CDLL(str(path))  # the mapping outlives the file


def _bind(data: bytes) -> ctypes.CDLL:
    lib = _dlopen(data)
    i, n, d, p = ctypes.c_int, ctypes.c_long, ctypes.c_double, ctypes.c_void_p
    steps = [p, p, p, p, n, p, i, i, i, i, i, d, d, p, p]
    signatures = {
        "param_count": ([i, i], n),
        "role_sizes": ([i, i, p], None),
        "loss_and_grad": ([p, p, p, i, i, i, i, p], d),
        "train_steps": (steps, i),
        "train_steps_in": ([*steps, p], i),  # + the work space
        "kernel_isa": ([], ctypes.c_char_p),
        "work_floats": ([i, i, i, i], n),
        "expf_pair": ([p, p, p, n], None),
    }
    for name, (argtypes, restype) in signatures.items():
        getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, restype
    return lib


def _load_or_build(which: str) -> tuple[ctypes.CDLL, tuple[Path | None, str]]:
    """The verified cached library, else a fresh build (installed for next time, loaded from
    the bytes it produced); and what was loaded (see :func:`loaded`).  Raises RuntimeError
    where there is no compiler."""
    cc = build._compiler()
    if cc is None:
        raise RuntimeError("no C compiler found")
    name = f"copy_fast_{build.build_key(cc, which=which)}.so"
    dir_fd, folder = _open_kernel_folder()
    try:
        data = _verified(dir_fd, name)
        if data is not None:
            try:
                return _bind(data), (folder / name, hashlib.sha256(data).hexdigest())
            except OSError:
                pass  # a library that does not load (corrupt, noexec): rebuild it
        data = build._build_fresh(cc, which)
        try:
            _install(dir_fd, name, data)
        except (OSError, ValueError):
            pass  # a cache that cannot be written only costs a rebuild next time
        return _bind(data), (None, hashlib.sha256(data).hexdigest())
    finally:
        os.close(dir_fd)


def load() -> ctypes.CDLL | None:
    """The compiled kernel (built on first use), or None where it cannot be built or loaded
    (:func:`load_error` says why, one warning has gone to stderr: the fast engine uses PyTorch).
    Raises :class:`.kernel_build.KernelIsaError` (before building anything) where
    ``$ATTN_KERNEL_ISA`` names no variant or one this CPU cannot run."""
    with _lock:
        if _state.tried:
            return _state.lib
        which = build.variant()  # a bad ATTN_KERNEL_ISA is the user's error, never a silent fallback
        _state.tried = True
        try:
            _state.lib, _state.loaded = _load_or_build(which)
            _state.isa = which
        except Exception as exc:  # build or load failure of any kind: fall back, never crash
            _state.error = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
            if _once("load"):
                sys.stderr.write(
                    f"warning: the copy-task C kernel is not available ({_state.error}); "
                    "the fast engine uses PyTorch ops\n"
                )
                sys.stderr.flush()
        return _state.lib


def offsets(lib: ctypes.CDLL, model: str, hidden: int) -> torch.Tensor:
    """Where each role of the layout starts, in :data:`ROLES` order, then P: (12,) int64.
    Raises RuntimeError when the kernel's size of a role differs from the model's."""
    lay = param_layout(model, hidden)
    have = torch.zeros(len(ROLES), dtype=torch.int64)  # (roles,)
    lib.role_sizes(hidden, int(model == "attention"), have.data_ptr())
    want = [lay.numel_of(role) for role in ROLES]
    if have.tolist() != want:
        raise RuntimeError(
            f"the C kernel's parameter layout ({dict(zip(ROLES, have.tolist()))}) differs "
            f"from the {model} model's ({dict(zip(ROLES, want))})"
        )
    return torch.tensor([lay.offset_of(role) for role in ROLES] + [lay.size], dtype=torch.int64)


def loaded() -> tuple[Path | None, str | None]:
    """After :func:`load`: the cached library it loaded (None: a fresh build) and the SHA-256
    of the bytes it loaded (None: nothing loaded)."""
    return _state.loaded


def load_variant(which: str) -> ctypes.CDLL:
    """The kernel built as variant ``which`` (``avx2``, ``avx512``, ...), with :func:`load`'s
    build, cache and checks, for tests and benchmarks.  Raises RuntimeError where it cannot."""
    with _lock:
        if which not in _variants:
            _variants[which] = _load_or_build(which)[0]
        return _variants[which]


def kernel_isa() -> str:
    """The variant :func:`load` loaded ("avx512", "avx2", "native", "baseline"); "" if none."""
    return _state.isa if _state.lib is not None else ""


def load_error() -> str | None:
    """Why :func:`load` returned None (after it was called)."""
    return _state.error
