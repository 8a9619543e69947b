"""The cluster progress bar's counting (issue 16: done, running and failed runs, with an ETA).

:class:`attn_cli.cli.commands.copy_task.RunCounts` hears the copy task's Progress events:
``started`` (an attempt begins on a worker), ``done``/``cached``, ``failed``.  No terminal needed.
"""

from __future__ import annotations

from attn_cli.cli.commands.copy_task import RunCounts, cluster_bar
from attn_cli.experiments import ProgressEvent as Progress


def event(item, status):
    return Progress(0, 4, item=item, status=status)


def test_runs_are_counted_done_running_and_failed():
    counts = RunCounts(4)
    assert counts.line() == "0/4 done, 0 running, 0 failed"
    counts.update(event(0, "cached"))  # from the cache: done, never running
    counts.update(event(1, "started"))
    counts.update(event(2, "started"))
    assert counts.line() == "1/4 done, 2 running, 0 failed"
    counts.update(event(1, "done"))
    assert counts.line() == "2/4 done, 1 running, 0 failed"
    counts.update(event(2, "started"))  # started again: its worker was killed (or its task raised)
    assert counts.line() == "2/4 done, 1 running, 1 failed"
    counts.update(event(2, "done"))
    counts.update(event(3, "started"))
    counts.update(event(3, "failed"))  # failed for good
    assert counts.line() == "3/4 done, 0 running, 2 failed"


def test_a_start_heard_after_the_run_finished_is_ignored():
    counts = RunCounts(2)
    counts.update(event(0, "done"))
    counts.update(event(0, "started"))  # the announcement raced the result
    counts.update(Progress(0, 2))  # an event about no run
    assert counts.line() == "1/2 done, 0 running, 0 failed"


def test_the_bar_counts():
    with cluster_bar([object()] * 3, "tcp://127.0.0.1:8786") as update:
        update(event(0, "started"))
        update(event(0, "done"))
