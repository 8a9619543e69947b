"""attn_cli.store.private: folders proven private by a walk from /, files read only when they are
what they claim to be, atomic writes through a folder's descriptor."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from attn_cli.store import private
from attn_cli.store.private import NotPrivate, open_private_dir, read_regular, user_cache_root, write_atomic

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
OTHER = 65534  # nobody


@pytest.fixture
def base(tmp_path):
    """A private folder to build cases in (pytest's tmp_path is ours, under a proven /tmp)."""
    os.chmod(tmp_path, 0o700)
    return tmp_path


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --------------------------------------------------------------------------- user_cache_root


def test_the_cache_root_follows_the_platform_convention(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTN_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_root() == tmp_path / "home" / ".cache" / "attn"
    monkeypatch.setenv("XDG_CACHE_HOME", "")  # empty counts as unset
    assert user_cache_root() == tmp_path / "home" / ".cache" / "attn"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG rule: ignored
    assert user_cache_root() == tmp_path / "home" / ".cache" / "attn"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_root() == tmp_path / "xdg" / "attn"
    monkeypatch.setenv("ATTN_CACHE_DIR", "")
    assert user_cache_root() == tmp_path / "xdg" / "attn"
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "mine"))
    assert user_cache_root() == tmp_path / "mine"
    assert user_cache_root(tmp_path / "given") == tmp_path / "given"
    monkeypatch.chdir(tmp_path)
    assert user_cache_root("rel") == tmp_path / "rel"
    assert not (tmp_path / "mine").exists() and not (tmp_path / "given").exists()  # not created


# --------------------------------------------------------------------------- open_private_dir


def test_missing_folders_are_created_0700_and_the_fd_is_the_folder(base):
    target = base / "a" / "b" / "c"
    fd = open_private_dir(target)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(target))
        write_atomic(fd, "x", b"1")
    finally:
        os.close(fd)
    assert (target / "x").read_bytes() == b"1"
    assert {_mode(base / "a"), _mode(base / "a" / "b"), _mode(target)} == {0o700}


def test_a_missing_folder_is_not_created_when_asked_not_to(base):
    with pytest.raises(NotPrivate, match="does not exist"):
        open_private_dir(base / "absent", create=False)
    assert not (base / "absent").exists()


def test_a_parent_others_can_write_without_the_sticky_bit_is_refused(base):
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(NotPrivate, match=r"shared is writable by group or others without the sticky bit \(mode 777\)"):
        open_private_dir(shared / "attn" / "kernels")
    assert os.listdir(shared) == []  # nothing written into the refused folder
    shared.chmod(0o775)
    with pytest.raises(NotPrivate, match="mode 775"):
        open_private_dir(shared / "attn")
    shared.chmod(0o1777)  # as /tmp: others cannot rename what is ours in it
    os.close(open_private_dir(shared / "attn"))
    assert _mode(shared / "attn") == 0o700


@root_only
def test_a_parent_owned_by_another_user_is_refused(base):
    theirs = base / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER, OTHER)
    with pytest.raises(NotPrivate, match=f"theirs is owned by uid {OTHER}"):
        open_private_dir(theirs / "attn")
    assert os.listdir(theirs) == []
    os.chown(theirs, 0, 0)
    os.close(open_private_dir(theirs / "attn"))


@root_only
def test_a_final_folder_owned_by_another_user_is_refused(base):
    theirs = base / "kernels"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER, OTHER)
    with pytest.raises(NotPrivate, match=f"kernels is owned by uid {OTHER}, not by this user"):
        open_private_dir(theirs)


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722, 0o1777])
def test_a_final_folder_others_can_write_is_refused(base, mode):
    folder = base / "kernels"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(NotPrivate, match="kernels is writable by group or others"):
        open_private_dir(folder)
    assert _mode(folder) == mode  # not "fixed": someone may already have put something there


def test_a_final_folder_others_can_read_is_refused_and_left_as_it_was(base):
    folder = base / "kernels"
    folder.mkdir()
    folder.chmod(0o755)
    with pytest.raises(NotPrivate, match="readable by group or others .mode 755.; attn leaves it as it is"):
        open_private_dir(folder)
    assert _mode(folder) == 0o755  # never chmod'ed: it may be / or a home folder


