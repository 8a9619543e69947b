"""A single command's figures drawn by a process forked before torch is imported (Linux, 2+ CPUs).

A command that draws used to pay for matplotlib after its computation: the import and the
first text (fonts, the Agg renderer, Pillow's PNG writer: 0.5-0.8 s on the 2-core machine),
then each figure built here and saved by a forked child (:mod:`attn_cli.render.save_processes`),
children of a process that by then holds torch.  Now :func:`armed` (around a single command's
run: :func:`attn_cli.commands.execute.execute`) forks a *drawer* at the moment the experiment
is about to compute (:mod:`attn_cli.compute_start`: before torch is imported; a fully cached
rerun, which imports no torch, forks none).  While this process imports torch and computes,
the drawer, on the other core, imports matplotlib and draws one small figure, then builds
the run's figures as far as they go before their numbers (:mod:`attn_cli.render.frames`: the
copy task's maps, their ticks, labels and colour bar, laid out ahead).  When the
Result is ready, :meth:`attn_cli.experiment_registry.Experiment.figures` hands it to the
drawer (pickled: the Result, the folder, the formats and the verdicts), which draws the
figures exactly as this process would: the same code and state (a copy of this process from
before the computation; a figure depends only on what it is handed), its saves in children
of its own, which fork in a fraction of the time and, matplotlib being warm, start drawing at
once.  In the drawer the copy task queues its whole figures, each built and saved, and one
forked child per core takes them from the queue, the costliest first
(:func:`attn_cli.render.save_processes.pull`): its five figures are built side by side too.
The drawer sends back the paths written; the bytes are the same as drawn here (tested).

Nothing else comes back.  Where the drawer cannot take the job (the Result does not pickle,
the drawer died or was killed) or fails at it (a full disk), this process draws the figures
itself, as without a drawer, so a real error is raised here with its own message.  The
drawer leaves with ``os._exit`` whatever happens (no atexit handler, no output of this
process's flushed twice, no traceback on Ctrl-C); when the block ends its pipes are closed, it
gets SIGTERM and is reaped.  Where figures cannot be saved in children
(:func:`attn_cli.render.save_processes.available`: not Linux, one usable CPU), with no figure
asked for, for an experiment that draws none (no PNG among its catalogue artifacts: its
files are tables, and the drawer's matplotlib would only delay them), or where torch or
matplotlib is already imported (the Python API, a test process), nothing changes.

Measured on the idle 2-core Xeon (``benchmarks/startup.py``, 9 interleaved rounds):
``attn copy-task --engine fast --steps 1 --no-cache`` into a fresh folder 3.88 s against
5.07 s before (0.77x); beyond the training floor 1.66 s against 2.63 s.  Then (first child
to finish frees its slot, PNGs rasterised once: :func:`attn_cli.render.files.save_figure`)
the window from the Result's hand-over to the paths' return went from 1.28 s to 0.65-0.8 s.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

_ACTIVE: ContextVar["Drawer | None"] = ContextVar("attn_drawer", default=None)

_HEADER = struct.Struct("!Q")  # the length of each pickled message


_INSIDE = False  # True in the drawer process


def inside() -> bool:
    """Whether this process is a drawer (where a whole figure, built and saved, may go to a child)."""
    return _INSIDE


def active() -> "Drawer | None":
    """The drawer in force (forked inside :func:`armed`), or None: figures are drawn in this process."""
    return _ACTIVE.get()


def wanted(formats: Sequence[str]) -> bool:
    """Whether a drawer can pay here: figures asked for, children available, and neither torch
    nor matplotlib imported yet (their import is what the drawer takes off the critical path)."""
    from attn_cli.render import save_processes

    return (bool(formats) and save_processes.available() and "torch" not in sys.modules
            and "matplotlib" not in sys.modules and not _INSIDE)


class Drawer:
    """This process's end of a drawer: the pid and the two pipes."""

    def __init__(self, pid: int, send_fd: int, reply_fd: int):
        self.pid, self.send_fd, self.reply_fd = pid, send_fd, reply_fd
        self.alive = True

    def figures(self, exp, result: Any, out: Path, formats: Sequence[str], outcomes: Mapping) -> list[Path] | None:
        """The drawer's figures of ``result`` (every file complete), or None: draw them here."""
        if not self.alive:
            return None
        try:
            request = pickle.dumps((exp.name, result, str(out), tuple(formats), dict(outcomes)),
                                   protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a Result that does not pickle is drawn here
            return None
        try:
            _send(self.send_fd, request)
            status, payload = pickle.loads(_receive(self.reply_fd))
        except (OSError, EOFError, pickle.UnpicklingError):
            self.alive = False  # gone (killed, out of memory): draw here
            return None
        if status != "ok":
            return None  # it failed (a full disk, a bug): the same figures here raise the real error
        return [Path(p) for p in payload]

    def close(self) -> None:
        """Tell the drawer to stop (EOF on its pipe), then SIGTERM it if it still runs; reap it."""
        for fd in (self.send_fd, self.reply_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGTERM)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, 0)
        self.alive = False


