"""The fast engine: the copy-task models trained with a hand-written step, several runs at once.

Same models, same initial weights, same data and same training as the exact engine
(:mod:`attn_cli.core.copy_train`); only the arithmetic is arranged differently, so the
numbers agree statistically, not bit for bit.  Two backends, the same equations (both
checked against autograd in ``tests/test_copy_fast.py``):

* **CPU: a C kernel** (:mod:`attn_cli.core.copy_fast_kernel`): each run's forward,
  backward, clipping and Adam for 50 steps per call, no per-op overhead; runs train in
  parallel threads (one core each).  About 6 ms per step at length 32 on one core, ~40
  GFLOP/s of the program's matmul work (the program itself: ~1.5).
* **Any device: PyTorch ops**; used for ``device="cuda"`` and where no C compiler is
  found.  Its tricks:

* **Runs stacked on a model axis.** Runs that share (model, length, hidden, batch, steps,
  lr, eval size, clip) are trained together: every weight gets a leading axis ``M`` (one
  slice per run) and every matmul is one ``bmm`` over it.  Each run keeps its own data
  stream, its own Adam moments (Adam is elementwise, so a stacked tensor *is* M separate
  Adams) and its own gradient clipping (the norm is taken per slice, over all of that
  run's parameters, like ``clip_grad_norm_`` on one model).
* **No autograd.** Forward and backward through time are written out by hand, so each time step costs a handful of
  kernel launches instead of the ~60 autograd nodes of the program:
  - the embedding is folded into the input projections: ``emb @ W_ih^T`` is a (V, 3h)
    table, gathered per token (and its gradient scattered back) instead of a (B T, E)
    matmul;
  - the attention after the cell update at step t *is* the attention before the update at
    step t+1 (same query, same keys): it is computed once;
  - every weight gradient (and the gradient flowing into the encoder states through the
    attention) is summed over time in one large ``bmm`` after the loop, so the loops only
    carry what the recurrence needs;
  - the scores are taken as a row vector times the transposed encoder states,
    ``(1, h) @ (h, T)``: the column form ``(T, h) @ (h, 1)`` of the program is a batched
    matrix-vector product that BLAS runs several times slower.
* **Flat parameters.** All parameters of a run live in one row of a (M, P) buffer (and the
  gradients in another), so Adam is five elementwise ops and the per-run gradient norm is
  one reduction, whatever the number of runs.

Initial weights: ``torch.manual_seed(seed)`` then :func:`attn_cli.core.copy_models.build_model`,
exactly as the exact engine, so seed K starts from the same weights.  Data: the same
``randint`` stream, drawn from a CPU generator that continues the global one right after
the model was built (the global RNG itself is left as it was found).  So the fast and the
exact engine see the same batches and start from the same point; they drift apart only by
the rounding of a different summation order.  Every step's loss agrees to float rounding
until training reaches a sensitive phase, where any rounding difference grows (at length 32,
seed 0, near step 730: a one-ulp change of one initial weight parts the exact engine from
itself at the same step); from there each engine draws its own sample of the seed's
distribution, and the two distributions match in mean and spread
(``benchmarks/copy_task_seeds.py``, ``benchmarks/copy_task_divergence.py``).

The PyTorch path is device-generic: ``device="cuda"`` runs the same ops on the GPU (the
data is drawn on the CPU generator and moved, as in the exact engine).  CUDA graphs are
not used yet: at batch 64 a GPU step is launch-bound too, so stacking seeds is what pays.

Names: ``M`` runs, ``B`` batch, ``T`` length (input = output), ``h`` hidden, ``E`` embedding
width, ``V`` vocabulary, ``G = 3h`` the GRU gates (r, z, n, PyTorch's order).
"""

from __future__ import annotations

import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

import torch

from attn_cli.core import copy_fast_kernel
from attn_cli.core.copy_models import build_model
from attn_cli.core.copy_spec import BOS, EMBED, VOCAB, RunOutcome, RunSpec, cpu_isa

PROGRESS_EVERY = 50  # steps between progress reports (plus the last step)

# progress(spec_index, step_done, total_steps, loss)
FastProgress = Optional[Callable[[int, int, int, float], None]]

PARAM_NAMES = ("emb", "e_wih", "e_whh", "e_bih", "e_bhh", "d_wih", "d_whh", "d_bih", "d_bhh", "o_w", "o_b")


