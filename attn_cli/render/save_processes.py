"""Figures saved in forked child processes while the next one is built (Linux, several CPUs).

Saving is most of a figure's cost (matplotlib measures every text and rasterises only in
``savefig``; :func:`attn_cli.render.files.save_figure` also runs ``tight_layout`` there), and it
needs nothing but the Figure object.  So inside :func:`in_parallel` (around each experiment's
figures: :meth:`attn_cli.experiment_registry.Experiment.figures`), ``save_figure`` forks a child
that saves the figure and exits, while this process builds the next one; at most one child per
usable CPU plus one runs at a time (this process mostly waits; a new figure takes the slot of
the first child to finish, not of the oldest), and every child is reaped before the block ends.
Measured on 2 cores, the copy task's five figures (matplotlib already imported): 1.15 s wall
against 1.9 s saved one after another (medians of 6; one child per CPU only: 1.39 s).  In the
figure drawer (:mod:`attn_cli.render.drawer`), taking the slot of the first child to finish
instead of waiting for the oldest (the length-32 map) cut the five figures' window from 1.28 s
to 0.9-1.1 s.

The bytes are the same as a save in this process: the child is a copy of this process at the
moment of the fork (the same Figure, fonts and rc settings) and runs the same code.  Nothing
comes back from a child but its exit status: each file is written atomically by the child
(temp file, then rename), and a child that failed is followed by the same save here, in this
process, so a real error (a full disk) is raised here as it would be without children, and a
child killed by accident costs only time.  On an error or Ctrl-C in this process the children
still running are stopped (SIGTERM: their temp files are removed) and reaped.

Where every figure's state is here before any child starts (the figure drawer's, whose
figures are whole drawings: :mod:`attn_cli.render.drawer`), :func:`pull` runs them in one
child per usable CPU instead, each child taking the next figure from a queue as it is free.

A child never returns into this process's code: it leaves with ``os._exit`` (no atexit
handler, no flush of this process's buffered output), whatever happens.  Without ``fork``
(Windows, macOS, where forking a process with threads is unsafe), with one usable CPU, or in
the Python API's capture (which keeps the Figures for the caller), figures are saved in this
process as before.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import struct
import sys
import warnings
from contextvars import ContextVar
from typing import Callable, Iterator, Sequence

_ACTIVE: ContextVar["SaveProcesses | None"] = ContextVar("attn_save_processes", default=None)


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available() -> bool:
    """Whether figures can be saved in forked children here (Linux, with more than one usable CPU)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and usable_cpus() > 1


class SaveProcesses:
    """The children saving figures, oldest first; at most ``limit`` at a time."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.pending: list[tuple[int, Callable[[], object], Callable[[], None]]] = []  # (pid, save, close)

    def submit(self, save: Callable[[], object], close: Callable[[], None]) -> bool:
        """Run ``save()`` in a forked child; ``close()`` once it is reaped.  False: it could not
        fork (out of processes or memory), and the caller saves in this process."""
        while len(self.pending) >= self.limit:
            self._reap(self._first_done())
        pid = fork()
        if pid is None:
            return False
        if pid == 0:  # the child: save, then leave without returning into the parent's code
            code = 1
            try:
                _ACTIVE.set(None)  # what save() draws is saved here, in this child
                save()
                code = 0
            except BaseException:  # noqa: BLE001 - the parent repeats the save and raises its error
                code = 1
            finally:
                from attn_cli.private import remove_own_scratch

                remove_own_scratch()
                os._exit(code)
        self.pending.append((pid, save, close))
        return True

    def _first_done(self):
        """Take out of ``pending`` the first child to finish (waiting for it: Linux's pidfds, one
        per child, polled together), or the oldest where pidfds are missing.  Reaping the oldest
        made the copy task's two small figures wait for its longest map while a core was free."""
        fds: dict[int, tuple] = {}
        try:
            if hasattr(os, "pidfd_open"):
                for item in self.pending:
                    with contextlib.suppress(OSError):
                        fds[os.pidfd_open(item[0])] = item
            if fds and len(fds) == len(self.pending):
                ready, _, _ = select.select(list(fds), [], [])  # a pidfd is readable once its child exits
                item = fds[ready[0]]
            else:
                item = self.pending[0]
        finally:
            for fd in fds:
                os.close(fd)
        self.pending.remove(item)
        return item

    def _reap(self, item) -> None:
        pid, save, close = item
        try:
            status = _wait(pid)
            if status != 0:  # it failed or was killed: the same save here (its error, if real, is raised here)
                save()
        finally:
            close()

    def finish(self) -> None:
        """Reap every child, oldest first (a failed one's save repeated here)."""
        while self.pending:
            self._reap(self.pending.pop(0))

    def stop(self) -> None:
        """Stop the children still saving (SIGTERM: each removes its temp file) and reap them."""
        pending, self.pending = self.pending, []
        for pid, _, _ in pending:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        for pid, _, close in pending:
            try:
                _wait(pid)
            finally:
                close()


