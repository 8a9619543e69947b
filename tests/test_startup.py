"""Start-up cost: what `attn --help`, a fast-engine run and a cached rerun import.

Each test runs a real process with ``python -X importtime`` (the interpreter lists every
module it imports on stderr) and fails when a module that costs start-up time is imported
where nothing needs it.  Measured on the 2-core Xeon (README, "Benchmarks"): importing torch
is about a second, matplotlib a third of one, torch._dynamo with sympy almost two.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ATTN

# never needed to print the command list: each is tens of milliseconds or more
HEAVY_AT_HELP = ("torch", "numpy", "matplotlib", "PIL", "rich", "tempfile", "subprocess")


def imported(args, env=None, timeout=300) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime ARGS`` -> the process and the names of every module it imported."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    return proc, names - {"package"}  # the header line's last column


def test_help_imports_nothing_heavy():
    proc, names = imported([ATTN, "--help"])
    assert proc.returncode == 0 and "copy-task" in proc.stdout, proc.stderr[-2000:]
    assert "click" in names  # the list is real
    heavy = sorted(n for n in names if n.split(".")[0] in HEAVY_AT_HELP)
    assert heavy == [], f"attn --help imports {heavy}"


def modules_after(args, tmp_path: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``attn ARGS`` -> the process and ``sys.modules`` as it ends.  (``-X importtime`` does
    not list a module imported with ``importlib.import_module``, as the command modules are.)"""
    listing = tmp_path / "modules.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write('\\n'.join(sys.modules)))\n"
        "from attn_cli.cli import main\nmain()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300)
    return proc, set(listing.read_text().split())


@pytest.mark.parametrize("args", [["--help"], [], ["--version"]])
def test_the_command_list_imports_neither_torch_nor_matplotlib(args, tmp_path):
    proc, names = modules_after(args, tmp_path)
    assert "Usage: attn" in proc.stdout + proc.stderr or proc.stdout.startswith("attn, version"), proc.stderr[-2000:]
    assert "attn_cli.cli.commands.copy_task" in names  # the list is real
    heavy = sorted(n for n in names if n.split(".")[0] in ("torch", "matplotlib", "numpy", "rich", "scipy"))
    assert heavy == [], f"attn {' '.join(args)} imports {heavy[:5]}"


def test_the_fast_engine_builds_its_layout_without_torch_dynamo():
    """The layout comes from a model built on the CPU with the global RNG saved and restored
    (on the meta device, the embedding's normal_ imports torch._dynamo and sympy: ~2 s)."""
    code = (
        "import sys, torch; from attn_cli.core.copy_fast.forward import param_layout; "
        "state = torch.get_rng_state(); lay = param_layout('attention', 32); "
        "print(torch.equal(state, torch.get_rng_state()), lay.size, "
        "sorted(m for m in ('torch._dynamo', 'sympy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split(maxsplit=2) == ["True", "16908", "[]\n"], out.stdout


def test_a_cached_fast_rerun_imports_no_torch(tmp_path: Path):
    """Every run cached: no torch (the figures are drawn again: matplotlib and numpy); with
    --no-figures not even those."""
    args = [
        ATTN,
        "copy-task",
        "--engine",
        "fast",
        "--model",
        "attention",
        "--lengths",
        "4",
        "--steps",
        "2",
        "--eval-size",
        "8",
        "--out",
        tmp_path / "out",
        "--cache-dir",
        tmp_path / "cache",
    ]
    first, names = imported(args)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "torch" in names  # the runs were computed: the check below can fail
    again, names = imported(args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "1 runs: 1 cached, 0 computed" in " ".join(again.stdout.split()), again.stdout
    assert "matplotlib" in names and sorted(n for n in names if n.split(".")[0] == "torch") == []
    bare, names = imported([*args, "--no-figures"])
    assert bare.returncode == 0, bare.stderr[-2000:]
    assert sorted(n for n in names if n.split(".")[0] in ("torch", "numpy", "matplotlib")) == []


@pytest.mark.parametrize("args, code", [(["--version"], 0), (["copy-task", "--lengths", "0"], 2)])
def test_attn_leaves_its_objects_to_the_operating_system_at_exit(args, code):
    """The objects are frozen out of the collector's last passes (torch's exit: 0.4-0.5 s of them);
    the exit status and the output are what they were."""
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count(), file=sys.stderr))\n"
        "from attn_cli.cli import main\n"
        f"sys.argv = ['attn', *{args!r}]\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr[-2000:]
    assert ("attn" in proc.stdout) if code == 0 else ("Error:" in proc.stderr)
    frozen = int(proc.stderr.rsplit("frozen", 1)[1].split()[0])
    assert frozen > 1000, proc.stderr[-2000:]
