"""The copy task's runs on a Dask cluster (``--scheduler``, ``ATTN_SCHEDULER``): the client's side and the
worker's (design notes: ``docs/design.md``, section ``attn_cli.experiments.copy_task.cluster``)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import importlib
import logging
import math
import os
import platform
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from attn_cli.core import numerics
from attn_cli.core.copy_spec import RunOutcome, RunSpec
from attn_cli.errors import AttnError
from attn_cli.experiments.copy_task.config import cache_key, check_outcome, code_digest
from attn_cli.experiments.copy_task.engines import WARM_MODULES, Done, Report, Todo, fast_engine, schedule
from attn_cli.store.typed import InvalidEntry, revive

if TYPE_CHECKING:
    from distributed import Client, Future

    from attn_cli.experiments.copy_task.config import Config

RETRIES = 2  # Dask retries of a run whose task raised (a killed worker's run is rescheduled by the scheduler)
CONNECT_TIMEOUT_S = 10.0  # a scheduler whose handshake has not answered by then is named as not answering
TIMEOUT_VAR = "ATTN_SCHEDULER_TIMEOUT"  # sets that handshake timeout, in seconds
WORKER_WAIT_S = 120.0  # how long a sweep waits for a first (or a new) worker: --worker-wait
SAY_EVERY_S = 10.0  # while no worker is connected, a line on stderr this often
POLL_S = 1.0  # how often the client looks at the futures and the workers
DEFAULT_PORT = 8786  # Dask's scheduler port where an address names none
TOPIC = "attn-copy-task-started"  # each attempt of a run says on this Dask event topic that it started
FIELD_CHARS = 200  # at most this many characters of a worker's address, host name or CPU model
PRELOADED_MODE: str | None = None  # the numeric mode prepare_worker pinned in this process; None: not preloaded


class ClusterError(AttnError):
    """The scheduler cannot be reached, went away, or a worker was refused."""


def connect(address: str, source: str = "--scheduler") -> Client:
    """A ``distributed.Client`` on ``address``, or a ClusterError naming the address and ``source``."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(f"{source} needs Dask distributed: pip install 'attn-cli[dask]'") from None
    # attn reports a lost connection as one Error line, not Dask's client tracebacks
    names = {"distributed", "distributed.client", *logging.root.manager.loggerDict}
    for name in (n for n in names if n == "distributed" or n.startswith("distributed.")):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    raw = os.environ.get(TIMEOUT_VAR, "").strip()  # the handshake's timeout in seconds
    try:
        timeout = float(raw) if raw else CONNECT_TIMEOUT_S
    except ValueError:
        timeout = math.nan
    if not math.isfinite(timeout) or timeout <= 0:
        raise ClusterError(f"{TIMEOUT_VAR}={raw}: not a positive number of seconds")
    reason = _probe(address, timeout)  # no Client is made for a scheduler that is not there
    if reason is None:
        why = _identify(address, timeout)
        if why is not None:
            raise ClusterError(f"{address} (from {source}) is not a Dask scheduler: {why}")
        try:
            return Client(address, timeout=timeout, set_as_default=False)
        except Exception as exc:  # OSError, TimeoutError, ValueError (a malformed address), ...
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        # finalise the half-made Client now: its __del__, run inside the next Client's start, can deadlock
        gc.collect()
    raise ClusterError(f"cannot reach the Dask scheduler at {address} (from {source}): {reason}")


def _identify(address: str, timeout: float) -> str | None:
    """Why ``address`` is not a Dask scheduler (None: it is one), asked on an event loop in a thread of its own."""
    from distributed.comm import connect as dask_connect
    from distributed.security import Security

    security = Security().get_connection_args("client")  # dask's configured TLS, as the Client uses it

    async def ask() -> Any:
        comm = await dask_connect(address, timeout=timeout, **security)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    with ThreadPoolExecutor(1) as pool:
        try:
            answer = pool.submit(lambda: asyncio.run(asyncio.wait_for(ask(), timeout))).result()
        except (TimeoutError, asyncio.TimeoutError):
            return f"no Dask handshake within {timeout:g} s ({TIMEOUT_VAR})"
        except Exception as exc:  # a closed comm, a frame that does not decode, a MemoryError on garbage
            text = str(exc).splitlines()[0][:200] if str(exc) else ""
            return f"its answer is not Dask's ({type(exc).__name__}{': ' + text if text else ''})"
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        return "it answered Dask's handshake, but not as a scheduler"
    return None


