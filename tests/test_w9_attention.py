"""W9 3.3 (sqrt-dk), 4.2 (masks), 5.2 (scaling): published numbers, CLI, figures, errors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_cli.errors import MemoryRefused
from attn_cli.experiments import masks as masks_exp
from attn_cli.experiments import scaling as scaling_exp
from attn_cli.experiments import sqrt_dk as sqrt_dk_exp
from attn_cli.published import all_checks
from attn_cli.published.compare import compare_result
from attn_cli.published.settings import sqrt_dk_text_draws
from attn_cli.published.w9_attention import CHECKS, MASKS_CAUSAL, SCALING
from tests.conftest import assert_png, assert_user_error, run_attn, run_json


def _check_ids(prefix: str) -> list[str]:
    return [c.id for c in CHECKS if c.id.startswith(prefix)]


# ---------------------------------------------------------------------------------------
# published numbers, regenerated in-process at the text's settings
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqrt_dk_result():
    """The full text run (20000 trials, d_k up to 1024: ~0.9 GB peak, a few seconds), once."""
    return sqrt_dk_exp.run(sqrt_dk_exp.Config())


@pytest.fixture(scope="module")
def masks_result():
    return masks_exp.run(masks_exp.Config())


@pytest.fixture(scope="module")
def scaling_result():
    return scaling_exp.run(scaling_exp.Config())


def test_checks_are_registered():
    registered = all_checks()
    for check in CHECKS:
        assert registered[check.id] is check
        assert check.reason
    assert len(_check_ids("w9-sqrt-dk.")) == 30 and len(_check_ids("w9-sqrt-dk-plot.")) == 1
    assert len(_check_ids("w9-scaling.")) == 15
    assert "w9-sqrt-dk.1024.grad_scaled" in registered and "w9-scaling.32768.memory" in registered


@pytest.mark.parametrize("check_id", _check_ids("w9-sqrt-dk.") + _check_ids("w9-sqrt-dk-plot."))
def test_sqrt_dk_published(sqrt_dk_result, check_id):
    check = all_checks()[check_id]
    measured = sqrt_dk_result.measured()
    assert check.ok(measured[check_id]), (check_id, measured[check_id], check.published, check.tolerance)


def test_sqrt_dk_curve_rule_can_fail(sqrt_dk_result):
    import dataclasses

    rows = [dataclasses.replace(r) for r in sqrt_dk_result.rows]
    rows[2].max_weight_unscaled = 0.5  # no longer climbing
    assert not sqrt_dk_exp.curves_as_described(rows)


def test_sqrt_dk_theory(sqrt_dk_result):
    for r in sqrt_dk_result.rows:
        assert r.std == pytest.approx(r.d_k**0.5, rel=0.01)  # var(q.k) = d_k
        assert r.std_scaled == pytest.approx(1.0, abs=0.01)
        assert r.text_draws


def test_sqrt_dk_table_shows_published_beside(sqrt_dk_result):
    from rich.console import Console

    from attn_cli.render import sqrt_dk as render
    from attn_cli.render.table import to_rich

    console = Console(record=True, width=160, color_system=None)
    for r in render.tables(sqrt_dk_result, compare_result(sqrt_dk_result, sqrt_dk_exp.ARTIFACTS)):
        console.print(to_rich(r))
    text = console.export_text()
    assert "0.0067 = 0.0067" in text and "31.97 = 31.97" in text
    assert "≠" not in text and "~" not in text


@pytest.mark.parametrize(
    "dims,trials,expected",
    [
        ((4, 16, 64, 256, 1024), 20000, [True] * 5),
        ((4, 16), 20000, [True, True]),
        ((16, 64), 20000, [False, False]),  # d=16 no longer follows the d=4 draws
        ((4, 16, 7), 20000, [True, True, False]),
        ((4, 16), 2000, [False, False]),  # --quick
    ],
)
def test_sqrt_dk_text_draws(dims, trials, expected):
    assert sqrt_dk_text_draws(dataclasses.asdict(sqrt_dk_exp.Config(d_k=dims, trials=trials))) == expected


def test_sqrt_dk_quick_is_not_compared():
    from attn_cli.published.compare import compare_result

    result = sqrt_dk_exp.run(sqrt_dk_exp.Config.quick(d_k=(4, 16)))
    assert result.measured()  # every value is reported; published/ decides that none applies
    assert {o.status for o in compare_result(result, sqrt_dk_exp.ARTIFACTS).values()} == {"n/a"}
    assert result.config["trials"] == sqrt_dk_exp.QUICK_TRIALS


def test_sqrt_dk_refuses_before_allocating():
    with pytest.raises(MemoryRefused, match="needs about"):
        sqrt_dk_exp.run(sqrt_dk_exp.Config(trials=10**9, d_k=(1024,)))


@pytest.mark.parametrize("check_id", _check_ids("w9-masks."))
def test_masks_published(masks_result, check_id):
    check = all_checks()[check_id]
    assert check.ok(masks_result.measured()[check_id]), (check_id, masks_result.measured()[check_id])


def test_masks_exact_rounding_and_core_equals_text(masks_result):
    assert masks_result.causal_weights_rounded == MASKS_CAUSAL  # exactly as numpy .round(2) printed
    assert masks_result.core_equals_text and masks_result.core_max_abs_diff == 0.0
    assert masks_result.past_max_abs_change_with_mask == 0.0


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 9))
def test_masks_invariants_any_seed(seed, n):
    r = masks_exp.run(masks_exp.Config(seed=seed, n=n, changed_from=n // 2, padding_from=n // 2))
    for i, row in enumerate(r.causal_weights):
        assert sum(row) == pytest.approx(1.0, abs=1e-6)
        assert all(w == 0.0 for w in row[i + 1 :])  # masked weights exactly 0
    assert r.past_unchanged_with_mask and r.past_max_abs_change_with_mask == 0.0
    assert r.padding_weight == 0.0
    assert r.core_equals_text


@pytest.mark.parametrize("check_id", _check_ids("w9-scaling."))
def test_scaling_published(scaling_result, check_id):
    check = all_checks()[check_id]
    assert check.ok(scaling_result.measured()[check_id]), (check_id, scaling_result.measured()[check_id])


def test_scaling_prints_as_the_text(scaling_result):
    for row in scaling_result.formula:
        entries, memory, ops = SCALING[row.n]
        assert (f"{row.entries:.2e}", row.memory, f"{row.operations:.2e}") == (f"{entries:.2e}", memory, f"{ops:.2e}")


def test_fit_exponent():  # the fit scaling.run makes of time against n
    from attn_cli.core.measure import loglog_slope

    ns = [256, 512, 1024, 2048]
    assert loglog_slope(ns, [3e-9 * n**2 for n in ns]) == pytest.approx(2.0)
    assert loglog_slope([256], [1.0]) is None


def test_scaling_refuses_before_allocating():
    config = scaling_exp.Config(measure=True, measure_lengths=(10_000_000,))
    with pytest.raises(MemoryRefused, match="needs about 800.1 TB"):
        scaling_exp.run(config)


# ---------------------------------------------------------------------------------------
# the real entry point
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["sqrt-dk", "masks", "scaling"])
def test_help_has_example(command):
    proc = run_attn(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Example" in proc.stdout


def test_command_module_does_not_import_torch():
    code = "import sys, attn_cli.cli; assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sqrt_dk_cli_quick(tmp_path):
    data = run_json("sqrt-dk", "--quick", tmp_path=tmp_path)
    assert [r["d_k"] for r in data["rows"]] == [4, 16, 64, 256, 1024]
    assert data["config"]["trials"] == sqrt_dk_exp.QUICK_TRIALS
    assert not any(r["text_draws"] for r in data["rows"])
    assert data["rows"][-1]["max_weight_unscaled"] > 0.9 > 0.4 > data["rows"][-1]["max_weight_scaled"]
    assert_png(tmp_path / "sqrt_dk.png")
    assert (tmp_path / "sqrt_dk.csv").read_text().startswith("d_k,std,")


def test_masks_cli_quick(tmp_path):
    data = run_json("masks", "--quick", tmp_path=tmp_path)
    assert data["causal_weights_rounded"] == MASKS_CAUSAL
    assert data["padding_weight"] == 0.0 and data["past_unchanged_with_mask"] and data["past_changes_without_mask"]
    assert_png(tmp_path / "masks.png")
    assert len((tmp_path / "masks.csv").read_text().splitlines()) == 1 + 2 * 25


def test_scaling_measure_cli_quick(tmp_path):
    data = run_json("scaling", "--measure", "--quick", tmp_path=tmp_path)
    assert [r["n"] for r in data["formula"]] == list(scaling_exp.TEXT_LENGTHS)
    ns = [r["n"] for r in data["measured_rows"]]
    assert ns == list(scaling_exp.QUICK_MEASURE_LENGTHS["cpu"])
    measured = data["timing"]["measured_rows"]  # times and peaks live under "timing"
    assert all(r["time_s"] > 0 and r["peak_bytes"] >= 8 * n**2 for r, n in zip(measured, ns))
    assert isinstance(data["timing"]["exponent"], float)  # on a quiet machine about 2; noisy when shared
    assert "estimate" in data["peak_method"]
    assert_png(tmp_path / "scaling_measured.png")
    assert (tmp_path / "scaling_measured.csv").exists()


@pytest.mark.parametrize(
    "args,code,fragments",
    [
        (("sqrt-dk", "--d-k", "0"), 2, ("--d-k", "0 is not in the range")),
        (("sqrt-dk", "--d-k", "4", "0"), 2, ("--d-k",)),
        (("scaling", "--lengths", "-5"), 2, ("--lengths", "-5 is not in the range")),
        (("scaling", "--measure", "--lengths", "10000000"), 1, ("needs about 800.1 TB", "refused before starting")),
    ],
)
def test_bad_input(tmp_path, args, code, fragments):
    proc = run_attn(*args, "--out", str(tmp_path))
    assert_user_error(proc, *fragments)
    assert proc.returncode == code
    assert not list(tmp_path.iterdir())  # nothing written, nothing allocated
