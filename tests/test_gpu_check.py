"""benchmarks/gpu_check.py: the plan it runs, and its answer on a machine without CUDA (cheap
checks only; `python benchmarks/gpu_check.py --device cpu` runs the whole plan on CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_check", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_plan_covers_every_command_that_takes_device():
    from attn_cli.cli import cli

    names = _module().commands_with_device()
    assert "list" not in names
    assert {"all", "verify", "copy-task", "masks", "scaling", "heatmap", "exercise"} <= set(names)
    assert set(names) == {n for n, c in cli.commands.items() if any(p.name == "device" for p in c.params)}


def test_without_cuda_it_says_so_and_exits_2():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the script would run the check")
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    assert "CUDA is not available" in proc.stderr and "Traceback" not in proc.stderr