def param_shapes(model: str, hidden: int) -> list[tuple[int, ...]]:
    """Shapes of one run's parameters, in the order of ``model.parameters()``."""
    h, E, V = hidden, EMBED, VOCAB
    d_in = E + h if model == "attention" else E  # decoder cell input: [emb; context] or emb
    r_in = 2 * h if model == "attention" else h  # readout input: [state; context] or state
    return [(V, E), (3 * h, E), (3 * h, h), (3 * h,), (3 * h,),
            (3 * h, d_in), (3 * h, h), (3 * h,), (3 * h,), (V, r_in), (V,)]


class Weights:
    """Named (M, ...) views into a flat (M, P) buffer (parameters or gradients)."""

    def __init__(self, flat: torch.Tensor, shapes: Sequence[tuple[int, ...]]):
        self.flat = flat  # (M, P)
        M = flat.shape[0]
        views, offset = [], 0
        for shape in shapes:
            n = math.prod(shape)
            views.append(flat[:, offset:offset + n].view(M, *shape))
            offset += n
        self.views = views
        for name, v in zip(PARAM_NAMES, views):
            setattr(self, name, v)


@dataclass
class _Group:
    """Runs trained together: same configuration except the seed."""

    indices: list[int]  # positions in the caller's spec list
    specs: list[RunSpec]


def group_key(spec: RunSpec) -> RunSpec:
    """Runs with equal keys can be stacked: everything but the seed."""
    return replace(spec, seed=0)


def group_specs(specs: Sequence[RunSpec]) -> list[_Group]:
    groups: dict[RunSpec, _Group] = {}
    for i, spec in enumerate(specs):
        if spec.model not in ("attention", "plain"):
            raise ValueError(f"unknown model {spec.model!r}; choose from attention, plain")
        g = groups.setdefault(group_key(spec), _Group([], []))
        g.indices.append(i)
        g.specs.append(spec)
    return list(groups.values())


def step_flops(model: str, length: int, hidden: int, batch_size: int) -> float:
    """Multiply-add FLOPs (x2) of one training step (forward + backward) of one run.

    Counted on the program's formulation (attention twice per decoder step, every matmul
    of the program; elementwise ops not counted), so GFLOP/s compare with the exact
    engine's useful work:
      forward = B T [ 2E*G + 2h*G                      encoder: input + recurrent projections
                    + 2(E+c)*G + 2h*G                  decoder cell (c = h with attention, else 0)
                    + 2 r*V                            readout (r = 2h with attention, else h)
                    + a * 2 * 2 * 2 T h ]              attention: 2 per step, scores + context
      backward = 2 x forward (gradients w.r.t. inputs and weights of every matmul)
    with G = 3h, a = 1 with attention, else 0.
    """
    B, T, h, E, V, G = batch_size, length, hidden, EMBED, VOCAB, 3 * hidden
    att = model == "attention"
    c = h if att else 0
    r = 2 * h if att else h
    fwd = B * T * (2 * E * G + 2 * h * G + 2 * (E + c) * G + 2 * h * G + 2 * r * V
                   + (8 * T * h if att else 0))
    return 3.0 * fwd


# ---------------------------------------------------------------------------------------
# forward and backward of one training step, all M runs at once
# ---------------------------------------------------------------------------------------

