"""Benchmark: the figure drawer's window, against another checkout, side by side.

``attn copy-task --engine fast --steps 1 --no-cache`` into a fresh folder, as a new process
with each checkout on ``PYTHONPATH`` in turn (which goes first alternates), ``--rounds`` times
after one warm-up.  A small wrapper times, inside the command:

  window      from the Result's hand-over to the figure drawer (render/drawer.py) to the
              paths' return: the five figures drawn by the drawer's children, the part of
              "beyond training" that the figures cost
  after run   from the end of training to the process's exit (the window, the table, the exit)
  wall        the whole command, from outside

and prints each round's values, then the medians and the per-round ratio of the windows.
``benchmarks/startup.py --cases training computed`` measures the whole fixed cost against a
floor; this isolates the figures, which that measurement's noise (the floor and the command
are separate processes) hides.

    python benchmarks/figure_window.py --baseline /tmp/base --rounds 10
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRAPPER = r"""
import json, sys, time
log = sys.argv[1]
from attn_cli.experiments import copy_task
from attn_cli.render import drawer
marks = {}
run_fast = copy_task.run_fast_engine
def timed_engine(*args, **kwargs):
    try:
        return run_fast(*args, **kwargs)
    finally:
        marks["trained"] = time.perf_counter()
copy_task.run_fast_engine = timed_engine
hand_over = drawer.Drawer.figures
def timed_figures(self, *args, **kwargs):
    start = time.perf_counter()
    try:
        return hand_over(self, *args, **kwargs)
    finally:
        marks["window"] = time.perf_counter() - start
drawer.Drawer.figures = timed_figures
import atexit
atexit.register(lambda: open(log, "w").write(json.dumps({**marks, "exit": time.perf_counter()})))
from attn_cli.cli import main
sys.argv = ["attn", *sys.argv[2:]]
main()
"""
COMMAND = ["copy-task", "--engine", "fast", "--steps", "1", "--no-cache"]


def once(checkout: Path, scratch: Path, tag: str) -> dict:
    log = scratch / f"{tag}.json"
    env = dict(os.environ, PYTHONPATH=str(checkout))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, str(log), *COMMAND, "--out", str(scratch / tag)],
                          cwd=scratch, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"the command failed in {checkout}:\n{proc.stderr[-2000:]}")
    marks = json.loads(log.read_text())
    if "window" not in marks:
        sys.exit(f"no figure drawer ran in {checkout} (one CPU, not Linux?)")
    return {"window": marks["window"], "after run": marks["exit"] - marks["trained"], "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="another checkout to compare with")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    sides = [("this", ROOT), ("baseline", args.baseline.resolve())]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    times = {label: [] for label, _ in sides}
    with tempfile.TemporaryDirectory(prefix="attn-window-") as tmp:
        for i in range(args.rounds + 1):  # the first round warms caches up
            order = sides if i % 2 else sides[::-1]
            measured = {label: once(checkout, Path(tmp), f"{label}-{i}") for label, checkout in order}
            if i:
                for label, m in measured.items():
                    times[label].append(m)
                print(f"round {i}: " + "  ".join(
                    f"{label} window {m['window']:.3f} s, after run {m['after run']:.3f} s, wall {m['wall']:.3f} s"
                    for label, m in measured.items()), flush=True)
    for label, rounds in times.items():
        print(f"{label:<9} medians: " + ", ".join(
            f"{key} {statistics.median(r[key] for r in rounds):.3f} s" for key in ("window", "after run", "wall")))
    ratios = [a["window"] / b["window"] for a, b in zip(times["this"], times["baseline"])]
    print(f"window ratio this/baseline: median {statistics.median(ratios):.2f}, rounds "
          + " ".join(f"{r:.2f}" for r in ratios))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
