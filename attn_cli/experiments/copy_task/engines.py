"""The copy task's engines: exact here or in forkserver workers (longest runs first), fast in one call to
:func:`attn_cli.core.copy_fast.run_fast`; each run goes to ``done(index, outcome)``, each step to ``report``."""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress
from multiprocessing import forkserver, resource_tracker
from typing import TYPE_CHECKING, Any

from attn_cli.core import numerics
from attn_cli.core.copy_spec import RunOutcome, RunSpec
from attn_cli.core.memory import out_of_memory
from attn_cli.errors import AttnError, ConfigError
from attn_cli.experiments.copy_task.config import Config
from attn_cli.signals import exit_with_parent, terminal_signals_blocked

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import BaseContext
    from multiprocessing.queues import Queue
    from threading import Event

# (run index in plan order, step, total steps, loss, status: "running" | "cached" | "done")
Report = Callable[[int, int, int, float, str], None]
Done = Callable[[int, RunOutcome], None]
Todo = list[tuple[int, RunSpec]]  # (run index in plan order, run)

# imported once before the first run by the local pool's fork server and a preloaded Dask worker
WARM_MODULES = ("attn_cli.core.copy_train",)
PLAIN_COST = 0.5  # a plain run costs about half an attention run (no attention bmm)


def fast_engine() -> Callable:
    """``run_fast`` of :mod:`attn_cli.core.copy_fast` (imported on the first call: a sweep found in the
    cache never imports torch), or a clear AttnError if it is absent."""
    if importlib.util.find_spec("attn_cli.core.copy_fast") is None:
        raise AttnError(
            "--engine fast is not available in this build yet (attn_cli/core/copy_fast is missing); use --engine exact"
        )
    return _run_fast


def _run_fast(*args: Any, **kwargs: Any) -> Any:  # imported at the first run, not at the check above
    from attn_cli.core.copy_fast import run_fast

    return run_fast(*args, **kwargs)


def schedule(todo: Todo) -> Todo:
    """Longest runs first (4 8 16 32 on two workers: [32] and [16, 8, 4]); ties keep their order."""
    return sorted(todo, key=lambda item: -_cost(item[1]))


def _cost(spec: RunSpec) -> float:  # relative wall time: training steps x length, plus the evaluation
    plain = 1.0 if spec.model == "attention" else PLAIN_COST
    return spec.steps * spec.length * plain + spec.eval_size * spec.length / 64


def run_fast_engine(todo: Todo, config: Config, report: Report, done: Done, stop: Event | None = None) -> None:
    """The fast engine on every run of ``todo`` at once; ``stop`` ends it early from another thread."""
    run = fast_engine()

    def progress(spec_index: int, step: int, total: int, loss: float) -> None:
        report(todo[spec_index][0], step, total, loss, "running")

    outcomes = run([s for _, s in todo], config.device, progress, threads=config.jobs, stop=stop)  # jobs None: 1/core
    for (index, _), outcome in zip(todo, outcomes):
        done(index, outcome)


def run_exact_engine(todo: Todo, config: Config, report: Report, done: Done) -> None:
    """Run the exact engine: in this process for one run or one job, else a process pool."""
    todo = schedule(todo)
    workers = min(config.worker_count(), len(todo))
    if workers <= 1:
        from attn_cli.core.copy_train import train_and_evaluate

        for index, spec in todo:

            def progress(step: int, total: int, loss: float, _i: int = index) -> None:
                report(_i, step, total, loss, "running")

            done(index, train_and_evaluate(spec, config.device, progress))
        return
    _run_pool(todo, config, workers, report, done)


# --------------------------------------------------------------------------- the worker pool


# where a worker's runs report their steps: a queue reaches a process only as its initializer's
# argument, so the initializer keeps it here (never set in the parent)
_queue: Queue[tuple[int, int, int, float]]


def _start_worker(queue: Queue[tuple[int, int, int, float]], parent: Connection, mode: str) -> None:
    """The pool's initializer: numeric ``mode``, one thread, Ctrl-C and hang-up left to attn, gone with attn."""
    global _queue
    numerics.apply(mode)
    import torch

    exit_with_parent(parent)  # ``parent``: the read end of a pipe only attn writes to
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    torch.set_num_threads(1)
    _queue = queue


