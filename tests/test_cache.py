"""The per-user cache (attn_cli/cache.py): one private folder shared by every --out, entries
signed with an HMAC under the user's key, JSON only, typed on the way back, never code."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from attn_cli import experiment_registry
from attn_cli.experiments import copy_task as exp
from attn_cli.experiments.copy_task.config import max_entry_bytes
from attn_cli.store import cache, entries
from tests.conftest import ATTN, assert_user_error, run_attn, run_copy_task


@dataclasses.dataclass
class Plain:
    x: float


@dataclasses.dataclass
class Opaque:
    value: object


TINY = dict(lengths=(3,), model="attention", steps=3, eval_size=8, jobs=1)  # < 1 s in-process
# the same run through the CLI, with its JSON
TINY_ARGS = (
    "copy-task",
    "--lengths",
    "3",
    "--model",
    "attention",
    "--steps",
    "3",
    "--eval-size",
    "8",
    "--jobs",
    "1",
    "--json",
)


def _entries(root: Path, name: str = "copy_task") -> list[Path]:
    return sorted((root / name).glob("*.json"))


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: the cache cannot be used")]


# --------------------------------------------------------------------------- the format


@pytest.mark.parametrize("name", ["copy_both", "embeddings", "sqrt_dk", "exercises"])
def test_every_cached_experiment_round_trips_through_json(tmp_path, name):
    exp_ = next(e for e in experiment_registry.discover() if e.name == name)
    assert exp_.cached
    config = exp_.config(quick=True)
    if name == "exercises":
        config = dataclasses.replace(config, exercises=(1, 4, 9))
    result = exp_.run(config)
    key = {"experiment": name}
    with cache.Cache.open(tmp_path / "cache") as store:
        assert entries.store_result(store, name, key, result)  # a dataclass of plain values: kept
        back = entries.load_result(store, name, key, type(result))
    assert type(back) is type(result)
    assert json.dumps(dataclasses.asdict(back), sort_keys=True) == json.dumps(
        dataclasses.asdict(result), sort_keys=True
    )
    (entry,) = _entries(tmp_path / "cache", name)
    assert entry.stat().st_size < cache.RESULT_MAX_BYTES / 100  # the fixed bound is generous


def test_a_result_that_does_not_read_back_is_not_stored(tmp_path):
    with cache.Cache.open(tmp_path / "cache") as store:
        assert not entries.store_result(store, "x", {}, Opaque(value={1, 2}))  # a set is not JSON
    assert not (tmp_path / "cache" / "x").exists()


def test_an_entry_is_data_never_code(tmp_path):
    import pickle

    with cache.Cache.open(tmp_path / "cache") as store:
        assert entries.store_result(store, "plain", {"k": 1}, Plain(1.5))
        (path,) = _entries(tmp_path / "cache", "plain")
        signed = path.read_bytes()
        path.write_bytes(pickle.dumps(Plain(2.0)))  # a planted pickle is not even parsed: refused
        with pytest.raises(cache.Refused, match="carries no HMAC"):
            entries.load_result(store, "plain", {"k": 1}, Plain)
        path.write_bytes(signed)  # a signed entry is plain data, typed by Plain
        assert entries.load_result(store, "plain", {"k": 1}, Plain) == Plain(1.5)
        with pytest.raises(cache.Refused, match="key does not match"):  # renamed onto another key's name
            os.rename(path, tmp_path / "cache" / "plain" / cache.entry_file({"k": 2}))
            entries.load_result(store, "plain", {"k": 2}, Plain)


def test_the_folder_and_the_key_are_private(tmp_path):
    old = os.umask(0)  # the widest umask: the folder, key and entries are still ours alone
    try:
        with cache.Cache.open(tmp_path / "cache") as store:
            store.store("x", {"k": 1}, [1, 2])
    finally:
        os.umask(old)
    root = tmp_path / "cache"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "x").stat().st_mode) == 0o700
    key = root / cache.KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == cache.KEY_BYTES
    (entry,) = _entries(root, "x")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_the_first_key_wins_and_is_kept(tmp_path):
    root = tmp_path / "cache"
    cache.Cache.open(root).close()
    first = (root / cache.KEY_FILE).read_bytes()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        cache._make_key(fd, root)  # a second process making its key at the same moment: it loses
    finally:
        os.close(fd)
    assert (root / cache.KEY_FILE).read_bytes() == first
    assert sorted(p.name for p in root.iterdir()) == [cache.TAG_FILE, cache.KEY_FILE]  # its temp file is gone


@pytest.mark.parametrize("spoil", ["mode 0644", "short", "symlink", "folder"])
def test_a_key_file_that_is_not_ours_and_private_is_not_trusted(tmp_path, spoil):
    root = tmp_path / "cache"
    cache.Cache.open(root).close()
    key = root / cache.KEY_FILE
    if spoil == "mode 0644":
        key.chmod(0o644)
    elif spoil == "short":
        key.write_bytes(b"0" * 31)
    elif spoil == "symlink":
        (tmp_path / "planted").write_bytes(b"k" * 32)
        (tmp_path / "planted").chmod(0o600)
        key.unlink()
        key.symlink_to(tmp_path / "planted")
    else:
        key.unlink()
        key.mkdir()
    with pytest.raises(cache.Unavailable, match="key"):
        cache.Cache.open(root)


# --------------------------------------------------------------------------- integrity


def test_a_forged_entry_is_recomputed(tmp_path):
    """Edited, with a plain SHA-256 recomputed (what the old self-stored digest accepted)."""
    config, root = exp.Config(**TINY), tmp_path / "cache"
    first = run_copy_task(config, root)
    (path,) = _entries(root)
    obj = json.loads(path.read_text())
    obj["entry"]["payload"]["free_running"] = 0.999
    body = json.dumps(obj["entry"], sort_keys=True)
    obj["hmac"] = hashlib.sha256(body.encode()).hexdigest()
    obj["digest"] = cache.digest(obj["entry"]["payload"])
    path.write_text(json.dumps(obj) + "\n")
    again = run_copy_task(config, root)
    assert not again.runs[0]["cached"] and again.rows == first.rows
    (note,) = again.notes
    assert "HMAC does not match" in note and "recomputing" in note
    assert json.loads(path.read_text())["entry"]["payload"]["free_running"] == first.rows[0]["free_running"]
    assert run_copy_task(config, root).runs[0]["cached"]  # rewritten, signed again


def test_an_entry_copied_from_another_cache_is_recomputed(tmp_path):
    """Signed, but under another user's (another cache's) key: refused."""
    config, theirs, mine = exp.Config(**TINY), tmp_path / "theirs", tmp_path / "mine"
    run_copy_task(config, theirs)
    run_copy_task(config, mine)
    (their_entry,) = _entries(tmp_path / "theirs")
    (my_entry,) = _entries(tmp_path / "mine")
    assert their_entry.name == my_entry.name  # the same run: the same file name
    shutil.copyfile(their_entry, my_entry)
    again = run_copy_task(config, mine)
    assert not again.runs[0]["cached"]
    assert "HMAC does not match" in again.notes[0]
    assert run_copy_task(config, theirs).runs[0]["cached"]  # in its own cache, it holds


@pytest.mark.parametrize("plant", ["fifo", "dev-zero symlink", "oversized", "folder"])
def test_an_entry_that_is_not_a_bounded_regular_file_is_recomputed(tmp_path, plant):
    config, root = exp.Config(**TINY), tmp_path / "cache"
    run_copy_task(config, root)
    (path,) = _entries(root)
    path.unlink()
    if plant == "fifo":
        os.mkfifo(path)  # would block a plain open() forever
    elif plant == "dev-zero symlink":
        path.symlink_to("/dev/zero")  # would be read until memory runs out
    elif plant == "folder":
        path.mkdir()
    else:  # signed with our own key, but larger than any run of this spec can be
        spec = config.plan()[0]
        huge = {"example_weights": [[0.5] * 400] * 400}
        with cache.Cache.open(tmp_path / "cache") as store:
            store.store("copy_task", exp.cache_key(spec, "exact", "cpu"), huge)
        assert path.stat().st_size > max_entry_bytes(dataclasses.asdict(spec))
    again = run_copy_task(config, root)
    assert not again.runs[0]["cached"]
    assert "unreadable" in again.notes[0] and "recomputing" in again.notes[0]
    if plant == "folder":  # a folder in the way cannot be replaced: the run is not cached, said once
        assert len(again.notes) == 2 and "no longer cached" in again.notes[1]
    else:
        assert len(again.notes) == 1
        assert path.is_file() and not path.is_symlink() and run_copy_task(config, root).runs[0]["cached"]


def test_an_entry_the_user_cannot_read_is_recomputed_with_a_note(tmp_path):
    """chmod 000: as another user (setpriv), or as root without the capabilities that
    override file modes where that user cannot reach this venv's interpreter."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is missing: no way to run attn as a user who cannot read the entry")
    if os.geteuid() != 0:
        pytest.skip("needs root to switch user (setpriv --reuid) or to drop CAP_DAC_OVERRIDE")
    base = Path(tempfile.mkdtemp(prefix="attn-other-"))  # parents /tmp (sticky) and root's: fine
    try:
        prefix, uid = _other_user()
        os.chown(base, uid, uid)
        env = dict(os.environ, HOME=str(base), ATTN_CACHE_DIR=str(base / "cache"), COLUMNS="200")
        cmd = [*prefix, ATTN, *TINY_ARGS, "--out", str(base / "out")]

        def run():
            return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=base)

        first = run()
        assert first.returncode == 0, first.stderr
        (entry,) = _entries(base / "cache")
        assert entry.stat().st_uid == uid
        entry.chmod(0)
        second = run()
        assert second.returncode == 0 and "Traceback" not in second.stderr, second.stderr
        assert not json.loads(second.stdout)["runs"][0]["cached"]
        notes = [line for line in second.stderr.splitlines() if "Permission denied" in line]
        assert len(notes) == 1 and "recomputing" in notes[0], second.stderr
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600  # replaced by a fresh entry
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _other_user() -> tuple[list[str], int]:
    """A command prefix that runs as a user for whom mode 000 means unreadable, and its uid."""
    other = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    probe = subprocess.run([*other, ATTN, "--version"], capture_output=True, timeout=60)
    if probe.returncode == 0:
        return other, 65534
    capless = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    probe = subprocess.run([*capless, ATTN, "--version"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("neither uid 65534 nor root without CAP_DAC_OVERRIDE can run this venv's attn")
    return capless, 0


# --------------------------------------------------------------------------- one cache, every --out


def test_the_cache_is_shared_by_every_out_and_leaks_no_path(tmp_path):
    cache_dir = tmp_path / "cache"
    first = run_attn(*TINY_ARGS, "--out", tmp_path / "a", "--cache-dir", cache_dir)
    second = run_attn(*TINY_ARGS, "--out", tmp_path / "b", "--cache-dir", cache_dir)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert [r["cached"] for r in a["runs"]] == [False]
    assert [r["cached"] for r in b["runs"]] == [True]  # the second --out computed nothing
    assert a["rows"] == b["rows"] and len(_entries(cache_dir)) == 1
    for text in (first.stdout, second.stdout, (tmp_path / "b" / "copy_task_runs.json").read_text()):
        assert str(tmp_path) not in text and "cache_root" not in text


def test_the_location_follows_the_option_then_the_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ATTN_CACHE_DIR", "XDG_CACHE_HOME")}

    def where(*args, **extra):
        proc = subprocess.run(
            [ATTN, "cache", "--json", *map(str, args)],
            capture_output=True,
            text=True,
            env={**env, "HOME": str(tmp_path / "home"), **extra},
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["location"]

    assert where() == str(tmp_path / "home" / ".cache" / "attn")
    assert where(XDG_CACHE_HOME=str(tmp_path / "xdg")) == str(tmp_path / "xdg" / "attn")
    both = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "ATTN_CACHE_DIR": str(tmp_path / "env")}
    assert where(**both) == str(tmp_path / "env")
    assert where("--cache-dir", tmp_path / "opt", **both) == str(tmp_path / "opt")
    assert not (tmp_path / "home").exists()  # showing creates nothing


@pytest.mark.parametrize(
    "value, reason",
    [
        ("", "is empty"),
        ("  ", "is empty"),
        ("a\x01b", "control characters"),
        ("x" * 256, "longer than"),
        ("/x" * 2048, "longer than"),
    ],
)
def test_a_cache_dir_that_cannot_be_a_folder_is_a_usage_error(tmp_path, value, reason):
    for command in (["copy-task", "--quick", "--out", tmp_path / "out"], ["cache"]):
        proc = run_attn(*command, "--cache-dir", value, cwd=tmp_path)
        assert proc.returncode == 2
        assert_user_error(proc, "--cache-dir", reason)
    # no cache folder made here (the current folder); --out itself is another option's matter
    assert [p.name for p in tmp_path.iterdir()] in ([], ["out"]) and not list(tmp_path.glob("out/*"))


def test_a_bad_attn_cache_dir_is_named_in_the_warning(tmp_path):
    (tmp_path / "file").write_text("x")
    env = dict(os.environ, ATTN_CACHE_DIR=str(tmp_path / "file" / "cache"))
    proc = subprocess.run(
        [ATTN, *TINY_ARGS, "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    (warning,) = _warnings(proc.stderr)
    assert "from ATTN_CACHE_DIR" in warning and "is not a folder" in warning


@pytest.mark.parametrize("place", ["under a file", "another user's folder"])
def test_an_unusable_cache_is_one_warning_and_a_run_without_cache(tmp_path, place):
    if place == "under a file":
        (tmp_path / "file").write_text("x")
        cache_dir = tmp_path / "file" / "cache"
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to give a folder to uid 65534")
        cache_dir = tmp_path / "theirs"
        cache_dir.mkdir(mode=0o700)
        os.chown(cache_dir, 65534, 65534)
    proc = run_attn(*TINY_ARGS, "--out", tmp_path / "out", "--cache-dir", cache_dir)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    (warning,) = _warnings(proc.stderr)
    assert "running without cache" in warning
    data = json.loads(proc.stdout)
    assert [r["cached"] for r in data["runs"]] == [False] and data["rows"] and not data["notes"]
    if place == "another user's folder":
        assert "owned by uid 65534" in warning and not any(cache_dir.iterdir())  # nothing written into it


def test_an_unwritable_cache_folder_warns_and_runs(tmp_path):
    """A user who may not create the cache folder (a root-owned 0555 parent)."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs setpriv and root, to run attn as a user who may not write the folder")
    prefix, uid = _other_user()
    base = Path(tempfile.mkdtemp(prefix="attn-other-"))
    try:
        out = base / "out"
        out.mkdir()
        os.chown(out, uid, uid)
        base.chmod(0o555)  # root's, and no one may create anything in it without overriding modes
        proc = subprocess.run(
            [*prefix, ATTN, *TINY_ARGS, "--out", str(out), "--cache-dir", str(base / "cache")],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, HOME=str(out)),
        )
        assert proc.returncode == 0, proc.stderr
        (warning,) = _warnings(proc.stderr)
        assert "Permission denied" in warning and not (base / "cache").exists()
        assert [r["cached"] for r in json.loads(proc.stdout)["runs"]] == [False]
    finally:
        base.chmod(0o700)
        shutil.rmtree(base, ignore_errors=True)


def test_heads_json_is_the_same_under_two_outs(tmp_path):
    outs = [run_attn("heads", "--json", "--out", tmp_path / name) for name in ("a", "elsewhere")]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    a, b = (json.loads(p.stdout) for p in outs)
    a.pop("timing", None), b.pop("timing", None)
    assert a == b and str(tmp_path) not in outs[0].stdout


# --------------------------------------------------------------------------- attn cache


def test_attn_cache_shows_and_clears_only_its_own(tmp_path):
    root = tmp_path / "cache"
    run_copy_task(exp.Config(**TINY), root)
    run_copy_task(exp.Config(**{**TINY, "lengths": (4,)}), root)
    with cache.Cache.open(root) as store:
        store.store("sqrt_dk", {"k": 1}, {"x": 1.0})
    (root / "notes.txt").write_text("mine, not the cache's")
    (root / "kernels").mkdir()
    (root / "kernels" / "lib.so").write_bytes(b"\0")
    sizes = {name: sum(p.stat().st_size for p in _entries(root, name)) for name in ("copy_task", "sqrt_dk")}

    shown = run_attn("cache", "--cache-dir", root)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"cache: {root} (private)"
    assert lines[1].split()[:3] == ["copy_task", "2", "entries"] and lines[2].split()[:3] == ["sqrt_dk", "1", "entry"]
    assert lines[3].split()[:3] == ["total", "3", "entries"]
    data = json.loads(run_attn("cache", "--json", "--cache-dir", root).stdout)
    assert data["private"] and data["location"] == str(root)
    assert data["experiments"] == {
        "copy_task": {"entries": 2, "bytes": sizes["copy_task"]},
        "sqrt_dk": {"entries": 1, "bytes": sizes["sqrt_dk"]},
    }
    assert (data["entries"], data["bytes"]) == (3, sum(sizes.values()))

    cleared = run_attn("cache", "clear", "--json", "--cache-dir", root)
    assert cleared.returncode == 0, cleared.stderr
    assert json.loads(cleared.stdout)["removed"] == data["experiments"]
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        cache.TAG_FILE,
        "kernels",
        "kernels/lib.so",
        "notes.txt",
    ]  # entries and key gone, the rest untouched
    again = run_attn("cache", "clear", "--cache-dir", root)
    assert again.returncode == 0 and again.stdout.startswith(f"removed 0 entries (0 B) from {root}")
    assert "total     0 entries" in run_attn("cache", "--cache-dir", root).stdout


def test_attn_cache_clear_touches_no_folder_that_is_not_private(tmp_path):
    root = tmp_path / "cache"
    with cache.Cache.open(root) as store:
        store.store("sqrt_dk", {"k": 1}, {"x": 1.0})
    root.chmod(0o777)  # anyone may write: nothing in it is ours to trust, or to delete
    proc = run_attn("cache", "clear", "--cache-dir", root)
    assert_user_error(proc, "writable by group or others", "nothing removed")
    assert len(_entries(root, "sqrt_dk")) == 1 and (root / cache.KEY_FILE).exists()
    shown = json.loads(run_attn("cache", "--json", "--cache-dir", root).stdout)
    assert not shown["private"] and "writable" in shown["reason"] and shown["entries"] == 0


def test_attn_cache_help_has_an_example():
    proc = run_attn("cache", "--help")
    assert proc.returncode == 0 and "attn cache clear" in proc.stdout and "Examples" in proc.stdout
    assert "ATTN_CACHE_DIR" in proc.stdout and "--cache-dir" in proc.stdout


def _torch_version_in_child(path: Path) -> list[str]:
    """torch_version() and whether torch got imported, in a child with ``path`` first on sys.path."""
    code = (
        "import sys\nfrom attn_cli.store.entries import torch_version\n"
        "print(torch_version())\nprint('torch' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(path), str(Path(cache.__file__).parents[2])]))
    proc = subprocess.run([os.sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_the_torch_version_is_torchs_own_read_without_importing_it(tmp_path):
    import importlib.metadata

    import torch

    assert entries.torch_version() == str(torch.__version__) == importlib.metadata.version("torch")
    # the torch that ``import torch`` would load is the one read; importing it would fail here
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('this torch must not be imported')\n")
    (fake / "version.py").write_text("from typing import Optional\n\n__version__ = '9.9.9+planted'\ndebug = False\n")
    assert _torch_version_in_child(tmp_path) == ["9.9.9+planted", "False"]
    # no version.py: the installed distribution's metadata (the real torch's version)
    (fake / "version.py").unlink()
    assert _torch_version_in_child(tmp_path) == [importlib.metadata.version("torch"), "False"]


def test_a_result_read_from_the_cache_writes_the_same_json_as_the_run_that_stored_it(tmp_path):
    """Same command, same bytes: the entry keeps the Result's own key order (a sorted one wrote
    ``config`` in another order on every cached rerun)."""
    import attn_cli

    for out in ("cold", "warm"):
        assert attn_cli.regenerate_all(tmp_path / out, "w9-sqrt-dk", quick=True, cache_dir=tmp_path / "cache").ok
    assert any((tmp_path / "cache" / "sqrt_dk").iterdir())  # the warm run read the cold run's entry
    assert (tmp_path / "cold" / "sqrt_dk.json").read_bytes() == (tmp_path / "warm" / "sqrt_dk.json").read_bytes()
