"""The runs of the fast engine: initial weights and data as the exact engine's (``torch.manual_seed(seed)``,
``build_model``, then a CPU generator that continues the global one, left as found), training, threads."""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor
from dataclasses import replace

import torch

from attn_cli.core.copy_fast import kernel
from attn_cli.core.copy_fast.backward import loss_and_grads
from attn_cli.core.copy_fast.forward import Weights, built_model, evaluate, param_layout
from attn_cli.core.copy_spec import BOS, EMBED, VOCAB, RunOutcome, RunSpec, available_cpus
from attn_cli.core.numerics import effective_isa, prepare_device

PROGRESS_EVERY = 50  # steps between progress reports (plus the last step)


def step_flops(model: str, length: int, hidden: int, batch_size: int) -> float:
    """Multiply-add FLOPs (x2) of one training step of one run, counted on the program's formulation
    (every matmul, attention twice per decoder step, no elementwise ops; backward = 2 x forward), so
    GFLOP/s compare with the exact engine's useful work."""
    B, T, h, E, V, G = batch_size, length, hidden, EMBED, VOCAB, 3 * hidden
    att = model == "attention"
    c, r = (h, 2 * h) if att else (0, h)  # the cell's extra input (context), the readout's input
    # encoder input + recurrent projections, decoder cell, readout, attention (scores + context, twice a step)
    fwd = B * T * (2 * E * G + 2 * h * G + 2 * (E + c) * G + 2 * h * G + 2 * r * V + (8 * T * h if att else 0))
    return 3.0 * fwd


class Adam:
    """torch.optim.Adam's update (its defaults: betas (0.9, 0.999), eps 1e-8) on (M, P) rows: Adam
    is elementwise, so one stacked buffer *is* M separate Adams."""

    def __init__(self, params: torch.Tensor, lr: float):
        self.p, self.lr, self.step_count = params, lr, 0
        self.m, self.v = torch.zeros_like(params), torch.zeros_like(params)  # (M, P) each: the moments

    def step(self, grad: torch.Tensor) -> None:
        b1, b2 = 0.9, 0.999
        self.step_count += 1
        bc1 = 1 - b1**self.step_count
        bc2_sqrt = math.sqrt(1 - b2**self.step_count)
        self.m.lerp_(grad, 1 - b1)
        self.v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (self.v.sqrt() / bc2_sqrt).add_(1e-8)
        self.p.addcdiv_(self.m, denom, value=-self.lr / bc1)


def clip_per_run(grad: torch.Tensor, max_norm: float) -> torch.Tensor:
    """clip_grad_norm_ on each run (row) alone: grad (M, P) scaled in place; returns norms (M,)."""
    norms = torch.linalg.vector_norm(grad, dim=1)  # (M,)
    coef = torch.clamp(max_norm / (norms + 1e-6), max=1.0)  # (M,)
    grad.mul_(coef.unsqueeze(1))
    return norms


def init_run(spec: RunSpec) -> tuple[torch.Tensor, torch.Generator]:
    """Seed K's initial weights as one flat (P,) row, and the generator of its data stream."""
    net, state = built_model(spec.model, spec.hidden, spec.seed)
    gen = torch.Generator().set_state(state)
    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])  # (P,)
    return flat, gen


