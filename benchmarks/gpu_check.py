"""A prepared GPU check that brings its evidence home: one run, every output kept under --out.

    python benchmarks/gpu_check.py --out gpu-check            # on a machine with CUDA (exit 2 without)
    python benchmarks/gpu_check.py --device cpu --out DIR      # the same plan on CPU (a dry run)

Runs from a plain checkout with no install: it puts the checkout on its import path (and on
PYTHONPATH of every command it starts) and needs only torch, numpy, click, rich and
matplotlib (a missing one is named, with the pip command, before anything runs).
Every part runs as its own process (fresh CUDA settings each); its command line, stdout and
stderr are kept under ``--out/<part>/``.  The parts, with the figures each reports:

  verify         ``attn verify --quick`` on the device: every check, counted by status;
  fast-steps     the fast engine (PyTorch ops) on the device and on CPU from identical initial
                 weights and batches: each step's loss, the first step where they differ by
                 more than 1e-5 and the largest difference; then the same seed again on the
                 device, expected bit-identical;
  exact-steps    the exact engine likewise (the text's program), deterministic without TF32,
                 again, and with ATTN_CUDA_FAST=1 (TF32 matmuls and cuDNN GRU);
  scaling        ``attn scaling --measure`` on the device: the fitted exponent (the JSON's
                 ``timing.exponent``), sizes kept or dropped, and time per size against CPU;
  seeds          the copy task's full table, 8 fast-engine seeds stacked on the device, against
                 one CPU seed: per cell the device's mean ± std and the CPU value.

Step 1's loss is a forward pass from identical weights on an identical batch: any wrong
kernel shows there, so the device passes a per-step part when step 1 agrees within 1e-5
(later steps may part by rounding; the step where they do is reported).  The table is
printed and written as ``table.json`` and ``table.md`` in --out; exit 1 if a part failed.
Budget: 5 minutes on one H200 at the defaults, estimated, not measured (no GPU has run it yet):
the seeds part is the longest (the fast engine is launch-bound on a GPU: about 4,000 ops per
step at length 32, ~60 s for its 2,500 steps at ~6 us an op, ~210 s for the table), so it
trains beside the other parts (``--jobs 2``) after ``scaling`` has been timed alone (on cuda); a command
past ``--timeout`` is stopped and reported with its output so far.  ``--small``: seconds, for
the test suite.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # attn_cli from this checkout, installed or not

REQUIRED = ("torch", "numpy", "click", "rich", "matplotlib")  # attn_cli's dependencies (pyproject.toml)
TOLERANCE = 1e-5  # per-step loss agreement, device vs CPU
PARTS = ("verify", "fast-steps", "exact-steps", "scaling", "seeds")


@dataclass
class Settings:
    """What each part runs; ``small()`` for the test suite."""

    length: int = 16  # per-step parts: copy-task length
    steps: int = 300  # per-step parts: Adam steps
    eval_size: int = 1000
    verify_only: tuple[str, ...] = ()  # verify: every check (empty), or these IDs
    scaling_lengths: tuple[str, ...] = ()  # device: its defaults (empty)
    scaling_cpu_lengths: tuple[str, ...] = ("1024", "2048", "4096")  # CPU comparison
    scaling_repeats: str = "3"
    seeds: tuple[str, ...] = tuple(map(str, range(8)))
    seeds_args: tuple[str, ...] = ()  # the full table at the text's settings

    @classmethod
    def small(cls) -> Settings:
        return cls(
            length=4,
            steps=12,
            eval_size=50,
            verify_only=("w9-sqrt-dk", "w9-masks"),
            scaling_lengths=("128", "256"),
            scaling_cpu_lengths=("128", "256"),
            scaling_repeats="1",
            seeds=("0", "1"),
            seeds_args=("--lengths", "4", "--model", "attention", "--steps", "12", "--eval-size", "50"),
        )


@dataclass
class Row:
    part: str
    what: str
    device: str
    seconds: float = 0.0
    ok: bool = True
    detail: str = ""  # the figures, in words
    figures: dict = field(default_factory=dict)  # the figures, as numbers


# --------------------------------------------------------------------------- dependencies


def missing_packages(names=REQUIRED) -> list[str]:
    """The packages of ``names`` that do not import here."""
    import importlib

    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


# --------------------------------------------------------------------------- running commands


def run_logged(name: str, args: list[str], out: Path, timeout: float, env_extra: dict | None = None) -> dict:
    """Run ``args``; keep ``command.txt``, ``stdout.txt`` and ``stderr.txt`` under ``out/name``."""
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1", **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    (folder / "command.txt").write_text(
        " ".join(args) + "\n" + "".join(f"{k}={v}\n" for k, v in (env_extra or {}).items())
    )
    start = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = (
            exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        ) + f"\ngpu_check: timed out after {timeout:.0f} s\n"
    seconds = time.perf_counter() - start
    (folder / "stdout.txt").write_text(stdout)
    (folder / "stderr.txt").write_text(stderr)
    return {"code": code, "stdout": stdout, "stderr": stderr, "seconds": seconds, "folder": folder}


def failure(res: dict) -> str | None:
    """Why a command failed (its exit, and where its stderr is kept), or None."""
    if res["code"] == 0 and "Traceback" not in res["stderr"]:
        return None
    lines = [ln for ln in res["stderr"].strip().splitlines() if ln.strip()]
    error = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "(no stderr)")
    exit_text = "timed out" if res["code"] is None else f"exit {res['code']}"
    return f"{exit_text}: {error[:200]} (all of it: {res['folder'].name}/stderr.txt)"


def attn(*args: str) -> list[str]:
    return [sys.executable, "-m", "attn_cli", *args]


def this_script(part: str, device: str, out: Path, small: bool) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--part", part, "--device", device, "--out", str(out)] + (
        ["--small"] if small else []
    )


# --------------------------------------------------------------------------- the parts, as run by the parent


def part_verify(device: str, out: Path, s: Settings, timeout: float) -> list[Row]:
    only = ["--only", *s.verify_only] if s.verify_only else []
    res = run_logged(
        "verify",
        attn(
            "verify",
            "--quick",
            "--no-cache",
            "--device",
            device,
            "--json",
            "--out",
            str(out / "verify" / "attn-out"),
            *only,
        ),
        out,
        timeout,
    )
    row = Row(
        "verify", "attn verify --quick" + (f" --only {' '.join(s.verify_only)}" if only else ""), device, res["seconds"]
    )
    record = _json(res["stdout"])
    records = record.get("checks") if isinstance(record, dict) else None  # {"header", "checks"}
    if not isinstance(records, list):
        row.ok, row.detail = False, failure(res) or "stdout is not attn verify's JSON record"
        return [row]
    counts: dict[str, int] = {}
    for r in records:
        counts[r.get("status", "?")] = counts.get(r.get("status", "?"), 0) + 1
    failed = counts.get("fail", 0) + counts.get("n/a", 0)
    row.figures = {"checks": len(records), **counts}
    row.detail = f"{len(records)} checks: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    row.ok = bool(records) and failed == 0 and res["code"] == 0
    if res["code"] not in (0, None) and not failed:
        row.detail += f"; {failure(res)}"
    return [row]


def part_steps(kind: str, device: str, out: Path, s: Settings, timeout: float, small: bool) -> list[Row]:
    """fast-steps / exact-steps: run this script's --part in its own process, then compare."""
    res = run_logged(kind, this_script(kind, device, out / kind, small), out, timeout)
    data = _json(res["stdout"])
    if not isinstance(data, dict):
        return [
            Row(
                kind,
                f"{kind.split('-')[0]} engine, per-step losses",
                device,
                res["seconds"],
                False,
                failure(res) or "stdout is not JSON",
            )
        ]
    return judge_steps(kind, device, data, res["seconds"])


