"""What portable numerics cost: the same copy-task runs with pinned AVX2 kernels and with the
host's native kernels, side by side (alternating, each in a fresh process, since the
kernels are chosen once per process).

    python benchmarks/numerics_cost.py [--steps 500] [--repeats 3]

Prints each mode's wall times, the median ratio portable / native, the kernels each child
really ran (torch's CPU capability) and whether the numbers differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = """
import json, sys, time
from attn_cli.core import numerics
numerics.apply(sys.argv[1])
from attn_cli.core.copy_spec import RunSpec
from attn_cli.core.copy_train import train_and_evaluate
runs = []
start = time.perf_counter()
for model, length in (("attention", 16), ("plain", 4)):
    o = train_and_evaluate(RunSpec(model=model, length=length, steps=int(sys.argv[2]), eval_size=200))
    runs.append([o.teacher_forced, o.free_running, o.exact, o.final_loss])
print(json.dumps({"seconds": time.perf_counter() - start, "isa": numerics.effective_isa(), "runs": runs}))
"""


def run_child(mode: str, steps: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATEN_", "MKL_CBWR", "ONEDNN_", "DNNL_"))}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(steps)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    times: dict[str, list[float]] = {"portable": [], "native": []}
    seen: dict[str, dict] = {}
    for _ in range(args.repeats):
        for mode in ("portable", "native"):  # alternate: drift on a noisy machine hits both
            out = run_child(mode, args.steps)
            times[mode].append(out["seconds"])
            seen[mode] = out
    for mode, ts in times.items():
        print(
            f"{mode:>8}: {seen[mode]['isa']:<7} kernels, "
            + ", ".join(f"{t:.2f}" for t in ts)
            + f" s (median {statistics.median(ts):.2f} s)"
        )
    ratio = statistics.median(times["portable"]) / statistics.median(times["native"])
    same = seen["portable"]["runs"] == seen["native"]["runs"]
    print(f"ratio portable / native (median): {ratio:.3f}")
    print(
        "numbers: "
        + (
            "identical (this host's native kernels are the AVX2 ones)"
            if same
            else "differ (this host's native kernels round differently)"
        )
    )


if __name__ == "__main__":
    main()
