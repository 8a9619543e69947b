"""Benchmark: do the copy task's two engines have the same seed distribution (mean AND spread)?

`attn verify` may take extra seeds from the fast engine only if seed K of the fast engine
is a draw from the same distribution as seed K of the exact engine.  This script trains
seeds 0..N-1 with both engines at one setting and compares, per metric (teacher-forced,
free-running, exact-sequence accuracy):

  * mean +- std (sample std, n-1) of each engine;
  * Welch's t-test (means) and the Brown-Forsythe test (Levene's test about the medians;
    spreads), with their p-values from the t and F distributions;
  * permutation p-values of the same two statistics (no normality assumed);
  * the ratio of the stds with its 95% interval (F distribution);
  * the same-seed differences |fast - exact|: from the same seed both engines train the
    same trajectory until rounding differences, amplified where training is sensitive,
    part them (at length 32 near step 730, as a one-ulp change of one initial weight does
    in the exact engine itself; see copy_task_divergence.py); tiny in short or easy runs,
    a fraction of the seed std after (same-seed correlation 0.9 at the text's setting).

The exact runs are spread over --jobs worker processes (one thread each, no number
changes); the fast runs use run_fast with --jobs threads.  Numerics are pinned to AVX2 as
in `attn`'s default portable mode (``--numerics native``: the host's fastest kernels).

The seeds are given as ``attn copy-task --seeds`` takes them (the same parser): listed, or as
inclusive ranges.

    python benchmarks/copy_task_seeds.py            # length 16, 1500 steps, seeds 0-15 (~3.5 min on 2 cores)
    python benchmarks/copy_task_seeds.py --length 32 --steps 2500 --seeds 0-63 --jobs 16
        # the text's setting (~10 min on 16 cores)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

PORTABLE = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
METRICS = ("teacher_forced", "free_running", "exact")


# ---------------------------------------------------------------------------------------
# two-sample statistics (numpy only; scipy is not a dependency)
# ---------------------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def f_upper(f: float, d1: float, d2: float) -> float:
    """P(F >= f) for the F distribution with (d1, d2) degrees of freedom."""
    if f <= 0.0:
        return 1.0
    return betainc(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f))


def f_quantile(q: float, d1: float, d2: float) -> float:
    """The F(d1, d2) quantile: the f with P(F <= f) = q (bisection on the log scale)."""
    lo, hi = 1e-9, 1e9
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if 1.0 - f_upper(mid, d1, d2) < q:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def welch(x, y) -> tuple[float, float, float]:
    """Welch's t-test: (t, df, two-sided p) for mean(x) - mean(y)."""
    import numpy as np

    x, y = np.asarray(x, float), np.asarray(y, float)
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se2 = vx + vy
    if se2 == 0.0:
        return 0.0, float(len(x) + len(y) - 2), 1.0 if x.mean() == y.mean() else 0.0
    t = (x.mean() - y.mean()) / math.sqrt(se2)
    df = se2**2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return float(t), float(df), t_two_sided(float(t), float(df))


def brown_forsythe(x, y) -> tuple[float, float]:
    """Brown-Forsythe test of equal spread (Levene's test on deviations from the medians): (F, p)."""
    import numpy as np

    zx = np.abs(np.asarray(x, float) - np.median(x))
    zy = np.abs(np.asarray(y, float) - np.median(y))
    n1, n2 = len(zx), len(zy)
    z = np.concatenate([zx, zy])
    between = n1 * (zx.mean() - z.mean()) ** 2 + n2 * (zy.mean() - z.mean()) ** 2  # 1 d.o.f.
    within = ((zx - zx.mean()) ** 2).sum() + ((zy - zy.mean()) ** 2).sum()  # n1 + n2 - 2 d.o.f.
    if within == 0.0:
        return (0.0, 1.0) if between == 0.0 else (math.inf, 0.0)
    f = between / (within / (n1 + n2 - 2))
    return float(f), f_upper(float(f), 1.0, float(n1 + n2 - 2))


