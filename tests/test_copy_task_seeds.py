"""copy_task_seeds.png + .csv: the copy task's seed distribution, for any multi-seed run.

Every seed as a dot, the seed rule's interval as a band, the published value as a marker; the
CSV holds exactly the Result's numbers (one row per run and metric) beside its cell's
interval and the published value.  Never written for one seed.
"""

from __future__ import annotations

import csv
import subprocess
import sys

from attn_cli.core.copy_spec import RunOutcome
from attn_cli.experiments import copy_task as exp
from attn_cli.published.compare import compare_result
from attn_cli.published.copy_task import CHECK_IDS, check_id
from attn_cli.published.seed_rule import interval
from attn_cli.render import copy_task as render
from tests.conftest import assert_png, run_attn


def _judged(result):
    """The outcomes the pipeline hands the render module (its one comparison)."""
    return compare_result(result, exp.ARTIFACTS)


def _draw(result, out, formats=("png",)):
    return render.figures(result, out, formats, _judged(result))


def _result(seeds=(0, 1, 2, 3, 4), lengths=(4, 16), model="both") -> exp.Result:
    """A Result at the text's settings whose values differ from seed to seed (no training)."""
    cfg = exp.Config(lengths=lengths, seeds=seeds, model=model, extra_seed_engine="fast")
    outcomes = []
    for spec in cfg.plan():
        att = spec.model == "attention"
        k = spec.seed - seeds[0]
        weights = [[1.0 if j == t else 0.0 for j in range(spec.length)] for t in range(spec.length)]
        outcomes.append(
            RunOutcome(
                spec=spec,
                teacher_forced=0.99 - 0.001 * k,
                free_running=0.97 - 0.004 * k * k,
                exact=0.8 + 0.01 * k,
                seconds=1.0,
                final_loss=0.01,
                engine=cfg.engine_of(spec),
                example_src=list(range(spec.length)),
                example_weights=weights if att else [],
                diagonal=1.0 if att else None,
            )
        )
    return exp.assemble(cfg, outcomes, seconds=2.0)


def _read(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_several_seeds_write_the_figure_and_a_csv_of_exactly_the_results_numbers(tmp_path):
    result = _result()
    paths = render.figures(result, tmp_path, ("png",), _judged(result))
    png, table = tmp_path / "copy_task_seeds.png", tmp_path / "copy_task_seeds.csv"
    assert png in paths and table in paths
    assert_png(png)
    rows = _read(table)
    assert list(rows[0]) == list(render.CSV_HEADER)
    assert len(rows) == len(result.rows) * 3  # one per run and metric
    outcomes = compare_result(result, exp.ARTIFACTS)
    for row in rows:
        run = next(
            r
            for r in result.rows
            if (r["model"], str(r["length"]), str(r["seed"])) == (row["model"], row["length"], row["seed"])
        )
        assert float(row["value"]) == run[row["metric"]] and row["engine"] == run["engine"]
        cell = [r[row["metric"]] for r in result.rows if (r["model"], r["length"]) == (run["model"], run["length"])]
        iv = interval(cell)
        assert (int(row["n"]), float(row["mean"]), float(row["half_width"]), float(row["low"]), float(row["high"])) == (
            5,
            iv.mean,
            iv.half_width,
            iv.low,
            iv.high,
        )
        cid = check_id(run["model"], run["length"], row["metric"])
        assert row["published"] == (str(outcomes[cid].published) if cid in CHECK_IDS else "")
        assert row["status"] == (outcomes[cid].status if cid in CHECK_IDS else "")
    assert {
        r["published"]
        for r in rows
        if r["model"] == "attention" and r["length"] == "16" and r["metric"] == "free_running"
    } == {"0.995"}  # the text's W9 2.3 cell
    assert {r["engine"] for r in rows if r["seed"] == "0"} == {"exact"}
    assert {r["engine"] for r in rows if r["seed"] != "0"} == {"fast"}


def test_one_seed_writes_no_seed_figure(tmp_path):
    paths = _draw(_result(seeds=(0,)), tmp_path)
    assert not [p for p in paths if "seeds" in p.name]
    assert not list(tmp_path.glob("copy_task_seeds*"))


def test_the_figure_follows_the_numbers(tmp_path):
    _draw(_result(), tmp_path)
    png = tmp_path / "copy_task_seeds.png"
    before = png.read_bytes()
    _draw(_result(seeds=(0, 1, 2)), tmp_path)  # other numbers: another figure, and the CSV follows
    assert png.read_bytes() != before
    assert {r["n"] for r in _read(tmp_path / "copy_task_seeds.csv")} == {"3"}


def test_svg_too_when_asked(tmp_path):
    paths = _draw(_result(model="attention", lengths=(8,)), tmp_path, formats=("png", "svg"))
    assert tmp_path / "copy_task_seeds.svg" in paths and (tmp_path / "copy_task_seeds.svg").read_text().strip()


def test_the_render_module_imports_no_experiment():
    code = (
        "import sys, attn_cli.render.copy_task; print(any(m.startswith('attn_cli.experiments') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_multi_seed_copy_task_command_writes_it_and_a_single_seed_one_does_not(tmp_path):
    common = [
        "--lengths",
        "3",
        "--steps",
        "4",
        "--eval-size",
        "16",
        "--model",
        "attention",
        "--jobs",
        "1",
        "--cache-dir",
        tmp_path / "cache",
    ]
    proc = run_attn("copy-task", *common, "--seeds", "0-2", "--out", tmp_path / "many")
    assert proc.returncode == 0, proc.stderr
    assert_png(tmp_path / "many" / "copy_task_seeds.png")
    assert len(_read(tmp_path / "many" / "copy_task_seeds.csv")) == 3 * 3
    proc = run_attn("copy-task", *common, "--out", tmp_path / "one")
    assert proc.returncode == 0, proc.stderr
    assert not list((tmp_path / "one").glob("copy_task_seeds*"))