def judge_steps(kind: str, device: str, data: dict, seconds: float) -> list[Row]:
    """The rows of a per-step part from its JSON: device vs CPU (judged at step 1 within
    TOLERANCE; with TF32 reported only), and the same seed twice (judged: bit-identical)."""
    engine = kind.split("-")[0]
    rows = []
    for label in ("device", "device_tf32"):
        if label not in data["runs"]:
            continue
        losses = data["runs"][label]
        cmp = compare_steps(losses, data["runs"]["cpu"])
        what = (
            f"{engine} engine{', with ATTN_CUDA_FAST=1 (TF32)' if label == 'device_tf32' else ''}: losses vs "
            f"CPU from identical weights and batches, L {data['length']}, {len(losses)} steps"
        )
        strict = label == "device"  # TF32 is expected to part early: reported, not judged
        first = cmp["first_over"]
        detail = (
            f"step 1 Δ {cmp['step1']:.1e}; first step with |Δ| > {TOLERANCE:g}: "
            f"{first if first is not None else 'none'}; max |Δ| {cmp['max']:.1e}; "
            f"final {losses[-1]:.6f} vs {data['runs']['cpu'][-1]:.6f}"
        )
        rows.append(
            Row(
                kind,
                what,
                f"{device} vs cpu",
                seconds if not rows else 0.0,
                (cmp["step1"] <= TOLERANCE) if strict else cmp["finite"],
                detail,
                cmp,
            )
        )
    again, first_run = data["runs"]["again"], data["runs"]["device"]
    same = len(again) == len(first_run) and all(_bits(a) == _bits(b) for a, b in zip(again, first_run))
    differ = next((i + 1 for i, (a, b) in enumerate(zip(again, first_run)) if _bits(a) != _bits(b)), None)
    rows.append(
        Row(
            kind,
            f"{engine} engine: the same seed twice",
            device,
            0.0,
            same,
            f"{len(again)} steps, bit-identical: {'yes' if same else f'no, from step {differ}'}",
            {"identical": same, "first_difference": differ, "steps": len(again)},
        )
    )
    return rows