def test_a_file_on_the_way_is_refused(base):
    (base / "file").write_text("")
    with pytest.raises(NotPrivate, match="file is not a folder"):
        open_private_dir(base / "file" / "attn")


@root_only
def test_a_symlink_planted_by_another_user_is_refused(base):
    """In a sticky folder (as /tmp) anyone may create entries: a symlink of theirs that
    points at a private folder of ours is still refused."""
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    mine = base / "mine"
    mine.mkdir(mode=0o700)
    link = sticky / "cache"
    link.symlink_to(mine)
    os.lchown(link, OTHER, OTHER)
    with pytest.raises(NotPrivate, match=f"cache is a symlink owned by uid {OTHER}"):
        open_private_dir(link / "attn")
    assert os.listdir(mine) == []
    os.lchown(link, 0, 0)  # the same link made by us: followed
    os.close(open_private_dir(link / "attn"))
    assert (mine / "attn").is_dir()


def test_a_symlink_into_a_folder_others_can_write_is_refused(base):
    """A symlink of ours (say ~/.cache -> /scratch/me) is followed, and its target walked
    from / by the same rules: into a 0777 folder it is refused."""
    hostile = base / "hostile"
    hostile.mkdir()
    hostile.chmod(0o777)
    link = base / "cache"
    link.symlink_to(hostile)
    with pytest.raises(NotPrivate, match="hostile is writable by group or others"):
        open_private_dir(link / "attn")
    assert os.listdir(hostile) == []
    relative = base / "rel"
    relative.symlink_to("hostile/../hostile")
    with pytest.raises(NotPrivate, match="hostile is writable"):
        open_private_dir(relative / "attn")


def test_a_symlink_loop_is_refused(base):
    (base / "a").symlink_to("b")
    (base / "b").symlink_to("a")
    with pytest.raises(NotPrivate, match="too many symlinks"):
        open_private_dir(base / "a" / "attn")


def test_a_folder_that_cannot_be_created_is_refused(base):
    ro = base / "ro"
    ro.mkdir(mode=0o500)
    if os.geteuid() == 0:
        pytest.skip("root creates folders in a read-only folder")
    with pytest.raises(NotPrivate, match="cannot create"):
        open_private_dir(ro / "attn")


# --------------------------------------------------------------------------- read_regular


@pytest.fixture
def folder(base):
    fd = open_private_dir(base / "cache")
    yield base / "cache", fd
    os.close(fd)


def test_read_regular_reads_what_is_there_and_none_for_nothing(folder):
    path, fd = folder
    (path / "entry").write_bytes(b"abc")
    assert read_regular(fd, "entry", 3) == b"abc"
    assert read_regular(fd, "absent", 3) is None


def test_a_fifo_is_refused_at_once(folder):
    path, fd = folder
    os.mkfifo(path / "entry")
    got = []
    reader = threading.Thread(
        target=lambda: got.append(pytest.raises(ValueError, read_regular, fd, "entry", 10)), daemon=True
    )
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "read_regular hangs on a FIFO"
    assert "not a regular file" in str(got[0].value)


def test_a_symlink_to_dev_zero_is_never_read(folder):
    path, fd = folder
    (path / "entry").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="entry is a symlink"):
        read_regular(fd, "entry", 10)


def test_an_oversized_file_is_refused(folder):
    path, fd = folder
    (path / "entry").write_bytes(b"x" * 11)
    with pytest.raises(ValueError, match="11 bytes, more than the 10 allowed"):
        read_regular(fd, "entry", 10)
    assert read_regular(fd, "entry", 11) == b"x" * 11


def test_a_folder_is_not_a_regular_file(folder):
    path, fd = folder
    (path / "entry").mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        read_regular(fd, "entry", 10)


@root_only
def test_a_file_of_another_user_is_refused(folder):
    path, fd = folder
    (path / "entry").write_bytes(b"abc")
    os.chown(path / "entry", OTHER, OTHER)
    with pytest.raises(ValueError, match=f"owned by uid {OTHER}"):
        read_regular(fd, "entry", 10)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../entry"])
def test_only_plain_names(folder, name):
    with pytest.raises(ValueError, match="not a plain file name"):
        read_regular(folder[1], name, 10)
    with pytest.raises(ValueError, match="not a plain file name"):
        write_atomic(folder[1], name, b"")


