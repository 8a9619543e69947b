"""The pipeline's layer rules (issue 15, item 1), read from the source with ``ast``:

* render/ imports nothing from attn_cli.experiments at run time (a Result class named under
  ``if TYPE_CHECKING:`` is a type for mypy, never executed) and never compares: every render
  function receives the outcomes (``tables(result, outcomes)``, ``figures(result, out,
  formats, outcomes)``);
* ``compare_result`` (a Result against its published values) is called in one place in
  attn_cli: the pipeline, :func:`attn_cli.pipeline.run`;
* the commands run no experiment hook themselves (validate, preflight, the copy task's engine
  and memory checks): the pipeline does, for every command alike.

Each rule is also shown failing on a planted source.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import attn_cli

PACKAGE = Path(attn_cli.__file__).parent
EXPERIMENTS = "attn_cli.experiments"
COMPARING = {"compare", "compare_result", "judge"}  # attn_cli.published.compare's verdict makers
HOOKS = {"validate", "preflight", "fast_engine", "check_memory", "compare_result", "json_view"}


def _modules(folder: str) -> list[Path]:
    found = sorted((PACKAGE / folder).rglob("*.py"))
    assert found, f"no module under attn_cli/{folder}"  # a moved folder must not empty a parametrized test
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The nodes inside ``if TYPE_CHECKING:`` blocks: read by type checkers, never run."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for stmt in node.body
        for inner in ast.walk(stmt)
    }


def experiment_imports(source: str) -> list[str]:
    """What ``source`` imports from attn_cli.experiments at run time (``import``, ``from ...
    import``, or a module name handed to importlib as a string)."""
    found = []
    tree = ast.parse(source)
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == EXPERIMENTS or a.name.startswith(EXPERIMENTS + ".")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == EXPERIMENTS or node.module.startswith(EXPERIMENTS + "."):
                found.append(node.module)
            elif node.module == "attn_cli" and any(a.name == "experiments" for a in node.names):
                found.append(EXPERIMENTS)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(EXPERIMENTS):
            found.append(node.value)
    return found


def comparing_imports(source: str) -> list[str]:
    """Names from attn_cli.published.compare that make a verdict, imported by ``source``."""
    return [
        a.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module == "attn_cli.published.compare"
        for a in node.names
        if a.name in COMPARING
    ]


def calls(source: str, names: set[str]) -> list[str]:
    """Calls in ``source`` of a function named in ``names`` (``f(...)`` or ``x.f(...)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in names:
                found.append(f"{name} (line {node.lineno})")
    return found


PLANTED_IMPORTS = [
    "from attn_cli.experiments.sqrt_dk import ARTIFACTS\n",
    "import attn_cli.experiments.copy_task as exp\n",
    "from attn_cli import experiments\n",
    "def f():\n    from attn_cli.experiments import masks\n",
    "import importlib\nm = importlib.import_module('attn_cli.experiments.heads')\n",
    "if TYPE_CHECKING:\n    pass\nelse:\n    from attn_cli.experiments.masks import Result\n",  # the else runs
]


def test_a_type_only_import_is_not_a_run_time_import():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from attn_cli.experiments.masks import Result\n"
    assert experiment_imports(source) == []


@pytest.mark.parametrize("planted", PLANTED_IMPORTS)
def test_a_planted_experiment_import_is_found(planted):
    clean = (PACKAGE / "render" / "masks.py").read_text(encoding="utf-8")
    assert experiment_imports(clean) == []
    assert experiment_imports(clean + "\n" + planted)


@pytest.mark.parametrize("path", _modules("render"), ids=lambda p: p.name)
def test_render_imports_no_experiment_module(path):
    assert experiment_imports(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", _modules("render"), ids=lambda p: p.name)
def test_render_never_compares(path):
    source = path.read_text(encoding="utf-8")
    assert comparing_imports(source) == [] and calls(source, COMPARING - {"compare"}) == []


def test_a_planted_comparison_in_render_is_found():
    planted = "from attn_cli.published.compare import compare_result\no = compare_result(r, ARTIFACTS)\n"
    assert comparing_imports(planted) == ["compare_result"] and calls(planted, {"compare_result"})


def test_every_render_module_takes_the_outcomes():
    """tables(result, outcomes) and figures(result, out, formats, outcomes): outcomes required."""
    import importlib

    from attn_cli.experiment_registry import discover

    for exp in discover():
        render = importlib.import_module(f"attn_cli.render.{exp.name}")
        for name, first in (("tables", ["result", "outcomes"]), ("figures", ["result", "out", "formats", "outcomes"])):
            params = list(inspect.signature(getattr(render, name)).parameters.values())
            assert [p.name for p in params[: len(first)]] == first, (exp.name, name)
            assert params[len(first) - 1].default is inspect.Parameter.empty, (exp.name, name, "outcomes optional")
        assert not hasattr(render, "json_view"), exp.name  # the JSON of every command comes one way


def _call_sites(root: Path) -> dict[str, list[str]]:
    """Module (relative to ``root``) -> its calls of compare_result."""
    sites = {}
    for path in sorted(root.rglob("*.py")):
        found = calls(path.read_text(encoding="utf-8"), {"compare_result"})
        if found:
            sites[path.relative_to(root).as_posix()] = found
    return sites


def test_compare_result_is_called_in_one_place():
    sites = _call_sites(PACKAGE)
    assert list(sites) == ["pipeline.py"] and len(sites["pipeline.py"]) == 1, sites


def test_a_second_compare_result_call_is_found(tmp_path):
    """The same count over a copy of the package with one more call planted in api.py."""
    import shutil

    copy = tmp_path / "attn_cli"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    with open(copy / "api.py", "a", encoding="utf-8") as fh:
        fh.write("\n\ndef _again(result):\n    return compare_result(result)\n")
    assert sorted(_call_sites(copy)) == ["api.py", "pipeline.py"]


@pytest.mark.parametrize("path", _modules("cli/commands"), ids=lambda p: p.name)
def test_commands_run_no_experiment_hook_themselves(path):
    assert calls(path.read_text(encoding="utf-8"), HOOKS) == []


def test_a_planted_hook_call_in_a_command_is_found():
    source = (PACKAGE / "cli" / "commands" / "copy_task.py").read_text(encoding="utf-8")
    assert calls(source + "\nexp.check_memory(config)\n", HOOKS) == [f"check_memory (line {source.count(chr(10)) + 2})"]
