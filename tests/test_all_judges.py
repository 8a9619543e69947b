"""`attn all` judges every check as `attn verify` does (issue 14, item 2).

* the copy task runs at verify's configuration (the same seeds, engines and seed rule), so
  `attn all` after `attn verify` trains nothing and skips no check;
* `attn all --quick` is a smoke run that says, in its output, manifest and report, that it
  judges nothing, nothing trained included;
* one verdict per cell: the copy-task table's marks are its checks' outcomes, in the
  terminal, Markdown, HTML and JSON (a synthetic outcome that contradicts the numbers wins).

The copy task is shrunk (one length, one model, a few steps) so that each test takes seconds;
the plan, the cache and the comparison are the real ones.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from click.testing import CliRunner

from attn_cli import experiment_registry, pipeline
from attn_cli.cli import cli
from attn_cli.experiments import copy_task as exp
from attn_cli.experiments.copy_task.config import TEXT_LENGTHS
from attn_cli.published import settings
from attn_cli.published.compare import compare_result
from attn_cli.render import copy_task as render

TINY = {"lengths": (4,), "model": "attention", "steps": 5, "eval_size": 20, "jobs": 1}
IDS = ("w9-copy-task", "w9-copy-task-map")


def invoke(*args):
    return CliRunner().invoke(cli, list(map(str, args)), catch_exceptions=False, env={"COLUMNS": "200"})


@pytest.fixture
def tiny_verify(monkeypatch):
    """verify's copy-task configuration (5 seeds, exact then fast) at tiny sizes, and those
    sizes taken as the text's, so that its cells are judged (pass or fail), not "n/a"."""
    real = exp.verify_config
    monkeypatch.setattr(exp, "verify_config", lambda config: dataclasses.replace(real(config), **TINY))
    monkeypatch.setitem(settings.TEXT, "w9-copy-task", {"steps": TINY["steps"], "eval_size": TINY["eval_size"]})


def test_all_after_verify_trains_nothing_and_judges_every_check(tiny_verify, tmp_path):
    verified = invoke("verify", "--only", *IDS, "--json", "--out", tmp_path / "A", "--no-cache")  # trains, whatever
    # the per-user cache held before
    assert verified.exit_code in (0, 1), verified.output  # 5 training steps: cells may fail
    rows = {r["id"]: r for r in json.loads(verified.stdout)["checks"]}
    assert rows and all(r["status"] in ("pass", "fail") for r in rows.values())
    assert "5 training runs: 0 from cache, 5 computed" in verified.stderr

    out = tmp_path / "B"  # another --out: the runs come from the one per-user cache
    done = invoke("all", "--only", *IDS, "--json", "--out", out)
    assert done.exit_code == verified.exit_code, done.output
    manifest = json.loads(done.stdout)
    assert str(tmp_path) not in done.stdout  # no local path (the cache folder, the other --out) recorded
    assert manifest["cache"] == ["copy_task: 5 training runs: 5 from cache, 0 computed"]  # trained nothing
    assert manifest["verdicts"]["skipped"] == 0 and manifest["not_judged"] == []
    assert sum(manifest["verdicts"].values()) == len(rows)
    assert manifest["engines"] == {"copy_task": "exact for seed 0, fast for seeds 1 2 3 4"}
    config = manifest["experiments"]["copy_task"]["config"]
    assert config["seeds"] == [0, 1, 2, 3, 4] and config["extra_seed_engine"] == "fast"
    # the same verdict per cell as verify's, in the table's JSON
    cells = json.loads((out / "copy_task.json").read_text())["cells"]
    statuses = {
        f"w9-copy-task.{c['model']}.{c['length']}.{m}": c[m]["status"]
        for c in cells
        for m in exp.METRICS
        if c[m]["status"] is not None
    }
    assert statuses and statuses == {cid: rows[cid]["status"] for cid in statuses}
    index = (out / "index.md").read_text()
    assert "skipped" not in index and "Checks against the texts:" in index


def test_all_and_verify_build_identical_copy_task_runs():
    """At the real settings (nothing trained here): the same Config, so the same cache keys."""
    from attn_cli.experiment_registry import plan

    registry = experiment_registry.Registry.load()
    copy_task = registry.by_artifact["w9-copy-task"]
    args = dict(seed=2, device="cpu", use_cache=True)
    ((_, judged, unjudged),) = plan([copy_task], **args)
    assert unjudged is None and judged.seed_list == (2, 3, 4, 5, 6)
    assert judged == exp.verify_config(copy_task.config(seed=2, device="cpu"))
    keys = [exp.cache_key(s, judged.engine_of(s), judged.device) for s in judged.plan()]
    assert [k["engine"] for k in keys] == (["exact"] + ["fast"] * 4) * 8
    assert plan([copy_task], **args, quick=True)[0][2] == "quick"  # verify --quick: not judged


