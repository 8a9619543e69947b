"""D2L 10.3 (copy-both, multi-head, self/cross, letter maps) and W9 4.1 / 5.1.

Published numbers with the tolerance their printed digits imply; MultiHeadAttention
against ``nn.MultiheadAttention`` beyond the core tests (2-D valid_lens, exercise 9); the
regime rule; each command once through the installed entry point; every bad input.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attn_cli.core.attention import MultiHeadAttention, scaled_dot_product_attention, valid_lens_mask
from attn_cli.experiments import copy_both, crossattn, heads, self_cross
from attn_cli.published import all_checks
from attn_cli.published import d2l as d2l_checks
from attn_cli.published.compare import compare_result
from attn_cli.render import crossattn as crossattn_render
from tests.conftest import assert_png, assert_user_error, run_attn, run_json

CHECKS = all_checks()


def _render(renderables, width=160) -> str:
    from attn_cli.render.table import to_text

    return to_text(renderables, width=width)


# ----------------------------------------------------------------- published numbers


@pytest.fixture(scope="module")
def copy_result():
    return copy_both.run(copy_both.Config(curve_points=5))  # grid 0, .25, .5, .75, 1


@pytest.fixture(scope="module")
def heads_result():
    return heads.run(heads.Config())


@pytest.fixture(scope="module")
def self_cross_result():
    return self_cross.run(self_cross.Config())


@pytest.fixture(scope="module")
def map_result():
    return crossattn.run(crossattn.Config())


@pytest.mark.parametrize("a,published", [(0.5, 0.706), (0.7, 0.706), (0.9, 0.706), (1.0, 0.707)])
def test_copy_both_one_head_matches_text(copy_result, a, published):
    error = next(r["error"] for r in copy_result.one_head if r["a"] == a)
    assert abs(error - published) <= 0.0005  # three printed decimals
    assert f"{error:.3f}" == f"{published:.3f}"


def test_copy_both_theory_and_two_heads(copy_result):
    assert f"{copy_result.theory:.3f}" == "0.707"
    for row in copy_result.two_heads:  # printed 1.4e-06 and 6.0e-07: float noise of the solver
        assert 0 <= row["error"] < 1e-5


def test_copy_both_curve_where_the_mixtures_coincide(copy_result):
    curve = copy_result.curve
    assert curve["a"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert all(abs(e - math.sqrt(0.5)) < 0.01 for e in curve["one_head"])
    two = dict(zip(curve["a"], curve["two_heads"]))
    assert two[0.5] == pytest.approx(curve["one_head"][2], abs=1e-6)  # rank deficient: one mixture
    assert max(two[a] for a in (0.0, 0.25, 0.75, 1.0)) < 1e-5
    assert copy_both.curve_verdict(curve)


def test_heads_numbers(heads_result):
    r = heads_result
    assert r.handwritten_matches is True and r.handwritten_max_diff < 1e-5
    assert [(p["heads"], p["params"], p["head_size"]) for p in r.w9_params] == [
        (1, 16640, 64),
        (2, 16640, 32),
        (4, 16640, 16),
        (8, 16640, 8),
    ]
    assert r.mha_shape == [2, 4, 100]
    assert r.mha_weights_shape == [2, 5, 4, 6]
    assert r.mha_masked_weight == 0.0  # keys beyond valid_lens get exactly 0
    assert [p["params"] for p in r.d2l_params] == [262144] * 4
    assert r.layout == {"d": 64, "h": 4, "p": 16, "params_drawn": 16384, "params_layer": 16384}


def test_self_cross_shapes(self_cross_result):
    r = self_cross_result
    assert (r.w9_self_output, r.w9_self_weights) == ([1, 6, 8], [1, 6, 6])
    assert (r.w9_cross_output, r.w9_cross_weights) == ([1, 4, 8], [1, 4, 6])
    assert r.d2l_self_output == r.d2l_cross_output == [2, 4, 100]
    assert r.d2l_cross_weights == [2, 5, 4, 9]


def test_every_check_of_the_family_is_measured_and_passes(copy_result, heads_result, self_cross_result, map_result):
    quick_curve = copy_both.run(copy_both.Config.quick())  # the figure's verdict on the quick grid
    measured = {
        **copy_result.measured(),
        **quick_curve.measured(),
        **heads_result.measured(),
        **self_cross_result.measured(),
        **map_result.measured(),
    }
    ids = {c.id for c in d2l_checks.CHECKS}
    assert ids <= set(measured), ids - set(measured)
    failing = {i: measured[i] for i in ids if not CHECKS[i].ok(measured[i])}
    assert not failing


def test_published_values_do_not_apply_off_the_texts_settings():
    from attn_cli.published.compare import compare_result

    small = compare_result(copy_both.run(copy_both.Config(samples=200, d_v=4, curve_points=2)), copy_both.ARTIFACTS)
    # the constant sqrt(1/2) is an identity that holds for any data; everything else does not apply
    assert {k for k, o in small.items() if o.status != "n/a"} == {"d2l-copy-both-one-head.theory"}
    words = compare_result(crossattn.run(crossattn.Config(query_word="ab", key_word="ba")), crossattn.ARTIFACTS)
    assert {o.status for o in words.values()} == {"n/a"}


# ----------------------------------------------------------------- the letter map


def _text_recipe(words, dim=32, seed=0):
    """The text's code, verbatim in spirit (D2L 10.3.3.3)."""
    letters = sorted(set("".join(words)))
    torch.manual_seed(seed)
    emb = torch.randn(len(letters), dim)
    queries, keys = (emb[[letters.index(c) for c in w]][None] for w in words)
    scores = queries @ keys.transpose(1, 2) / math.sqrt(dim)
    return torch.softmax(scores, dim=-1)[0]


