"""Backward through time of the fast engine's PyTorch backend, all M stacked runs at once, by hand (no
autograd): a few launches per step, every weight gradient summed over time in one ``bmm`` after the loop."""

from __future__ import annotations

import math

import torch

from attn_cli.core.copy_fast.forward import Decoded, Encoded, Weights
from attn_cli.core.copy_spec import EMBED, VOCAB


def scatter(grad_rows: torch.Tensor, tokens: torch.Tensor, V: int, onehot: bool = False) -> torch.Tensor:
    """Adjoint of gather: grad_rows (T, M, B, G), tokens (T, M, B) -> (M, V, G).  On CPU
    ``index_add_`` (sequential: the engine's bits); elsewhere (or ``onehot``) a matmul with the tokens'
    one-hot rows, since CUDA's ``index_add_`` sums with float atomics in whatever order the threads arrive."""
    T, M, B, G = grad_rows.shape
    if onehot or grad_rows.device.type != "cpu":
        hot = torch.nn.functional.one_hot(tokens.permute(1, 0, 2).reshape(M, T * B), V)  # (M, T B, V)
        rows = grad_rows.permute(1, 0, 2, 3).reshape(M, T * B, G)  # (M, T B, G)
        return torch.bmm(hot.to(grad_rows.dtype).transpose(1, 2), rows)  # (M, V, G)
    offsets = torch.arange(M, device=tokens.device).view(1, M, 1) * V
    out = torch.zeros(M * V, G, dtype=grad_rows.dtype, device=grad_rows.device)
    out.index_add_(0, (tokens + offsets).reshape(-1), grad_rows.reshape(-1, G))
    return out.view(M, V, G)


