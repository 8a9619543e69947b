"""Small measurements shared by experiments: readout error, line fits, folded heads."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from attn_cli.core.attention import merge_heads, scaled_dot_product_attention, split_heads


def relative_error(pred: Tensor, target: Tensor, squared: bool = False) -> float:
    """||pred - target|| / ||target|| (both squared if ``squared``)."""
    error, norm = (pred - target).norm(), target.norm()
    return (error**2 / norm**2 if squared else error / norm).item()


def readout_error(
    M: Tensor,
    target: Tensor,
    driver: str | None = "gelsd",
    held_out: tuple[Tensor, Tensor] | None = None,
    squared: bool = False,
) -> float:
    """The text's ``readout_error``: relative error of the best linear readout of ``target`` (N, t) from ``M``
    (N, k), fitted on ``(M, target)`` and scored there or on ``held_out``.  The fit is ``torch.linalg.lstsq`` on
    the CPU (on CUDA, which has only 'gels', the pseudo-inverse) with 'gelsd': the text's default 'gelsy'
    (``driver=None``) changes its float32 answer's last bits (and rank) from call to call in this MKL build."""
    if M.device.type == "cpu":
        W = torch.linalg.lstsq(M, target, driver=driver).solution  # (k, t)
    else:
        W = torch.linalg.pinv(M) @ target
    M_eval, t_eval = held_out if held_out is not None else (M, target)
    return relative_error(M_eval @ W, t_eval, squared)


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares ``y = intercept + slope * x``: returns (intercept, slope, R^2)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-30
    return intercept, slope, 1 - ss_res / ss_tot


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of log y on log x; None with fewer than two distinct x."""
    if len(set(xs)) < 2:
        return None
    return fit_line([math.log(x) for x in xs], [math.log(y) for y in ys])[1]


def attend_heads(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    num_heads: int,
    W_o: Callable[[Tensor], Tensor],
    valid_lens: Tensor | None = None,
    kv_heads: int | None = None,
) -> Tensor:
    """Projected q (B, n_q, d), k and v (B, n_k, g p) -> W_o(merged heads) (B, n_q, d): ``kv_heads``
    g (default ``num_heads``) key/value heads each serve num_heads / g query heads (grouped-query
    attention); ``valid_lens`` is already per folded head (B*h, ...)."""
    g = num_heads if kv_heads is None else kv_heads
    q = split_heads(q, num_heads)  # (B*h, n_q, p)
    k, v = split_heads(k, g), split_heads(v, g)  # (B*g, n_k, p)
    if g != num_heads:
        k = torch.repeat_interleave(k, num_heads // g, dim=0)  # (B*h, n_k, p): group j serves heads j*h/g..
        v = torch.repeat_interleave(v, num_heads // g, dim=0)
    out, _ = scaled_dot_product_attention(q, k, v, valid_lens=valid_lens)  # (B*h, n_q, p)
    return W_o(merge_heads(out, num_heads))  # (B, n_q, d)
