"""Up-front memory estimates: refuse what would not fit instead of crashing mid-run (design
notes: ``docs/design.md``, section ``attn_cli.core.memory``)."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

from attn_cli.core.numerics import is_cuda
from attn_cli.errors import MemoryRefused
from attn_cli.units import human_bytes

# upper bounds measured on x86-64 Linux: the address space (VmSize) of a process that imports torch
TORCH_VM_BYTES = 713 * 2**20
# a copy-task worker pool: the fork server's own memory, once, and each worker's largest USS (the rest is shared)
FORKSERVER_BYTES = 290 * 2**20
WORKER_BYTES = 45 * 2**20
CUDA_CONTEXT_BYTES = 512 * 2**20  # one process's CUDA context (runtime, cuBLAS, cuDNN): ~0.5 GB (issue 18)

CGROUP_FS = Path("/sys/fs/cgroup")  # where the cgroup file systems are mounted
PROC_SELF = Path("/proc/self")  # this process's /proc entry (cgroup membership, VmSize)
UNLIMITED = 2**62  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1; anything above this


def _kb_field(path: Path, field: str) -> int | None:
    """The ``field:  N kB`` line of a /proc file (meminfo, status), in bytes; None where absent."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def free_bytes() -> int:
    """MemAvailable from /proc/meminfo, else total RAM."""
    available = _kb_field(Path("/proc/meminfo"), "MemAvailable")
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if available is None else available


def _read_int(path: Path) -> int | None:
    """The number in a cgroup file; None where it is missing, "max" or unlimited."""
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return None if value >= UNLIMITED else value


def _cgroup_dirs() -> list[tuple[Path, str, str]]:
    """(folder, limit file, usage file) of this process's memory cgroup and each parent."""
    try:
        lines = (PROC_SELF / "cgroup").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "" and (CGROUP_FS / "cgroup.controllers").exists():  # v2, unified
            root, files = CGROUP_FS, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):  # v1
            root, files = CGROUP_FS / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        folder = root / path.lstrip("/")
        if not folder.is_dir():  # a cgroup namespace or a bind mount: the mount shows our own cgroup
            folder = root
        found.append((folder, *files))
        while folder != root and root in folder.parents:
            folder = folder.parent
            found.append((folder, *files))
    return found


def cgroup_headroom() -> int | None:
    """Bytes left under the tightest cgroup memory limit on this process; None: no limit."""
    rooms = []
    for folder, limit_file, usage_file in _cgroup_dirs():
        limit = _read_int(folder / limit_file)
        if limit is not None:
            rooms.append(max(0, limit - (_read_int(folder / usage_file) or 0)))
    return min(rooms, default=None)


def mapped_bytes() -> int:
    """This process's address space (VmSize), plus torch's mappings until torch is imported (every run does)."""
    size = _kb_field(PROC_SELF / "status", "VmSize") or 0
    return size if "torch" in sys.modules else size + TORCH_VM_BYTES


def address_space_limit() -> int | None:
    """The soft ``RLIMIT_AS`` (``ulimit -v``) in bytes; None when unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def address_space_headroom() -> int | None:
    """Bytes this process may still map under ``RLIMIT_AS``; None when unlimited."""
    limit = address_space_limit()
    return None if limit is None else max(0, limit - mapped_bytes())


def bounds(device: str = "cpu") -> list[tuple[int, str]]:
    """Every bound on new memory for ``device``, as (bytes, what it is)."""
    if is_cuda(device):
        import torch

        free, _total = torch.cuda.mem_get_info()
        return [(int(free), f"free on {device}")]
    limits = [
        (free_bytes(), "free on cpu"),
        (cgroup_headroom(), "left under the cgroup's memory limit"),
        (address_space_headroom(), "left under the address-space limit (ulimit -v)"),
    ]
    return [(room, what) for room, what in limits if room is not None]


def available_bytes(device: str = "cpu") -> int:
    """Memory a run may still take on ``device``: the smallest of :func:`bounds`."""
    return min(b for b, _ in bounds(device))


def check_fits(nbytes: float, what: str, device: str = "cpu", fraction: float = 0.5) -> None:
    """Raise :class:`MemoryRefused` when ``nbytes`` exceeds ``fraction`` of the memory left."""
    available = available_bytes(device)
    if nbytes > available * fraction:
        named = [name for b, name in bounds(device) if b == available]  # the bound that binds
        where = named[0] if named and "free" not in named[0] else f"free on {device}"
        raise MemoryRefused(
            f"{what} needs about {human_bytes(nbytes)}, more than {fraction:.0%} of the "
            f"{human_bytes(available)} {where}; refused before starting"
        )


def pool_bytes(workers: int) -> int:
    """Resident memory of a forkserver pool of ``workers`` worker processes (0: no pool)."""
    return FORKSERVER_BYTES + workers * WORKER_BYTES if workers > 0 else 0


def guard(
    nbytes: float, what: str, device: str = "cpu", fraction: float = 0.5, workers: int = 0, processes: int = 1
) -> None:
    """The one up-front check every experiment makes before allocating anything: ``nbytes`` (its
    ``estimate_bytes(config)``) plus :func:`pool_bytes` of its ``workers`` on the CPU, where draws
    are made; another device as well, on cuda with one CUDA context per process (``processes``)."""
    if workers > 0:
        what = f"{what}, in {workers} worker process(es) (about {human_bytes(pool_bytes(workers))} before any tensor)"
    check_fits(nbytes + pool_bytes(workers), what, "cpu", fraction)
    if device != "cpu":
        contexts = processes * CUDA_CONTEXT_BYTES if is_cuda(device) else 0
        contexts_named = f" + {processes} CUDA context(s) of ~0.5 GB" if contexts else ""
        check_fits(nbytes + contexts, what + contexts_named, device, fraction)


def out_of_memory(exc: BaseException) -> str | None:
    """One line naming the bound that ran out, for a failed allocation (``MemoryError``, or torch's
    ``RuntimeError``: "can't allocate memory" / CUDA "out of memory"); None for any other exception."""
    text = str(exc)
    if not isinstance(exc, MemoryError) and not ("can't allocate memory" in text or "out of memory" in text.lower()):
        return None
    if "CUDA" in text or "cuda" in text:
        return "out of memory on the GPU; use smaller sizes or --device cpu"
    limit = address_space_limit()
    if limit is not None:
        return (
            f"out of memory: the address-space limit (ulimit -v) of {human_bytes(limit)} ran out; "
            "raise it or use smaller sizes"
        )
    if cgroup_headroom() is not None:
        return "out of memory: the cgroup's memory limit ran out; raise it or use smaller sizes"
    return f"out of memory ({human_bytes(free_bytes())} free now); use smaller sizes"