def part_scaling(device: str, out: Path, s: Settings, timeout: float) -> list[Row]:
    runs = {}

    def one(name, dev, lengths):
        extra = ["--lengths", *lengths] if lengths else []
        runs[name] = run_logged(
            name,
            attn(
                "scaling",
                "--measure",
                "--device",
                dev,
                "--repeats",
                s.scaling_repeats,
                "--json",
                "--out",
                str(out / name / "attn-out"),
                *extra,
            ),
            out,
            timeout,
        )

    one(f"scaling-{device}", device, s.scaling_lengths)
    if device == "cpu":  # a dry run: the device run is its own CPU reference (one process fewer)
        runs["scaling-cpu-compare"] = runs[f"scaling-{device}"]
    else:
        one("scaling-cpu-compare", "cpu", s.scaling_cpu_lengths)
    rows = []
    dev_data = _json(runs[f"scaling-{device}"]["stdout"])
    row = Row("scaling", "attn scaling --measure", device, runs[f"scaling-{device}"]["seconds"])
    try:
        timing = dev_data["timing"]
        sizes = [r["n"] for r in dev_data["measured_rows"]]
        times = {r["n"]: t["time_s"] for r, t in zip(dev_data["measured_rows"], timing["measured_rows"])}
        exponent = timing.get("exponent")
        dropped = timing.get("dropped") or []
        row.figures = {
            "exponent": exponent,
            "sizes": sizes,
            "times_s": times,
            "dropped": dropped,
            "device_name": dev_data.get("device_name"),
        }
        row.detail = (
            f"{dev_data.get('device_name')}: n = {', '.join(map(str, sizes))}; "
            + (f"time ~ n^{exponent:.2f}" if exponent is not None else "no exponent (fewer than 2 sizes)")
            + (f"; dropped (too large): {'; '.join(dropped)}" if dropped else "")
        )
        row.ok = exponent is not None and len(sizes) >= 2
    except (TypeError, KeyError, ValueError):
        row.ok, row.detail = False, failure(runs[f"scaling-{device}"]) or "its JSON has no timing.exponent"
        times = {}
    rows.append(row)
    cpu_data = _json(runs["scaling-cpu-compare"]["stdout"])
    cmp = Row("scaling", "time per size vs CPU", f"{device} vs cpu", runs["scaling-cpu-compare"]["seconds"])
    try:
        cpu_times = {
            r["n"]: t["time_s"] for r, t in zip(cpu_data["measured_rows"], cpu_data["timing"]["measured_rows"])
        }
        shared = sorted(set(cpu_times) & set(times))
        if shared:
            cmp.detail = "; ".join(
                f"n={n}: {times[n] * 1e3:.3f} ms vs {cpu_times[n] * 1e3:.3f} ms ({cpu_times[n] / times[n]:.1f}x)"
                for n in shared
            )
        else:
            cmp.detail = (
                f"no size in common; {device}: "
                + ", ".join(f"n={n} {t * 1e3:.3f} ms" for n, t in times.items())
                + "; cpu: "
                + ", ".join(f"n={n} {t * 1e3:.3f} ms" for n, t in cpu_times.items())
            )
        cmp.figures = {"device_s": times, "cpu_s": cpu_times}
        cmp.ok = bool(cpu_times)
    except (TypeError, KeyError, ValueError):
        cmp.ok, cmp.detail = False, failure(runs["scaling-cpu-compare"]) or "its JSON has no timings"
    rows.append(cmp)
    return rows