@contextlib.contextmanager
def armed(exp, formats: Sequence[str], config: Any = None) -> Iterator[None]:
    """Within the block, the moment ``exp`` is about to compute (:mod:`attn_cli.compute_start`)
    a drawer is forked, if one is :func:`wanted` then, and ``exp``'s figures go to it (see the
    module); it is stopped and reaped when the block ends.  A run that computes nothing (every
    piece cached) forks none.  ``config``: the run's, whose figures the drawer builds as far as
    they go while it waits (:mod:`attn_cli.render.frames`)."""
    started: list[Drawer] = []

    def fork_now() -> None:
        if exp.draws and wanted(formats):  # an experiment with tables only: nothing to warm
            made = _start(exp, tuple(formats), config)
            if made is not None:
                started.append(made)
                _ACTIVE.set(made)  # in this context: the pipeline's figures() below sees it

    from attn_cli import compute_start

    token = _ACTIVE.set(None)
    try:
        with compute_start.armed(fork_now):
            yield
    finally:
        _ACTIVE.reset(token)
        for made in started:
            made.close()


def _start(exp, formats: tuple[str, ...], config: Any) -> "Drawer | None":
    """Fork a drawer for ``exp``; None if it cannot fork (the figures are then drawn here)."""
    send_r, send_w = os.pipe()
    reply_r, reply_w = os.pipe()
    from attn_cli.render.save_processes import fork

    pid = fork()
    if pid is None:
        for fd in (send_r, send_w, reply_r, reply_w):
            os.close(fd)
        return None
    if pid == 0:  # the drawer: never returns into this process's code
        code = 1
        try:
            os.close(send_w)
            os.close(reply_r)
            code = _serve(exp, send_r, reply_w, formats, config)
        except BaseException:  # noqa: BLE001 - Ctrl-C, SIGTERM, a bug: leave quietly, the parent draws
            code = 1
        finally:
            from attn_cli.private import remove_own_scratch

            remove_own_scratch()  # matplotlib's private config folder, if this child made it
            os._exit(code)
    os.close(send_r)
    os.close(reply_w)
    return Drawer(pid, send_w, reply_r)


def _serve(exp, request_fd: int, reply_fd: int, formats: tuple[str, ...], config: Any) -> int:
    """The drawer: matplotlib imported and warmed, ``config``'s figures built as far as they go
    before their numbers (:mod:`attn_cli.render.frames`), then each request's figures drawn and
    their paths sent back, until the pipe closes."""
    global _INSIDE
    _INSIDE = True
    _warm()
    if config is not None:
        from attn_cli.render import frames

        try:
            exp.prepare_figures(config, formats)
        except Exception:  # noqa: BLE001 - a frame that fails to build: the figures are built whole
            frames.clear()
    while True:
        try:
            message = _receive(request_fd)
        except EOFError:
            return 0
        name, result, out, formats, outcomes = pickle.loads(message)
        try:
            if name != exp.name:
                raise RuntimeError(f"drawer for {exp.name} asked for {name}")
            paths = exp.figures_here(result, Path(out), formats, outcomes)
            reply = ("ok", [str(p) for p in paths])
        except Exception as exc:  # noqa: BLE001 - the parent draws again and raises the real error
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _send(reply_fd, pickle.dumps(reply))


def _warm() -> None:
    """Import what every figure needs and draw one small figure with text into memory: the
    fonts, the Agg renderer and Pillow's PNG writer are then loaded once, here."""
    import io

    from attn_cli.render.figures import new_figure

    fig, ax = new_figure(figsize=(1, 1))
    ax.set_title("0")
    fig.colorbar(ax.imshow([[0.0, 1.0]]), ax=ax)
    fig.savefig(io.BytesIO(), format="png", metadata={"attn": "warm"})
    import matplotlib.pyplot as plt

    plt.close(fig)


def _send(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("drawer pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int) -> bytes:
    (n,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return _read_exactly(fd, n)
