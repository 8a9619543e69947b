"""The fast engine's C kernel (``kernel.c``, package data): the variant for this CPU, its flags and
build key, the build; then verify, load, call (design notes: ``docs/design.md``)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from attn_cli.core import numerics
from attn_cli.core.copy_fast.forward import ROLES, param_layout
from attn_cli.errors import AttnError
from attn_cli.store import cache, private

SOURCES = ("kernel.c", "kernel_math.h")  # package data beside this module; the first is compiled
BASE_FLAGS = ["-O2", "-ftree-vectorize", "-fvect-cost-model=dynamic", "-ffp-contract=off", "-fno-math-errno"]
BASE_FLAGS += ["-fno-trapping-math", "-shared", "-fPIC", "-std=c11"]
ISA_VAR = "ATTN_KERNEL_ISA"  # avx2 | avx512 | auto (default): the variant to build and run
ISA_CHOICES = ("avx2", "avx512", "auto")
# per variant: its flags, and the flags for compilers without that -march level (GCC < 11, clang < 12)
VARIANT_FLAGS = {
    "avx512": (
        ["-march=x86-64-v4", "-mprefer-vector-width=512"],
        "-mavx2 -mfma -mavx512f -mavx512cd -mavx512bw -mavx512dq -mavx512vl -mprefer-vector-width=512".split(),
    ),
    "avx2": (["-march=x86-64-v3"], ["-mavx2", "-mfma"]),  # what the portable mode pins torch to
    "native": (["-march=native"], ["-march=native"]),
    "baseline": ([], []),
}
# the CPU flags a variant's code may use (x86-64-v4: AVX-512 F, CD, BW, DQ, VL)
VARIANT_NEEDS = {
    "avx512": frozenset({"avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}),
    "avx2": frozenset({"avx2", "fma"}),
}
MAX_LIBRARY_BYTES = 64 << 20  # the library is ~100 KB: a planted huge file is never read whole
MAX_RECORD_BYTES = 256  # its SHA-256 record


class KernelIsaError(AttnError):
    """ATTN_KERNEL_ISA names no variant, or one this CPU cannot run."""


@functools.cache
def c_sources() -> dict[str, str]:
    """The kernel's C files by name, read from the installed package (editable or not)."""
    folder = resources.files(__package__)
    return {name: folder.joinpath(name).read_text(encoding="utf-8") for name in SOURCES}


def _compiler() -> str | None:
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


