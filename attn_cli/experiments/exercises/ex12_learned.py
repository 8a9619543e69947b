"""Exercise 12, learned copy-both heads: train MultiHeadAttention(16 hidden) for h = 1, 2, 4, 8."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attn_cli.experiments.exercises.common import ONE_HEAD_ERROR, Config, ProgressCallback

if TYPE_CHECKING:
    from torch import Generator, Tensor

TITLE = "learned copy-both heads"
D_MODEL, VALUE_DIM = 16, 4
HEAD_COUNTS = (1, 2, 4, 8)
BATCH, HELD_OUT, LR = 256, 4096, 1e-2
ONE_HOT, DUPLICATE = 0.95, 0.05
KINDS = ("one-hot", "soft", "duplicate")  # what classify() calls a head


@dataclass
class Run:
    h: int
    error: float  # held-out relative error
    initial_error: float  # before training
    weights: list[list[float]]  # per head (alpha_1, alpha_2) after training
    initial_weights: list[list[float]]
    kinds: list[str]  # per head: one-hot / soft / duplicate
    curve: list[list[float]]  # [step, training relative error] every few steps


@dataclass
class Result:
    d: int
    steps: int
    batch: int
    lr: float
    runs: list[Run] = field(default_factory=list)
    bound: float = ONE_HEAD_ERROR  # one head cannot go below sqrt(1/2)


def classify(weights: list[list[float]]) -> list[str]:
    kinds = []
    for i, w in enumerate(weights):
        duplicate = any(j != i and abs(w[0] - u[0]) < DUPLICATE for j, u in enumerate(weights))
        kinds.append("one-hot" if max(w) >= ONE_HOT else "duplicate" if duplicate else "soft")
    return kinds


def make_batch(n: int, gen: Generator, device: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    import torch

    E = torch.eye(D_MODEL)
    v = torch.randn(n, 2, VALUE_DIM, generator=gen)  # (n, 2, 4): v_1, v_2
    values = torch.nn.functional.pad(v, (0, D_MODEL - VALUE_DIM))  # [v_i; 0]
    keys = E[:2].expand(n, 2, D_MODEL)  # e_1, e_2
    query = E[2:3].expand(n, 1, D_MODEL)  # e_3
    return (query.to(device), keys.to(device), values.to(device), v.reshape(n, 2 * VALUE_DIM).to(device))


def train(h: int, steps: int, seed: int, device: str) -> Run:
    import torch

    from attn_cli.core.attention import MultiHeadAttention
    from attn_cli.core.measure import relative_error
    from attn_cli.core.optim import adam

    torch.manual_seed(seed)
    mha = MultiHeadAttention(D_MODEL, h, dropout=0.0).to(device)
    gen = torch.Generator().manual_seed(seed + 1)  # data stream, the same for every h
    test = make_batch(HELD_OUT, torch.Generator().manual_seed(seed + 2), device)
    with torch.no_grad():
        out, w0 = mha(*test[:3])
        initial_error = relative_error(out[:, 0, : 2 * VALUE_DIM], test[3])
    opt = adam(list(mha.parameters()), LR)  # torch.optim.Adam, without torch._dynamo
    curve, every = [], max(1, steps // 30)
    for step in range(steps):
        q, k, v, t = make_batch(BATCH, gen, device)
        out, _ = mha(q, k, v)  # (B, 1, 16)
        pred = out[:, 0, : 2 * VALUE_DIM]  # (B, 8)
        loss = ((pred - t) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == steps - 1:
            curve.append([step + 1, relative_error(pred.detach(), t)])
    with torch.no_grad():
        out, w = mha(*test[:3])  # w: (B, h, 1, 2)
        error = relative_error(out[:, 0, : 2 * VALUE_DIM], test[3])
    weights = w[0, :, 0].cpu().tolist()
    return Run(h, error, initial_error, weights, w0[0, :, 0].cpu().tolist(), classify(weights), curve)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    runs = [train(h, config.train_steps, config.seed, config.device) for h in HEAD_COUNTS]
    return Result(d=D_MODEL, steps=config.train_steps, batch=BATCH, lr=LR, runs=runs)


def validate_result(result: Result, config: Config) -> None:
    """A cached Result's sizes follow from ``config`` and HEAD_COUNTS (:mod:`attn_cli.store.typed`)."""
    from attn_cli.store.typed import check, check_grid, check_len

    check([r.h for r in result.runs] == list(HEAD_COUNTS), "runs", "not one run per head count")
    for i, r in enumerate(result.runs):
        check_grid(r.weights, (r.h, 2), f"runs[{i}].weights")
        check_grid(r.initial_weights, (r.h, 2), f"runs[{i}].initial_weights")
        check_len(r.kinds, r.h, f"runs[{i}].kinds")
        check(set(r.kinds) <= set(KINDS), f"runs[{i}].kinds", f"not one of {', '.join(KINDS)}")
        check(len(r.curve) <= config.train_steps, f"runs[{i}].curve", f"more than {config.train_steps} points")
        check_grid(r.curve, (len(r.curve), 2), f"runs[{i}].curve")
