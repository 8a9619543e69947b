"""A bad-input battery over every command and every option, generated from the CLI itself.

Numbers (0, negative, NaN, inf, a value far past memory), words (empty, whitespace only,
100,000 characters, control characters) and paths (``--out`` naming a file, a path under
/proc, a read-only folder).  Each: exit 1 or 2, an ``Error`` line, no traceback, no file in
``--out``.  In-process (CliRunner) so that the few hundred cases take seconds; the real entry
point is exercised by the subprocess tests in tests/test_runs.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from attn_cli.cli import cli
from attn_cli.core import memory

HUGE = str(10**30)  # integers: past any memory (and past 64 bits)
NUMBERS = ["0", "-5", "nan", "inf", HUGE, "1e400"]
WORDS = ["", "   ", "x" * 100_000, "a\x01b", "\x1b[31mred"]

# required arguments, so that each case reaches the option under test
BASE = {"heatmap": ["ab", "cd"], "exercise": ["3"]}
# options whose value is only arithmetic (nothing is allocated): a huge value is an answer, not
# an error, and is checked to answer at once (exit 0) -- the text's own table shows 64 GB
ARITHMETIC = {
    ("scaling", "--lengths"),
    ("scaling", "--d-model"),
    ("embeddings", "--vocab-size"),
    ("embeddings", "--embed-dim"),
}


def _is_number(param: click.Parameter) -> bool:
    return isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType))


def _accepts(param: click.Parameter, value: str) -> bool:
    try:
        param.type.convert(value, param, None)
        return True
    except click.BadParameter:
        return False


def _cases():
    cases = []
    for name, command in sorted(cli.commands.items()):
        base = BASE.get(name, [])
        for param in command.params:
            if isinstance(param, click.Option) and param.is_flag or param.name in ("help",):
                continue
            flag = param.opts[0] if isinstance(param, click.Option) else None
            if flag == "--out":
                continue  # the path cases below
            if _is_number(param):
                for value in NUMBERS:
                    accepted = _accepts(param, value)
                    if accepted and value != HUGE:
                        continue  # a valid value (seed 0): not a bad input
                    if accepted and (name, flag) in ARITHMETIC:
                        cases.append(pytest.param(name, [*base, flag, value], 0, id=f"{name} {flag} huge (arithmetic)"))
                        continue
                    cases.append(pytest.param(name, [*base, flag, value], None, id=f"{name} {flag} {value[:8]}"))
            elif flag is not None or name in ("heatmap", "analogy", "exercise"):
                for i, word in enumerate(WORDS):
                    if flag is not None:
                        args = [*base, flag, word]
                    elif name == "heatmap":
                        args = [word, "cd"] if param.name == "query_word" else ["ab", word]
                    elif name == "analogy":
                        args = ["king", "man", word]
                    else:
                        args = [word]
                    label = ["empty", "blank", "100k", "ctrl", "escape"][i]
                    cases.append(pytest.param(name, args, None, id=f"{name} {flag or param.name} {label}"))
    return cases


CASES = _cases()
WITH_OUT = sorted(n for n, c in cli.commands.items() if any(p.name == "out" for p in c.params))


def _check(result, out: Path, expect) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    if expect == 0:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code in (1, 2), result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.output
    assert list(out.iterdir()) == [], list(out.iterdir())


@pytest.fixture
def small_machine(monkeypatch):
    """The same free memory everywhere (4 GB), so that which sizes are refused does not vary."""
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 4 * 10**9)


def test_the_battery_covers_every_command():
    commands = {c.values[0] for c in CASES}
    # list, masks, self-cross: no option but the common ones; diff: two paths that must exist (click's check)
    assert commands >= set(cli.commands) - {"list", "masks", "self-cross", "diff"}
    assert len(CASES) > 250


@pytest.mark.parametrize("command,args,expect", CASES)
def test_bad_input(command, args, expect, tmp_path, small_machine):
    out = tmp_path / "out"
    out.mkdir()
    extra = ["--out", str(out)] if command in WITH_OUT else []
    result = CliRunner().invoke(cli, [command, *args, *extra, *(["--quick"] if command in WITH_OUT else [])])
    _check(result, out, expect)


def _paths(tmp_path: Path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    yield "file", str(a_file)
    yield "proc", "/proc/self/attn_out"
    yield "sys", "/sys"  # read-only for everyone, root included
    if os.geteuid() != 0:  # root writes through permission bits; /sys stands in for it there
        ro = tmp_path / "read_only"
        ro.mkdir(mode=0o555)
        yield "read-only", str(ro)


@pytest.mark.parametrize("command", WITH_OUT)
def test_bad_out_paths(command, tmp_path, small_machine):
    empty = tmp_path / "empty"
    empty.mkdir()
    for label, path in _paths(tmp_path):
        result = CliRunner().invoke(cli, [command, *BASE.get(command, []), "--quick", "--out", path])
        _check(result, empty, None)
        assert "--out" in result.output or path in result.output, (label, result.output)
