"""A prepared GPU check: everything that should work with ``--device cuda``, in one run.

    python benchmarks/gpu_check.py                 # on a machine with CUDA (exit 2 without)
    python benchmarks/gpu_check.py --device cpu    # the same plan on CPU (a dry run of the script)

Three parts, one table at the end (exit 1 if anything failed):
  1. every command that takes --device, run as ``python -m attn_cli CMD ... --device D
     --quick --json --out TMP/CMD`` (several at once: --jobs);
  2. the copy-task fast engine (PyTorch ops, seeds stacked) with --seeds seeds on D against
     the same on CPU: identical initial weights and batches (made on CPU from each seed), the
     accuracies side by side per seed;
  3. ``attn scaling --measure`` on D (not quick: sizes that run in seconds on D).
Budget: about 4 minutes on a 16-core machine with one GPU at the defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

# extra arguments per command (positional arguments some commands need)
EXTRA = {"heatmap": ["attention", "translation"], "exercise": ["all"]}
SKIP = {"list"}  # no --device: nothing device-specific to check


@dataclass
class Row:
    part: str
    what: str
    device: str
    seconds: float = 0.0
    ok: bool = True
    detail: str = ""
    extra: dict = field(default_factory=dict)


def commands_with_device() -> list[str]:
    from attn_cli.cli import cli

    return [name for name, cmd in sorted(cli.commands.items())
            if name not in SKIP and any(p.name == "device" for p in cmd.params)]


def run_command(name: str, device: str, out: Path, timeout: float) -> Row:
    args = [sys.executable, "-m", "attn_cli", name, *EXTRA.get(name, []), "--device", device, "--quick",
            "--json", "--out", str(out / name)]
    return _run("commands", f"attn {name} --quick", device, args, timeout)


def run_scaling(device: str, out: Path, timeout: float) -> Row:
    args = [sys.executable, "-m", "attn_cli", "scaling", "--measure", "--device", device, "--json",
            "--out", str(out / "scaling-measure")]
    row = _run("scaling", "attn scaling --measure", device, args, timeout)
    if row.ok:
        try:
            data = json.loads(row.extra.pop("stdout"))
            measured = data["measured_rows"]
            sizes = [m["n"] for m in measured]
            row.detail = f"{data.get('device_name') or device}: n = {sizes[0]}..{sizes[-1]}" if sizes else "no sizes"
            if data.get("exponent") is not None:
                row.detail += f"; time ~ n^{data['exponent']:.2f}"
            row.ok = bool(sizes)
        except (ValueError, KeyError, TypeError) as exc:
            row.detail = f"ran; could not summarise its JSON ({type(exc).__name__})"
    return row


def _run(part: str, what: str, device: str, args: list[str], timeout: float) -> Row:
    start = time.perf_counter()
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1")
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Row(part, what, device, time.perf_counter() - start, False, f"timed out after {timeout:.0f} s")
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or "Traceback" in proc.stderr:
        last = [line for line in proc.stderr.strip().splitlines() if line.strip()][-1:] or ["(no stderr)"]
        return Row(part, what, device, seconds, False, f"exit {proc.returncode}: {last[0][:160]}")
    try:
        json.loads(proc.stdout)
    except ValueError:
        return Row(part, what, device, seconds, False, "stdout is not JSON")
    return Row(part, what, device, seconds, True, "ok", {"stdout": proc.stdout})


def copy_task_side_by_side(device: str, seeds: int, length: int, steps: int) -> list[Row]:
    """The fast engine's stacked seeds on ``device`` and on CPU; one row per seed and a summary."""
    from attn_cli.core.copy_fast import run_fast
    from attn_cli.core.copy_spec import RunSpec

    specs = [RunSpec(model="attention", length=length, seed=s, steps=steps) for s in range(seeds)]
    results, rows = {}, []
    for dev in dict.fromkeys([device, "cpu"]):
        start = time.perf_counter()
        try:
            results[dev] = run_fast(specs, device=dev, backend="torch")
        except Exception as exc:  # reported, never a traceback
            rows.append(Row("copy-task", f"fast engine, {seeds} seeds stacked", dev, time.perf_counter() - start,
                            False, f"{type(exc).__name__}: {exc}"[:200]))
            continue
        rows.append(Row("copy-task", f"fast engine, {seeds} seeds stacked (L {length}, {steps} steps)", dev,
                        time.perf_counter() - start, True, _mean(results[dev])))
    if device in results and "cpu" in results and device != "cpu":
        for a, b in zip(results[device], results["cpu"]):
            rows.append(Row("copy-task", f"  seed {a.spec.seed}", f"{device} | cpu", 0.0, True,
                            f"free-running {a.free_running:.3f} | {b.free_running:.3f}; teacher-forced "
                            f"{a.teacher_forced:.3f} | {b.teacher_forced:.3f}; exact {a.exact:.3f} | {b.exact:.3f}"))
        gap = abs(statistics.fmean(a.free_running for a in results[device])
                  - statistics.fmean(b.free_running for b in results["cpu"]))
        spread = max(statistics.pstdev([b.free_running for b in results["cpu"]]), 0.01)
        rows.append(Row("copy-task", "  means agree (|gap| <= 3 std over seeds)", f"{device} vs cpu", 0.0,
                        gap <= 3 * spread, f"free-running mean gap {gap:.3f}, CPU std {spread:.3f}"))
    elif device == "cpu" and "cpu" in results:
        for a in results["cpu"]:
            rows.append(Row("copy-task", f"  seed {a.spec.seed}", "cpu", 0.0, True,
                            f"free-running {a.free_running:.3f}; teacher-forced {a.teacher_forced:.3f}; "
                            f"exact {a.exact:.3f}"))
    return rows


