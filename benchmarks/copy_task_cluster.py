"""Benchmark: the copy task's runs on a 2-worker loopback Dask cluster against the local pool.

Issue 16 asks that 32 seeds of the attention model at one length, through a 2-worker loopback
cluster (``dask scheduler`` + two ``dask worker --nthreads 1``), cost at most 1.1x the same
runs through the local pool (``--jobs 2``: two forkserver worker processes, one thread each).
This script starts that cluster on 127.0.0.1 (and stops it, by its process ids), its workers as
README recommends, ``--preload attn_cli.dask_worker`` (torch and the training code imported as
each worker starts, before it joins: ``--no-preload`` starts them plain, as before, so that
each imports torch on its first run), then trains the same runs alternately on each side,
through the library path every command takes (:func:`attn_cli.experiments.copy_task.run`, no
cache), so that a load change on a shared machine hits both sides alike:

    local, cluster, local, cluster, ...   (--rounds pairs; the cluster's workers stay up between
                                           rounds, as a real cluster's do; the local pool is
                                           started by each run, as the command starts it)

It prints each side's wall times, the ratio cluster/local per round and of the medians, and
checks that every run's numbers (accuracies, final loss, ISA) are identical on both sides.
Numerics are pinned as attn pins them by default (portable). Exit 1 if the numbers differ.

    python benchmarks/copy_task_cluster.py                        # 32 seeds, length 8, 200 steps, 3 rounds
    python benchmarks/copy_task_cluster.py --steps 100 --no-preload  # workers import torch on their first run
    python benchmarks/copy_task_cluster.py --seeds 0-31 --length 16 --steps 300 --rounds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load() -> str:
    try:
        return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load unknown"


class Loopback:
    """``dask scheduler`` and ``workers`` single-thread ``dask worker`` processes on 127.0.0.1."""

    def __init__(self, tmp: Path, workers: int, preload: bool = True):
        self.tmp, self.procs = tmp, []
        dask = Path(sys.executable).parent / "dask"
        file = tmp / "scheduler.json"
        self._start(
            [
                str(dask),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(file),
            ]
        )
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(file.read_text())["address"]
        for _ in range(workers):
            self._start(
                [
                    str(dask),
                    "worker",
                    self.address,
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                    *(["--preload", "attn_cli.dask_worker", "--attn-numerics", "portable"] if preload else []),
                ]
            )
        import distributed

        with distributed.Client(self.address, timeout=30) as client:
            client.wait_for_workers(workers, timeout=120)

    def _start(self, argv) -> None:
        with open(self.tmp / f"dask-{len(self.procs)}.log", "w") as log:
            self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def numbers(result) -> list:
    """Every run's numbers, in plan order (floats compared exactly)."""
    return [
        (
            r["model"],
            r["length"],
            r["seed"],
            r["engine"],
            r["teacher_forced"],
            r["free_running"],
            r["exact"],
            r["diagonal"],
        )
        for r in result.rows
    ] + [(r["seed"], r["final_loss"], r["isa"], r["backend"]) for r in result.runs]


def main(argv=None) -> int:
    from attn_cli.cli.types import SEEDS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--seeds",
        nargs="+",
        default=["0-31"],
        metavar="K",
        help="seeds as `attn copy-task --seeds` takes them: listed or ranges (default: 0-31)",
    )
    ap.add_argument("--length", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--engine", choices=["exact", "fast"], default="exact")
    ap.add_argument("--rounds", type=int, default=3, help="pairs of (local, cluster) runs, alternating")
    ap.add_argument(
        "--no-preload",
        dest="preload",
        action="store_false",
        help="start the workers without attn's preload: each imports torch on its first run",
    )
    ap.add_argument("--workers", type=int, default=2, help="cluster workers, and local --jobs")
    args = ap.parse_args(argv)
    seeds = tuple(dict.fromkeys(s for value in args.seeds for s in SEEDS.convert(value, None, None)))

    from attn_cli.core import numerics

    numerics.apply("portable")  # before torch loads, as the CLI does; the workers pin it themselves
    import torch

    from attn_cli.experiments import copy_task as exp

    config = exp.Config(
        model="attention", lengths=(args.length,), seeds=seeds, steps=args.steps, engine=args.engine, jobs=args.workers
    )
    workers = "--nthreads 1, --preload attn_cli.dask_worker" if args.preload else "--nthreads 1, no preload"
    print(
        f"copy task: {len(seeds)} seeds of the attention model, length {args.length}, {args.steps} steps, "
        f"{args.engine} engine; local pool --jobs {args.workers} vs {args.workers}-worker loopback Dask "
        f"cluster ({workers}); torch {torch.__version__}; {os.cpu_count()} CPUs; {load()}",
        flush=True,
    )
    times: dict[str, list[float]] = {"local": [], "cluster": []}
    results: dict[str, list] = {"local": [], "cluster": []}
    with tempfile.TemporaryDirectory(prefix="attn-bench-dask-") as tmp:
        started = time.perf_counter()
        cluster = Loopback(Path(tmp), args.workers, args.preload)
        print(f"cluster up at {cluster.address} in {time.perf_counter() - started:.1f} s", flush=True)
        try:
            for r in range(args.rounds):
                for side in ("local", "cluster"):
                    cfg = (
                        config
                        if side == "local"
                        else dataclasses.replace(config, scheduler=cluster.address, scheduler_from="benchmark")
                    )
                    t0 = time.perf_counter()
                    result = exp.run(cfg)
                    times[side].append(time.perf_counter() - t0)
                    results[side].append(numbers(result))
                    print(f"round {r + 1}: {side:7s} {times[side][-1]:6.1f} s  ({load()})", flush=True)
        finally:
            cluster.stop()
    same = all(n == results["local"][0] for side in results for n in results[side])
    local, remote = statistics.median(times["local"]), statistics.median(times["cluster"])
    ratios = [c / lo for c, lo in zip(times["cluster"], times["local"])]
    first = (
        "the workers imported torch as they started, untimed"
        if args.preload
        else "the workers import torch on their first run"
    )
    later = f"; later rounds: median {statistics.median(ratios[1:]):.2f}x" if len(ratios) > 1 else ""
    print(f"\nper round cluster/local: {', '.join(f'{r:.2f}x' for r in ratios)} (round 1: {first}{later})")
    print(
        f"median: local {local:.1f} s, cluster {remote:.1f} s; ratio of the medians {remote / local:.2f}x "
        "(target <= 1.1x)"
    )
    print(f"numbers identical on both sides and in every round: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
