"""The fast engine's C kernel (``kernel.c``, package data): build, verify, load, call.

At batch 64 and hidden 32 every matrix is tiny, so the time of a PyTorch step goes to
launching ~2,000 small ops, not to arithmetic.  ``kernel.c`` does one run's forward,
backward through time, per-run gradient clipping and Adam update for a chunk of steps in
plain C loops (the same equations as :func:`attn_cli.core.copy_fast.backward.loss_and_grads`,
checked against it and against autograd in ``tests/test_copy_fast.py``).

It is compiled on first use with the system C compiler (``cc``/``gcc``, ``-O2
-ftree-vectorize``: as fast here as ``-O3`` and builds in about a second, no PyTorch
headers) into a per-user cache directory and loaded with :mod:`ctypes`.  The target ISA
follows the numeric mode (:mod:`attn_cli.numerics`): ``portable`` builds for x86-64-v3
(AVX2 + FMA, the ISA the mode pins torch to; baseline code on other CPUs), so an AVX-512
host computes the same bits as an AVX2 one; ``native`` builds with ``-march=native``.  The
folder must be private (created 0700, ours, writable by no one else), else a fresh
``mkdtemp`` folder of this process is used; the build key covers the source, the mode and
flags, ``cc --version`` and the CPU's feature flags; the library's SHA-256 is recorded
beside it and checked before every load (a mismatch rebuilds).  ctypes releases the GIL
during the call, so several runs train in parallel from Python threads.  Where no compiler
works or the library does not load, :func:`load` returns None (one warning on stderr) and
the fast engine uses its PyTorch path.

Layout: the parameters of one run are one float32 row in the order of
``model.parameters()``; :func:`offsets` hands the kernel where each role lives
(:mod:`attn_cli.core.copy_fast.layout`), after checking the kernel's sizes against it.
Tokens are int64.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Optional

import torch

from attn_cli import numerics
from attn_cli.core.copy_fast.layout import ROLES, param_layout

SOURCES = ("kernel.c", "kernel_math.h")  # package data beside this module; the first is compiled


@lru_cache(maxsize=None)
def c_sources() -> dict[str, str]:
    """The kernel's C files by name, read from the installed package (editable or not)."""
    folder = resources.files(__package__)
    return {name: folder.joinpath(name).read_text(encoding="utf-8") for name in SOURCES}


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_tried = False
_error: Optional[str] = None
_warned = False

BASE_FLAGS = ["-O2", "-ftree-vectorize", "-fvect-cost-model=dynamic", "-ffp-contract=fast",
              "-fno-math-errno", "-fno-trapping-math", "-shared", "-fPIC", "-std=c11"]
PORTABLE_ISA = ["-march=x86-64-v3"]  # AVX2 + FMA: what the portable mode pins torch to
PORTABLE_ISA_FALLBACK = ["-mavx2", "-mfma"]  # compilers without x86-64-v3 (GCC < 11, clang < 12)


# --------------------------------------------------------------------------- where it lives

def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attn_cli" / "kernels"


def unsafe_reason(path: Path) -> Optional[str]:
    """Why ``path`` is no place to load a shared library from (None: a private folder of ours).

    It must be a real folder (not a symlink), owned by this user, writable by no one else.
    """
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot stat {path}: {exc.strerror}"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if st.st_uid != os.getuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user ({os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def private_dir(path: Path) -> Optional[Path]:
    """``path`` created with mode 0700 if missing; None when it cannot be had or is not private."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
    except OSError:
        return None
    return None if unsafe_reason(path) else path


_scratch: Optional[Path] = None


def _scratch_dir() -> Path:
    """A fresh private folder (mkdtemp: 0700) for this process only, removed at exit."""
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="attn_cli_kernel_"))
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


def kernel_dir() -> Path:
    """The per-user cache folder if it is private, else this process's own scratch folder.

    Never a shared fixed path: a folder another user can write could hold a planted library.
    """
    return private_dir(_cache_dir()) or _scratch_dir()


# --------------------------------------------------------------------------- what it is built from

def _compiler() -> Optional[str]:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def compiler_version(cc: str) -> str:
    """``cc --version`` (its first lines), part of the build key: a new compiler rebuilds."""
    try:
        proc = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return (proc.stdout or proc.stderr).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"


def cpu_features() -> str:
    """The CPU's feature flags (``-march=native`` builds for them), part of the build key."""
    return " ".join(sorted(numerics.cpu_flags())) or f"{platform.machine()} {platform.processor()}"


def accepts(cc: str, flags: tuple[str, ...]) -> bool:
    """Whether the compiler ``cc`` takes ``flags`` (a syntax-only run on an empty file)."""
    return _accepts(cc, tuple(flags))


