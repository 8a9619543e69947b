"""Nothing outside its own: attn deletes only what it made, changes no folder's mode, never
waits on a cluster without a word, and leaves the caller's process and TMPDIR as it found them.

Each test runs in a temporary tree (never against the real ``/`` or ``$HOME``), and each one
fails on the code before these rules: a ``cache clear`` that removed another tool's files, a
chmod of any folder it opened, silent hangs on a port that is not a Dask scheduler, an API that
left ``ATTN_NUMERICS`` in ``os.environ``, scratch folders left in TMPDIR.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from attn_cli.store import cache
from tests.conftest import ATTN, assert_user_error, run_attn

TINY_COPY = ["copy-task", "--quick", "--lengths", "2", "--steps", "2", "--eval-size", "20", "--no-figures"]


def env_without_cache(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATTN_CACHE_DIR", "XDG_CACHE_HOME", "ATTN_SCHEDULER")}
    return {**env, "COLUMNS": "200", "NO_COLOR": "1", **extra}


def attn(*args, env: dict | None = None, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ATTN, *map(str, args)],
        capture_output=True,
        text=True,
        env=env or env_without_cache(),
        cwd=cwd,
        timeout=timeout,
    )


def snapshot(top: Path, skip: tuple[str, ...] = ()) -> dict:
    """Every entry under ``top`` (and ``top`` itself): mode, owner, group, and a file's bytes."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in ["", *dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, top)
            if any(rel == s or rel.startswith(s + os.sep) for s in skip):
                continue
            st = os.lstat(path)
            data = Path(path).read_bytes() if stat.S_ISREG(st.st_mode) else None
            found[rel] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, data)
        dirnames[:] = [d for d in dirnames if os.path.relpath(os.path.join(dirpath, d), top) not in skip]
    return found


def foreign_tree(top: Path) -> Path:
    """A folder of another tool, in attn's layout: ``store/<64 hex>.json`` and an empty ``projects/``."""
    top.mkdir(mode=0o700)
    (top / "store").mkdir()
    (top / "store" / f"{1:064x}.json").write_text("{}")
    (top / "projects").mkdir()
    return top


# --------------------------------------------------------------------------- cache clear


def test_clear_refuses_another_tools_folder_and_removes_nothing(tmp_path):
    folder = foreign_tree(tmp_path / "d")
    before = snapshot(folder)
    link = tmp_path / "link"
    link.symlink_to(folder)
    for target in (folder, link):
        for extra in ([], ["--dry-run"]):
            proc = attn("cache", "clear", "--cache-dir", target, *extra)
            assert_user_error(proc, str(target), "not attn's cache folder", "nothing removed")
            assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert snapshot(folder) == before


def test_clear_refuses_the_home_folder_and_a_mount_point_by_name(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "notes.txt").write_text("mine")
    before = snapshot(home)
    proc = attn("cache", "clear", "--cache-dir", home, env=env_without_cache(HOME=str(home)))
    assert_user_error(proc, f"{home} is the home folder", "nothing removed")
    assert snapshot(home) == before
    if shutil.which("unshare") is None:
        pytest.skip("no unshare to make a mount point in a private mount namespace")
    mnt = tmp_path / "mnt"
    mnt.mkdir(mode=0o700)
    script = f"mount -t tmpfs -o mode=0700 none {mnt} && echo x > {mnt}/f && exec {ATTN} cache clear --cache-dir {mnt}"
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=env_without_cache(),
        timeout=120,
    )
    if "Error:" not in proc.stderr:  # unshare or mount refused (not root, no user namespaces): attn never ran
        pytest.skip(f"cannot make a mount point here: {proc.stderr.strip()}")
    assert_user_error(proc, f"{mnt} is a mount point", "nothing removed")


def test_the_root_folder_is_named_as_such():
    """Read only: the classifier stats ``/`` and its parent, which are the same folder."""
    assert cache.special_folder(Path("/")) == "/ is the root folder"


def test_a_path_that_is_a_file_or_a_device_is_not_a_folder(tmp_path):
    (tmp_path / "afile").write_text("x")
    proc = attn("cache", "clear", "--cache-dir", tmp_path / "afile")
    assert_user_error(proc, "is not a folder (a file)", "nothing removed")
    assert (tmp_path / "afile").read_text() == "x"
    for target, what in ((tmp_path / "afile", "a file"), (Path("/dev/null"), "a device")):
        shown = json.loads(attn("cache", "--json", "--cache-dir", target).stdout)
        assert shown["reason"].startswith(f"{target} is not a folder ({what}") and not shown["exists"]