def _probe(address: str, timeout: float) -> str | None:
    """Why a TCP scheduler address does not accept a connection (None: it does, or it is not TCP)."""
    scheme, sep, _ = address.partition("://")
    if sep and scheme != "tcp":
        return None
    parts = urlsplit(address if sep else f"tcp://{address}")
    try:
        host, port = parts.hostname, parts.port or DEFAULT_PORT
    except ValueError as exc:  # a port out of range
        return str(exc)
    if not host:
        return "no host in the address"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def plan_keywords(scheduler: str | None, source: str | None, worker_wait: float | None = None) -> dict:
    """A Config's ``scheduler``, ``scheduler_from`` and ``worker_wait``, once the scheduler has answered."""
    if not scheduler:
        return {}
    source = source or "--scheduler"
    connect(scheduler, source).close()
    wait = WORKER_WAIT_S if worker_wait is None else worker_wait
    return {"scheduler": scheduler, "scheduler_from": source, "worker_wait": wait}


def run_cluster_engine(todo: Todo, config: Config, report: Report, done: Done) -> None:
    """Every run of ``todo`` on the cluster at ``config.scheduler``; ``done(index, outcome)`` as each finishes."""
    todo = schedule(todo)  # longest first: the scheduler starts them in submission order
    # this process's numeric mode (not a Config field: it would change every cache key and JSON)
    mode, code = numerics.current_mode(), code_digest()
    client = connect(config.scheduler or "", config.scheduler_from or "--scheduler")
    futures: dict = {}  # future -> (index, spec) of the runs not collected yet
    tags = {
        f"attn-copy-task-{config.engine_of(spec)}-{index}-{uuid.uuid4().hex[:12]}": (index, spec)
        for index, spec in todo
    }

    def heard(event: tuple[float, Any]) -> None:  # on the client's event loop: never raise there
        with suppress(Exception):
            index, spec = tags[event[1]["tag"]]
            report(index, 0, spec.steps, float("nan"), "started")  # a progress display counts running runs

    with suppress(Exception):  # an older distributed cannot: the bar counts finished runs only
        client.subscribe_topic(TOPIC, heard)
    try:
        for key, (index, spec) in tags.items():  # each a task keyed by its tag, into futures as it is submitted
            args = (dataclasses.asdict(spec), config.engine_of(spec), mode, config.device, key)
            futures[client.submit(train_on_worker, *args, pure=False, retries=RETRIES, key=key)] = (index, spec)
        _collect(client, futures, config, report, done, code)
    finally:  # cancel the runs nobody will collect (after an error or Ctrl-C); the scheduler may be gone
        with suppress(Exception):
            if futures:
                client.cancel(list(futures))
        with suppress(Exception):
            client.unsubscribe_topic(TOPIC)
        client.close()


def _collect(client: Client, futures: dict, config: Config, report: Report, done: Done, code: str) -> None:
    """Each run's answer as it finishes, checked and handed to ``done``; a failed run is a ClusterError."""
    address, source = config.scheduler or "", config.scheduler_from or "--scheduler"
    watch = _WorkerWatch(client, address, source, config.worker_wait)
    watch.check()  # a scheduler without workers is said at once
    for fut in _finishing(client, futures, watch):
        index, spec = futures.pop(fut)
        what = f"the {spec.model} run at length {spec.length}, seed {spec.seed}"
        try:
            answer = fut.result()
        except Exception as exc:  # the task raised RETRIES + 1 times, its workers died, or the scheduler went
            report(index, 0, spec.steps, float("nan"), "failed")
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "scheduler-connection-lost" in reason or client.status not in ("running", "connecting"):
                raise ClusterError(
                    f"lost the Dask scheduler at {address} (from {source}) mid-sweep: the {watch.collected} "
                    "run(s) finished before are kept in the cache; a rerun resumes from them"
                ) from None
            raise ClusterError(
                f"{what} failed on the Dask cluster at {address}: {type(exc).__name__}: {reason}"
            ) from None
        done(index, _outcome(answer, cache_key(spec, config.engine_of(spec), config.device), what, code))
        watch.collected += 1


def _finishing(client: Client, futures: dict, watch: _WorkerWatch) -> Iterator[Future]:
    """The futures as they finish; while none does, the workers are watched every :data:`POLL_S`."""
    from distributed import as_completed

    pending, looked = as_completed(list(futures), loop=client.loop), time.monotonic()
    while not pending.is_empty():
        if pending.has_ready():
            yield from pending.next_batch(block=False)
        elif time.monotonic() - looked >= POLL_S:
            watch.check()
        else:
            time.sleep(0.05)
            continue
        looked = time.monotonic()