def part_seeds(device: str, out: Path, s: Settings, timeout: float) -> list[Row]:
    args = ["copy-task", "--engine", "fast", "--no-cache", "--json", *s.seeds_args]
    with ThreadPoolExecutor(max_workers=2) as pool:  # the CPU seed trains while the device does
        gpu = pool.submit(
            run_logged,
            f"seeds-{device}",
            attn(*args, "--device", device, "--seeds", *s.seeds, "--out", str(out / f"seeds-{device}" / "attn-out")),
            out,
            timeout,
        )
        if device != "cpu":
            cpu = pool.submit(
                run_logged,
                "seeds-cpu-one",
                attn(*args, "--device", "cpu", "--seed", "0", "--out", str(out / "seeds-cpu-one" / "attn-out")),
                out,
                timeout,
            ).result()
        gpu = gpu.result()
    if device == "cpu":  # a dry run: seed 0 of the device run is the CPU reference (one process fewer)
        cpu = {**gpu, "stdout": json.dumps(seed_zero_cells(_json(gpu["stdout"])))}
    row = Row(
        "seeds",
        f"copy-task fast engine, {len(s.seeds)} seeds stacked vs one CPU seed",
        f"{device} vs cpu",
        gpu["seconds"],
    )
    try:
        dev_cells = {(c["model"], c["length"]): c for c in _json(gpu["stdout"])["cells"]}
        cpu_cells = {(c["model"], c["length"]): c for c in _json(cpu["stdout"])["cells"]}
        parts, inside, figures = [], 0, {}
        for key in sorted(dev_cells):
            d, c = dev_cells[key]["free_running"], cpu_cells[key]["free_running"]["mean"]
            near = abs(c - d["mean"]) <= max(3 * d["std"], 0.02)
            inside += near
            parts.append(f"{key[0]} L{key[1]}: {d['mean']:.3f} ± {d['std']:.3f} vs {c:.3f}")
            figures[f"{key[0]}-{key[1]}"] = {
                "device_mean": d["mean"],
                "device_std": d["std"],
                "n": dev_cells[key]["n"],
                "cpu": c,
            }
        row.figures = {
            "cells": figures,
            "cpu_within_3_std": inside,
            "cells_total": len(dev_cells),
            "cpu_seconds": cpu["seconds"],
        }
        row.detail = (
            f"free-running, device mean ± std vs CPU seed 0: {'; '.join(parts)} "
            f"(CPU inside mean ± max(3 std, 0.02) in {inside} of {len(dev_cells)} cells; "
            f"CPU took {cpu['seconds']:.0f} s)"
        )
        row.ok = bool(dev_cells) and set(dev_cells) == set(cpu_cells)
    except (TypeError, KeyError, ValueError):
        row.ok, row.detail = False, failure(gpu) or failure(cpu) or "its JSON has no cells"
    return [row]