def permutation_p(x, y, rounds: int = 20000, seed: int = 0) -> tuple[float, float]:
    """Permutation p-values (two-sided) of |mean difference| and of the Brown-Forsythe F."""
    import numpy as np

    rng = np.random.default_rng(seed)
    both, n1 = np.concatenate([np.asarray(x, float), np.asarray(y, float)]), len(x)
    d0, f0 = abs(np.mean(x) - np.mean(y)), brown_forsythe(x, y)[0]
    hits_d = hits_f = 0
    for _ in range(rounds):
        p = rng.permutation(both)
        a, b = p[:n1], p[n1:]
        hits_d += abs(a.mean() - b.mean()) >= d0 - 1e-15
        hits_f += brown_forsythe(a, b)[0] >= f0 - 1e-12
    return (hits_d + 1) / (rounds + 1), (hits_f + 1) / (rounds + 1)


def std_ratio_interval(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """std(x) / std(y) and its `level` interval under normality (F distribution)."""
    import numpy as np

    sx, sy = np.std(x, ddof=1), np.std(y, ddof=1)
    if sy == 0.0:
        return math.inf, math.inf, math.inf
    r2, d1, d2 = (sx / sy) ** 2, len(x) - 1, len(y) - 1
    lo = r2 / f_quantile(1 - (1 - level) / 2, d1, d2)
    hi = r2 / f_quantile((1 - level) / 2, d1, d2)
    return float(sx / sy), math.sqrt(lo), math.sqrt(hi)


# ---------------------------------------------------------------------------------------
# the runs
# ---------------------------------------------------------------------------------------


def _exact_one(spec):
    from attn_cli.core.copy_train import train_and_evaluate

    return train_and_evaluate(spec)


def run_exact(specs, jobs: int):
    """The exact engine, up to ``jobs`` runs at once in worker processes (each on one thread)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    out = [None] * len(specs)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_exact_one, s): i for i, s in enumerate(specs)}
        for fut in as_completed(futures):
            o = out[futures[fut]] = fut.result()
            print(
                f"  exact seed {o.spec.seed}: {o.teacher_forced:.4f} {o.free_running:.4f} {o.exact:.4f} "
                f"({o.seconds:.0f} s)",
                flush=True,
            )
    return out


def _span(seeds: list[int]) -> str:
    """ "0-63" for consecutive seeds, else the list."""
    consecutive = seeds == list(range(seeds[0], seeds[0] + len(seeds)))
    return f"{seeds[0]}-{seeds[-1]}" if consecutive and len(seeds) > 1 else " ".join(map(str, seeds))


def load() -> str:
    try:
        return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load unknown"


def compare(exact, fast, rounds: int) -> list[dict]:
    """One row per metric: the statistics above."""
    import numpy as np

    rows = []
    for metric in METRICS:
        e = [getattr(o, metric) for o in exact]
        f = [getattr(o, metric) for o in fast]
        t, df, p_t = welch(f, e)
        bf, p_bf = brown_forsythe(f, e)
        pp_mean, pp_spread = permutation_p(f, e, rounds)
        ratio, lo, hi = std_ratio_interval(f, e)
        paired = np.asarray(f) - np.asarray(e)
        rows.append(
            {
                "metric": metric,
                "exact_mean": float(np.mean(e)),
                "exact_std": float(np.std(e, ddof=1)),
                "fast_mean": float(np.mean(f)),
                "fast_std": float(np.std(f, ddof=1)),
                "welch_t": t,
                "welch_df": df,
                "welch_p": p_t,
                "bf_F": bf,
                "bf_p": p_bf,
                "perm_p_mean": pp_mean,
                "perm_p_spread": pp_spread,
                "std_ratio": ratio,
                "std_ratio_lo": lo,
                "std_ratio_hi": hi,
                "paired_mean_abs": float(np.mean(np.abs(paired))),
                "paired_std": float(np.std(paired, ddof=1)),
            }
        )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["attention", "plain"], default="attention")
    ap.add_argument("--length", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--hidden-size", "--hidden", dest="hidden_size", type=int, default=32, help="GRU hidden size")
    ap.add_argument(
        "--seeds",
        nargs="+",
        default=["0-15"],
        metavar="K",
        help="seeds for each engine, as `attn copy-task --seeds` takes them: listed or inclusive "
        "ranges (0-63); at least 3  (default: 0-15)",
    )
    ap.add_argument("--jobs", type=int, default=None, help="processes (exact) and threads (fast); default: CPUs")
    ap.add_argument("--backend", choices=["auto", "kernel", "torch"], default="auto", help="fast engine backend")
    ap.add_argument("--numerics", choices=["portable", "native"], default="portable")
    ap.add_argument("--permutations", type=int, default=20000)
    ap.add_argument("--json", default=None, help="also write runs and statistics to this file")
    args = ap.parse_args(argv)
    import click

    from attn_cli.cli.types import SEEDS

    try:
        seeds = list(dict.fromkeys(s for value in args.seeds for s in SEEDS.convert(value, None, None)))
    except click.BadParameter as exc:
        ap.error(f"--seeds: {exc.format_message()}")
    if len(seeds) < 3:
        ap.error("--seeds must name at least 3 seeds")
    if args.numerics == "portable":
        os.environ.update(PORTABLE)  # before torch loads; spawned workers inherit it

    import torch

    from attn_cli.core.copy_fast import available_cpus, run_fast
    from attn_cli.core.copy_spec import RunSpec

    jobs = args.jobs or available_cpus()
    specs = [
        RunSpec(model=args.model, length=args.length, seed=k, steps=args.steps, hidden=args.hidden_size) for k in seeds
    ]
    print(
        f"copy-task seed distributions: {args.model}, length {args.length}, {args.steps} steps, hidden "
        f"{args.hidden_size}, seeds {_span(seeds)}; numerics {args.numerics}; torch {torch.__version__}; "
        f"{jobs} jobs; {load()}",
        flush=True,
    )
    t0 = time.perf_counter()
    fast = run_fast(specs, threads=jobs, backend=args.backend)
    fast_wall = time.perf_counter() - t0
    print(f"[fast]  {fast_wall:.1f} s ({fast[0].engine}, backend {args.backend}); {load()}", flush=True)
    t0 = time.perf_counter()
    exact = run_exact(specs, jobs)
    exact_wall = time.perf_counter() - t0
    print(f"[exact] {exact_wall:.1f} s; {load()}", flush=True)

    print("\nper seed: exact tf free exact | fast tf free exact")
    for e, f in zip(exact, fast):
        print(
            f"  seed {e.spec.seed:3d}: {e.teacher_forced:.4f} {e.free_running:.4f} {e.exact:.4f} | "
            f"{f.teacher_forced:.4f} {f.free_running:.4f} {f.exact:.4f}"
        )
    rows = compare(exact, fast, args.permutations)
    n = len(seeds)
    print(
        "\nmetric          exact mean +- std   fast mean +- std   Welch p (perm)   "
        "Brown-Forsythe p (perm)   std fast/exact [95%]   same seed |fast-exact|"
    )
    for r in rows:
        print(
            f"{r['metric']:14s}  {r['exact_mean']:.4f} +- {r['exact_std']:.4f}  "
            f"{r['fast_mean']:.4f} +- {r['fast_std']:.4f}  {r['welch_p']:.3f} ({r['perm_p_mean']:.3f})    "
            f"{r['bf_p']:.3f} ({r['perm_p_spread']:.3f})            "
            f"{r['std_ratio']:.2f} [{r['std_ratio_lo']:.2f}, {r['std_ratio_hi']:.2f}]      "
            f"{r['paired_mean_abs']:.4f}"
        )
    worst = min(min(r["welch_p"], r["bf_p"]) for r in rows)
    print(
        f"\n{n} seeds per engine; smallest p-value {worst:.3f} over {2 * len(rows)} tests "
        f"({'no' if worst >= 0.05 / (2 * len(rows)) else 'a'} difference at the 5% level, Bonferroni)"
    )
    if args.json:
        out = {
            "setting": {
                "model": args.model,
                "length": args.length,
                "steps": args.steps,
                "hidden_size": args.hidden_size,
                "seeds": [s.seed for s in specs],
                "numerics": args.numerics,
                "torch": torch.__version__,
            },
            "fast_wall": fast_wall,
            "exact_wall": exact_wall,
            "stats": rows,
            "runs": [
                {
                    "engine": o.engine,
                    "seed": o.spec.seed,
                    **{m: getattr(o, m) for m in METRICS},
                    "final_loss": o.final_loss,
                }
                for o in exact + fast
            ],
        }
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