class _WorkerWatch:
    """Says on stderr (then every :data:`SAY_EVERY_S`) that no worker is connected; ClusterError after ``wait_s``."""

    def __init__(self, client: Client, address: str, source: str, wait_s: float) -> None:
        self.client, self.address, self.source, self.wait_s = client, address, source, wait_s
        self.since: float | None = None  # since when no worker is connected
        self.said, self.collected = 0.0, 0  # when that was last said; runs collected

    def check(self) -> None:
        try:
            workers = len(self.client.nthreads())
        except Exception:  # the scheduler went: the futures say so
            return
        now = time.monotonic()
        if workers:
            if self.since is not None:
                _say(f"a Dask worker joined the scheduler at {self.address}: the sweep goes on")
            self.since = None
            return
        if self.since is None:
            self.since, self.said = now, now
            _say(
                f"no Dask worker is connected to the scheduler at {self.address} (from {self.source}); "
                f"waiting up to {self.wait_s:g} s for one (--worker-wait)"
            )
        elif now - self.said >= SAY_EVERY_S:
            self.said = now
            _say(
                f"still no Dask worker at {self.address} after {now - self.since:.0f} s "
                f"(giving up at {self.wait_s:g} s)"
            )
        if now - self.since >= self.wait_s:
            raise ClusterError(
                f"no Dask worker connected to the scheduler at {self.address} (from {self.source}) "
                f"for {self.wait_s:g} s (--worker-wait): the {self.collected} run(s) finished before are "
                "kept in the cache; a rerun resumes from them"
            )


def _say(line: str) -> None:  # on stderr: a live progress display keeps it above
    print(line, file=sys.stderr, flush=True)


def _outcome(answer: object, key: dict, what: str, code: str) -> RunOutcome:
    """A worker's answer as a RunOutcome checked like a cache entry, or a ClusterError naming the worker."""
    place = answer.get("where") if isinstance(answer, dict) else None
    if not isinstance(answer, dict) or not isinstance(place, dict):
        raise ClusterError(f"{what}: worker (unknown) answered something that is not a run")
    worker = f"{str(place.get('worker', ''))[:FIELD_CHARS]} on {str(place.get('host', ''))[:FIELD_CHARS]}"
    if "refused" in answer:
        raise ClusterError(f"worker {worker} refused {what}: {str(answer['refused'])[:400]}")
    if answer.get("code") != code:
        raise ClusterError(
            f"worker {worker} computes copy-task runs with other code than this attn "
            "(install the same attn-cli version on every worker)"
        )
    try:
        outcome = revive(RunOutcome, answer.get("outcome"))
        check_outcome(outcome, key)
        ran_on = revive(dict[str, str], place)
    except (InvalidEntry, TypeError, ValueError) as exc:
        raise ClusterError(f"{what}: worker {worker} sent an invalid outcome ({exc})") from None
    want = key["numerics"]["isa"]
    if key["device"] == "cpu" and outcome.isa and outcome.isa != want:
        raise ClusterError(
            f"worker {worker} ran {what} on {outcome.isa} kernels, not the {want} kernels of "
            f"--numerics {key['numerics']['mode']}; refused (never mixed with this machine's runs)"
        )
    return dataclasses.replace(outcome, ran_on={k: ran_on.get(k, "")[:FIELD_CHARS] for k in ("worker", "host", "cpu")})


# --------------------------------------------------------------------------- on the worker


def where() -> dict[str, str]:
    """Where this task runs: the Dask worker's address (empty outside a worker), host and CPU model."""
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # not inside a Dask worker (a direct call, a test)
        address = ""
    cpu = platform.processor() or platform.machine()
    with suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for key, _, value in (line.partition(":") for line in f):
            if key.strip() in ("model name", "Model", "cpu model"):
                cpu = value.strip()
                break
    return {k: v[:FIELD_CHARS] for k, v in {"worker": address, "host": socket.gethostname(), "cpu": cpu}.items()}


def prepare_worker(mode: str) -> None:
    """Make this Dask worker process ready to train under ``mode``, and under it alone (:func:`train_on_worker`
    refuses others).  NumericsError: torch here runs other kernels."""
    global PRELOADED_MODE
    numerics.apply(mode)  # before torch loads here
    import torch

    torch.set_num_threads(1)
    for name in WARM_MODULES:
        importlib.import_module(name)
    code_digest()  # hashed once here, not on the first run
    PRELOADED_MODE = mode


def train_on_worker(spec: dict, engine: str, mode: str, device: str = "cpu", tag: str | None = None) -> dict:
    """One copy-task run in this worker process, ``spec`` a RunSpec as a dict, ``tag`` the client's name of
    the run (announced on :data:`TOPIC`): ``{"outcome": asdict(RunOutcome), "where": ..., "code": digest}``,
    or ``{"refused": why, "where": ...}`` where this process cannot compute under ``mode``."""
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
