"""Benchmark: the exact copy-task engine, sequential (the text's way) vs ``attn copy-task --jobs 2``.

The baseline runs the lengths one after another in one new Python process (startup and
torch import included), one intra-op thread, exactly as the W9 2.3 program does: the exact
engine with ``program_layout=True``, the program's strided encoder states, module calls and
``torch.optim.Adam`` calls (which import torch._dynamo), op for op the program, whose code is
not in the repository.  Then ``attn copy-task`` runs the same configuration through the real
entry point with ``--jobs N --no-cache``.  The script checks that the numbers are identical
and prints both wall times and their ratio (target on the 2-core machine: <= 0.55).  With
``--rounds N`` both sides run N times, the one going first alternating from round to round
(on this machine the command run second in a round was often the slower), and the ratio is
the median of the rounds' ratios.

    python benchmarks/copy_task_exact.py                 # the full table: ~12+ minutes
    python benchmarks/copy_task_exact.py --steps 200     # a shorter check of the same thing
    python benchmarks/copy_task_exact.py --steps 800 --rounds 4   # the median of 4 rounds' ratios

The machine may be shared: the load average is printed before and after each part.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def sequential_child(lengths, steps, model) -> None:
    """In a fresh process, as the text's program runs: import torch, then the lengths in turn."""
    import torch

    from attn_cli.core.copy_spec import RunSpec
    from attn_cli.core.copy_train import train_and_evaluate

    torch.set_num_threads(1)
    models = ("attention", "plain") if model == "both" else (model,)
    for name in models:  # the text's program, then the same program without attention
        for length in lengths:
            o = train_and_evaluate(RunSpec(model=name, length=length, steps=steps), program_layout=True)
            print(
                json.dumps(
                    {
                        "row": [name, length, o.teacher_forced, o.free_running, o.exact],
                        "seconds": o.seconds,
                        "cpu_seconds": o.cpu_seconds,
                    }
                ),
                flush=True,
            )


def pinned_env() -> dict:
    """This environment with attn's default numeric mode pinned, for both sides."""
    from attn_cli.core import numerics

    env = dict(os.environ)
    numerics.pin_environment(numerics.DEFAULT_MODE, env)
    return env


def sequential(lengths, steps, model) -> tuple[float, float, list[tuple]]:
    """The baseline: one new Python process (startup and torch import included, like the program),
    under the CPU kernels attn pins by default (portable mode): on a host where the native
    kernels differ (MKL's AVX-512 path on Intel) the program's numbers are the same only with them."""
    cmd = [
        sys.executable,
        __file__,
        "--sequential-child",
        "--steps",
        str(steps),
        "--model",
        model,
        "--lengths",
        *map(str, lengths),
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=pinned_env())
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"the sequential baseline failed:\n{proc.stderr}")
    rows, cpu = [], 0.0
    for line in proc.stdout.splitlines():
        item = json.loads(line)
        rows.append(tuple(item["row"]))
        cpu += item["cpu_seconds"]
        m, L, a, b, c = item["row"]
        print(
            f"  sequential  {m} L{L:<3} {a:.3f} {b:.3f} {c:.3f}  {item['seconds']:6.1f} s  "
            f"({item['cpu_seconds']:.1f} s CPU)"
        )
    return wall, cpu, rows


def parallel(lengths, steps, model, jobs, extra=()) -> tuple[float, float, list[tuple]]:
    attn = shutil.which("attn") or os.path.join(os.path.dirname(sys.executable), "attn")
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            attn,
            "copy-task",
            "--lengths",
            *map(str, lengths),
            "--steps",
            str(steps),
            "--model",
            model,
            "--jobs",
            str(jobs),
            "--no-cache",
            "--json",
            "--out",
            out,
            *extra,
        ]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=pinned_env())
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"attn copy-task failed:\n{proc.stderr}")
    data = json.loads(proc.stdout)
    rows = [(r["model"], r["length"], r["teacher_forced"], r["free_running"], r["exact"]) for r in data["rows"]]
    # the JSON keeps every wall-clock value under "timing" (the runs' seconds and CPU seconds among them)
    runs = data.get("timing", {}).get("runs") or data["runs"]
    cpu = sum(run["cpu_seconds"] for run in runs)  # the workers' CPU time, run by run
    for (m, L, a, b, c), run in zip(rows, runs):
        print(
            f"  attn --jobs {jobs} {m} L{L:<3} {a:.3f} {b:.3f} {c:.3f}  {run['seconds']:6.1f} s  "
            f"({run['cpu_seconds']:.1f} s CPU)"
        )
    return wall, cpu, rows