@functools.cache
def accepts(cc: str, flags: tuple[str, ...]) -> bool:
    """Whether the compiler ``cc`` takes ``flags`` (a syntax-only run on an empty file)."""
    try:
        proc = subprocess.run([cc, *flags, "-fsyntax-only", "-x", "c", os.devnull], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def _compile(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run cc in a process group of its own: a stopped attn stops it all (driver, cc1, as), SIGKILL after 5 s."""
    proc = subprocess.Popen(
        args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def variant(
    mode: str | None = None, machine: str | None = None, flags: frozenset | None = None, request: str | None = None
) -> str:
    """The kernel variant to build and run: ``avx512``, ``avx2``, ``native`` or ``baseline``.
    ``request`` (default: ``$ATTN_KERNEL_ISA``): ``avx2``/``avx512`` force that variant (KernelIsaError
    where the CPU cannot run it), ``auto`` or unset the widest this CPU (or the one described) runs."""
    raw = os.environ.get(ISA_VAR, "") if request is None else request
    want = raw.strip().lower() or "auto"
    if want not in ISA_CHOICES:
        raise KernelIsaError(f"{ISA_VAR}={raw!r} is not a kernel variant; choose from {', '.join(ISA_CHOICES)}")
    have = numerics.cpu_flags() if flags is None else flags
    x86 = numerics.is_x86_64(machine)
    if want != "auto":
        missing = sorted(VARIANT_NEEDS[want] - have) if x86 else ["x86-64"]
        if missing:
            raise KernelIsaError(
                f"{ISA_VAR}={want}: this CPU cannot run the {want} kernel (it lacks {', '.join(missing)})"
            )
        return want
    if (mode or numerics.current_mode()) == "native":
        return "native"
    if x86:
        for name in ("avx512", "avx2"):
            if VARIANT_NEEDS[name] <= have:
                return name
    return "baseline"


def isa_flags(
    cc: str, mode: str | None = None, machine: str = "", flags: frozenset | None = None, which: str | None = None
) -> list[str]:
    """The target-ISA flags of variant ``which`` (default: :func:`variant` of ``mode`` on this
    CPU, or on the one described); the fallback spelling where ``cc`` lacks the -march level."""
    which = which or variant(mode, machine, flags)
    first, fallback = VARIANT_FLAGS[which]
    return list(first) if accepts(cc, tuple(first)) else list(fallback)


def compile_flags(cc: str, mode: str | None = None, which: str | None = None) -> list[str]:
    """Every flag of the build of variant ``which`` (default: this process's, see :func:`variant`)."""
    return BASE_FLAGS + isa_flags(cc, mode or numerics.current_mode(), which=which)


def build_key(cc: str, mode: str | None = None, which: str | None = None) -> str:
    which = which or variant(mode)
    flags = " ".join(compile_flags(cc, mode, which))
    parts = [*c_sources().values(), which, flags, cc, compiler_version(cc), platform.machine(), cpu_features()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _build(cc: str, which: str | None = None) -> bytes:
    """Variant ``which`` (default: this process's) compiled in a private scratch folder; RuntimeError: cc's message."""
    with tempfile.TemporaryDirectory(prefix="build_", dir=private.scratch_dir()) as tmp:  # 0700
        into = Path(tmp)
        for name, text in c_sources().items():
            (into / name).write_text(text)
        # relative names and cwd: the library's bytes do not depend on the folder's name
        proc = _compile([cc, *compile_flags(cc, which=which), SOURCES[0], "-o", "copy_fast.so", "-lm"], cwd=into)
        if proc.returncode != 0:
            raise RuntimeError(f"{cc} failed: {proc.stderr.strip()[:500]}")
        fd = private.open_private_dir(into, create=False)
        try:
            data = private.read_regular(fd, "copy_fast.so", MAX_LIBRARY_BYTES)
        finally:
            os.close(fd)
    if data is None:
        raise RuntimeError(f"{cc} wrote no library")
    return data


@dataclass
class _State:
    """What :func:`load` found, once per process (a fresh one: the next load resolves and loads again)."""

    lib: ctypes.CDLL | None = None
    tried: bool = False
    error: str | None = None  # see load_error()
    warned: bool = False  # the warning about the cache folder given
    loaded: tuple[Path | None, str | None] = (None, None)  # see loaded()
    isa: str = ""  # the variant of lib (see kernel_isa())


_state = _State()
_lock = threading.Lock()
_held: list[int] = []  # memfds of loaded libraries, kept open: no /proc/self/fd/N name is reused


def cache_folder() -> Path:
    """Where built kernels are kept between runs: ``<per-user cache>/kernels`` (not created)."""
    return private.user_cache_root() / "kernels"


def _open_kernel_folder() -> tuple[int, Path]:
    """(descriptor, name) of the cache folder proven private, else of the scratch folder after one warning."""
    folder = cache_folder()
    try:
        os.close(cache.open_cache_dir(folder.parent))  # attn's own tagged folder, made if missing
        return private.open_private_dir(folder), folder
    except private.NotPrivate as exc:
        if not _state.warned:  # the per-user cache folder's own warning (commands/cache.py) covers this one
            _state.warned = True
            private.warn_unusable(
                folder.parent,
                f"warning: the copy-task C kernel is not kept in {folder} ({exc}); "
                "it is built in a private folder of this run",
            )
    elsewhere = private.scratch_dir() / "kernels"
    return private.open_private_dir(elsewhere), elsewhere


def _install(dir_fd: int, name: str, data: bytes) -> None:
    """Keep the built library in the cache folder with its SHA-256 beside it (both atomic)."""
    private.write_atomic(dir_fd, name, data)
    private.write_atomic(dir_fd, name + ".sha256", (hashlib.sha256(data).hexdigest() + "\n").encode())


def _verified(dir_fd: int, name: str) -> bytes | None:
    """The cached library's bytes if they match the SHA-256 beside them; None too for a symlink, FIFO or huge file."""
    try:
        data = private.read_regular(dir_fd, name, MAX_LIBRARY_BYTES)
        record = private.read_regular(dir_fd, name + ".sha256", MAX_RECORD_BYTES)
    except ValueError:
        return None
    if data is None or record is None:
        return None
    return data if record.decode("ascii", "replace").strip() == hashlib.sha256(data).hexdigest() else None


def _dlopen(data: bytes) -> ctypes.CDLL:
    """Load exactly ``data``: a sealed memfd via ``/proc/self/fd/N``, else a copy in a fresh private folder."""
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
    with tempfile.TemporaryDirectory(prefix="load_", dir=private.scratch_dir()) as tmp:  # 0700
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
    """The verified cached library, else a fresh build (then installed); what was loaded. RuntimeError: no cc."""
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler found")
    name = f"copy_fast_{build_key(cc, which=which)}.so"
    dir_fd, folder = _open_kernel_folder()
    try:
        data = _verified(dir_fd, name)
        if data is not None:
            try:
                return _bind(data), (folder / name, hashlib.sha256(data).hexdigest())
            except OSError:
                pass  # a library that does not load (corrupt, noexec): rebuild it
        data = _build(cc, which)
        try:
            _install(dir_fd, name, data)
        except (OSError, ValueError):
            pass  # a cache that cannot be written only costs a rebuild next time
        return _bind(data), (None, hashlib.sha256(data).hexdigest())
    finally:
        os.close(dir_fd)


def load() -> ctypes.CDLL | None:
    """The compiled kernel (built on first use), or None where it cannot be built or loaded (one warning, then
    the fast engine uses PyTorch; :func:`load_error` says why).  A bad ``$ATTN_KERNEL_ISA`` raises first."""
    with _lock:
        if _state.tried:
            return _state.lib
        which = variant()  # a bad ATTN_KERNEL_ISA is the user's error, never a silent fallback
        _state.tried = True
        try:
            _state.lib, _state.loaded = _load_or_build(which)
            _state.isa = which
        except Exception as exc:  # build or load failure of any kind: fall back, never crash
            _state.error = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
            sys.stderr.write(  # once: a loader state tries once
                f"warning: the copy-task C kernel is not available ({_state.error}); the fast engine uses PyTorch ops\n"
            )
            sys.stderr.flush()
        return _state.lib


def offsets(lib: ctypes.CDLL, model: str, hidden: int) -> torch.Tensor:
    """Where each role starts in :data:`ROLES` order, then P: (12,) int64; RuntimeError where the
    kernel's size of a role differs from the model's."""
    lay = param_layout(model, hidden)
    have = torch.zeros(len(ROLES), dtype=torch.int64)  # (roles,)
    lib.role_sizes(hidden, int(model == "attention"), have.data_ptr())
    want = [lay.numel_of(role) for role in ROLES]
    if have.tolist() != want:
        raise RuntimeError(
            f"the C kernel's parameter layout ({dict(zip(ROLES, have.tolist()))}) differs "
            f"from the {model} model's ({dict(zip(ROLES, want))})"
        )
    return torch.tensor([lay.offsets[lay.roles.index(role)] for role in ROLES] + [lay.size], dtype=torch.int64)


def loaded() -> tuple[Path | None, str | None]:
    """After :func:`load`: the cached library it loaded (None: a fresh build), the SHA-256 of its bytes."""
    return _state.loaded


@functools.cache
def load_variant(which: str) -> ctypes.CDLL:
    """The kernel built as variant ``which`` (RuntimeError where it cannot), for tests and benchmarks."""
    with _lock:
        return _load_or_build(which)[0]


def kernel_isa() -> str:
    """The variant :func:`load` loaded ("avx512", "avx2", "native", "baseline"); "" if none."""
    return _state.isa if _state.lib is not None else ""


def load_error() -> str | None:
    """Why :func:`load` returned None (after it was called)."""
    return _state.error
