"""Exercise 4, averages under key noise (after CS224N A4 1(c), 1(d))."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attn_cli.experiments.exercises.common import Config, ProgressCallback

if TYPE_CHECKING:
    from torch import Tensor

TITLE = "averages under key noise"
M_KEYS, KEY_DIM = 4, 8
BETA = 1e-4  # the exercise's beta
SCALES = (10.0, 100.0)  # the exercise's c
THRESHOLD = 0.1  # a resample fails when ||o - o*|| exceeds this
SETTINGS = (  # (name, anisotropic k_a, query)
    ("isotropic, q = c(μa+μb)", False, "sum"),
    ("anisotropic, q = c(μa+μb)", True, "sum"),
    ("anisotropic, q1 = cμa, q2 = cμb", True, "two"),
    ("isotropic, q = -cΣμi (part 4)", False, "neg"),
    ("anisotropic, q = -cΣμi (part 4)", True, "neg"),
)


@dataclass
class Row:
    setting: str
    query: str  # "sum", "two" or "neg"
    anisotropic: bool
    c: float
    median: float  # median of ||o - (v_a + v_b)/2|| over the resamples
    failure: float  # fraction of resamples with ||o - o*|| > THRESHOLD


@dataclass
class Result:
    beta: float
    resamples: int
    threshold: float
    two_query_limit: float  # P(gamma < -1) = Phi(-sqrt 2): the failure of "two" as c -> infinity
    neg_gamma_spread: float  # max over resamples of |o(gamma) - o(gamma = 0)| for "neg" (same z)
    rows: list[Row] = field(default_factory=list)

    def score_noise(self, c: float) -> float:
        """Standard deviation c sqrt(2 beta) of the difference of two isotropic-noise scores (for the reading)."""
        return c * math.sqrt(2 * self.beta)


def _outputs(keys: Tensor, query: str, c: float) -> Tensor:
    """keys (R, m, D) -> outputs (R, 4)."""
    import torch

    mu = torch.eye(KEY_DIM, dtype=keys.dtype)[:M_KEYS]  # (m, D) orthonormal means
    values = torch.eye(M_KEYS, dtype=keys.dtype)  # (m, 4): v_i = e_i
    queries = {"sum": [c * (mu[0] + mu[1])], "two": [c * mu[0], c * mu[1]], "neg": [-c * mu[2:].sum(0)]}[query]
    outs = [torch.softmax(keys @ q, dim=-1) @ values for q in queries]  # each (R, 4)
    return torch.stack(outs).mean(0)  # (R, 4): the average over the queries


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    r = config.resamples
    gen = torch.Generator().manual_seed(config.seed)
    z = torch.randn(r, M_KEYS, KEY_DIM, generator=gen, dtype=torch.float64)  # isotropic noise
    gamma = math.sqrt(0.5) * torch.randn(r, generator=gen, dtype=torch.float64)  # (R,)
    mu = torch.eye(KEY_DIM, dtype=torch.float64)[:M_KEYS]  # (m, D)
    iso = mu + math.sqrt(BETA) * z  # (R, m, D)
    aniso = iso.clone()
    aniso[:, 0] += gamma[:, None] * mu[0]  # k_a = (1 + gamma) mu_a + noise
    target = torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64)
    rows = []
    for c in SCALES:
        for name, anisotropic, query in SETTINGS:
            o = _outputs(aniso if anisotropic else iso, query, c)
            dist = (o - target).norm(dim=-1)  # (R,)
            failure = (dist > THRESHOLD).double().mean().item()
            rows.append(Row(name, query, anisotropic, c, dist.median().item(), failure))
    spread = (_outputs(aniso, "neg", SCALES[-1]) - _outputs(iso, "neg", SCALES[-1])).abs().max().item()
    limit = 0.5 * math.erfc(math.sqrt(2) / math.sqrt(2))  # Phi(-sqrt 2) = erfc(1) / 2
    return Result(BETA, r, THRESHOLD, limit, spread, rows)
