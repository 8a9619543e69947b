"""The copy-task C kernel is built and loaded only from a private folder, verified by SHA-256,
and any failure falls back to PyTorch ops with one warning."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from attn_cli.core.copy_fast import kernel

needs_cc = pytest.mark.skipif(kernel._compiler() is None, reason="no C compiler")

PLANTED = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
  FILE *f = fopen(MARKER, "w"); if (f) { fputs("ran", f); fclose(f); }
}
long param_count(int a, int b) { return -1; }
"""


@pytest.fixture
def fresh(kernel_isolated, monkeypatch):
    """A fresh loader state with the cache under tmp_path (private: 0700) and a fresh scratch
    folder; the real state restored after (conftest's kernel_isolated)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(kernel_isolated / "cache"))
    kernel._state = kernel._State()  # a fresh loader state
    yield kernel_isolated


def _plant(path: Path, marker: Path) -> None:
    """Compile a library whose constructor writes ``marker`` when it is loaded."""
    src = path.with_suffix(".c")
    src.write_text(PLANTED.replace("MARKER", f'"{marker}"'))
    subprocess.run([kernel._compiler(), "-shared", "-fPIC", str(src), "-o", str(path)], check=True)
    src.unlink()


def _chosen() -> Path:
    """The folder the loader picks now (its descriptor closed at once)."""
    fd, folder = kernel._open_kernel_folder()
    os.close(fd)
    return folder


def _sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _so_name() -> str:
    return f"copy_fast_{kernel.build_key(kernel._compiler())}.so"


def test_the_cache_folder_is_created_private(fresh, capsys):
    assert kernel.cache_folder() == fresh / "cache" / "attn" / "kernels"
    assert _chosen() == kernel.cache_folder()
    assert stat.S_IMODE(kernel.cache_folder().stat().st_mode) == 0o700
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_folder_others_can_write_is_refused_with_one_warning(fresh, mode, capsys):
    folder = fresh / "cache" / "attn" / "kernels"
    folder.parent.mkdir(parents=True, mode=0o700)
    folder.mkdir()
    folder.chmod(mode)
    chosen = _chosen()
    assert chosen != folder and chosen.parent == private_scratch()
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o700
    _chosen()
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and f"not kept in {folder} ({folder} is writable by group or others" in err
    assert os.listdir(folder) == []


def test_a_parent_others_can_write_is_refused_and_left_untouched(fresh, capsys):
    """XDG_CACHE_HOME itself mode 0777 (the issue's set-up): nothing is created in it."""
    shared = fresh / "cache"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert _chosen().parent == private_scratch()
    assert os.listdir(shared) == []
    assert "cache is writable by group or others without the sticky bit" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_owned_by_another_user_is_refused(fresh, capsys):
    folder = fresh / "cache" / "attn" / "kernels"
    folder.parent.mkdir(parents=True, mode=0o700)
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    assert _chosen() != folder
    assert "owned by uid 65534" in capsys.readouterr().err


def test_no_shared_fixed_fallback(fresh, monkeypatch):
    """The cache cannot be created: a fresh private scratch folder, never <tmp>/attn_cli_kernels."""
    from attn_cli.store import private

    blocker = fresh / "not_a_folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    chosen = _chosen()
    assert chosen != Path(tempfile.gettempdir()) / "attn_cli_kernels"
    assert chosen.parent.name.startswith("attn_") and chosen.parent == private_scratch()
    os.close(private.open_private_dir(chosen, create=False))
    private._scratch = None  # forgotten: the next call makes a fresh one
    assert _chosen() != chosen  # per process (here: per reset), not a fixed name


def private_scratch() -> Path:
    from attn_cli.store import private

    return private.scratch_dir()


@needs_cc
def test_a_planted_library_is_never_loaded(fresh):
    """Someone's library of the expected name: without the recorded SHA-256 it is rebuilt,
    never loaded (its constructor would write the marker)."""
    folder = _chosen()
    marker = fresh / "constructor_ran"
    so = folder / _so_name()
    _plant(so, marker)
    (folder / (so.name + ".sha256")).write_text("0" * 64 + "\n")  # a wrong record
    lib = kernel.load()
    assert lib is not None and lib.param_count(1, 32) > 0, kernel.load_error()
    assert not marker.exists()
    assert _sha256_of(so) == (folder / (so.name + ".sha256")).read_text().strip()
    assert kernel.loaded() == (None, _sha256_of(so))  # a fresh build
    # and the planted fixed fallback of old is ignored as well
    assert _chosen() != Path(tempfile.gettempdir()) / "attn_cli_kernels"


@needs_cc
def test_a_symlinked_library_with_a_matching_record_is_never_loaded(fresh):
    """The cached name is a symlink to a library elsewhere whose hash is recorded: never
    followed (read_regular refuses symlinks), rebuilt and replaced by a regular file."""
    folder = _chosen()
    marker = fresh / "constructor_ran"
    elsewhere = fresh / "planted.so"
    _plant(elsewhere, marker)
    so = folder / _so_name()
    so.symlink_to(elsewhere)
    (folder / (so.name + ".sha256")).write_text(_sha256_of(elsewhere))
    lib = kernel.load()
    assert lib is not None and lib.param_count(1, 32) > 0 and not marker.exists()
    assert not so.is_symlink() and kernel.loaded()[1] == _sha256_of(so) != _sha256_of(elsewhere)


@needs_cc
def test_a_verified_library_is_loaded_from_the_cache(fresh):
    assert kernel.load() is not None
    kernel._state = kernel._State()  # a fresh loader state
    lib = kernel.load()
    so = kernel.cache_folder() / _so_name()
    assert lib is not None and kernel.loaded() == (so, _sha256_of(so))
    assert lib._name.startswith("/proc/self/fd/") or Path(lib._name).parent.parent == private_scratch()


@needs_cc
def test_a_corrupt_library_with_a_matching_record_is_rebuilt(fresh):
    folder = _chosen()
    so = folder / _so_name()
    so.write_bytes(b"\x7fELF not really")
    (folder / (so.name + ".sha256")).write_text(_sha256_of(so))
    lib = kernel.load()  # CDLL raises OSError on the corrupt bytes: rebuilt, loaded
    assert lib is not None and lib.param_count(1, 32) > 0
    assert kernel.load_error() is None and kernel.loaded()[0] is None


def test_any_load_failure_falls_back_with_one_warning(fresh, monkeypatch, capsys):
    """A noexec mount or a broken library: ctypes raises OSError; load() returns None, warns
    once, and the fast engine runs on PyTorch ops, recording backend "torch"."""
    from attn_cli.core import copy_fast
    from attn_cli.core.copy_spec import RunSpec

    def noexec(data):
        raise OSError("copy_fast.so: failed to map segment from shared object")

    monkeypatch.setattr(kernel, "_bind", noexec)
    monkeypatch.setattr(kernel, "_build", lambda cc, which=None: b"\x7fELF")
    monkeypatch.setattr(kernel, "_compiler", lambda: "cc")
    assert kernel.load() is None and kernel.load() is None
    assert "failed to map segment" in kernel.load_error()
    spec = RunSpec(model="attention", length=3, steps=2, eval_size=8, batch_size=4, hidden=4)
    (outcome,) = copy_fast.run_fast([spec], "cpu")
    assert outcome.backend == "torch"
    err = capsys.readouterr().err
    assert err.count("warning: the copy-task C kernel is not available") == 1, err


def test_no_compiler_falls_back_too(fresh, monkeypatch, capsys):
    monkeypatch.setattr(kernel, "_compiler", lambda: None)
    assert kernel.load() is None and kernel.load_error() == "no C compiler found"
    assert "PyTorch ops" in capsys.readouterr().err


@needs_cc
def test_a_world_writable_cache_home_builds_elsewhere_and_writes_nothing_there(tmp_path):
    """The issue's set-up: XDG_CACHE_HOME a 0777 folder.  attn copy-task --engine fast builds
    and loads its kernel elsewhere, says so once, and writes nothing into that folder."""
    import json
    import sys

    os.chmod(tmp_path, 0o700)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    env = {k: v for k, v in os.environ.items() if k != "ATTN_CACHE_DIR"} | {"XDG_CACHE_HOME": str(shared)}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from attn_cli.cli import main; main()",
            "copy-task",
            "--engine",
            "fast",
            "--quick",
            "--json",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert {run["backend"] for run in json.loads(proc.stdout)["runs"]} == {"kernel"}
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning")]
    # one warning for the folder (the cache's, which covers the kernel's): what and why
    assert len(warnings) == 1, proc.stderr
    assert f"nothing is kept in {shared}/attn" in warnings[0] and f"{shared} is writable" in warnings[0]
    assert os.listdir(shared) == []


def test_the_build_key_covers_compiler_version_and_cpu(monkeypatch):
    base = kernel.build_key("cc")
    monkeypatch.setattr(kernel, "compiler_version", lambda cc: "cc (GCC) 99.0")
    other_cc = kernel.build_key("cc")
    monkeypatch.setattr(kernel, "cpu_features", lambda: "fpu sse2")
    other_cpu = kernel.build_key("cc")
    assert len({base, other_cc, other_cpu}) == 3


@needs_cc
def test_the_copy_task_json_records_the_backend(tmp_path):
    from attn_cli.experiments import copy_task as exp
    from attn_cli.experiments.copy_task.config import CACHE_SUBDIR
    from tests.conftest import run_copy_task

    config = exp.Config.quick(lengths=(3,), model="attention", engine="fast", steps=2, eval_size=8)
    result = run_copy_task(config, tmp_path / "cache")
    assert [r["backend"] for r in result.runs] == ["kernel" if kernel.load() is not None else "torch"]
    # an entry whose payload was edited (the field removed) fails its HMAC: recomputed, recorded again
    cached = next((tmp_path / "cache" / CACHE_SUBDIR).glob("*.json"))
    import json

    obj = json.loads(cached.read_text())
    del obj["entry"]["payload"]["backend"]
    cached.write_text(json.dumps(obj))
    again = run_copy_task(config, tmp_path / "cache")
    assert not again.runs[0]["cached"] and again.runs[0]["backend"] == result.runs[0]["backend"]
    shutil.rmtree(tmp_path / "cache")


# --- the kernel's ISA follows the numeric mode (issue 8): portable builds never target the host ---

AVX2_HOST = frozenset({"sse2", "avx", "avx2", "fma"})
AVX512_HOST = AVX2_HOST | {"avx512f", "avx512cd", "avx512bw", "avx512vl", "avx512dq"}


def test_the_build_key_differs_between_numeric_modes(monkeypatch):
    monkeypatch.setattr(kernel, "compiler_version", lambda cc: "cc (GCC) 12.2.0")
    assert kernel.build_key("cc", "portable") != kernel.build_key("cc", "native")
    assert kernel.build_key("cc", "portable") == kernel.build_key("cc", "portable")


def test_portable_flags_never_target_the_host(monkeypatch):
    monkeypatch.setattr(kernel, "accepts", lambda cc, flags: True)
    avx2 = kernel.isa_flags("cc", "portable", machine="x86_64", flags=AVX2_HOST)
    assert avx2 == ["-march=x86-64-v3"]
    # the widest variant: the same bits as the AVX2 one (tests/test_kernel_variants.py)
    assert kernel.isa_flags("cc", "portable", machine="x86_64", flags=AVX512_HOST) == [
        "-march=x86-64-v4",
        "-mprefer-vector-width=512",
    ]
    assert kernel.isa_flags("cc", "portable", machine="x86_64", flags=frozenset({"sse2"})) == []
    assert kernel.isa_flags("cc", "portable", machine="aarch64", flags=frozenset({"asimd"})) == []
    assert kernel.isa_flags("cc", "native", machine="x86_64", flags=AVX512_HOST) == ["-march=native"]
    assert not any("native" in flag for flag in kernel.compile_flags("cc", "portable"))
    assert "-march=native" in kernel.compile_flags("cc", "native")


def test_a_compiler_without_x86_64_v3_gets_avx2_and_fma(monkeypatch):
    monkeypatch.setattr(kernel, "accepts", lambda cc, flags: "-march=x86-64-v3" not in flags)
    assert kernel.isa_flags("cc", "portable", machine="x86_64", flags=AVX2_HOST) == ["-mavx2", "-mfma"]


def test_the_build_uses_the_flags_of_the_processs_mode(fresh, monkeypatch):
    """The compiler is called with the current mode's flags, and the library is cached
    under that mode's key: a native build is never reused by a portable process."""
    calls = []

    def fake_run(argv, **kwargs):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "stop here")

    monkeypatch.setattr(kernel, "accepts", lambda cc, flags: True)  # no probe through the fake
    monkeypatch.setattr(kernel, "_compile", fake_run)  # the build's one compiler call
    for mode in ("portable", "native"):
        monkeypatch.setenv("ATTN_NUMERICS", mode)
        with pytest.raises(RuntimeError, match="stop here"):
            kernel._build("cc")
        assert calls[-1][1:-4] == kernel.compile_flags("cc", mode)
    assert not any("native" in flag for flag in calls[0])


