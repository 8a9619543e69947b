"""The fast engine's PyTorch backend, forward: the parameter layout (one flat row per run, one
*role* per parameter), the passes of all M stacked runs at once, and evaluation.  ``keep=True``
records what :mod:`.backward` needs.  Design notes: ``docs/design.md``."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import cache

import torch

from attn_cli.core.copy_spec import BOS, EMBED
from attn_cli.core.copy_train import build_model

_RNG_LOCK = threading.Lock()  # torch's global RNG is process-wide: one build_model at a time

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

    def numel_of(self, role: str) -> int:
        return math.prod(self.shapes[self.roles.index(role)])


def built_model(model: str, hidden: int, seed: int | None = None) -> tuple[torch.nn.Module, torch.Tensor]:
    """``build_model`` on the CPU (after ``torch.manual_seed(seed)`` where given) with torch's global
    RNG left as found: the model, and the RNG state right after it was built."""
    with _RNG_LOCK:
        saved = torch.get_rng_state()
        try:
            if seed is not None:
                torch.manual_seed(seed)
            return build_model(model, hidden), torch.get_rng_state()
        finally:
            torch.set_rng_state(saved)


@cache
def param_layout(model: str, hidden: int) -> Layout:
    """The layout of ``build_model(model, hidden)``'s parameters (built on the CPU, not on the meta
    device: there ``normal_`` imports sympy)."""
    net, _ = built_model(model, hidden)
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


class Weights:
    """Named (M, ...) views into a flat (M, P) buffer (parameters or gradients), one per role."""

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

    def __init__(self, flat: torch.Tensor, lay: Layout):
        for role, shape, offset in zip(lay.roles, lay.shapes, lay.offsets):  # by role name: any order
            setattr(self, role, flat[:, offset : offset + math.prod(shape)].view(flat.shape[0], *shape))


def gather(table: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """table (M, V, G), tokens (T, M, B) -> rows (T, M, B, G): table[m, tokens[t, m, b]]."""
    M, V, G = table.shape
    offsets = torch.arange(M, device=tokens.device).view(1, M, 1) * V  # (1, M, 1)
    return table.reshape(M * V, G)[tokens + offsets]  # (T, M, B, G)


def gru(
    gi: torch.Tensor, h: torch.Tensor, whh_t: torch.Tensor, bhh: torch.Tensor, H: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One GRU update (PyTorch's equations): gi (M, B, G) input projection incl. b_ih; h (M, B, h);
    whh_t (M, h, G); bhh (M, 1, G) -> new state (M, B, h) and what the backward needs: rz (M, B, 2h),
    n (M, B, h), ghn (M, B, h) = W_hn h + b_hn."""
    gh = torch.baddbmm(bhh, h, whh_t)  # (M, B, G)
    rz = torch.sigmoid(gi[..., : 2 * H] + gh[..., : 2 * H])  # (M, B, 2h): reset, update gates
    ghn = gh[..., 2 * H :]  # (M, B, h)
    n = torch.tanh(torch.addcmul(gi[..., 2 * H :], rz[..., :H], ghn))  # (M, B, h) candidate
    h_new = torch.lerp(n, h, rz[..., H:])  # (1 - z) n + z h
    return h_new, rz, n, ghn


class Encoded:
    """Encoder pass: states and what its backward needs."""

    def __init__(self, w: Weights, src_t: torch.Tensor, H: int, keep: bool):
        T, M, B = src_t.shape
        table = torch.baddbmm(w.e_bih.unsqueeze(1), w.emb, w.e_wih.transpose(1, 2))  # (M, V, G)
        gi = gather(table, src_t)  # (T, M, B, G)
        whh_t = w.e_whh.transpose(1, 2).contiguous()  # (M, h, G)
        bhh = w.e_bhh.unsqueeze(1)  # (M, 1, G)
        h = torch.zeros(M, B, H, dtype=table.dtype, device=table.device)
        states, self.tape = [], []
        for t in range(T):
            h_new, rz, n, ghn = gru(gi[t], h, whh_t, bhh, H)
            if keep:
                self.tape.append((h, rz, n, ghn))
            states.append(h_new)
            h = h_new
        self.states = torch.stack(states, 2)  # (M, B, T, h)
        self.last = h  # (M, B, h)