@pytest.mark.parametrize("words", [("attention", "translation"), ("ünïcödé", "コード ü"), ("a", "b")])
def test_map_follows_the_texts_recipe(words):
    r = crossattn.run(crossattn.Config(query_word=words[0], key_word=words[1]))
    torch.testing.assert_close(torch.tensor(r.weights), _text_recipe(words), atol=1e-6, rtol=1e-5)
    assert r.queries == list(words[0]) and r.keys == list(words[1])


def test_map_regimes_for_attention_translation(map_result):
    r = map_result
    assert r.regime_letters() == {"sharp": ["i", "o"], "split": ["a", "n", "t"], "diffuse": ["e"]}
    assert r.regimes == ["split", "split", "split", "diffuse", "split", "split", "sharp", "sharp", "split"]
    assert r.agrees_with_letters()
    # the split rows put equal weight on the two copies
    a_row = r.weights[0]
    assert a_row[2] == a_row[6] and a_row[2] > 0.45


@pytest.mark.parametrize(
    "row,regime,peaks",
    [
        ([0.9, 0.05, 0.05], "sharp", [0]),
        ([0.45, 0.05, 0.45, 0.05], "split", [0, 2]),
        ([0.3, 0.25, 0.25, 0.2], "diffuse", [0]),
        ([0.5, 0.5], "diffuse", [0, 1]),  # uniform: the weights show no choice
        ([1.0], "sharp", [0]),
    ],
)
def test_classify_row(row, regime, peaks):
    assert crossattn.classify_row(row) == (regime, peaks)


def test_heads_panels_keep_ties_and_leave_the_plain_map_alone(map_result):
    r = crossattn.run(crossattn.Config(heads=4))
    assert r.weights == map_result.weights  # the layer is drawn after the embeddings
    assert len(r.head_weights) == 4 and len(r.head_weights[0]) == 9 and len(r.head_weights[0][0]) == 11
    for head in r.head_weights:  # exercise 11: identical keys (t at 0 and 7) tie in every head
        for row in head:
            assert row[0] == pytest.approx(row[7], rel=1e-6)
            assert sum(row) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    "word,safe", [("attention", "attention"), ("a/b", "a_b-"), ("ünï", "_n_-"), ("x" * 64, "x" * 40 + "-")]
)
def test_safe_file_names(word, safe):
    name = crossattn_render.safe_name(word)
    assert name.startswith(safe) and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    assert crossattn_render.safe_name("ab/") != crossattn_render.safe_name("ab?")


