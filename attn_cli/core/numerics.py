"""How this process computes: the numeric mode (which CPU kernels PyTorch, MKL and oneDNN may use) and the
device, never by a silent fallback, with a GPU's precision and identity (``docs/design.md``, this module's section)."""

from __future__ import annotations

import functools
import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from types import ModuleType

from attn_cli.errors import AttnError

MODES = ("portable", "native")
DEFAULT_MODE = "portable"
MODE_VAR = "ATTN_NUMERICS"  # the mode this process (and its children) computes under
# every variable the portable mode sets; the native mode removes them all
PIN_VARS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
DEVICE_CHOICES = ("cpu", "cuda", "auto")
FAST_VAR = "ATTN_CUDA_FAST"  # "1": TF32 and nondeterministic CUDA kernels (speed over bits)
CUBLAS_VAR = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_DETERMINISTIC = ":4096:8"  # a fixed cuBLAS workspace: deterministic matmuls (CUDA >= 10.2)
# torch's fp32 precision settings (torch >= 2.9): the module under torch.backends with an fp32_precision
FP32_SETTINGS = {"matmul": "cuda.matmul", "cudnn_conv": "cudnn.conv", "cudnn_rnn": "cudnn.rnn"}


class NumericsError(AttnError):
    """The requested numeric mode cannot hold in this process."""


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``); empty where they cannot be read."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def is_x86_64(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in ("x86_64", "amd64")


def portable_pins(machine: str | None = None, flags: frozenset[str] | None = None) -> dict[str, str]:
    """The environment the portable mode sets on this CPU (or on the one described)."""
    flags = cpu_flags() if flags is None else flags
    if not is_x86_64(machine):
        return {"ATEN_CPU_CAPABILITY": "default"}  # ARM and others: the plain vectorised kernels
    aten, mkl, onednn = ("avx2", "AVX2", "AVX2") if {"avx2", "fma"} <= flags else ("default", "COMPATIBLE", "SSE41")
    return {
        "ATEN_CPU_CAPABILITY": aten,
        "MKL_CBWR": mkl,
        "MKL_NUM_THREADS": "1",
        "ONEDNN_MAX_CPU_ISA": onednn,
        "DNNL_MAX_CPU_ISA": onednn,
    }


def expected_capability(mode: str, machine: str | None = None, flags: frozenset[str] | None = None) -> str | None:
    """ATen's capability name under ``mode``, as torch reports it; None where the CPU's flags cannot tell (native
    mode off x86-64).  Native: torch's own test (AVX512 needs AVX-512 F, BW, VL and DQ; AVX2 needs AVX2 and FMA)."""
    if mode != "native":
        return portable_pins(machine, flags)["ATEN_CPU_CAPABILITY"].upper()
    if not is_x86_64(machine):
        return None
    flags = cpu_flags() if flags is None else flags
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"} <= flags:
        return "AVX512"
    return "AVX2" if {"avx2", "fma"} <= flags else "DEFAULT"


def pin_environment(mode: str, environ: MutableMapping[str, str] = os.environ) -> None:
    """Set (portable) or clear (native) the pins in ``environ``, overriding inherited values; record the mode."""
    if mode not in MODES:
        raise NumericsError(f"unknown numeric mode {mode!r}; choose from {', '.join(MODES)}")
    for name in PIN_VARS:
        environ.pop(name, None)
    if environ.get("MKL_NUM_THREADS") == "1" and environ.get(MODE_VAR) == "portable":
        environ.pop("MKL_NUM_THREADS")  # set by portable mode (a parent's), not by the user
    if mode == "portable":
        environ.update(portable_pins())
    environ[MODE_VAR] = mode