def _gather(table: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """table (M, V, G), tokens (T, M, B) -> rows (T, M, B, G): table[m, tokens[t, m, b]]."""
    M, V, G = table.shape
    offsets = torch.arange(M, device=tokens.device).view(1, M, 1) * V  # (1, M, 1)
    return table.reshape(M * V, G)[tokens + offsets]  # (T, M, B, G)


def _scatter(grad_rows: torch.Tensor, tokens: torch.Tensor, V: int) -> torch.Tensor:
    """Adjoint of _gather: grad_rows (T, M, B, G), tokens (T, M, B) -> (M, V, G)."""
    T, M, B, G = grad_rows.shape
    offsets = torch.arange(M, device=tokens.device).view(1, M, 1) * V
    out = torch.zeros(M * V, G, dtype=grad_rows.dtype, device=grad_rows.device)
    out.index_add_(0, (tokens + offsets).reshape(-1), grad_rows.reshape(-1, G))
    return out.view(M, V, G)


def _gru(gi: torch.Tensor, h: torch.Tensor, whh_t: torch.Tensor, bhh: torch.Tensor, H: int):
    """One GRU update (PyTorch's equations).

    gi (M, B, G) input projection incl. b_ih; h (M, B, h); whh_t (M, h, G); bhh (M, 1, G)
    -> new state (M, B, h) and what the backward needs: rz (M, B, 2h), n (M, B, h),
    ghn (M, B, h) = W_hn h + b_hn.
    """
    gh = torch.baddbmm(bhh, h, whh_t)  # (M, B, G)
    rz = torch.sigmoid(gi[..., :2 * H] + gh[..., :2 * H])  # (M, B, 2h): reset, update gates
    ghn = gh[..., 2 * H:]  # (M, B, h)
    n = torch.tanh(torch.addcmul(gi[..., 2 * H:], rz[..., :H], ghn))  # (M, B, h) candidate
    h_new = torch.lerp(n, h, rz[..., H:])  # (1 - z) n + z h
    return h_new, rz, n, ghn


def _gru_backward(dh: torch.Tensor, h_prev: torch.Tensor, rz: torch.Tensor, n: torch.Tensor,
                  ghn: torch.Tensor, whh: torch.Tensor, H: int, dgi: torch.Tensor):
    """Backward of :func:`_gru`.

    dh (M, B, h) gradient w.r.t. the new state; whh (M, G, h).  Writes the gradient w.r.t.
    the input projection gi into ``dgi`` (M, B, G) and returns (dgh (M, B, G), dh_prev (M, B, h)).
    """
    z = rz[..., H:]
    dhz = dh * z  # (M, B, h): the direct path h_prev -> h_new
    dn = dh - dhz  # (M, B, h) = dh (1 - z)
    dpre_n = torch.addcmul(dn, dn * n, n, value=-1.0)  # (M, B, h) = dn (1 - n^2)
    torch.mul(dpre_n, ghn, out=dgi[..., :H])  # d r
    torch.mul(dh, h_prev - n, out=dgi[..., H:2 * H])  # d z
    dgi[..., :2 * H].mul_(torch.addcmul(rz, rz, rz, value=-1.0))  # through the sigmoids
    dgi[..., 2 * H:].copy_(dpre_n)
    dgh = dgi.clone()  # (M, B, G)
    dgh[..., 2 * H:].mul_(rz[..., :H])  # the n gate sees r * (W_hn h + b_hn)
    dh_prev = torch.baddbmm(dhz, dgh, whh)  # (M, B, h)
    return dgh, dh_prev


class _Encoded:
    """Encoder pass: states and what its backward needs."""

    def __init__(self, w: Weights, src_t: torch.Tensor, H: int, keep: bool):
        T, M, B = src_t.shape
        table = torch.baddbmm(w.e_bih.unsqueeze(1), w.emb, w.e_wih.transpose(1, 2))  # (M, V, G)
        gi = _gather(table, src_t)  # (T, M, B, G)
        whh_t = w.e_whh.transpose(1, 2).contiguous()  # (M, h, G)
        bhh = w.e_bhh.unsqueeze(1)  # (M, 1, G)
        h = torch.zeros(M, B, H, dtype=table.dtype, device=table.device)
        states, self.tape = [], []
        for t in range(T):
            h_new, rz, n, ghn = _gru(gi[t], h, whh_t, bhh, H)
            if keep:
                self.tape.append((h, rz, n, ghn))
            states.append(h_new)
            h = h_new
        self.states = torch.stack(states, 2)  # (M, B, T, h)
        self.last = h  # (M, B, h)


def _attention_setup(enc_states: torch.Tensor, H: int):
    """enc_states (M, B, T, h) -> keys (M B, h, T) pre-scaled by 1/sqrt(h), values (M B, T, h)."""
    M, B, T, _ = enc_states.shape
    values = enc_states.reshape(M * B, T, H)  # (M B, T, h)
    keys_t = values.transpose(1, 2) * (1.0 / math.sqrt(H))  # (M B, h, T)
    return keys_t, values


def _attend(h: torch.Tensor, keys_t: torch.Tensor, values: torch.Tensor):
    """h (M, B, h) query -> weights (M B, 1, T), context (M, B, h)."""
    M, B, H = h.shape
    weights = torch.softmax(torch.bmm(h.reshape(M * B, 1, H), keys_t), dim=-1)  # (M B, 1, T)
    context = torch.bmm(weights, values)  # (M B, 1, h)
    return weights, context.view(M, B, H)


class _Decoded:
    """Teacher-forced decoder pass: logits and what its backward needs."""

    def __init__(self, w: Weights, enc: _Encoded, tgt_t: torch.Tensor, H: int, attention: bool,
                 keep: bool):
        T, M, B = tgt_t.shape
        E = EMBED
        self.attention = attention
        wie = w.d_wih[..., :E]  # (M, G, E): the embedding part of the cell's input weights
        table = torch.baddbmm(w.d_bih.unsqueeze(1), w.emb, wie.transpose(1, 2))  # (M, V, G)
        gie = _gather(table, tgt_t)  # (T, M, B, G)
        whh_t = w.d_whh.transpose(1, 2).contiguous()  # (M, h, G)
        bhh = w.d_bhh.unsqueeze(1)  # (M, 1, G)
        h = enc.last  # (M, B, h): h_0
        queries, contexts, weights, self.tape = [h], [], [], []
        if attention:
            wic_t = w.d_wih[..., E:].transpose(1, 2).contiguous()  # (M, h, G): the context part
            self.keys_t, self.values = _attention_setup(enc.states, H)
            a, c = _attend(h, self.keys_t, self.values)  # c_0: attention of h_0
            weights.append(a)
            contexts.append(c)
        for t in range(T):
            gi = torch.baddbmm(gie[t], contexts[-1], wic_t) if attention else gie[t]  # (M, B, G)
            h_new, rz, n, ghn = _gru(gi, h, whh_t, bhh, H)
            if keep:
                self.tape.append((h, rz, n, ghn))
            h = h_new
            queries.append(h)
            if attention:
                a, c = _attend(h, self.keys_t, self.values)  # readout attention of step t = input of t+1
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


def loss_and_grads(w: Weights, g: Weights, src: torch.Tensor, tgt_in: torch.Tensor, model: str,
                   hidden: int) -> torch.Tensor:
    """One teacher-forced forward and backward for all M runs.

    src, tgt_in (M, B, T) tokens; writes d loss_m / d params_m into ``g`` (one row per run)
    and returns the M losses (M,) (cross-entropy, mean over the run's B T tokens).
    """
    M, B, T = src.shape
    H, E, V = hidden, EMBED, VOCAB
    att = model == "attention"
    src_t = src.permute(2, 0, 1)  # (T, M, B)
    tgt_t = tgt_in.permute(2, 0, 1)  # (T, M, B)
    enc = _Encoded(w, src_t, H, keep=True)
    dec = _Decoded(w, enc, tgt_t, H, att, keep=True)

    # cross-entropy, one mean per run; rows are time-major (t, b)
    target = src_t.reshape(T, M, B).permute(1, 0, 2).reshape(M, T * B)  # (M, T B)
    logp = torch.log_softmax(dec.logits, -1)  # (M, T B, V)
    loss = -logp.gather(2, target.unsqueeze(2)).squeeze(2).mean(1)  # (M,)
    dlogits = logp.exp_()  # (M, T B, V): softmax
    dlogits.scatter_add_(2, target.unsqueeze(2), torch.full_like(dlogits[..., :1], -1.0))
    dlogits.mul_(1.0 / (T * B))

    # readout
    g.o_w.copy_(torch.bmm(dlogits.transpose(1, 2), dec.readin))  # (M, V, r)
    g.o_b.copy_(dlogits.sum(1))  # (M, V)
    dreadin = torch.bmm(dlogits, w.o_w).view(M, T, B, -1)  # (M, T, B, r)
    dh_read = dreadin[..., :H]  # (M, T, B, h)
    dc_read = dreadin[..., H:] if att else None  # (M, T, B, h)

    # decoder backward through time: states h_T .. h_0
    d_whh = w.d_whh  # (M, G, h)
    wic = w.d_wih[..., E:] if att else None  # (M, G, h)
    dgi_dec = torch.empty(T, M, B, 3 * H, dtype=dlogits.dtype, device=src.device)  # (T, M, B, G)
    dgh_dec = []
    if att:
        MB = M * B
        values_s = dec.values * (1.0 / math.sqrt(H))  # (M B, T, h)
        keys_raw_t = dec.values.transpose(1, 2)  # (M B, h, T)
        dcs, dss = [None] * (T + 1), [None] * (T + 1)
    dh_next = dc_next = None
    for t in range(T, -1, -1):
        # gradient w.r.t. h_t and c_t (t >= 1 feed the readout; t < T feed step t+1)
        if t >= 1:
            dh = dh_read[:, t - 1] if dh_next is None else dh_read[:, t - 1] + dh_next
        else:
            dh = dh_next
        if att:
            if t >= 1:
                dc = dc_read[:, t - 1] if dc_next is None else dc_read[:, t - 1] + dc_next
            else:
                dc = dc_next
            a = dec.weights[t]  # (M B, 1, T)
            da = torch.bmm(dc.reshape(MB, 1, H), keys_raw_t)  # (M B, 1, T) d weights
            ad = a * da
            ds = torch.addcmul(ad, a, ad.sum(-1, keepdim=True), value=-1.0)  # (M B, 1, T) d scores
            dh = torch.baddbmm(dh.reshape(MB, 1, H), ds, values_s).view(M, B, H)
            dcs[t], dss[t] = dc, ds
        if t == 0:
            break
        h_prev, rz, n, ghn = dec.tape[t - 1]
        dgh, dh_next = _gru_backward(dh, h_prev, rz, n, ghn, d_whh, H, dgi_dec[t - 1])
        dgh_dec.append(dgh)
        if att:
            dc_next = torch.bmm(dgi_dec[t - 1], wic)  # (M, B, h) into c_{t-1}
    dh_enc_last = dh  # (M, B, h)

    # decoder weight gradients, summed over time in single bmm's
    dgh_dec = torch.stack(dgh_dec[::-1], 1).view(M, T * B, 3 * H)  # (M, T B, G), steps 1..T
    h_prev_dec = torch.stack(dec.queries[:-1], 1).view(M, T * B, H)  # (M, T B, h)
    g.d_whh.copy_(torch.bmm(dgh_dec.transpose(1, 2), h_prev_dec))  # (M, G, h)
    g.d_bhh.copy_(dgh_dec.sum(1))
    dgi_rows = dgi_dec.permute(1, 0, 2, 3).reshape(M, T * B, 3 * H)  # (M, T B, G)
    d_table_dec = _scatter(dgi_dec, tgt_t, V)  # (M, V, G)
    g.d_bih.copy_(d_table_dec.sum(1))
    g.d_wih[..., :E].copy_(torch.bmm(d_table_dec.transpose(1, 2), w.emb))  # (M, G, E)
    d_emb = torch.bmm(d_table_dec, w.d_wih[..., :E])  # (M, V, E)

    if att:
        c_prev = torch.stack(dec.contexts[:-1], 1).view(M, T * B, H)  # (M, T B, h): c_0..c_{T-1}
        g.d_wih[..., E:].copy_(torch.bmm(dgi_rows.transpose(1, 2), c_prev))  # (M, G, h)
        # gradient into the encoder states through every attention (keys and values)
        A = torch.cat(dec.weights + dss, 1)  # (M B, 2(T+1), T): weights, then d scores
        Q = torch.stack([dcs[t].reshape(MB, H) for t in range(T + 1)]
                        + [q.reshape(MB, H) * (1.0 / math.sqrt(H)) for q in dec.queries], 1)  # (M B, 2(T+1), h)
        d_states = torch.bmm(A.transpose(1, 2), Q).view(M, B, T, H)  # (M, B, T, h)
    else:
        d_states = None

    # encoder backward through time
    dgi_enc = torch.empty(T, M, B, 3 * H, dtype=dgi_dec.dtype, device=src.device)  # (T, M, B, G)
    dgh_enc = []
    dh_carry = dh_enc_last
    for t in range(T - 1, -1, -1):
        dh = dh_carry if d_states is None else d_states[:, :, t] + dh_carry
        h_prev, rz, n, ghn = enc.tape[t]
        dgh, dh_carry = _gru_backward(dh, h_prev, rz, n, ghn, w.e_whh, H, dgi_enc[t])
        dgh_enc.append(dgh)
    dgh_enc = torch.stack(dgh_enc[::-1], 1).view(M, T * B, 3 * H)  # (M, T B, G)
    h_prev_enc = torch.stack([h for h, _, _, _ in enc.tape], 1).view(M, T * B, H)  # (M, T B, h)
    g.e_whh.copy_(torch.bmm(dgh_enc.transpose(1, 2), h_prev_enc))
    g.e_bhh.copy_(dgh_enc.sum(1))
    d_table_enc = _scatter(dgi_enc, src_t, V)  # (M, V, G)
    g.e_bih.copy_(d_table_enc.sum(1))
    g.e_wih.copy_(torch.bmm(d_table_enc.transpose(1, 2), w.emb))  # (M, G, E)
    d_emb += torch.bmm(d_table_enc, w.e_wih)  # (M, V, E)
    g.emb.copy_(d_emb)
    return loss


# ---------------------------------------------------------------------------------------
# optimiser: per-run clipping, Adam on the flat (M, P) buffers
# ---------------------------------------------------------------------------------------

class _Adam:
    """torch.optim.Adam's update (defaults betas (0.9, 0.999), eps 1e-8), on (M, P) rows."""

    def __init__(self, params: torch.Tensor, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.p, self.lr, self.betas, self.eps, self.step_count = params, lr, betas, eps, 0
        self.m = torch.zeros_like(params)  # (M, P)
        self.v = torch.zeros_like(params)  # (M, P)

    def step(self, grad: torch.Tensor) -> None:
        b1, b2 = self.betas
        self.step_count += 1
        bc1 = 1 - b1 ** self.step_count
        bc2_sqrt = math.sqrt(1 - b2 ** self.step_count)
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


# ---------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------

@torch.no_grad()
def evaluate(w: Weights, src: torch.Tensor, tgt_in: torch.Tensor, model: str, hidden: int):
    """src, tgt_in (M, N, T) -> teacher-forced, free-running, exact accuracies (each (M,)),
    and the readout weights of free running on sequence 0 of each run (M, T, T) or None."""
    M, N, T = src.shape
    H, E = hidden, EMBED
    att = model == "attention"
    src_t, tgt_t = src.permute(2, 0, 1), tgt_in.permute(2, 0, 1)  # (T, M, N)
    enc = _Encoded(w, src_t, H, keep=False)
    dec = _Decoded(w, enc, tgt_t, H, att, keep=False)
    forced_tok = dec.logits.argmax(-1).view(M, T, N).permute(0, 2, 1)  # (M, N, T)
    forced = (forced_tok == src).float().mean((1, 2))  # (M,)

    # free running from BOS
    table = torch.baddbmm(w.d_bih.unsqueeze(1), w.emb, w.d_wih[..., :E].transpose(1, 2))  # (M, V, G)
    whh_t = w.d_whh.transpose(1, 2).contiguous()
    bhh = w.d_bhh.unsqueeze(1)
    o_wt, o_b = w.o_w.transpose(1, 2), w.o_b.unsqueeze(1)  # (M, r, V), (M, 1, V)
    tok = torch.full((1, M, N), BOS, dtype=src.dtype, device=src.device)  # (1, M, N)
    h = enc.last
    rows, out = [], []
    hits = torch.zeros(M, dtype=torch.long, device=src.device)  # (M,) steps peaking at their own position
    if att:
        wic_t = w.d_wih[..., E:].transpose(1, 2).contiguous()
        keys_t, values = _attention_setup(enc.states, H)
        _, c = _attend(h, keys_t, values)
    for t in range(T):
        gi = _gather(table, tok)[0]  # (M, N, G)
        if att:
            gi = torch.baddbmm(gi, c, wic_t)
        h, _, _, _ = _gru(gi, h, whh_t, bhh, H)
        if att:
            a, c = _attend(h, keys_t, values)  # (M N, 1, T), (M, N, h)
            rows.append(a.view(M, N, T)[:, 0])  # (M, T)
            hits += (a.view(M, N, T).argmax(-1) == t).sum(1)  # (M,)
            readin = torch.cat([h, c], -1)
        else:
            readin = h
        tok = torch.baddbmm(o_b, readin, o_wt).argmax(-1).unsqueeze(0)  # (1, M, N)
        out.append(tok[0])
    free_tok = torch.stack(out, 2)  # (M, N, T)
    correct = free_tok == src
    free = correct.float().mean((1, 2))
    exact = correct.all(2).float().mean(1)
    example = torch.stack(rows, 1) if att else None  # (M, T_out, T_in)
    diagonal = hits.double() / (N * T) if att else None  # (M,)
    return forced, free, exact, example, diagonal


# ---------------------------------------------------------------------------------------
# the runs
# ---------------------------------------------------------------------------------------

def init_run(spec: RunSpec) -> tuple[torch.Tensor, torch.Generator]:
    """Seed K's initial weights as one flat (P,) row, and the generator of its data stream.

    Same as the exact engine: manual_seed, then build_model; the data generator continues
    the global stream from there.  The global RNG state is restored afterwards.
    """
    with _RNG_LOCK:  # the global RNG is process-wide: never two of these at once
        return _init_run_locked(spec)


_RNG_LOCK = threading.Lock()


def _init_run_locked(spec: RunSpec) -> tuple[torch.Tensor, torch.Generator]:
    saved = torch.get_rng_state()
    try:
        torch.manual_seed(spec.seed)
        net = build_model(spec.model, spec.hidden)
        gen = torch.Generator()
        gen.set_state(torch.get_rng_state())
    finally:
        torch.set_rng_state(saved)
    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])  # (P,)
    return flat, gen


