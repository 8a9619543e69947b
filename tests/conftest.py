"""Shared test helpers: run the installed ``attn`` entry point as a user would."""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from attn_cli.core import numerics

# The test process computes in the default numeric mode, as `attn` does: pinned before any
# test imports torch (the kernels are chosen once per process).
numerics.apply(numerics.DEFAULT_MODE)

# Every test, and every `attn` it starts, uses a cache of this session (never the user's own
# ~/.cache/attn): set before any test runs, inherited by child processes.
_SESSION_CACHE = tempfile.mkdtemp(prefix="attn-test-cache-")  # 0700, ours
atexit.register(shutil.rmtree, _SESSION_CACHE, True)
os.environ["ATTN_CACHE_DIR"] = os.path.join(_SESSION_CACHE, "cache")

# rich fixes a console's width for good when COLUMNS is set as it is made: make attn's consoles
# here, with none set, so that each in-process command sees the COLUMNS its test gives it
# (whatever test happens to import them first, in whatever worker)
os.environ.pop("COLUMNS", None)
import attn_cli.render.console  # noqa: E402,F401


def pytest_report_header(config) -> list[str]:
    """Which kind of host this run is on: every CI log says vendor, model, ISA and numeric mode."""
    return [_host_line()]


def pytest_sessionstart(session) -> None:
    """``pytest -q`` (README's and CI's command) prints no header: say the host there too."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and session.config.option.verbose < 0:
        reporter.write_line(_host_line())


def _host_line() -> str:
    import platform

    info = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = numerics.cpu_flags()
    widest = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    cpu = info.get("model name") or platform.processor() or platform.machine()
    return (
        f"host: {cpu} ({info.get('vendor_id', 'unknown vendor')}, {os.cpu_count()} CPUs, widest ISA {widest}); "
        f"torch dispatches to {numerics.effective_isa()} in numeric mode {numerics.current_mode()}"
    )


ATTN = shutil.which("attn") or str(Path(sys.executable).with_name("attn"))


def signals_as_a_terminal_gives_them() -> None:
    """``preexec_fn`` for a child a test will signal: SIGINT, SIGHUP, SIGTERM and SIGQUIT at their
    default disposition.  A process started in the background by a non-interactive shell
    (``cmd &``, ``nohup``) inherits SIGINT and SIGHUP ignored, and so does every child of it; attn
    rightly keeps an inherited ignore (a background job is not Ctrl-C's target), so without this
    the signal tests would test the shell that started pytest (seen: run under ``nohup ... &`` the
    Ctrl-C and SIGHUP tests timed out and left attn training)."""
    import signal

    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def run_attn(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``attn ARGS...`` through the console script; returns the completed process."""
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([ATTN, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def session_folder(tmp_path_factory, name: str) -> Path:
    """A folder shared by this session's xdist workers (the base temp's parent under xdist)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory) -> Path:
    """One real ``attn all --quick --format svg png``, made by the first worker that asks for it
    and read (never written) by the report's browser tests and the docs site's gallery."""
    import fcntl

    out = session_folder(tmp_path_factory, "quick-report")
    with open(f"{out}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (out / "manifest.json").exists():
            proc = run_attn("all", "--quick", "--format", "svg", "png", "--out", out, timeout=600)
            assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (tests/cdp.py); a skip without it, a failure when ATTN_REQUIRE_BROWSER is set."""
    from cdp import Browser, find_chromium

    executable = find_chromium()
    if executable is None:
        if os.environ.get("ATTN_REQUIRE_BROWSER"):
            pytest.fail("ATTN_REQUIRE_BROWSER is set but no chromium was found")
        pytest.skip("no headless browser: install Debian's chromium (apt-get install chromium); .ci/run does")
    b = Browser(executable)
    yield b
    b.close()


def run_json(*args: str, tmp_path: Path, timeout: float = 300):
    """Run ``attn ARGS... --quick --json --out tmp_path`` and parse stdout as JSON."""
    proc = run_attn(*args, "--json", "--out", str(tmp_path), timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    """Non-zero exit, a one-line ``Error: ...`` on stderr, no traceback."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert error_lines, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def assert_png(path: Path) -> None:
    """The file exists, is a PNG and is not blank (more than one colour)."""
    import numpy as np
    from matplotlib import image

    assert path.exists(), path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    pixels = image.imread(path)
    assert np.ptp(pixels.reshape(-1, pixels.shape[-1]), axis=0).max() > 0.1, f"{path} looks blank"


@pytest.fixture(autouse=True)
def _no_open_figures():
    yield
    if "matplotlib.pyplot" in sys.modules:
        import matplotlib.pyplot as plt

        assert not plt.get_fignums(), "a test left a matplotlib figure open"


@pytest.fixture
def kernel_isolated(monkeypatch, tmp_path):
    """The C kernel's loader state and the private scratch folder saved, fresh ones for the
    test (ATTN_CACHE_DIR unset, tmp_path private: 0700), the real ones restored after."""
    from attn_cli.core.copy_fast import kernel
    from attn_cli.store import private

    os.chmod(tmp_path, 0o700)
    saved = kernel._state
    kernel._state = dataclasses.replace(saved)  # the test's own copy
    monkeypatch.delenv("ATTN_CACHE_DIR", raising=False)
    monkeypatch.setattr(private, "_scratch", None)  # the next scratch_dir() makes a fresh one
    yield tmp_path
    if private._scratch is not None:
        shutil.rmtree(private._scratch, ignore_errors=True)
    kernel._state = saved


def run_copy_task(config, cache_root, progress=None, reuse: bool = True):
    """The copy task's ``run`` with the per-user cache at ``cache_root``, opened and handed to it as
    the pipeline does (:func:`attn_cli.pipeline.run`: ``store=Pieces``); ``reuse=False``: --no-cache."""
    from attn_cli.experiments import copy_task
    from attn_cli.store import cache, entries

    with cache.Cache.open(cache_root) as store:
        return copy_task.run(config, progress=progress, store=entries.Pieces(store, "copy_task", reuse=reuse))