def apply(mode: str) -> None:
    """Make this process (and its children) compute under ``mode``; call it before torch runs any
    operator.  Raises NumericsError when torch in this process already committed to other kernels."""
    saved = {name: os.environ.get(name) for name in (*PIN_VARS, "MKL_NUM_THREADS", MODE_VAR)}
    pin_environment(mode)
    if "torch" in sys.modules:  # already imported: its capability may be fixed already
        have, want = effective_isa(), expected_capability(mode)
        if want is not None and have != want:
            for name in saved:  # refused: the environment as it was
                os.environ.pop(name, None)
            os.environ.update({name: value for name, value in saved.items() if value is not None})
            raise NumericsError(
                f"--numerics {mode} needs {want} kernels, but torch in this process already runs {have} "
                "kernels (the choice is made once per process); run attn in a new process"
            )


def current_mode() -> str:
    """The mode this process was put in (``native`` when nothing pinned it), read back from the
    environment :func:`apply` set: for child processes, the C kernel's flags, and defaults."""
    mode = os.environ.get(MODE_VAR, "")
    return mode if mode in MODES else "native"


def effective_isa() -> str:
    """The CPU kernels torch actually dispatches to here, e.g. ``AVX2`` or ``AVX512`` (imports torch)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def describe(device: str = "cpu", mode: str | None = None) -> dict:
    """The numeric mode and ISA recorded in JSON configs and reports (``mode`` None: this process's):
    :func:`key`'s, with torch's ISA once torch is imported (else every result came from the cache)."""
    return key(device, mode, measured="torch" in sys.modules)


def stamp(obj: dict) -> dict:
    """Record :func:`describe` under ``obj["config"]["numerics"]`` (a result dumped as a dict):
    this process's mode, that of the ``--numerics`` that computed (or looked up) the Result."""
    config = obj.get("config") if isinstance(obj, dict) else None
    if isinstance(config, dict):
        config["numerics"] = describe(str(config.get("device") or "cpu"))
    return obj


def key(device: str = "cpu", mode: str | None = None, measured: bool = False) -> dict:
    """The numeric mode and ISA for a cache key: in portable mode the pinned ISA (no torch import: a
    cached rerun stays fast), in native mode (or ``measured``) torch's; on cuda :func:`describe_cuda` under ``cuda``."""
    mode = mode or current_mode()
    pinned = mode == "portable" and not measured
    record: dict = {"mode": mode, "isa": expected_capability(mode) if pinned else effective_isa()}
    if is_cuda(device):
        record["cuda"] = describe_cuda()
    return record


# --------------------------------------------------------------------------- the device and its GPU


def resolve_device(name: str) -> str:
    """'cpu' -> 'cpu'; 'cuda' -> 'cuda' or AttnError if absent; 'auto' -> cuda if available."""
    if name not in DEVICE_CHOICES:
        raise AttnError(f"unknown device {name!r}; choose from {', '.join(DEVICE_CHOICES)}")
    if name == "cpu":
        return name
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise AttnError(
            "--device cuda was requested but CUDA is not available on this machine "
            "(use --device cpu, or --device auto to pick CUDA only when present)"
        )
    return "cpu"


def is_cuda(device: str) -> bool:
    return str(device).split(":")[0] == "cuda"


def cuda_fast(environ: Mapping[str, str] = os.environ) -> bool:
    """True when ``ATTN_CUDA_FAST`` asks for speed over bits (``1``, ``true``, ``yes``)."""
    return environ.get(FAST_VAR, "").strip().lower() in ("1", "true", "yes")


def _fp32_api(torch: ModuleType) -> dict:
    """The modules of torch's fp32_precision API that this torch has (empty before 2.9)."""
    found = {
        n: functools.reduce(lambda o, part: getattr(o, part, None), p.split("."), torch.backends)
        for n, p in FP32_SETTINGS.items()
    }
    return {name: module for name, module in found.items() if hasattr(module, "fp32_precision")}


def precision(fast: bool | None = None) -> dict:
    """The settings :func:`prepare_device` applies on cuda (default: as ``ATTN_CUDA_FAST`` says), recorded in
    cache keys and JSON configs; no torch import (fp32 settings as torch >= 2.9's ``fp32_precision`` values)."""
    fast = cuda_fast() if fast is None else fast
    return {
        "deterministic": not fast,
        "cublas_workspace": None if fast else CUBLAS_DETERMINISTIC,
        "cudnn_deterministic": not fast,
        "cudnn_benchmark": False,
        **dict.fromkeys(FP32_SETTINGS, "tf32" if fast else "ieee"),  # matmul, cudnn_conv, cudnn_rnn
        "fast": fast,
    }


def prepare_device(device: str, fast: bool | None = None, environ: MutableMapping[str, str] = os.environ) -> dict:
    """Make this process compute on ``device`` as :func:`precision` says; returns the settings
    ({} on cpu, where nothing is changed).  Idempotent; call it before the first CUDA work
    (cuBLAS reads ``CUBLAS_WORKSPACE_CONFIG`` when it makes its first handle)."""
    if not is_cuda(device):
        return {}
    settings = precision(fast)
    if settings["cublas_workspace"]:
        environ[CUBLAS_VAR] = settings["cublas_workspace"]
    import torch

    torch.use_deterministic_algorithms(settings["deterministic"])
    torch.backends.cudnn.deterministic = settings["cudnn_deterministic"]
    torch.backends.cudnn.benchmark = settings["cudnn_benchmark"]
    api = _fp32_api(torch)
    if len(api) == len(FP32_SETTINGS):  # torch >= 2.9: only the new API (mixing the two is an error there)
        for name, module in api.items():
            module.fp32_precision = settings[name]
    else:  # older torch: the legacy flags (cuDNN's covers its RNNs)
        torch.backends.cuda.matmul.allow_tf32 = settings["matmul"] == "tf32"
        torch.backends.cudnn.allow_tf32 = settings["cudnn_rnn"] == "tf32"
    return settings


def driver_version() -> str:
    """The NVIDIA driver's version from ``nvidia-smi``; "unknown" where it cannot be read."""
    import shutil
    import subprocess  # here, not at the top: options.py imports this module for attn --help

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "unknown"
    query = [exe, "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"]
    try:
        proc = subprocess.run(query, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = proc.stdout.strip().splitlines() if proc.returncode == 0 else []
    return lines[0].strip() if lines and lines[0].strip() else "unknown"


@functools.cache
def gpu_identity(index: int = 0) -> dict:
    """The GPU a cuda run uses: model, compute capability, CUDA, cuDNN and driver versions
    (``gpu`` "none" where CUDA is not available: a key can still be made, never a run)."""
    import torch

    cuda = str(torch.version.cuda)
    if not torch.cuda.is_available():
        return {"gpu": "none", "capability": "unknown", "cuda": cuda, "cudnn": "none", "driver": "unknown"}
    major, minor = torch.cuda.get_device_capability(index)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "gpu": torch.cuda.get_device_name(index),
        "capability": f"{major}.{minor}",
        "cuda": cuda,
        "cudnn": str(cudnn) if cudnn else "none",
        "driver": driver_version(),
    }


def describe_cuda(fast: bool | None = None) -> dict:
    """A cuda run's record: :func:`gpu_identity` and :func:`precision`."""
    return {**gpu_identity(), "precision": precision(fast)}


def cuda_summary(cuda: dict) -> str:
    """One line for reports: ``NVIDIA H200 (compute 9.0), CUDA 12.8, cuDNN 91002, driver
    570.86; deterministic, fp32 matmuls and cuDNN (no TF32)``."""
    if (cuda.get("precision") or {}).get("fast"):
        how = "ATTN_CUDA_FAST: TF32 matmuls and cuDNN, nondeterministic kernels allowed"
    else:
        how = "deterministic, fp32 matmuls and cuDNN (no TF32)"
    return (
        f"{cuda.get('gpu')} (compute {cuda.get('capability')}), CUDA {cuda.get('cuda')}, "
        f"cuDNN {cuda.get('cudnn')}, driver {cuda.get('driver')}; {how}"
    )
