"""Evaluation of trained runs: teacher-forced, free-running and exact accuracies."""

from __future__ import annotations

import torch

from attn_cli.core.copy_fast.forward import Decoded, Encoded, attend, gather, gru
from attn_cli.core.copy_fast.layout import Weights
from attn_cli.core.copy_spec import BOS, EMBED


@torch.no_grad()
def evaluate(
    w: Weights, src: torch.Tensor, tgt_in: torch.Tensor, model: str, hidden: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """src, tgt_in (M, N, T) -> teacher-forced, free-running, exact accuracies (each (M,)),
    and the readout weights of free running on sequence 0 of each run (M, T, T) or None."""
    M, N, T = src.shape
    H, E = hidden, EMBED
    att = model == "attention"
    src_t, tgt_t = src.permute(2, 0, 1), tgt_in.permute(2, 0, 1)  # (T, M, N)
    enc = Encoded(w, src_t, H, keep=False)
    dec = Decoded(w, enc, tgt_t, H, att, keep=False)
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
        keys_t, values, c = dec.keys_t, dec.values, dec.contexts[0]  # c_0: the attention of h_0
    for t in range(T):
        gi = gather(table, tok)[0]  # (M, N, G)
        if att:
            gi = torch.baddbmm(gi, c, wic_t)
        h, _, _, _ = gru(gi, h, whh_t, bhh, H)
        if att:
            a, c = attend(h, keys_t, values)  # (M N, 1, T), (M, N, h)
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
