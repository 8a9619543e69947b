"""W9 5.2: the quadratic cost of attention (design notes: ``docs/design.md``, this module's section)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from attn_cli.experiments import ProgressCallback, ProgressEvent
from attn_cli.published.settings import SCALING_D_MODEL as TEXT_D_MODEL  # the d in "n^2 * d operations"
from attn_cli.published.w9_attention import SCALING
from attn_cli.units import text_memory

if TYPE_CHECKING:
    from torch import Generator

ARTIFACTS = ("w9-scaling",)
FIGURES = ()
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, False  # instant (the formula; --measure is a single command's)

TEXT_LENGTHS = tuple(SCALING)  # the n the text prints
# Measured n: large enough that the n^2 d products, not per-call overheads or a cache-resident
# score matrix (n=256 is ~10x faster than the n^2 trend on a CPU with 1 MB of L2), set the time.
MEASURE_LENGTHS = {"cpu": (512, 1024, 2048, 4096), "cuda": (2048, 4096, 8192, 16384, 32768)}
QUICK_MEASURE_LENGTHS = {"cpu": (512, 1024, 2048), "cuda": (1024, 2048, 4096, 8192)}
BYTES_PER_FLOAT = 4  # float32


def forward_bytes(n: int, d_model: int) -> int:
    """Estimated memory of one forward pass: q, k, v, output (n x d) + scores, weights (n x n)."""
    return BYTES_PER_FLOAT * (4 * n * d_model + 2 * n * n)


@dataclass(frozen=True)
class Config:
    seed: int = 0  # seeds the random q, k, v of the measurement
    device: str = "cpu"  # where the measured forward passes run
    lengths: tuple[int, ...] = TEXT_LENGTHS  # n of the formula table
    d_model: int = TEXT_D_MODEL  # d in n^2 d, and the head width of the measurement
    measure: bool = False  # also time real forward passes
    measure_lengths: tuple[int, ...] = MEASURE_LENGTHS["cpu"]  # n of the measurement
    repeats: int = 3  # timed passes per n (the fastest is kept)
    warmup: int = 1  # untimed passes per n before timing
    memory_fraction: float = 0.5  # refuse an n whose pass needs more than this share of free memory

    @classmethod
    def quick(cls, **overrides: Any) -> Config:
        device = overrides.get("device", "cpu")
        return cls(**{"measure_lengths": QUICK_MEASURE_LENGTHS[device], "repeats": 2, **overrides})


@dataclass
class FormulaRow:
    n: int
    entries: int  # n^2 score entries
    memory_bytes: int  # float32 bytes of the score matrix
    memory: str  # as the text prints it: "1.0 MB", "4.3 GB"
    operations: int  # n^2 d multiply-adds


@dataclass
class MeasuredRow:
    n: int
    time_s: float  # fastest forward time (used for the fit)
    median_s: float  # median forward time
    times_s: list[float]  # every timed pass
    peak_bytes: int  # peak memory of the pass (see Result.peak_method)
    formula_bytes: int  # forward_bytes(n, d): the up-front estimate
    operations: int  # n^2 d
    gflops: float  # achieved: 2 matmuls x 2 flops per multiply-add x n^2 d / time


@dataclass
class Result:
    config: dict
    formula: list[FormulaRow] = field(default_factory=list)
    measured_rows: list[MeasuredRow] = field(default_factory=list)
    peak_method: str = ""  # how peak_bytes was obtained
    exponent: float | None = None  # least-squares slope of log time vs log n
    device_name: str = ""
    threads: int = 0  # torch CPU threads during the measurement (timings on a shared CPU are noisy)
    load_average: float | None = None  # 1-minute load average before measuring (None where unknown)
    cpu_count: int = 0
    dropped: list[str] = field(default_factory=list)  # on a GPU: each n left out as too large, and why
    # what the measurement found on this run (JSON: under "timing"): times, memory peaks, the fit
    TIMING: ClassVar[tuple[str, ...]] = (
        *(f"measured_rows.*.{name}" for name in ("time_s", "median_s", "times_s", "peak_bytes", "gflops")),
        *("exponent", "load_average", "dropped"),
    )

    def measured(self) -> dict[str, Any]:
        """Check ID -> regenerated value, every length (only the text's have checks)."""
        names = (("entries", "entries"), ("memory", "memory_bytes"), ("operations", "operations"))
        return {f"w9-scaling.{r.n}.{name}": getattr(r, attr) for r in self.formula for name, attr in names}


def estimate_bytes(config: Config) -> int:
    """The largest measured forward pass (0 without --measure: the table is arithmetic)."""
    if not config.measure or not config.measure_lengths:
        return 0
    return max(forward_bytes(n, config.d_model) for n in config.measure_lengths)


def check_measurable(config: Config) -> list[tuple[int, str]]:
    """Check, before any allocation, that every n's forward pass fits. On the CPU the first n that
    does not refuses the measurement (MemoryRefused); on a GPU it is dropped and returned as (n, why),
    refused only when none fits."""
    from attn_cli.core.memory import check_fits, human_bytes
    from attn_cli.errors import MemoryRefused

    dropped: list[tuple[int, str]] = []
    for n in config.measure_lengths:
        what = (
            f"attention forward at n={n}, d_model={config.d_model} "
            f"(an n x n float32 score matrix is {human_bytes(BYTES_PER_FLOAT * n * n)}; "
            f"scores + weights + q, k, v, output)"
        )
        try:
            check_fits(forward_bytes(n, config.d_model), what, config.device, fraction=config.memory_fraction)
            if config.device != "cpu":  # inputs are drawn on the CPU first
                check_fits(BYTES_PER_FLOAT * 3 * n * config.d_model, what, "cpu", fraction=config.memory_fraction)
        except MemoryRefused as exc:
            if config.device == "cpu":
                raise
            dropped.append((n, str(exc)))
    if dropped and len(dropped) == len(config.measure_lengths):
        raise MemoryRefused(f"no size fits on {config.device}: " + dropped[0][1])
    return dropped


def _measure_one(
    n: int, config: Config, gen: Generator, progress: ProgressCallback, done: int, total: int
) -> MeasuredRow:
    import statistics
    import time

    import torch

    from attn_cli.core.attention import scaled_dot_product_attention

    cuda = config.device.startswith("cuda")
    d = config.d_model
    q, k, v = (torch.randn(1, n, d, generator=gen).to(config.device) for _ in range(3))  # (1, n, d) each

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(config.warmup):
        scaled_dot_product_attention(q, k, v)
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times = []
    peak = 0
    with torch.no_grad():
        for i in range(config.repeats):
            sync()
            t0 = time.perf_counter()
            out, weights = scaled_dot_product_attention(q, k, v)  # (1, n, d), (1, n, n)
            sync()
            times.append(time.perf_counter() - t0)
            if not cuda:  # estimate: inputs + scores (same size as weights) + weights + output
                peak = max(peak, q.nbytes + k.nbytes + v.nbytes + 2 * weights.nbytes + out.nbytes)
            del out, weights
            if progress is not None:
                progress(ProgressEvent(done + i + 1, total))
    if cuda:
        peak = torch.cuda.max_memory_allocated() - base + q.nbytes + k.nbytes + v.nbytes
    best, ops = min(times), n * n * d
    return MeasuredRow(
        n, best, statistics.median(times), times, int(peak), forward_bytes(n, d), ops, 4 * ops / best / 1e9
    )


def run(config: Config, progress: ProgressCallback = None) -> Result:
    """Formula table, plus the measurement when ``config.measure``; ``progress`` hears after each timed pass."""
    mem = [BYTES_PER_FLOAT * n * n for n in config.lengths]  # float32 bytes of each n x n score matrix
    rows = [FormulaRow(n, n * n, b, text_memory(b), n * n * config.d_model) for n, b in zip(config.lengths, mem)]
    result = Result(config=asdict(config), formula=rows)
    if not config.measure:  # the formula table is arithmetic on Python ints: nothing to allocate
        return result
    dropped = check_measurable(config)  # every n checked up front, before the first pass (a GPU drops what won't fit)
    result.dropped = [f"n={n}: {why}" for n, why in dropped]

    import torch

    from attn_cli.core.measure import loglog_slope

    cuda = config.device.startswith("cuda")
    result.peak_method = (
        "torch.cuda.max_memory_allocated (plus the inputs)"
        if cuda
        else "estimate from the tensors allocated (q, k, v + scores + weights + output); "
        "PyTorch's CPU allocator reports no peak"
    )
    result.device_name = torch.cuda.get_device_name() if cuda else "cpu"
    result.threads = torch.get_num_threads()
    result.cpu_count = os.cpu_count() or 0
    with contextlib.suppress(AttributeError, OSError):  # no load average on this platform
        result.load_average = os.getloadavg()[0]
    gen = torch.Generator().manual_seed(config.seed)
    left_out = {n for n, _ in dropped}
    lengths = [n for n in sorted(config.measure_lengths) if n not in left_out]
    for i, n in enumerate(lengths):
        row = _measure_one(n, config, gen, progress, i * config.repeats, len(lengths) * config.repeats)
        result.measured_rows.append(row)
    fit = [r for r in result.measured_rows if r.time_s > 0]  # log-log least squares; None with fewer than 2 n
    result.exponent = loglog_slope([r.n for r in fit], [r.time_s for r in fit])
    return result
