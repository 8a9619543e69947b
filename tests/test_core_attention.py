"""The compute core against PyTorch's own attention as the oracle, plus invariants."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_cli.core.attention import (
    MultiHeadAttention,
    causal_mask,
    count_parameters,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
    valid_lens_mask,
)


def _rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


@pytest.mark.parametrize("b,n_q,n_k,d_k,d_v", [(1, 1, 1, 1, 1), (2, 3, 5, 4, 6), (3, 7, 2, 8, 3), (4, 16, 16, 32, 32)])
def test_matches_torch_sdpa_without_mask(b, n_q, n_k, d_k, d_v):
    q, k, v = _rand(b, n_q, d_k, seed=1), _rand(b, n_k, d_k, seed=2), _rand(b, n_k, d_v, seed=3)
    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)
    assert w.shape == (b, n_q, n_k)


@pytest.mark.parametrize("n", [1, 4, 9])
def test_causal_mask_matches_torch_is_causal(n):
    q, k, v = _rand(2, n, 8, seed=4), _rand(2, n, 8, seed=5), _rand(2, n, 8, seed=6)
    out, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(n))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-5)
    assert torch.all(w.triu(1) == 0)


def test_boolean_mask_convention_is_keep_like_torch_sdpa():
    q, k, v = _rand(2, 3, 4, seed=7), _rand(2, 5, 4, seed=8), _rand(2, 5, 6, seed=9)
    keep = _rand(2, 3, 5, seed=10) > -0.5
    keep[..., 0] = True  # at least one key per row so torch's oracle is finite
    out, w = scaled_dot_product_attention(q, k, v, mask=keep)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep), atol=1e-5, rtol=1e-5)
    assert torch.all(w[~keep] == 0)


@pytest.mark.parametrize("valid", [[3, 2], [5, 1], [1, 5]])
def test_valid_lens_matches_mha_key_padding_mask(valid):
    torch.manual_seed(0)
    b, n_q, n_k, d, h = 2, 4, 5, 8, 2
    torch_mha = nn.MultiheadAttention(d, h, bias=False, batch_first=True)
    ours = MultiHeadAttention(d, h, bias=False)
    w_q, w_k, w_v = torch_mha.in_proj_weight.detach().chunk(3, 0)
    with torch.no_grad():
        ours.W_q.weight.copy_(w_q)
        ours.W_k.weight.copy_(w_k)
        ours.W_v.weight.copy_(w_v)
        ours.W_o.weight.copy_(torch_mha.out_proj.weight)
    x, y = _rand(b, n_q, d, seed=11), _rand(b, n_k, d, seed=12)
    valid_lens = torch.tensor(valid)
    # nn.MultiheadAttention: key_padding_mask True = IGNORE (the opposite of our keep-mask)
    pad = ~valid_lens_mask(valid_lens, 1, n_k)[:, 0, :]  # (B, n_k)
    expected, expected_w = torch_mha(x, y, y, key_padding_mask=pad, average_attn_weights=False)
    got, got_w = ours(x, y, y, valid_lens)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_w, expected_w, atol=1e-6, rtol=1e-5)


def test_2d_valid_lens_is_per_query():
    q, k, v = _rand(1, 3, 4, seed=13), _rand(1, 4, 4, seed=14), _rand(1, 4, 2, seed=15)
    _, w = scaled_dot_product_attention(q, k, v, valid_lens=torch.tensor([[1, 2, 4]]))
    assert torch.all(w[0, 0, 1:] == 0) and torch.all(w[0, 1, 2:] == 0) and torch.all(w[0, 2] > 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 3))


def test_fully_masked_row_is_zero_not_nan():
    q, k, v = _rand(2, 3, 4, seed=16), _rand(2, 5, 4, seed=17), _rand(2, 5, 6, seed=18)
    out, w = scaled_dot_product_attention(q, k, v, valid_lens=torch.tensor([0, 2]))
    assert torch.all(w[0] == 0) and torch.all(out[0] == 0)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(w[1].sum(-1), torch.ones(3))


def test_multihead_matches_nn_multiheadattention_with_bias_and_causal_mask():
    torch.manual_seed(0)
    d, h, n = 16, 4, 6
    torch_mha = nn.MultiheadAttention(d, h, bias=True, batch_first=True)
    ours = MultiHeadAttention(d, h, bias=True)
    w_q, w_k, w_v = torch_mha.in_proj_weight.detach().chunk(3, 0)
    b_q, b_k, b_v = torch_mha.in_proj_bias.detach().chunk(3, 0)
    with torch.no_grad():
        for lin, w, bb in (
            (ours.W_q, w_q, b_q),
            (ours.W_k, w_k, b_k),
            (ours.W_v, w_v, b_v),
            (ours.W_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias),
        ):
            lin.weight.copy_(w)
            lin.bias.copy_(bb)
    x = _rand(3, n, d, seed=19)
    keep = causal_mask(n)
    expected, _ = torch_mha(x, x, x, attn_mask=~keep)  # torch: True = blocked
    got, _ = ours(x, x, x, mask=keep)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_split_merge_heads_roundtrip():
    x = _rand(2, 5, 12, seed=20)
    assert split_heads(x, 3).shape == (6, 5, 4)
    torch.testing.assert_close(merge_heads(split_heads(x, 3), 3), x)


@pytest.mark.parametrize("h", [1, 2, 4, 8])
def test_parameter_count_independent_of_heads(h):
    assert count_parameters(MultiHeadAttention(256, h)) == 262144
    assert count_parameters(nn.MultiheadAttention(64, h)) == 16640


def test_heads_must_divide_width():
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 3)


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 3),
    n_q=st.integers(1, 6),
    n_k=st.integers(1, 6),
    d=st.integers(1, 8),
    seed=st.integers(0, 10_000),
    data=st.data(),
)
def test_invariants(b, n_q, n_k, d, seed, data):
    q, k, v = _rand(b, n_q, d, seed=seed), _rand(b, n_k, d, seed=seed + 1), _rand(b, n_k, d, seed=seed + 2)
    lens = torch.tensor(data.draw(st.lists(st.integers(1, n_k), min_size=b, max_size=b)))
    out, w = scaled_dot_product_attention(q, k, v, valid_lens=lens)
    # rows sum to 1, weights non-negative, masked weights exactly 0
    torch.testing.assert_close(w.sum(-1), torch.ones(b, n_q), atol=1e-5, rtol=0)
    assert torch.all(w >= 0)
    masked = ~valid_lens_mask(lens, n_q, n_k)
    assert torch.all(w[masked] == 0)
    # output is a convex combination of the valid value rows
    assert torch.all(out <= v.max(1, keepdim=True).values + 1e-5)
    assert torch.all(out >= v.min(1, keepdim=True).values - 1e-5)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 7), d=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_self_attention_is_permutation_equivariant_without_mask(n, d, seed):
    x = _rand(1, n, d, seed=seed)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    out, _ = scaled_dot_product_attention(x, x, x)
    out_p, _ = scaled_dot_product_attention(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm], atol=1e-5, rtol=1e-5)


def test_default_scale_is_inverse_sqrt_dk():
    q = torch.tensor([[[1.0, 0.0]]])
    k = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    v = torch.tensor([[[10.0], [20.0], [30.0]]])
    out, w = scaled_dot_product_attention(q, k, v)
    e = math.exp(1 / math.sqrt(2))
    torch.testing.assert_close(w[0, 0], torch.tensor([e, 1.0, e]) / (2 * e + 1))
    torch.testing.assert_close(out[0, 0, 0], torch.tensor(20.0))
