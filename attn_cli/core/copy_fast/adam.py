"""The optimiser of the fast engine's PyTorch backend: per-run clipping, Adam on (M, P) rows.

Adam is elementwise, so one stacked (M, P) buffer *is* M separate Adams; the gradient norm is
taken per row, over all of that run's parameters, like ``clip_grad_norm_`` on one model.
"""

from __future__ import annotations

import math

import torch


class Adam:
    """torch.optim.Adam's update (defaults betas (0.9, 0.999), eps 1e-8), on (M, P) rows."""

    def __init__(self, params: torch.Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.p, self.lr, self.betas, self.eps, self.step_count = params, lr, betas, eps, 0
        self.m = torch.zeros_like(params)  # (M, P)
        self.v = torch.zeros_like(params)  # (M, P)

    def step(self, grad: torch.Tensor) -> None:
        b1, b2 = self.betas
        self.step_count += 1
        bc1 = 1 - b1**self.step_count
        bc2_sqrt = math.sqrt(1 - b2**self.step_count)
        self.m.lerp_(grad, 1 - b1)
        self.v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (self.v.sqrt() / bc2_sqrt).add_(self.eps)
        self.p.addcdiv_(self.m, denom, value=-self.lr / bc1)


def clip_per_run(grad: torch.Tensor, max_norm: float) -> torch.Tensor:
    """clip_grad_norm_ applied to each run separately: grad (M, P) scaled in place; returns norms (M,)."""
    norms = torch.linalg.vector_norm(grad, dim=1)  # (M,)
    coef = torch.clamp(max_norm / (norms + 1e-6), max=1.0)  # (M,)
    grad.mul_(coef.unsqueeze(1))
    return norms