def test_all_quick_says_it_judges_nothing_trained(monkeypatch, tmp_path):
    monkeypatch.setattr(exp.Config, "quick", classmethod(lambda cls, **kw: cls(**{**TINY, **kw})))
    res = invoke("all", "--quick", "--only", *IDS, "--out", tmp_path)
    assert res.exit_code == 0, res.output
    said = " ".join(res.stdout.split())
    assert (
        "quick run: a smoke run at reduced sizes that judges nothing against the texts, nothing trained "
        "included" in said
    )
    assert re.search(r"\((\d+) checks shown, not judged; \1 of them trained: copy_task\)", said), said
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["quick"] and "nothing trained included" in manifest["quick_note"]
    listed = {e["id"]: e["reason"] for e in manifest["not_judged"]}
    trained = [c for c in experiment_registry.Registry.load().checks.values() if c.artifact in IDS]
    assert set(listed) == {c.id for c in trained} and set(listed.values()) == {"skipped (quick)"}
    assert manifest["verdicts"] == {"pass": 0, "fail": 0, "n/a": 0, "skipped": len(trained)}
    index = (tmp_path / "index.md").read_text()
    assert "> **Quick run**: a smoke run at reduced sizes that judges nothing" in index
    assert "Published values, not judged (quick run):" in index and "| skipped (quick) |" in index
    assert " = 0." not in index and "≠" not in index  # no mark: nothing was judged
    assert "judges nothing against the texts, nothing trained included" in (tmp_path / "index.html").read_text()


# --------------------------------------------------------------------------- one verdict per cell


def _result(free_running: float) -> exp.Result:
    """A copy-task Result at the text's settings with every run's accuracies given."""
    from attn_cli.core.copy_spec import RunOutcome

    cfg = exp.Config(lengths=TEXT_LENGTHS, model="both")
    outcomes = [
        RunOutcome(
            spec=s,
            teacher_forced=1.0,
            free_running=free_running,
            exact=0.9,
            seconds=1.0,
            final_loss=0.1,
            engine="exact",
            diagonal=0.9 if s.model == "attention" else None,
        )
        for s in cfg.plan()
    ]
    return exp.assemble(cfg, outcomes)


def _forced(result, status: str) -> dict:
    """The real outcomes with every copy-task cell's status replaced: what a check table might say."""
    return {
        cid: (
            dataclasses.replace(o, status=status, note=f"synthetic {status}")
            if o.check.artifact == "w9-copy-task"
            else o
        )
        for cid, o in compare_result(result, exp.ARTIFACTS).items()
    }


def _formats(result, outcomes, tmp_path) -> dict[str, str]:
    """The table in the terminal, as Markdown and as HTML; and the cells' JSON, as `attn all` writes them."""
    from attn_cli import regenerate as writing
    from attn_cli.render.table import to_html, to_markdown, to_text

    tables = render.tables(result, outcomes)
    registry = experiment_registry.Registry.load()
    run = pipeline.Run(registry.by_artifact["w9-copy-task"], None, result=result, measured=result.measured())
    section = writing.write_section(run, registry, tmp_path, ("png",), "copy-task", list(outcomes.values()))
    assert section.error is None, section.error
    return {
        "terminal": to_text(tables, width=220),
        "markdown": to_markdown(tables),
        "file": (tmp_path / "copy_task.md").read_text(),
        "html": to_html(section.tables),
        "json": (tmp_path / "copy_task.json").read_text(),
    }


PASS_MARK = re.compile(r"=(?:<[^>]*>)* (?:<[^>]*>)*\d\.\d{3}")  # "= 0.894" (in HTML, perhaps inside spans)
FAIL_MARK = re.compile(r"≠ \([+-]\d\.\d{3}\)")  # "≠ (-0.394)"


@pytest.mark.parametrize("free_running, forced", [(0.5, "pass"), (0.9, "fail"), (0.9, "skipped")])
def test_the_table_marks_are_the_outcomes_in_every_format(free_running, forced, tmp_path):
    """Numbers that a comparison would judge one way, outcomes that say another: the marks
    follow the outcomes (the check table's verdict), in every format."""
    result = _result(free_running)
    outcomes = _forced(result, forced)
    cells = [o for o in outcomes.values() if o.check.artifact == "w9-copy-task"]
    assert {o.status for o in compare_result(result, exp.ARTIFACTS).values()} != {forced}  # contradicts
    for name, text in _formats(result, outcomes, tmp_path).items():
        if name == "json":
            view = json.loads(text)["cells"]
            assert {c[m]["status"] for c in view for m in exp.METRICS} - {None} == {forced}, name
            continue
        passes, fails = len(PASS_MARK.findall(text)), len(FAIL_MARK.findall(text))
        want = {"pass": (len(cells), 0), "fail": (0, len(cells)), "skipped": (0, 0)}[forced]
        assert (passes, fails) == want, (name, text)
        if forced == "skipped":
            assert "not judged: synthetic skipped" in text, name