def draw_batch(
    gens: Sequence[torch.Generator], batch_size: int, length: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch per run from its own stream -> src, tgt_in (M, B, T) on ``device``."""
    src = torch.stack([torch.randint(0, 10, (batch_size, length), generator=g) for g in gens])  # (M, B, T)
    bos = torch.full((len(gens), batch_size, 1), BOS, dtype=src.dtype)
    tgt_in = torch.cat([bos, src[..., :-1]], 2)  # (M, B, T) = [BOS, src[:, :-1]]
    return src.to(device), tgt_in.to(device)


def train_group(
    specs: Sequence[RunSpec],
    device: str = "cpu",
    progress: Callable[[int, int, int, float], None] | None = None,
    stop: threading.Event | None = None,
    inits: Sequence[tuple[torch.Tensor, torch.Generator]] | None = None,
) -> list[RunOutcome]:
    """Train the stacked runs ``specs`` (equal but for the seed) with PyTorch ops; any device.
    ``inits``: their :func:`init_run` results, if already made."""
    start, cpu = time.perf_counter(), time.thread_time()
    s0 = specs[0]
    inits = inits or [init_run(s) for s in specs]
    lay = param_layout(s0.model, s0.hidden)
    flat = torch.stack([f for f, _ in inits]).to(device)  # (M, P)
    gens = [g for _, g in inits]
    grad = torch.zeros_like(flat)  # (M, P)
    w, g = Weights(flat, lay), Weights(grad, lay)
    opt = Adam(flat, s0.lr)
    loss = None
    with torch.no_grad():
        for step in range(1, s0.steps + 1):
            src, tgt_in = draw_batch(gens, s0.batch_size, s0.length, device)
            loss = loss_and_grads(w, g, src, tgt_in, s0.model, s0.hidden)  # (M,)
            clip_per_run(grad, s0.clip)
            opt.step(grad)
            if step % PROGRESS_EVERY == 0 or step == s0.steps:
                if stop is not None and stop.is_set():
                    raise CancelledError()  # the runs were stopped: noticed at a chunk boundary
                if progress is not None:
                    for i, value in enumerate(loss.tolist()):
                        progress(i, step, s0.steps, value)
        final = loss.tolist() if loss is not None else [float("nan")] * len(specs)
    return _evaluate_outcomes(specs, flat, gens, final, device, start, cpu)


def train_kernel(
    spec: RunSpec,
    lib: ctypes.CDLL,
    progress: Callable[[int, int, int, float], None] | None = None,
    stop: threading.Event | None = None,
    init: tuple[torch.Tensor, torch.Generator] | None = None,
) -> list[RunOutcome]:
    """Train one run with the C kernel (CPU), PROGRESS_EVERY steps per call.
    ``init``: its :func:`init_run` result, if already made."""
    start, cpu = time.perf_counter(), time.thread_time()
    flat, gen = init or init_run(spec)
    params = flat.to(torch.float32).contiguous()  # (P,)
    grad, m1, m2 = torch.zeros_like(params), torch.zeros_like(params), torch.zeros_like(params)
    B, T, H, att = spec.batch_size, spec.length, spec.hidden, int(spec.model == "attention")
    off = kernel.offsets(lib, spec.model, H)  # (roles + 1,) where each parameter lives
    work = torch.empty(lib.work_floats(B, T, H, att), dtype=torch.float32)  # kept across calls: no page faults
    state = [t.data_ptr() for t in (params, grad, m1, m2)]
    sizes = (B, T, H, att, float(spec.lr), float(spec.clip))
    done, final = 0, float("nan")
    while done < spec.steps:
        if stop is not None and stop.is_set():
            raise CancelledError()
        n = min(PROGRESS_EVERY, spec.steps - done)
        # n successive draws of the program's batch(B): one randint gives the same numbers
        src = torch.randint(0, 10, (n * B, T), generator=gen)  # (n B, T)
        losses = torch.empty(n, dtype=torch.float32)  # (n,)
        ptrs = (losses.data_ptr(), off.data_ptr(), work.data_ptr())
        if lib.train_steps_in(*state, done, src.data_ptr(), n, *sizes, *ptrs) != 0:
            raise MemoryError(f"copy-task kernel could not allocate its work space (length {T})")
        done += n
        final = losses[-1].item()
        if progress is not None:
            progress(0, done, spec.steps, final)
    return _evaluate_outcomes([spec], params.unsqueeze(0), [gen], [final], "cpu", start, cpu)


def _evaluate_outcomes(
    specs: Sequence[RunSpec],
    flat: torch.Tensor,
    gens: Sequence[torch.Generator],
    final: list[float],
    device: str,
    start: float,
    cpu: float,
) -> list[RunOutcome]:
    """The evaluation batch (one more draw per run) and the group's RunOutcomes, CPU time split over its runs."""
    s0 = specs[0]
    w = Weights(flat, param_layout(s0.model, s0.hidden))
    src, tgt_in = draw_batch(gens, s0.eval_size, s0.length, device)  # (M, N, T)
    forced_t, free_t, exact_t, example, diagonal_t = evaluate(w, src, tgt_in, s0.model, s0.hidden)
    forced, free, exact = forced_t.tolist(), free_t.tolist(), exact_t.tolist()
    diagonal = diagonal_t.tolist() if diagonal_t is not None else [None] * len(specs)
    seconds, cpu_share = time.perf_counter() - start, (time.thread_time() - cpu) / len(specs)
    return [
        RunOutcome(
            spec=spec,
            teacher_forced=forced[i],
            free_running=free[i],
            exact=exact[i],
            seconds=seconds,
            final_loss=final[i],
            example_src=src[i, 0].tolist() if example is not None else [],
            example_weights=example[i].tolist() if example is not None else [],
            engine="fast",
            cpu_seconds=cpu_share,
            diagonal=diagonal[i],
            isa=effective_isa(),
        )
        for i, spec in enumerate(specs)
    ]


def run_fast(
    specs: list[RunSpec],
    device: str = "cpu",
    progress: Callable[[int, int, int, float], None] | None = None,
    *,
    threads: int | None = None,
    backend: str = "auto",
    stop: threading.Event | None = None,
) -> list[RunOutcome]:
    """Train and evaluate every spec with the fast engine; outcomes in the order of ``specs``.
    backend: ``"kernel"`` (the C kernel, CPU only, one run per task), ``"torch"`` (PyTorch ops,
    runs equal but for the seed stacked, any device) or ``"auto"`` (the kernel where it builds).
    threads: tasks trained at once on CPU, one core each (default: one per available core).
    ``progress(spec_index, step, steps, loss)``: every PROGRESS_EVERY steps, never two calls at
    once.  ``stop``: set it (from another thread) to end the runs at their next chunk boundary."""
    on_cpu = torch.device(device).type == "cpu"
    lib = _library(backend, on_cpu)
    prepare_device(device)  # cuda: deterministic kernels, no TF32 (nothing on cpu)
    tasks = _tasks(specs, one_per_run=lib is not None)  # lists of indices into specs
    n_threads = 1 if not on_cpu else min(len(tasks), threads or available_cpus())
    if n_threads < 1:
        raise ValueError("threads must be at least 1")

    lock, stop = threading.Lock(), stop or threading.Event()
    outcomes: list[RunOutcome | None] = [None] * len(specs)
    # initial weights and data generators made here, in order, before any thread starts
    inits = {i: init_run(specs[i]) for task in tasks for i in task}

    def work(task: list[int]) -> None:
        def serialised(i: int, step: int, total: int, value: float) -> None:  # progress from one thread at a time
            assert progress is not None  # only reported to when given
            with lock:
                progress(task[i], step, total, value)

        report = serialised if progress is not None else None
        if lib is not None:
            result = train_kernel(specs[task[0]], lib, report, stop, inits[task[0]])
        else:
            result = train_group([specs[i] for i in task], device, report, stop, [inits[i] for i in task])
        for i, outcome in zip(task, result):
            outcome.backend, outcome.kernel_isa = ("kernel", kernel.kernel_isa()) if lib is not None else ("torch", "")
            outcomes[i] = outcome

    saved_threads = torch.get_num_threads()
    if on_cpu:
        torch.set_num_threads(1)  # one core per task, like the exact engine
    try:
        _run_tasks(work, tasks, n_threads, stop)
    finally:
        if on_cpu:
            torch.set_num_threads(saved_threads)
    return outcomes  # type: ignore[return-value]


def _library(backend: str, on_cpu: bool) -> ctypes.CDLL | None:
    """The C kernel where ``backend`` wants it and it loads; None for the PyTorch path."""
    if backend not in ("auto", "kernel", "torch"):
        raise ValueError(f"unknown backend {backend!r}; choose from auto, kernel, torch")
    if not on_cpu and backend == "kernel":
        raise ValueError("the C kernel runs on CPU only; use backend='torch' on other devices")
    if not on_cpu or backend == "torch":
        return None
    lib = kernel.load()
    if lib is None and backend == "kernel":
        raise RuntimeError(f"the copy-task C kernel is not available: {kernel.load_error()}")
    return lib


def _tasks(specs: list[RunSpec], one_per_run: bool) -> list[list[int]]:
    """Run indices by task: one per run (kernel) or per spec but the seed; longest first, so threads end together."""
    groups: dict[object, list[int]] = {}
    for i, spec in enumerate(specs):
        groups.setdefault(i if one_per_run else replace(spec, seed=0), []).append(i)

    def minus_work(task: list[int]) -> float:
        s = specs[task[0]]
        return -len(task) * s.steps * step_flops(s.model, s.length, s.hidden, s.batch_size)

    return sorted(groups.values(), key=minus_work)


def _run_tasks(
    work: Callable[[list[int]], None], tasks: list[list[int]], n_threads: int, stop: threading.Event
) -> None:
    """``work(task)`` for each task on ``n_threads`` threads; on an error the others stop at their next chunk."""
    if n_threads == 1:
        for task in tasks:
            if stop.is_set():
                raise CancelledError()
            work(task)
        return
    pool = ThreadPoolExecutor(max_workers=n_threads)
    try:
        for future in [pool.submit(work, t) for t in tasks]:
            future.result()
    except BaseException:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
