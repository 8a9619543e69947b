"""The static command index (attn_cli/command_index.py) that ``attn --help`` prints from: it
must say what the command modules themselves say, so the help is what loading them printed."""

from __future__ import annotations

import shutil

import click
import pytest
from click.testing import CliRunner

from attn_cli import command_index
from attn_cli.cli import all_commands, cli


def stale(index: dict) -> list[str]:
    """How ``index`` differs from what importing every command module gives, a line a command."""
    found = command_index.scan()
    lines = []
    for name in dict.fromkeys([*index, *found]):
        if name not in found:
            lines.append(f"{name}: in the index, in no command module")
        elif name not in index:
            lines.append(f"{name}: in attn_cli.commands.{found[name].module}, not in the index")
        elif tuple(index[name]) != tuple(found[name]):
            lines.append(f"{name}: the index has {tuple(index[name])}, the module {tuple(found[name])}")
    if not lines and list(index) != list(found):
        lines.append(f"the index's order {list(index)} is not the modules' {list(found)}")
    return lines


def test_the_index_is_what_the_command_modules_give():
    """Same names, owning modules, one-line help and hidden flags, in the same order."""
    lines = stale(command_index.COMMANDS)
    assert lines == [], f"attn_cli/command_index.py is stale; regenerate it: {command_index.REGENERATE}\n" + \
        "\n".join(lines)


@pytest.mark.parametrize("plant", ["help", "hidden", "module", "missing", "extra", "order"])
def test_a_stale_index_is_caught(plant):
    index = dict(command_index.COMMANDS)
    name = "copy-task"
    if plant == "help":
        index[name] = index[name]._replace(short_help=index[name].short_help + " Now faster.")
    elif plant == "hidden":
        index[name] = index[name]._replace(hidden=True)
    elif plant == "module":
        index[name] = index[name]._replace(module="d2l")
    elif plant == "missing":
        del index[name]
    elif plant == "extra":
        index["copy-task2"] = index[name]
    else:
        index = dict(reversed(index.items()))
    lines = stale(index)
    assert len(lines) == 1 and ("order" in lines[0] if plant == "order" else lines[0].startswith("copy-task")), lines


def _help_as_loading_printed_it() -> str:
    """The Commands section as the group printed it when it imported every command module."""
    with click.Context(cli, info_name="attn", max_content_width=100, terminal_width=80) as ctx:
        formatter = ctx.make_formatter()
        rows = [(name, cmd.get_short_help_str(limit=200)) for name, cmd in sorted(all_commands().items())
                if not cmd.hidden]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
        return formatter.getvalue()


def test_help_lists_the_commands_as_loading_them_did(monkeypatch):
    expected = _help_as_loading_printed_it()
    result = CliRunner().invoke(cli, ["--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    assert result.output.endswith(expected), result.output
    # the same check with a planted stale entry fails
    entry = command_index.COMMANDS["copy-task"]
    monkeypatch.setitem(command_index.COMMANDS, "copy-task", entry._replace(short_help="The copy task."))
    assert not CliRunner().invoke(cli, ["--help"], terminal_width=80).output.endswith(expected)


def test_cli_commands_holds_every_command():
    """Readers of ``cli.commands`` (tests, the API) see every command, each the one its module defines."""
    commands = all_commands()
    assert list(commands) == list(command_index.COMMANDS)
    assert dict(cli.commands) == commands and len(cli.commands) == len(commands)
    for name, command in commands.items():
        assert cli.get_command(None, name) is command and name in cli.commands
    assert cli.get_command(None, "nosuchcommand") is None and "nosuchcommand" not in cli.commands


def test_write_regenerates_the_index(tmp_path):
    """``python -m attn_cli.command_index --write`` rewrites the generated block, and only it."""
    copy = tmp_path / "command_index.py"
    shutil.copyfile(command_index.__file__, copy)
    original = copy.read_text(encoding="utf-8")
    assert command_index.write(str(copy)) is False  # up to date: untouched
    planted = original.replace("'copy-task': Entry('copy_task', 'The copy task:", "'copy-task': Entry('copy_task', 'A task:")
    assert planted != original
    copy.write_text(planted, encoding="utf-8")
    assert command_index.write(str(copy)) is True
    assert copy.read_text(encoding="utf-8") == original
