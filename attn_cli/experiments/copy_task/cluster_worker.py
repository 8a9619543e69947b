"""The copy task's runs on a Dask worker: what :mod:`.cluster` submits (:func:`train_on_worker`:
plain data in and out, no tensor) and the worker's set-up (:func:`prepare_worker`, run by the
preload :mod:`attn_cli.dask_worker`).
"""

from __future__ import annotations

import dataclasses
import importlib
import platform
import socket
from contextlib import suppress

from attn_cli.core import numerics
from attn_cli.core.copy_spec import RunSpec
from attn_cli.experiments.copy_task.cache import code_digest
from attn_cli.experiments.copy_task.engines import WARM_MODULES, fast_engine

FIELD_CHARS = 200  # at most this many characters of a worker's address, host name or CPU model


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else the platform's processor string."""
    with suppress(OSError), open(cpuinfo, encoding="utf-8", errors="replace") as f:
        for key, _, value in (line.partition(":") for line in f):
            if key.strip() in ("model name", "Model", "cpu model"):
                return value.strip()[:FIELD_CHARS]
    return (platform.processor() or platform.machine())[:FIELD_CHARS]


def where() -> dict[str, str]:
    """Where this task runs: the Dask worker's address (empty outside a worker), host, CPU."""
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # not inside a Dask worker (a direct call, a test)
        address = ""
    return {"worker": address[:FIELD_CHARS], "host": socket.gethostname()[:FIELD_CHARS], "cpu": cpu_model()}


TOPIC = "attn-copy-task-started"  # each attempt of a run says on this Dask event topic that it started


PRELOADED_MODE: str | None = None  # the numeric mode prepare_worker pinned in this process; None: not preloaded


def prepare_worker(mode: str) -> None:
    """Make this Dask worker process ready to train: ``mode`` pinned before torch loads, one intra-op
    thread, the training code imported (:data:`.engines.WARM_MODULES`).  From then on it computes under
    ``mode`` alone (:func:`train_on_worker` refuses others).  NumericsError: torch here runs other kernels."""
    global PRELOADED_MODE
    numerics.apply(mode)  # before torch loads here
    import torch

    torch.set_num_threads(1)
    for name in WARM_MODULES:
        importlib.import_module(name)
    code_digest()  # hashed once here, not on the first run
    PRELOADED_MODE = mode


def train_on_worker(spec: dict, engine: str, mode: str, device: str = "cpu", tag: str | None = None) -> dict:
    """One copy-task run, as the local engines compute it, in this worker process: ``spec`` a RunSpec as
    a dict, ``tag`` the client's name of the run (announced on :data:`TOPIC`).  Returns ``{"outcome":
    asdict(RunOutcome), "where": ..., "code": digest}``, or ``{"refused": why, "where": ...}`` where this
    process cannot compute under ``mode`` (preloaded with another, or torch runs other kernels)."""
    if tag:  # the client's progress bar counts running runs, and a run that starts again as a failed attempt
        with suppress(Exception):  # not inside a worker, an old distributed: no announcement, same run
            from distributed import get_worker

            get_worker().log_event(TOPIC, {"tag": str(tag)})
    place = where()
    if PRELOADED_MODE is not None and mode != PRELOADED_MODE:
        refused = (
            f"this worker was started with --preload attn_cli.dask_worker --attn-numerics {PRELOADED_MODE} "
            f"(torch loads once per process, under that mode) and the run asks for --numerics {mode}: "
            f"restart the worker with --attn-numerics {mode}, or run attn with --numerics {PRELOADED_MODE}"
        )
        return {"refused": refused, "where": place}
    try:
        numerics.apply(mode)  # before torch loads here; raises if it already runs other kernels
    except numerics.NumericsError as exc:
        return {"refused": str(exc), "where": place}
    import torch

    run_spec = RunSpec(**spec)
    torch.set_num_threads(1)  # one intra-op thread, as in the local worker processes
    if engine == "exact":
        from attn_cli.core.copy_train import train_and_evaluate

        outcome = train_and_evaluate(run_spec, device)
    elif engine == "fast":
        outcome = fast_engine()([run_spec], device, None, threads=1)[0]
    else:
        raise ValueError(f"unknown engine {engine!r}; choose from exact, fast")
    return {"outcome": dataclasses.asdict(outcome), "where": place, "code": code_digest()}
