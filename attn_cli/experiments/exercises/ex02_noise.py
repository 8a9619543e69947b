"""Exercise 2, nearly identical heads: how noise breaks the inversion of the mixing matrix."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from attn_cli.experiments.exercises.common import DIM, ONE_HEAD_ERROR, Config, ProgressCallback

TITLE = "nearly identical heads"
SWEEPS = (  # (sigma, epsilons): the exercise's two sweeps
    (0.01, (0.4, 0.1, 0.03, 0.01, 0.003, 0.001)),
    (0.001, (0.4, 0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4, 3e-5, 1e-5)),
)


@dataclass
class Point:
    eps: float
    error: float  # readout_error of the two noisy mixtures
    theory: float  # sqrt((e_s + e_u) / 4)
    condition: float  # kappa(A) computed by torch.linalg.cond
    straight: bool  # inside the range used for the slope fit


@dataclass
class Sweep:
    sigma: float
    knee: float  # eps* = sigma / 2, where 4 eps^2 = sigma^2
    slope: float | None  # least-squares slope of log error on log eps over the straight points
    slope_points: int
    points: list[Point] = field(default_factory=list)

    def theory_curve(self) -> tuple[list[float], list[float]]:
        """(eps, theory) at this sweep's sigma on a fine log grid from 10^-5.5 to 10^-0.05, for the figure."""
        eps = [10 ** (k / 20) for k in range(-110, 0)]
        return eps, [theory(x, self.sigma) for x in eps]


@dataclass
class Result:
    ONE_HEAD_ERROR: ClassVar[float] = ONE_HEAD_ERROR  # for the figure: the one-head floor, sqrt(1/2)

    samples: int
    d_v: int  # width of the values V1, V2 (copy-both's d_v)
    eigenvalues: str = "eigenvalues 1 on (1,1)/√2 and 2ε on (1,-1)/√2; κ(A) = 1/(2ε)"  # for the table
    sweeps: list[Sweep] = field(default_factory=list)


def error_variances(eps: float, sigma: float) -> tuple[float, float]:
    """(e_s, e_u): per-coordinate error variances of the best estimates of v1 + v2, v1 - v2."""
    return 2 * sigma**2 / (1 + sigma**2), 2 * sigma**2 / (4 * eps**2 + sigma**2)


def theory(eps: float, sigma: float) -> float:
    e_s, e_u = error_variances(eps, sigma)
    return math.sqrt((e_s + e_u) / 4)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.measure import loglog_slope, readout_error

    n = config.samples
    torch.manual_seed(config.seed)
    V1, V2 = torch.randn(n, DIM), torch.randn(n, DIM)  # the text's draws (N, d)
    Z1, Z2 = torch.randn(n, DIM), torch.randn(n, DIM)  # unit noise, scaled by sigma below
    V1, V2, Z1, Z2 = (t.to(config.device) for t in (V1, V2, Z1, Z2))
    target = torch.cat([V1, V2], dim=1)  # (N, 2d)
    sweeps = []
    for sigma, epsilons in SWEEPS:
        points = []
        for eps in epsilons:
            a, b = 0.5 + eps, 0.5 - eps
            M2 = torch.cat([a * V1 + b * V2 + sigma * Z1, b * V1 + a * V2 + sigma * Z2], dim=1)  # (N, 2d)
            A = torch.tensor([[a, b], [b, a]], dtype=torch.float64)
            error, condition = readout_error(M2, target), torch.linalg.cond(A).item()
            e_s, e_u = error_variances(eps, sigma)  # straight: inside the slope fit's range (docs/exercises.md)
            points.append(Point(eps, error, theory(eps, sigma), condition, eps >= 4 * (sigma / 2) and e_u >= 4 * e_s))
        fit = [p for p in points if p.straight]
        slope = loglog_slope([p.eps for p in fit], [p.error for p in fit])
        sweeps.append(Sweep(sigma, sigma / 2, slope, len(fit), points))
    return Result(n, DIM, sweeps=sweeps)


def validate_result(result: Result, config: Config) -> None:
    """A cached Result has the exercise's two sweeps, one point per epsilon (:mod:`attn_cli.store.typed`)."""
    from attn_cli.store.typed import check, check_len

    check_len(result.sweeps, len(SWEEPS), "sweeps")
    for i, (sweep, (_, epsilons)) in enumerate(zip(result.sweeps, SWEEPS)):
        check([p.eps for p in sweep.points] == list(epsilons), f"sweeps[{i}].points", "not one point per epsilon")
