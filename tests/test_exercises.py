"""D2L 10.3.5 exercises: properties of each computation, and ``attn exercise`` end to end.

No published numbers exist for the exercises; the tests assert what each exercise's
analysis predicts (exact formulas, equalities, invariances, which heads are kept).
"""

from __future__ import annotations

import math

import pytest
from conftest import assert_png, assert_user_error, run_attn, run_json

torch = pytest.importorskip("torch")

from attn_cli.experiments import exercises as ex  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Light on shared CPUs: one thread here and in the `attn` subprocesses."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def quick(*numbers, **overrides):
    return ex.run(ex.Config.quick(exercises=numbers, **overrides))


# --------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    "tokens, expected",
    [(("3",), (3,)), (("all",), tuple(range(1, 13))), (("5", "2", "5"), (5, 2)), (("12", "all"), (12, *range(1, 12)))],
)
def test_parse_selection(tokens, expected):
    assert ex.parse_selection(tokens) == expected


# --------------------------------------------------------------------------- contract


@pytest.mark.parametrize("number", ex.NUMBERS)
def test_each_exercise_is_an_experiment(number):
    """TITLE, a frozen Config with quick(), a typed Result, run(config, progress=None)."""
    import dataclasses
    import inspect

    module = ex.MODULES[number]
    assert isinstance(module.TITLE, str) and module.TITLE == ex.TITLES[number]
    config = module.Config.quick(seed=3)
    assert config.seed == 3 and dataclasses.is_dataclass(config)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 4
    assert dataclasses.is_dataclass(module.Result)
    params = inspect.signature(module.run).parameters
    assert list(params) == ["config", "progress"] and params["progress"].default is None
    assert inspect.signature(module.run).return_annotation in ("Result", module.Result)
    assert module.Config is ex.Config  # one Config: each exercise reads the fields it names


# --------------------------------------------------------------------------- shared helpers


def test_fit_line_and_loglog_slope():
    from attn_cli.core.measure import fit_line, loglog_slope

    assert fit_line([1, 2, 3, 4], [5, 7, 9, 11]) == pytest.approx((3.0, 2.0, 1.0))
    assert loglog_slope([1e-3, 1e-2, 1e-1], [3e3, 3e2, 3e1]) == pytest.approx(-1.0)
    assert loglog_slope([0.5], [1.0]) is None and loglog_slope([2, 2], [1, 3]) is None
    _, _, r2 = fit_line([0, 1, 2, 3], [0, 1, 0, 1])
    assert 0 < r2 < 1


def test_readout_error_against_the_pseudo_inverse():
    from attn_cli.core.measure import readout_error, relative_error

    gen = torch.Generator().manual_seed(0)
    M, noise = (
        torch.randn(200, 3, generator=gen, dtype=torch.float64),
        torch.randn(200, 2, generator=gen, dtype=torch.float64),
    )
    target = M @ torch.randn(3, 2, generator=gen, dtype=torch.float64) + noise
    expected = relative_error(M @ (torch.linalg.pinv(M) @ target), target)
    assert readout_error(M, target, driver="gelsd") == pytest.approx(expected, rel=1e-10)
    assert readout_error(M, target, driver="gelsd", squared=True) == pytest.approx(expected**2, rel=1e-10)
    assert readout_error(M, M @ torch.ones(3, 2, dtype=torch.float64)) < 1e-12  # linear in M: exact
    held = readout_error(M[:100], target[:100], driver="gelsd", held_out=(M[100:], target[100:]))
    assert held > readout_error(M[:100], target[:100], driver="gelsd") * 0.5