# --------------------------------------------------------------------------- write_atomic


def test_write_atomic_gives_the_umask_mode_or_the_given_one(folder):
    path, fd = folder
    old = os.umask(0o022)
    try:
        write_atomic(fd, "plain", b"data")
        write_atomic(fd, "key", b"secret", mode=0o600)
        os.umask(0o077)
        write_atomic(fd, "strict", b"")
    finally:
        os.umask(old)
    assert (path / "plain").read_bytes() == b"data" and _mode(path / "plain") == 0o644
    assert (path / "key").read_bytes() == b"secret" and _mode(path / "key") == 0o600
    assert _mode(path / "strict") == 0o600
    write_atomic(fd, "plain", b"new")  # replaces
    assert (path / "plain").read_bytes() == b"new"
    assert sorted(os.listdir(path)) == ["key", "plain", "strict"]


def test_write_atomic_leaves_no_temp_file_on_failure(folder):
    path, fd = folder
    (path / "taken").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(fd, "taken", b"data")
    with pytest.raises(TypeError):
        write_atomic(fd, "entry", "not bytes")
    assert sorted(os.listdir(path)) == ["taken"]


def test_write_atomic_writes_through_the_fd_not_the_name(folder, base):
    """The folder renamed after it was opened: the file lands in the folder that was proven."""
    path, fd = folder
    path.rename(base / "moved")
    path.mkdir()  # someone's new folder of the old name
    write_atomic(fd, "entry", b"x")
    assert (base / "moved" / "entry").exists() and not (path / "entry").exists()


# --------------------------------------------------------------------------- scratch_dir


def test_the_scratch_folder_is_private_per_process_and_removed_at_exit(tmp_path):
    code = (
        "from attn_cli.store import private; p = private.scratch_dir(); assert p == private.scratch_dir(); "
        "import os; os.close(private.open_private_dir(p, create=False)); print(p)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first = Path(out.strip())
    assert first.name.startswith("attn_") and not first.exists()
    out2 = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert Path(out2.strip()) != first


def test_the_scratch_folder_is_never_made_in_a_temp_folder_others_can_write(base, monkeypatch):
    hostile = base / "tmp"
    hostile.mkdir()
    hostile.chmod(0o777)
    monkeypatch.setattr(private.tempfile, "tempdir", str(hostile))
    monkeypatch.setattr(private, "_scratch", None)  # forgotten: the next call makes a fresh one
    made = private.scratch_dir()
    assert os.listdir(hostile) == [] and hostile not in made.parents
    os.close(open_private_dir(made, create=False))


# --------------------------------------------------------------------------- shared_reason, matplotlib


def test_shared_reason_creates_nothing_and_names_the_shared_folder(base):
    assert private.shared_reason(base / "a" / "b") is None and not (base / "a").exists()
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # sticky: what exists and is ours is safe, a missing part is not
    (shared / "mine").mkdir(mode=0o755)
    assert private.shared_reason(shared / "mine") is None
    assert "shared is writable by group or others (mode 1777)" in private.shared_reason(shared / "new")
    shared.chmod(0o777)
    assert "without the sticky bit" in private.shared_reason(shared / "mine")
    assert os.listdir(shared) == ["mine"]


def _matplotlib_dirs(env: dict) -> list[str]:
    code = (
        "from attn_cli.store.private import keep_matplotlib_private; keep_matplotlib_private(); "
        "import matplotlib; print(matplotlib.get_cachedir()); print(matplotlib.get_configdir())"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME")} | env
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_matplotlib_never_uses_a_folder_others_can_write(base):
    pytest.importorskip("matplotlib")
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cache, config = _matplotlib_dirs({"XDG_CACHE_HOME": str(shared)})
    assert cache == config and Path(cache).name == "matplotlib" and Path(cache).parent.name.startswith("attn_")
    assert os.listdir(shared) == []
    mine = base / "mine"  # a private cache home: matplotlib's own choice is kept
    cache, _ = _matplotlib_dirs({"XDG_CACHE_HOME": str(mine)})
    assert cache == str(mine / "matplotlib")
    cache, _ = _matplotlib_dirs({"XDG_CACHE_HOME": str(shared), "MPLCONFIGDIR": str(mine / "given")})
    assert cache == str(mine / "given")  # the user's explicit choice is kept