@needs_cc
def test_the_source_ships_as_package_data():
    """kernel.c and what it includes are read from the package and named in pyproject's
    package-data, so a normal (non-editable) install has them too."""
    import fnmatch
    import re

    import tomllib

    sources = kernel.c_sources()
    assert list(sources) == list(kernel.SOURCES) and all(sources.values())
    included = set(re.findall(r'#include "([^"]+)"', "".join(sources.values())))
    assert included <= set(kernel.SOURCES)
    root = Path(kernel.__file__).resolve().parents[3]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert all(any(fnmatch.fnmatch(name, p) for p in patterns[kernel.__package__]) for name in kernel.SOURCES)


def _copy_task_json(out, **env):
    import json
    import sys

    child_env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"} | env
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from attn_cli.cli import main; main()",
            "copy-task",
            "--engine",
            "fast",
            "--lengths",
            "8",
            "--steps",
            "200",
            "--eval-size",
            "100",
            "--model",
            "attention",
            "--json",
            "--no-cache",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=child_env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    obj.pop("timing", None)
    return obj


@needs_cc
def test_portable_runs_give_the_same_bits_whatever_the_inherited_isa(tmp_path):
    """A fast-engine run in portable mode, once with ATEN_CPU_CAPABILITY=avx512 in the child's
    environment: every value equal, bit for bit (the kernel and torch both pinned).  Both write
    into the same folder, which the JSON records."""
    plain = _copy_task_json(tmp_path, ATTN_NUMERICS="portable")
    pushed = _copy_task_json(tmp_path, ATTN_NUMERICS="portable", ATEN_CPU_CAPABILITY="avx512")
    assert plain["runs"][0]["backend"] == "kernel"
    assert pushed == plain