@pytest.mark.parametrize("kv_heads", [None, 4, 2, 1])
def test_attend_heads_is_multi_head_attention(kv_heads):
    from attn_cli.core.attention import MultiHeadAttention
    from attn_cli.core.measure import attend_heads

    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    Q, K = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    lens = torch.tensor([2, 5])
    ref, _ = mha(Q, K, K, lens)
    if kv_heads in (None, 4):
        out = attend_heads(
            mha.W_q(Q), mha.W_k(K), mha.W_v(K), 4, mha.W_o, torch.repeat_interleave(lens, 4), kv_heads=kv_heads
        )
        assert torch.allclose(out, ref, atol=1e-6)
    else:  # g groups: the same as MHA whose K/V heads repeat each group's slice
        p, rep = 4, 4 // kv_heads
        k, v = mha.W_k(K)[..., : kv_heads * p], mha.W_v(K)[..., : kv_heads * p]
        full = lambda x: x.reshape(2, 5, kv_heads, 1, p).expand(2, 5, kv_heads, rep, p).reshape(2, 5, 16)  # noqa: E731
        out = attend_heads(mha.W_q(Q), k, v, 4, mha.W_o, kv_heads=kv_heads)
        assert torch.allclose(out, attend_heads(mha.W_q(Q), full(k), full(v), 4, mha.W_o), atol=1e-6)


# --------------------------------------------------------------------------- readings


def _text(renderables) -> str:
    from attn_cli.render.table import to_text

    return to_text(renderables, width=1000)


def test_readings_quote_computed_numbers():
    from attn_cli.experiments.exercises import ex04_key_noise, ex05_pruning
    from attn_cli.render.exercises import tables

    text = _text(tables(quick(4, 5), {}))  # the exercises have no published value
    wide = ex05_pruning.WIDE_LAYER_HEADS
    assert f"At h = {wide}: one-shot {wide + 1}, greedy {wide * (wide + 1) // 2} evaluations" in text
    for c in ex04_key_noise.SCALES:
        assert f"{c * math.sqrt(2 * ex04_key_noise.BETA):.2f} at c = {c:g}" in text
    assert "Heads 2 and 3 cover for each other" in text


def test_every_exercise_renders_its_tables_and_figures_in_process(tmp_path):
    """The renderer itself (the CLI runs exercise all in a child): a heading per exercise, each
    figure a real PNG with its CSV, nothing else written."""
    from attn_cli.render.exercises import FILES, figures, tables

    result = quick(*range(1, 13))
    text = _text(tables(result, {}))
    for n in range(1, 13):
        assert f"D2L 10.3.5 exercise {n}: {ex.TITLES[n]}" in text
    written = figures(result, tmp_path, ("png",), {}, None)
    assert sorted(p.name for p in written) == sorted(name for pair in FILES.values() for name in pair)
    for png, csv in FILES.values():
        assert_png(tmp_path / png)
        assert (tmp_path / csv).read_text().count("\n") > 3


# --------------------------------------------------------------------------- properties


def test_ex2_slope_minus_one_and_knee_moves_with_sigma():
    e = quick(2).ex2
    for sweep in e.sweeps:
        assert sweep.knee == pytest.approx(sweep.sigma / 2)
        assert sweep.slope == pytest.approx(-1.0, abs=0.1)
        for p in sweep.points:
            assert p.condition == pytest.approx(1 / (2 * p.eps), rel=1e-6)  # kappa(A) = 1 / (2 eps)
            assert p.error == pytest.approx(p.theory, rel=0.05)
    low = e.sweeps[1]  # sigma = 0.001: at eps = 1e-5 the second head no longer helps
    assert low.points[-1].error == pytest.approx(math.sqrt(0.5), abs=0.02)


def test_ex3_error_equals_one_minus_rank_over_k():
    e = quick(3).ex3
    for r in e.rows:
        assert abs(r.population - (1 - r.rank / r.k)) < 1e-6
        assert r.sampled == pytest.approx(r.bound, abs=0.05)
        if r.kind == "softmax":
            assert r.rank == min(r.h, r.k) and r.min_entry > 0
    assert {r.kind for r in e.rows if r.rank < min(r.h, r.k)} == {"duplicated heads", "uniform heads"}