@lru_cache(maxsize=None)
def _accepts(cc: str, flags: tuple[str, ...]) -> bool:
    try:
        proc = subprocess.run([cc, *flags, "-fsyntax-only", "-x", "c", os.devnull],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def isa_flags(cc: str, mode: str, machine: Optional[str] = None, flags: Optional[frozenset] = None) -> list[str]:
    """The target-ISA flags of numeric ``mode`` on this CPU (or the one described).

    ``native``: ``-march=native``.  ``portable``: x86-64-v3 (AVX2 + FMA) on an x86-64 CPU
    that has them, so that AVX-512 hosts build the same code as AVX2 hosts; the compiler's
    baseline elsewhere (an older x86-64, ARM), as torch's portable pins do.
    """
    if mode == "native":
        return ["-march=native"]
    if not numerics.is_x86_64(machine):
        return []
    if not {"avx2", "fma"} <= (numerics.cpu_flags() if flags is None else flags):
        return []
    return list(PORTABLE_ISA) if accepts(cc, tuple(PORTABLE_ISA)) else list(PORTABLE_ISA_FALLBACK)


def compile_flags(cc: str, mode: Optional[str] = None) -> list[str]:
    """Every flag of the build under ``mode`` (default: this process's numeric mode)."""
    return BASE_FLAGS + isa_flags(cc, mode or numerics.current_mode())


def build_key(cc: str, mode: Optional[str] = None) -> str:
    mode = mode or numerics.current_mode()
    parts = [*c_sources().values(), mode, " ".join(compile_flags(cc, mode)), cc, compiler_version(cc),
             platform.machine(), cpu_features()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- build and load

def _build(cc: str, into: Path) -> Path:
    """Compile into the private folder ``into``; raises RuntimeError with the compiler's message."""
    for name, text in c_sources().items():
        (into / name).write_text(text)
    # relative names and cwd: the library's bytes do not depend on the folder's name
    proc = subprocess.run([cc, *compile_flags(cc), SOURCES[0], "-o", "copy_fast.so", "-lm"],
                          capture_output=True, text=True, cwd=into)
    if proc.returncode != 0:
        raise RuntimeError(f"{cc} failed: {proc.stderr.strip()[:500]}")
    return into / "copy_fast.so"


def _install(built: Path, so: Path) -> None:
    """Copy the built library into the cache with its SHA-256 beside it (both atomic)."""
    from attn_cli import io

    data = built.read_bytes()
    io.write_bytes(so, data)
    io.write_text(so.with_name(so.name + ".sha256"), hashlib.sha256(data).hexdigest() + "\n")


def _verified(so: Path) -> bool:
    """The cached library exists and its bytes match the SHA-256 recorded beside it."""
    try:
        recorded = so.with_name(so.name + ".sha256").read_text().strip()
        return so.is_file() and not so.is_symlink() and recorded == sha256_of(so)
    except OSError:
        return False


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    f, i, l, d, p = ctypes.c_float, ctypes.c_int, ctypes.c_long, ctypes.c_double, ctypes.c_void_p
    lib.param_count.argtypes, lib.param_count.restype = [i, i], l
    lib.role_sizes.argtypes, lib.role_sizes.restype = [i, i, p], None
    lib.loss_and_grad.argtypes = [p, p, p, i, i, i, i, p]
    lib.loss_and_grad.restype = d
    lib.train_steps.argtypes = [p, p, p, p, l, p, i, i, i, i, i, d, d, p, p]
    lib.train_steps.restype = i
    return lib


def _load_or_build(cc: str) -> ctypes.CDLL:
    """The verified cached library, else a fresh build (installed for next time).

    A fresh build is loaded from the private folder it was compiled in, so a concurrent
    builder replacing the cached copy can never change what this process loads.
    """
    so = kernel_dir() / f"copy_fast_{build_key(cc)}.so"
    if _verified(so):
        try:
            return _bind(so)
        except OSError:
            pass  # a library that does not load (corrupt, noexec mount): rebuild it
    with tempfile.TemporaryDirectory(prefix="attn_cli_build_") as tmp:  # mode 0700
        built = _build(cc, Path(tmp))
        try:
            _install(built, so)
        except Exception:
            pass  # a cache that cannot be written only costs a rebuild next time
        return _bind(built)  # the mapping outlives the folder


def load() -> Optional[ctypes.CDLL]:
    """The compiled kernel (built on first use), or None where it cannot be built or loaded.

    On None, :func:`load_error` says why and one warning has gone to stderr: the fast
    engine then uses its PyTorch path.
    """
    global _lib, _tried, _error
    with _lock:
        if _tried:
            return _lib
        _tried = True
        cc = _compiler()
        try:
            if cc is None:
                raise RuntimeError("no C compiler found")
            _lib = _load_or_build(cc)
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
        raise RuntimeError(f"the C kernel's parameter layout ({dict(zip(ROLES, have.tolist()))}) differs "
                           f"from the {model} model's ({dict(zip(ROLES, want))})")
    return torch.tensor([lay.offset_of(role) for role in ROLES] + [lay.size], dtype=torch.int64)


def _warn(reason: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(f"warning: the copy-task C kernel is not available ({reason}); "
                         "the fast engine uses PyTorch ops\n")
        sys.stderr.flush()


def backend() -> str:
    """The fast engine's CPU backend after :func:`load`: "kernel" or "torch"."""
    return "kernel" if _lib is not None else "torch"


def load_error() -> Optional[str]:
    """Why :func:`load` returned None (after it was called)."""
    return _error


def _reset_for_tests() -> None:
    global _lib, _tried, _error, _warned
    _lib, _tried, _error, _warned = None, False, None, False