def draw_batch(gens: Sequence[torch.Generator], batch_size: int, length: int, device: str):
    """One batch per run from its own stream -> src, tgt_in (M, B, T) on ``device``."""
    src = torch.stack([torch.randint(0, 10, (batch_size, length), generator=g) for g in gens])  # (M, B, T)
    bos = torch.full((len(gens), batch_size, 1), BOS, dtype=src.dtype)
    tgt_in = torch.cat([bos, src[..., :-1]], 2)  # (M, B, T) = [BOS, src[:, :-1]]
    return src.to(device), tgt_in.to(device)


def train_group(specs: Sequence[RunSpec], device: str = "cpu",
                progress: Optional[Callable[[int, int, int, float], None]] = None,
                stop: Optional[threading.Event] = None, inits=None) -> list[RunOutcome]:
    """Train the stacked runs ``specs`` (equal but for the seed) with PyTorch ops; any device.

    ``inits``: their :func:`init_run` results, if already made.
    """
    start, cpu = time.perf_counter(), time.thread_time()
    s0 = specs[0]
    inits = inits or [init_run(s) for s in specs]
    shapes = param_shapes(s0.model, s0.hidden)
    flat = torch.stack([f for f, _ in inits]).to(device)  # (M, P)
    gens = [g for _, g in inits]
    grad = torch.zeros_like(flat)  # (M, P)
    w, g = Weights(flat, shapes), Weights(grad, shapes)
    opt = _Adam(flat, s0.lr)
    loss = None
    with torch.no_grad():
        for step in range(1, s0.steps + 1):
            src, tgt_in = draw_batch(gens, s0.batch_size, s0.length, device)
            loss = loss_and_grads(w, g, src, tgt_in, s0.model, s0.hidden)  # (M,)
            clip_per_run(grad, s0.clip)
            opt.step(grad)
            if step % PROGRESS_EVERY == 0 or step == s0.steps:
                if stop is not None and stop.is_set():
                    raise _Stopped()
                if progress is not None:
                    for i, value in enumerate(loss.tolist()):
                        progress(i, step, s0.steps, value)
        final = loss.tolist() if loss is not None else [float("nan")] * len(specs)
    return _evaluate_outcomes(specs, flat, gens, final, device, start, cpu)


