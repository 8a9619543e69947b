"""Benchmark: ``attn all`` (cold cache) against the texts' programs run one after another.

Side by side in one script:
  * ``attn all --out <fresh folder> --cache-dir <fresh folder>``: every experiment at its defaults, through the real
    entry point, nothing cached (the copy task trains what ``attn verify`` trains: --seed
    with the exact engine, the next 4 seeds with the fast one);
  * the texts' way: W9 2.3's program (the attention model at lengths 4, 8, 16, 32, one after
    another, one thread: the copy task's exact engine, which equals that program bit for
    bit), then every other block of the two texts (each catalogued, non-training experiment
    at its defaults), one after another in this process, one intra-op thread.

The baseline leaves out what no text's program runs: the plain "Week 8" model (W9 only
quotes its numbers; --with-plain adds it) and the D2L exercises (no program), while
``attn all`` does run both: the comparison is conservative.  Prints both wall times and the
ratio (target: <= 0.5).

    python benchmarks/attn_all.py             # full size: ~10+ minutes on a 2-core machine
    python benchmarks/attn_all.py --quick     # both sides at the experiments' quick sizes

The machine may be shared: the load average is printed before and after each part.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def load() -> str:
    try:
        return "load average {:.2f} {:.2f} {:.2f} on {} CPUs".format(*os.getloadavg(), os.cpu_count() or 0)
    except OSError:
        return "load average unknown"


def attn_all(quick: bool) -> tuple[float, dict]:
    attn = shutil.which("attn") or os.path.join(os.path.dirname(sys.executable), "attn")
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as fresh:  # a cold per-user cache too
        cmd = [attn, "all", "--out", out, "--cache-dir", os.path.join(fresh, "cache")] + (["--quick"] if quick else [])
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if not os.path.exists(os.path.join(out, "manifest.json")):  # exit 1 with a report: a failed check
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    return wall, manifest


def texts_programs(quick: bool, with_plain: bool) -> tuple[float, list[tuple[str, float]]]:
    import torch

    from attn_cli import experiment_registry
    from attn_cli.core.copy_spec import RunSpec
    from attn_cli.core.copy_train import train_and_evaluate

    torch.set_num_threads(1)
    registry = experiment_registry.Registry.load()
    parts: list[tuple[str, float]] = []
    start = time.perf_counter()

    copy = registry.by_artifact["w9-copy-task"]
    cfg = copy.config(quick=quick)  # only its sizes are used: steps, eval size, lengths
    models = ("attention", "plain") if with_plain else ("attention",)
    for model in models:
        for length in cfg.lengths:
            spec = RunSpec(
                model=model,
                length=length,
                steps=cfg.steps,
                hidden=cfg.hidden_size,
                batch_size=cfg.batch_size,
                lr=cfg.lr,
                eval_size=cfg.eval_size,
            )
            t0 = time.perf_counter()
            o = train_and_evaluate(spec)
            parts.append((f"W9 2.3 program, {model} L{length}", time.perf_counter() - t0))
            print(f"  {parts[-1][0]:<36} {parts[-1][1]:7.1f} s   free-running {o.free_running:.3f}", flush=True)

    for exp in registry.experiments:
        if exp.slow or not any(registry.checks_of(a) for a in exp.artifacts):
            continue  # the copy task (above) and the exercises (no published values: no program)
        t0 = time.perf_counter()
        exp.run(exp.config(quick=quick))
        parts.append((f"{exp.name}", time.perf_counter() - t0))
        print(f"  {parts[-1][0]:<36} {parts[-1][1]:7.1f} s", flush=True)
    return time.perf_counter() - start, parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="both sides at the experiments' quick sizes")
    parser.add_argument(
        "--with-plain", action="store_true", help="count the plain Week 8 model's runs in the baseline too"
    )
    args = parser.parse_args()

    print(f"attn all{' --quick' if args.quick else ''} (cold cache) vs the texts' programs one after another")
    print(f"before: {load()}", flush=True)
    all_wall, manifest = attn_all(args.quick)
    for name, seconds in manifest["timing"]["experiments"].items():
        print(f"  attn all: {name:<24} {seconds:7.1f} s")
    print(f"  attn all: checks {manifest['checks']}")
    print(f"attn all: {all_wall:.1f} s wall;  {load()}", flush=True)

    base_wall, _ = texts_programs(args.quick, args.with_plain)
    print(f"texts' programs, one after another: {base_wall:.1f} s;  {load()}")
    ratio = all_wall / base_wall
    print(f"ratio attn all / texts' programs = {ratio:.2f} (target <= 0.5): {'met' if ratio <= 0.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
