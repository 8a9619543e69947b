"""Device selection, explicit and never a silent fallback; a GPU's settings, and what it is
(design notes: ``docs/design.md``, section ``attn_cli.core.device``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, MutableMapping
from types import ModuleType

from attn_cli.errors import AttnError

DEVICE_CHOICES = ("cpu", "cuda", "auto")
FAST_VAR = "ATTN_CUDA_FAST"  # "1": TF32 and nondeterministic CUDA kernels (speed over bits)
CUBLAS_VAR = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_DETERMINISTIC = ":4096:8"  # a fixed cuBLAS workspace: deterministic matmuls (CUDA >= 10.2)
# torch's fp32 precision settings (torch >= 2.9): the module under torch.backends with an fp32_precision
FP32_SETTINGS = {"matmul": "cuda.matmul", "cudnn_conv": "cudnn.conv", "cudnn_rnn": "cudnn.rnn"}


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_device(name: str) -> str:
    """'cpu' -> 'cpu'; 'cuda' -> 'cuda' or AttnError if absent; 'auto' -> cuda if available."""
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    if name == "cuda" and not cuda_available():
        raise AttnError(
            "--device cuda was requested but CUDA is not available on this machine "
            "(use --device cpu, or --device auto to pick CUDA only when present)"
        )
    if name in ("cpu", "cuda"):
        return name
    raise AttnError(f"unknown device {name!r}; choose from {', '.join(DEVICE_CHOICES)}")


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
    """The settings :func:`prepare_device` applies on cuda (default: as ``ATTN_CUDA_FAST`` says);
    recorded in cache keys and JSON configs.  No torch import: the fp32 API is named as
    ``fp32_precision`` values (torch >= 2.9) or ``allow_tf32`` flags (older)."""
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