def train_kernel(spec: RunSpec, lib, progress: Optional[Callable[[int, int, int, float], None]] = None,
                 stop: Optional[threading.Event] = None, init=None) -> list[RunOutcome]:
    """Train one run with the C kernel (CPU), PROGRESS_EVERY steps per call.

    ``init``: its :func:`init_run` result, if already made.
    """
    start, cpu = time.perf_counter(), time.thread_time()
    flat, gen = init or init_run(spec)
    params = flat.to(torch.float32).contiguous()  # (P,)
    grad, m1, m2 = torch.zeros_like(params), torch.zeros_like(params), torch.zeros_like(params)
    B, T, H, att = spec.batch_size, spec.length, spec.hidden, int(spec.model == "attention")
    done, final = 0, float("nan")
    while done < spec.steps:
        if stop is not None and stop.is_set():
            raise _Stopped()
        n = min(PROGRESS_EVERY, spec.steps - done)
        # n successive draws of the program's batch(B): one randint gives the same numbers
        src = torch.randint(0, 10, (n * B, T), generator=gen)  # (n B, T)
        losses = torch.empty(n, dtype=torch.float32)  # (n,)
        rc = lib.train_steps(params.data_ptr(), grad.data_ptr(), m1.data_ptr(), m2.data_ptr(), done,
                             src.data_ptr(), n, B, T, H, att, float(spec.lr), float(spec.clip),
                             losses.data_ptr())
        if rc != 0:
            raise MemoryError(f"copy-task kernel could not allocate its work space (length {T})")
        done += n
        final = losses[-1].item()
        if progress is not None:
            progress(0, done, spec.steps, final)
    return _evaluate_outcomes([spec], params.unsqueeze(0), [gen], [final], "cpu", start, cpu)


