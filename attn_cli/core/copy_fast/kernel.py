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
from pathlib import Path

import torch

from attn_cli.core.copy_fast import kernel_build as build
from attn_cli.core.copy_fast.layout import ROLES, param_layout
from attn_cli.store import private, scratch

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_tried = False
_error: str | None = None
_warned = False
_warned_place = False
_loaded: tuple[Path | None, str | None] = (None, None)  # see loaded()
_isa = ""  # the variant of _lib (see kernel_isa())
_variants: dict[str, ctypes.CDLL] = {}  # load_variant's libraries

# --------------------------------------------------------------------------- where it lives

MAX_RECORD_BYTES = 256


def cache_folder() -> Path:
    """Where built kernels are kept between runs: ``<per-user cache>/kernels`` (not created)."""
    return private.user_cache_root() / "kernels"


def _open_kernel_folder() -> tuple[int, Path]:
    """The cache folder opened and proven private (see :mod:`attn_cli.store.private`), else this
    process's scratch folder after one warning naming the folder and the reason.

    Returns the folder's descriptor (the caller closes it) and its name, for messages only:
    everything after this goes through the descriptor.
    """
    folder = cache_folder()
    try:
        os.close(private.open_cache_dir(folder.parent))  # attn's own tagged folder, made if missing
        return private.open_private_dir(folder), folder
    except private.NotPrivate as exc:
        _warn_place(folder, str(exc))
    elsewhere = scratch.scratch_dir() / "kernels"
    return private.open_private_dir(elsewhere), elsewhere


def _install(dir_fd: int, name: str, data: bytes) -> None:
    """Keep the built library in the cache folder with its SHA-256 beside it (both atomic)."""
    private.write_atomic(dir_fd, name, data)
    private.write_atomic(dir_fd, name + ".sha256", (hashlib.sha256(data).hexdigest() + "\n").encode())


def _verified(dir_fd: int, name: str) -> bytes | None:
    """The cached library's bytes when they match the SHA-256 recorded beside it, else None.

    Both are read through the folder's descriptor as regular files of ours (a symlink, FIFO
    or oversized file counts as no library), and the bytes hashed are the bytes loaded.
    """
    try:
        data = private.read_regular(dir_fd, name, build.MAX_LIBRARY_BYTES)
        record = private.read_regular(dir_fd, name + ".sha256", MAX_RECORD_BYTES)
    except ValueError:
        return None
    if data is None or record is None:
        return None
    return data if record.decode("ascii", "replace").strip() == hashlib.sha256(data).hexdigest() else None


_held: list[int] = []  # memfds of loaded libraries, kept open: no /proc/self/fd/N name is reused


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

                fcntl.fcntl(
                    fd,
                    fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE,
                )
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
    lib.param_count.argtypes, lib.param_count.restype = [i, i], n
    lib.role_sizes.argtypes, lib.role_sizes.restype = [i, i, p], None
    lib.loss_and_grad.argtypes = [p, p, p, i, i, i, i, p]
    lib.loss_and_grad.restype = d
    lib.train_steps.argtypes = [p, p, p, p, n, p, i, i, i, i, i, d, d, p, p]
    lib.train_steps.restype = i
    lib.train_steps_in.argtypes = [p, p, p, p, n, p, i, i, i, i, i, d, d, p, p, p]  # + the work space
    lib.train_steps_in.restype = i
    lib.kernel_isa.argtypes, lib.kernel_isa.restype = [], ctypes.c_char_p
    lib.work_floats.argtypes, lib.work_floats.restype = [i, i, i, i], n
    lib.expf_pair.argtypes, lib.expf_pair.restype = [p, p, p, n], None
    return lib


def _load_or_build(cc: str, which: str) -> tuple[ctypes.CDLL, tuple[Path | None, str]]:
    """The verified cached library, else a fresh build (installed for next time).

    The folder is opened once and proven private; the library's bytes are read through its
    descriptor, checked against the recorded SHA-256 and loaded from memory, so renaming any
    parent folder meanwhile cannot change what this process runs.  A fresh build is loaded
    from the bytes it produced, whatever a concurrent builder puts in the cache.
    Returns the library and what was loaded (see :func:`loaded`).
    """
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
    """The compiled kernel (built on first use), or None where it cannot be built or loaded.

    On None, :func:`load_error` says why and one warning has gone to stderr: the fast
    engine then uses its PyTorch path.  Raises :class:`.kernel_build.KernelIsaError` (before building
    anything) where ``$ATTN_KERNEL_ISA`` names no variant or one this CPU cannot run.
    """
    global _lib, _tried, _error, _loaded, _isa
    with _lock:
        if _tried:
            return _lib
        which = build.variant()  # a bad ATTN_KERNEL_ISA is the user's error, never a silent fallback
        _tried = True
        cc = build._compiler()
        try:
            if cc is None:
                raise RuntimeError("no C compiler found")
            _lib, _loaded = _load_or_build(cc, which)
            _isa = which
        except Exception as exc:  # build or load failure of any kind: fall back, never crash
            _error = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
            _warn(_error)
        return _lib


def offsets(lib: ctypes.CDLL, model: str, hidden: int) -> torch.Tensor:
    """Where each role of the layout starts, in :data:`ROLES` order, then P: (12,) int64.

    Raises RuntimeError when the kernel's size of a role differs from the model's (a model
    changed without the kernel): the kernel would read the wrong weights.
    """
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


def _warn_place(folder: Path, reason: str) -> None:
    global _warned_place
    if not _warned_place:
        _warned_place = True
        # the per-user cache folder's own warning (see attn_cli.cli.commands.cache) covers this one
        scratch.warn_unusable(
            folder.parent,
            f"warning: the copy-task C kernel is not kept in {folder} ({reason}); "
            "it is built in a private folder of this run",
        )


def loaded() -> tuple[Path | None, str | None]:
    """After :func:`load`: the cached library it loaded (None: a fresh build) and the SHA-256
    of the bytes it loaded (None: nothing loaded)."""
    return _loaded


def _warn(reason: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(
            f"warning: the copy-task C kernel is not available ({reason}); the fast engine uses PyTorch ops\n"
        )
        sys.stderr.flush()


def load_variant(which: str) -> ctypes.CDLL:
    """The kernel built as variant ``which`` (``avx2``, ``avx512``, ...), for tests and
    benchmarks that compare variants in one process; the same build, cache and checks as
    :func:`load`.  Raises RuntimeError where it cannot be built or loaded."""
    with _lock:
        if which not in _variants:
            cc = build._compiler()
            if cc is None:
                raise RuntimeError("no C compiler found")
            _variants[which] = _load_or_build(cc, which)[0]
        return _variants[which]


def kernel_isa() -> str:
    """The variant :func:`load` loaded ("avx512", "avx2", "native", "baseline"); "" if none."""
    return _isa if _lib is not None else ""


def backend() -> str:
    """The fast engine's CPU backend after :func:`load`: "kernel" or "torch"."""
    return "kernel" if _lib is not None else "torch"


def load_error() -> str | None:
    """Why :func:`load` returned None (after it was called)."""
    return _error


def _reset_for_tests() -> None:
    """Forget the loaded library, so that the next :func:`load` resolves and loads again."""
    global _lib, _tried, _error, _warned, _warned_place, _loaded, _isa
    _lib, _tried, _error, _warned, _warned_place, _loaded, _isa = None, False, None, False, False, (None, None), ""
