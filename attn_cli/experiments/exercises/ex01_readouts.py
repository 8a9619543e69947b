"""Exercise 1, nonlinear readouts: can a perceptron beat the linear readout of one mixture?"""

from __future__ import annotations

from dataclasses import dataclass, field

from attn_cli.experiments.exercises.common import DIM, ONE_HEAD_ERROR, Config, ProgressCallback

TITLE = "nonlinear readouts"
CASES = (("gaussian", 0.5), ("gaussian", 0.7), ("sign", 0.5), ("sign", 0.7))  # (values, a)
LR = 1e-2  # Adam learning rate of the perceptron


@dataclass
class Row:
    values: str  # "gaussian" or "sign" (uniform on {-1, +1})
    a: float  # the head's weight on v1
    linear: float  # held-out relative error of the least-squares readout
    mlp: float  # held-out relative error of the perceptron
    theory: float  # Bayes-optimal relative error (any readout)
    distinct_levels: int  # distinct values of m_j (4 = injective map for +-1 values)


@dataclass
class Result:
    samples: int
    d_v: int  # width of the values V1, V2 (copy-both's d_v)
    hidden: int
    steps: int
    points: int  # coordinates (m_j, v1_j, v2_j) the perceptron is trained on
    rows: list[Row] = field(default_factory=list)

    @staticmethod
    def levels(a: float) -> list[float]:
        """The distinct values of a s1 + (1 - a) s2 for signs s1, s2 = +-1, ascending (for the table's reading)."""
        return sorted({round(a * s1 + (1 - a) * s2, 12) + 0.0 for s1 in (-1, 1) for s2 in (-1, 1)})


def theory(values: str, a: float) -> float:
    if values == "sign" and abs(a - 0.5) > 1e-12 and abs(a - 1.0) > 1e-12 and a > 0:
        return 0.0  # a v1 + (1 - a) v2 takes 4 distinct values: injective
    return ONE_HEAD_ERROR


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch
    from torch import nn

    from attn_cli.core.measure import readout_error, relative_error
    from attn_cli.core.optim import adam

    n, device, hidden, points = config.samples, config.device, config.mlp_hidden, config.mlp_points
    gen = torch.Generator().manual_seed(config.seed)
    rows = []
    for values, a in CASES:
        draws = [torch.randn(2, n, DIM, generator=gen) for _ in range(2)]  # train, test: (2, N, d) each
        train, test = (v.sign().to(device) if values == "sign" else v.to(device) for v in draws)
        m_train = a * train[0] + (1 - a) * train[1]  # (N, d)
        m_test = a * test[0] + (1 - a) * test[1]
        t_train, t_test = torch.cat([train[0], train[1]], 1), torch.cat([test[0], test[1]], 1)  # (N, 2d)
        linear = readout_error(m_train.cpu(), t_train.cpu(), held_out=(m_test.cpu(), t_test.cpu()))
        torch.manual_seed(config.seed)  # the same perceptron initialisation for every case
        # per-coordinate perceptron m_j -> (v1_j, v2_j): every coordinate is one example
        layers = (nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))
        net = nn.Sequential(*layers).to(device)
        opt = adam(list(net.parameters()), LR)  # torch.optim.Adam, without torch._dynamo
        x, y = m_train.reshape(-1, 1)[:points], train.reshape(2, -1).T[:points]  # (P, 1), (P, 2)
        for _ in range(config.mlp_steps):
            loss = ((net(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            mlp = relative_error(net(m_test.reshape(-1, 1)).T.reshape(2, n, DIM), test)  # (2, N, d)
        levels = len(torch.unique(torch.round(m_train * 1e6))) if values == "sign" else n * DIM
        rows.append(Row(values, a, linear, mlp, theory(values, a), int(levels)))
    return Result(n, DIM, hidden, config.mlp_steps, min(points, n * DIM), rows)
