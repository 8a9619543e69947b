"""Exercise 6, narrow heads: forward time of MultiHeadAttention against the head count."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from attn_cli.experiments.exercises.common import Config, ProgressCallback

TITLE = "narrow heads"
D_MODEL, BATCH = 256, 8
HEADS = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class Row:
    h: int
    p: int  # head width d / h
    seconds: float  # median forward time
    score_entries: int  # B h n^2
    matmul_flops: int  # 8 n d^2 + 4 n^2 d per sequence, times B (the same for every h)


@dataclass
class Result:
    n: int
    d: int
    batch: int
    repeats: int
    device: str
    threads: int  # torch.get_num_threads() during the timing
    rows: list[Row] = field(default_factory=list)
    ratio: float = 0.0  # slowest / fastest
    slowest_h: int = 0
    fastest_h: int = 0
    ns_per_entry: float = 0.0  # fitted t1, nanoseconds per score entry
    fixed_seconds: float = 0.0  # fitted t0
    r_squared: float = 0.0  # of the fit time ~ t0 + t1 * entries

    def fitted_seconds(self, score_entries: int) -> float:
        """The fitted time t0 + t1 * entries for one row's score-entry count (for the table and the figure)."""
        return self.fixed_seconds + self.ns_per_entry * 1e-9 * score_entries


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import MultiHeadAttention
    from attn_cli.core.measure import fit_line
    from attn_cli.core.memory import check_fits

    n, device = config.timing_n, config.device
    # the largest h: scores, scaled scores and weights, each B h n^2 floats, plus activations
    need = 4.0 * (3 * BATCH * max(HEADS) * n * n + 8 * BATCH * n * D_MODEL)
    check_fits(need, f"timing multi-head attention at n = {n}", device)
    torch.manual_seed(config.seed)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    X = torch.randn(BATCH, n, D_MODEL).to(device)  # (B, n, d)
    flops = BATCH * (8 * n * D_MODEL**2 + 4 * n * n * D_MODEL)  # the same for every h
    rows = []
    with torch.no_grad():
        for h in HEADS:
            mha = MultiHeadAttention(D_MODEL, h, dropout=0.0).to(device).eval()
            mha(X, X, X)  # warm-up
            sync()
            times = []
            for _ in range(config.timing_repeats):
                start = time.perf_counter()
                mha(X, X, X)
                sync()
                times.append(time.perf_counter() - start)
            rows.append(Row(h, D_MODEL // h, statistics.median(times), BATCH * h * n * n, flops))
    t0, t1, r2 = fit_line([r.score_entries for r in rows], [r.seconds for r in rows])
    slow, fast = max(rows, key=lambda r: r.seconds), min(rows, key=lambda r: r.seconds)
    ratio, threads = slow.seconds / fast.seconds, torch.get_num_threads()
    return Result(
        n, D_MODEL, BATCH, config.timing_repeats, device, threads, rows, ratio, slow.h, fast.h, t1 * 1e9, t0, r2
    )


def validate_result(result: Result, config: Config) -> None:
    """A cached Result has one row per head count (:mod:`attn_cli.store.typed`)."""
    from attn_cli.store.typed import check

    check([r.h for r in result.rows] == list(HEADS), "rows", "not one row per head count")
