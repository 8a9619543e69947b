"""The parameter layout of one fast-engine run, derived from the exact engine's model.

One run's parameters are one flat row in the order of ``build_model(...).named_parameters()``;
each plays one *role* in the hand-written step.  Nothing here writes a shape: the kernel's
sizes are checked against the model's (:func:`attn_cli.core.copy_fast.kernel.offsets`).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import torch

from attn_cli.core.copy_models import build_model

# held by whoever draws from (or saves and restores) torch's process-wide RNG in this package
GLOBAL_RNG_LOCK = threading.Lock()

# the model's parameter name -> its role in the step (both models: same names)
ROLE_OF = {
    "emb.weight": "emb",  # (V, E) token embedding, shared by encoder and decoder
    "encoder.weight_ih_l0": "e_wih",  # (G, E) encoder GRU, input weights
    "encoder.weight_hh_l0": "e_whh",  # (G, h) encoder GRU, recurrent weights
    "encoder.bias_ih_l0": "e_bih",  # (G,)
    "encoder.bias_hh_l0": "e_bhh",  # (G,)
    "cell.weight_ih": "d_wih",  # (G, E [+ h]) decoder cell, input [emb; context] or emb
    "cell.weight_hh": "d_whh",  # (G, h)
    "cell.bias_ih": "d_bih",  # (G,)
    "cell.bias_hh": "d_bhh",  # (G,)
    "out.weight": "o_w",  # (V, 2h or h) readout from [state; context] or state
    "out.bias": "o_b",  # (V,)
}
ROLES = tuple(ROLE_OF.values())  # the order of the offsets handed to the C kernel


@dataclass(frozen=True)
class Layout:
    """Where each role lives in a run's flat row."""

    roles: tuple[str, ...]  # in the model's parameter order
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]  # first element of each, same order
    size: int  # P: elements per run

    def offset_of(self, role: str) -> int:
        return self.offsets[self.roles.index(role)]

    def numel_of(self, role: str) -> int:
        return math.prod(self.shapes[self.roles.index(role)])


@cache
def param_layout(model: str, hidden: int) -> Layout:
    """The layout of ``build_model(model, hidden)``'s parameters, built on the CPU with torch's
    global RNG saved and restored (not on the meta device: there ``normal_`` imports sympy)."""
    with GLOBAL_RNG_LOCK:
        saved = torch.get_rng_state()
        try:
            net = build_model(model, hidden)
        finally:
            torch.set_rng_state(saved)
    roles, shapes, offsets, offset = [], [], [], 0
    for name, p in net.named_parameters():
        if name not in ROLE_OF:
            raise ValueError(f"the fast engine has no role for the {model} model's parameter {name!r}")
        roles.append(ROLE_OF[name])
        shapes.append(tuple(p.shape))
        offsets.append(offset)
        offset += p.numel()
    if sorted(roles) != sorted(ROLES):
        raise ValueError(f"the {model} model lacks parameters the fast engine needs: {set(ROLES) - set(roles)}")
    return Layout(tuple(roles), tuple(shapes), tuple(offsets), offset)


class RoleViews(NamedTuple):
    """One (M, *shape) tensor per role, in :data:`ROLE_OF`'s order (M runs)."""

    emb: torch.Tensor  # (M, V, E)
    e_wih: torch.Tensor  # (M, G, E)
    e_whh: torch.Tensor  # (M, G, h)
    e_bih: torch.Tensor  # (M, G)
    e_bhh: torch.Tensor  # (M, G)
    d_wih: torch.Tensor  # (M, G, E [+ h])
    d_whh: torch.Tensor  # (M, G, h)
    d_bih: torch.Tensor  # (M, G)
    d_bhh: torch.Tensor  # (M, G)
    o_w: torch.Tensor  # (M, V, 2h or h)
    o_b: torch.Tensor  # (M, V)


class Weights(RoleViews):
    """Named (M, ...) views into a flat (M, P) buffer (parameters or gradients), one per role."""

    def __new__(cls, flat: torch.Tensor, lay: Layout) -> Weights:
        M = flat.shape[0]
        places = zip(lay.roles, lay.shapes, lay.offsets)
        views = {role: flat[:, offset : offset + math.prod(shape)].view(M, *shape) for role, shape, offset in places}
        return super().__new__(cls, **views)  # by role name: any order of the layout
