"""The copy-task kernel's variants (AVX2, AVX-512) give the same bits; ATTN_KERNEL_ISA picks one.

The AVX-512 comparison needs a CPU with AVX-512: elsewhere it is skipped and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch

from attn_cli.core import numerics
from attn_cli.core.copy_fast import init_run, kernel, train_kernel
from attn_cli.core.copy_spec import RunSpec
from attn_cli.errors import AttnError

AVX2_HOST = frozenset({"sse2", "avx", "avx2", "fma"})
AVX512_HOST = AVX2_HOST | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
HOST = numerics.cpu_flags()

needs_cc = pytest.mark.skipif(kernel._compiler() is None, reason="no C compiler")
needs_avx2 = pytest.mark.skipif(
    not (numerics.is_x86_64() and kernel.VARIANT_NEEDS["avx2"] <= HOST),
    reason="this host has no AVX2 + FMA: no kernel variant to compare",
)
needs_avx512 = pytest.mark.skipif(
    not (numerics.is_x86_64() and kernel.VARIANT_NEEDS["avx512"] <= HOST),
    reason="this host has no AVX-512 (F, CD, BW, DQ, VL): the AVX-512 kernel cannot run here, "
    "so its bits cannot be compared with the AVX2 kernel's",
)

# (model, batch, length, hidden, steps): the shapes, every length % 4 (the one sum whose
# order depends on it), hiddens that leave gemm tails in rows and columns
CONFIGS = [
    ("attention", 64, 4, 32, 12),
    ("attention", 64, 16, 32, 4),
    ("plain", 64, 8, 32, 12),
    ("attention", 13, 5, 8, 20),
    ("attention", 9, 7, 24, 20),
    ("attention", 11, 10, 40, 10),
    ("attention", 5, 3, 20, 20),
    ("plain", 7, 9, 20, 20),
    ("attention", 3, 1, 16, 20),
]


def _train(lib, model, B, T, H, steps, seed=3):
    """``steps`` kernel steps from seed's start: per-step losses, parameters, Adam moments and
    the gradient of one more step, as raw bits."""
    flat, gen = init_run(RunSpec(model=model, length=T, seed=seed, steps=steps, hidden=H, batch_size=B))
    params = flat.float().contiguous()
    grad, m1, m2 = (torch.zeros_like(params) for _ in range(3))
    off = kernel.offsets(lib, model, H)
    src = torch.randint(0, 10, (steps * B, T), generator=gen)
    losses = torch.empty(steps)
    att = int(model == "attention")
    assert (
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
            att,
            5e-3,
            1.0,
            losses.data_ptr(),
            off.data_ptr(),
        )
        == 0
    )
    g = torch.zeros_like(params)
    loss = lib.loss_and_grad(
        params.data_ptr(), g.data_ptr(), src[:B].contiguous().data_ptr(), B, T, H, att, off.data_ptr()
    )
    return {
        "losses": losses,
        "params": params,
        "m1": m1,
        "m2": m2,
        "grad": g,
        "loss": torch.tensor([loss], dtype=torch.float64),
    }


def _bits(t: torch.Tensor) -> list[int]:
    return t.view(torch.int64 if t.dtype == torch.float64 else torch.int32).tolist()


@needs_cc
@needs_avx512
def test_avx512_and_avx2_variants_give_identical_bits():
    """Every per-step loss, parameter, Adam moment and gradient, bit for bit."""
    wide, narrow = kernel.load_variant("avx512"), kernel.load_variant("avx2")
    assert (wide.kernel_isa(), narrow.kernel_isa()) == (b"avx512", b"avx2")  # really two builds
    for config in CONFIGS:
        a, b = _train(wide, *config), _train(narrow, *config)
        for name in a:
            assert _bits(a[name]) == _bits(b[name]), f"{config}: {name} differs between avx512 and avx2"


@needs_cc
@needs_avx512
def test_avx512_and_avx2_runs_give_identical_losses_and_accuracies():
    """Whole runs (training, then evaluation) with each variant: the same outcome, bit for bit."""
    spec = RunSpec(model="attention", length=5, seed=1, steps=60, eval_size=64)
    seen = {}
    for which in ("avx512", "avx2"):
        losses = []
        out = train_kernel(
            spec, kernel.load_variant(which), lambda i, step, total, loss, losses=losses: losses.append(loss)
        )[0]
        seen[which] = (
            losses,
            out.final_loss,
            out.teacher_forced,
            out.free_running,
            out.exact,
            out.diagonal,
            out.example_weights,
        )
    assert seen["avx512"] == seen["avx2"]


@needs_cc
@needs_avx2
def test_a_build_without_vectors_gives_the_same_bits():
    """The compiler's baseline ISA (x86-64: no AVX, fmaf from libm) computes what AVX2 does."""
    base, narrow = kernel.load_variant("baseline"), kernel.load_variant("avx2")
    assert base.kernel_isa() == b"baseline"
    for config in [("attention", 17, 6, 32, 4), ("attention", 9, 7, 24, 4), ("plain", 9, 6, 33, 4)]:
        a, b = _train(base, *config), _train(narrow, *config)
        for name in a:
            assert _bits(a[name]) == _bits(b[name]), f"{config}: {name} differs between baseline and avx2"


