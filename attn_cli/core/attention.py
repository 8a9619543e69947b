"""Scaled dot-product attention and multi-head attention (design notes: ``docs/design.md``,
section ``attn_cli.core.attention``).  Masks are keep-masks: True = the query may see the key."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def causal_mask(n_q: int, n_k: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """Keep-mask letting query i see keys 0..i.  Shape (n_q, n_k)."""
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def valid_lens_mask(valid_lens: Tensor, n_q: int, n_k: int) -> Tensor:
    """Keep-mask from D2L ``valid_lens``: (B,) per sequence or (B, n_q) per query -> (B, n_q, n_k)."""
    if valid_lens.dim() not in (1, 2):
        raise ValueError(f"valid_lens must be 1-D or 2-D, got shape {tuple(valid_lens.shape)}")
    positions = torch.arange(n_k, device=valid_lens.device)  # (n_k,)
    lens = valid_lens[:, None].expand(-1, n_q) if valid_lens.dim() == 1 else valid_lens  # (B, n_q)
    return positions[None, None, :] < lens[:, :, None]  # (B, n_q, n_k)


def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last axis of scores (..., n_q, n_k) where entries the keep-mask (broadcastable,
    or None) masks out get weight exactly 0; a row with no allowed key is all zeros."""
    if mask is None:
        return torch.softmax(scores, dim=-1)
    mask = mask.to(torch.bool)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    # fully masked rows are NaN after softmax(-inf, ..., -inf): make them exact zeros
    return torch.nan_to_num(weights, nan=0.0).masked_fill(~mask, 0.0)


def scaled_dot_product_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    valid_lens: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V: queries (..., n_q, d_k), keys (..., n_k, d_k), values (..., n_k, d_v)
    -> ``(output, weights)``, (..., n_q, d_v) and (..., n_q, n_k).  mask: broadcastable to (..., n_q, n_k);
    valid_lens: as :func:`valid_lens_mask` (queries (B, n_q, d_k)); both given: combined with AND."""
    scale = 1.0 / math.sqrt(queries.size(-1)) if scale is None else scale
    scores = queries @ keys.transpose(-2, -1) * scale  # (..., n_q, n_k)
    keep = mask
    if valid_lens is not None:
        vl = valid_lens_mask(valid_lens.to(queries.device), scores.size(-2), scores.size(-1))
        keep = vl if keep is None else (keep.to(torch.bool) & vl)
    weights = masked_softmax(scores, keep)  # (..., n_q, n_k)
    return weights @ values, weights  # (..., n_q, d_v), (..., n_q, n_k)


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, n, num_heads * p) -> (B * num_heads, n, p): heads folded into the batch axis."""
    b, n, d = x.shape
    x = x.reshape(b, n, num_heads, d // num_heads)  # (B, n, h, p)
    return x.permute(0, 2, 1, 3).reshape(b * num_heads, n, d // num_heads)  # (B*h, n, p)


def merge_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B * num_heads, n, p) -> (B, n, num_heads * p): the inverse of :func:`split_heads`."""
    bh, n, p = x.shape
    x = x.reshape(bh // num_heads, num_heads, n, p)  # (B, h, n, p)
    return x.permute(0, 2, 1, 3).reshape(bh // num_heads, n, num_heads * p)  # (B, n, h*p)


class MultiHeadAttention(nn.Module):
    """D2L 10.3 multi-head attention: project, fold heads into the batch, attend, merge, project.
    ``forward`` returns ``(output, weights)``, weights (B, num_heads, n_q, n_k), so pictures never
    reach into the module; ``valid_lens`` is repeated per head (head-major), as in the text.  The
    layers are made eagerly in the order W_q, W_k, W_v, W_o: the same initialisation under a seed."""

    def __init__(
        self, num_hiddens: int, num_heads: int, dropout: float = 0.0, bias: bool = False, d_in: int | None = None
    ):
        super().__init__()
        if num_heads < 1 or num_hiddens % num_heads:
            raise ValueError(f"num_heads ({num_heads}) must divide num_hiddens ({num_hiddens})")
        d_in = num_hiddens if d_in is None else d_in
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_in, num_hiddens, bias=bias)
        self.W_k = nn.Linear(d_in, num_hiddens, bias=bias)
        self.W_v = nn.Linear(d_in, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        # queries: (B, n_q, d_in); keys, values: (B, n_k, d_in)
        h = self.num_heads
        q = split_heads(self.W_q(queries), h)  # (B*h, n_q, p)
        k = split_heads(self.W_k(keys), h)  # (B*h, n_k, p)
        v = split_heads(self.W_v(values), h)  # (B*h, n_k, p)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=h, dim=0)  # (B*h,) or (B*h, n_q)
        if mask is not None and mask.dim() == 3:  # (B, n_q, n_k) -> (B*h, n_q, n_k)
            mask = torch.repeat_interleave(mask, repeats=h, dim=0)
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask, valid_lens=valid_lens)
        out = self.dropout(out)  # dropout on the output, not on the weights (weights stay plottable)
        return self.W_o(merge_heads(out, h)), weights.reshape(queries.size(0), h, *weights.shape[-2:])


def count_parameters(module: nn.Module) -> int:
    """Number of scalar parameters of a concrete (non-lazy) module."""
    return sum(p.numel() for p in module.parameters())
