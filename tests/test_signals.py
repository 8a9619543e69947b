"""Every way a run can end: SIGTERM, SIGHUP and Ctrl-C stop attn and its workers in one line
with exit 128 + the signal; after SIGKILL the workers notice attn is gone and exit.

The runs go through the real ``attn`` script, with two worker processes of the exact engine
(a fork server and the workers under it, and multiprocessing's resource tracker).  Every
process in attn's tree is recorded by pid and start time (no confusion with a reused pid)
before the signal, and none may be alive after it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_cli import signals
from tests.conftest import ATTN, signals_as_a_terminal_gives_them

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree in /proc")

# two long runs (minutes), so the signal always finds both workers training
RUN = (
    "copy-task",
    "--lengths",
    "8",
    "16",
    "--model",
    "attention",
    "--steps",
    "3000",
    "--no-cache",
    "--jobs",
    "2",
    "--engine",
    "exact",
)
GONE_WITHIN = 10.0  # seconds for every process of attn's tree to be gone (generous: the machine is shared)

Proc = tuple[int, int]  # (pid, start time in clock ticks since boot): one process, never a reused pid


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state first), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _tree(root: int) -> list[Proc]:
    """Every live descendant of ``root`` (children, grandchildren, ...) with its start time."""
    children: dict[int, list[Proc]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append((int(entry.name), int(fields[19])))
    found, todo = [], [root]
    while todo:
        for proc in children.get(todo.pop(), []):
            found.append(proc)
            todo.append(proc[0])
    return found


def _tree_depth1(root: int, tree: list[Proc]) -> list[Proc]:
    """The processes of ``tree`` whose parent is ``root`` (its children, not grandchildren)."""
    return [p for p in tree if (_stat(p[0]) or ["", "0"])[1] == str(root)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(proc: Proc) -> bool:
    fields = _stat(proc[0])
    return fields is not None and fields[0] != "Z" and int(fields[19]) == proc[1]


def _kill(procs: list[Proc]) -> None:
    for pid, _ in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start(out: Path, log: Path) -> tuple[subprocess.Popen, list[Proc]]:
    """attn running RUN into ``out``, once both workers train (grandchildren: under the fork
    server); returns the process and its whole tree."""
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1")
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [ATTN, *RUN, "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            start_new_session=True,
            preexec_fn=signals_as_a_terminal_gives_them,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        tree = _tree(proc.pid)
        if len(tree) - len(_tree_depth1(proc.pid, tree)) >= 2:  # two grandchildren: the workers
            time.sleep(1.0)  # into their training loops
            return proc, _tree(proc.pid)
        time.sleep(0.2)
    _kill([(proc.pid, 0), *_tree(proc.pid)])
    proc.wait()
    pytest.fail(f"the workers never started: {log.read_text()}")


def _gone_after(tree: list[Proc], limit: float) -> float:
    """Seconds until none of ``tree`` is alive (fails after ``limit``)."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if not [p for p in tree if _alive(p)]:
            return time.monotonic() - start
        time.sleep(0.05)
    left = [p for p in tree if _alive(p)]
    _kill(left)  # do not leave them burning the machine's cores
    pytest.fail(f"still alive {limit:.0f} s after attn ended: {left}")


@pytest.mark.parametrize(
    "signum, to_group, word",
    [
        (signal.SIGTERM, False, "terminated"),  # kill, timeout, CI cancellation, docker stop: attn alone
        (signal.SIGTERM, True, "terminated"),  # Slurm: every process of the job, workers too
        (signal.SIGHUP, True, "hung up"),  # the terminal closed: the whole foreground group
        (signal.SIGINT, True, "interrupted"),  # Ctrl-C: the whole foreground group
    ],
    ids=["SIGTERM", "SIGTERM-to-group", "SIGHUP", "SIGINT"],
)
def test_a_signal_stops_attn_and_every_worker_with_one_line_and_exit_128_plus_signal(tmp_path, signum, to_group, word):
    out, log = tmp_path / "out", tmp_path / "stderr.txt"
    proc, tree = _start(out, log)
    assert len(tree) >= 3, tree  # the fork server, two workers (and the resource tracker)
    (os.killpg if to_group else os.kill)(proc.pid, signum)
    start = time.monotonic()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # fail without leaving it training for the rest of the suite
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    exited = time.monotonic() - start
    gone = _gone_after(tree, GONE_WITHIN)
    err = log.read_text()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == f"Error: {word}", err
    assert exited < 30, f"attn took {exited:.1f} s to exit"
    assert not [p for p in out.rglob("*") if p.is_file()], "a partial or temp file was left"
    print(f"{signal.Signals(signum).name}: attn exited after {exited:.2f} s, its tree was gone after {gone:.2f} s more")