def seed_zero_cells(data) -> dict | None:
    """A copy-task JSON's seed-0 rows as one-seed cells (the dry run's CPU reference)."""
    try:
        return {
            "cells": [
                {"model": r["model"], "length": r["length"], "free_running": {"mean": r["free_running"]}}
                for r in data["rows"]
                if r["seed"] == 0
            ]
        }
    except (TypeError, KeyError):
        return None


# --------------------------------------------------------------------------- the per-step parts, in their own process


def fast_losses(spec, device: str) -> list[float]:
    """Each step's loss of the fast engine's PyTorch backend (one run)."""
    from attn_cli.core.copy_fast import training

    training.PROGRESS_EVERY = 1  # report every step (this process only)
    losses: list[float] = []
    training.train_group(
        [spec], device, lambda i, step, total, value: losses.append(value), inits=[training.init_run(spec)]
    )
    return losses


def exact_losses(spec, device: str, fast: bool = False) -> list[float]:
    """Each step's loss of the exact engine; ``fast``: ATTN_CUDA_FAST=1 (TF32) for this run."""
    from attn_cli.core import copy_train
    from attn_cli.core.numerics import FAST_VAR

    copy_train.PROGRESS_EVERY_S = 0.0  # report every step (this process only)
    losses: list[float] = []
    os.environ[FAST_VAR] = "1" if fast else "0"  # read by prepare_device inside train_and_evaluate
    try:
        copy_train.train_and_evaluate(spec, device, lambda step, total, loss: losses.append(loss))
    finally:
        os.environ.pop(FAST_VAR, None)
    return losses


def run_part(part: str, device: str, s: Settings) -> dict:
    from attn_cli.core import numerics

    numerics.apply(numerics.DEFAULT_MODE)  # before torch runs anything, as attn does
    import torch

    from attn_cli.core.copy_spec import RunSpec
    from attn_cli.core.numerics import prepare_device

    prepare_device(device)
    torch.set_num_threads(1)  # as both engines train on CPU (run_fast, the program): one core per run
    spec = RunSpec(model="attention", length=s.length, seed=0, steps=s.steps, eval_size=s.eval_size)
    runs: dict[str, list[float]] = {}
    if part == "fast-steps":
        runs["device"] = fast_losses(spec, device)
        runs["again"] = fast_losses(spec, device)
        runs["cpu"] = fast_losses(spec, "cpu")
    elif part == "exact-steps":
        runs["device"] = exact_losses(spec, device)
        runs["again"] = exact_losses(spec, device)
        runs["device_tf32"] = exact_losses(spec, device, fast=True)
        runs["cpu"] = exact_losses(spec, "cpu")
    else:
        raise SystemExit(f"gpu_check: unknown part {part!r}")
    return {"part": part, "device": device, "length": s.length, "steps": s.steps, "runs": runs}


# --------------------------------------------------------------------------- comparing, printing


def compare_steps(a: list[float], b: list[float]) -> dict:
    """Per-step |a - b|: at step 1, the largest, and the first step over TOLERANCE (1-based)."""
    diffs = [abs(x - y) for x, y in zip(a, b)]
    finite = len(a) == len(b) and all(math.isfinite(x) for x in a + b)
    first = next((i + 1 for i, d in enumerate(diffs) if not d <= TOLERANCE), None)
    return {
        "steps": len(diffs),
        "step1": diffs[0] if diffs else math.inf,
        "max": max(diffs, default=math.inf),
        "first_over": first,
        "finite": finite and bool(diffs),
    }


def _bits(x: float) -> str:
    return float(x).hex()


