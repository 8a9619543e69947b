"""The attack of issue 19, in the suite: folders swapped with renameat2(RENAME_EXCHANGE) in a
tight loop while the kernel loader resolves, verifies and loads its library again and again.
No library but the genuine one is ever loaded.

An attacker's folder holds a rogue library of the expected name, with a matching SHA-256
record beside it; it exports the kernel's symbols (so loading it would leave no warning),
returns -1 from ``param_count`` and writes a marker file from its constructor.

* ``same-user swapper``: the cache's parent is private to us, and a process of ours (the
  test runs as one user) swaps the cache folder with the attacker's (owned by uid 65534, or
  mode 0777 when the tests cannot chown).  The walk sometimes passes through the genuine
  folder and sometimes meets the attacker's: every step after the walk goes through the
  folder's descriptor, so no swap in between can change what is loaded.
* ``other-user swapper``: the issue's set-up exactly: ``XDG_CACHE_HOME`` a folder of mode
  0777, the swapper running as uid 65534 (``setpriv``; needs root), swapping ``attn`` with its
  own folder.  The loader refuses the place every time and writes nothing into it.

Each case is bounded: 200 loads or 12 s, whichever comes first.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from attn_cli.core.copy_fast import kernel
from attn_cli.store import private

RENAMEAT2 = {"x86_64": 316, "aarch64": 276}.get(platform.machine())
pytestmark = [
    pytest.mark.skipif(kernel._compiler() is None, reason="no C compiler"),
    pytest.mark.skipif(
        RENAMEAT2 is None or not sys.platform.startswith("linux"),
        reason="renameat2 is a Linux system call; its number is known here for x86_64 and aarch64",
    ),
]
LOADS, SECONDS = 200, 12.0
OTHER = 65534  # nobody

ROGUE = r"""
#include <stdio.h>
__attribute__((constructor)) static void rogue(void) {
  FILE *f = fopen(MARKER, "w"); if (f) { fputs("ran", f); fclose(f); }
}
long param_count(int a, int b) { return -1; }
void role_sizes(int h, int attention, long *out) { }
double loss_and_grad(void *a, void *b, void *c, int d, int e, int f, int g, void *h) { return 0.0; }
int train_steps(void *a, void *b, void *c, void *d, long e, void *f, int g, int h, int i, int j, int k,
                double l, double m, void *n, void *o) { return 0; }
"""

SWAPPER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
nr, a, b = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3].encode()
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
swaps = tries = 0
print("ready", flush=True)
while not stop:
    for _ in range(500):
        tries += 1
        swaps += libc.syscall(nr, -100, a, -100, b, 2) == 0  # AT_FDCWD, RENAME_EXCHANGE
print(swaps, tries, flush=True)
"""


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    """The genuine library's bytes and cached name (built once for the module)."""
    cc = kernel._compiler()
    data = kernel._build(cc)
    return f"copy_fast_{kernel.build_key(cc)}.so", data


@pytest.fixture
def fresh(kernel_isolated):
    return kernel_isolated  # conftest: the loader state and scratch folder saved and restored


def _install(folder: Path, name: str, data: bytes) -> None:
    fd = private.open_private_dir(folder)
    try:
        kernel._install(fd, name, data)
    finally:
        os.close(fd)


def _rogue_folder(kernels: Path, name: str, marker: Path) -> str:
    """The attacker's kernels folder: a rogue library of the expected name and its record."""
    kernels.mkdir(parents=True)
    src = kernels / "rogue.c"
    src.write_text(ROGUE.replace("MARKER", f'"{marker}"'))
    subprocess.run([kernel._compiler(), "-shared", "-fPIC", str(src), "-o", str(kernels / name)], check=True)
    src.unlink()
    sha = hashlib.sha256((kernels / name).read_bytes()).hexdigest()
    (kernels / (name + ".sha256")).write_text(sha + "\n")
    return sha


def _give_away(top: Path) -> None:
    for root, dirs, files in os.walk(top):
        for entry in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(entry, OTHER, OTHER)