@needs_cc
@needs_avx2
def test_the_bits_are_those_of_the_kernel_before_the_variants():
    """A digest of 12 steps of the issue's shape (attention, length 4 and 5), as computed by the
    kernel before it had variants (built with -ffp-contract=fast for x86-64-v3).  A change to
    the kernel's arithmetic changes it: that is a change to the fast engine's numbers."""
    lib = kernel.load_variant("avx2")
    digests = []
    for config in [("attention", 64, 4, 32, 12), ("attention", 13, 5, 8, 12), ("plain", 64, 8, 32, 12)]:
        out = _train(lib, *config)
        digests.append(hashlib.sha256(b"".join(out[n].numpy().tobytes() for n in out)).hexdigest()[:16])
    assert digests == FIRST_KERNEL_DIGESTS


FIRST_KERNEL_DIGESTS = ["029d8d4b6f99edf1", "ebf4aaf24ebff2a7", "79684eed4f61706d"]


@needs_cc
def test_a_reused_work_space_changes_no_bit():
    """train_steps_in on a work space kept across chunks (here filled with NaN first, as if
    left dirty) computes what train_steps does with a fresh one every call."""
    lib = kernel.load()
    if lib is None:
        pytest.skip(f"C kernel unavailable: {kernel.load_error()}")
    model, B, T, H = "attention", 13, 5, 8
    results = []
    for reuse in (False, True):
        flat, gen = init_run(RunSpec(model=model, length=T, seed=2, hidden=H, batch_size=B))
        params = flat.float().contiguous()
        grad, m1, m2 = (torch.zeros_like(params) for _ in range(3))
        off = kernel.offsets(lib, model, H)
        work = torch.full((lib.work_floats(B, T, H, 1),), float("nan"))
        losses = []
        for chunk in range(2):
            src = torch.randint(0, 10, (10 * B, T), generator=gen)
            out = torch.empty(10)
            args = [
                params.data_ptr(),
                grad.data_ptr(),
                m1.data_ptr(),
                m2.data_ptr(),
                chunk * 10,
                src.data_ptr(),
                10,
                B,
                T,
                H,
                1,
                5e-3,
                1.0,
                out.data_ptr(),
                off.data_ptr(),
            ]
            assert (lib.train_steps_in(*args, work.data_ptr()) if reuse else lib.train_steps(*args)) == 0
            losses.append(out)
        results.append(_bits(torch.cat(losses)) + _bits(params))
    assert results[0] == results[1]


def test_auto_takes_the_widest_variant_the_cpu_runs():
    assert kernel.variant("portable", "x86_64", AVX512_HOST, request="auto") == "avx512"
    assert kernel.variant("portable", "x86_64", AVX2_HOST, request="") == "avx2"
    assert kernel.variant("portable", "x86_64", AVX2_HOST - {"fma"}, request="") == "baseline"
    assert kernel.variant("portable", "x86_64", AVX512_HOST - {"avx512cd"}, request="") == "avx2"
    assert kernel.variant("portable", "aarch64", frozenset({"asimd"}), request="auto") == "baseline"
    assert kernel.variant("native", "x86_64", AVX512_HOST, request="auto") == "native"


