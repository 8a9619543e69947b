"""What one copy-task training run is, and what it returns: shared by both engines (``exact``:
the W9 2.3 program bit for bit on CPU; ``fast``: the same models and data on other kernels)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

VOCAB = 12  # 10 digits, BOS, one spare symbol
BOS = 10
EMBED = 32  # token embedding width
MODELS = ("attention", "plain")


@dataclass(frozen=True)
class RunSpec:
    model: str = "attention"  # "attention" (W9 2.3) or "plain" (the Week 8 encoder-decoder)
    length: int = 4  # sequence length to copy
    seed: int = 0  # torch.manual_seed before the model is built
    steps: int = 2500  # Adam steps
    hidden: int = 32  # GRU hidden size
    batch_size: int = 64  # training batch
    lr: float = 3e-3  # Adam learning rate
    eval_size: int = 1000  # one evaluation batch, drawn after training
    clip: float = 1.0  # gradient-norm clipping


@dataclass
class RunOutcome:
    spec: RunSpec
    teacher_forced: float  # token accuracy with teacher forcing
    free_running: float  # token accuracy generating from BOS
    exact: float  # fraction of whole sequences copied exactly (free running)
    seconds: float  # wall time of this run
    final_loss: float  # training loss at the last step
    # attention model only: one evaluation sequence, its free-running readout weights (decoder step x input)
    example_src: list[int] = field(default_factory=list)
    example_weights: list[list[float]] = field(default_factory=list)
    engine: str = "exact"
    cpu_seconds: float = 0.0  # CPU time the run used (0.0 where an engine does not measure it)
    # attention model only: the fraction of ALL evaluation decoder steps whose readout peaks at their own position
    diagonal: float | None = None
    isa: str = ""  # the CPU kernels torch dispatched to during the run (e.g. "AVX2")
    backend: str = "torch"  # what ran the arithmetic: "torch" (PyTorch ops) or "kernel" (the C kernel)
    # where a run on a Dask cluster ran: {"worker": address, "host": name, "cpu": model}; None: this machine
    ran_on: dict[str, str] | None = None
    kernel_isa: str = ""  # the C kernel's variant that ran ("avx512", "avx2", ...); "" without the kernel


# progress(step_done, total_steps, loss) called from inside a run, at most every few steps
StepCallback = Callable[[int, int, float], None] | None


def available_cpus() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