TARGET = 0.55  # the ratio on 2 cores


def _summary(ratios: list[float]) -> str:
    """The median ratio, and with several rounds each round's and how many meet the target."""
    text = f"{statistics.median(ratios):.3f}"
    if len(ratios) > 1:
        met = sum(r <= TARGET for r in ratios)
        text += f" (rounds: {', '.join(f'{r:.3f}' for r in ratios)}; {met} of {len(ratios)} at or below {TARGET})"
    return text + f"  (target <= {TARGET})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--steps", type=int, default=2500, help="Adam steps per run (the text: 2500)")
    parser.add_argument(
        "--model",
        choices=("attention", "plain", "both"),
        default="attention",
        help="the text's program is the attention model",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds, each running both sides (the order alternating from round to round); "
        "the ratio is the median of the rounds' ratios",
    )
    parser.add_argument(
        "--no-figures-too",
        action="store_true",
        help="then run attn once more with --no-figures (the program prints its table and "
        "draws nothing; the five figures are attn's own) and print that ratio too",
    )
    parser.add_argument("--sequential-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sequential_child:
        sequential_child(args.lengths, args.steps, args.model)
        return

    print(f"copy task, exact engine: lengths {args.lengths}, {args.steps} steps, {args.model}, {args.rounds} round(s)")
    print(f"before: {load()}", flush=True)
    ratios, nofig_ratios, identical = [], [], True
    for r in range(args.rounds):
        print(f"round {r + 1}:", flush=True)
        sides = ["sequential", "parallel"] + (["nofig"] if args.no_figures_too else [])
        if r % 2:  # every other round the other way round, so a drift of the machine's speed cancels
            sides.reverse()
        walls = {}
        for side in sides:
            if side == "sequential":
                wall, cpu, rows = sequential(args.lengths, args.steps, args.model)
                print(
                    f"sequential (one new process, lengths one after another): {wall:.1f} s wall, "
                    f"{cpu:.1f} s CPU in the runs ({cpu / wall:.2f} cores busy);  {load()}",
                    flush=True,
                )
            else:
                extra = ["--no-figures"] if side == "nofig" else []
                wall, cpu, rows = parallel(args.lengths, args.steps, args.model, args.jobs, extra)
                print(
                    f"attn copy-task --jobs {args.jobs} --no-cache {''.join(e + ' ' for e in extra)}(whole command): "
                    f"{wall:.1f} s wall, {cpu:.1f} s CPU in the runs ({cpu / wall:.2f} cores busy);  {load()}",
                    flush=True,
                )
            walls[side] = (wall, sorted(rows))
        same = all(rows == walls["sequential"][1] for _, rows in walls.values())
        identical = identical and same
        ratios.append(walls["parallel"][0] / walls["sequential"][0])
        line = f"  round {r + 1}: numbers identical: {same}; ratio parallel / sequential {ratios[-1]:.3f}"
        if args.no_figures_too:
            nofig_ratios.append(walls["nofig"][0] / walls["sequential"][0])
            line += f", without figures {nofig_ratios[-1]:.3f}"
        print(line, flush=True)
    print(
        "(cores busy well below the job count means other processes held the CPUs: the ratio then "
        "measures the machine's load, not the engine)"
    )
    print(f"numbers identical: {identical}")
    print(f"ratio parallel / sequential: {_summary(ratios)}")
    if nofig_ratios:
        print(f"ratio parallel without figures / sequential: {_summary(nofig_ratios)}")
    if not identical:
        sys.exit("the numbers differ: the exact engine must not depend on the process layout")


if __name__ == "__main__":
    main()
