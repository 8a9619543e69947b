"""Forward passes of the fast engine's PyTorch backend, all M stacked runs at once.

The embedding is folded into the input projections (a (V, 3h) table gathered per token); the
attention after step t's update is the one before step t+1's (computed once).  ``keep=True``
records what :mod:`.backward` needs.  Names: see ``docs/design.md`` (``G = 3h``: r, z, n gates).
"""

from __future__ import annotations

import math

import torch

from attn_cli.core.copy_fast.layout import Weights
from attn_cli.core.copy_spec import EMBED


def gather(table: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """table (M, V, G), tokens (T, M, B) -> rows (T, M, B, G): table[m, tokens[t, m, b]]."""
    M, V, G = table.shape
    offsets = torch.arange(M, device=tokens.device).view(1, M, 1) * V  # (1, M, 1)
    return table.reshape(M * V, G)[tokens + offsets]  # (T, M, B, G)


def gru(
    gi: torch.Tensor, h: torch.Tensor, whh_t: torch.Tensor, bhh: torch.Tensor, H: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One GRU update (PyTorch's equations).

    gi (M, B, G) input projection incl. b_ih; h (M, B, h); whh_t (M, h, G); bhh (M, 1, G)
    -> new state (M, B, h) and what the backward needs: rz (M, B, 2h), n (M, B, h),
    ghn (M, B, h) = W_hn h + b_hn.
    """
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
        wie = w.d_wih[..., :E]  # (M, G, E): the embedding part of the cell's input weights
        table = torch.baddbmm(w.d_bih.unsqueeze(1), w.emb, wie.transpose(1, 2))  # (M, V, G)
        gie = gather(table, tgt_t)  # (T, M, B, G)
        whh_t = w.d_whh.transpose(1, 2).contiguous()  # (M, h, G)
        bhh = w.d_bhh.unsqueeze(1)  # (M, 1, G)
        h = enc.last  # (M, B, h): h_0
        queries, contexts, weights, self.tape = [h], [], [], []
        if attention:
            wic_t = w.d_wih[..., E:].transpose(1, 2).contiguous()  # (M, h, G): the context part
            self.values = enc.states.reshape(M * B, T, H)  # (M B, T, h)
            self.keys_t = self.values.transpose(1, 2) * (1.0 / math.sqrt(H))  # (M B, h, T), pre-scaled
            a, c = attend(h, self.keys_t, self.values)  # c_0: attention of h_0
            weights.append(a)
            contexts.append(c)
        for t in range(T):
            gi = torch.baddbmm(gie[t], contexts[-1], wic_t) if attention else gie[t]  # (M, B, G)
            h_new, rz, n, ghn = gru(gi, h, whh_t, bhh, H)
            if keep:
                self.tape.append((h, rz, n, ghn))
            h = h_new
            queries.append(h)
            if attention:
                a, c = attend(h, self.keys_t, self.values)  # readout attention of step t = input of t+1
                weights.append(a)
                contexts.append(c)
        # readout input: [h_t; c_t] for t = 1..T, time-major rows (M, T B, r)
        states = torch.stack(queries[1:], 1)  # (M, T, B, h)
        if attention:
            readin = torch.cat([states, torch.stack(contexts[1:], 1)], -1)  # (M, T, B, 2h)
        else:
            readin = states
        self.readin = readin.reshape(M, T * B, -1)  # (M, T B, r)
        self.logits = torch.baddbmm(w.o_b.unsqueeze(1), self.readin, w.o_w.transpose(1, 2))  # (M, T B, V)
        self.queries, self.contexts, self.weights = queries, contexts, weights
