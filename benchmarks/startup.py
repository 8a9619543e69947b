"""Benchmark: the fixed cost of a command, and of `attn --help`, against another checkout.

Each case runs as a new process (``python -m attn_cli ...``) from a neutral folder, with the
checkout on ``PYTHONPATH``; this checkout and the baseline (``--baseline DIR``, e.g. a
``git archive REV | tar -x -C DIR`` of an older revision) alternate, ``--repeats`` times each
after one warm-up, and the medians of wall and CPU seconds (the child's user + system time)
are printed with their ratio.  The cases:

  help       attn --help
  computed   attn copy-task --engine fast --steps 1 --no-cache, a fresh --out each time
  cached     the same with its runs cached, a fresh --out (the figures are drawn)
  kept       the same into one --out (runs cached, figures kept)
  nofig      the computed case with --no-figures (tables and data files only); this checkout
             only where the baseline has no --no-figures (--baseline-nofig to include it)
  training   the floor: a Python process that pins the numerics, imports torch and trains
             and evaluates the same 8 runs through the library (no CLI, no table, no file),
             and exits as attn does (``gc.freeze()``: the collector's last passes over torch's
             objects, 0.3 s, are not counted as attn's gain)

With ``training`` among the cases, each command case is also printed as "beyond training":
the median over the rounds of its wall minus the training case's in the same round (the
fast engine's command should pay at most 1 s beyond training at --steps 1: issue 17).  Every
round runs every case on every side in turn, so all are measured at the same moments.

On a loaded machine quote the CPU seconds: wall time then measures the other processes.

    python benchmarks/startup.py --baseline /tmp/base --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = ["copy-task", "--engine", "fast", "--steps", "1"]


def once(checkout: Path, args: list[str], scratch: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``python -m attn_cli ARGS`` with ``checkout`` on the path."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    start = time.perf_counter()
    argv = [sys.executable, *args] if args[0] == "-c" else [sys.executable, "-m", "attn_cli", *args]
    proc = subprocess.Popen(argv, cwd=scratch, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed in {checkout}:\n{proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


TRAINING = (
    "from attn_cli.core import numerics\n"
    "numerics.apply('portable')\n"
    "from attn_cli.experiments import copy_task\n"
    "copy_task.run(copy_task.Config(engine='fast', steps=1))\n"
    "import gc\n"
    "gc.freeze()\n"
)  # exits as attn does: torch's objects are not collected on the way out


def case_args(case: str, scratch: Path, label: str, i: int) -> list[str]:
    if case == "training":
        return ["-c", TRAINING]
    if case == "nofig":
        return [*FAST, "--no-cache", "--no-figures", "--out", str(scratch / f"nofig-{label}-{i}")]
    if case == "help":
        return ["--help"]
    if case == "kept":
        return [*FAST, "--out", str(scratch / f"kept-{label}")]
    fresh = str(scratch / f"{case}-{label}-{i}")
    return [*FAST, "--no-cache", "--out", fresh] if case == "computed" else [*FAST, "--out", fresh]


def sides_for(case: str, sides, args):
    """The sides a case runs on: nofig on this checkout only unless the baseline has --no-figures."""
    return sides[:1] if case == "nofig" and not args.baseline_nofig else sides


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to compare with")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--cases",
        nargs="+",
        default=["help", "computed", "cached", "kept"],
        choices=["help", "computed", "cached", "kept", "nofig", "training"],
    )
    ap.add_argument("--baseline-nofig", action="store_true", help="the baseline has --no-figures too")
    args = ap.parse_args()
    sides = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    cases = sorted(args.cases, key=lambda c: c != "training")  # the floor first
    with tempfile.TemporaryDirectory(prefix="attn-startup-") as tmp:
        scratch = Path(tmp)
        # every round runs every case on every side, so the floor and the commands are measured
        # at the same moments: this machine's speed drifts from minute to minute, and a case
        # measured as a block after the floor's block moved "beyond training" by up to 1 s
        times = {case: {label: [] for label, _ in sides_for(case, sides, args)} for case in cases}
        for i in range(args.repeats + 1):  # the first round warms caches (and the kernel) up
            for case in cases:
                for label, checkout in sides_for(case, sides, args):
                    measured = once(checkout, case_args(case, scratch, label, i), scratch)
                    if i:
                        times[case][label].append(measured)
        for case in cases:
            medians = {
                label: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
                for label, t in times[case].items()
            }
            line = "  ".join(f"{label} {w:.3f} s wall, {c:.3f} s CPU" for label, (w, c) in medians.items())
            if "baseline" in medians:
                (w, c), (bw, bc) = medians["this"], medians["baseline"]
                line += f"  ratio wall {w / bw:.2f}, CPU {c / bc:.2f}"
            if "training" in times and case in ("computed", "nofig", "cached"):
                beyond = {
                    label: statistics.median(w - f for (w, _), (f, _) in zip(t, times["training"][label]))
                    for label, t in times[case].items()
                    if label in times["training"]
                }
                line += (
                    "  (beyond training, median of the rounds' differences: "
                    + ", ".join(f"{label} {b:.2f} s" for label, b in beyond.items())
                    + ")"
                )
            print(f"{case:<9} {line}", flush=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