def test_ex4_settings():
    rows = {(r.query, r.anisotropic, r.c): r for r in quick(4).ex4.rows}
    assert rows[("two", True, 100.0)].median < 1e-6  # two queries: most resamples exact
    assert rows[("two", True, 100.0)].failure == pytest.approx(0.079, abs=0.03)  # gamma < -1
    assert rows[("sum", True, 100.0)].failure > 0.9  # one query swings with gamma
    assert rows[("sum", False, 100.0)].failure > rows[("sum", False, 10.0)].failure  # larger c hurts
    for c in (10.0, 100.0):  # part 4's query does not depend on gamma
        assert rows[("neg", True, c)].median == rows[("neg", False, c)].median


def test_ex5_one_shot_drops_both_duplicates_greedy_keeps_one():
    e = quick(5).ex5
    assert e.one_shot_removed == [2, 3] and e.one_shot_kept == [1]
    assert e.one_shot_error == pytest.approx(math.sqrt(0.5), abs=0.01)
    assert e.greedy_removed == [2] and e.greedy_kept == [1, 3]
    assert e.greedy_error < 1e-4
    assert e.one_shot_evaluations == 3 + 1 and e.greedy_to_one == 3 * 4 // 2


def test_ex7_ratio_and_counts():
    e = quick(7).ex7
    d, m = 512, 1000
    assert e.ratio == pytest.approx((d + m * d + m) / (d + m))
    assert round(e.ratio, 1) == 339.6
    assert e.recompute_counted == e.recompute_formula and e.cached_counted == e.cached_formula
    assert all(r.counted == r.formula for r in e.rows)


def test_ex8_bytes_parameters_flops():
    e = quick(8).ex8
    by = {s.name: s for s in e.schemes}
    assert [by[n].kv_bytes_per_token for n in ("MHA", "GQA", "MQA")] == [16384, 4096, 512]
    assert by["MHA"].parameters == 4 * 4096**2
    for s in e.schemes:
        assert s.parameters == s.parameters_formula and s.flops == s.flops_formula
    assert e.shared[0].error < 1e-6  # p >= c: two query heads on one value head recover both
    for r in e.shared:
        assert r.error == pytest.approx(r.theory, abs=0.03)


def test_ex9_loop_equals_folded_and_tiling_rule():
    e = quick(9).ex9
    assert e.rule_agrees and e.rule_checked > 1000
    for c in e.cases:
        assert c.loop_vs_folded < 1e-5
        clipped = {min(v, e.n_k) if isinstance(v, int) else tuple(v) for v in c.valid_lens}
        assert (c.tiled_vs_folded > 1e-4) == (len(clipped) > 1)


def test_ex9_loop_forward_matches_module_with_bias_and_2d_lens():
    from attn_cli.core.attention import MultiHeadAttention
    from attn_cli.experiments.exercises.ex09_slices import folded_forward, loop_forward

    torch.manual_seed(1)
    mha = MultiHeadAttention(12, 3, bias=True).eval()
    Q, K = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    lens = torch.tensor([[1, 2, 3, 6], [6, 5, 0, 2]])
    ref, _ = mha(Q, K, K, lens)
    assert torch.allclose(loop_forward(mha, Q, K, K, lens), ref, atol=1e-6)
    assert torch.allclose(folded_forward(mha, Q, K, K, lens), ref, atol=1e-6)
    assert torch.equal(
        folded_forward(mha, Q, K, K, torch.tensor([6, 6]), tile=True), mha(Q, K, K, torch.tensor([6, 6]))[0]
    )


def test_ex10_invariances():
    e = quick(10).ex10
    assert e.all_as_expected
    assert [c.unchanged for c in e.checks] == [True, False, True, False, True, False]


