"""The optimiser the trainers share (:mod:`attn_cli.core.optim`): torch.optim.Adam stepped
through the functions under its torch.compile wrappers, the same bits, no torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import torch


def _adam_trajectory(program_calls: bool, steps: int = 25) -> list[torch.Tensor]:
    """Parameters and Adam moments after ``steps`` steps of a small attention model."""
    from attn_cli.core.copy_train import build_model, make_batch
    from attn_cli.core.optim import adam

    torch.manual_seed(3)
    model = build_model("attention", 8)
    params = list(model.parameters())
    opt = adam(params, 3e-3, program_calls=program_calls)
    for _ in range(steps):
        src, tgt_in = make_batch(16, 5)
        loss = torch.nn.functional.cross_entropy(model(src, tgt_in).reshape(-1, 12), src.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    moments = [opt.state[p][key] for p in params for key in ("exp_avg", "exp_avg_sq", "step")]
    return [p.detach().clone() for p in params] + moments


def test_adam_without_dynamo_steps_as_the_public_methods_bit_for_bit():
    lean, public = _adam_trajectory(False), _adam_trajectory(True)
    assert len(lean) == len(public) == 4 * 11  # 11 parameter tensors, each with two moments and a step count
    assert all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(lean, public))
    assert not torch.equal(lean[0], _adam_trajectory(False, steps=24)[0])  # the steps do move the weights


def test_no_trainer_imports_torch_dynamo():
    """Adam's public methods import torch._dynamo (with sympy: 1.2-1.4 s before the first
    step); the exact engine and exercises 1 and 12 step the same Adam without them, the
    copy task the program's way only with program_layout=True."""
    code = (
        "import sys, torch\n"
        "from attn_cli.core.copy_spec import RunSpec\n"
        "from attn_cli.core.copy_train import train_and_evaluate as t\n"
        "from attn_cli.experiments.exercises import ex01_readouts, ex12_learned\n"
        "from attn_cli.experiments.exercises.common import Config\n"
        "t(RunSpec(length=3, steps=2, eval_size=4))\n"
        "ex01_readouts.run(Config(samples=100, mlp_hidden=4, mlp_steps=2, mlp_points=16))\n"
        "ex12_learned.train(2, 2, 0, 'cpu')\n"
        "a = 'torch._dynamo' in sys.modules\n"
        "t(RunSpec(length=3, steps=2, eval_size=4), program_layout=True)\n"
        "print(a, 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
