"""Figures saved by forked children (attn_cli.render.save_processes) and --no-figures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_cli.render import save_processes
from attn_cli.render.save_processes import SaveProcesses, in_parallel

needs_fork = pytest.mark.skipif(not save_processes.available(),
                                reason="figures are saved in this process here (no fork, or one usable CPU)")


def _figure(title: str):
    from attn_cli.render.figures import new_figure

    fig, ax = new_figure(figsize=(3, 2))
    ax.plot([0, 1, 2], [1, 0, 2], "o-")
    ax.set_title(title)
    return fig


@needs_fork
def test_a_figure_saved_by_a_child_has_the_bytes_of_one_saved_here(tmp_path):
    from attn_cli.render.files import save_figure

    here = save_figure(_figure("same bytes"), tmp_path / "here.png", ("png", "svg"), metadata={"k": "v"})
    with in_parallel() as pool:
        assert pool is not None
        there = save_figure(_figure("same bytes"), tmp_path / "there.png", ("png", "svg"), metadata={"k": "v"})
        assert pool.pending, "the figure was saved in this process, not by a child"
    assert [p.name for p in there] == ["there.png", "there.svg"]
    for a, b in zip(here, there):
        assert a.read_bytes() == b.read_bytes()
    assert not list(tmp_path.glob(".*")), "a temp file was left behind"


@needs_fork
def test_every_file_is_complete_when_the_block_ends_and_children_are_reaped(tmp_path):
    pids = []

    def save(i):
        def write():
            time.sleep(0.2)
            (tmp_path / f"{i}.txt").write_text(str(os.getpid()))
        return write

    with in_parallel(limit=2) as pool:
        for i in range(5):
            assert pool.submit(save(i), lambda: None)
            assert len(pool.pending) <= 2  # never more children than the limit
            pids += [pid for pid, _, _ in pool.pending]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{i}.txt" for i in range(5)]
    assert {int((tmp_path / f"{i}.txt").read_text()) for i in range(5)} != {os.getpid()}  # written by children
    for pid in set(pids):
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left


@needs_fork
@pytest.mark.parametrize("how", ["raises", "killed"])
def test_a_child_that_fails_is_followed_by_the_same_save_here(tmp_path, how):
    parent = os.getpid()
    closed = []

    def write():
        if os.getpid() != parent:  # in the child only
            if how == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError("child only")
        (tmp_path / "out.txt").write_text("saved here")

    pool = SaveProcesses(1)
    assert pool.submit(write, lambda: closed.append(True))
    pool.finish()
    assert (tmp_path / "out.txt").read_text() == "saved here"
    assert closed == [True]


@needs_fork
def test_a_save_that_fails_everywhere_raises_its_error_here(tmp_path):
    def write():
        raise PermissionError(13, "Permission denied", str(tmp_path / "x.png"))

    with pytest.raises(PermissionError):
        with in_parallel() as pool:
            pool.submit(write, lambda: None)


@needs_fork
def test_an_error_in_the_block_stops_and_reaps_the_children(tmp_path):
    def slow():
        time.sleep(60)

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with in_parallel(limit=2) as pool:
            pool.submit(slow, lambda: None)
            pids = [pid for pid, _, _ in pool.pending]
            raise KeyboardInterrupt
    assert time.monotonic() - start < 30
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_without_children_figures_are_saved_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setattr(save_processes, "available", lambda: False)
    from attn_cli.render.files import save_figure

    with in_parallel() as pool:
        assert pool is None
        assert save_figure(_figure("here"), tmp_path / "a.png") == [tmp_path / "a.png"]
        assert (tmp_path / "a.png").stat().st_size > 0  # written before the block ends


def test_no_format_writes_no_figure(tmp_path):
    from attn_cli.render.files import save_figure

    assert save_figure(_figure("none"), tmp_path / "a.png", ()) == []
    assert not list(tmp_path.iterdir())


def _attn(*args, cwd):
    return subprocess.run([sys.executable, "-m", "attn_cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_no_figures_writes_the_data_files_and_imports_no_matplotlib(tmp_path):
    probe = ("import runpy, sys\n"
             "sys.argv = ['attn', 'copy-task', '--engine', 'fast', '--steps', '1', '--lengths', '4', '--eval-size', '8',"
             " '--no-cache', '--cache-dir', sys.argv[1], '--no-figures', '--out', sys.argv[2]]\n"
             "try:\n    runpy.run_module('attn_cli', run_name='__main__')\n"
             "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
             "print('MATPLOTLIB' if 'matplotlib' in sys.modules else 'NO-MATPLOTLIB')\n")
    proc = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "cache"), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("NO-MATPLOTLIB")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["copy_task_accuracy.csv", "copy_task_attention_L4.csv", "copy_task_runs.json"]


def test_no_figures_with_format_is_a_usage_error_and_attn_all_has_no_such_flag(tmp_path):
    both = _attn("masks", "--no-figures", "--format", "svg", "--out", str(tmp_path), cwd=tmp_path)
    assert both.returncode == 2 and "--no-figures draws no figure" in both.stderr
    assert "Traceback" not in both.stderr
    report = _attn("all", "--no-figures", "--out", str(tmp_path), cwd=tmp_path)
    assert report.returncode == 2 and "No such option" in report.stderr
    masks = _attn("masks", "--no-figures", "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert masks.returncode == 0, masks.stderr
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["masks.csv"]


@needs_fork
@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here: the oldest child is reaped first")
def test_a_new_save_takes_the_slot_of_the_first_child_to_finish(tmp_path):
    """Limit 2: a slow child and a quick one; the third save starts when the quick one is done,
    not after the slow one (the oldest)."""
    def slow():
        time.sleep(3)

    def quick():
        pass

    def mark():
        (tmp_path / "third").write_text(str(time.monotonic()))

    with in_parallel(limit=2) as pool:
        start = time.monotonic()
        assert pool.submit(slow, lambda: None)
        assert pool.submit(quick, lambda: None)
        assert pool.submit(mark, lambda: None)
        waited = time.monotonic() - start
        assert len(pool.pending) == 2  # the slow one and the third
    assert waited < 1.5, f"the third save waited {waited:.1f} s for the slow child"
    assert float((tmp_path / "third").read_text()) - start < 1.5


def _recorder(tmp_path: Path, name: str):
    """A task that appends "name pid" to tmp_path/log (one line: an atomic append)."""
    def task():
        with open(tmp_path / "log", "a") as f:
            f.write(f"{name} {os.getpid()}\n")
    return task


def _log(tmp_path: Path) -> list[tuple[str, int]]:
    lines = (tmp_path / "log").read_text().split("\n") if (tmp_path / "log").exists() else []
    return [(name, int(pid)) for name, pid in (line.split() for line in lines if line)]


@needs_fork
def test_pull_runs_every_task_once_in_at_most_workers_children(tmp_path):
    save_processes.pull([_recorder(tmp_path, str(i)) for i in range(7)], workers=2)
    log = _log(tmp_path)
    assert sorted(name for name, _ in log) == [str(i) for i in range(7)]  # each once, all done on return
    pids = {pid for _, pid in log}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


@needs_fork
def test_pull_hands_the_tasks_out_in_order_and_a_free_child_takes_the_next(tmp_path):
    save_processes.pull([_recorder(tmp_path, str(i)) for i in range(5)], workers=1)
    assert [name for name, _ in _log(tmp_path)] == ["0", "1", "2", "3", "4"]
    (tmp_path / "log").unlink()

    def slow():
        time.sleep(2)
        _recorder(tmp_path, "slow")()

    start = time.monotonic()
    save_processes.pull([slow, *(_recorder(tmp_path, f"q{i}") for i in range(4))], workers=2)
    log = dict(_log(tmp_path))
    assert time.monotonic() - start < 3.5
    # the slow task's child took none of the quick ones: the other child, free, took them all
    assert {log[f"q{i}"] for i in range(4)} == {log["q0"]} and log["q0"] != log["slow"]


@needs_fork
@pytest.mark.parametrize("how", ["raises", "killed"])
def test_pull_runs_here_what_failed_in_its_child(tmp_path, how):
    parent = os.getpid()

    def fragile():
        if os.getpid() != parent:
            if how == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError("no space left on device (in the child only)")
        _recorder(tmp_path, "fragile")()

    save_processes.pull([_recorder(tmp_path, "a"), fragile, _recorder(tmp_path, "b")], workers=1)
    log = _log(tmp_path)
    assert ("fragile", parent) in log  # done here, after the children
    if how == "raises":  # the child went on with the next task
        assert [name for name, pid in log if pid != parent] == ["a", "b"]
    else:  # its child died with it: what it had not reported ("b" too) is done here
        assert [name for name, pid in log if pid == parent] == ["fragile", "b"]


@needs_fork
def test_a_task_that_fails_everywhere_raises_here_and_no_child_is_left(tmp_path, monkeypatch):
    forked = []
    fork = save_processes.fork

    def recording_fork():
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(save_processes, "fork", recording_fork)

    def broken():
        raise OSError("no space left on device")

    with pytest.raises(OSError, match="no space left"):
        save_processes.pull([_recorder(tmp_path, "a"), broken], workers=2)
    assert [name for name, _ in _log(tmp_path)] == ["a"]
    assert len(forked) == 2
    for pid in forked:  # every child reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_pull_without_children_runs_every_task_here(tmp_path, monkeypatch):
    monkeypatch.setattr(save_processes, "available", lambda: False)
    save_processes.pull([_recorder(tmp_path, str(i)) for i in range(3)])
    assert _log(tmp_path) == [(str(i), os.getpid()) for i in range(3)]
    save_processes.pull([])  # nothing to do: nothing forked
