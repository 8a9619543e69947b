"""Benchmark: the copy-task fast engine against the text's way (exact engine, lengths in turn).

Side by side in one process:
  * exact: attn_cli.core.copy_train.train_and_evaluate for every (length, seed), one after
    another on one thread: what W9 2.3's program does (its numbers, bit for bit);
  * fast:  attn_cli.core.copy_fast.run_fast on the same specs (C kernel on CPU, one thread
    per run, up to --threads at once).
Prints both wall times, the ratio, the machine load, the fast engine's GFLOP/s against a
measured single-core matmul peak, and the accuracies side by side (mean +- std over seeds).

    python benchmarks/copy_task_fast.py                       # the full table, seed 0 (~10 min)
    python benchmarks/copy_task_fast.py --steps 300           # a short run
    python benchmarks/copy_task_fast.py --seeds 0 1 2 3 4 --exact-seeds 0
    python benchmarks/copy_task_fast.py --seeds 0 1 2 3 4 --steps 500   # 5-seed statistics

FLOPs are counted on the program's formulation (copy_fast.step_flops): every matmul of a
training step, forward + backward = 3 x forward, attention twice per decoder step.

First, per kernel variant (avx512 and avx2 where the CPU runs them, interleaved in this
process, one thread): per length the step's FLOPs, the bytes of its work space (saved
activations, scratch) and of parameters + gradient + Adam moments, the CPU time per step,
GFLOP/s per busy core and its share of the single-core sgemm peak (torch.mm, one thread,
2048^2 float32, measured here).  --kernel-only stops after that table.

    python benchmarks/copy_task_fast.py --kernel-only --steps 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from attn_cli.core.copy_fast import available_cpus, run_fast, step_flops
from attn_cli.core.copy_spec import RunSpec


def load() -> str:
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load average unknown"


def matmul_peak(n: int = 2048, reps: int = 5) -> float:
    """Single-thread float32 matmul GFLOP/s (best of reps, on this thread's CPU time: the same
    clock as the kernel's GFLOP/s per busy core, so a loaded machine moves neither)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        best = float("inf")
        for _ in range(reps):
            t = time.thread_time()
            a @ b
            best = min(best, time.thread_time() - t)
        return 2 * n**3 / best / 1e9
    finally:
        torch.set_num_threads(saved)


def kernel_variants() -> list[str]:
    """The kernel variants this CPU runs, widest first."""
    from attn_cli.core import numerics
    from attn_cli.core.copy_fast import kernel

    flags = numerics.cpu_flags()
    return [v for v in ("avx512", "avx2") if numerics.is_x86_64() and kernel.VARIANT_NEEDS[v] <= flags]


def kernel_step_seconds(lib, spec, steps: int) -> float:
    """CPU seconds per training step of ``lib`` (one thread, ``steps`` steps in one call)."""
    from attn_cli.core.copy_fast import init_run, kernel

    flat, gen = init_run(spec)
    params = flat.float().contiguous()
    grad, m1, m2 = torch.zeros_like(params), torch.zeros_like(params), torch.zeros_like(params)
    B, T, H = spec.batch_size, spec.length, spec.hidden
    src = torch.randint(0, 10, (steps * B, T), generator=gen)
    losses = torch.empty(steps)
    off = kernel.offsets(lib, spec.model, H)
    cpu = time.thread_time()
    lib.train_steps(
        params.data_ptr(),
        grad.data_ptr(),
        m1.data_ptr(),
        m2.data_ptr(),
        0,
        src.data_ptr(),
        steps,
        B,
        T,
        H,
        int(spec.model == "attention"),
        float(spec.lr),
        float(spec.clip),
        losses.data_ptr(),
        off.data_ptr(),
    )
    return (time.thread_time() - cpu) / steps


def kernel_table(peak: float, lengths, model: str, hidden: int, steps: int, rounds: int = 5) -> tuple[dict, float]:
    """Per variant and length: FLOPs and bytes per step, GFLOP/s per busy core, share of peak.

    Each round measures every (variant, length) once and the sgemm peak once, so the kernel's
    cells and the peak are each the best of the same number of tries (``rounds``), taken at the
    same moments: on a shared machine a neighbour's load moves both, and a peak that is the best
    of many more tries than the kernel (as before: two per length per round) judges the kernel
    by the machine's best moment against its own typical one.  ``peak`` (measured before, as
    the header line prints it) is not part of the ratio.  Returns the table and that peak."""
    from attn_cli.core.copy_fast import kernel

    variants = kernel_variants()
    libs = {v: kernel.load_variant(v) for v in variants}
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    out: dict = {}
    print(
        f"kernel variants side by side ({', '.join(variants) or 'none'}; best of {rounds} rounds, each "
        f"round every length and variant once, one thread, {steps} steps, and the sgemm peak once), {load()}"
    )
    try:
        specs = {L: RunSpec(model=model, length=L, seed=0, steps=steps, hidden=hidden) for L in lengths}
        best = {(v, L): float("inf") for v in variants for L in lengths}
        peak = 0.0
        for _ in range(rounds):
            for L in lengths:
                n = max(5, steps * 8 // max(L, 8))  # about the same time per length
                for v in variants:
                    best[v, L] = min(best[v, L], kernel_step_seconds(libs[v], specs[L], n))
            peak = max(peak, matmul_peak(reps=1))
        for L in lengths:
            spec = specs[L]
            flops = step_flops(model, L, hidden, spec.batch_size)
            for v in variants:
                lib = libs[v]
                work = 4 * lib.work_floats(spec.batch_size, L, hidden, int(model == "attention"))
                params = 4 * 4 * lib.param_count(hidden, int(model == "attention"))  # params, grad, m1, m2
                out.setdefault(v, {})[L] = {
                    "flops": flops,
                    "work_bytes": work,
                    "param_bytes": params,
                    "seconds": best[v, L],
                    "gflops": flops / best[v, L] / 1e9,
                }
        print(f"single-core sgemm peak, best over the rounds: {peak:.1f} GFLOP/s")
        print("variant  length  MFLOP/step  work MB  param MB  ms/step  GFLOP/s/core  share of peak")
        for L in lengths:
            for v in variants:
                r = out[v][L]
                r["share"] = r["gflops"] / peak
                print(
                    f"{v:7s}  {L:6d}  {r['flops'] / 1e6:10.1f}  {r['work_bytes'] / 1e6:7.2f}  "
                    f"{r['param_bytes'] / 1e6:8.3f}  {r['seconds'] * 1e3:7.3f}  {r['gflops']:12.1f}  {r['share']:13.0%}"
                )
        for v in variants:  # the whole table: FLOPs over time, as the end-to-end run weights it
            total_f = sum(r["flops"] for r in out[v].values())
            total_s = sum(r["seconds"] for r in out[v].values())
            print(
                f"{v:7s}  all lengths (one step each): {total_f / total_s / 1e9:.1f} GFLOP/s per busy core = "
                f"{total_f / total_s / 1e9 / peak:.0%} of the peak"
            )
    finally:
        torch.set_num_threads(saved)
    return out, peak


def run_exact(specs):
    from attn_cli.core.copy_train import train_and_evaluate  # the exact engine: the program's loop

    out = []
    for spec in specs:
        t = time.perf_counter()
        o = train_and_evaluate(spec)
        print(
            f"  exact  length {spec.length:3d} seed {spec.seed}: {time.perf_counter() - t:7.1f} s  "
            f"{o.teacher_forced:.3f} {o.free_running:.3f} {o.exact:.3f}",
            file=sys.stderr,
            flush=True,
        )
        out.append(o)
    return out


def mean_std(values):
    m = statistics.fmean(values)
    s = statistics.stdev(values) if len(values) > 1 else 0.0
    return m, s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--lengths", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument(
        "--exact-seeds",
        type=int,
        nargs="*",
        default=None,
        help="seeds for the exact baseline (default: all of --seeds; none: skip it)",
    )
    ap.add_argument("--model", choices=["attention", "plain"], default="attention")
    ap.add_argument("--hidden-size", "--hidden", dest="hidden_size", type=int, default=32, help="GRU hidden size")
    ap.add_argument("--threads", type=int, default=None, help="fast engine threads (default: CPUs)")
    ap.add_argument("--backend", choices=["auto", "kernel", "torch"], default="auto")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--kernel-only", action="store_true", help="only the per-variant kernel table")
    args = ap.parse_args(argv)

    def spec(length, seed):
        return RunSpec(model=args.model, length=length, seed=seed, steps=args.steps, hidden=args.hidden_size)

    fast_specs = [spec(L, s) for L in args.lengths for s in args.seeds]
    exact_seeds = args.seeds if args.exact_seeds is None else args.exact_seeds
    exact_specs = [spec(L, s) for L in args.lengths for s in exact_seeds]
    threads = args.threads or available_cpus()

    print(
        f"copy-task benchmark: model {args.model}, lengths {args.lengths}, seeds {args.seeds}, "
        f"steps {args.steps}, hidden {args.hidden_size}; torch {torch.__version__}, {available_cpus()} CPUs"
    )
    peak = matmul_peak()
    print(
        f"single-core sgemm peak (torch.mm 2048^2 float32, 1 thread, torch ISA "
        f"{torch.backends.cpu.get_cpu_capability()}): {peak:.1f} GFLOP/s"
    )
    variants, peak = kernel_table(peak, args.lengths, args.model, args.hidden_size, min(args.steps, 100))
    if args.kernel_only:
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"peak_gflops": peak, "variants": variants}, fh, indent=1)
        return 0

    single_wall = None
    if len(args.seeds) > 1 and args.seeds[0] in exact_seeds:
        print(f"[fast]  seed {args.seeds[0]} alone, start, {load()}", flush=True)
        t0 = time.perf_counter()
        run_fast([spec(L, args.seeds[0]) for L in args.lengths], threads=threads, backend=args.backend)
        single_wall = time.perf_counter() - t0
        print(f"[fast]  seed {args.seeds[0]} alone: {single_wall:.1f} s wall; end, {load()}", flush=True)

    from attn_cli.core.copy_fast import kernel

    kernel.load()  # built (or read from the cache) before the clock starts: a build is once per source
    print(f"[fast]  kernel variant {kernel.kernel_isa() or 'none: ' + str(kernel.load_error())}", flush=True)
    print(f"[fast]  start, {load()}", flush=True)
    cpu0, t0 = time.process_time(), time.perf_counter()
    fast = run_fast(fast_specs, threads=threads, backend=args.backend)
    fast_wall, fast_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(f"[fast]  {fast_wall:.1f} s wall, {fast_cpu:.1f} s CPU, {threads} threads; end, {load()}", flush=True)

    exact, exact_wall = [], None
    if exact_specs:
        print(f"[exact] start ({len(exact_specs)} runs one after another, 1 thread), {load()}", flush=True)
        t0 = time.perf_counter()
        exact = run_exact(exact_specs)
        exact_wall = time.perf_counter() - t0
        print(f"[exact] {exact_wall:.1f} s wall; end, {load()}", flush=True)

    flops = sum(s.steps * step_flops(s.model, s.length, s.hidden, s.batch_size) for s in fast_specs)
    print()
    print(f"training FLOPs (program count, fwd+bwd): {flops / 1e9:.1f} GFLOP")
    print(
        f"fast engine: {flops / fast_wall / 1e9:.1f} GFLOP/s aggregate over {threads} threads, "
        f"{flops / fast_cpu / 1e9:.1f} GFLOP/s per busy core = {flops / fast_cpu / 1e9 / peak:.0%} of the "
        f"measured single-core peak"
    )
    if exact_wall is not None:
        per_run_exact = exact_wall / len(exact_specs)
        per_run_fast_equiv = fast_wall / len(fast_specs)
        print(
            f"exact (text's way): {exact_wall:.1f} s for {len(exact_specs)} runs; "
            f"{flops / len(fast_specs) * len(exact_specs) / exact_wall / 1e9:.1f} GFLOP/s"
        )
        if len(exact_specs) == len(fast_specs):
            print(f"RATIO fast / exact wall time, same runs: {fast_wall / exact_wall:.3f}")
        else:
            print(
                f"RATIO per run (fast {per_run_fast_equiv:.1f} s / exact {per_run_exact:.1f} s): "
                f"{per_run_fast_equiv / per_run_exact:.3f}"
            )
        one_table = exact_wall / len(exact_seeds)
        if single_wall is not None:
            exact_first = sum(o.seconds for o in exact if o.spec.seed == args.seeds[0])
            print(
                f"RATIO one table (seed {args.seeds[0]}): fast {single_wall:.1f} s / exact {exact_first:.1f} s = "
                f"{single_wall / exact_first:.3f}"
            )
        print(
            f"fast, {len(args.seeds)} seeds: {fast_wall:.1f} s vs exact one seed {one_table:.1f} s: "
            f"{fast_wall / one_table:.3f}"
        )

    print()
    print(
        "length  metric          exact mean +- std (n)        fast mean +- std (n)      fast within exact mean +- 2 std"
    )
    for L in args.lengths:
        for metric in ("teacher_forced", "free_running", "exact"):
            f_vals = [getattr(o, metric) for o in fast if o.spec.length == L]
            e_vals = [getattr(o, metric) for o in exact if o.spec.length == L]
            fm, fs = mean_std(f_vals)
            line = f"{L:6d}  {metric:14s}  "
            if e_vals:
                em, es = mean_std(e_vals)
                verdict = ("yes" if abs(fm - em) <= 2 * es + 1e-12 else "NO") if len(e_vals) > 1 else "-"
                line += f"{em:.4f} +- {es:.4f} ({len(e_vals)})      "
            else:
                line += " " * 29
                verdict = "-"
            line += f"{fm:.4f} +- {fs:.4f} ({len(f_vals)})      {verdict}"
            print(line)
    print()
    print("per run: length seed | exact tf free exact | fast tf free exact")
    for o in fast:
        e = next((x for x in exact if x.spec == o.spec), None)
        es = f"{e.teacher_forced:.3f} {e.free_running:.3f} {e.exact:.3f}" if e else "  -     -     -  "
        print(
            f"  {o.spec.length:4d} {o.spec.seed:4d} | {es} | {o.teacher_forced:.3f} {o.free_running:.3f} {o.exact:.3f}"
        )

    if args.json:
        rows = [
            {
                "engine": o.engine,
                "model": o.spec.model,
                "length": o.spec.length,
                "seed": o.spec.seed,
                "steps": o.spec.steps,
                "teacher_forced": o.teacher_forced,
                "free_running": o.free_running,
                "exact": o.exact,
                "seconds": o.seconds,
            }
            for o in list(fast) + list(exact)
        ]
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "fast_wall": fast_wall,
                    "fast_cpu": fast_cpu,
                    "exact_wall": exact_wall,
                    "fast_single_wall": single_wall,
                    "threads": threads,
                    "peak_gflops": peak,
                    "flops": flops,
                    "variants": variants,
                    "rows": rows,
                },
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