def test_map_table_names_the_regimes(map_result):
    text = _render(crossattn_render.tables(map_result, compare_result(map_result, crossattn.ARTIFACTS)))
    assert "split" in text and "sharp" in text and "diffuse" in text
    assert "i, o" in text and "a, n, t" in text
    outcomes = compare_result(map_result, crossattn.ARTIFACTS)
    narrow = _render(crossattn_render.tables(map_result, outcomes, width=40), width=200)
    assert "t@1: 0.48" in narrow  # peaks instead of the full row when the console is narrow


# ----------------------------------------------------------------- multi-head oracles


def _copy_weights(ours, theirs):
    w_q, w_k, w_v = theirs.in_proj_weight.detach().chunk(3, 0)
    with torch.no_grad():
        ours.W_q.weight.copy_(w_q)
        ours.W_k.weight.copy_(w_k)
        ours.W_v.weight.copy_(w_v)
        ours.W_o.weight.copy_(theirs.out_proj.weight)


def test_2d_valid_lens_match_nn_multiheadattention_attn_mask():
    torch.manual_seed(1)
    b, n_q, n_k, d, h = 2, 3, 5, 12, 3
    theirs = nn.MultiheadAttention(d, h, bias=False, batch_first=True)
    ours = MultiHeadAttention(d, h)
    _copy_weights(ours, theirs)
    x, y = torch.randn(b, n_q, d), torch.randn(b, n_k, d)
    valid_lens = torch.tensor([[1, 3, 5], [2, 2, 4]])  # per query
    blocked = ~valid_lens_mask(valid_lens, n_q, n_k)  # (B, n_q, n_k), torch: True = blocked
    expected, expected_w = theirs(x, y, y, attn_mask=blocked.repeat_interleave(h, 0), average_attn_weights=False)
    got, got_w = ours(x, y, y, valid_lens)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_w, expected_w, atol=1e-6, rtol=1e-5)


def _loop_over_heads(mha, queries, keys, values, valid_lens):
    """Exercise 9: head i uses output features i*p:(i+1)*p of W_q, W_k, W_v and input
    features i*p:(i+1)*p of W_o."""
    h = mha.num_heads
    p = mha.W_q.out_features // h
    outs = []
    for i in range(h):
        sl = slice(i * p, (i + 1) * p)
        q = queries @ mha.W_q.weight[sl].T
        k = keys @ mha.W_k.weight[sl].T
        v = values @ mha.W_v.weight[sl].T
        out, _ = scaled_dot_product_attention(q, k, v, valid_lens=valid_lens)
        outs.append(out @ mha.W_o.weight[:, sl].T)
    return sum(outs)


def _tiled(mha, queries, keys, values, valid_lens):
    """MultiHeadAttention with valid_lens tiled (whole vector h times) instead of repeated."""
    from attn_cli.core.attention import merge_heads, split_heads

    h = mha.num_heads
    q, k, v = (split_heads(lin(x), h) for lin, x in ((mha.W_q, queries), (mha.W_k, keys), (mha.W_v, values)))
    out, _ = scaled_dot_product_attention(q, k, v, valid_lens=valid_lens.repeat(h))
    return mha.W_o(merge_heads(out, h))