def _race(argv_prefix: list[str], a: Path, b: Path, genuine_sha: str, marker: Path) -> dict:
    """Load again and again while the swapper runs; what was loaded, counted."""
    swapper = subprocess.Popen(
        [*argv_prefix, os.path.realpath(sys.executable), "-I", "-S", "-c", SWAPPER, str(RENAMEAT2), str(a), str(b)],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen = {"loads": 0, "from_cache": 0, "elsewhere": 0}
    try:
        assert swapper.stdout.readline().strip() == "ready"
        end = time.monotonic() + SECONDS
        while seen["loads"] < LOADS and time.monotonic() < end:
            kernel._state = kernel._State()  # a fresh loader state
            lib = kernel.load()
            assert lib is not None, kernel.load_error()
            where, sha = kernel.loaded()
            assert sha == genuine_sha, f"load {seen['loads']}: loaded {sha}, from {where}"
            assert lib.param_count(1, 32) > 0, f"load {seen['loads']}: a library without the kernel's sizes"
            assert not marker.exists(), f"load {seen['loads']}: the rogue library's constructor ran"
            seen["loads"] += 1
            seen["from_cache" if where is not None and a in where.parents else "elsewhere"] += 1
    finally:
        swapper.send_signal(signal.SIGTERM)
        out, _ = swapper.communicate(timeout=30)
    swaps, tries = map(int, out.split())
    seen.update(swaps=swaps, tries=tries)
    return seen


def test_a_swap_race_by_a_process_of_ours_never_gets_a_foreign_library_loaded(fresh, genuine, monkeypatch, capsys):
    name, data = genuine
    arena = fresh / "arena"
    arena.mkdir(mode=0o700)
    cache = arena / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    _install(cache / "attn" / "kernels", name, data)
    _install(private.scratch_dir() / "kernels", name, data)  # where a refused walk goes: no rebuild
    marker = fresh / "rogue_constructor_ran"
    _rogue_folder(arena / "evil" / "attn" / "kernels", name, marker)
    if os.geteuid() == 0:
        _give_away(arena / "evil")
    else:
        (arena / "evil").chmod(0o777)
    seen = _race([], cache, arena / "evil", hashlib.sha256(data).hexdigest(), marker)
    print(seen)
    # the race really ran: some walks passed through the genuine folder, some met the attacker's
    assert seen["swaps"] > 0 and seen["loads"] >= 20 and seen["from_cache"] and seen["elsewhere"], seen
    assert not marker.exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="swapping as another user needs root and setpriv"
)
def test_a_swap_race_by_another_user_in_a_world_writable_cache_home(fresh, genuine, monkeypatch, capsys, request):
    """The issue's demonstration: XDG_CACHE_HOME mode 0777, uid 65534 exchanging ``attn``
    with its own folder.  The place is refused on every load, and root writes nothing in it."""
    name, data = genuine
    reachable = Path(tempfile.mkdtemp(prefix="attn_race_", dir="/tmp"))  # pytest's tmp_path is 0700
    request.addfinalizer(lambda: shutil.rmtree(reachable, ignore_errors=True))
    reachable.chmod(0o755)  # the attacker must reach the arena
    arena = reachable / "arena"
    arena.mkdir()
    arena.chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(arena))
    _install(private.scratch_dir() / "kernels", name, data)
    marker = fresh / "rogue_constructor_ran"
    _rogue_folder(arena / "evil" / "kernels", name, marker)
    _rogue_folder(arena / "attn" / "kernels", name, marker)  # the attacker's decoy of our name
    _give_away(arena / "evil")
    _give_away(arena / "attn")
    seen = _race(
        ["setpriv", "--reuid", str(OTHER), "--regid", str(OTHER), "--clear-groups"],
        arena / "attn",
        arena / "evil",
        hashlib.sha256(data).hexdigest(),
        marker,
    )
    print(seen)
    assert seen["swaps"] > 0 and seen["loads"] >= 20 and seen["from_cache"] == 0, seen
    assert not marker.exists()
    owners = {os.lstat(os.path.join(root, n)).st_uid for root, dirs, files in os.walk(arena) for n in dirs + files}
    assert owners == {OTHER}, "root wrote into the attacker's folder"
    err = capsys.readouterr().err
    assert f"is not kept in {arena}/attn/kernels ({arena} is writable by group or others" in err
