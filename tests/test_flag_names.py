"""One name per concept on the command line; a renamed flag's old name still works, hidden.

Every renamed flag is listed in RENAMED (command, old, new): the new name is in ``--help``,
the old one is not (nor in shell completion or error messages), and the old one parses to
exactly what the new one does, bad values included.  A test also walks the CLI, so that an
alias cannot be added, or a rename dropped, without this list saying so.  And a flag is the
name of the Config field it sets, so of the JSON key that records it (``--d-model`` fills
``Config.d_model``, printed as ``config.d_model``): every command's flags are checked against
the Config it hands to the pipeline.
"""

from __future__ import annotations

import json
import re

import click
import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

from attn_cli import api
from attn_cli.cli import cli
from attn_cli.cli.types import AliasedOption, MultiValueOption

# (command, old flag, new flag, a valid value (several for a multi-value option))
RENAMED: list[tuple[str, str, str, tuple[str, ...]]] = [
    # model width d_model (W9's and the annotated transformer's name; scaling and heads had it)
    ("heatmap", "--dim", "--d-model", ("16",)),
    ("crossattn-map", "--dim", "--d-model", ("16",)),
    ("embeddings", "--dim", "--d-model", ("8",)),
    ("order", "--dim", "--d-model", ("8",)),
    # value width d_v (formula's name for it; the D2L text's d here: V1, V2 are values)
    ("copy-both", "--dim", "--d-v", ("8",)),
    # the SVD rank k (not a model width)
    ("analogy", "--dim", "--rank", ("4",)),
    # heads: the D2L table's width is a model width too (a second flag: two tables, two widths)
    ("heads", "--num-hiddens", "--d2l-d-model", ("128",)),
    # the head count h is --heads (crossattn-map, heatmap had it)
    ("heads", "--num-heads", "--heads", ("2", "4")),
    # the query/key width d_k, one or several (formula's name for it)
    ("sqrt-dk", "--dims", "--d-k", ("16", "64")),
    # the copy task's GRU hidden size
    ("copy-task", "--hidden", "--hidden-size", ("16",)),
]

# the old names, none of which any command shows any more (each was a width or a head count
# under another name: see README, "Option names")
RETIRED = sorted({old for _, old, _, _ in RENAMED})

BASE = {"heatmap": ["ab", "cd"]}  # required arguments