def test_exercise9_loop_over_heads_equals_folded_and_tiling_differs():
    torch.manual_seed(2)
    b, n_q, n_k, d, h = 2, 3, 6, 8, 2
    mha = MultiHeadAttention(d, h).eval()
    x, y = torch.randn(b, n_q, d), torch.randn(b, n_k, d)
    with torch.no_grad():
        for lens in ([3, 2], [6, 1]):
            valid_lens = torch.tensor(lens)
            folded, _ = mha(x, y, y, valid_lens)
            torch.testing.assert_close(_loop_over_heads(mha, x, y, y, valid_lens), folded, atol=1e-5, rtol=1e-5)
            # tiling hands sequence 0's second head the length of sequence 1: the output changes
            assert not torch.allclose(_tiled(mha, x, y, y, valid_lens), folded, atol=1e-4)
        equal = torch.tensor([4, 4])  # undetectable when every sequence has the same valid length
        torch.testing.assert_close(_tiled(mha, x, y, y, equal), mha(x, y, y, equal)[0])


# ----------------------------------------------------------------- the CLI


def test_copy_both_cli(tmp_path):
    data = run_json("copy-both", "--quick", tmp_path=tmp_path)
    assert [round(r["error"], 3) for r in data["one_head"]] == [0.706, 0.706, 0.706, 0.707]
    assert all(r["error"] < 1e-5 for r in data["two_heads"])
    assert_png(tmp_path / "copy_both.png")
    assert (tmp_path / "copy_both.csv").read_text().startswith("a,one_head_error,two_heads_error")


def test_crossattn_map_cli(tmp_path):
    data = run_json("crossattn-map", "--quick", tmp_path=tmp_path)
    assert data["queries"] == list("attention") and data["keys"] == list("translation")
    assert len(data["weights"]) == 9 and len(data["weights"][0]) == 11
    assert data["regimes"][6:8] == ["sharp", "sharp"]
    assert_png(tmp_path / "heatmap_attention_translation.png")
    assert (tmp_path / "heatmap_attention_translation.csv").exists()


def test_heatmap_cli_unicode_words_and_heads(tmp_path):
    data = run_json("heatmap", "ünï code", "cödé", "--heads", "2", "--d-model", "16", "--quick", tmp_path=tmp_path)
    assert data["queries"] == list("ünï code") and len(data["head_weights"]) == 2
    pngs = list(tmp_path.glob("heatmap_*_heads2.png"))
    assert len(pngs) == 1 and pngs[0].name.isascii()
    assert_png(pngs[0])


def test_heads_cli(tmp_path):
    data = run_json("heads", "--quick", tmp_path=tmp_path)
    assert data["handwritten_matches"] is True
    assert [p["params"] for p in data["w9_params"]] == [16640] * 4
    assert [p["params"] for p in data["d2l_params"]] == [262144] * 4
    assert data["mha_shape"] == [2, 4, 100]
    assert_png(tmp_path / "heads_layout.png")


def test_self_cross_cli(tmp_path):
    data = run_json("self-cross", "--quick", tmp_path=tmp_path)
    assert data["w9_cross_weights"] == [1, 4, 6] and data["d2l_cross_output"] == [2, 4, 100]


@pytest.mark.parametrize("command", ["copy-both", "heatmap", "crossattn-map", "heads", "self-cross"])
def test_help_has_an_example(command):
    proc = run_attn(command, "--help")
    assert proc.returncode == 0 and "Example" in proc.stdout


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("heatmap", "", "translation"), "empty"),
        (("heatmap", "attention"), "Missing argument"),
        (("heatmap", "x" * 100_000, "translation"), "100,000 characters"),
        (("heatmap", "attention", "translation", "--heads", "0"), "--heads"),
        (("heatmap", "attention", "translation", "--d-model", "0"), "--d-model"),
        (("heatmap", "attention", "translation", "--heads", "3"), "must divide --d-model 32"),
        (("crossattn-map", "--d-model", "0"), "--d-model"),
        (("copy-both", "--samples", "10", "--d-v", "16"), "fewer samples than unknowns"),
        (("copy-both", "--weights", "1.5"), "--weights"),
        (("heads", "--heads", "3"), "do not divide"),
    ],
)
def test_bad_input(args, fragment, tmp_path):
    assert_user_error(run_attn(*args, "--out", str(tmp_path)), fragment)
