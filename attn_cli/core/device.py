"""Device selection: explicit, never a silent fallback."""

from __future__ import annotations

from attn_cli.errors import AttnError

DEVICE_CHOICES = ("cpu", "cuda", "auto")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_device(name: str) -> str:
    """'cpu' -> 'cpu'; 'cuda' -> 'cuda' or AttnError if absent; 'auto' -> cuda if available."""
    if name == "cpu":
        return "cpu"
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    if name == "cuda":
        if not cuda_available():
            raise AttnError("--device cuda was requested but CUDA is not available on this machine "
                            "(use --device cpu, or --device auto to pick CUDA only when present)")
        return "cuda"
    raise AttnError(f"unknown device {name!r}; choose from {', '.join(DEVICE_CHOICES)}")
