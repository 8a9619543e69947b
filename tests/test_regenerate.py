"""``attn verify`` and ``attn all`` as library functions (attn_cli/regenerate.py), on the fake
registry of test_catalogue.py: the reports equal what the commands print, the exit status is
the report's, and the numeric mode recorded is the one passed, not the environment's."""

from __future__ import annotations

import json
import re

import pytest
import test_catalogue
from test_catalogue import invoke

from attn_cli import experiment_registry, pipeline, regenerate

fake = test_catalogue.fake  # the fixture


def test_verify_returns_what_attn_verify_prints(fake, tmp_path):
    fake.values = {"fk-alpha.x": 0.72}
    report = regenerate.verify(["fk-alpha"], cache_root=tmp_path / "cache")
    assert report.files == [] and not list(tmp_path.glob("verify.*"))  # out not given: no file
    printed = invoke("verify", "--only", "fk-alpha", "--json", "--out", tmp_path)
    assert printed.exit_code == report.exit_code == 1
    assert json.loads(printed.stdout)["checks"] == json.loads(json.dumps([o.as_json() for o in report.outcomes]))
    assert [o.check.id for o in report.failed] == ["fk-alpha.x"]
    assert report.summary in printed.output and report.coverage.line() in printed.output


def test_verify_passes_with_exit_0_and_writes_its_page_when_asked(fake, tmp_path):
    report = regenerate.verify(["fk-alpha"], out=tmp_path)
    assert report.exit_code == 0 and not report.failed
    assert report.files == [tmp_path / "verify.html", tmp_path / "verify.json"]
    assert all(f.exists() for f in report.files)


def test_regenerate_all_reports_every_file_it_wrote(fake, tmp_path):
    report = regenerate.regenerate_all(tmp_path / "a", cache_root=tmp_path / "cache")
    printed = invoke("all", "--out", tmp_path / "b", "--cache-dir", tmp_path / "cache")
    assert printed.exit_code == report.exit_code == 1  # fk-orphan's check has no experiment
    assert [o.check.id for o in report.failed] == ["fk-orphan.n"]
    assert f"wrote {len(report.files)} files to" in printed.output
    assert all(f.exists() for f in report.files)
    written = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert sorted(f.name for f in report.files) == written
    assert report.files[-3:] == [tmp_path / "a" / n for n in ("manifest.json", "index.md", "index.html")]
    assert report.not_written == ["fk-slow: slow did not write slow_L{length}.png"]


def test_the_exit_status_of_all(fake, tmp_path):
    fake.values = {"fk-alpha.x": 0.72}
    quick = regenerate.regenerate_all(tmp_path / "q", ["fk-alpha"], quick=True)
    assert quick.failed == [] and quick.exit_code == 0  # --quick judges nothing
    assert quick.quick_line.startswith("quick run: ") and quick.summary is None
    judged = regenerate.regenerate_all(tmp_path / "j", ["fk-alpha"])
    assert [o.check.id for o in judged.failed] == ["fk-alpha.x"] and judged.exit_code == 1
    fake.values, fake.fail = None, RuntimeError("boom")
    broken = regenerate.regenerate_all(tmp_path / "e", ["fk-alpha"], quick=True)
    assert [s.name for s in broken.errors] == ["alpha"] and broken.exit_code == 1


def test_a_seed_out_of_range_is_refused_before_any_run(fake, tmp_path):
    with pytest.raises(
        experiment_registry.SeedOutOfRange, match=re.escape(f"would seed torch with {experiment_registry.SEED_MAX + 1}")
    ):
        regenerate.verify(["fk-alpha"], seed=experiment_registry.SEED_MAX + 1)
    with pytest.raises(experiment_registry.UnknownId):
        regenerate.regenerate_all(tmp_path, ["fk-nope"])
    assert fake.alpha_calls == [] and fake.slow_calls == [] and not list(tmp_path.iterdir())


def test_the_numeric_mode_recorded_is_the_one_passed(fake, tmp_path, monkeypatch):
    """Common.numerics reaches the reports and the cache key; the environment is read only
    when no mode is passed (here it says native, unlike the mode given)."""
    monkeypatch.setenv("ATTN_NUMERICS", "native")
    assert regenerate.verify(["fk-alpha"], numerics="portable").where["numerics"]["mode"] == "portable"
    assert regenerate.verify(["fk-alpha"]).where["numerics"]["mode"] == "native"
    report = regenerate.regenerate_all(tmp_path, ["fk-alpha"], quick=True, numerics="portable")
    assert json.loads((tmp_path / "manifest.json").read_text())["numerics"]["mode"] == "portable"
    assert report.context_lines[-1].startswith("numerics: portable (")

    from attn_cli.experiments import formula

    exp = experiment_registry.Experiment("formula", formula)
    monkeypatch.setattr(formula, "CACHED", True)
    key = pipeline._cache_key(exp, exp.config(), tmp_path / "cache", "portable")
    assert key["numerics"]["mode"] == "portable"
    assert pipeline._cache_key(exp, exp.config(), tmp_path / "cache")["numerics"]["mode"] == "native"


def test_one_block_says_where_it_ran():
    where = pipeline.where_it_ran("cpu", "portable")
    assert list(where) == ["versions", "machine", "numerics"]
    assert pipeline.numerics_line(where["numerics"]) == f"numerics: portable ({where['numerics']['isa']} CPU kernels)"
    assert pipeline.numerics_line({"mode": "native", "isa": "AVX512", "cuda": {"name": "X"}}).startswith(
        "numerics: native (AVX512 CPU kernels); GPU "
    )
