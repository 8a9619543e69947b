"""The exact engine: one copy-task run, the W9 2.3 way, bit for bit.

Design notes: ``docs/design.md``, section ``attn_cli.core.copy_train``.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn as nn

from attn_cli.core.copy_models import AttnSeq2Seq, build_model
from attn_cli.core.copy_spec import BOS, VOCAB, RunOutcome, RunSpec, StepCallback
from attn_cli.core.device import prepare_device
from attn_cli.core.numerics import effective_isa
from attn_cli.core.optim import adam

PROGRESS_EVERY_S = 0.2  # at most this often a progress report (plus the last step)


def make_batch(batch_size: int, length: int, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """One draw of the program's ``batch(B)``: src (B, T) digits, tgt_in (B, T) = [BOS, src[:, :-1]]."""
    src = torch.randint(0, 10, (batch_size, length))  # (B, T), drawn on the CPU generator
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), src[:, :-1]], 1)  # (B, T)
    if device != "cpu":
        src, tgt_in = src.to(device), tgt_in.to(device)
    return src, tgt_in


def train_and_evaluate(
    spec: RunSpec, device: str = "cpu", progress: StepCallback = None, program_layout: bool = False
) -> RunOutcome:
    """Train ``spec.model`` on the copy task and evaluate it, exactly as the W9 2.3 program does.
    ``program_layout=True``: the program's strided encoder states, module calls and Adam's public
    methods (which import torch._dynamo): the same floats, slower; the benchmark's stand-in for the program."""
    prepare_device(device)  # cuda: deterministic kernels, no TF32, in this (worker) process too
    start, cpu = time.perf_counter(), time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the program's torch.set_num_threads(1)
    try:
        torch.manual_seed(spec.seed)
        model = build_model(spec.model, spec.hidden)
        model.contiguous_states = not program_layout
        model.program_calls = program_layout
        if device != "cpu":
            model = model.to(device)
        final_loss = _train(model, spec, device, progress, program_layout, start)
        evaluation = _evaluate(model, spec, device)
        return RunOutcome(
            spec=spec,
            seconds=time.perf_counter() - start,
            final_loss=final_loss,
            engine="exact",
            cpu_seconds=time.process_time() - cpu,
            isa=effective_isa(),
            **evaluation,
        )
    finally:
        torch.set_num_threads(threads)


def _train(
    model: AttnSeq2Seq, spec: RunSpec, device: str, progress: StepCallback, program_layout: bool, start: float
) -> float:
    """``spec.steps`` Adam steps on fresh batches, with clipping; the last step's loss (nan without steps)."""
    params = list(model.parameters())
    opt = adam(params, spec.lr, program_calls=program_layout)
    cross_entropy, clip = nn.functional.cross_entropy, nn.utils.clip_grad_norm_
    loss, last_report = None, start
    for step in range(1, spec.steps + 1):
        src, tgt_in = make_batch(spec.batch_size, spec.length, device)
        loss = cross_entropy(model(src, tgt_in).reshape(-1, VOCAB), src.reshape(-1))
        opt.zero_grad()
        loss.backward()
        clip(params, spec.clip)
        opt.step()
        if progress is not None:
            now = time.perf_counter()
            if now - last_report >= PROGRESS_EVERY_S or step == spec.steps:
                progress(step, spec.steps, loss.item())
                last_report = now
    return loss.item() if loss is not None else float("nan")


def _evaluate(model: AttnSeq2Seq, spec: RunSpec, device: str) -> dict[str, Any]:
    """One evaluation batch, teacher-forced and free-running: the RunOutcome's accuracy fields,
    with sequence 0 and its readout attention weights."""
    src, tgt_in = make_batch(spec.eval_size, spec.length, device)
    model.eval()  # no dropout or batch norm here: changes nothing numerically
    with torch.no_grad():
        encoded = model.encode(src)  # (B, T, h), (B, h): shared by both decoders
        forced = (model(src, tgt_in, encoded).argmax(-1) == src).float().mean().item()
        free, rows, diagonal = model.generate(src, spec.length, encoded, record=0)  # (B, T)
        correct = free == src  # (B, T)
        free_running = correct.float().mean().item()
        exact = correct.all(1).float().mean().item()
        weights = torch.stack(rows).tolist() if rows else []  # (T_out, T_in) for sequence 0
    return {
        "teacher_forced": forced,
        "free_running": free_running,
        "exact": exact,
        "example_src": src[0].tolist(),
        "example_weights": weights,
        "diagonal": diagonal,
    }
