"""The fast engine's C kernel, built: its sources, the variant for this CPU, the compiler's
flags, the build key and the compile itself (loading and verifying: :mod:`.kernel`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import signal
import subprocess
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path

from attn_cli.core import numerics
from attn_cli.errors import AttnError
from attn_cli.store import private, scratch

SOURCES = ("kernel.c", "kernel_math.h")  # package data beside this module; the first is compiled


@cache
def c_sources() -> dict[str, str]:
    """The kernel's C files by name, read from the installed package (editable or not)."""
    folder = resources.files(__package__)
    return {name: folder.joinpath(name).read_text(encoding="utf-8") for name in SOURCES}


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


class KernelIsaError(AttnError):
    """ATTN_KERNEL_ISA names no variant, or one this CPU cannot run."""


MAX_LIBRARY_BYTES = 64 << 20  # the library is ~100 KB: a planted huge file is never read whole


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


@cache
def accepts(cc: str, flags: tuple[str, ...]) -> bool:
    """Whether the compiler ``cc`` takes ``flags`` (a syntax-only run on an empty file)."""
    try:
        proc = subprocess.run([cc, *flags, "-fsyntax-only", "-x", "c", os.devnull], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def _compile(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the compiler in a process group of its own; if attn is stopped meanwhile, the whole
    group (driver, cc1, as) gets SIGTERM (SIGKILL after 5 s) and is waited for before the
    exception goes on.  (``subprocess.run`` would kill the driver only.)"""
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

    ``request`` (default: ``$ATTN_KERNEL_ISA``): ``avx2``/``avx512`` force that variant, ``auto``
    (or unset) takes the widest this CPU (or the one described) runs, ``native`` in native mode.
    Raises :class:`KernelIsaError` for any other value, or a forced variant the CPU cannot run.
    """
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
    cc: str,
    mode: str | None = None,
    machine: str | None = None,
    flags: frozenset | None = None,
    which: str | None = None,
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
    mode = mode or numerics.current_mode()
    which = which or variant(mode)
    parts = [
        *c_sources().values(),
        which,
        " ".join(compile_flags(cc, mode, which)),
        cc,
        compiler_version(cc),
        platform.machine(),
        cpu_features(),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _build(cc: str, into: Path, which: str | None = None) -> bytes:
    """Compile variant ``which`` (default: this process's) in the private folder ``into``: the
    library's bytes, read through the folder's descriptor.  RuntimeError with cc's message."""
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


def _build_fresh(cc: str, which: str | None = None) -> bytes:
    """A fresh build in a new ``mkdtemp`` folder inside this process's scratch folder."""
    with tempfile.TemporaryDirectory(prefix="build_", dir=scratch.scratch_dir()) as tmp:  # 0700
        return _build(cc, Path(tmp), which)