def gru_backward(
    dh: torch.Tensor, tape: tuple[torch.Tensor, ...], whh: torch.Tensor, H: int, dgi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Backward of :func:`gru`: dh (M, B, h) gradient w.r.t. the new state; tape (h_prev, rz, n, ghn) of
    the step; whh (M, G, h).  Writes the gradient w.r.t. the input projection gi into ``dgi`` (M, B, G);
    returns dgh (M, B, G), dh_prev (M, B, h)."""
    h_prev, rz, n, ghn = tape
    z = rz[..., H:]
    dhz = dh * z  # (M, B, h): the direct path h_prev -> h_new
    dn = dh - dhz  # (M, B, h) = dh (1 - z)
    dpre_n = torch.addcmul(dn, dn * n, n, value=-1.0)  # (M, B, h) = dn (1 - n^2)
    torch.mul(dpre_n, ghn, out=dgi[..., :H])  # d r
    torch.mul(dh, h_prev - n, out=dgi[..., H : 2 * H])  # d z
    dgi[..., : 2 * H].mul_(torch.addcmul(rz, rz, rz, value=-1.0))  # through the sigmoids
    dgi[..., 2 * H :].copy_(dpre_n)
    dgh = dgi.clone()  # (M, B, G)
    dgh[..., 2 * H :].mul_(rz[..., :H])  # the n gate sees r * (W_hn h + b_hn)
    dh_prev = torch.baddbmm(dhz, dgh, whh)  # (M, B, h)
    return dgh, dh_prev


def _incoming(from_readout: torch.Tensor, t: int, from_next: torch.Tensor | None) -> torch.Tensor:
    """The gradient w.r.t. h_t (or c_t): t >= 1 feed the readout, t < T feed step t+1."""
    if t == 0:
        assert from_next is not None  # set by step 1
        return from_next
    return from_readout[:, t - 1] if from_next is None else from_readout[:, t - 1] + from_next


def loss_and_grads(
    w: Weights, g: Weights, src: torch.Tensor, tgt_in: torch.Tensor, model: str, hidden: int
) -> torch.Tensor:
    """One teacher-forced forward and backward for all M runs: src, tgt_in (M, B, T) tokens; writes
    d loss_m / d params_m into ``g`` (one row per run), returns the M losses (M,) (mean cross-entropy)."""
    M, B, T = src.shape
    H, E, V = hidden, EMBED, VOCAB
    att = model == "attention"
    src_t = src.permute(2, 0, 1)  # (T, M, B)
    tgt_t = tgt_in.permute(2, 0, 1)  # (T, M, B)
    enc = Encoded(w, src_t, H, keep=True)
    dec = Decoded(w, enc, tgt_t, H, att, keep=True)

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

    # decoder backward through time: states h_T .. h_0
    d_whh = w.d_whh  # (M, G, h)
    dgi_dec = torch.empty(T, M, B, 3 * H, dtype=dlogits.dtype, device=src.device)  # (T, M, B, G)
    dgh_dec_steps: list[torch.Tensor] = []
    if att:
        dc_read = dreadin[..., H:]  # (M, T, B, h)
        wic = w.d_wih[..., E:]  # (M, G, h)
        MB = M * B
        values_s = dec.values * (1.0 / math.sqrt(H))  # (M B, T, h)
        keys_raw_t = dec.values.transpose(1, 2)  # (M B, h, T)
        dcs: dict[int, torch.Tensor] = {}  # by step t
        dss: dict[int, torch.Tensor] = {}
    dh_next: torch.Tensor | None = None
    dc_next: torch.Tensor | None = None
    for t in range(T, -1, -1):
        dh = _incoming(dh_read, t, dh_next)
        if att:
            dc = _incoming(dc_read, t, dc_next)
            a = dec.weights[t]  # (M B, 1, T)
            da = torch.bmm(dc.reshape(MB, 1, H), keys_raw_t)  # (M B, 1, T) d weights
            ad = a * da
            ds = torch.addcmul(ad, a, ad.sum(-1, keepdim=True), value=-1.0)  # (M B, 1, T) d scores
            dh = torch.baddbmm(dh.reshape(MB, 1, H), ds, values_s).view(M, B, H)
            dcs[t], dss[t] = dc, ds
        if t == 0:
            break
        dgh, dh_next = gru_backward(dh, dec.tape[t - 1], d_whh, H, dgi_dec[t - 1])
        dgh_dec_steps.append(dgh)
        if att:
            dc_next = torch.bmm(dgi_dec[t - 1], wic)  # (M, B, h) into c_{t-1}
    dh_enc_last = dh  # (M, B, h)

    # decoder weight gradients, summed over time in single bmm's
    dgh_dec = torch.stack(dgh_dec_steps[::-1], 1).view(M, T * B, 3 * H)  # (M, T B, G), steps 1..T
    h_prev_dec = torch.stack(dec.queries[:-1], 1).view(M, T * B, H)  # (M, T B, h)
    g.d_whh.copy_(torch.bmm(dgh_dec.transpose(1, 2), h_prev_dec))  # (M, G, h)
    g.d_bhh.copy_(dgh_dec.sum(1))
    dgi_rows = dgi_dec.permute(1, 0, 2, 3).reshape(M, T * B, 3 * H)  # (M, T B, G)
    d_table_dec = scatter(dgi_dec, tgt_t, V)  # (M, V, G)
    g.d_bih.copy_(d_table_dec.sum(1))
    g.d_wih[..., :E].copy_(torch.bmm(d_table_dec.transpose(1, 2), w.emb))  # (M, G, E)
    d_emb = torch.bmm(d_table_dec, w.d_wih[..., :E])  # (M, V, E)

    if att:
        c_prev = torch.stack(dec.contexts[:-1], 1).view(M, T * B, H)  # (M, T B, h): c_0..c_{T-1}
        g.d_wih[..., E:].copy_(torch.bmm(dgi_rows.transpose(1, 2), c_prev))  # (M, G, h)
        # gradient into the encoder states through every attention (keys and values)
        A = torch.cat(dec.weights + [dss[t] for t in range(T + 1)], 1)  # (M B, 2(T+1), T): weights, then d scores
        Q = torch.stack(
            [dcs[t].reshape(MB, H) for t in range(T + 1)]
            + [q.reshape(MB, H) * (1.0 / math.sqrt(H)) for q in dec.queries],
            1,
        )  # (M B, 2(T+1), h)
        d_states = torch.bmm(A.transpose(1, 2), Q).view(M, B, T, H)  # (M, B, T, h)
    else:
        d_states = None

    # encoder backward through time
    dgi_enc = torch.empty(T, M, B, 3 * H, dtype=dgi_dec.dtype, device=src.device)  # (T, M, B, G)
    dgh_enc_steps: list[torch.Tensor] = []
    dh_carry = dh_enc_last
    for t in range(T - 1, -1, -1):
        dh = dh_carry if d_states is None else d_states[:, :, t] + dh_carry
        dgh, dh_carry = gru_backward(dh, enc.tape[t], w.e_whh, H, dgi_enc[t])
        dgh_enc_steps.append(dgh)
    dgh_enc = torch.stack(dgh_enc_steps[::-1], 1).view(M, T * B, 3 * H)  # (M, T B, G)
    h_prev_enc = torch.stack([h for h, _, _, _ in enc.tape], 1).view(M, T * B, H)  # (M, T B, h)
    g.e_whh.copy_(torch.bmm(dgh_enc.transpose(1, 2), h_prev_enc))
    g.e_bhh.copy_(dgh_enc.sum(1))
    d_table_enc = scatter(dgi_enc, src_t, V)  # (M, V, G)
    g.e_bih.copy_(d_table_enc.sum(1))
    g.e_wih.copy_(torch.bmm(d_table_enc.transpose(1, 2), w.emb))  # (M, G, E)
    d_emb += torch.bmm(d_table_enc, w.e_wih)  # (M, V, E)
    g.emb.copy_(d_emb)
    return loss