_INDEX = struct.Struct("!I")  # a task's index on the pull pipes (4 bytes: one atomic pipe read or write)


def pull(tasks: Sequence[Callable[[], object]], workers: int | None = None) -> None:
    """Run every task of ``tasks`` in one of ``workers`` forked children (default: one per usable
    CPU) that take them in order, each its next as soon as it is free, from one pipe; return
    when all are done.  For work whose state is all here before the fork (the figure drawer's
    figures, :mod:`attn_cli.render.drawer`): against a child per task, fewer forks, fewer
    copy-on-write faults (a child's second figure finds most pages already copied: the copy
    task's four maps 0.80 s of CPU in two children against 0.86 s in four) and no third process
    on two cores; hand the tasks out costliest first.

    A child reports each task it finished; a task not reported (it raised, or its child was
    killed) is run here afterwards, in order, so a real error (a full disk) is raised here.
    Without children (not :func:`available`, or no fork succeeds) every task runs here.  On an
    error or Ctrl-C here the children are stopped (SIGTERM) and reaped."""
    tasks = list(tasks)
    count = min(len(tasks), workers or usable_cpus())
    if not tasks:
        return
    if count < 1 or not available():
        for task in tasks:
            task()
        return
    todo_r, todo_w = os.pipe()
    done_r, done_w = os.pipe()
    pids: list[int] = []
    finished: set[int] = set()
    try:
        for i in range(len(tasks)):  # every index before any child starts: a child that reads EOF is done
            os.write(todo_w, _INDEX.pack(i))
        os.close(todo_w)
        todo_w = -1
        for _ in range(count):
            pid = fork()
            if pid is None:
                break
            if pid == 0:  # a worker: never returns into the caller's code
                _pull_worker(tasks, todo_r, done_r, done_w)
            pids.append(pid)
        os.close(done_w)
        done_w = -1
        if pids:
            while True:  # until every worker has closed its end
                chunk = _read_index(done_r)
                if chunk is None:
                    break
                finished.add(chunk)
    except BaseException:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        raise
    finally:
        for fd in (todo_r, todo_w, done_r, done_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        for pid in pids:
            _wait(pid)
    for i, task in enumerate(tasks):
        if i not in finished:  # it failed in its child, or the child died: here, where its error is raised
            task()


def _pull_worker(tasks, todo_r: int, done_r: int, done_w: int) -> None:
    """A :func:`pull` child: take the next index, run that task, report it; leave at EOF."""
    code = 1
    try:
        os.close(done_r)
        _ACTIVE.set(None)  # what a task saves is saved here, in this child
        while True:
            index = _read_index(todo_r)
            if index is None:
                break
            try:
                tasks[index]()
            except Exception:  # noqa: BLE001 - not reported: the parent runs it again and raises its error
                continue
            os.write(done_w, _INDEX.pack(index))
        code = 0
    except BaseException:  # noqa: BLE001 - SIGTERM, Ctrl-C: leave; the parent runs what was not reported
        code = 1
    finally:
        from attn_cli.private import remove_own_scratch

        remove_own_scratch()
        os._exit(code)


def _read_index(fd: int) -> int | None:
    """The next index on a pull pipe, or None at its end (an index is written whole, and a read
    of that size from a pipe is atomic)."""
    data = os.read(fd, _INDEX.size)
    if not data:
        return None
    while len(data) < _INDEX.size:  # not expected from a pipe; kept whole all the same
        more = os.read(fd, _INDEX.size - len(data))
        if not more:
            return None
        data += more
    return _INDEX.unpack(data)[0]


def fork() -> int | None:
    """``os.fork()`` without Python 3.12's warning about threads; None where it fails (out of
    processes or memory: the caller then does the work itself).  Also the figure drawer's."""
    with warnings.catch_warnings():  # Python 3.12+ warns of fork in a process with threads:
        warnings.simplefilter("ignore", DeprecationWarning)  # the child runs no thread's work, only savefig
        try:
            return os.fork()
        except OSError:
            return None


def _wait(pid: int) -> int:
    """The exit code of child ``pid`` (negative: killed by that signal); -1 if already gone."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(status)


def active() -> SaveProcesses | None:
    """The children in force (inside :func:`in_parallel`), or None: save in this process."""
    return _ACTIVE.get()


@contextlib.contextmanager
def in_parallel(limit: int | None = None) -> Iterator[SaveProcesses | None]:
    """Within the block, :func:`attn_cli.render.files.save_figure` saves in forked children
    (at most ``limit`` at a time; default: the usable CPUs plus one), all reaped when the block ends.
    Nested blocks use the outer one's children.  Where children are not :func:`available`,
    nothing changes."""
    if _ACTIVE.get() is not None or not available():
        yield _ACTIVE.get()
        return
    pool = SaveProcesses(limit or usable_cpus() + 1)
    token = _ACTIVE.set(pool)
    try:
        yield pool
        pool.finish()
    except BaseException:
        pool.stop()
        raise
    finally:
        _ACTIVE.reset(token)