def _evaluate_outcomes(specs, flat, gens, final, device, start, cpu) -> list[RunOutcome]:
    """The evaluation batch (one more draw per run) and the RunOutcomes of a trained group.

    ``seconds`` is the group's wall time; ``cpu_seconds`` the CPU time of the thread that
    trained it (the kernel and torch's single intra-op thread run there), split evenly
    over the stacked runs.
    """
    s0 = specs[0]
    w = Weights(flat, param_shapes(s0.model, s0.hidden))
    src, tgt_in = draw_batch(gens, s0.eval_size, s0.length, device)  # (M, N, T)
    forced, free, exact, example, diagonal = evaluate(w, src, tgt_in, s0.model, s0.hidden)
    forced, free, exact = forced.tolist(), free.tolist(), exact.tolist()
    diagonal = diagonal.tolist() if diagonal is not None else [None] * len(specs)
    isa = cpu_isa()
    seconds = time.perf_counter() - start
    cpu_share = (time.thread_time() - cpu) / len(specs)
    outcomes = []
    for i, spec in enumerate(specs):
        outcomes.append(RunOutcome(
            spec=spec, teacher_forced=forced[i], free_running=free[i], exact=exact[i],
            seconds=seconds, final_loss=final[i],
            example_src=src[i, 0].tolist() if example is not None else [],
            example_weights=example[i].tolist() if example is not None else [],
            engine="fast", cpu_seconds=cpu_share, diagonal=diagonal[i], isa=isa))
    return outcomes


