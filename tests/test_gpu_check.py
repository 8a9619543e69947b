"""benchmarks/gpu_check.py: the whole plan on CPU at --small sizes (every part keeps its command,
stdout and stderr and reports real figures), from a checkout with attn_cli not installed, a
missing dependency named in one line, the per-step judgement (a wrong kernel fails at step 1;
the same seed twice must be bit-identical), and its answer on a machine without CUDA."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_check", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _plain_python_env(*front: Path) -> dict:
    """Python without site processing (no .pth: attn_cli's editable install is invisible), with
    site-packages on PYTHONPATH for torch and the rest: a checkout where attn_cli is not installed."""
    paths = [str(p) for p in front] + [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)), PYTHONNOUSERSITE="1")


def test_small_cpu_run_keeps_every_part_raw_output_and_real_figures(tmp_path):
    out = tmp_path / "check"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--small", "--jobs", "4", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    table = json.loads((out / "table.json").read_text())

    def row(part, what):
        return next(r for r in table["rows"] if r["part"] == part and r["what"].startswith(what))

    assert {r["part"] for r in table["rows"]} == set(_module().PARTS)
    assert all(r["ok"] and r["detail"] and r["figures"] for r in table["rows"]), table["rows"]
    # every command's raw output is kept, one folder each
    for folder in ("verify", "fast-steps", "exact-steps", "scaling-cpu", "seeds-cpu"):  # (cpu: its own reference)
        for name in ("command.txt", "stdout.txt", "stderr.txt"):
            assert (out / folder / name).is_file(), f"{folder}/{name}"
    assert (out / "verify" / "stdout.txt").read_text().lstrip().startswith("{")
    # real figures
    verify = row("verify", "attn verify --quick --only w9-sqrt-dk w9-masks")["figures"]
    assert verify["checks"] > 10 and verify.get("pass", 0) > 0
    for kind in ("fast", "exact"):
        steps = json.loads((out / f"{kind}-steps" / "stdout.txt").read_text())["runs"]
        assert len(steps["device"]) == len(steps["cpu"]) == 12 and all(math.isfinite(x) for x in steps["cpu"])
        same = row(f"{kind}-steps", f"{kind} engine: losses vs CPU")["figures"]
        assert same["step1"] == 0.0 and same["first_over"] is None and same["steps"] == 12  # cpu vs cpu: same bits
        assert row(f"{kind}-steps", f"{kind} engine: the same seed twice")["figures"]["identical"] is True
    scaling = row("scaling", "attn scaling --measure")["figures"]
    assert scaling["sizes"] == [128, 256] and isinstance(scaling["exponent"], float)
    assert set(row("scaling", "time per size vs CPU")["figures"]["cpu_s"]) == {"128", "256"}  # JSON keys
    cells = row("seeds", "copy-task fast engine, 2 seeds stacked")["figures"]["cells"]
    seed0 = next(r for r in json.loads((out / "seeds-cpu" / "stdout.txt").read_text())["rows"] if r["seed"] == 0)
    assert cells["attention-4"]["n"] == 2 and cells["attention-4"]["cpu"] == seed0["free_running"]
    assert (out / "table.md").read_text().count("\n| ") == len(table["rows"]) + 1
    assert "figures" in proc.stdout and "failed" in proc.stdout


def test_a_part_runs_from_a_checkout_where_attn_cli_is_not_installed(tmp_path):
    """``python -S``: no .pth, so the editable install is gone; the script finds the checkout itself."""
    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import attn_cli"],
        capture_output=True,
        text=True,
        env=_plain_python_env(),
        cwd=tmp_path,
    )
    assert probe.returncode != 0 and "No module named 'attn_cli'" in probe.stderr  # really not importable
    proc = subprocess.run(
        [
            sys.executable,
            "-S",
            str(SCRIPT),
            "--part",
            "fast-steps",
            "--device",
            "cpu",
            "--small",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_plain_python_env(),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["runs"]["cpu"]) == 12


def test_a_missing_dependency_is_named_with_its_pip_command(tmp_path):
    (tmp_path / "rich.py").write_text("raise ImportError('not installed here')\n")  # rich, as if absent
    proc = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), "--device", "cpu", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=300,
        env=_plain_python_env(tmp_path),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing Python package(s) rich" in lines[0] and "-m pip install rich" in lines[0]
    assert not (tmp_path / "o").exists()  # nothing ran


def _steps_data(device, cpu, again=None, tf32=None):
    runs = {"device": device, "again": again if again is not None else list(device), "cpu": cpu}
    if tf32 is not None:
        runs["device_tf32"] = tf32
    return {"length": 16, "runs": runs}


def test_a_wrong_kernel_fails_at_step_1_and_rounding_later_does_not():
    judge = _module().judge_steps
    cpu = [2.5, 2.4, 2.3, 2.2]
    wrong = judge("fast-steps", "cuda", _steps_data([2.5002, 2.4, 2.3, 2.2], cpu), 1.0)
    assert not wrong[0].ok and wrong[0].figures["first_over"] == 1  # a subtly wrong path: caught
    drift = judge("fast-steps", "cuda", _steps_data([2.5, 2.4, 2.3001, 2.21], cpu), 1.0)
    assert drift[0].ok and drift[0].figures["first_over"] == 3  # rounding that grows: reported, passes
    assert "first step with |Δ| > 1e-05: 3" in drift[0].detail


def test_the_same_seed_twice_must_be_bit_identical():
    judge = _module().judge_steps
    cpu = [2.5, 2.4, 2.3]
    rows = judge("exact-steps", "cuda", _steps_data(cpu, cpu, again=[2.5, 2.4, 2.3 + 2**-51]), 1.0)
    twice = [r for r in rows if "same seed twice" in r.what][0]
    assert not twice.ok and twice.figures["first_difference"] == 3 and "no, from step 3" in twice.detail
    assert [r for r in judge("exact-steps", "cuda", _steps_data(cpu, cpu), 1.0) if "twice" in r.what][0].ok


def test_tf32_is_reported_not_judged():
    cpu = [2.5, 2.4]
    rows = _module().judge_steps("exact-steps", "cuda", _steps_data(cpu, cpu, tf32=[2.51, 2.42]), 1.0)
    tf32 = [r for r in rows if "TF32" in r.what][0]
    assert tf32.ok and tf32.figures["first_over"] == 1 and tf32.figures["step1"] == pytest.approx(0.01)


def test_bad_jobs_is_one_line_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--jobs", "0", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--jobs must be at least 1" in proc.stderr and "Traceback" not in proc.stderr


def test_without_cuda_it_says_so_and_exits_2(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the script would run the check")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "CUDA is not available" in proc.stderr and "Traceback" not in proc.stderr


def test_on_cuda_scaling_is_timed_alone_then_the_rest_share_the_gpu(tmp_path, monkeypatch):
    """The orchestration a GPU run takes (parts faked): scaling first and alone, seeds started
    first among the rest, the table in plan order, the GPU named in the title."""
    import threading

    import torch

    gc = _module()
    started, running, lock = [], [], threading.Lock()

    def fake(name):
        def part(device, out, settings, timeout, *more):
            with lock:
                started.append((name, tuple(running)))
                running.append(name)
            threading.Event().wait(0.05)
            with lock:
                running.remove(name)
            return [gc.Row(name, f"{name} row", device, 0.1, True, "figures", {"x": 1})]

        return part

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for name, attr in (("verify", "part_verify"), ("scaling", "part_scaling"), ("seeds", "part_seeds")):
        monkeypatch.setattr(gc, attr, fake(name))
    monkeypatch.setattr(gc, "part_steps", lambda kind, *a: fake(kind)(*a[:4]))
    gpu = {"gpu": "NVIDIA H200", "capability": "9.0", "cuda": "12.8", "cudnn": "91002", "driver": "570.86.15"}
    monkeypatch.setattr(gc, "machine", lambda device: {"torch": "2.11", "cpus": 16, "platform": "x", "gpu": gpu})
    assert gc.main(["--device", "cuda", "--out", str(tmp_path)]) == 0
    assert started[0] == ("scaling", ())  # scaling alone
    # then the longest part, the seeds, among the first two the two threads take (which of the
    # two threads records its start first is a race: it failed once in 1,779 tests)
    assert "seeds" in {started[1][0], started[2][0]}
    table = json.loads((tmp_path / "table.json").read_text())
    assert [r["part"] for r in table["rows"]] == list(gc.PARTS)
    assert "NVIDIA H200 (compute 9.0, CUDA 12.8, cuDNN 91002, driver 570.86.15)" in table["title"]
