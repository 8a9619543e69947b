"""Interrupted, killed, concurrent and repeated runs, through the real entry point where a
signal is involved."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from attn_cli.cli import cli
from tests.conftest import ATTN


def _start(*args: str) -> subprocess.Popen:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.Popen([ATTN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for_files(out: Path, count: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(_visible(out)) >= count or proc.poll() is not None:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {count} files in {out} after {timeout} s")


def _visible(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")]


def _assert_complete(out: Path) -> int:
    """Every visible file is whole: JSON parses, PNGs end with IEND, text files are non-empty."""
    files = _visible(out)
    for path in files:
        data = path.read_bytes()
        assert data, path
        if path.suffix == ".json":
            json.loads(data)
        elif path.suffix == ".png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and data.rstrip(b"\0")[-8:-4] == b"IEND", path
        elif path.suffix in (".csv", ".md"):
            assert data.endswith(b"\n"), path
    return len(files)


def test_ctrl_c_exits_130_without_a_traceback_or_partial_file(tmp_path):
    proc = _start("all", "--quick", "--out", str(tmp_path))
    _wait_for_files(tmp_path, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "Error: interrupted", err
    assert _assert_complete(tmp_path) >= 2
    assert not [p for p in tmp_path.rglob(".*.tmp*")], "a temp file survived Ctrl-C"


SUBSET = ("--only", "w9-copy-task", "w9-masks", "w9-sqrt-dk", "d2l-crossattn-map", "w9-order")


def test_sigkill_at_a_random_point_leaves_complete_files_and_a_rerun_completes(tmp_path):
    files_before_kill = random.randint(1, 20)
    proc = _start("all", "--quick", *SUBSET, "--out", str(tmp_path))
    _wait_for_files(tmp_path, files_before_kill, proc)
    proc.kill()
    proc.communicate(timeout=60)
    _assert_complete(tmp_path)  # (a hidden temp file of the write in flight may remain)
    rerun = subprocess.run(
        [ATTN, "all", "--quick", *SUBSET, "--out", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert rerun.returncode == 0, (files_before_kill, rerun.stderr)
    assert _assert_complete(tmp_path) > 20
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert not [e for e in manifest["experiments"].values() if e["error"]]


def test_two_processes_share_one_out_and_cache(tmp_path):
    args = (
        "all",
        "--quick",
        "--only",
        "w9-copy-task",
        "w9-masks",
        "--out",
        str(tmp_path / "out"),
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    first, second = _start(*args), _start(*args)
    for proc in (first, second):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert _assert_complete(tmp_path / "out") > 8
    assert not [p for p in tmp_path.rglob(".*.tmp*")]
    runs = list((tmp_path / "cache" / "copy_task").glob("*.json"))
    assert len(runs) == 8 and all(json.loads(p.read_text())["entry"]["payload"]["spec"] for p in runs)


# --------------------------------------------------------------------------- determinism

COMMANDS = [
    ["embeddings"],
    ["analogy"],
    ["formula"],
    ["order"],
    ["sqrt-dk", "--quick"],
    ["masks"],
    ["scaling"],
    ["scaling", "--measure", "--lengths", "64", "128", "--repeats", "1"],
    ["copy-both", "--quick"],  # the text's lstsq (MKL gelsy): reproducible on one MKL thread (portable mode)
    ["heatmap", "banana", "bandana"],
    ["crossattn-map", "--heads", "4"],
    ["heads"],
    ["self-cross"],
    ["exercise", "3", "9", "--quick"],
    ["copy-task", "--quick", "--lengths", "4", "--model", "attention", "--engine", "fast", "--no-cache"],
    ["copy-task", "--quick", "--lengths", "4", "--model", "plain", "--steps", "5", "--jobs", "1", "--no-cache"],
    ["verify", "--quick", "--only", "w9-masks", "w9-order"],
    ["all", "--quick", "--only", "w9-masks", "w9-scaling"],
    ["list"],
    ["cache"],
]


def _without_timing(obj):
    if isinstance(obj, dict):
        return {k: _without_timing(v) for k, v in obj.items() if k != "timing"}
    if isinstance(obj, list):
        return [_without_timing(v) for v in obj]
    return obj


def _json_run(args: list[str], out: Path) -> tuple[str, dict[str, str]]:
    flags = ["--json"] + (["--out", str(out)] if args[0] not in ("list", "cache") else [])
    result = CliRunner().invoke(cli, [*args, *flags])
    assert result.exit_code == 0, result.output
    files = {p.name: p.read_text() for p in sorted(out.rglob("*.json")) if ".cache" not in p.parts}
    return result.stdout, files


def test_every_command_is_covered():
    from attn_cli.cli import cli as group

    # diff compares two runs' files: two runs of the same code compare equal in test_ci_records
    assert {(a if isinstance(a, list) else a.values[0])[0] for a in COMMANDS} == set(group.commands) - {"diff"}


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:3]) if isinstance(a, list) else None)
def test_same_seed_same_json_apart_from_timing(args, tmp_path):
    first_out, second_out = tmp_path / "a", tmp_path / "a"
    first, first_files = _json_run(args, first_out)
    import shutil

    shutil.rmtree(first_out, ignore_errors=True)  # same --out path (configs name it), fresh contents
    second, second_files = _json_run(args, second_out)
    one, two = json.loads(first), json.loads(second)
    timing_free = json.dumps(_without_timing(one), indent=2)
    assert timing_free == json.dumps(_without_timing(two), indent=2)
    if isinstance(one, dict) and any(k in one for k in ("seconds", "runs")):
        assert "timing" in one
    assert first_files.keys() == second_files.keys()
    for name in first_files:
        a, b = json.loads(first_files[name]), json.loads(second_files[name])
        assert _without_timing(a) == _without_timing(b), name
    if args[0] != "list":  # the only keys that vary are the timing ones: checked by their absence
        text = timing_free
        assert '"seconds"' not in text and '"cpu_seconds"' not in text and '"time_s"' not in text


def test_copy_both_is_reproducible_to_solver_precision(tmp_path):
    import math

    def floats(obj):
        if isinstance(obj, dict):
            return [x for k in sorted(obj) for x in floats(obj[k])]
        if isinstance(obj, list):
            return [x for v in obj for x in floats(v)]
        return [obj] if isinstance(obj, float) else []

    runs = [json.loads(_json_run(["copy-both", "--quick"], tmp_path / "a")[0]) for _ in range(3)]
    for other in runs[1:]:
        assert all(math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-5) for x, y in zip(floats(runs[0]), floats(other)))
        assert len(floats(runs[0])) == len(floats(other)) > 40


def test_timing_paths_name_real_fields():
    """Every TIMING path of a Result names a field that exists (a typo would keep a timing in place)."""
    import dataclasses

    from attn_cli.experiments import copy_task, exercises, scaling
    from attn_cli.experiments.exercises import ex06_timing

    kinds = {"ex6": ex06_timing.Result, "rows": ex06_timing.Row, "measured_rows": scaling.MeasuredRow}
    for cls in (copy_task.Result, scaling.Result, exercises.Result):
        for path in cls.TIMING:
            parts = [p for p in path.split(".") if p != "*"]
            owner = cls
            for part in parts:
                names = {f.name for f in dataclasses.fields(owner)} if dataclasses.is_dataclass(owner) else None
                assert names is None or part in names, (cls.__name__, path)
                owner = kinds.get(part, dict)
