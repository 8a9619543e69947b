"""``torch.optim.Adam`` without ``torch._dynamo`` (with sympy: over a second per process that trains),
for the exact copy-task engine and the D2L exercises that train (1 and 12)."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch


class AdamCalls(NamedTuple):
    optimizer: torch.optim.Adam
    zero_grad: Callable[[], None]
    step: Callable[[], None]


def adam(params: Sequence[torch.Tensor], lr: float, program_calls: bool = False) -> AdamCalls:
    """``torch.optim.Adam(params, lr=lr)`` and its ``zero_grad`` and ``step``, through the functions
    under their torch.compile wrappers (``inspect.unwrap``; each wrapper imports torch._dynamo and does
    nothing else an eager run sees): the same floats (tested).  ``program_calls``: the public methods."""
    if program_calls:
        opt = torch.optim.Adam(params, lr=lr)
        return AdamCalls(opt, opt.zero_grad, opt.step)
    opt = torch.optim.Adam.__new__(torch.optim.Adam)
    # the constructor's self.add_param_group finds this instance attribute first
    opt.add_param_group = types.MethodType(inspect.unwrap(torch.optim.Optimizer.add_param_group), opt)  # type: ignore[method-assign]  # shadows on purpose
    try:
        torch.optim.Adam.__init__(opt, params, lr=lr)
    finally:
        del opt.add_param_group
    zero_grad = types.MethodType(inspect.unwrap(type(opt).zero_grad), opt)
    raw_step = inspect.unwrap(type(opt).step)

    def step() -> None:
        with torch.set_grad_enabled(opt.defaults["differentiable"]):
            raw_step(opt)

    return AdamCalls(opt, zero_grad, step)