def test_ex11_properties_in_every_head():
    e = quick(11).ex11
    assert set(e.hold_in_every_head) >= {
        "identical query letters give identical rows",
        "identical key letters give identical columns",
        "rows sum to 1",
    }
    assert "the matching letter gets the largest weight" in e.lost
    assert e.props[0].match_wins == 1.0  # the plain map: every matching letter wins
    assert len(e.head_weights) == 4


# --------------------------------------------------------------------------- command


@pytest.fixture(scope="module")
def all_quick(tmp_path_factory):
    """One `attn exercise all --quick --json` run through the real entry point (shared)."""
    out = tmp_path_factory.mktemp("exercises")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        return out, run_json("exercise", "all", "--quick", tmp_path=out, timeout=120)


def test_exercise_all_quick_json(all_quick):
    tmp_path, data = all_quick
    assert all(data[f"ex{n}"] is not None for n in range(1, 13))
    assert data["config"]["exercises"] == list(range(1, 13))
    assert data["ex6"]["n"] == 128 and len(data["ex6"]["rows"]) == 7 and data["timing"]["ex6"]["ratio"] >= 1
    assert len(data["timing"]["ex6"]["rows"]) == 7 and "seconds" not in data["ex6"]["rows"][0]
    for n in (2, 6, 11, 12):
        assert_png(tmp_path / f"exercise_{n}.png")
        assert (tmp_path / f"exercise_{n}.csv").read_text().count("\n") > 3


def test_ex1_readouts(all_quick):
    rows = {(row["values"], row["a"]): row for row in all_quick[1]["ex1"]["rows"]}
    for key, row in rows.items():
        assert row["linear"] == pytest.approx(math.sqrt(0.5), abs=0.02)
        if key != ("sign", 0.7):
            assert row["mlp"] > 0.68  # no readout beats sqrt(1/2) here
    assert rows[("sign", 0.7)]["mlp"] < 0.05 and rows[("sign", 0.7)]["distinct_levels"] == 4


def test_ex12_learned_heads(all_quick):
    runs = {run["h"]: run for run in all_quick[1]["ex12"]["runs"]}
    assert runs[1]["error"] > 0.69  # one head: the proposition's bound
    assert all(runs[h]["error"] < 0.05 for h in (2, 4, 8))
    assert all(len(run["weights"]) == run["h"] == len(run["kinds"]) for run in runs.values())


def test_exercise_table_output(tmp_path):
    proc = run_attn("exercise", "10", "3", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "exercise 10: permuting the source" in proc.stdout
    assert "every check as expected: yes" in proc.stdout and "1 - rank/k" in proc.stdout
    assert proc.stdout.index("exercise 10") < proc.stdout.index("exercise 3")  # the order given
    assert not list(tmp_path.glob("*.png"))  # neither writes a figure


def test_exercise_list():
    proc = run_attn("exercise", "--list")
    assert proc.returncode == 0, proc.stderr
    for title in ("nonlinear readouts", "learned copy-both heads", "exercise_2.png"):
        assert title in proc.stdout


def test_exercise_help_has_example():
    proc = run_attn("exercise", "--help")
    assert proc.returncode == 0
    assert "Example:" in proc.stdout and "attn exercise 3" in proc.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("13",), "no exercise 13"),
        (("0",), "no exercise 0"),
        (("two",), "'two' is not an exercise"),
        ((), "give exercise numbers"),
    ],
)
def test_exercise_bad_input(args, fragment):
    proc = run_attn("exercise", *args)
    assert proc.returncode == 2
    assert_user_error(proc, fragment)


def test_catalogue_lists_exercises():
    from attn_cli.published.catalogue import BY_ID
    from attn_cli.render.exercises import FILES

    for n in range(1, 13):
        art = BY_ID[f"d2l-ex{n}"]
        assert art.command == "exercise"
        assert art.files == FILES.get(n, ())
    assert ex.ARTIFACTS == tuple(f"d2l-ex{n}" for n in range(1, 13))