def test_attn_kernel_isa_forces_a_variant():
    assert kernel.variant("portable", "x86_64", AVX512_HOST, request="avx2") == "avx2"
    assert kernel.variant("native", "x86_64", AVX512_HOST, request="AVX512") == "avx512"


@pytest.mark.parametrize(
    "request_, flags, message",
    [
        ("avx3", AVX512_HOST, "ATTN_KERNEL_ISA='avx3' is not a kernel variant; choose from avx2, avx512, auto"),
        ("native", AVX512_HOST, "ATTN_KERNEL_ISA='native' is not a kernel variant"),
        ("avx512", AVX2_HOST, "ATTN_KERNEL_ISA=avx512: this CPU cannot run the avx512 kernel (it lacks avx512bw"),
        ("avx2", frozenset({"sse2"}), "ATTN_KERNEL_ISA=avx2: this CPU cannot run the avx2 kernel (it lacks avx2, fma)"),
    ],
)
def test_a_bad_attn_kernel_isa_is_an_error_naming_the_variable(request_, flags, message):
    with pytest.raises(AttnError) as info:
        kernel.variant("portable", "x86_64", flags, request=request_)
    assert str(info.value).startswith(message)


def test_load_refuses_a_bad_attn_kernel_isa_before_building(monkeypatch):
    monkeypatch.setenv(kernel.ISA_VAR, "sse9")
    monkeypatch.setattr(kernel, "_compiler", lambda: pytest.fail("nothing is built"))
    saved = kernel._state
    kernel._state = kernel._State()  # a fresh loader state
    try:
        with pytest.raises(kernel.KernelIsaError, match="ATTN_KERNEL_ISA='sse9'"):
            kernel.load()
        assert not kernel._state.tried  # a fixed variable is honoured by the next call
    finally:
        kernel._state = saved


def test_the_build_key_covers_the_variant(monkeypatch):
    monkeypatch.setattr(kernel, "compiler_version", lambda cc: "cc (GCC) 12.2.0")
    monkeypatch.setattr(kernel, "accepts", lambda cc, flags: True)
    keys = {kernel.build_key("cc", "portable", which) for which in ("avx512", "avx2", "baseline")}
    assert len(keys) == 3
    assert "-march=x86-64-v4" in kernel.compile_flags("cc", "portable", "avx512")
    assert "-ffp-contract=off" in kernel.BASE_FLAGS  # fused only where the source says so


def _attn(*args, env):
    exe = os.path.join(os.path.dirname(sys.executable), "attn")
    child = {k: v for k, v in os.environ.items() if k != kernel.ISA_VAR} | env
    return subprocess.run([exe, *args], capture_output=True, text=True, env=child, timeout=600)


def test_the_cli_names_a_bad_attn_kernel_isa_in_one_line(tmp_path):
    proc = _attn(
        "copy-task",
        "--engine",
        "fast",
        "--quick",
        "--steps",
        "1",
        "--lengths",
        "3",
        "--json",
        "--out",
        str(tmp_path),
        env={kernel.ISA_VAR: "avx3"},
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: ATTN_KERNEL_ISA='avx3' is not a kernel variant; choose from avx2, avx512, auto"], (
        proc.stderr
    )


@needs_cc
@needs_avx2
def test_each_run_records_the_variant_that_ran(tmp_path):
    proc = _attn(
        "copy-task",
        "--engine",
        "fast",
        "--quick",
        "--steps",
        "2",
        "--lengths",
        "3",
        "--json",
        "--out",
        str(tmp_path),
        "--no-cache",
        env={kernel.ISA_VAR: "avx2"},
    )
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert {(r["backend"], r["kernel_isa"]) for r in runs} == {("kernel", "avx2")}