def test_after_sigkill_the_workers_notice_and_exit(tmp_path):
    out, log = tmp_path / "out", tmp_path / "stderr.txt"
    proc, tree = _start(out, log)
    assert len(tree) >= 3, tree
    os.kill(proc.pid, signal.SIGKILL)  # no handler runs: the workers must see it themselves
    proc.wait(timeout=60)
    gone = _gone_after(tree, GONE_WITHIN)
    assert not [p for p in out.rglob("*") if p.is_file()]
    print(f"SIGKILL: attn's tree was gone {gone:.2f} s after attn")


# --------------------------------------------------------------------------- the rules, in one process


@pytest.mark.parametrize("signum, word", [(signal.SIGTERM, "terminated"), (signal.SIGHUP, "hung up")])
def test_terminated_names_its_signal_and_its_exit_code_even_behind_another_exception(signum, word):
    try:
        try:
            raise signals.Terminated(signum)
        except KeyboardInterrupt:
            raise RuntimeError("raised while cleaning up") from None
    except RuntimeError as exc:
        behind = exc
    for exc in (signals.Terminated(signum), behind):
        assert (signals.describe(exc), signals.exit_code(exc)) == (word, 128 + signum)
    assert (signals.describe(KeyboardInterrupt()), signals.exit_code(KeyboardInterrupt())) == ("interrupted", 130)


def test_the_handler_raises_once_so_that_a_second_signal_cannot_break_the_cleanup(monkeypatch):
    monkeypatch.setattr(signals, "_stopping", False)
    with pytest.raises(signals.Terminated):
        signals._raise(signal.SIGTERM, None)
    signals._raise(signal.SIGTERM, None)  # a second one while cleaning up: ignored
    signals._raise(signal.SIGHUP, None)


def test_a_signal_ignored_at_start_stays_ignored_so_nohup_still_works():
    saved = {signum: signal.getsignal(signum) for signum in signals.STOPPING}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does before it starts attn
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signals.install()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == signals._raise
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


FAKE_CC = """#!/bin/sh
# a compiler that answers the probes and then compiles "forever" in a child, as gcc runs cc1
case "$*" in
  *--version*) echo "fakecc 1.0"; exit 0 ;;
  *-fsyntax-only*) exit 0 ;;
esac
sleep 300 &
wait
"""


def test_sigterm_during_the_kernel_compile_stops_the_compiler_and_its_children(tmp_path):
    cc, cache, tmp = tmp_path / "fakecc", tmp_path / "cache", tmp_path / "tmp"
    cc.write_text(FAKE_CC)
    cc.chmod(0o755)
    tmp.mkdir()
    env = dict(
        os.environ,
        CC=str(cc),
        XDG_CACHE_HOME=str(cache),
        ATTN_CACHE_DIR=str(cache),
        TMPDIR=str(tmp),
        COLUMNS="120",
        NO_COLOR="1",
    )
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen(
            [
                ATTN,
                "copy-task",
                "--engine",
                "fast",
                "--lengths",
                "4",
                "--steps",
                "50",
                "--jobs",
                "1",
                "--no-cache",
                "--out",
                str(tmp_path / "out"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            start_new_session=True,
            preexec_fn=signals_as_a_terminal_gives_them,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        tree = _tree(proc.pid)
        if any(_cmdline(pid).startswith(b"sleep\x00300") for pid, _ in tree):
            break
        time.sleep(0.2)
    else:
        _kill([(proc.pid, 0), *_tree(proc.pid)])
        pytest.fail(f"the compiler never ran: {(tmp_path / 'stderr.txt').read_text()}")
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    _gone_after(tree, GONE_WITHIN)
    err = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "Error: terminated", err
    assert not list(tmp.iterdir()), "the build folder was left behind"
