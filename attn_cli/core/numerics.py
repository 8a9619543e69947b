"""The numeric mode: which CPU kernels PyTorch (and MKL, oneDNN) may use (design notes:
``docs/design.md``, section ``attn_cli.core.numerics``)."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import MutableMapping

from attn_cli.errors import AttnError

MODES = ("portable", "native")
DEFAULT_MODE = "portable"
MODE_VAR = "ATTN_NUMERICS"  # the mode this process (and its children) computes under
# every variable the portable mode sets; the native mode removes them all
PIN_VARS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


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
    """ATen's capability name under ``mode`` (as ``torch.backends.cpu.get_cpu_capability()``
    reports it); None where it cannot be told from the CPU's flags (native mode off x86-64).
    Native: torch's own test (AVX512 needs AVX-512 F, BW, VL and DQ; AVX2 needs AVX2 and FMA)."""
    if mode != "native":
        return portable_pins(machine, flags)["ATEN_CPU_CAPABILITY"].upper()
    if not is_x86_64(machine):
        return None
    flags = cpu_flags() if flags is None else flags
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"} <= flags:
        return "AVX512"
    return "AVX2" if {"avx2", "fma"} <= flags else "DEFAULT"


def pin_environment(mode: str, environ: MutableMapping[str, str] = os.environ) -> None:
    """Set (portable) or clear (native) the pins in ``environ``, overriding what the inherited
    environment says, and record the mode."""
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
    """The numeric mode and effective ISA, as recorded in JSON configs and reports (``mode``: the
    one the command applied; None: this process's).  Where torch is not imported yet (every
    result came from the cache), the portable mode's pinned ISA, as :func:`key` records it."""
    return key(device, mode, measured="torch" in sys.modules)


def stamp(obj: dict) -> dict:
    """Record :func:`describe` under ``obj["config"]["numerics"]`` (a result dumped as a dict):
    this process's mode, that of the ``--numerics`` that computed (or looked up) the Result."""
    config = obj.get("config") if isinstance(obj, dict) else None
    if isinstance(config, dict):
        config["numerics"] = describe(str(config.get("device") or "cpu"))
    return obj


def key(device: str = "cpu", mode: str | None = None, measured: bool = False) -> dict:
    """The numeric mode and ISA for a cache key: in portable mode the pinned ISA (no torch
    import: a cached rerun stays fast; each run checks the ISA it really ran with), in native
    mode (or ``measured``) torch's; on cuda also the GPU and its precision settings under ``cuda``
    (:func:`attn_cli.core.device.describe_cuda`)."""
    from attn_cli.core import device as devices

    mode = mode or current_mode()
    pinned = mode == "portable" and not measured
    record: dict = {"mode": mode, "isa": expected_capability(mode) if pinned else effective_isa()}
    if devices.is_cuda(device):
        record["cuda"] = devices.describe_cuda()
    return record
