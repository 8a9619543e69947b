"""The pipeline (:func:`attn_cli.pipeline.run`): checks, run, one comparison, figures, a typed Run."""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from attn_cli import pipeline
from attn_cli.cli import cli
from attn_cli.errors import AttnError, BadConfig, MemoryRefused
from attn_cli.experiment_registry import Experiment


@dataclass(frozen=True)
class Config:
    seed: int = 0
    device: str = "cpu"
    size: int = 1


@dataclass
class Result:
    config: dict
    value: float
    notes: list

    def measured(self) -> dict:
        return {"w9-sqrt-dk.4.std": self.value}


def _fake(log: list, *, validate=None, preflight=None):
    """A fake experiment module (the contract's names) with a render module that records its calls."""
    mod = types.ModuleType("fake_pipeline_experiment")
    mod.ARTIFACTS, mod.SLOW, mod.CACHED, mod.ENGINES, mod.FIGURES = ("w9-sqrt-dk",), False, False, (), ()
    mod.Config, mod.Result = Config, Result

    def run(config, progress=None):
        log.append(("run", progress))
        return Result(config={"seed": config.seed, "device": "cpu"}, value=0.5, notes=["a note of the Result"])

    mod.run = run
    if validate:
        mod.validate = validate
    if preflight:
        mod.preflight = preflight
    render = types.ModuleType("fake_pipeline_render")

    def tables(result, outcomes):
        log.append(("tables", dict(outcomes)))
        return ["table"]

    def figures(result, out, formats, outcomes):
        log.append(("figures", dict(outcomes)))
        path = out / "fake.png"
        path.write_bytes(b"png")
        return [path]

    render.tables, render.figures = tables, figures
    return Experiment("fake", mod, render=render)


def test_run_compares_once_and_hands_the_outcomes_to_the_figures(tmp_path):
    log: list = []
    run = pipeline.run(_fake(log), Config(), out=tmp_path)
    assert set(run.outcomes) >= {"w9-sqrt-dk.4.std"}  # every check of its catalogue IDs
    assert run.outcomes["w9-sqrt-dk.4.std"].regenerated == 0.5
    figures = [entry for entry in log if entry[0] == "figures"]
    assert len(figures) == 1 and figures[0][1] == run.outcomes  # the same verdicts, not compared again
    assert run.files == [tmp_path / "fake.png"] and run.notes == ["a note of the Result"]
    assert run.tables() == ["table"] and log[-1] == ("tables", run.outcomes)
    assert run.json()["value"] == 0.5 and run.seconds >= 0 and not run.from_cache


def test_without_out_nothing_is_written_and_unjudged_runs_compare_nothing(tmp_path):
    log: list = []
    assert pipeline.run(_fake(log), Config()).files == []
    assert pipeline.run(_fake(log), Config(), judged=False).outcomes == {}
    assert not any(entry[0] == "figures" for entry in log)


@contextlib.contextmanager
def _display(log):
    log.append(("display opened", None))
    yield "callback"


def test_a_refused_config_is_bad_config_before_any_display_or_file(tmp_path):
    log: list = []

    def validate(config):
        if config.size > 1:
            raise AttnError("size must be 1")

    exp = _fake(log, validate=validate)
    with pytest.raises(BadConfig, match="size must be 1"):
        pipeline.run(exp, Config(size=2), out=tmp_path, display=lambda config: _display(log),
                 cache_root=lambda: log.append(("cache folder made", None)))
    assert log == [] and list(tmp_path.iterdir()) == []
    run = pipeline.run(exp, Config(size=1), display=lambda config: _display(log))  # passes: displayed, run
    assert log[:2] == [("display opened", None), ("run", "callback")] and run.result.value == 0.5


def test_a_preflight_refusal_passes_unchanged_before_any_display():
    log: list = []

    def preflight(config):
        raise MemoryRefused("needs about 1 TB")

    with pytest.raises(MemoryRefused):
        pipeline.run(_fake(log, preflight=preflight), Config(), display=lambda config: _display(log))
    assert log == []
    kept = pipeline.run(_fake(log, preflight=preflight), Config(), keep_going=True)  # attn all: recorded
    assert kept.error == "MemoryRefused: needs about 1 TB" and log == []


def test_a_command_turns_a_refused_config_into_a_usage_error(tmp_path):
    """heads: each head count must divide --d-model (its validate hook): exit 2, one Error line, no file."""
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["heads", "--d-model", "10", "--num-heads", "3", "--out", str(out)])
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == "Error: 3 heads do not divide --d-model 10 (head size = width / heads)"
    assert not out.exists() or list(out.iterdir()) == []