def _mean(outcomes) -> str:
    free = [o.free_running for o in outcomes]
    return f"free-running {statistics.fmean(free):.3f} ± {statistics.pstdev(free):.3f} over {len(free)} seeds"


def machine(device: str) -> str:
    import platform

    import torch

    text = f"torch {torch.__version__}, {os.cpu_count()} CPUs, {platform.platform(terse=True)}"
    if device == "cuda":
        text += f", {torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    return text


def print_table(rows: list[Row], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name, justify in (("part", "left"), ("what", "left"), ("device", "left"), ("seconds", "right"),
                          ("status", "left"), ("detail", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    for r in rows:
        table.add_row(r.part, r.what, r.device, f"{r.seconds:.1f}" if r.seconds else "",
                      "[green]ok[/]" if r.ok else "[bold red]FAIL[/]", r.detail)
    Console(width=max(120, int(os.environ.get("COLUMNS", 0) or 0))).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cuda (the check) or cpu (the same plan on CPU, to try the script)")
    parser.add_argument("--seeds", type=int, default=8, help="stacked copy-task seeds [8]")
    parser.add_argument("--length", type=int, default=16, help="copy-task sequence length [16]")
    parser.add_argument("--steps", type=int, default=600, help="copy-task Adam steps [600]")
    parser.add_argument("--jobs", type=int, default=max(1, min(6, (os.cpu_count() or 2) // 2)),
                        help="commands run at once [half the CPUs, at most 6]")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per command [300]")
    parser.add_argument("--only", nargs="+", metavar="PART", choices=["commands", "copy-task", "scaling"],
                        help="run only these parts")
    args = parser.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: CUDA is not available on this machine (torch "
              f"{torch.__version__}); nothing was run. `--device cpu` runs the same plan on CPU.", file=sys.stderr)
        return 2
    parts = set(args.only or ["commands", "copy-task", "scaling"])
    started = time.perf_counter()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="attn-gpu-check-") as tmp:
        out = Path(tmp)
        if "commands" in parts:
            names = commands_with_device()
            print(f"gpu_check: {len(names)} commands on {args.device}, {args.jobs} at once ...", file=sys.stderr)
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                rows += list(pool.map(lambda n: run_command(n, args.device, out, args.timeout), names))
        if "copy-task" in parts:
            print(f"gpu_check: copy-task fast engine, {args.seeds} seeds, {args.device} and cpu ...", file=sys.stderr)
            rows += copy_task_side_by_side(args.device, args.seeds, args.length, args.steps)
        if "scaling" in parts:
            print(f"gpu_check: scaling --measure on {args.device} ...", file=sys.stderr)
            rows.append(run_scaling(args.device, out, args.timeout))
    for r in rows:
        r.extra.pop("stdout", None)
    failed = [r for r in rows if not r.ok]
    print_table(rows, f"attn GPU check on {args.device}: {machine(args.device)}; "
                      f"{time.perf_counter() - started:.0f} s, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
