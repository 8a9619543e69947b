"""``attn list``, ``attn verify``, ``attn all``.

Most tests run the commands in-process (click's CliRunner) against a fake registry: fake
experiment modules, a fake catalogue and fake checks, so pass/fail/exit codes/--json/--only
are tested without the real (sometimes slow) experiments.  A few tests then run the real
entry point on whatever experiments have landed (guarded by the discovered set).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
from dataclasses import dataclass, replace

import pytest
from click.testing import CliRunner
from conftest import assert_png, assert_user_error, run_attn

from attn_cli import experiment_registry
from attn_cli.cli import cli
from attn_cli.published.types import Artifact, exact, num, rule

# --------------------------------------------------------------------------- a fake registry

CATALOGUE = (
    Artifact("fk-alpha", "W9", "1.1", "a table", "alpha"),
    Artifact("fk-plot", "W9", "1.2", "a figure", "alpha", ("alpha.png", "alpha.csv"), new=True),
    Artifact("fk-slow", "W9", "2.3", "a slow trained table", "slow", ("slow_L{length}.png",)),
    Artifact("fk-orphan", "D2L", "10.3.1", "nobody regenerates this", "orphan"),
)

CHECKS = {
    c.id: c
    for c in (
        num("fk-alpha.x", "fk-alpha", 0.707, 0.0005),
        num("fk-alpha.vec", "fk-alpha", [1.0, 2.0], 0.005),
        exact("fk-alpha.shape", "fk-alpha", [2, 4, 100], kind="identity"),
        rule("fk-alpha.diag", "fk-alpha", "near-diagonal", "the rule in code"),
        num("fk-slow.acc", "fk-slow", 0.894, 0.02, "training noise across PyTorch builds"),
        exact("fk-orphan.n", "fk-orphan", 262144),
    )
}


def _alpha_module(values: dict | None = None, fail: Exception | None = None, calls: list | None = None):
    """A fake experiment following the contract; ``values`` override what it measures."""
    mod = types.ModuleType("fake_alpha")
    mod.ARTIFACTS = ("fk-alpha", "fk-plot")
    mod.FIGURES, mod.ENGINES, mod.SLOW, mod.CACHED = ("alpha.png",), (), False, False

    @dataclass(frozen=True)
    class Config:
        seed: int = 0  # seed
        device: str = "cpu"  # device
        size: int = 100  # sizes

        @classmethod
        def quick(cls, **overrides):
            return replace(cls(size=3), **overrides)

    @dataclass
    class Result:
        config: dict
        x: float
        vec: list

        def measured(self):
            m = {"fk-alpha.x": self.x, "fk-alpha.vec": self.vec, "fk-alpha.shape": [2, 4, 100], "fk-alpha.diag": True}
            m.update(values or {})
            return {k: v for k, v in m.items() if v is not _DROP}

    def run(config, progress=None):
        if calls is not None:
            calls.append(config)
        if fail is not None:
            raise fail
        return Result(config={"seed": config.seed, "size": config.size}, x=0.70711, vec=[1.001, 2.002])

    mod.Config, mod.Result, mod.run = Config, Result, run
    return mod


_DROP = object()


def _slow_module(calls: list | None = None, stores: list | None = None):
    mod = types.ModuleType("fake_slow")
    mod.ARTIFACTS = ("fk-slow",)
    mod.ENGINES = ("exact", "fast")
    mod.FIGURES = ()
    mod.SLOW, mod.CACHED, mod.CACHES_PIECES = True, False, True

    @dataclass(frozen=True)
    class Config:
        seed: int = 0
        device: str = "cpu"
        steps: int = 2500  # training steps
        engine: str = "exact"  # exact or fast
        seeds: tuple = ()  # several seeds (what verify_config sets)

        @classmethod
        def quick(cls, **overrides):
            return replace(cls(steps=10), **overrides)

    def verify_config(config):  # as the copy task's: --seed and the next one
        return replace(config, seeds=(config.seed, config.seed + 1))

    @dataclass
    class Result:
        config: dict
        acc: float

        def measured(self):
            return {"fk-slow.acc": self.acc}

    def run(config, progress=None, store=None):  # store: the opened cache's pieces (CACHES_PIECES)
        if calls is not None:
            calls.append(config)
        if stores is not None:
            stores.append(store)
        return Result(config={"steps": config.steps}, acc=0.89 if config.steps == 2500 else 0.3)

    mod.Config, mod.Result, mod.run, mod.verify_config = Config, Result, run, verify_config
    return mod


def _alpha_render():
    mod = types.ModuleType("fake_alpha_render")

    def tables(result, outcomes):
        from attn_cli.render.table import Table, styled

        t = Table(title="Alpha | table", caption="first line\nsecond line")
        t.add_column("quantity")
        t.add_column("value", justify="right")
        t.add_row("x", f"{result.x:.3f}")
        t.add_row("a|b", styled(("1", "bold")))
        return [t, "a note under the table"]

    def figures(result, out, formats, outcomes, keep=None):
        from attn_cli.render.files import new_figure, save_figure, write_csv

        fig, ax = new_figure()
        ax.plot([0, 1, 2], [0, 1, 0])
        write_csv(out / "alpha.csv", [[0, 0], [1, 1]], header=["x", "y"])
        return save_figure(fig, out / "alpha.png", formats)

    mod.tables, mod.figures = tables, figures
    return mod


@pytest.fixture
def fake(monkeypatch):
    """Install the fake registry; returns a handle to change what the experiments do."""
    state = types.SimpleNamespace(alpha_calls=[], slow_calls=[], slow_stores=[], values=None, fail=None)

    def discover():
        return [
            experiment_registry.Experiment(
                "alpha", _alpha_module(state.values, state.fail, state.alpha_calls), render=_alpha_render()
            ),
            experiment_registry.Experiment("slow", _slow_module(state.slow_calls, state.slow_stores)),
        ]

    monkeypatch.setattr(experiment_registry, "discover", discover)
    monkeypatch.setattr(experiment_registry, "catalogue", lambda: CATALOGUE)
    monkeypatch.setattr(experiment_registry, "checks", lambda: dict(CHECKS))
    return state


def invoke(*args):
    return CliRunner().invoke(cli, list(map(str, args)), catch_exceptions=False, env={"COLUMNS": "200"})


# --------------------------------------------------------------------------- attn list


def test_list_table_and_json(fake):
    res = invoke("list")
    assert res.exit_code == 0, res.output
    for a in CATALOGUE:
        assert a.id in res.output
    assert "alpha.png" in res.output and "attn orphan" in res.output

    rows = json.loads(invoke("list", "--json").output)
    assert [r["id"] for r in rows] == [a.id for a in CATALOGUE]
    assert {"id", "source", "section", "title", "subcommand", "files"} <= set(rows[0])
    assert rows[1]["files"] == ["alpha.png", "alpha.csv"]
    assert rows[3]["experiment"] is None and rows[3]["checks"] == 1


def test_list_of_the_real_catalogue_names_every_id():
    from attn_cli.published.catalogue import ARTIFACTS

    rows = json.loads(invoke("list", "--json").output)
    assert [r["id"] for r in rows] == [a.id for a in ARTIFACTS]


# --------------------------------------------------------------------------- attn verify


def test_verify_passes_and_prints_summary(fake, tmp_path):
    res = invoke("verify", "--only", "fk-alpha", "fk-slow", "--out", tmp_path, "--cache-dir", tmp_path / "cache")
    assert res.exit_code == 0, res.output
    assert "3 measured and 1 rule passed; 1 identity shown" in res.output
    assert "coverage: 2/2 catalogue IDs checked" in res.output
    for cid in ("fk-alpha.x", "fk-alpha.vec", "fk-alpha.shape", "fk-alpha.diag", "fk-slow.acc"):
        assert cid in res.output
    assert "training noise across PyTorch builds" in res.output  # the tolerance's reason
    # defaults, with the common options passed through; the cache folder is --cache-dir's
    (alpha_cfg,) = fake.alpha_calls
    assert (alpha_cfg.size, alpha_cfg.seed) == (100, 0)
    (slow_cfg,) = fake.slow_calls
    (store,) = fake.slow_stores  # the pipeline's opened cache, as the slow experiment's pieces
    assert slow_cfg.steps == 2500 and store.cache.root == tmp_path / "cache" and store.name == "slow" and store.reuse


def test_verify_writes_junit_and_compares_with_an_earlier_run(fake, tmp_path):
    from junitparser import JUnitXml

    first = invoke("verify", "--only", "fk-alpha", "--out", tmp_path / "a", "--junit", tmp_path / "a" / "j.xml")
    assert first.exit_code == 0, first.output
    (suite,) = JUnitXml.fromfile(str(tmp_path / "a" / "j.xml"))
    assert suite.name == "W9" and sum(len(list(child)) for child in suite.testsuites()) == 4
    assert "tightest checks" in first.output
    fake.values = {"fk-alpha.x": 0.72}  # now outside its tolerance
    again = invoke("verify", "--only", "fk-alpha", "--diff", tmp_path / "a" / "verify.json")
    assert again.exit_code == 1 and "1 value moved, 1 verdict changed (1 now failing)" in again.output
    as_json = invoke("verify", "--only", "fk-alpha", "--json", "--diff", tmp_path / "a" / "verify.json")
    assert json.loads(as_json.stdout)["checks"] and "1 now failing" in as_json.stderr
    assert invoke("verify", "--only", "fk-alpha", "--diff", tmp_path).exit_code == 2  # no record there
    done = invoke("all", "--only", "fk-alpha", "--out", tmp_path / "b", "--junit", tmp_path / "b.xml")
    assert (tmp_path / "b.xml").is_file() and json.loads((tmp_path / "b" / "manifest.json").read_text())["records"]
    assert done.exit_code == 1  # fk-alpha.x fails


def test_verify_json_keys_and_seed(fake, tmp_path):
    res = invoke("verify", "--only", "fk-alpha", "--json", "--seed", 7, "--out", tmp_path)
    assert res.exit_code == 0
    rows = json.loads(res.stdout)["checks"]
    assert [r["id"] for r in rows] == ["fk-alpha.x", "fk-alpha.vec", "fk-alpha.shape", "fk-alpha.diag"]
    for r in rows:
        assert {"id", "published", "regenerated", "tolerance", "ok", "reason"} <= set(r)
        assert r["ok"] is True
    assert rows[0] == {**rows[0], "published": 0.707, "regenerated": 0.70711, "tolerance": "±0.0005"}
    assert fake.alpha_calls[0].seed == 7
    assert {r["id"]: r["kind"] for r in rows} == {
        "fk-alpha.x": "measured",
        "fk-alpha.vec": "measured",
        "fk-alpha.shape": "identity",
        "fk-alpha.diag": "rule",
    }
    assert {r["id"]: r["test"] for r in rows} == {
        "fk-alpha.x": "abs",
        "fk-alpha.vec": "abs",
        "fk-alpha.shape": "exact",
        "fk-alpha.diag": "rule",
    }
    # the summary goes to stderr under --json
    assert "2 measured and 1 rule passed; 1 identity shown" in res.stderr


def test_verify_fails_outside_tolerance_exit_1(fake, tmp_path):
    fake.values = {"fk-alpha.x": 0.72, "fk-alpha.diag": False}
    res = invoke("verify", "--only", "fk-alpha", "--out", tmp_path)
    assert res.exit_code == 1
    assert "1 measured and 0 rules passed, 2 failed; 1 identity shown" in res.output
    assert "FAIL" in res.output

    rows = json.loads(invoke("verify", "--only", "fk-alpha", "--json", "--out", tmp_path).stdout)["checks"]
    assert {r["id"]: r["ok"] for r in rows} == {
        "fk-alpha.x": False,
        "fk-alpha.vec": True,
        "fk-alpha.shape": True,
        "fk-alpha.diag": False,
    }


def test_verify_missing_value_is_not_regenerated(fake, tmp_path):
    fake.values = {"fk-alpha.vec": _DROP}
    res = invoke("verify", "--only", "fk-alpha.vec", "--json", "--out", tmp_path)
    assert res.exit_code == 1
    (row,) = json.loads(res.stdout)["checks"]
    assert row["ok"] is False and row["regenerated"] is None
    assert "not regenerated" in row["note"]


def test_verify_experiment_error_fails_its_checks_only(fake, tmp_path):
    from attn_cli.errors import AttnError

    fake.fail = AttnError("out of cheese")
    res = invoke("verify", "--only", "fk-alpha", "fk-slow", "--json", "--out", tmp_path)
    assert res.exit_code == 1
    rows = {r["id"]: r for r in json.loads(res.stdout)["checks"]}
    assert rows["fk-slow.acc"]["ok"] is True
    assert rows["fk-alpha.x"]["ok"] is False and "out of cheese" in rows["fk-alpha.x"]["note"]
    assert "Traceback" not in res.output


def test_verify_everything_reports_coverage_and_fails_on_orphan(fake, tmp_path):
    res = invoke("verify", "--out", tmp_path)
    assert res.exit_code == 1  # fk-orphan has a published value and nothing regenerates it
    assert "3 measured and 1 rule passed, 1 failed; 1 identity shown" in res.output
    assert "coverage: 2/4 catalogue IDs checked; no checks: fk-plot; no experiment: fk-orphan" in res.output
    assert "no experiment module" in res.output


@pytest.mark.parametrize(
    "only, expected",
    [
        (["fk-alpha.x"], ["fk-alpha.x"]),  # a check ID
        (["fk-alpha"], ["fk-alpha.x", "fk-alpha.vec", "fk-alpha.shape", "fk-alpha.diag"]),  # a catalogue ID
        (["fk-slow.acc", "fk-alpha.vec"], ["fk-alpha.vec", "fk-slow.acc"]),  # several, registry order
        (["w9"], ["fk-alpha.x", "fk-alpha.vec", "fk-alpha.shape", "fk-alpha.diag", "fk-slow.acc"]),  # a source
    ],
)
def test_verify_only_selects(fake, tmp_path, only, expected):
    res = invoke("verify", "--only", *only, "--json", "--out", tmp_path)
    assert res.exit_code == 0, res.output
    assert [r["id"] for r in json.loads(res.stdout)["checks"]] == expected


def test_verify_only_prefix_and_runs_only_needed(fake, tmp_path, monkeypatch):
    more = dict(CHECKS)
    more["fk-alpha.1024.grad"] = num("fk-alpha.1024.grad", "fk-alpha", 0.0067, 0.00005)
    monkeypatch.setattr(experiment_registry, "checks", lambda: more)
    fake.values = {"fk-alpha.1024.grad": 0.00668}
    res = invoke("verify", "--only", "fk-alpha.1024", "--json", "--out", tmp_path)
    assert [r["id"] for r in json.loads(res.stdout)["checks"]] == ["fk-alpha.1024.grad"]
    assert fake.slow_calls == []  # the slow experiment was not needed


def test_verify_unknown_id_exit_2_lists_known(fake, tmp_path):
    res = CliRunner().invoke(cli, ["verify", "--only", "fk-alpha", "no-such-id", "--out", str(tmp_path)])
    assert res.exit_code == 2
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1
    assert "no-such-id" in errors[0]
    for a in CATALOGUE:
        assert a.id in errors[0]
    assert fake.alpha_calls == []  # refused before running anything


def test_verify_quick_skips_only_slow_checks(fake, tmp_path):
    res = invoke("verify", "--quick", "--only", "fk-alpha", "fk-slow", "--json", "--out", tmp_path)
    assert res.exit_code == 0
    rows = {r["id"]: r for r in json.loads(res.stdout)["checks"]}
    assert rows["fk-slow.acc"]["ok"] is None and rows["fk-slow.acc"]["status"] == "skipped"
    assert rows["fk-slow.acc"]["regenerated"] == 0.3  # the quick run's value, shown but not judged
    assert all(rows[c]["ok"] is True for c in rows if c.startswith("fk-alpha"))
    assert fake.alpha_calls[0].size == 100  # the cheap experiment still ran at its defaults
    assert fake.slow_calls[0].steps == 10  # the slow one at Config.quick()
    assert "2 measured and 1 rule passed; 1 identity shown, 1 skipped (quick)" in res.stderr


# --------------------------------------------------------------------------- attn all


def test_all_writes_tables_figures_manifest_index(fake, tmp_path):
    res = invoke("all", "--out", tmp_path, "--cache-dir", tmp_path / "cache")
    # fk-orphan's check has no experiment: a failed check, so exit 1, after writing every file
    assert res.exit_code == 1, res.output
    assert "1 check(s) failed against the texts: fk-orphan.n" in res.output
    for name in (
        "alpha.md",
        "alpha.json",
        "alpha.png",
        "alpha.csv",
        "slow.md",
        "slow.json",
        "manifest.json",
        "index.md",
    ):
        assert (tmp_path / name).exists(), name
    assert_png(tmp_path / "alpha.png")

    md = (tmp_path / "alpha.md").read_text()
    assert "| quantity | value |" in md and "| ---: |" in md
    assert "| a\\|b | 1 |" in md  # pipes escaped, markup stripped
    assert "*first line*\n*second line*" in md
    assert "a note under the table" in md
    assert "![alpha.png](alpha.png)" in md

    assert json.loads((tmp_path / "alpha.json").read_text())["x"] == 0.70711  # asdict of the Result

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["versions"]) == {"attn", "torch", "python", "numpy"}
    assert manifest["numerics"]["mode"] == "portable" and manifest["numerics"]["isa"]
    assert manifest["artifacts"]["fk-plot"]["files"] == ["alpha.md", "alpha.json", "alpha.png", "alpha.csv"]
    assert manifest["artifacts"]["fk-slow"]["not_written"] == ["slow_L{length}.png"]
    assert manifest["experiments"]["alpha"]["config"] == {"seed": 0, "device": "cpu", "size": 100}
    # the cache folder reached the slow experiment, but no local path is recorded
    assert fake.slow_stores[0].cache.root == tmp_path / "cache"
    assert str(tmp_path) not in (tmp_path / "manifest.json").read_text()
    assert manifest["missing"] == ["fk-orphan"]
    assert manifest["timing"]["seconds"] > 0 and not manifest["quick"]

    index = (tmp_path / "index.md").read_text()
    assert "![alpha.png](alpha.png)" in index  # every figure embedded, relative link
    assert "**Alpha | table**" in index  # every table
    assert "fk-orphan" in index and "not regenerated" in index
    # the slow experiment trained as attn verify trains it, and is judged as verify judges it
    assert "Checks against the texts: 3 measured and 1 rule passed, 1 failed; 1 identity shown." in index
    assert "| fk-slow.acc | 0.894 | 0.89 | ±0.02 | 0.800 | pass |" in index
    assert manifest["engines"] == {"slow": "exact"}
    assert manifest["verdicts"] == {"pass": 5, "fail": 1, "n/a": 0, "skipped": 0} and manifest["not_judged"] == []
    assert fake.slow_calls[0].engine == "exact" and fake.slow_calls[0].seeds == (0, 1)
    assert not list(tmp_path.glob(".*tmp*"))  # atomic writes leave no temp files


def test_all_quick_and_json(fake, tmp_path):
    res = invoke("all", "--quick", "--json", "--out", tmp_path)
    assert res.exit_code == 0
    manifest = json.loads(res.stdout)
    assert manifest["quick"] and manifest["checks"] is None
    assert fake.alpha_calls[0].size == 3 and fake.slow_calls[0].steps == 10
    assert "Quick run" in (tmp_path / "index.md").read_text()


def test_all_runs_the_slow_experiment_exactly_as_verify(fake, tmp_path):
    """One plan for both commands: the same Config (so the same cached runs), the same verdicts."""
    assert invoke("verify", "--only", "fk-slow", "--seed", "3", "--out", tmp_path).exit_code == 0
    res = invoke("all", "--only", "fk-slow", "--seed", "3", "--out", tmp_path)
    assert res.exit_code == 0, res.output
    verified, done = fake.slow_calls
    assert dataclasses.asdict(done) == dataclasses.asdict(verified)  # (a fresh fake module per command)
    assert done.seeds == (3, 4) and done.engine == "exact"
    assert "| fk-slow.acc | 0.894 | 0.89 | ±0.02 | 0.800 | pass |" in (tmp_path / "index.md").read_text()
    assert "checks against the texts: 1 measured and 0 rules passed; 0 identities shown" in res.output
    # the engine is verify's; there is no second way to train it here
    refused = CliRunner().invoke(cli, ["all", "--engine", "fast", "--out", str(tmp_path / "b")])
    assert refused.exit_code == 2 and "No such option '--engine'" in refused.output


def test_all_only_runs_the_owning_experiments(fake, tmp_path):
    res = invoke("all", "--only", "fk-plot", "--json", "--out", tmp_path)
    assert res.exit_code == 0, res.output
    manifest = json.loads(res.stdout)
    assert list(manifest["experiments"]) == ["alpha"] and fake.slow_calls == []
    assert "fk-slow" not in (tmp_path / "index.md").read_text()
    bad = CliRunner().invoke(cli, ["all", "--only", "nope", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "known IDs: fk-alpha, fk-plot, fk-slow, fk-orphan" in bad.output


def test_all_reports_a_failing_experiment_and_exits_1(fake, tmp_path):
    fake.fail = RuntimeError("boom")
    res = invoke("all", "--out", tmp_path)
    assert res.exit_code == 1
    assert (tmp_path / "slow.json").exists() and (tmp_path / "index.md").exists()
    assert "boom" in (tmp_path / "index.md").read_text()


# --------------------------------------------------------------------------- discovery


def test_the_experiment_list_names_every_experiment_module():
    """experiment_registry.discover holds the list; a module there that defines ARTIFACTS and is not
    listed would be silently left out of attn all and attn verify."""
    import importlib
    import pkgutil

    import attn_cli.experiments as package

    defined = {
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if hasattr(importlib.import_module(f"attn_cli.experiments.{info.name}"), "ARTIFACTS")
    }
    assert {e.name for e in experiment_registry.discover()} == defined


def test_real_registry_is_consistent():
    """Every experiment module names catalogue IDs, none claimed twice; check IDs are unique."""
    registry = experiment_registry.Registry.load()
    assert registry.experiments, "no experiment module found"
    for exp in registry.experiments:
        assert exp.artifacts and hasattr(exp.module, "run") and hasattr(exp.module.Config, "quick")
        assert isinstance(exp.slow, bool) and isinstance(exp.cached, bool) and isinstance(exp.engines, tuple)
        assert not exp.caches_pieces or "store" in inspect.signature(exp.module.run).parameters


def test_one_table_value_renders_to_rich_markdown_html_and_csv():
    """A Table is data: every format shows the same cells; a verdict cell is classed in HTML."""
    from attn_cli.render.table import Table, styled, to_csv, to_html, to_markdown, to_text

    t = Table(title="t", caption="c")
    t.add_column("a")
    t.add_column("n", justify="right")
    t.add_row("[1, 2]", styled("0.5 ", ("=", "green"), verdict="pass"))  # brackets are data, not markup
    assert "| [1, 2] | 0.5 = |" in to_markdown([t, "text"]) and to_markdown([t, "text"]).endswith("\n\ntext")
    assert '<td class="pass num">0.5 <span class="pass">=</span></td>' in to_html([t])
    assert to_csv(t) == 'a,n\n"[1, 2]",0.5 =\n'
    assert "[1, 2]" in to_text([t]) and "0.5 =" in to_text([t])


def test_a_table_refuses_what_it_cannot_render():
    from attn_cli.render.table import Table, Text

    t = Table()
    t.add_column("a")
    with pytest.raises(ValueError, match="2 cells for 1 columns"):
        t.add_row("x", "y")
    with pytest.raises(ValueError, match="unknown style"):
        Text((("x", "blink"),))
    with pytest.raises(ValueError, match="unknown verdict"):
        Text((("x", ""),), verdict="maybe")


# --------------------------------------------------------------------------- the real entry point

CHEAP = ("w9-worked", "w9-properties", "w9-masks", "w9-self-cross", "d2l-mha-params")


def _discovered() -> set[str]:
    return set(experiment_registry.Registry.load().by_artifact)


def test_real_verify_cheap_ids(tmp_path):
    ids = [a for a in CHEAP if a in _discovered()]
    if not ids:
        pytest.skip("none of the cheap experiments has landed")
    proc = run_attn("verify", "--only", *ids, "--json", "--out", tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(proc.stdout)["checks"]
    assert rows and all(r["ok"] is True for r in rows)
    assert {r["artifact"] for r in rows} == set(ids)


def test_real_verify_unknown_id():
    proc = run_attn("verify", "--only", "no-such-id", timeout=60)
    assert proc.returncode == 2
    assert_user_error(proc, "no-such-id", "w9-copy-task", "d2l-crossattn-map")


# cheap experiments whose figures the report must embed (the copy task and the exercises
# take minutes even when quick, so they are left to the copy-task test below and to CI of theirs)
FIGURES = ("w9-contextual", "w9-masks", "w9-sqrt-dk-plot", "d2l-fig-10.3.1", "d2l-crossattn-map")


def test_real_all_quick(tmp_path):
    registry = experiment_registry.Registry.load()
    ids = [a for a in FIGURES if a in registry.by_artifact]
    if not ids:
        pytest.skip("none of the cheap figure experiments has landed")
    proc = run_attn("all", "--quick", "--only", *ids, "--out", tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["experiments"]) == {registry.by_artifact[a].name for a in ids}
    index = (tmp_path / "index.md").read_text()
    pngs = 0
    for aid in ids:
        for f in manifest["artifacts"][aid]["files"]:
            assert (tmp_path / f).exists(), f
            if f.endswith(".png"):
                pngs += 1
                assert f"![{f}]({f})" in index
                assert_png(tmp_path / f)
        assert not manifest["artifacts"][aid].get("not_written"), aid
    assert pngs >= len(ids)


def test_copy_task_corrupt_cache_is_recomputed(tmp_path, monkeypatch):
    """A truncated cache entry is detected and recomputed: no crash, no trust.

    The copy task's quick configuration is shrunk further (one length, one model, 5 steps,
    in this process) so that the test takes seconds; the cache logic is the real one.
    """
    registry = experiment_registry.Registry.load()
    exp = registry.by_artifact["w9-copy-task"]
    Config = exp.module.Config
    tiny = {"lengths": (4,), "model": "attention", "steps": 5, "eval_size": 20, "jobs": 1}
    monkeypatch.setattr(Config, "quick", classmethod(lambda cls, **kw: cls(**{**tiny, **kw})))

    verify = (
        "verify",
        "--quick",
        "--only",
        "w9-copy-task",
        "--json",
        "--out",
        tmp_path,
        "--cache-dir",
        tmp_path / "cache",
    )
    first = invoke(*verify)
    assert first.exit_code == 0, first.output
    cached = sorted((tmp_path / "cache" / "copy_task").glob("*.json"))
    assert cached, "the run was not cached"
    good = [json.loads(p.read_text()) for p in cached]

    for p in cached:  # truncate every cache entry mid-file
        text = p.read_text()
        p.write_text(text[: len(text) // 2])
    second = invoke(*verify)
    assert second.exit_code == 0, second.output
    assert "Traceback" not in second.output
    assert "recomputing" in second.stderr
    rows = {r["id"]: r for r in json.loads(second.stdout)["checks"]}
    assert rows["w9-copy-task.attention.4.free_running"]["status"] == "skipped"
    assert rows["w9-copy-task.attention.4.free_running"]["regenerated"] is not None
    # the entries were rewritten whole, with the same numbers (the exact engine is deterministic)
    assert [json.loads(p.read_text()) for p in cached] == good or [
        json.loads(p.read_text())["entry"]["payload"]["free_running"] for p in cached
    ] == [g["entry"]["payload"]["free_running"] for g in good]


def test_experiments_run_on_one_intra_op_thread(fake, tmp_path, monkeypatch):
    import torch

    seen = []
    original = experiment_registry.Experiment.run

    def spy(self, config, progress=None, store=None):
        seen.append(torch.get_num_threads())
        return original(self, config, progress, store)

    monkeypatch.setattr(experiment_registry.Experiment, "run", spy)
    before = torch.get_num_threads()
    assert invoke("verify", "--only", "fk-alpha", "--out", tmp_path).exit_code == 0
    assert seen == [1] and torch.get_num_threads() == before


def test_cached_experiment_is_read_back_keyed_by_config(tmp_path, monkeypatch):
    """An experiment declaring CACHED runs once per configuration in the cache; a damaged
    entry, another configuration or --no-cache computes it again."""
    from attn_cli.experiments import formula

    calls = []
    original = formula.run

    def counted(config, progress=None):
        calls.append(config)
        return original(config, progress)

    monkeypatch.setattr(formula, "CACHED", True)
    monkeypatch.setattr(formula, "run", counted)
    verify = ("verify", "--only", "w9-worked", "--out", tmp_path, "--cache-dir", tmp_path / "cache")
    assert invoke(*verify).exit_code == 0 and len(calls) == 1
    second = invoke(*verify)
    assert second.exit_code == 0 and "passed" in second.output
    assert len(calls) == 1  # read back, not recomputed
    (entry,) = (tmp_path / "cache" / "formula").glob("*.json")
    entry.write_text(entry.read_text().replace("0.401", "0.402", 1))  # edited: recomputed, not trusted
    edited = invoke(*verify)
    assert edited.exit_code == 0 and len(calls) == 2
    assert "formula: cache entry formula/" in edited.stderr and "HMAC does not match" in edited.stderr
    assert invoke(*verify, "--no-cache").exit_code == 0 and len(calls) == 3
    assert invoke(*verify, "--seed", "1").exit_code in (0, 1) and len(calls) == 4
    assert len(list((tmp_path / "cache" / "formula").glob("*.json"))) == 2


def test_group_help_shows_every_summary_whole():
    """`attn --help` lists each command with its whole summary: nothing cut with '...'."""
    from click.testing import CliRunner

    from attn_cli.cli import cli

    out = CliRunner().invoke(cli, ["--help"], terminal_width=100).output
    commands = out.split("Commands:", 1)[1]
    assert "..." not in commands, commands
    for name, command in cli.commands.items():
        if command.hidden:
            continue
        whole = command.get_short_help_str(limit=10**6)  # its summary, never cut
        assert len(whole) > 45 or not whole.endswith("..."), name
        assert " ".join(whole.split()) in " ".join(commands.split()), name  # wrapped, not cut
