"""The Python API (attn_cli.api, docs/api.md): the same runs, options, errors and JSON as the CLI."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_attn

import attn_cli
from attn_cli import api

ROOT = Path(__file__).resolve().parent.parent

# Values that differ between two runs of the same command: the wall-clock ones, which every
# Result moves under one "timing" key (attn_cli.render.files.result_json).  Nothing else is stripped.
TIMING_KEYS = ("timing",)

# Per command: arguments that keep its quick run to seconds (the copy task: one short length).
QUICK_ARGS: dict[str, tuple[tuple, dict]] = {
    "copy-task": ((), {"lengths": [4], "steps": 5, "eval_size": 20, "jobs": 1, "no_cache": True}),  # both train
    "exercise": (("3",), {}),
    "heatmap": (("banana", "bandana"), {"d_model": 8}),
    "analogy": (("prince", "boy", "girl"), {}),
}


def _catalogue_commands() -> list[str]:
    return sorted({e.subcommand for e in attn_cli.artifacts()} | {"heatmap"})


def _strip(data):
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if k not in TIMING_KEYS}
    return data


def _cli_args(command: str) -> list[str]:
    args, options = QUICK_ARGS.get(command, ((), {}))
    return api.command_line(command, *args, quick=True, **options)


@pytest.mark.parametrize("command", _catalogue_commands())
def test_to_dict_equals_the_cli_json(command, tmp_path):
    args, options = QUICK_ARGS.get(command, ((), {}))
    argv = _cli_args(command)
    split = argv.index("--") if "--" in argv else len(argv)
    proc = run_attn(command, *argv[:split], "--json", "--out", tmp_path / "cli", *argv[split:])
    assert proc.returncode == 0, proc.stderr
    run = attn_cli.run(command, *args, quick=True, **options)
    assert _strip(run.to_dict()) == _strip(json.loads(proc.stdout))
    assert run.argv == argv
    assert not list(tmp_path.glob("attn-api-*"))


def test_every_command_is_covered():
    """Each command that makes one run is in the catalogue's list above (else to_dict is untested)."""
    from attn_cli.cli import all_commands

    commands = set(all_commands()) - set(api.NOT_A_RUN)
    assert commands <= set(_catalogue_commands()), commands - set(_catalogue_commands())


def test_the_strip_list_strips_only_timing():
    assert _strip({"timing": {"seconds": 1.0}, "config": {"seed": 0}}) == {"config": {"seed": 0}}
    assert _strip({"timing": 1}) != _strip({"timing": 1, "value": 2})  # a changed value is seen


def test_run_returns_result_outcomes_tables_and_figures(tmp_path):
    run = attn_cli.run("copy-both", samples=200, weights=[0.5, 1.0], quick=True)
    assert type(run).__name__ == "Run" and run.result.config["samples"] == 200
    assert run.outcomes and all(isinstance(o, attn_cli.Outcome) for o in run.outcomes)
    assert run.ok == (not any(o.status == "fail" for o in run.outcomes))
    assert "relative error" in run.text().lower() or run.text().strip()
    figures = run.figures()
    assert list(figures) == ["copy_both.png"]
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    assert isinstance(figures["copy_both.png"], Figure)
    assert not plt.get_fignums()  # kept for the caller, none left open in pyplot
    assert run.files == [] and not any(n.startswith("wrote ") for n in run.notes)
    page = run._repr_html_()
    assert "data:image/png;base64," in page and "<table" in page
    assert "attn copy-both" in page and any(o.check.id in page for o in run.outcomes)


def test_run_writes_files_only_with_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    attn_cli.run("masks")
    assert list(tmp_path.iterdir()) == []  # no outputs/, no file
    run = attn_cli.run("masks", out=tmp_path / "o")
    assert {p.name for p in run.files} == {"masks.png", "masks.csv"}
    assert all(p.exists() for p in run.files)
    assert "masks.png" in run.figures()


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"heads": [0]}, "Invalid value for '--heads': 0 is not in the range x>=1."),
        ({"bogus": 1}, "No such option '--bogus'"),
        ({"d_model": 6.5}, "'6.5' is not an integer"),  # refused as on the command line, never cut to 6
        ({"device": "tpu"}, "'tpu' is not one of"),
        ({"d_model": 6, "layout_heads": 4}, "divide"),
    ],
)
def test_bad_options_raise_a_config_error_with_the_cli_message(options, fragment):
    with pytest.raises(attn_cli.ConfigError) as info:
        attn_cli.run("heads", **options)
    assert isinstance(info.value, ValueError) and fragment in str(info.value)
    proc = run_attn("heads", *api.command_line("heads", **options), "--out", "/tmp")
    assert proc.returncode == 2 and f"Error: {info.value}" in proc.stderr


