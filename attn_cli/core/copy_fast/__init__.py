"""The fast engine: the copy-task models trained with a hand-written step, several runs at once.

Same models, same initial weights, same data and same training as the exact engine
(:mod:`attn_cli.core.copy_train`); only the arithmetic is arranged differently, so the
numbers agree statistically, not bit for bit.  Two backends, the same equations (both
checked against autograd in ``tests/test_copy_fast.py``):

* **CPU: a C kernel** (``kernel.c``, built and loaded by :mod:`.kernel`): each run's forward,
  backward, clipping and Adam for 50 steps per call, no per-op overhead; runs train in
  parallel threads (one core each).  Built for the widest vectors the CPU runs (AVX-512 or
  AVX2, the same bits from both); its speed against the program's is in
  ``benchmarks/RESULTS.md``.
* **Any device: PyTorch ops**; used for ``device="cuda"`` and where no C compiler is
  found.  Its tricks:

* **Runs stacked on a model axis.** Runs that share (model, length, hidden, batch, steps,
  lr, eval size, clip) are trained together: every weight gets a leading axis ``M`` (one
  slice per run) and every matmul is one ``bmm`` over it.  Each run keeps its own data
  stream, its own Adam moments (Adam is elementwise, so a stacked tensor *is* M separate
  Adams) and its own gradient clipping (the norm is taken per slice, over all of that
  run's parameters, like ``clip_grad_norm_`` on one model).
* **No autograd.** Forward and backward through time are written out by hand, so each time step costs a handful of
  kernel launches instead of the ~60 autograd nodes of the program:
  - the embedding is folded into the input projections: ``emb @ W_ih^T`` is a (V, 3h)
    table, gathered per token (and its gradient scattered back) instead of a (B T, E)
    matmul;
  - the attention after the cell update at step t *is* the attention before the update at
    step t+1 (same query, same keys): it is computed once;
  - every weight gradient (and the gradient flowing into the encoder states through the
    attention) is summed over time in one large ``bmm`` after the loop, so the loops only
    carry what the recurrence needs;
  - the scores are taken as a row vector times the transposed encoder states,
    ``(1, h) @ (h, T)``: the column form ``(T, h) @ (h, 1)`` of the program is a batched
    matrix-vector product that BLAS runs several times slower.
* **Flat parameters.** All parameters of a run live in one row of a (M, P) buffer (and the
  gradients in another), so Adam is five elementwise ops and the per-run gradient norm is
  one reduction, whatever the number of runs.  The row's layout is derived from the exact
  engine's model (:mod:`.layout`) and handed to the C kernel as offsets.

Initial weights: ``torch.manual_seed(seed)`` then :func:`attn_cli.core.copy_models.build_model`,
exactly as the exact engine, so seed K starts from the same weights.  Data: the same
``randint`` stream, drawn from a CPU generator that continues the global one right after
the model was built (the global RNG itself is left as it was found).  So the fast and the
exact engine see the same batches and start from the same point; they drift apart only by
the rounding of a different summation order.  Every step's loss agrees to float rounding
until training reaches a sensitive phase, where any rounding difference grows (at length 32,
seed 0, near step 730: a one-ulp change of one initial weight parts the exact engine from
itself at the same step); from there each engine draws its own sample of the seed's
distribution, and the two distributions match in mean and spread
(``benchmarks/copy_task_seeds.py``, ``benchmarks/copy_task_divergence.py``).

The PyTorch path is device-generic: ``device="cuda"`` runs the same ops on the GPU (the
data is drawn on the CPU generator and moved, as in the exact engine).  CUDA graphs are
not used yet: at batch 64 a GPU step is launch-bound too, so stacking seeds is what pays.

Modules: :mod:`.layout` (the parameter layout), :mod:`.forward` and :mod:`.backward` (the
PyTorch backend's step), :mod:`.adam` (clipping and Adam), :mod:`.evaluate`, :mod:`.runs`
(initial weights, data, training, threads: :func:`run_fast`), :mod:`.kernel` (the C kernel).

Names: ``M`` runs, ``B`` batch, ``T`` length (input = output), ``h`` hidden, ``E`` embedding
width, ``V`` vocabulary, ``G = 3h`` the GRU gates (r, z, n, PyTorch's order).
"""


from attn_cli.core.copy_fast.adam import Adam, clip_per_run
from attn_cli.core.copy_fast.backward import loss_and_grads
from attn_cli.core.copy_fast.evaluate import evaluate
from attn_cli.core.copy_fast.layout import ROLES, Layout, Weights, param_layout
from attn_cli.core.copy_fast.training import (RunStepCallback, available_cpus, draw_batch, init_run, run_fast,
                                              step_flops, train_group, train_kernel)

__all__ = ["Adam", "Layout", "ROLES", "RunStepCallback", "Weights", "available_cpus", "clip_per_run", "draw_batch",
           "evaluate", "init_run", "loss_and_grads", "param_layout", "run_fast", "step_flops",
           "train_group", "train_kernel"]
