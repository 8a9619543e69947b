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

    def figures(result, out, formats, outcomes, keep=None):
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
        pipeline.run(
            exp,
            Config(size=2),
            out=tmp_path,
            display=lambda config: _display(log),
            cache_root=lambda: log.append(("cache folder made", None)),
        )
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


# --------------------------------------------------------------------------- pieces in the one cache


@dataclass
class Piece:
    n: int


def _piece_maker(log: list):
    """A fake experiment that declares CACHES_PIECES: its one piece is read back, else computed and stored."""
    exp = _fake(log)
    exp.module.CACHES_PIECES = True

    def run(config, progress=None, store=None):
        key = {"size": config.size}
        piece = store.load(key, 1000, Piece, check=lambda p, k: None) if store is not None else None
        log.append(("piece", "cached" if piece is not None else "computed"))
        if piece is None and store is not None:
            store.store(key, Piece(n=config.size))
        return Result(config={"seed": config.seed, "device": "cpu"}, value=0.5, notes=[])

    exp.module.run = run
    return exp


def test_the_pipeline_hands_its_opened_cache_to_an_experiment_that_caches_pieces(tmp_path):
    log: list = []
    exp = _piece_maker(log)
    pipeline.run(exp, Config(size=3), cache_root=tmp_path / "cache")
    pipeline.run(exp, Config(size=3), cache_root=tmp_path / "cache")
    pipeline.run(exp, Config(size=3), cache_root=tmp_path / "cache", use_cache=False)  # --no-cache: recomputed
    pipeline.run(exp, Config(size=3))  # no cache: no store
    assert [e[1] for e in log if e[0] == "piece"] == ["computed", "cached", "computed", "computed"]
    assert len(list((tmp_path / "cache" / "fake").glob("*.json"))) == 1  # the experiment's group, one entry


def test_an_experiment_that_caches_nothing_gets_no_store_and_no_cache_folder(tmp_path):
    log: list = []
    pipeline.run(_fake(log), Config(), cache_root=tmp_path / "cache")  # its run takes no store: it would raise
    assert log[0][0] == "run" and not (tmp_path / "cache").exists()


def test_a_piece_that_fails_its_check_or_its_type_is_invalid(tmp_path):
    from attn_cli.store import cache, entries

    def small(piece, key):
        if piece.n > 5:
            raise ValueError(f"n {piece.n} is over 5")

    with cache.Cache.open(tmp_path / "cache") as store:
        pieces = entries.Pieces(store, "fake")
        pieces.store({"k": 1}, Piece(n=9))
        store.store("fake", {"k": 2}, {"n": "nine"})
        assert pieces.load({"k": 1}, 1000, Piece) == Piece(n=9)
        with pytest.raises(entries.InvalidEntry, match="n 9 is over 5"):
            pieces.load({"k": 1}, 1000, Piece, small)
        with pytest.raises(entries.InvalidEntry, match="expected"):
            pieces.load({"k": 2}, 1000, Piece)
        assert entries.Pieces(store, "fake", reuse=False).load({"k": 1}, 1000, Piece) is None
        assert pieces.load({"k": 3}, 1000, Piece) is None


@pytest.mark.parametrize("declared", ["finished runs are cached, a rerun resumes from them", None])
def test_execute_says_what_an_interrupted_experiment_kept(tmp_path, monkeypatch, declared):
    """Ctrl-C: the experiment's INTERRUPTED line, printed by the one path (execute), then the interruption."""
    from attn_cli.cli.commands import execute
    from attn_cli.cli.options import Common
    from attn_cli.render import console

    log: list = []
    exp = _fake(log)

    def run(config, progress=None):
        raise KeyboardInterrupt

    exp.module.run = run
    if declared:
        exp.module.INTERRUPTED = declared
    said: list = []
    monkeypatch.setattr(console, "note", said.append)
    common = Common(device="cpu", seed=0, out=tmp_path, json=False, quick=False)
    with pytest.raises(KeyboardInterrupt):
        execute.execute(execute.Job(exp.module, Config(), common))
    assert said == ([f"interrupted: {declared}"] if declared else [])