class _Stopped(Exception):
    """A worker noticed that the run was cancelled."""


def available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_fast(specs: list[RunSpec], device: str = "cpu", progress: FastProgress = None, *,
             threads: Optional[int] = None, backend: str = "auto") -> list[RunOutcome]:
    """Train and evaluate every spec with the fast engine; outcomes in the order of ``specs``.

    backend: ``"kernel"`` (the C kernel, CPU only, one run per task), ``"torch"`` (PyTorch
    ops, runs equal but for the seed stacked into one computation, any device) or
    ``"auto"`` (the kernel on CPU where it builds, else torch).
    threads: tasks trained at once on CPU (default: one per available core, at most one per
    task); each task uses one core.  ``seconds`` of an outcome is the wall time of its task.
    ``progress(spec_index, step, steps, loss)`` is called every PROGRESS_EVERY steps, from
    worker threads but never two calls at once.
    """
    if backend not in ("auto", "kernel", "torch"):
        raise ValueError(f"unknown backend {backend!r}; choose from auto, kernel, torch")
    on_cpu = torch.device(device).type == "cpu"
    lib = None
    if on_cpu and backend in ("auto", "kernel"):
        lib = copy_fast_kernel.load()
        if lib is None and backend == "kernel":
            raise RuntimeError(f"the copy-task C kernel is not available: {copy_fast_kernel.load_error()}")
    elif backend == "kernel":
        raise ValueError("the C kernel runs on CPU only; use backend='torch' on other devices")

    groups = group_specs(specs)
    if lib is not None:  # one task per run
        tasks = [_Group([i], [s]) for g in groups for i, s in zip(g.indices, g.specs)]
    else:
        tasks = groups
    # longest first, so that the threads finish together
    tasks.sort(key=lambda g: -len(g.specs) * g.specs[0].steps * step_flops(
        g.specs[0].model, g.specs[0].length, g.specs[0].hidden, g.specs[0].batch_size))
    n_threads = 1 if not on_cpu else min(len(tasks), threads or available_cpus())
    if n_threads < 1:
        raise ValueError("threads must be at least 1")

    lock, stop = threading.Lock(), threading.Event()
    outcomes: list[Optional[RunOutcome]] = [None] * len(specs)
    # initial weights and data generators made here, in order, before any thread starts
    inits = {i: init_run(specs[i]) for task in tasks for i in task.indices}

    def work(task: _Group) -> None:
        report = None
        if progress is not None:
            def report(i, step, total, value):
                with lock:
                    progress(task.indices[i], step, total, value)
        if lib is not None:
            result = train_kernel(task.specs[0], lib, report, stop, inits[task.indices[0]])
        else:
            result = train_group(task.specs, device, report, stop, [inits[i] for i in task.indices])
        for i, outcome in zip(task.indices, result):
            outcome.backend = "kernel" if lib is not None else "torch"
            outcomes[i] = outcome

    saved_threads = torch.get_num_threads()
    if on_cpu:
        torch.set_num_threads(1)  # one core per task, like the exact engine
    try:
        if n_threads == 1:
            for task in tasks:
                work(task)
        else:
            pool = ThreadPoolExecutor(max_workers=n_threads)
            try:
                futures = [pool.submit(work, t) for t in tasks]
                for f in futures:
                    f.result()
            except BaseException:
                stop.set()  # workers stop at their next chunk boundary
                pool.shutdown(wait=True, cancel_futures=True)
                raise
            pool.shutdown(wait=True)
    finally:
        if on_cpu:
            torch.set_num_threads(saved_threads)
    return outcomes  # type: ignore[return-value]