def test_a_flag_takes_what_click_reads_as_a_bool():
    with pytest.raises(attn_cli.ConfigError, match="not a valid boolean"):
        attn_cli.run("heads", quick="maybe")
    assert api.command_line("heads", quick="yes") == ["--quick"] and api.command_line("heads", quick=0) == []


def test_unknown_command_and_catalogue_commands_are_refused():
    with pytest.raises(attn_cli.ConfigError, match="No such command"):
        attn_cli.run("nope")
    with pytest.raises(attn_cli.ConfigError, match="attn_cli.verify"):
        attn_cli.run("verify")


# what the command line refuses with exit 2, one case per kind of check, for every run command
USAGE_ERRORS = [
    ("copy-task", (), {"lengths": [0]}),
    ("copy-task", (), {"steps": "1e3"}),
    ("copy-task", (), {"seed": 3, "seeds": [1]}),
    ("copy-task", (), {"scheduler": "inproc://x"}),
    ("copy-task", (), {"engine": "warp"}),
    ("heatmap", ("", "translation"), {}),
    ("heatmap", ("ab\udcff", "cd"), {}),
    ("heatmap", ("a",), {}),
    ("heatmap", ("attention", "translation"), {"heads": 3}),
    ("heads", (), {"heads": [0]}),
    ("sqrt-dk", (), {"d_k": [0]}),
    ("masks", (), {"format": ["bmp"]}),
    ("masks", (), {"no_figures": True, "format": ["svg"]}),
    ("analogy", (), {"rank": 0}),
    ("exercise", ("13",), {}),
    ("exercise", (), {}),
    ("copy-both", (), {"weights": [2.0]}),
    ("scaling", (), {"lengths": [0]}),
    ("embeddings", (), {"d_model": 0}),
    ("formula", (), {"n_q": 0}),
    ("order", (), {"d_model": 0}),
    ("self-cross", (), {"bogus": 1}),
    ("crossattn-map", (), {"device": "tpu"}),
]


