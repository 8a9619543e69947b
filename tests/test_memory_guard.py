"""One memory guard for every experiment: refused up front with the estimate in the message."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attn_cli import experiment_registry
from attn_cli.cli import cli
from attn_cli.core import memory
from attn_cli.errors import MemoryRefused

EXPERIMENTS = experiment_registry.discover()


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_every_experiment_estimates_and_asks_the_guard_first(exp, monkeypatch, tmp_path):
    """With almost no free memory every experiment refuses at its quick config, before allocating."""
    assert callable(getattr(exp.module, "estimate_bytes", None)), f"{exp.name} has no estimate_bytes"
    config = exp.config(quick=True)
    if exp.name == "scaling":  # only the measurement allocates; the table is arithmetic
        config = type(config).quick(measure=True, measure_lengths=(64,))
    assert exp.module.estimate_bytes(config) > 0
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 1)
    with pytest.raises(MemoryRefused, match="needs about .* refused before starting"):
        exp.run(config)


# the three failures of the issue, and one per size option of every command
HUGE = "100000000000"
REFUSED = [
    ["formula", "--n-q", "1000000", "--n-k", "1000000"],
    ["embeddings", "--d-model", HUGE],
    ["order", "--d-model", HUGE],
    ["formula", "--d-k", HUGE],
    ["formula", "--d-v", HUGE],
    ["sqrt-dk", "--trials", HUGE],
    ["sqrt-dk", "--d-k", HUGE],
    ["scaling", "--measure", "--lengths", HUGE],
    ["scaling", "--measure", "--lengths", "64", "--d-model", HUGE],
    ["copy-both", "--samples", HUGE],
    ["copy-both", "--d-v", "1000000", "--samples", "3000000"],
    ["copy-task", "--lengths", HUGE],
    ["copy-task", "--hidden-size", HUGE],
    ["copy-task", "--batch-size", HUGE],
    ["copy-task", "--eval-size", HUGE],
    ["heatmap", "a" * 64, "b" * 64, "--d-model", str(1 << 20), "--heads", "1"],
]


@pytest.mark.parametrize("args", REFUSED, ids=lambda a: " ".join(x[:12] for x in a))
def test_sizes_past_memory_are_refused_with_the_estimate(args, tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 4 * 10**9)  # the same on every machine
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert re.search(
        r"^Error: .* needs about [\d.]+(e\+\d+)? [KMGTP]?B, more than 50% of the 4\.0 GB free on cpu; "
        r"refused before starting$",
        result.output,
        re.M,
    ), result.output
    assert list(tmp_path.iterdir()) == []


def test_the_estimate_grows_with_every_formula_size():
    from attn_cli.experiments import formula

    base = formula.estimate_bytes(formula.Config())
    for field in ("n_q", "n_k", "d_k", "d_v"):
        bigger = formula.Config(**{field: getattr(formula.Config(), field) * 10})
        assert formula.estimate_bytes(bigger) > base, field


SIZE = st.integers(min_value=1, max_value=2**80)
SMALL_MACHINE = 64 * 2**20  # free bytes the guard is told of: what passes runs in an instant


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_q=SIZE, n_k=SIZE, d_k=SIZE, d_v=SIZE)
def test_formula_sizes_across_the_integer_range_never_crash(n_q, n_k, d_k, d_v, monkeypatch):
    """Any sizes: refused up front (MemoryRefused) or run to the end; never an allocator error."""
    from attn_cli.experiments import formula

    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": SMALL_MACHINE)
    config = formula.Config(n_q=n_q, n_k=n_k, d_k=d_k, d_v=d_v)
    assert formula.estimate_bytes(config) >= 4 * (n_q * d_k + n_k * (d_k + d_v) + n_q * n_k)
    try:
        result = formula.run(config)
    except MemoryRefused:
        assert formula.estimate_bytes(config) > SMALL_MACHINE / 2
    else:
        assert result.shapes["output"] == [n_q, d_v]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.integers(min_value=-(2**70), max_value=2**70),
    option=st.sampled_from(
        [
            ("embeddings", "--d-model"),
            ("order", "--d-model"),
            ("formula", "--n-k"),
            ("formula", "--d-v"),
            ("copy-both", "--samples"),
            ("heatmap", "--d-model"),
            ("sqrt-dk", "--trials"),
        ]
    ),
)
def test_cli_sizes_across_the_integer_range(value, option, monkeypatch, tmp_path_factory):
    """Whatever integer is typed: exit 0, or one ``Error`` line with exit 1 or 2; never a traceback."""
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": SMALL_MACHINE)
    command, flag = option
    words = ["ab", "cd"] if command == "heatmap" else []
    out = tmp_path_factory.mktemp("out")
    result = CliRunner().invoke(cli, [command, *words, flag, str(value), "--quick", "--out", str(out)])
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if result.exit_code:
        assert sum(line.startswith("Error") for line in result.output.splitlines()) == 1, result.output
        assert list(out.iterdir()) == []
