"""The copy-task fast engine: hand-written gradients, stacking, the C kernel, and that it learns."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from attn_cli.core import copy_fast as cf
from attn_cli.core.copy_fast import kernel
from attn_cli.core.copy_fast.forward import ROLE_OF
from attn_cli.core.copy_spec import VOCAB, RunSpec
from attn_cli.core.copy_train import build_model

MODELS = ["attention", "plain"]
needs_kernel = pytest.mark.skipif(kernel.load() is None, reason=f"C kernel unavailable: {kernel.load_error()}")


def _stacked(model, seeds, B, T, H, dtype=torch.float64):
    specs = [RunSpec(model=model, length=T, seed=s, hidden=H, batch_size=B) for s in seeds]
    inits = [cf.init_run(s) for s in specs]
    flat = torch.stack([f for f, _ in inits]).to(dtype)  # (M, P)
    src, tgt_in = cf.draw_batch([g for _, g in inits], B, T, "cpu")  # (M, B, T)
    return flat, src, tgt_in


def _autograd_grads(model, H, row, src, tgt_in):
    """Loss and gradient of the program's model (copy_train, autograd) at parameters ``row``."""
    net = build_model(model, H).double()
    with torch.no_grad():
        offset = 0
        for p in net.parameters():
            p.copy_(row[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
    loss = nn.functional.cross_entropy(net(src, tgt_in).reshape(-1, VOCAB), src.reshape(-1))
    loss.backward()
    return loss.item(), torch.cat([p.grad.reshape(-1) for p in net.parameters()])


@pytest.mark.parametrize("model", MODELS)
def test_manual_backward_equals_autograd(model):
    B, T, H = 5, 4, 8
    flat, src, tgt_in = _stacked(model, [0, 1], B, T, H)
    grad = torch.zeros_like(flat)
    lay = cf.param_layout(model, H)
    loss = cf.loss_and_grads(cf.Weights(flat, lay), cf.Weights(grad, lay), src, tgt_in, model, H)
    for m in range(2):
        ref_loss, ref_grad = _autograd_grads(model, H, flat[m], src[m], tgt_in[m])
        assert loss[m].item() == pytest.approx(ref_loss, rel=1e-12)
        torch.testing.assert_close(grad[m], ref_grad, rtol=1e-9, atol=1e-12)


@needs_kernel
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("B,T,H", [(5, 4, 8), (7, 9, 20), (3, 1, 16)])
def test_kernel_gradient_equals_reference(model, B, T, H):
    """The C kernel (float32) against the float64 hand-written backward (itself = autograd)."""
    flat, src, tgt_in = _stacked(model, [3], B, T, H)
    grad = torch.zeros_like(flat)
    lay = cf.param_layout(model, H)
    loss = cf.loss_and_grads(cf.Weights(flat, lay), cf.Weights(grad, lay), src, tgt_in, model, H)
    lib = kernel.load()
    off = kernel.offsets(lib, model, H)
    assert lib.param_count(H, int(model == "attention")) == flat.shape[1]
    p32 = flat[0].float().contiguous()
    g32 = torch.zeros_like(p32)
    s = src[0].contiguous()
    k_loss = lib.loss_and_grad(
        p32.data_ptr(), g32.data_ptr(), s.data_ptr(), B, T, H, int(model == "attention"), off.data_ptr()
    )
    assert k_loss == pytest.approx(loss[0].item(), rel=1e-5)
    torch.testing.assert_close(g32.double(), grad[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("model", MODELS)
def test_stacked_runs_equal_runs_one_by_one(model):
    B, T, H = 6, 5, 8
    seeds = [0, 1, 2]
    flat, src, tgt_in = _stacked(model, seeds, B, T, H, torch.float32)
    lay = cf.param_layout(model, H)
    grad = torch.zeros_like(flat)
    loss = cf.loss_and_grads(cf.Weights(flat, lay), cf.Weights(grad, lay), src, tgt_in, model, H)
    for m in range(len(seeds)):
        one, g1 = flat[m : m + 1].clone(), torch.zeros_like(flat[m : m + 1])
        l1 = cf.loss_and_grads(cf.Weights(one, lay), cf.Weights(g1, lay), src[m : m + 1], tgt_in[m : m + 1], model, H)
        torch.testing.assert_close(l1[0], loss[m], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(g1[0], grad[m], rtol=1e-5, atol=1e-7)
    # and through training: clipping and Adam per run
    specs = [RunSpec(model=model, length=T, seed=s, hidden=H, batch_size=B, steps=8, eval_size=40) for s in seeds]
    together = cf.run_fast(specs, backend="torch")
    alone = [cf.run_fast([s], backend="torch")[0] for s in specs]
    for a, b in zip(together, alone):
        assert a.spec == b.spec
        assert a.final_loss == pytest.approx(b.final_loss, rel=1e-5)
        assert a.free_running == pytest.approx(b.free_running, abs=0.05)


def test_clip_is_per_run():
    grad = torch.tensor([[3.0, 4.0], [0.3, 0.4]])  # norms 5 and 0.5
    norms = cf.clip_per_run(grad, 1.0)
    torch.testing.assert_close(norms, torch.tensor([5.0, 0.5]))
    torch.testing.assert_close(grad[0], torch.tensor([0.6, 0.8]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad[1], torch.tensor([0.3, 0.4]))


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_run_fast_returns_sane_outcomes(backend):
    specs = [
        RunSpec(model="attention", length=3, seed=1, steps=20, eval_size=50),
        RunSpec(model="plain", length=3, seed=1, steps=20, eval_size=50),
    ]
    calls = []
    out = cf.run_fast(specs, backend=backend, progress=lambda *a: calls.append(a))
    assert [o.spec for o in out] == specs
    for o in out:
        assert o.engine == "fast"
        for acc in (o.teacher_forced, o.free_running, o.exact):
            assert 0.0 <= acc <= 1.0
        assert o.exact <= o.free_running + 1e-9
        assert o.final_loss == o.final_loss and 0.0 < o.final_loss < 3.0  # not NaN
        assert o.seconds > 0 and o.cpu_seconds > 0
    att, plain = out
    assert len(att.example_src) == 3 and all(0 <= t < 10 for t in att.example_src)
    w = torch.tensor(att.example_weights)  # (decoder step, input position)
    assert w.shape == (3, 3)
    torch.testing.assert_close(w.sum(1), torch.ones(3))
    assert plain.example_weights == [] and plain.example_src == []
    assert {(i, step) for i, step, _, _ in calls} == {(0, 20), (1, 20)}


def test_same_start_and_data_as_exact_engine():
    """Same seed -> same initial weights and same batches as the exact engine: after a few
    steps the two differ only by rounding."""
    from attn_cli.core.copy_train import train_and_evaluate

    spec = RunSpec(length=4, seed=2, steps=15, eval_size=200)
    exact = train_and_evaluate(spec)
    for backend in ("auto", "torch"):
        fast = cf.run_fast([spec], backend=backend)[0]
        assert fast.final_loss == pytest.approx(exact.final_loss, rel=1e-4)
        assert fast.example_src == exact.example_src  # same evaluation batch
        assert fast.teacher_forced == pytest.approx(exact.teacher_forced, abs=0.01)


@needs_kernel
def test_threads_do_not_change_results():
    """Runs in parallel threads start from their own seed's weights (the global RNG is
    used once per run, before any thread starts) and give what they give alone."""
    specs = [RunSpec(length=L, seed=s, steps=10, eval_size=30) for L in (2, 3, 5) for s in (0, 1)]
    alone = [cf.run_fast([s], threads=1, backend="kernel")[0] for s in specs]
    for _ in range(3):
        together = cf.run_fast(specs, threads=3, backend="kernel")
        assert [(o.final_loss, o.free_running) for o in together] == [(o.final_loss, o.free_running) for o in alone]


def test_learns_length_3():
    spec = RunSpec(length=3, seed=0, steps=300, eval_size=300)
    out = cf.run_fast([spec])[0]
    assert out.teacher_forced > 0.95
    assert out.free_running > 0.9


@pytest.mark.parametrize("model", MODELS)
def test_torch_path_is_device_agnostic(model):
    """Every tensor of the step and the evaluation follows its inputs' device: on the meta
    device (shapes only) nothing falls back to a CPU tensor; so ``device='cuda'`` runs the
    same code on the GPU."""
    B, T, H = 4, 3, 8
    flat, src, tgt_in = _stacked(model, [0, 1], B, T, H, torch.float32)
    meta = torch.device("meta")
    flat, src, tgt_in = flat.to(meta), src.to(meta), tgt_in.to(meta)
    grad = torch.zeros_like(flat)
    lay = cf.param_layout(model, H)
    w, g = cf.Weights(flat, lay), cf.Weights(grad, lay)
    loss = cf.loss_and_grads(w, g, src, tgt_in, model, H)
    assert loss.device == meta and loss.shape == (2,)
    cf.clip_per_run(grad, 1.0)
    cf.Adam(flat, 1e-3).step(grad)
    forced, free, exact, example, _ = cf.evaluate(w, src, tgt_in, model, H)
    assert forced.device == meta and forced.shape == (2,)
    if model == "attention":
        assert example.shape == (2, T, T) and example.device == meta
    with pytest.raises(ValueError):
        cf.run_fast([RunSpec()], device="meta", backend="kernel")


def test_bad_backend():
    with pytest.raises(ValueError):
        cf.run_fast([RunSpec(steps=1)], backend="nope")


# --- the two engines' seed distributions (issue 8): same trajectory until rounding parts them ---


def _exact_losses(spec, monkeypatch):
    """Every step's loss of the exact engine (the W9 2.3 loop) and its outcome."""
    from attn_cli.core import copy_train

    monkeypatch.setattr(copy_train, "PROGRESS_EVERY_S", -1.0)  # report every step
    losses = []
    out = copy_train.train_and_evaluate(spec, progress=lambda step, total, loss: losses.append(loss))
    return losses, out


def _fast_losses(specs, backend, monkeypatch):
    """Every step's loss of each run of the fast engine, through run_fast itself."""
    monkeypatch.setattr(cf.training, "PROGRESS_EVERY", 1)  # report (and, for the kernel, call) every step
    losses = [[] for _ in specs]
    out = cf.run_fast(specs, backend=backend, threads=1, progress=lambda i, step, total, loss: losses[i].append(loss))
    return losses, out


def _first_grad_norm(spec):
    torch.manual_seed(spec.seed)
    net = build_model(spec.model, spec.hidden)
    from attn_cli.core.copy_train import make_batch

    src, tgt_in = make_batch(spec.batch_size, spec.length)
    nn.functional.cross_entropy(net(src, tgt_in).reshape(-1, VOCAB), src.reshape(-1)).backward()
    return torch.cat([p.grad.reshape(-1) for p in net.parameters()]).norm().item()


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("backend", ["kernel", "torch"])
def test_per_step_losses_follow_the_exact_engine(model, backend, monkeypatch):
    """Same seed: every step's loss equals the exact engine's to float rounding, with the
    gradient clipping engaged at every step (clip far below the gradient norm), and the
    evaluation (same batch, same argmax) gives the same accuracies.  A wrong data draw,
    clipping or Adam detail parts the two within a few steps."""
    if backend == "kernel" and kernel.load() is None:
        pytest.skip(f"C kernel unavailable: {kernel.load_error()}")
    spec = RunSpec(model=model, length=5, seed=3, steps=40, hidden=16, batch_size=16, eval_size=200, clip=0.02)
    assert _first_grad_norm(spec) > 5 * spec.clip  # clipping really scales the gradient
    exact_losses, exact = _exact_losses(spec, monkeypatch)
    (fast_losses,), (fast,) = _fast_losses([spec], backend, monkeypatch)
    assert len(fast_losses) == len(exact_losses) == spec.steps
    assert exact_losses[-1] < exact_losses[0] - 0.1  # it trains
    for step, (a, b) in enumerate(zip(fast_losses, exact_losses), 1):
        assert a == pytest.approx(b, abs=2e-6), f"step {step}"
    if model == "attention":
        assert fast.example_src == exact.example_src  # the same evaluation batch
    assert fast.teacher_forced == pytest.approx(exact.teacher_forced, abs=0.006)
    assert fast.free_running == pytest.approx(exact.free_running, abs=0.006)


def test_stacked_seeds_train_as_each_seed_alone(monkeypatch):
    """Stacking seeds on the model axis changes no seed's trajectory: per-run clipping
    (engaged at every step here) and per-run Adam state; clipping by the joint norm of
    the stack would change every run's steps."""
    specs = [RunSpec(length=5, seed=s, steps=25, hidden=16, batch_size=16, eval_size=100, clip=0.02) for s in (0, 1, 2)]
    together, out_t = _fast_losses(specs, "torch", monkeypatch)
    for i, spec in enumerate(specs):
        (alone,), (out_a,) = _fast_losses([spec], "torch", monkeypatch)
        for step, (a, b) in enumerate(zip(together[i], alone), 1):
            assert a == pytest.approx(b, abs=1e-6), f"seed {spec.seed} step {step}"
        assert out_t[i].teacher_forced == pytest.approx(out_a.teacher_forced, abs=0.01)


# --- the parameter layout: defined once, derived from the model, handed to the kernel ---


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("H", [8, 32])
def test_layout_is_the_models_parameters(model, H):
    """Roles, shapes and order are those of the exact engine's model, and its initial
    weights fill the layout exactly; deriving it draws nothing from the RNG."""
    state = torch.get_rng_state()
    lay = cf.param_layout(model, H)
    assert torch.equal(state, torch.get_rng_state())
    net = build_model(model, H)
    assert lay.shapes == tuple(tuple(p.shape) for p in net.parameters())
    assert sorted(lay.roles) == sorted(cf.ROLES)
    assert lay.size == sum(p.numel() for p in net.parameters())
    flat, _ = cf.init_run(RunSpec(model=model, hidden=H, seed=5))
    assert flat.shape == (lay.size,)
    w = cf.Weights(flat.unsqueeze(0), lay)  # (1, ...) views of the row, one per role
    torch.manual_seed(5)
    seeded = dict(build_model(model, H).named_parameters())
    for name, role in ROLE_OF.items():
        assert torch.equal(getattr(w, role)[0], seeded[name].detach()), name


@needs_kernel
@pytest.mark.parametrize("model", MODELS)
def test_the_kernel_refuses_a_layout_other_than_its_own(model, monkeypatch):
    """A model whose parameters the kernel does not know (here: the other model's layout,
    another readout width) is refused rather than read at the wrong places."""
    lib = kernel.load()
    other = "plain" if model == "attention" else "attention"
    monkeypatch.setattr(kernel, "param_layout", lambda m, h: cf.param_layout(other, h))
    with pytest.raises(RuntimeError, match="layout"):
        kernel.offsets(lib, model, 16)


@needs_kernel
@pytest.mark.parametrize("model", MODELS)
def test_the_kernel_reads_the_offsets_it_is_given(model, monkeypatch):
    """The same parameters stored in reverse role order give the same loss and gradients,
    bit for bit, once the kernel is handed that layout's offsets: the C side hard-codes none."""
    B, T, H = 4, 5, 8
    att = int(model == "attention")
    flat, src, _ = _stacked(model, [1], B, T, H, torch.float32)
    lay = cf.param_layout(model, H)
    lib = kernel.load()
    p = flat[0].contiguous()
    g = torch.zeros_like(p)
    s = src[0].contiguous()
    off = kernel.offsets(lib, model, H)  # (roles + 1,), kept alive across the call
    loss = lib.loss_and_grad(p.data_ptr(), g.data_ptr(), s.data_ptr(), B, T, H, att, off.data_ptr())
    order = list(range(len(lay.roles)))[::-1]
    sizes = [lay.numel_of(r) for r in lay.roles]
    offsets = [sum(sizes[j] for j in order[:k]) for k in range(len(order))]
    rev = cf.Layout(tuple(lay.roles[i] for i in order), tuple(lay.shapes[i] for i in order), tuple(offsets), lay.size)
    pieces = p.split(sizes)
    p_rev = torch.cat([pieces[i] for i in order])  # (P,) same numbers, reversed roles
    g_rev = torch.zeros_like(p_rev)
    monkeypatch.setattr(kernel, "param_layout", lambda m, h: rev)
    off_rev = kernel.offsets(lib, model, H)
    assert off_rev.tolist() != off.tolist()
    loss_rev = lib.loss_and_grad(p_rev.data_ptr(), g_rev.data_ptr(), s.data_ptr(), B, T, H, att, off_rev.data_ptr())
    assert loss_rev == loss
    back = g_rev.split([sizes[i] for i in order])
    assert torch.equal(torch.cat([back[order.index(i)] for i in range(len(order))]), g)