def test_clear_on_attns_own_folder_removes_its_entries_and_key_and_nothing_else(tmp_path):
    root = tmp_path / "cache"
    done = attn(*TINY_COPY, "--cache-dir", root, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert (root / cache.TAG_FILE).read_bytes().startswith(cache.TAG_SIGNATURE)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    entries = sorted(p.name for p in (root / "copy_task").iterdir())
    assert len(entries) == 2
    # beside them: a file and a folder of the user's, an unsigned file and a symlink in attn's layout
    (root / "notes.txt").write_text("mine")
    (root / "store").mkdir()
    (root / "store" / f"{2:064x}.json").write_text("{}")
    os.symlink(root / "notes.txt", root / "copy_task" / f"{3:064x}.json")
    keep = {"notes.txt", "store", f"store/{2:064x}.json", cache.TAG_FILE, f"copy_task/{3:064x}.json", "copy_task"}

    dry = json.loads(attn("cache", "clear", "--dry-run", "--json", "--cache-dir", root).stdout)
    assert dry["dry_run"] and dry["removed"]["copy_task"]["entries"] == 2 and dry["key"]
    assert dry["kept"] == [f"store/{2:064x}.json"]
    assert sorted(p.name for p in (root / "copy_task").iterdir()) == sorted([*entries, f"{3:064x}.json"])

    proc = attn("cache", "clear", "--cache-dir", root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("removed 2 entries") and "and the key" in proc.stdout
    left = {p.relative_to(root).as_posix() for p in root.rglob("*")}
    assert left == keep  # the signed entries and the key gone; copy_task/ stays: it still holds a symlink
    assert (root / "notes.txt").read_text() == "mine"

    os.unlink(root / "copy_task" / f"{3:064x}.json")
    attn(*TINY_COPY, "--cache-dir", root, "--out", tmp_path / "out")
    assert attn("cache", "clear", "--cache-dir", root).returncode == 0
    assert not (root / "copy_task").exists()  # emptied of attn's entries: attn's folder, removed


def test_a_cache_folder_that_is_not_attns_is_used_by_no_command(tmp_path):
    folder = foreign_tree(tmp_path / "d")
    before = snapshot(folder)
    proc = attn(*TINY_COPY, "--cache-dir", folder, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "warning: the cache cannot be used" in proc.stderr and "not attn's cache folder" in proc.stderr
    assert snapshot(folder) == before


# --------------------------------------------------------------------------- no folder's mode changed


@pytest.fixture
def fake_system(tmp_path):
    """A ``/``-like folder (0755, files in it) and a ``$HOME``-like one (0755, another tool's
    ``.cache``), in a temporary tree."""
    root = tmp_path / "root"
    root.mkdir()
    root.chmod(0o755)
    for name in ("data", "opt", "srv"):
        (root / name).mkdir(mode=0o755)
    (root / "data" / f"{5:064x}.json").write_text("{}")
    home = tmp_path / "home"
    (home / ".cache" / "othertool").mkdir(parents=True)
    for folder in (home, home / ".cache", home / ".cache" / "othertool"):
        folder.chmod(0o755)
    (home / ".cache" / "othertool" / "index.json").write_text("{}")
    return tmp_path, root, home


def test_no_command_changes_a_folder_it_did_not_create(fake_system):
    tmp, root, home = fake_system
    env = env_without_cache(HOME=str(home))
    out = tmp / "out"
    commands = [
        ["cache", "--cache-dir", root],
        ["cache", "clear", "--cache-dir", root],
        ["cache", "--cache-dir", home],
        ["cache", "clear", "--cache-dir", home],
        [*TINY_COPY, "--cache-dir", root, "--out", out],
        [*TINY_COPY, "--cache-dir", home, "--out", out],
        [*TINY_COPY, "--out", out],  # the default cache: ~/.cache/attn, made by attn
        ["all", "--quick", "--only", "w9-worked", "--cache-dir", root, "--out", out / "all"],
        ["verify", "--only", "w9-worked", "--cache-dir", home],
        ["cache"],
        ["cache", "clear"],
    ]
    before = snapshot(tmp, skip=("out", "home/.cache/attn"))
    for command in commands:
        proc = attn(*command, env=env)
        assert "Traceback" not in proc.stderr, (command, proc.stderr)
        assert snapshot(tmp, skip=("out", "home/.cache/attn")) == before, command
    made = home / ".cache" / "attn"
    assert stat.S_IMODE(made.stat().st_mode) == 0o700 and (made / cache.TAG_FILE).is_file()


def test_a_home_that_does_not_exist_is_never_created(tmp_path):
    missing = tmp_path / "nonexistent"
    proc = attn(*TINY_COPY, "--out", tmp_path / "out", env=env_without_cache(HOME=str(missing)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning:") == 1 and "does not exist" in proc.stderr
    assert not missing.exists()
    shown = attn("cache", "--json", env=env_without_cache(HOME=str(missing)))
    assert json.loads(shown.stdout)["location"] == str(missing / ".cache" / "attn") and not missing.exists()


# --------------------------------------------------------------------------- leftovers


def test_no_scratch_folder_is_left_in_tmpdir_and_a_relative_xdg_is_ignored(tmp_path):
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (home / ".cache").chmod(0o777)  # the cache home is refused: matplotlib goes to attn's scratch
    scratch = tmp_path / "tmp"
    scratch.mkdir(mode=0o700)
    work = tmp_path / "work"
    work.mkdir()
    runs = [
        (["heatmap", "attention", "translation"], {}),
        ([*TINY_COPY[:-1]], {}),
        (["all", "--quick", "--only", "w9-masks", "w9-copy-task-map"], {}),
        (["masks"], {"XDG_CACHE_HOME": "rel-cache", "XDG_CONFIG_HOME": "rel-config"}),
    ]
    for command, extra in runs:
        env = env_without_cache(HOME=str(home), TMPDIR=str(scratch), **extra)
        env.pop("MPLCONFIGDIR", None)
        proc = attn(*command, "--out", tmp_path / "out", env=env, cwd=work)
        assert proc.returncode == 0, proc.stderr
        # attn's own scratch folders (torch may keep its compile cache, torchinductor_USER, there)
        assert [n for n in os.listdir(scratch) if n.startswith("attn")] == [], (command, os.listdir(scratch))
        assert os.listdir(work) == [], (command, os.listdir(work))  # nothing under a relative XDG folder


def test_a_deep_tmpdir_still_trains(tmp_path):
    """The fork server's socket lives under TMPDIR: past AF_UNIX's 107 bytes the copy task's
    workers are spawned instead (once a traceback)."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True, mode=0o700)
    proc = attn(*TINY_COPY, "--out", tmp_path / "out", env=env_without_cache(TMPDIR=str(deep)))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- messages


@pytest.mark.parametrize(
    "args, message",
    [
        (["copy-task", "--steps", "1e3"], "'1e3' is not an integer"),
        (["copy-task", "--lengths", "--quick"], "expected a value after --lengths, got the option --quick"),
        (["sqrt-dk", "--d-k", "--quick"], "expected a value after --d-k, got the option --quick"),
        (
            ["copy-task", "--scheduler", "inproc://nothing"],
            "the scheme inproc:// is not supported; use one of tcp://, tls://",
        ),
    ],
)
def test_usage_errors_say_what_is_wrong(tmp_path, args, message):
    proc = run_attn(*args, "--out", tmp_path)
    assert proc.returncode == 2
    assert_user_error(proc, message)


# --------------------------------------------------------------------------- a cluster that answers


class Listener:
    """A loopback port that accepts and then stays silent, answers HTTP, or sends garbage."""

    def __init__(self, kind: str):
        self.kind, self.sock = kind, socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.kind == "http":
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                conn.close()
            elif self.kind == "garbage":
                conn.sendall(os.urandom(64) + b"\xff" * 4096)

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.mark.parametrize("kind", ["silent", "http", "garbage"])
def test_a_port_that_is_not_a_dask_scheduler_is_one_error_within_15_s(tmp_path, kind):
    pytest.importorskip("distributed")
    listener = Listener(kind)
    try:
        started = time.monotonic()
        address = f"tcp://127.0.0.1:{listener.port}"
        proc = attn(*TINY_COPY, "--out", tmp_path, "--scheduler", address, timeout=60)
        took = time.monotonic() - started
    finally:
        listener.close()
    assert_user_error(proc, f"{address} (from --scheduler) is not a Dask scheduler")
    assert len(proc.stderr.strip().splitlines()) == 1 and took < 15, (took, proc.stderr)


def test_the_handshake_timeout_is_set_by_its_variable(tmp_path):
    pytest.importorskip("distributed")
    listener = Listener("silent")
    try:
        started = time.monotonic()
        proc = attn(
            "all",
            "--quick",
            "--only",
            "w9-copy-task",
            "--out",
            tmp_path,
            timeout=60,
            env=env_without_cache(ATTN_SCHEDULER=f"127.0.0.1:{listener.port}", ATTN_SCHEDULER_TIMEOUT="2"),
        )
        took = time.monotonic() - started
    finally:
        listener.close()
    assert_user_error(proc, "(from ATTN_SCHEDULER) is not a Dask scheduler", "within 2 s")
    assert took < 10, took


@pytest.fixture
def lonely_scheduler(tmp_path):
    """A real Dask scheduler on loopback with no worker."""
    pytest.importorskip("distributed")
    file = tmp_path / "scheduler.json"
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("dask")),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(file),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from tests.test_dask_cluster import scheduler_address

        yield scheduler_address(file)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_scheduler_without_workers_is_said_at_once_every_10_s_and_given_up_on(tmp_path, lonely_scheduler):
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            ATTN,
            *TINY_COPY,
            "--out",
            str(tmp_path / "out"),
            "--cache-dir",
            str(tmp_path / "c"),
            "--scheduler",
            lonely_scheduler,
            "--worker-wait",
            "12",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_without_cache(),
    )
    lines = []
    for line in proc.stderr:  # no terminal: plain lines, as they come
        lines.append((time.monotonic() - started, line.strip()))
    proc.wait(timeout=60)
    said = [(t, text) for t, text in lines if text]
    assert proc.returncode == 1
    assert said[0][1].startswith(f"no Dask worker is connected to the scheduler at {lonely_scheduler}")
    assert "still no Dask worker" in said[1][1] and 8 < said[1][0] - said[0][0] < 13
    assert said[-1][1].startswith("Error: no Dask worker connected") and "(--worker-wait)" in said[-1][1]
    assert 11 < said[-1][0] - said[0][0] < 20
    assert not any("Traceback" in text for _, text in said)


# --------------------------------------------------------------------------- the Python API


def run_script(tmp_path: Path, body: str, timeout: float = 300) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_without_cache(ATTN_CACHE_DIR=str(tmp_path / "cache")),
        timeout=timeout,
    )


def test_a_refused_numerics_call_leaves_the_environment_and_the_next_call_as_a_fresh_process(tmp_path):
    proc = run_script(
        tmp_path,
        """
        import json, os, sys
        import attn_cli
        from attn_cli.core import numerics
        if __name__ == "__main__":
            env = dict(os.environ)
            first = attn_cli.run("heatmap", "attention", "translation").to_dict()
            assert dict(os.environ) == env
            import torch
            torch.set_num_threads(1)
            refused = None
            try:
                attn_cli.run("heatmap", "attention", "translation", numerics="native")
            except Exception as exc:
                refused = str(exc)
            assert dict(os.environ) == env, set(os.environ.items()) ^ set(env.items())
            second = attn_cli.run("heatmap", "attention", "translation").to_dict()
            assert dict(os.environ) == env and torch.get_num_threads() == 1
            print(json.dumps({"refused": refused, "first": first, "second": second,
                              "native": numerics.expected_capability("native")}))
    """,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    if got["native"] not in (None, "AVX2"):  # this host's native kernels are not the portable ones
        assert got["refused"] and "needs" in got["refused"] and "new process" in got["refused"]
    fresh = json.loads(run_attn("heatmap", "attention", "translation", "--json", "--out", tmp_path / "o").stdout)
    assert got["second"] == got["first"] == fresh
    assert got["second"]["config"]["numerics"]["mode"] == "portable"


def test_a_script_without_the_main_guard_gets_one_config_error(tmp_path):
    proc = run_script(
        tmp_path,
        """
        import attn_cli
        print("top level ran")
        try:
            attn_cli.run("copy-task", quick=True, lengths=[2, 3], steps=2, eval_size=20, no_figures=True)
        except attn_cli.ConfigError as exc:
            print("ConfigError:", exc)
    """,
    )
    assert proc.returncode == 0, proc.stderr
    # the workers import the script (its top-level print runs there too), and stop at attn's call
    assert proc.stdout.count("ConfigError:") == 1 and proc.stdout.count("top level ran") >= 2
    assert 'if __name__ == "__main__"' in proc.stdout and "docs/api.md" in proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr


def test_the_api_refuses_a_word_the_cli_refuses_with_the_same_message(tmp_path):
    import attn_cli

    cli = run_attn(
        "heatmap",
        "ab\udcff".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape"),
        "cd",
        "--out",
        tmp_path,
    )
    with pytest.raises(attn_cli.ConfigError) as info:
        attn_cli.run("heatmap", "ab\udcff", "cd")
    assert f"Error: {info.value}" in cli.stderr


def test_an_earlier_attns_cache_is_adopted_by_the_next_command_that_caches(tmp_path):
    """A cache made before the tag (its hmac.key, its group folders) is named as such, is not
    cleared before it carries the tag, and is tagged by the next command that caches."""
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    (root / cache.KEY_FILE).write_bytes(os.urandom(cache.KEY_BYTES))
    (root / cache.KEY_FILE).chmod(0o600)
    (root / "copy_task").mkdir(mode=0o700)
    shown = json.loads(attn("cache", "--json", "--cache-dir", root).stdout)
    assert "an earlier attn's cache" in shown["reason"]
    assert_user_error(attn("cache", "clear", "--cache-dir", root), "no CACHEDIR.TAG", "nothing removed")
    assert not (root / cache.TAG_FILE).exists()
    done = attn(*TINY_COPY, "--cache-dir", root, "--out", tmp_path / "out")
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert (root / cache.TAG_FILE).is_file()
    cleared = attn("cache", "clear", "--cache-dir", root)
    assert cleared.returncode == 0 and cleared.stdout.startswith("removed 2 entries"), cleared.stdout
