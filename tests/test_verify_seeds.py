"""`attn verify --seeds N` and `attn all --seeds N`: trained cells judged by N seeds (issue 16).

--seed with the exact engine, the next N-1 with the fast one; default 5 (unchanged without
the option).  The seed rule's interval (mean ± half-width, n) is carried in every record
(verify --json), in the manifest (``intervals``) and in the report's check rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

import pytest
from click.testing import CliRunner

from attn_cli import experiment_registry, records
from attn_cli.cli import cli
from attn_cli.errors import AttnError
from attn_cli.experiments import copy_task as exp
from attn_cli.published import all_checks, settings
from attn_cli.published.compare import Outcome
from attn_cli.published.seed_rule import MAX_SEEDS, MIN_SEEDS, SeedSample, interval
from attn_cli.render import report
from tests.conftest import assert_user_error, run_attn

TINY = {"lengths": (4,), "model": "attention", "steps": 5, "eval_size": 20, "jobs": 1}
IDS = ("w9-copy-task", "w9-copy-task-map")


def invoke(*args):
    return CliRunner().invoke(cli, list(map(str, args)), catch_exceptions=False, env={"COLUMNS": "200"})


@pytest.fixture
def copy_task():
    return experiment_registry.Registry.load().by_artifact["w9-copy-task"]


# --------------------------------------------------------------------------- the plan


def test_the_plan_trains_n_seeds_the_first_exact_the_rest_fast(copy_task):
    args = dict(seed=3, device="cpu")
    ((_, config, unjudged),) = experiment_registry.plan([copy_task], **args, seeds=8)
    assert unjudged is None and config.seed_list == tuple(range(3, 11))
    assert [config.engine_of(s) for s in config.plan() if s.model == "attention" and s.length == 32] == ["exact"] + [
        "fast"
    ] * 7
    assert experiment_registry.plan([copy_task], **args, seeds=1)[0][1].seed_list == (3,)


def test_without_the_option_nothing_changes(copy_task):
    args = dict(seed=0, device="cpu")
    default = experiment_registry.plan([copy_task], **args)[0][1]
    assert default.seed_list == tuple(range(MIN_SEEDS)) == (0, 1, 2, 3, 4)
    assert (
        experiment_registry.plan([copy_task], **args, seeds=None)[0][1]
        == default
        == experiment_registry.plan([copy_task], **args, seeds=MIN_SEEDS)[0][1]
    )


@pytest.mark.parametrize("n", [0, -1, MAX_SEEDS + 1])
def test_the_plan_refuses_a_seed_count_out_of_range(copy_task, n):
    with pytest.raises(ValueError, match="seed rule takes 1 to"):
        experiment_registry.plan([copy_task], seed=0, device="cpu", seeds=n)
    with pytest.raises(AttnError) if n < 1 else contextlib.nullcontext():
        exp.verify_config(exp.Config(), seeds=n)


# --------------------------------------------------------------------------- the option


@pytest.mark.parametrize("command", ["verify", "all"])
@pytest.mark.parametrize(
    "value, fragment",
    [
        ("0", "0 is not in the range 1<=x<=1024"),
        (str(MAX_SEEDS + 1), "is not in the range"),
        ("five", "is not an integer"),
    ],
)
def test_a_bad_seed_count_is_a_usage_error(tmp_path, command, value, fragment):
    proc = run_attn(command, "--seeds", value, "--out", tmp_path)
    assert proc.returncode == 2
    assert_user_error(proc, "--seeds", fragment)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["verify", "all"])
def test_seeds_with_quick_is_a_usage_error(tmp_path, command):
    proc = run_attn(command, "--quick", "--seeds", "3", "--out", tmp_path)
    assert proc.returncode == 2
    assert_user_error(proc, "--seeds with --quick")


def test_help_names_the_option():
    for command in ("verify", "all"):
        text = " ".join(run_attn(command, "--help").stdout.split())
        assert "--seeds N" in text and "Judge each trained cell by N seeds" in text


# --------------------------------------------------------------------------- a judged run with 3 seeds


@pytest.fixture
def tiny_verify(monkeypatch):
    """verify's copy-task configuration at tiny sizes taken as the text's (its cells are judged)."""
    real = exp.verify_config
    monkeypatch.setattr(exp, "verify_config", lambda config, **kw: dataclasses.replace(real(config, **kw), **TINY))
    monkeypatch.setitem(settings.TEXT, "w9-copy-task", {"steps": TINY["steps"], "eval_size": TINY["eval_size"]})


def test_verify_and_all_with_three_seeds_carry_the_interval(tiny_verify, tmp_path):
    verified = invoke("verify", "--only", *IDS, "--seeds", "3", "--json", "--cache-dir", tmp_path / "cache")
    assert verified.exit_code in (0, 1), verified.output  # 5 training steps: cells may fail
    assert "3 training runs: 0 from cache, 3 computed" in verified.stderr
    rows = [r for r in json.loads(verified.stdout)["checks"] if r["id"].startswith("w9-copy-task.attention.4")]
    assert rows
    for r in rows:
        assert r["seeds"] == [0, 1, 2] and r["engines"] == ["exact", "fast", "fast"]
        iv = interval(r["values"])
        assert r["interval"] == {
            "mean": iv.mean,
            "half_width": iv.half_width,
            "low": iv.low,
            "high": iv.high,
            "n": 3,
            "std": iv.std,
        }
        assert r["status"] == ("pass" if iv.contains(r["published"]) else "fail")

    done = invoke(
        "all", "--only", *IDS, "--seeds", "3", "--json", "--out", tmp_path / "out", "--cache-dir", tmp_path / "cache"
    )
    manifest = json.loads(done.stdout)
    assert manifest["cache"] == ["copy_task: 3 training runs: 3 from cache, 0 computed"]
    assert manifest["engines"] == {"copy_task": "exact for seed 0, fast for seeds 1 2"}
    assert manifest["intervals"] == {r["id"]: r["interval"] for r in rows}
    index = (tmp_path / "out" / "index.md").read_text()
    assert f"3 seeds {rows[0]['interval']['mean']:.3f}" in index and "interval" in index
    assert (tmp_path / "out" / "copy_task_seeds.png").exists()  # several seeds: their distribution


# --------------------------------------------------------------------------- the interval in records and rows


def _outcome(status: str, values=(0.9, 0.92, 0.95)) -> Outcome:
    check = all_checks()["w9-copy-task.attention.32.free_running"]
    sample = SeedSample(
        value=values[0],
        values=list(values),
        seeds=list(range(len(values))),
        engines=["exact"] + ["fast"] * (len(values) - 1),
    )
    return Outcome(check, sample, status)


def test_a_record_and_a_report_row_carry_the_interval():
    o = _outcome("pass")
    iv = interval([0.9, 0.92, 0.95])
    assert o.as_json()["interval"] == iv.record() and iv.record()["n"] == 3
    assert iv.record()["low"] == iv.mean - iv.half_width
    row = report.checks_markdown([o])
    assert f"interval {iv.mean:.3f} ± {iv.half_width:.3f}" in row
    assert str(SeedSample(value=0.9, values=[0.9], seeds=[0], engines=["exact"])) == "0.9"  # one seed: as before


def test_the_manifest_carries_intervals_only_for_judged_trained_values():
    args = dict(
        command="all",
        quick=False,
        seed=0,
        device="cpu",
        where={"versions": {}, "machine": {}, "numerics": {}},
        cache=[],
        seconds=1.0,
        checks=None,
        coverage="",
        missing=[],
    )
    judged = records.manifest([], **args, outcomes=[_outcome("fail")])
    assert judged["intervals"] == {"w9-copy-task.attention.32.free_running": interval([0.9, 0.92, 0.95]).record()}
    skipped = records.manifest([], **args, outcomes=[_outcome("skipped")])  # a quick run: no new key
    assert "intervals" not in skipped
