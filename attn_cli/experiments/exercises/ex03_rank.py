"""Exercise 3, what the bound counts: the best relative squared error is 1 - rank(A) / k."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attn_cli.experiments.exercises.common import Config, ProgressCallback

if TYPE_CHECKING:
    from torch import Tensor

TITLE = "what the bound counts"
MIN_SAMPLES = 200  # the sampled estimate uses max(MIN_SAMPLES, samples // 5) examples
VALUE_DIM = 4  # c, the width of each value
SHAPES = ((1, 2), (2, 2), (1, 4), (2, 4), (3, 4), (4, 4), (6, 4), (3, 6), (8, 8))  # (h, k), softmax rows
TEMPERATURE = 2.0  # logits ~ N(0, TEMPERATURE^2) before the softmax


@dataclass
class Row:
    kind: str  # "softmax", "duplicated heads" or "uniform heads"
    h: int
    k: int
    rank: int  # numerical rank of A (float64)
    bound: float  # 1 - rank / k
    population: float  # exact best relative squared error from the covariances
    sampled: float  # squared relative error of lstsq on held-out samples
    min_entry: float  # smallest weight of A (> 0 for softmax rows)


@dataclass
class Result:
    value_dim: int
    samples: int
    rows: list[Row] = field(default_factory=list)
    max_gap: float = 0.0  # max |population - (1 - rank/k)| over rows


def _kron_eye(X: Tensor) -> Tensor:
    """X kron I_c (written out: (P, Q) -> (P c, Q c))."""
    import torch

    eye = torch.eye(VALUE_DIM, dtype=X.dtype)
    p, q = X.shape
    return (X[:, None, :, None] * eye[None, :, None, :]).reshape(p * VALUE_DIM, q * VALUE_DIM)


def population_error(A: Tensor) -> float:
    """Best relative squared error of [v_1..v_k] from (A kron I_c) v, from the covariances (A: float64)."""
    import torch

    k = A.shape[1]
    cov_tm = _kron_eye(A.T)  # (k c, h c)  E[t m^T]
    cov_m = _kron_eye(A @ A.T)  # (h c, h c)  E[m m^T]
    explained = torch.trace(cov_tm @ torch.linalg.pinv(cov_m) @ cov_tm.T)
    return 1.0 - (explained / (k * VALUE_DIM)).item()


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.measure import readout_error

    gen = torch.Generator().manual_seed(config.seed)
    n = max(MIN_SAMPLES, config.samples // 5)
    mats = [
        ("softmax", torch.softmax(TEMPERATURE * torch.randn(h, k, generator=gen, dtype=torch.float64), -1))
        for h, k in SHAPES
    ]
    base = torch.softmax(TEMPERATURE * torch.randn(2, 4, generator=gen, dtype=torch.float64), -1)
    mats.append(("duplicated heads", torch.cat([base, base], 0)))  # 4 heads, only 2 distinct
    mats.append(("uniform heads", torch.full((3, 4), 0.25, dtype=torch.float64)))  # every head the same
    rows = []
    for kind, A in mats:
        h, k = A.shape
        rank = int(torch.linalg.matrix_rank(A).item())
        V = torch.randn(2, n, k, VALUE_DIM, generator=gen, dtype=torch.float64)  # train, test
        M = torch.einsum("hk,snkc->snhc", A, V).reshape(2, n, -1)  # (2, N, h c)
        T = V.reshape(2, n, -1)  # (2, N, k c)
        sampled = readout_error(M[0], T[0], driver="gelsd", held_out=(M[1], T[1]), squared=True)
        rows.append(Row(kind, h, k, rank, 1 - rank / k, population_error(A), sampled, A.min().item()))
    return Result(value_dim=VALUE_DIM, samples=n, rows=rows, max_gap=max(abs(r.population - r.bound) for r in rows))