def _shown(text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def _help(command: str) -> str:
    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def _params(command: str, args: list[str]) -> dict:
    cmd = cli.commands[command]
    with cmd.make_context(command, [*BASE.get(command, []), *args]) as ctx:
        return dict(ctx.params)


# --------------------------------------------------------------------------- the mechanism


def _toy(**option):
    @click.command()
    @click.option("--width", type=click.IntRange(min=1), default=3, **option)
    def toy(width):
        click.echo(f"width={width}")

    return toy


def test_a_plain_second_name_is_shown_in_help_an_alias_is_not_nor_in_errors():
    plain = _toy(cls=click.Option)
    plain.params[0].opts.append("--old-width")  # --width and --old-width, both declared
    invoke = CliRunner().invoke
    assert _shown(invoke(plain, ["--help"]).output, "--old-width")  # what the check below catches
    toy = _toy(cls=AliasedOption, aliases=("--old-width",))
    assert not _shown(invoke(toy, ["--help"]).output, "--old-width")
    assert invoke(toy, ["--old-width", "5"]).output == "width=5\n"
    bad_old, bad_new = invoke(toy, ["--old-width", "0"]), invoke(toy, ["--width", "0"])
    assert bad_old.exit_code == bad_new.exit_code == 2
    assert bad_old.output == bad_new.output and "--old-width" not in bad_old.output


def test_a_mistyped_option_is_not_told_about_an_alias():
    plain, toy = _toy(cls=click.Option), _toy(cls=AliasedOption, aliases=("--old-width",))
    plain.params[0].opts.append("--old-width")
    invoke = CliRunner().invoke
    assert "--old-width" in invoke(plain, ["--old-widht", "5"]).output  # what the check below catches
    typo = invoke(toy, ["--old-widht", "5"])
    assert typo.exit_code == 2 and "No such option '--old-widht'" in typo.output
    assert "--old-width" not in typo.output.replace("--old-widht", "")


def test_a_multi_value_alias_takes_every_value_after_it():
    @click.command()
    @click.option("--heads", cls=MultiValueOption, aliases=("--num-heads",), type=int)
    def toy(heads):
        click.echo(repr(heads))

    assert CliRunner().invoke(toy, ["--num-heads", "1", "2", "4"]).output == "(1, 2, 4)\n"


# --------------------------------------------------------------------------- the CLI's renames


def test_every_alias_in_the_cli_is_a_listed_rename():
    found = {
        (name, alias, param.opts[0])
        for name, cmd in cli.commands.items()
        for param in cmd.params
        if isinstance(param, AliasedOption)
        for alias in param.aliases
    }
    assert found == {(command, old, new) for command, old, new, _ in RENAMED}


@pytest.mark.parametrize("command,old,new,value", RENAMED, ids=[f"{c} {o}" for c, o, _, _ in RENAMED])
def test_help_shows_the_new_name_and_hides_the_old(command, old, new, value):
    text = _help(command)
    assert _shown(text, new)
    assert not _shown(text, old)


@pytest.mark.parametrize("command,old,new,value", RENAMED, ids=[f"{c} {o}" for c, o, _, _ in RENAMED])
def test_the_old_name_parses_as_the_new(command, old, new, value):
    assert _params(command, [old, *value]) == _params(command, [new, *value]) != _params(command, [])


@pytest.mark.parametrize("command,old,new,value", RENAMED, ids=[f"{c} {o}" for c, o, _, _ in RENAMED])
def test_a_bad_value_under_the_old_name_is_the_new_names_usage_error(command, old, new, value, tmp_path):
    def invoke(flag):
        return CliRunner().invoke(cli, [command, *BASE.get(command, []), flag, "0", "--out", str(tmp_path)])

    by_old, by_new = invoke(old), invoke(new)
    assert by_old.exit_code == by_new.exit_code == 2
    assert by_old.output == by_new.output
    assert new in by_old.output and not _shown(by_old.output, old)


@pytest.mark.parametrize("command,old,new,value", RENAMED, ids=[f"{c} {o}" for c, o, _, _ in RENAMED])
def test_completion_offers_the_new_name_only(command, old, new, value):
    names = {item.value for item in ShellComplete(cli, {}, "attn", "_ATTN_COMPLETE").get_completions([command], "--")}
    assert new in names and old not in names


@pytest.mark.parametrize("command,old,new,value", RENAMED, ids=[f"{c} {o}" for c, o, _, _ in RENAMED])
def test_the_api_takes_the_old_name_too(command, old, new, value):
    def python(flag):
        return flag[2:].replace("-", "_")

    values = list(value) if len(value) > 1 else value[0]
    by_old = api.command_line(command, **{python(old): values})
    assert by_old == api.command_line(command, **{python(new): values})
    assert by_old[0] == new


def test_no_command_shows_a_retired_name():
    for name in cli.commands:
        text = _help(name)
        assert not [old for old in RETIRED if _shown(text, old)], name


def test_a_run_under_the_old_name_is_the_same_run(tmp_path):
    def run(flag):
        result = CliRunner().invoke(cli, ["order", flag, "8", "--json", "--out", str(tmp_path / flag)])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        data.pop("timing", None)
        return data

    by_old = run("--dim")
    assert by_old == run("--d-model")
    assert by_old["config"]["d_model"] == 8


# --------------------------------------------------------------------------- flag == Config field == JSON key

# options that say how to run and where to write, not what to compute: no Config field (the
# numeric mode, the output folder, formats and --no-figures, the cache folder and its use, exercise --list)
NOT_CONFIG = {
    "--numerics",
    "--quick",
    "--json",
    "--out",
    "--format",
    "--no-figures",
    "--cache-dir",
    "--no-cache",
    "--list",
}
# a flag whose Config field has a longer name, and why: analogy's Result also records
# `nearest`, the list of neighbours, so the word itself stays `nearest_word`, its count `nearest_top`
OTHER_FIELD = {("analogy", "--nearest"): "nearest_word", ("analogy", "--top"): "nearest_top"}
LIBRARY = {"list", "cache", "all", "verify", "diff"}  # commands over every experiment or two runs: no Config
ARGS = {**BASE, "exercise": ["3"]}  # required arguments


class _Stopped(Exception):
    pass


def _config(command: str, args: list[str], monkeypatch, tmp_path):
    """The Config a command hands to the pipeline for ``args`` (nothing is run)."""
    from attn_cli import pipeline

    seen = []

    def stop(experiment, config, **_):
        seen.append(config)
        raise _Stopped

    monkeypatch.setattr(pipeline, "run", stop)
    result = CliRunner().invoke(cli, [command, *ARGS.get(command, []), *args, "--out", str(tmp_path)])
    assert isinstance(result.exception, _Stopped), (command, result.output)
    return seen[0]


def _fields_missing(command: str, config) -> list[str]:
    """The command's flags (its shown names, not aliases) that have no same-named Config field."""
    import dataclasses

    fields = {f.name for f in dataclasses.fields(config)}
    flags = [
        p.opts[0]
        for p in cli.commands[command].params
        if isinstance(p, click.Option) and p.opts[0].startswith("--") and p.opts[0] not in NOT_CONFIG
    ]
    return [flag for flag in flags if OTHER_FIELD.get((command, flag), flag[2:].replace("-", "_")) not in fields]


@pytest.mark.parametrize("command", sorted(set(cli.commands) - LIBRARY))
def test_every_flag_is_a_config_field_of_the_same_name(command, monkeypatch, tmp_path):
    """--d-model fills Config.d_model, which the JSON records as config.d_model."""
    config = _config(command, [], monkeypatch, tmp_path)
    assert _fields_missing(command, config) == []
    flags = {p.opts[0]: p.name for p in cli.commands[command].params if isinstance(p, click.Option)}
    assert [
        f
        for f, name in flags.items()
        if (command, f) not in OTHER_FIELD and f not in NOT_CONFIG and name != f[2:].replace("-", "_")
    ] == []  # the Python keyword is the flag's name too


def test_a_config_field_under_another_name_is_found(monkeypatch, tmp_path):
    import dataclasses

    config = _config("order", [], monkeypatch, tmp_path)
    old = dataclasses.make_dataclass(
        "Config", [("d" if f.name == "d_model" else f.name, f.type) for f in dataclasses.fields(config)]
    )
    assert _fields_missing("order", config) == []
    assert _fields_missing(
        "order", old(**{("d" if k == "d_model" else k): v for k, v in dataclasses.asdict(config).items()})
    ) == ["--d-model"]


@pytest.mark.parametrize("command,old,new,value", RENAMED, ids=[f"{c} {n}" for c, _, n, _ in RENAMED])
def test_a_renamed_flag_sets_its_same_named_field(command, old, new, value, monkeypatch, tmp_path):
    args = [new, *value] if len(value) > 1 else [new, value[0]]
    config = _config(command, args, monkeypatch, tmp_path)
    expected = tuple(int(v) for v in value) if len(value) > 1 else int(value[0])
    assert getattr(config, new[2:].replace("-", "_")) == expected
