"""``torch.optim.Adam`` without ``torch._dynamo``, for every trainer here that uses it.

The exact copy-task engine and the D2L exercises that train (1 and 12) step Adam through
:func:`adam`: the same code and bits as its public methods, without their import of
torch._dynamo (with sympy: more than a second in every process that trains).
"""

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
    """``torch.optim.Adam(params, lr=lr)`` and its ``zero_grad`` and ``step``, without torch._dynamo.

    Adam's public methods are wrapped for ``torch.compile``: ``add_param_group`` (which the
    constructor calls) and ``zero_grad`` by ``torch._disable_dynamo``, ``step`` by
    ``_use_grad_for_differentiable`` and a profiler hook.  Each wrapper imports
    ``torch._dynamo`` and does nothing else an eager run sees.  So this drives the same Adam through the
    functions under those wrappers (``inspect.unwrap``): the same code, the same float
    operations in the same order (tested bit for bit against the public calls), the
    gradient mode the step wrapper sets (``defaults["differentiable"]``, False).  With
    ``program_calls`` (the copy-task benchmark's stand-in for the program) the public methods
    are used, as the program uses them.
    """
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
