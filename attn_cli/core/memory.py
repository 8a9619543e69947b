"""Up-front memory estimates: refuse what would not fit instead of crashing mid-run."""

from __future__ import annotations

import os

from attn_cli.errors import MemoryRefused
from attn_cli.units import human_bytes  # noqa: F401  (re-exported)


def available_bytes(device: str = "cpu") -> int:
    """Free memory on ``device`` (CPU: MemAvailable from /proc/meminfo, else total RAM)."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(nbytes: float, what: str, device: str = "cpu", fraction: float = 0.5) -> None:
    """Raise :class:`MemoryRefused` when ``nbytes`` exceeds ``fraction`` of free memory."""
    budget = available_bytes(device) * fraction
    if nbytes > budget:
        raise MemoryRefused(
            f"{what} needs about {human_bytes(nbytes)}, more than {fraction:.0%} of the "
            f"{human_bytes(budget / fraction)} free on {device}; refused before starting")


CUDA_CONTEXT_BYTES = 512 * 2 ** 20  # one process's CUDA context (runtime, cuBLAS, cuDNN): ~0.5 GB (issue 18)


def guard(nbytes: float, what: str, device: str = "cpu", fraction: float = 0.5, processes: int = 1) -> None:
    """The one up-front check every experiment makes before allocating anything.

    ``nbytes`` is the experiment's own estimate of the largest tensors it holds at once
    (its module's ``estimate_bytes(config)``).  Draws are made on the CPU, then moved, so the
    CPU is always checked; another device is checked as well, on cuda with one CUDA context
    (:data:`CUDA_CONTEXT_BYTES`) per process that uses it (``processes``).
    """
    check_fits(nbytes, what, "cpu", fraction)
    if device != "cpu":
        contexts = processes * CUDA_CONTEXT_BYTES if device.split(":")[0] == "cuda" else 0
        check_fits(nbytes + contexts, what + (f" + {processes} CUDA context(s) of ~0.5 GB" if contexts else ""),
                   device, fraction)
