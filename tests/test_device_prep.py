"""A CUDA run's settings and record, proven on CPU (issue 18): :func:`prepare_device` applies the
determinism and precision settings on cuda only; the GPU's identity and those settings go into
a cuda run's cache key and JSON (a CPU key is unchanged); the exact engine's pool, the memory
guard and ``scaling --measure`` are sized for one GPU; the fast engine's scatter has a
deterministic form for the GPU while CPU keeps its bits."""

from __future__ import annotations

import types

import pytest
import torch

from attn_cli.core import memory, numerics
from attn_cli.errors import MemoryRefused
from attn_cli.store import cache, entries

FAKE_H200 = {"gpu": "NVIDIA H200", "capability": "9.0", "cuda": "12.8", "cudnn": "91002", "driver": "570.86.15"}


@pytest.fixture
def torch_state(monkeypatch):
    """Restore torch's process-wide flags (and CUBLAS_WORKSPACE_CONFIG) after the test."""
    # set, then removed: monkeypatch restores the original at the end
    for name in (numerics.CUBLAS_VAR, numerics.FAST_VAR):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    api = numerics._fp32_api(torch)
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        {name: m.fp32_precision for name, m in api.items()},
    )
    yield
    torch.use_deterministic_algorithms(saved[0])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[1], saved[2]
    for name, module in api.items():
        module.fp32_precision = saved[3][name]


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU described without one: ``fake_gpu(**changes)`` sets what gpu_identity reports."""

    def describe(**changes):
        monkeypatch.setattr(numerics, "gpu_identity", lambda index=0: {**FAKE_H200, **changes})

    describe()
    return describe


# --------------------------------------------------------------------------- prepare_device


def test_cpu_is_left_alone(torch_state):
    env: dict = {}
    assert numerics.prepare_device("cpu", environ=env) == {}
    assert env == {} and not torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.rnn.fp32_precision == "tf32"  # torch's own default, untouched


def test_cuda_is_deterministic_without_tf32_by_default(torch_state):
    env: dict = {}
    settings = numerics.prepare_device("cuda", environ=env)
    assert env == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert torch.backends.cudnn.conv.fp32_precision == "ieee"
    assert torch.backends.cudnn.rnn.fp32_precision == "ieee"  # the exact engine's GRU: no TF32
    assert settings == numerics.precision(False) and not settings["fast"]
    read_back = {  # what torch in this process is set to now
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        **{name: module.fp32_precision for name, module in numerics._fp32_api(torch).items()},
    }
    assert {k: settings[k] for k in read_back} == read_back


def test_the_fast_switch_turns_speed_back_on_and_says_so(torch_state, monkeypatch):
    numerics.prepare_device("cuda")  # first deterministic ...
    monkeypatch.setenv(numerics.FAST_VAR, "1")
    env: dict = {}
    settings = numerics.prepare_device("cuda:0", environ=env)  # ... then ATTN_CUDA_FAST=1
    assert settings["fast"] and not settings["deterministic"] and env == {}
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic
    assert torch.backends.cuda.matmul.fp32_precision == "tf32" == torch.backends.cudnn.rnn.fp32_precision
    assert numerics.precision() != numerics.precision(False)  # recorded: keys and JSON differ from a deterministic run


@pytest.mark.parametrize(
    "value, fast", [("1", True), ("true", True), ("YES", True), ("0", False), ("", False), ("no", False)]
)
def test_the_switch_reads_ATTN_CUDA_FAST(value, fast):
    assert numerics.cuda_fast({numerics.FAST_VAR: value}) is fast
    assert numerics.cuda_fast({}) is False


def test_older_torch_gets_the_legacy_flags(monkeypatch):
    """torch < 2.9 has no fp32_precision: allow_tf32 off for matmuls and cuDNN (its RNNs too)."""
    cudnn = types.SimpleNamespace(deterministic=False, benchmark=True, allow_tf32=True)
    fake = types.SimpleNamespace(
        backends=types.SimpleNamespace(
            cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)), cudnn=cudnn
        )
    )
    calls = []
    fake.use_deterministic_algorithms = calls.append
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    numerics.prepare_device("cuda", fast=False, environ={})
    assert calls == [True] and cudnn.deterministic and not cudnn.benchmark
    assert fake.backends.cuda.matmul.allow_tf32 is False and cudnn.allow_tf32 is False


def test_the_cli_prepares_the_device_it_resolves(monkeypatch):
    from attn_cli.cli import options

    seen = []
    monkeypatch.setattr(numerics, "resolve_device", lambda name: "cuda")
    monkeypatch.setattr(numerics, "prepare_device", seen.append)
    assert options._resolve_device(None, None, "cuda") == "cuda"
    assert seen == ["cuda"]


class _Prepared(Exception):
    pass


@pytest.mark.parametrize(
    "module, call",
    [
        ("attn_cli.core.copy_fast.training", lambda m, spec: m.run_fast([spec], "cuda", backend="torch")),
        ("attn_cli.core.copy_train", lambda m, spec: m.train_and_evaluate(spec, "cuda")),
    ],
)
def test_both_engines_prepare_the_device_first(module, call, monkeypatch):
    """Each engine (and so each exact-engine worker process) prepares cuda before its first op."""
    import importlib

    from attn_cli.core.copy_spec import RunSpec

    mod = importlib.import_module(module)

    def prepare(device):
        raise _Prepared(device)

    monkeypatch.setattr(mod, "prepare_device", prepare)
    with pytest.raises(_Prepared, match="cuda"):
        call(mod, RunSpec(model="attention", length=4, seed=0, steps=1))


# --------------------------------------------------------------------------- what is recorded


def test_a_cpu_key_is_unchanged():
    fields = {"experiment": "x", "config": {"device": "cpu"}}
    key = entries.cache_key(fields, entries.RESULT_CODE_GLOBS, numerics.key())
    assert set(key["numerics"]) == {"mode", "isa"}  # exactly the record CPU keys always had
    assert key == entries.cache_key(fields, entries.RESULT_CODE_GLOBS, numerics.key("cpu"))


def test_a_cuda_key_names_the_gpu_and_changes_with_it(fake_gpu):
    fields = {"experiment": "x", "config": {"device": "cuda"}}
    h200 = entries.cache_key(fields, entries.RESULT_CODE_GLOBS, numerics.key("cuda"))
    assert h200["numerics"]["cuda"]["gpu"] == "NVIDIA H200"
    assert h200["numerics"]["cuda"]["precision"]["cudnn_rnn"] == "ieee"
    assert h200 != entries.cache_key(fields, entries.RESULT_CODE_GLOBS, numerics.key("cpu"))
    seen = {cache.digest(h200)}
    for change in (
        {"driver": "575.51.03"},
        {"gpu": "NVIDIA A100-SXM4-80GB", "capability": "8.0"},
        {"cudnn": "90100"},
        {"cuda": "12.6"},
    ):
        fake_gpu(**change)
        seen.add(cache.digest(entries.cache_key(fields, entries.RESULT_CODE_GLOBS, numerics.key("cuda"))))
    assert len(seen) == 5  # another GPU or driver: another entry, never a reuse


def test_a_cuda_key_changes_with_the_fast_switch(fake_gpu, monkeypatch):
    fields = {"experiment": "x"}
    monkeypatch.delenv(numerics.FAST_VAR, raising=False)
    exact = entries.cache_key(fields, entries.RESULT_CODE_GLOBS, numerics.key("cuda"))
    monkeypatch.setenv(numerics.FAST_VAR, "1")
    assert entries.cache_key(fields, entries.RESULT_CODE_GLOBS, numerics.key("cuda")) != exact


def test_the_copy_task_key_carries_the_gpu_on_cuda_only(fake_gpu):
    from attn_cli.core.copy_spec import RunSpec
    from attn_cli.experiments.copy_task.config import cache_key

    spec = RunSpec(model="attention", length=4, seed=0, steps=1)
    assert "cuda" not in cache_key(spec, "fast", "cpu")["numerics"]
    assert cache_key(spec, "fast", "cuda")["numerics"]["cuda"]["driver"] == "570.86.15"


def test_json_configs_record_the_gpu_on_cuda_only(fake_gpu):
    on_gpu = numerics.stamp({"config": {"device": "cuda"}})["config"]["numerics"]
    assert on_gpu["cuda"]["capability"] == "9.0" and on_gpu["cuda"]["precision"]["deterministic"] is True
    assert "cuda" not in numerics.stamp({"config": {"device": "cpu"}})["config"]["numerics"]


def test_the_report_line_names_gpu_versions_and_precision(monkeypatch):
    line = numerics.cuda_summary({**FAKE_H200, "precision": numerics.precision(False)})
    for part in ("NVIDIA H200", "compute 9.0", "CUDA 12.8", "cuDNN 91002", "driver 570.86.15", "no TF32"):
        assert part in line
    assert "ATTN_CUDA_FAST" in numerics.cuda_summary({**FAKE_H200, "precision": numerics.precision(True)})


def test_the_report_and_the_page_name_the_gpu_of_a_cuda_run():
    from attn_cli.render import html, report

    cuda = {**FAKE_H200, "precision": numerics.precision(False)}
    manifest = {
        "command": "attn all",
        "quick": False,
        "seed": 0,
        "device": "cuda",
        "timing": {"seconds": 1.0},
        "versions": {"attn": "0", "torch": "2.13", "python": "3.11", "numpy": "2"},
        "machine": {"cpu": "x", "gpu": "NVIDIA H200"},
        "numerics": {"mode": "portable", "isa": "AVX2", "cuda": cuda},
        "artifacts": {},
        "missing": [],
        "engines": {},
        "cache": [],
    }
    kwargs = dict(catalogue=[], sections=[], manifest=manifest, summary=None, coverage_line=None)
    for text in (report.index_markdown(**kwargs), html.index_html(outcomes=[], **kwargs)):
        assert "NVIDIA H200 (compute 9.0), CUDA 12.8, cuDNN 91002, driver 570.86.15" in text
    manifest["numerics"] = {"mode": "portable", "isa": "AVX2"}  # a CPU run: no GPU line
    assert "cuDNN" not in report.index_markdown(**kwargs) and "cuDNN" not in html.index_html(outcomes=[], **kwargs)


def test_without_cuda_a_cuda_key_can_still_be_made(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    numerics.gpu_identity.cache_clear()
    try:
        assert numerics.gpu_identity()["gpu"] == "none"
    finally:
        numerics.gpu_identity.cache_clear()


def test_the_driver_is_unknown_without_nvidia_smi(monkeypatch):
    import shutil  # device.py imports it where it looks for nvidia-smi (not at start-up)

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert numerics.driver_version() == "unknown"


# --------------------------------------------------------------------------- sized for one GPU


def test_the_exact_engine_uses_one_worker_on_cuda():
    from attn_cli.experiments.copy_task.config import Config, processes

    assert Config(device="cuda").worker_count() == 1
    assert Config(device="cuda", jobs=3).worker_count() == 3  # asked for: granted
    assert Config(device="cpu").worker_count() >= 1
    cfg = Config(device="cuda", jobs=4, lengths=(4, 8, 16, 32), model="attention")
    assert processes(cfg, cfg.plan()) == 5  # this process and four workers: five CUDA contexts


def test_the_guard_counts_a_cuda_context_per_process(monkeypatch):
    assert memory.CUDA_CONTEXT_BYTES == 512 * 2**20  # ~0.5 GB each, as issue 18 measured
    free = {"cpu": 10**12, "cuda": 4 * 2**30}  # 4 GiB free on the GPU: 2 GiB budget at fraction 0.5
    monkeypatch.setattr(memory, "bounds", lambda device="cpu": [(free[device.split(":")[0]], f"free on {device}")])
    memory.guard(2**20, "a run", "cuda", processes=1)
    with pytest.raises(MemoryRefused, match="4 CUDA context"):
        memory.guard(2**20, "a run", "cuda", processes=4)
    memory.guard(2**20, "a run", "cpu", processes=4)  # no context on CPU


def _scaling_with_gpu_memory(monkeypatch, gpu_free: int):
    from attn_cli.experiments import scaling

    monkeypatch.setattr(
        memory,
        "bounds",
        lambda device="cpu": [(gpu_free if device.startswith("cuda") else 10**12, f"free on {device}")],
    )
    return scaling


def test_scaling_on_a_gpu_drops_only_the_sizes_that_do_not_fit(monkeypatch):
    scaling = _scaling_with_gpu_memory(monkeypatch, gpu_free=2 * 10**9)  # 1 GB budget
    config = scaling.Config(device="cuda", measure=True, measure_lengths=(2048, 4096, 16384, 32768))
    dropped = scaling.check_measurable(config)
    assert [n for n, _ in dropped] == [16384, 32768]  # 2.1 GB and 8.6 GB of scores: over 1 GB
    assert all("refused before starting" in why for _, why in dropped)


def test_scaling_on_a_gpu_refuses_when_nothing_fits(monkeypatch):
    scaling = _scaling_with_gpu_memory(monkeypatch, gpu_free=10**6)
    with pytest.raises(MemoryRefused, match="no size fits on cuda"):
        scaling.check_measurable(scaling.Config(device="cuda", measure=True, measure_lengths=(2048, 4096)))


def test_scaling_on_cpu_still_refuses_the_whole_measurement(monkeypatch):
    from attn_cli.experiments import scaling

    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 2 * 10**9)
    with pytest.raises(MemoryRefused):
        scaling.check_measurable(scaling.Config(device="cpu", measure=True, measure_lengths=(2048, 32768)))


# --------------------------------------------------------------------------- the fast engine's scatter


@pytest.mark.parametrize("T, M", [(4, 1), (8, 3), (32, 8)])
def test_scatter_keeps_index_add_bits_on_cpu_and_the_gpu_form_agrees(T, M):
    from attn_cli.core.copy_fast.backward import scatter

    gen = torch.Generator().manual_seed(T * 10 + M)
    grad = torch.randn(T, M, 64, 96, generator=gen)  # (T, M, B, G)
    tokens = torch.randint(0, 12, (T, M, 64), generator=gen)  # (T, M, B)
    reference = torch.zeros(M, 12, 96)
    for t in range(T):  # index_add_'s order: row by row, as the engine always summed on CPU
        for m in range(M):
            reference[m].index_add_(0, tokens[t, m], grad[t, m])
    ours = scatter(grad, tokens, 12)
    assert torch.equal(ours, reference)  # CPU: the same bits as before issue 18
    torch.testing.assert_close(scatter(grad, tokens, 12, onehot=True), reference, rtol=0, atol=1e-4)