def _json(text: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def machine(device: str) -> dict:
    import platform

    import torch

    info = {"torch": torch.__version__, "cpus": os.cpu_count(), "platform": platform.platform(terse=True)}
    if device == "cuda":
        from attn_cli.core.numerics import describe_cuda

        info["gpu"] = describe_cuda()
    return info


def table_text(rows: list[Row]) -> str:
    head = ("part", "what", "device", "s", "status", "figures")
    cells = [head] + [
        (r.part, r.what, r.device, f"{r.seconds:.1f}" if r.seconds else "", "ok" if r.ok else "FAIL", r.detail)
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(5)]
    return "\n".join("  ".join(c[i].ljust(widths[i]) for i in range(5)) + "  " + c[5] for c in cells)


def table_markdown(rows: list[Row], title: str) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"**{esc(title)}**", "", "| part | what | device | s | status | figures |", "|---|---|---|---:|---|---|"]
    lines += [
        f"| {r.part} | {esc(r.what)} | {esc(r.device)} | {r.seconds:.1f} | {'ok' if r.ok else 'FAIL'} | "
        f"{esc(r.detail)} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="cuda (the check) or cpu (the same plan on CPU, to try the script)",
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="folder for every part's command, stdout and stderr, and the table"
    )
    parser.add_argument("--small", action="store_true", help="tiny sizes: seconds (the test suite's setting)")
    parser.add_argument("--only", nargs="+", metavar="PART", choices=PARTS, help=f"run only these: {', '.join(PARTS)}")
    parser.add_argument("--timeout", type=float, default=280, help="seconds allowed per command [280]")
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="parts run at once [2: the copy-task seeds train beside the other parts; "
        "scaling is always timed alone first]",
    )
    parser.add_argument("--part", choices=("fast-steps", "exact-steps"), help=argparse.SUPPRESS)  # one part, in-process
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    settings = Settings.small() if args.small else Settings()

    missing = [] if args.part else missing_packages()  # a part is started by the parent, which checked
    if missing:
        print(
            f"gpu_check: missing Python package(s) {', '.join(missing)}; install with: "
            f"{Path(sys.executable).name} -m pip install {' '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    if args.part:
        print(json.dumps(run_part(args.part, args.device, settings)))
        return 0

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            f"gpu_check: CUDA is not available on this machine (torch {torch.__version__}); nothing was run. "
            "`--device cpu` runs the same plan on CPU.",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    parts = [p for p in PARTS if p in (args.only or PARTS)]
    started = time.perf_counter()

    def run(part: str) -> list[Row]:
        print(f"gpu_check: {part} on {args.device} ...", file=sys.stderr, flush=True)
        if part == "verify":
            return part_verify(args.device, out, settings, args.timeout)
        if part in ("fast-steps", "exact-steps"):
            return part_steps(part, args.device, out, settings, args.timeout, args.small)
        if part == "scaling":
            return part_scaling(args.device, out, settings, args.timeout)
        return part_seeds(args.device, out, settings, args.timeout)

    found: dict[str, list[Row]] = {}
    if "scaling" in parts and args.jobs > 1 and args.device == "cuda":  # timed alone, then the rest share the GPU
        found["scaling"] = run("scaling")
    rest = sorted((p for p in parts if p not in found), key=lambda p: p != "seeds")  # the longest part first
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        found.update(zip(rest, pool.map(run, rest)))
    rows: list[Row] = [row for part in parts for row in found[part]]
    failed = [r for r in rows if not r.ok]
    seconds = time.perf_counter() - started
    info = machine(args.device)
    where = f"torch {info['torch']}, {info['cpus']} CPUs" + (
        f", {info['gpu']['gpu']} (compute {info['gpu']['capability']}, CUDA {info['gpu']['cuda']}, "
        f"cuDNN {info['gpu']['cudnn']}, driver {info['gpu']['driver']})"
        if "gpu" in info
        else ""
    )
    title = f"attn GPU check on {args.device}: {where}; {seconds:.0f} s, {len(failed)} failed"
    (out / "table.json").write_text(
        json.dumps(
            {
                "title": title,
                "device": args.device,
                "seconds": seconds,
                "machine": info,
                "small": args.small,
                "rows": [asdict(r) for r in rows],
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    (out / "table.md").write_text(table_markdown(rows, title))
    print(title)
    print(table_text(rows))
    print(f"(every command's output: {out}/<part>/stdout.txt, stderr.txt)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