def attend(h: torch.Tensor, keys_t: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """h (M, B, h) query -> weights (M B, 1, T), context (M, B, h)."""
    M, B, H = h.shape
    weights = torch.softmax(torch.bmm(h.reshape(M * B, 1, H), keys_t), dim=-1)  # (M B, 1, T)
    context = torch.bmm(weights, values)  # (M B, 1, h)
    return weights, context.view(M, B, H)


class Decoded:
    """Teacher-forced decoder pass: logits and what its backward needs."""

    def __init__(self, w: Weights, enc: Encoded, tgt_t: torch.Tensor, H: int, attention: bool, keep: bool):
        T, M, B = tgt_t.shape
        E = EMBED
        # (M, V, G): through the embedding part of the cell's input weights (M, G, E)
        self.table = torch.baddbmm(w.d_bih.unsqueeze(1), w.emb, w.d_wih[..., :E].transpose(1, 2))
        gie = gather(self.table, tgt_t)  # (T, M, B, G)
        self.whh_t = w.d_whh.transpose(1, 2).contiguous()  # (M, h, G)
        self.bhh = w.d_bhh.unsqueeze(1)  # (M, 1, G)
        h = enc.last  # (M, B, h): h_0
        queries, contexts, weights, self.tape = [h], [], [], []
        if attention:
            self.wic_t = w.d_wih[..., E:].transpose(1, 2).contiguous()  # (M, h, G): the context part
            self.values = enc.states.reshape(M * B, T, H)  # (M B, T, h)
            self.keys_t = self.values.transpose(1, 2) * (1.0 / math.sqrt(H))  # (M B, h, T), pre-scaled
            a, c = attend(h, self.keys_t, self.values)  # c_0: attention of h_0
            weights.append(a)
            contexts.append(c)
        for t in range(T):
            gi = torch.baddbmm(gie[t], contexts[-1], self.wic_t) if attention else gie[t]  # (M, B, G)
            h_new, rz, n, ghn = gru(gi, h, self.whh_t, self.bhh, H)
            if keep:
                self.tape.append((h, rz, n, ghn))
            h = h_new
            queries.append(h)
            if attention:
                a, c = attend(h, self.keys_t, self.values)  # readout attention of step t = input of t+1
                weights.append(a)
                contexts.append(c)
        # readout input: [h_t; c_t] (or h_t) for t = 1..T, time-major rows (M, T B, r)
        states = torch.stack(queries[1:], 1)  # (M, T, B, h)
        readin = torch.cat([states, torch.stack(contexts[1:], 1)], -1) if attention else states  # (M, T, B, r)
        self.readin = readin.reshape(M, T * B, -1)  # (M, T B, r)
        self.logits = torch.baddbmm(w.o_b.unsqueeze(1), self.readin, w.o_w.transpose(1, 2))  # (M, T B, V)
        self.queries, self.contexts, self.weights = queries, contexts, weights


@torch.no_grad()
def evaluate(
    w: Weights, src: torch.Tensor, tgt_in: torch.Tensor, model: str, hidden: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """src, tgt_in (M, N, T) -> teacher-forced, free-running, exact accuracies (each (M,)),
    and the readout weights of free running on sequence 0 of each run (M, T, T) or None."""
    M, N, T = src.shape
    att = model == "attention"
    src_t, tgt_t = src.permute(2, 0, 1), tgt_in.permute(2, 0, 1)  # (T, M, N)
    enc = Encoded(w, src_t, hidden, keep=False)
    dec = Decoded(w, enc, tgt_t, hidden, att, keep=False)
    forced_tok = dec.logits.argmax(-1).view(M, T, N).permute(0, 2, 1)  # (M, N, T)
    forced = (forced_tok == src).float().mean((1, 2))  # (M,)

    # free running from BOS, with the decoder's tables
    o_wt, o_b = w.o_w.transpose(1, 2), w.o_b.unsqueeze(1)  # (M, r, V), (M, 1, V)
    tok = torch.full((1, M, N), BOS, dtype=src.dtype, device=src.device)  # (1, M, N)
    h = enc.last
    rows, out = [], []
    hits = torch.zeros(M, dtype=torch.long, device=src.device)  # (M,) steps peaking at their own position
    if att:
        c = dec.contexts[0]  # c_0: the attention of h_0
    for t in range(T):
        gi = gather(dec.table, tok)[0]  # (M, N, G)
        if att:
            gi = torch.baddbmm(gi, c, dec.wic_t)
        h, _, _, _ = gru(gi, h, dec.whh_t, dec.bhh, hidden)
        if att:
            a, c = attend(h, dec.keys_t, dec.values)  # (M N, 1, T), (M, N, h)
            rows.append(a.view(M, N, T)[:, 0])  # (M, T)
            hits += (a.view(M, N, T).argmax(-1) == t).sum(1)  # (M,)
            readin = torch.cat([h, c], -1)
        else:
            readin = h
        tok = torch.baddbmm(o_b, readin, o_wt).argmax(-1).unsqueeze(0)  # (1, M, N)
        out.append(tok[0])
    correct = torch.stack(out, 2) == src  # (M, N, T): free-running tokens right
    free = correct.float().mean((1, 2))
    exact = correct.all(2).float().mean(1)
    example = torch.stack(rows, 1) if att else None  # (M, T_out, T_in)
    diagonal = hits.double() / (N * T) if att else None  # (M,)
    return forced, free, exact, example, diagonal
