"""Diagnostic: where do the exact and the fast engine's training runs of one seed part?

Trains one seed with up to four trajectories from the same initial weights and batches,
and records every step's loss:

  exact      the exact engine's loop (the W9 2.3 program: autograd, clip_grad_norm_, Adam)
  exact+ulp  the same loop with ONE initial weight moved by one float32 ulp
  kernel     the fast engine's C kernel (one step per call)
  torch      the fast engine's PyTorch-ops backend

For each trajectory against ``exact`` it prints |loss difference| at checkpoints and the
first step where it exceeds 1e-5, 1e-3 and 1e-2, and the largest parameter difference at
the end.  If the fast engine were wrong the difference would show from the first steps;
if ``kernel`` parts from ``exact`` at about the step where ``exact+ulp`` does, the
divergence is the training's own sensitivity to rounding (each engine then draws a
different sample of the same seed distribution).

    python benchmarks/copy_task_divergence.py --length 32 --steps 1200        # ~2 min on 4 cores
"""

from __future__ import annotations

import argparse
import sys

TRAJECTORIES = ("exact", "exact+ulp", "kernel", "torch")


def trajectory(name: str, spec) -> tuple[list[float], list[float]]:
    """Per-step losses and final flat parameters of one trajectory."""
    import torch
    import torch.nn as nn

    from attn_cli.core import copy_fast as cf
    from attn_cli.core.copy_fast import kernel as copy_fast_kernel
    from attn_cli.core.copy_spec import VOCAB
    from attn_cli.core.copy_train import build_model, make_batch

    torch.set_num_threads(1)
    losses = []
    if name.startswith("exact"):
        torch.manual_seed(spec.seed)
        net = build_model(spec.model, spec.hidden)
        params = list(net.parameters())
        if name == "exact+ulp":
            with torch.no_grad():
                w = params[1].view(-1)  # the encoder's first input weight
                w[0] = torch.nextafter(w[0], torch.tensor(float("inf")))
        opt = torch.optim.Adam(params, lr=spec.lr)
        for _ in range(spec.steps):
            src, tgt_in = make_batch(spec.batch_size, spec.length)  # (B, T) each
            loss = nn.functional.cross_entropy(net(src, tgt_in).reshape(-1, VOCAB), src.reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, spec.clip)
            opt.step()
            losses.append(loss.item())
        final = torch.cat([p.detach().reshape(-1) for p in params])  # (P,)
    elif name == "kernel":
        lib = copy_fast_kernel.load()
        if lib is None:
            raise RuntimeError(f"no C kernel: {copy_fast_kernel.load_error()}")
        flat, gen = cf.init_run(spec)
        final = flat.float().contiguous()  # (P,)
        grad, m1, m2 = torch.zeros_like(final), torch.zeros_like(final), torch.zeros_like(final)
        off = copy_fast_kernel.offsets(lib, spec.model, spec.hidden)  # (roles + 1,)
        out = torch.empty(1)
        for step in range(spec.steps):
            src = torch.randint(0, 10, (spec.batch_size, spec.length), generator=gen)  # (B, T)
            lib.train_steps(
                final.data_ptr(),
                grad.data_ptr(),
                m1.data_ptr(),
                m2.data_ptr(),
                step,
                src.data_ptr(),
                1,
                spec.batch_size,
                spec.length,
                spec.hidden,
                int(spec.model == "attention"),
                float(spec.lr),
                float(spec.clip),
                out.data_ptr(),
                off.data_ptr(),
            )
            losses.append(out.item())
    else:
        flat, gen = cf.init_run(spec)
        lay = cf.param_layout(spec.model, spec.hidden)
        params = flat.unsqueeze(0).clone()  # (1, P)
        grad = torch.zeros_like(params)
        w, g, opt = cf.Weights(params, lay), cf.Weights(grad, lay), cf.Adam(params, spec.lr)
        with torch.no_grad():
            for _ in range(spec.steps):
                src, tgt_in = cf.draw_batch([gen], spec.batch_size, spec.length, "cpu")  # (1, B, T)
                loss = cf.loss_and_grads(w, g, src, tgt_in, spec.model, spec.hidden)  # (1,)
                cf.clip_per_run(grad, spec.clip)
                opt.step(grad)
                losses.append(loss.item())
        final = params[0]
    return losses, final.double().tolist()


def _job(args):
    return trajectory(*args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["attention", "plain"], default="attention")
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="+", choices=TRAJECTORIES, default=list(TRAJECTORIES))
    ap.add_argument("--numerics", choices=["portable", "native"], default="portable")
    args = ap.parse_args(argv)
    from attn_cli.core import numerics

    numerics.pin_environment(args.numerics)  # torch's pins and the C kernel's ISA, inherited by the workers
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from attn_cli.core.copy_spec import RunSpec

    spec = RunSpec(model=args.model, length=args.length, seed=args.seed, steps=args.steps)
    names = ["exact"] + [n for n in args.only if n != "exact"]
    with ProcessPoolExecutor(max_workers=len(names), mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = dict(zip(names, pool.map(_job, [(n, spec) for n in names])))
    ref, ref_params = runs["exact"]
    print(f"{args.model}, length {args.length}, seed {args.seed}, {args.steps} steps, numerics {args.numerics}")
    marks = sorted(
        {s for s in (1, 10, 100, 200, 400, 600, 800, 1000, 1500, 2000, 2500) if s <= args.steps} | {args.steps}
    )
    print("step  " + "".join(f"{n:>12s}" for n in names[1:]) + "   |loss - exact loss|")
    for s in marks:
        print(f"{s:5d} " + "".join(f"{abs(runs[n][0][s - 1] - ref[s - 1]):12.2e}" for n in names[1:]))
    for n in names[1:]:
        diffs = [abs(a - b) for a, b in zip(runs[n][0], ref)]
        first = {th: next((i + 1 for i, d in enumerate(diffs) if d > th), None) for th in (1e-5, 1e-3, 1e-2)}
        pdiff = max(abs(a - b) for a, b in zip(runs[n][1], ref_params))
        print(
            f"{n:10s} first step with |d loss| > 1e-5: {first[1e-5]}, > 1e-3: {first[1e-3]}, "
            f"> 1e-2: {first[1e-2]}; max |d param| at the end {pdiff:.2e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