def _work(index: int, spec: RunSpec, device: str) -> RunOutcome:
    """A pool task: one run in this worker process."""
    from attn_cli.core.copy_train import train_and_evaluate

    return train_and_evaluate(spec, device, lambda step, total, loss: _queue.put((index, step, total, loss)))


def _outcome(fut: Future[RunOutcome], spec: RunSpec, pool: ProcessPoolExecutor) -> RunOutcome:
    """A worker's outcome, or one error naming the run: a missing ``__main__`` guard, a dead worker, its failure."""
    try:
        return fut.result()
    except BrokenProcessPool:
        processes = getattr(pool, "_processes", None) or {}  # what ProcessPoolExecutor keeps of them
        if MAIN_GUARD_EXIT in {p.exitcode for p in list(processes.values())}:
            raise ConfigError(MAIN_GUARD_MESSAGE) from None
        raise AttnError(
            f"a copy-task worker died during the {spec.model} run at length "
            f"{spec.length}, seed {spec.seed} (out of memory? or, from a script, a missing "
            "if __name__ == '__main__' guard)"
        ) from None
    except AttnError:
        raise
    except Exception as exc:
        why = out_of_memory(exc) or f"{type(exc).__name__}: {exc}"
        raise AttnError(f"the {spec.model} run at length {spec.length}, seed {spec.seed} failed: {why}") from None


def _run_pool(todo: Todo, config: Config, workers: int, report: Report, done: Done) -> None:
    ctx = _context()
    progress_queue: Queue[tuple[int, int, int, float]] = ctx.Queue()
    alive, alive_w = ctx.Pipe(duplex=False)  # the workers watch it: end of file when attn is gone
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=ctx,
        initializer=_start_worker,
        initargs=(progress_queue, alive, numerics.current_mode()),
    )
    try:
        futures = {pool.submit(_work, index, spec, config.device): (index, spec) for index, spec in todo}
        pending = set(futures)
        while pending:
            ready, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            with suppress(queue_mod.Empty):  # every step reported since
                while True:
                    report(*progress_queue.get_nowait(), "running")
            for fut in ready:
                index, spec = futures[fut]
                done(index, _outcome(fut, spec, pool))
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP or an error: stop every worker now, not at the end of its run
        _stop_fork_server()
        processes = list(getattr(pool, "_processes", {}).values())  # no public API before 3.14
        for proc in processes:
            if proc.is_alive():
                proc.terminate()
        for proc in processes:
            proc.join(timeout=5)
            if proc.is_alive():  # pragma: no cover
                proc.kill()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        alive_w.close()  # a worker still alive (none should be) ends itself
        alive.close()
        progress_queue.close()
        progress_queue.join_thread()


MAIN_GUARD_EXIT = 86  # a worker that found the script calling attn while the worker imported it
MAIN_GUARD_MESSAGE = (
    "the script calls attn_cli at import time: the copy task's worker processes import the "
    'script again, and ran that call too. Put the calls under if __name__ == "__main__": '
    "(see the Python API docs, docs/api.md)"
)


def _context() -> BaseContext:
    """Forkserver, else spawn; tracker and fork server start with SIGHUP, SIGINT blocked (left to attn)."""
    with terminal_signals_blocked():
        resource_tracker.ensure_running()
    # blocked again: starting the tracker unblocks SIGINT and SIGTERM in this thread on its way out
    try:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(list(WARM_MODULES))
        with terminal_signals_blocked():
            forkserver.ensure_running()
    except (ValueError, OSError):  # no forkserver here, or its socket's path is too long (a deep TMPDIR)
        return mp.get_context("spawn")
    return ctx


def _stop_fork_server() -> None:
    """Stop the fork server (no late worker fails loudly after attn); waited for, not reaped."""
    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)  # no public API
    if not pid:
        return
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:  # WNOWAIT: left for multiprocessing to reap, which then knows it is gone
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return
            except ChildProcessError:
                return
            time.sleep(0.01)
