"""attn in other people's CI: the check record's header and margins, JUnit XML, attn diff,
the CI recipes and the check table at 80 columns."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from attn_cli.published.compare import Outcome, compare
from attn_cli.published.seed_rule import FLOOR, SeedSample, interval
from attn_cli.published.types import Check, below, exact, identity, num, rule

ROOT = Path(__file__).resolve().parents[1]
XSD = Path(__file__).with_name("junit-jenkins.xsd")


def attn(*args, cwd=None, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "attn_cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "120", **(env or {})},
        timeout=timeout,
    )


def judged(check: Check, value) -> Outcome:
    return compare([check], {check.id: value})[check.id]


# --------------------------------------------------------------------------- margins at the edges


@pytest.mark.parametrize("value, status, sign", [(1.25, "pass", 0), (1.2, "pass", 1), (1.2500001, "fail", -1)])
def test_an_abs_margin_is_zero_on_the_tolerance_positive_inside_negative_outside(value, status, sign):
    o = judged(num("x.a", "w9-masks", 1.0, 0.25), value)
    m = o.margin()
    assert o.status == status
    assert m["needed_tolerance"] == pytest.approx(abs(value - 1.0))
    if sign == 0:
        assert m["margin"] == pytest.approx(0.0, abs=1e-9)
    else:
        assert (m["margin"] > 0) == (sign > 0) and m["margin"] == pytest.approx(1 - abs(value - 1.0) / 0.25, abs=1e-9)


def test_an_exact_value_has_margin_one_and_a_list_is_judged_by_its_worst_element():
    assert judged(num("x.a", "w9-masks", 0.5, 0.01), 0.5).margin() == {"margin": 1.0, "needed_tolerance": 0.0}
    m = judged(num("x.l", "w9-masks", [1.0, 2.0], 0.1), [1.0, 2.05]).margin()
    assert m["margin"] == pytest.approx(0.5) and m["needed_tolerance"] == pytest.approx(0.05)


def test_below_exact_rule_and_identity_margins():
    m = judged(below("x.b", "w9-masks", "1e-6", 1e-5, "solver"), 2.5e-6).margin()
    assert m["margin"] == pytest.approx(0.75) and m["needed_tolerance"] == pytest.approx(2.5e-6)
    assert judged(below("x.b", "w9-masks", "1e-6", 1e-5, "solver"), 1e-5).margin()["margin"] == 0.0  # strict: fails
    assert judged(exact("x.e", "w9-masks", "queen"), "queen").margin() == {"margin": 1.0, "needed_tolerance": 0.0}
    assert judged(exact("x.e", "w9-masks", "queen"), "king").margin() == {"margin": -1.0, "needed_tolerance": None}
    assert judged(rule("x.r", "w9-masks", "holds", "why"), False).margin()["margin"] == -1.0
    assert judged(identity(num("x.i", "w9-masks", 1.0, 0.1), "arithmetic"), 1.0).margin() is None
    skipped = compare([num("x.s", "w9-masks", 1.0, 0.1)], {"x.s": 1.0}, unjudged="quick")["x.s"]
    assert skipped.margin() is None and "margin" not in skipped.as_json()


def _seeds(values):
    return SeedSample(value=values[0], values=list(values), seeds=list(range(len(values))))


def test_the_seed_rule_margin_with_one_seed_uses_the_floor():
    check = Check(
        id="x.t",
        artifact="w9-copy-task",
        published=0.90,
        test="seeds",
        tolerance=FLOOR,
        judge=lambda s, p: interval(s.values).contains(p),
    )
    on_edge, inside, outside = (
        judged(check, _seeds([0.92])),
        judged(check, _seeds([0.91])),
        judged(check, _seeds([0.9201])),
    )
    assert on_edge.status == "pass" and on_edge.margin()["margin"] == pytest.approx(0.0, abs=1e-9)
    assert inside.margin()["margin"] == pytest.approx(0.5) and inside.margin()["needed_tolerance"] == pytest.approx(
        0.01
    )
    assert outside.status == "fail" and outside.margin()["margin"] < 0


def test_the_seed_rule_margin_with_five_seeds_uses_the_prediction_interval():
    values = [0.95, 0.97, 0.96, 0.99, 0.93]
    iv = interval(values)
    assert iv.half_width > FLOOR  # the spread, not the floor
    check = Check(
        id="x.t",
        artifact="w9-copy-task",
        published=iv.mean + iv.half_width / 4,
        test="seeds",
        tolerance=FLOOR,
        judge=lambda s, p: interval(s.values).contains(p),
    )
    m = judged(check, _seeds(values)).margin()
    assert m["margin"] == pytest.approx(0.75) and m["needed_tolerance"] == pytest.approx(iv.half_width / 4)
    edge = Check(
        id="x.u",
        artifact="w9-copy-task",
        published=iv.high,
        test="seeds",
        tolerance=FLOOR,
        judge=lambda s, p: interval(s.values).contains(p),
    )
    assert judged(edge, _seeds(values)).margin()["margin"] == pytest.approx(0.0, abs=1e-9)


# --------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    out = tmp_path_factory.mktemp("A")
    proc = attn("verify", "--only", "w9-masks", "w9-ppmi", "d2l-mha-params", "--out", out, "--junit", out / "junit.xml")
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_verify_json_has_a_header_and_a_margin_on_every_judged_check(run_a):
    out, proc = run_a
    data = json.loads((out / "verify.json").read_text())
    head = data["header"]
    assert set(head["versions"]) == {"attn", "torch", "python", "numpy"} and head["numerics"]["mode"]
    assert {"machine", "device", "seed", "seeds"} <= set(head) and head["timing"]["date"].startswith("20")
    for c in data["checks"]:
        judged_check = c["kind"] in ("measured", "rule") and c["status"] in ("pass", "fail")
        assert ("margin" in c and "needed_tolerance" in c) == judged_check, c["id"]
    assert "tightest checks" in proc.stdout


def test_the_junit_file_validates_and_reads_back_one_case_per_check(run_a):
    import xmlschema
    from junitparser import JUnitXml

    out, _ = run_a
    xmlschema.XMLSchema(XSD).validate(out / "junit.xml")
    checks = json.loads((out / "verify.json").read_text())["checks"]
    xml = JUnitXml.fromfile(str(out / "junit.xml"))
    suites = list(xml)
    assert [s.name for s in suites] == ["W9", "D2L"]
    cases = [(child.name, case) for s in suites for child in s.testsuites() for case in child]
    assert sorted(c.name for _, c in cases) == sorted(c["id"] for c in checks)
    assert all(case.is_passed for _, case in cases) and sum(s.failures for s in suites) == 0
    kinds = {c["id"]: c["kind"] for c in checks}
    assert all(name.endswith(kinds[case.name]) for name, case in cases)  # "W9 identity" holds identities
    assert any(case.classname == "W9 4.2" for _, case in cases)


def test_a_planted_failure_is_a_junit_failure_naming_measured_published_and_margin(tmp_path):
    import xmlschema
    from junitparser import Failure, JUnitXml

    from attn_cli.published.catalogue import BY_ID
    from attn_cli.records import junit_xml

    o = judged(num("w9-masks.planted", "w9-masks", 1.0, 0.01), 1.5)
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml([o.as_json()], BY_ID, {"w9-masks": 0.5}))
    xmlschema.XMLSchema(XSD).validate(path)
    (case,) = [c for s in JUnitXml.fromfile(str(path)) for child in s.testsuites() for c in child]
    (failure,) = [r for r in case.result if isinstance(r, Failure)]
    assert (
        "measured 1.5" in failure.message and "published 1" in failure.message and "margin -49.000" in failure.message
    )


# --------------------------------------------------------------------------- attn diff


def test_diff_of_two_runs_of_the_same_code_moves_nothing(run_a, tmp_path):
    out, _ = run_a
    b = tmp_path / "B"
    assert attn("verify", "--only", "w9-masks", "w9-ppmi", "d2l-mha-params", "--out", b).returncode == 0
    proc = attn("diff", out, b)
    assert proc.returncode == 0 and "0 values moved, 0 verdicts changed (0 now failing)" in proc.stdout
    both = attn("verify", "--only", "w9-masks", "--diff", out / "verify.json")  # run and compare in one step
    assert both.returncode == 0 and "0 values moved" in both.stdout and "1 removed" not in both.stdout


def test_diff_exits_1_on_a_planted_pass_to_fail_and_reads_a_bare_list(run_a, tmp_path):
    out, _ = run_a
    data = json.loads((out / "verify.json").read_text())
    bare = tmp_path / "old.json"
    bare.write_text(json.dumps(data["checks"]))  # the format before the header
    planted = json.loads(json.dumps(data))
    victim = next(c for c in planted["checks"] if c["status"] == "pass" and c["kind"] == "measured")
    victim.update(status="fail", regenerated=123.0, margin=-3.0)
    planted["header"]["versions"]["torch"] = "2.14.0"
    after = tmp_path / "after.json"
    after.write_text(json.dumps(planted))
    proc = attn("diff", bare, after)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "has no header" in proc.stdout and "1 value moved, 1 verdict changed (1 now failing)" in proc.stdout
    proc = attn("diff", out / "verify.json", after, "--json")
    d = json.loads(proc.stdout)
    assert proc.returncode == 1 and d["now_failing"] == [victim["id"]]
    assert {"field": "torch", "before": data["header"]["versions"]["torch"], "after": "2.14.0"} in d["header"]
    assert attn("diff", after, after).returncode == 0  # failing on both sides: nothing newly failing


def test_diff_refuses_what_is_not_a_record(tmp_path):
    (tmp_path / "x.json").write_text('{"a": 1}')
    proc = attn("diff", tmp_path / "x.json", tmp_path / "x.json")
    assert proc.returncode == 2 and "holds no check records" in proc.stderr and "Traceback" not in proc.stderr


def test_diff_against_native_numerics_names_the_header_and_the_moved_values(run_a, tmp_path):
    """On a CPU whose native kernels are not AVX2 (AVX-512), a few float32 values move."""
    from attn_cli.core import numerics

    native = numerics.describe("cpu", "native")["isa"]
    portable = numerics.describe("cpu", "portable")["isa"]
    a, b = tmp_path / "portable", tmp_path / "native"
    assert attn("verify", "--only", "w9-sqrt-dk", "--out", a).returncode == 0
    assert attn("verify", "--only", "w9-sqrt-dk", "--out", b, "--numerics", "native").returncode == 0
    proc = attn("diff", a, b)
    assert proc.returncode == 0 and "numerics: portable -> native" in proc.stdout
    if native != portable:
        assert f"CPU kernels: {portable} -> {native}" in proc.stdout
        assert "0 values moved" not in proc.stdout


# --------------------------------------------------------------------------- the check table at 80 columns


def _copy_task_outcomes():
    from attn_cli.published import copy_task as pub

    measured = {
        c.id: _seeds([c.published + d for d in (0.004, -0.006, 0.01, 0.0, -0.002)])
        for c in pub.CHECKS
        if c.test == "seeds"
    }
    return list(compare(pub.CHECKS, measured).values())


@pytest.mark.parametrize("width", [80, 200])
def test_every_check_is_one_line_and_no_number_is_cut(width):
    from attn_cli.render.report import split_id, verify_table
    from attn_cli.render.table import to_text

    outcomes = _copy_task_outcomes()
    text = to_text([verify_table(outcomes, width=width)], width=width)
    body = text.split("status:")[0]  # the footnotes below may wrap
    assert "…" not in body
    rows = [ln for ln in body.splitlines() if ln.rstrip().endswith(("pass", "FAIL", "rule", "identity", "n/a"))]
    assert len(rows) == len(outcomes)  # one line per check
    for o, line in zip(outcomes, rows):
        name = o.check.id if width >= 120 else split_id(o.check.id, o.check.artifact)[1]
        assert line.strip().startswith(name), (name, line)
        if o.check.test == "seeds" and o.status in ("pass", "fail"):
            iv = o.regenerated.interval()
            assert f"{iv.mean:.3f} ± {iv.half_width:.3f}" in line, line
    assert max(len(ln.rstrip()) for ln in body.splitlines()) <= width


# --------------------------------------------------------------------------- the CI recipes


def _attn_lines(path: Path) -> list[str]:
    import yaml

    doc = yaml.safe_load(path.read_text())
    scripts: list[str] = []
    for job in doc.get("jobs", {}).values():  # GitHub: jobs.<id>.steps[].run
        scripts += [step["run"] for step in job.get("steps", []) if "run" in step]
    for job in (v for v in doc.values() if isinstance(v, dict) and "script" in v):  # GitLab: <job>.script
        scripts += job["script"]
    return [line.strip() for text in scripts for line in text.splitlines() if line.strip().startswith("attn ")]


def test_the_ci_recipes_run_as_written(tmp_path):
    import xmlschema

    recipes = sorted((ROOT / "examples" / "ci").glob("*.yml"))
    assert [p.name for p in recipes] == ["github-actions.yml", "gitlab-ci.yml"]
    lines = {p.name: _attn_lines(p) for p in recipes}
    assert all(lines.values()), lines
    for command in dict.fromkeys(line for found in lines.values() for line in found):  # the same command once
        proc = attn(*shlex.split(command)[1:], cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, command + "\n" + proc.stderr
    xmlschema.XMLSchema(XSD).validate(tmp_path / "junit.xml")
    assert (tmp_path / "report" / "index.html").is_file() and (tmp_path / "report" / "manifest.json").is_file()
    manifest = json.loads((tmp_path / "report" / "manifest.json").read_text())
    assert manifest["header"]["quick"] is True and manifest["records"]


# --------------------------------------------------------------------------- the same, in-process


def _record(tmp_path: Path, name: str, checks: list[dict], header: dict | None, key: str = "checks") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(checks if header is None else {"header": header, key: checks}))
    return path


def _check(cid: str, value, status: str = "pass", margin=0.5) -> dict:
    return {"id": cid, "artifact": cid.split(".")[0], "regenerated": value, "status": status, "margin": margin}


HEAD = {
    "format": "attn-checks/1",
    "timing": {"date": "x"},
    "versions": {"torch": "2.13.0"},
    "numerics": {"mode": "portable", "isa": "AVX2"},
}


def test_load_reads_every_form_and_refuses_the_rest(tmp_path):
    from attn_cli import records

    checks = [_check("w9-masks.a", 1.0)]
    assert records.load(_record(tmp_path, "bare.json", checks, None)).header is None
    folder = tmp_path / "report"
    folder.mkdir()
    _record(folder, "manifest.json", checks, HEAD, key="records")  # attn all's manifest
    assert records.load(folder).checks == checks and records.load(folder).header == HEAD
    for text, why in [("[1, 2]", "without an id"), ('{"a": 1}', "holds no check records"), ("{", "is not JSON")]:
        (tmp_path / "bad.json").write_text(text)
        with pytest.raises(records.Unreadable, match=why):
            records.load(tmp_path / "bad.json")
    with pytest.raises(records.Unreadable, match="neither verify.json nor manifest.json"):
        records.load(tmp_path / "report" / ".." / "report" / "..")
    with pytest.raises(records.Unreadable, match="does not exist"):
        records.load(tmp_path / "nothing.json")


def test_diff_in_process_lists_moved_values_verdicts_new_and_removed(tmp_path):
    from click.testing import CliRunner

    from attn_cli.cli import cli

    before = _record(
        tmp_path,
        "a.json",
        [_check("w9-masks.a", 1.0), _check("w9-masks.b", [1, 2]), _check("w9-ppmi.gone", "queen")],
        HEAD,
    )
    later = dict(HEAD, versions={"torch": "2.14.0"}, numerics={"mode": "native", "isa": "AVX512"})
    after = _record(
        tmp_path,
        "b.json",
        [
            _check("w9-masks.a", 1.5, "fail", -1.0),
            _check("w9-masks.b", [1, 2]),
            _check("w9-ppmi.new", {"value": 0.5}, margin=None),
        ],
        later,
    )
    res = CliRunner().invoke(cli, ["diff", str(before), str(after)], env={"COLUMNS": "80"})
    assert res.exit_code == 1, res.output
    assert "torch: 2.13.0 -> 2.14.0" in res.output and "numerics: portable -> native" in res.output
    assert "CPU kernels: AVX2 -> AVX512" in res.output
    assert "pass→fail" in res.output and "0.500→-1.000" in res.output and "+0.5" in res.output
    assert "new: w9-ppmi.new" in res.output and "removed: w9-ppmi.gone" in res.output
    assert "1 value moved, 1 verdict changed (1 now failing); 1 new, 1 removed" in res.output
    everything = CliRunner().invoke(cli, ["diff", str(before), str(after), "--all", "--json"])
    data = json.loads(everything.stdout)
    assert [c["id"] for c in data["checks"]] == ["w9-masks.a", "w9-masks.b"] and data["now_failing"] == ["w9-masks.a"]
    table = CliRunner().invoke(cli, ["diff", str(before), str(before), "--all"], env={"COLUMNS": "80"})
    assert table.exit_code == 0 and "every check on both sides" in table.output and "w9-masks" in table.output
    bad = CliRunner().invoke(cli, ["diff", str(before), str(tmp_path)])
    assert bad.exit_code == 2 and "neither verify.json nor manifest.json" in bad.output