@pytest.mark.parametrize("command, args, options", USAGE_ERRORS, ids=lambda x: str(x)[:30])
def test_no_click_exception_or_system_exit_escapes_the_api(command, args, options, tmp_path):
    try:
        attn_cli.run(command, *args, **options)
    except attn_cli.ConfigError as exc:
        message = str(exc)
    except BaseException as exc:  # noqa: BLE001 - what must not escape: click's exceptions, SystemExit
        pytest.fail(f"{type(exc).__module__}.{type(exc).__name__} escaped: {exc}")
    else:
        pytest.fail("no error")
    proc = run_attn(command, "--out", tmp_path, *api.command_line(command, *args, **options), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"Error: {message}" in proc.stderr


def test_run_hands_python_values_to_the_parameters_and_parses_no_command_line(monkeypatch, tmp_path):
    """The values reach the commands' click parameters directly (types, callbacks, environment
    variables as on the command line); no argv is built for click to parse."""
    import click

    def parse(*_args, **_kwargs):
        raise AssertionError("a command line was parsed")

    monkeypatch.setattr(click.Command, "make_context", parse)
    monkeypatch.setattr(click.Command, "parse_args", parse)
    run = attn_cli.run("heatmap", "banana", "bandana", d_model=8, heads=2)
    assert (run.result.config["d_model"], run.result.config["heads"]) == (8, 2)
    with pytest.raises(attn_cli.ConfigError, match="unknown ID 'w9-nope'"):
        attn_cli.verify("w9-nope")
    monkeypatch.setenv("ATTN_SCHEDULER", "inproc://x")  # an environment variable read by its parameter
    with pytest.raises(attn_cli.ConfigError) as info:
        attn_cli.run("copy-task", lengths=[4])
    proc = run_attn("copy-task", "--lengths", "4", "--out", tmp_path)
    assert str(info.value).startswith("ATTN_SCHEDULER=inproc://x") and f"Error: {info.value}" in proc.stderr


def test_a_config_error_is_the_cli_text_for_copy_task_lengths_0(tmp_path):
    with pytest.raises(ValueError) as info:
        attn_cli.run("copy-task", lengths=[0])
    proc = run_attn("copy-task", "--lengths", "0", "--out", tmp_path)
    assert [line for line in proc.stderr.splitlines() if line.startswith("Error:")] == [f"Error: {info.value}"]


def test_a_failure_at_run_time_is_an_attn_error():
    with pytest.raises(attn_cli.AttnError, match="zebra"):
        attn_cli.run("analogy", "zebra", "boy", "girl")


def test_command_line_maps_python_names_to_flags():
    assert api.command_line("copy-both", two_head_weights=(1.0, 0.88), format=["svg"]) == [
        "--two-head-weights",
        "1.0",
        "--two-head-weights",
        "0.88",
        "--format",
        "svg",
    ]
    assert api.command_line("copy-both", formats=["pdf"], quick=False, seed=None, bogus=None) == ["--format", "pdf"]
    assert api.command_line("heatmap", key_word="b", query_word="a") == ["--", "a", "b"]
    assert api.command_line("sqrt-dk", d_k=64) == ["--d-k", "64"]


def test_artifacts_equal_attn_list_json():
    proc = run_attn("list", "--json")
    assert proc.returncode == 0, proc.stderr
    entries = attn_cli.artifacts()
    assert [e.to_dict() for e in entries] == json.loads(proc.stdout)
    assert all(isinstance(e, attn_cli.Entry) for e in entries)


def test_verify_equals_attn_verify_json():
    proc = run_attn("verify", "--only", "w9-masks", "d2l-mha-params", "--json")
    assert proc.returncode == 0, proc.stderr
    checked = attn_cli.verify("w9-masks", "d2l-mha-params")
    printed, mine = json.loads(proc.stdout), checked.to_dict()
    assert printed["header"].pop("timing")["date"] and mine["header"].pop("timing")["date"]  # when each ran
    assert mine == printed
    assert checked.ok and checked.summary in proc.stderr and checked.coverage in proc.stderr
    assert "<table" in checked._repr_html_()


def test_verify_refuses_an_unknown_id_as_the_cli_does():
    with pytest.raises(attn_cli.ConfigError, match="unknown ID 'w9-nope'"):
        attn_cli.verify("w9-nope")


def test_verify_and_all_read_options_as_their_commands_do(tmp_path):
    with pytest.raises(attn_cli.ConfigError, match="--bogus"):
        attn_cli.verify("w9-masks", bogus=1)
    with pytest.raises(attn_cli.ConfigError, match="writes no file"):
        attn_cli.verify("w9-masks", out=tmp_path)
    with pytest.raises(attn_cli.ConfigError, match="is not an integer"):
        attn_cli.regenerate_all(tmp_path, "w9-masks", seed="x")
    assert list(tmp_path.iterdir()) == []


def test_regenerate_all_writes_the_report(tmp_path):
    report = attn_cli.regenerate_all(tmp_path, "w9-masks", quick=True)
    assert report.ok and report.index.exists() and (tmp_path / "manifest.json").exists()
    assert (
        json.loads((tmp_path / "manifest.json").read_text())["artifacts"].keys() == report.manifest["artifacts"].keys()
    )
    assert "w9-masks" in report.manifest["artifacts"]


def test_all_names_what_is_supported():
    assert {"run", "verify", "regenerate_all", "artifacts", "Run", "Outcome"} <= set(attn_cli.__all__)
    for name in attn_cli.__all__:
        assert getattr(attn_cli, name) is not None
    with pytest.raises(AttributeError):
        attn_cli.not_a_name  # noqa: B018


def test_import_is_light():
    """`import attn_cli` (and so `attn --help`) loads neither torch nor matplotlib nor the API."""
    code = (
        "import sys, attn_cli; "
        "print(sorted(m for m in ('torch', 'matplotlib', 'attn_cli.api', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_docs_api_md_examples_run():
    """docs/api.md's examples, as doctests."""
    failures, tried = doctest.testfile(
        str(ROOT / "docs" / "api.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert tried > 5 and failures == 0


def test_the_api_docstring_examples_run():
    """The examples in attn_cli.api's docstrings (shown on the docs site's API page), as doctests."""
    import attn_cli.api

    failures, tried = doctest.testmod(attn_cli.api)
    assert tried >= 2 and failures == 0


def test_repr_html_escapes_what_the_run_was_given():
    """Words from the caller reach the page as text, never as markup (tables, command line, captions)."""
    page = attn_cli.run("heatmap", "<b>x", "a&<i>", d_model=8)._repr_html_()
    assert "<b>" not in page and "<i>" not in page
    assert "&lt;b&gt;" in page and "&amp;" in page


def test_the_cli_consoles_follow_sys_stderr_after_a_run(tmp_path):
    """A run keeps the CLI's notes for Run.notes without pinning the shared console to one stream."""
    import contextlib
    import io

    from attn_cli.render import console

    assert [n for n in attn_cli.run("masks", out=tmp_path).notes if n.startswith("wrote ")]
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        console.note("after the run")
    assert "after the run" in buf.getvalue()
