"""``torch.optim.Adam`` without ``torch._dynamo`` (with sympy: over a second per process that trains),
for the exact copy-task engine and the D2L exercises that train (1 and 12)."""

from __future__ import annotations

import inspect
import types
from collections.abc import Sequence

import torch


def adam(params: Sequence[torch.Tensor], lr: float, program_calls: bool = False) -> torch.optim.Adam:
    """``torch.optim.Adam(params, lr=lr)`` whose ``zero_grad`` and ``step`` are the functions under their
    torch.compile wrappers (``inspect.unwrap``; each wrapper imports torch._dynamo and does nothing else an
    eager run sees): the same floats (tested).  ``program_calls``: the public methods."""
    if program_calls:
        return torch.optim.Adam(params, lr=lr)
    opt = torch.optim.Adam.__new__(torch.optim.Adam)
    # the constructor's self.add_param_group finds this instance attribute first
    opt.add_param_group = types.MethodType(inspect.unwrap(torch.optim.Optimizer.add_param_group), opt)  # type: ignore[method-assign]  # shadows on purpose
    try:
        torch.optim.Adam.__init__(opt, params, lr=lr)
    finally:
        del opt.add_param_group
    raw_step = inspect.unwrap(type(opt).step)

    def step() -> None:
        with torch.set_grad_enabled(opt.defaults["differentiable"]):
            raw_step(opt)

    # instance attributes that shadow the wrapped methods, as add_param_group above
    opt.zero_grad = types.MethodType(inspect.unwrap(type(opt).zero_grad), opt)  # type: ignore[method-assign]
    opt.step = step  # type: ignore[method-assign,assignment]
    return opt
