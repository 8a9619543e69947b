"""A single command's figures drawn by a process forked before torch (attn_cli/render/drawer.py).

Each test runs ``attn copy-task`` as a real process (inside pytest torch is imported, so an
in-process command never forks a drawer: that is the reference drawing here), through a small
wrapper that records what the drawer did (its pid, whether it sent the paths back) and can
kill it or make it fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from attn_cli.cli import cli
from attn_cli.render import save_processes

pytestmark = pytest.mark.skipif(not save_processes.available(),
                                reason="figures are saved in this process here (not Linux, or one CPU): no drawer")

RUN = ["copy-task", "--engine", "fast", "--model", "attention", "--lengths", "4", "8", "--steps", "2",
       "--eval-size", "8", "--no-cache"]

WRAPPER = r"""
import json, os, signal, sys
from attn_cli.render import drawer
from attn_cli import experiment_registry
log, mode = sys.argv[1], sys.argv[2]
record = {"forked": [], "answered": []}
start = drawer._start
def _start(exp, *args):
    made = start(exp, *args)
    if made is not None:
        record["forked"].append(made.pid)
        if mode == "kill":
            os.kill(made.pid, signal.SIGKILL)
    return made
drawer._start = _start
answer = drawer.Drawer.figures
def figures(self, *args, **kwargs):
    paths = answer(self, *args, **kwargs)
    record["answered"].append(paths is not None)
    return paths
drawer.Drawer.figures = figures
if mode == "fail":  # the drawer's own drawing raises; this process's does not
    here = experiment_registry.Experiment.figures_here
    def figures_here(self, *args, **kwargs):
        if drawer.inside():
            raise OSError("planted failure in the drawer")
        return here(self, *args, **kwargs)
    experiment_registry.Experiment.figures_here = figures_here
from attn_cli.render import frames
take = frames.take
def taken(key):  # which figures were finished from a frame kept before the numbers came
    frame = take(key)
    if drawer.inside():
        with open(log + ".frames", "a") as f:
            f.write(json.dumps([list(key), frame is not None, os.getpid(), os.getppid()]) + "\n")
    return frame
frames.take = taken
import atexit
atexit.register(lambda: open(log, "w").write(json.dumps(record)))
from attn_cli.cli import main
sys.argv = ["attn", *sys.argv[3:]]
main()
"""


def _attn(tmp_path: Path, mode: str, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    log = tmp_path / f"drawer-{mode}.json"
    proc = subprocess.run([sys.executable, "-c", WRAPPER, str(log), mode, *RUN, "--out", str(out),
                           "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=300)
    return proc, json.loads(log.read_text()) if log.exists() else {}


def _pngs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The figures drawn in this process (pytest holds torch: no drawer)."""
    out = tmp_path_factory.mktemp("here")
    result = CliRunner().invoke(cli, [*RUN, "--out", str(out), "--cache-dir", str(out / "cache")])
    assert result.exit_code == 0, result.output
    pngs = _pngs(out)
    assert sorted(pngs) == ["copy_task_accuracy.png", "copy_task_attention_L4.png", "copy_task_attention_L8.png"]
    return pngs


def test_the_drawer_draws_the_same_bytes_and_is_reaped(tmp_path, reference):
    proc, record = _attn(tmp_path, "plain", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(record["forked"]) == 1 and record["answered"] == [True], record  # the drawer drew them
    assert _pngs(tmp_path / "out") == reference
    assert "wrote" in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
    assert _gone(record["forked"][0])  # stopped and reaped before the command ended


def test_the_drawer_finishes_maps_from_frames_built_before_the_numbers(tmp_path, reference):
    """While the command trains, the drawer builds each map's frame (render/frames.py); the
    maps are then finished from those frames, with the bytes of maps built at once."""
    proc, record = _attn(tmp_path, "plain", tmp_path / "out")
    assert proc.returncode == 0 and record["answered"] == [True], proc.stderr[-2000:]
    log = tmp_path / "drawer-plain.json.frames"
    taken = sorted(json.loads(line) for line in log.read_text().splitlines())
    assert [entry[:2] for entry in taken] == [[["copy-task map", 4], True], [["copy-task map", 8], True]]
    assert _pngs(tmp_path / "out") == reference
    # finished by the drawer's children (save_processes.pull: at most one per usable CPU)
    assert {entry[3] for entry in taken} == set(record["forked"])  # their parent: the drawer
    assert 1 <= len({entry[2] for entry in taken}) <= 2


def test_a_killed_drawer_leaves_the_figures_to_the_command(tmp_path, reference):
    proc, record = _attn(tmp_path, "kill", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(record["forked"]) == 1 and record["answered"] == [False], record
    assert _pngs(tmp_path / "out") == reference  # drawn here instead, the same bytes


def test_a_drawer_that_fails_leaves_the_figures_to_the_command(tmp_path, reference):
    proc, record = _attn(tmp_path, "fail", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert record["answered"] == [False], record
    assert _pngs(tmp_path / "out") == reference
    assert "planted" not in proc.stderr  # the drawer's failure is not the command's


def test_no_drawer_when_every_run_is_cached_or_no_figure_is_asked(tmp_path, reference):
    """A run that trains nothing does not import torch: a drawer would only cost a core."""
    out = tmp_path / "out"
    proc, record = _attn(tmp_path, "plain", out)
    assert record["forked"], record  # the first run trains: a drawer (the check below can fail)
    cached = [a for a in RUN if a != "--no-cache"]
    for extra in ([], ["--no-figures"]):
        log = tmp_path / "again.json"
        proc = subprocess.run([sys.executable, "-c", WRAPPER, str(log), "plain", *cached, *extra,
                               "--out", str(tmp_path / f"again{len(extra)}"), "--cache-dir", str(tmp_path / "cache")],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(log.read_text())["forked"] == [], extra
    nofig = subprocess.run([sys.executable, "-c", WRAPPER, str(log), "plain", *RUN, "--no-figures",
                            "--out", str(tmp_path / "nofig"), "--cache-dir", str(tmp_path / "cache")],
                           capture_output=True, text=True, timeout=300)
    assert nofig.returncode == 0 and json.loads(log.read_text())["forked"] == []
