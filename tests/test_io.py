"""Atomic writes (attn_cli.io): umask modes, disk full, unwritable paths, nothing half-written."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from attn_cli import io
from attn_cli.cli import cli
from attn_cli.errors import WriteFailed
from attn_cli.render import files


@pytest.fixture
def umask():
    """Set the umask for one test; restore it after."""
    saved = os.umask(0o022)
    os.umask(saved)
    yield lambda mask: os.umask(mask)
    os.umask(saved)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077, 0o027])
def test_files_and_folders_get_the_mode_open_would_give(tmp_path, umask, mask):
    umask(mask)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # what open() gives: the reference
    assert io.current_umask() == mask
    written = io.write_text(tmp_path / "sub" / "deeper" / "a.json", "{}\n")
    assert _mode(written) == _mode(plain) == 0o666 & ~mask
    assert _mode(tmp_path / "sub") == _mode(tmp_path / "sub" / "deeper") == 0o777 & ~mask
    files.write_csv(tmp_path / "b.csv", [[1, 2]], header=["x", "y"])
    assert _mode(tmp_path / "b.csv") == 0o666 & ~mask


def test_figures_get_the_umask_mode_too(tmp_path, umask):
    from attn_cli.render.files import new_figure

    umask(0o022)
    fig, ax = new_figure()
    ax.plot([0, 1], [1, 0])
    (png,) = files.save_figure(fig, tmp_path / "f.png")
    assert _mode(png) == 0o644 and png.read_bytes()[:4] == b"\x89PNG"


def _no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.startswith(".") and ".tmp" in p.name]


@pytest.mark.parametrize(
    "code,reason",
    [
        (errno.ENOSPC, "No space left on device"),
        (errno.EACCES, "Permission denied"),
        (errno.EROFS, "Read-only file system"),
    ],
)
def test_a_failed_write_names_path_and_reason_and_leaves_the_old_file(tmp_path, monkeypatch, code, reason):
    target = tmp_path / "result.json"
    io.write_text(target, "old\n")

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(io.os, "replace", fail)
    with pytest.raises(WriteFailed) as info:
        io.write_text(target, "new\n")
    assert str(info.value) == f"cannot write {target}: {reason}"
    assert target.read_text() == "old\n"  # nothing half-written
    assert _no_temp_files(tmp_path), list(tmp_path.iterdir())


def test_disk_full_while_writing_the_bytes(tmp_path, monkeypatch):
    real_open = open

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(
        "builtins.open",
        lambda p, mode="r", *a, **k: Full(real_open(p, mode, *a, **k)) if "w" in mode else real_open(p, mode, *a, **k),
    )
    with pytest.raises(WriteFailed, match="No space left on device"):
        io.write_text(tmp_path / "x.txt", "0123456789")
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_real_folder_is_one_line(tmp_path):
    """/sys refuses new files even to root (EACCES or EROFS, depending on the mount)."""
    with pytest.raises(WriteFailed, match=r"^cannot write /sys/attn_probe\.json: "):
        io.write_text("/sys/attn_probe.json", "{}")


def test_attn_all_on_a_full_disk_keeps_what_was_written(tmp_path, monkeypatch):
    """The fourth file fails with ENOSPC: exit 1, one Error line, the three before intact."""
    real_replace = os.replace
    done: list[str] = []

    def replace(src, dst):
        if len(done) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)
        done.append(str(dst))

    monkeypatch.setattr(io.os, "replace", replace)
    result = CliRunner().invoke(cli, ["all", "--quick", "--only", "w9-masks", "w9-order", "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].endswith("No space left on device"), result.output
    assert "Traceback" not in result.output
    assert _no_temp_files(tmp_path)
    assert len(done) == 3
    for path in map(Path, done):
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".png":
            assert path.read_bytes()[:4] == b"\x89PNG"
        assert path.stat().st_size > 0


def test_disk_full_through_the_real_entry_point(tmp_path):
    """The same in a separate process: the user sees one line, no traceback, exit 1."""
    script = textwrap.dedent("""
        import errno, os, sys
        from attn_cli import io
        def full(*a, **k):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        io.os.replace = full
        sys.argv = ["attn", "masks", "--out", sys.argv[1]]
        from attn_cli.cli import main
        main()
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"Error: cannot write {re.escape(str(tmp_path))}/masks\.png: No space left on device", last), (
        proc.stderr
    )
    assert list(tmp_path.iterdir()) == []
