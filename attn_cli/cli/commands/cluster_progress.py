"""The progress display of copy-task runs on a Dask cluster (``--scheduler``): one bar over
the sweep that counts done, running and failed runs, with an ETA.

``cached`` and ``done`` finish a run; ``started`` begins one attempt on a worker (a run that
starts again, its worker killed or its task retried, counts one failed attempt); ``failed``
is a run that failed for good."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sized
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attn_cli.experiments.progress import ProgressEvent


class RunCounts:
    """Done, running and failed runs of a sweep of ``total`` runs, from Progress events."""

    def __init__(self, total: int):
        self.total = total
        self.done: set[int] = set()
        self.running: set[int] = set()
        self.failed = 0  # failed attempts: restarted runs and runs that failed for good
        self._started: set[int] = set()
        self._lock = threading.Lock()  # events come from the client's event loop and the main thread

    def update(self, event: ProgressEvent) -> None:
        item, status = event.item, event.status
        if item is None:
            return
        with self._lock:
            if status in ("done", "cached"):
                self.done.add(item)
                self.running.discard(item)
            elif status == "failed":
                self.failed += 1
                self.running.discard(item)
            elif status in ("started", "running") and item not in self.done:
                if status == "started" and item in self._started:
                    self.failed += 1  # a second attempt: the first was lost (worker killed, task raised)
                self._started.add(item)
                self.running.add(item)

    def line(self) -> str:
        """E.g. "12/32 done, 2 running, 1 failed"."""
        return f"{len(self.done)}/{self.total} done, {len(self.running)} running, {self.failed} failed"


@contextmanager
def cluster_bar(specs: Sized, address: str) -> Iterator[Callable[[ProgressEvent], None]]:
    """One rich bar on stderr for the runs ``specs`` on the cluster at ``address``; yields
    the experiment's ``progress`` callback."""
    from rich.progress import TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from attn_cli.cli.commands.execute import progress_display

    counts = RunCounts(len(specs))
    progress = progress_display(
        TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()
    )
    task = progress.add_task(f"runs on {address[:60]}", total=len(specs), counts=counts.line())

    def update(event: ProgressEvent) -> None:
        counts.update(event)
        progress.update(task, completed=len(counts.done), counts=counts.line())

    with progress:
        yield update
