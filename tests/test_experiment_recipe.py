"""The string keys a new experiment must get right, checked in one place (README, Design:
"A new experiment").

An experiment is tied to the rest by names typed by hand: the catalogue IDs in its
``ARTIFACTS``, the check IDs its Result measures, its module name (its render module has the
same), the command its catalogue entries name, and the figure files of ``FIGURES`` and the
catalogue.  :func:`mismatches` lists every one that does not agree, in words that say which
file to fix; each rule is shown failing on a planted mismatch.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import pkgutil

import pytest

from attn_cli import experiment_registry
from attn_cli.records import FIGURE_SUFFIXES


def _commands() -> set[str]:
    from attn_cli.cli import cli

    return set(cli.commands)


def _render_modules() -> dict[str, object]:
    """Modules of attn_cli.render that render an experiment (they define ``tables``); the others
    (console, files, html, ...) are shared helpers."""
    package = importlib.import_module(experiment_registry.RENDER_PACKAGE)
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{experiment_registry.RENDER_PACKAGE}.{info.name}")
        if hasattr(module, "tables"):
            found[info.name] = module
    return found


def _figure_files(registry, exp) -> set[str]:
    return {
        f
        for a in exp.artifacts
        if a in registry.artifacts
        for f in registry.artifacts[a].files
        if f.lower().endswith(FIGURE_SUFFIXES)
    }


def mismatches(registry=None, commands=None, render_modules=None) -> list[str]:
    """Every string key that does not agree, one line each (empty: all agree)."""
    registry = registry or experiment_registry.Registry.load()
    commands = _commands() if commands is None else commands
    render_modules = _render_modules() if render_modules is None else render_modules
    names = {e.name for e in registry.experiments}
    found = []
    for exp in registry.experiments:
        where = f"attn_cli/experiments/{exp.name}"
        for aid in exp.artifacts:
            if aid not in registry.artifacts:
                found.append(
                    f"{where}: ARTIFACTS names {aid!r}, which is not a catalogue ID "
                    "(add it to published/catalogue.py or a family's CATALOGUE)"
                )
        if exp.name not in render_modules:
            found.append(f"{where}: no render module attn_cli/render/{exp.name}.py with tables(result, outcomes)")
        own = {c.id for a in exp.artifacts for c in registry.checks_of(a)}
        for cid in getattr(getattr(exp.module, "Result", None), "MEASURED", {}):
            if cid not in own:
                found.append(
                    f"{where}: Result.MEASURED names {cid!r}, not a check of its ARTIFACTS ({', '.join(exp.artifacts)})"
                )
        declared, catalogued = set(exp._declared("FIGURES")), _figure_files(registry, exp)
        for f in sorted(declared - catalogued):
            found.append(f"{where}: FIGURES names {f!r}, which no catalogue entry of its ARTIFACTS lists")
        for f in sorted(catalogued - declared):
            found.append(f"{where}: the catalogue lists the figure {f!r} for it, missing from its FIGURES")
    for name in sorted(set(render_modules) - names):
        found.append(f"attn_cli/render/{name}.py renders an experiment, but attn_cli/experiments has no {name!r}")
    for artifact in registry.artifacts.values():
        if artifact.command not in commands:
            found.append(
                f"catalogue entry {artifact.id!r} names the command {artifact.command!r}, which attn does "
                f"not have (commands: {', '.join(sorted(commands))})"
            )
    for check in registry.checks.values():
        if not check.id.startswith(check.artifact + "."):
            found.append(f"check {check.id!r} is not named after its catalogue ID {check.artifact!r} (ID.name)")
        if registry.experiment_of(check.artifact) is None:
            found.append(
                f"check {check.id!r}: its catalogue ID {check.artifact!r} belongs to no experiment's ARTIFACTS"
            )
    return found


def test_every_string_key_agrees():
    assert mismatches() == []


# --------------------------------------------------------------------------- each rule, failing


def _planted(monkeypatch, **modules):
    """The real registry with one experiment module's attributes replaced."""
    real = experiment_registry.discover()
    swapped = []
    for exp in real:
        if exp.name in modules:
            exp = dataclasses.replace(exp, name=modules[exp.name].get("name", exp.name))
        swapped.append(exp)
    monkeypatch.setattr(experiment_registry, "discover", lambda: swapped)
    return experiment_registry.Registry.load()


def test_an_experiment_naming_an_unknown_catalogue_id_is_named(monkeypatch):
    from attn_cli.experiments import masks

    monkeypatch.setattr(masks, "ARTIFACTS", ("w9-maskz",))
    assert (
        "attn_cli/experiments/masks: ARTIFACTS names 'w9-maskz', which is not a catalogue ID "
        "(add it to published/catalogue.py or a family's CATALOGUE)" in mismatches()
    )


def test_a_catalogue_entry_naming_no_command_is_named(monkeypatch):
    from attn_cli.published.catalogue import ARTIFACTS

    monkeypatch.setattr(
        experiment_registry,
        "catalogue",
        lambda: tuple(dataclasses.replace(a, command="mask") if a.id == "w9-masks" else a for a in ARTIFACTS),
    )
    assert any(
        m.startswith("catalogue entry 'w9-masks' names the command 'mask', which attn does not have")
        for m in mismatches()
    )


def test_a_check_whose_catalogue_id_no_experiment_regenerates_is_named(monkeypatch):
    from attn_cli.experiments import order

    monkeypatch.setattr(order, "ARTIFACTS", ())
    found = mismatches()
    assert "check 'w9-order.identical': its catalogue ID 'w9-order' belongs to no experiment's ARTIFACTS" in found


def test_a_check_not_named_after_its_catalogue_id_is_named(monkeypatch):
    checks = experiment_registry.checks()
    bad = dataclasses.replace(checks["w9-order.identical"], id="w9-ordr.identical")
    monkeypatch.setattr(experiment_registry, "checks", lambda: {**checks, bad.id: bad})
    assert "check 'w9-ordr.identical' is not named after its catalogue ID 'w9-order' (ID.name)" in mismatches()


def test_a_measured_value_of_another_experiments_check_is_named(monkeypatch):
    from attn_cli.experiments import order

    monkeypatch.setattr(order.Result, "MEASURED", {**order.Result.MEASURED, "w9-masks.causal": "identical"})
    assert any(
        m.startswith("attn_cli/experiments/order: Result.MEASURED names 'w9-masks.causal', not a check")
        for m in mismatches()
    )


def test_a_render_module_under_another_name_is_named(monkeypatch):
    registry = _planted(monkeypatch, order={"name": "word_order"})
    found = mismatches(registry)
    assert (
        "attn_cli/experiments/word_order: no render module attn_cli/render/word_order.py with "
        "tables(result, outcomes)" in found
    )
    assert "attn_cli/render/order.py renders an experiment, but attn_cli/experiments has no 'order'" in found


def test_figures_that_disagree_with_the_catalogue_are_named(monkeypatch):
    from attn_cli.experiments import masks

    monkeypatch.setattr(masks, "FIGURES", ("mask.png",))
    found = mismatches()
    assert (
        "attn_cli/experiments/masks: FIGURES names 'mask.png', which no catalogue entry of its ARTIFACTS lists" in found
    )
    assert (
        "attn_cli/experiments/masks: the catalogue lists the figure 'masks.png' for it, missing from its FIGURES"
        in found
    )


# --------------------------------------------------------------------------- what a run writes

# every experiment but the two that take many seconds even when quick (the copy task trains;
# the exercises are twelve experiments): their figures are checked by test_copy_task.py and
# test_exercises.py
SLOW_TO_RUN = ("copy_task", "exercises")


def unwritten(report, registry) -> list[str]:
    """FIGURES of each experiment that ran that its section did not write, and checks of its
    catalogue IDs it measured no value for, one line each."""
    found = []
    for section in report.sections:
        exp = next(e for e in registry.experiments if e.name == section.name)
        for pattern in exp._declared("FIGURES"):
            wanted = pattern.replace("{length}", "*")
            if not any(fnmatch.fnmatch(f, wanted) for f in section.figures):
                found.append(
                    f"{exp.name}: FIGURES names {pattern!r}, which its render module did not write "
                    f"(wrote {', '.join(section.figures) or 'no figure'})"
                )
    for o in report.outcomes:
        if "measured no value" in (o.note or ""):
            found.append(f"{o.check.id}: {o.note} (a key of Result.MEASURED or measured())")
    return found


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    from attn_cli import regenerate

    registry = experiment_registry.Registry.load()
    ids = [a for e in registry.experiments if e.name not in SLOW_TO_RUN for a in e.artifacts]
    out = tmp_path_factory.mktemp("quick")
    return registry, regenerate.regenerate_all(out, ids, quick=True, cache_root=None, use_cache=False)


def test_every_figure_declared_is_written_and_every_check_measured(quick_run):
    registry, report = quick_run
    assert report.exit_code == 0, [s.error for s in report.errors]
    assert {s.name for s in report.sections} == {e.name for e in registry.experiments} - set(SLOW_TO_RUN)
    assert unwritten(report, registry) == []


def test_a_figure_not_written_is_named(quick_run, monkeypatch):
    registry, report = quick_run
    from attn_cli.experiments import masks

    monkeypatch.setattr(masks, "FIGURES", ("masks.png", "masks_extra.png"))
    assert unwritten(report, registry) == [
        "masks: FIGURES names 'masks_extra.png', which its render module did not write (wrote masks.png)"
    ]


def test_a_check_measured_by_no_key_is_named(quick_run):
    registry, report = quick_run
    from attn_cli.published.compare import Outcome

    check = registry.checks["w9-order.identical"]
    dropped = dataclasses.replace(report, outcomes=[Outcome(check, note="not regenerated: order measured no value")])
    assert unwritten(dropped, registry) == [
        "w9-order.identical: not regenerated: order measured no value (a key of Result.MEASURED or measured())"
    ]


# --------------------------------------------------------------------------- the published side in one file


@pytest.fixture
def family_of_a_new_experiment(monkeypatch):
    """A check family that declares its catalogue entry and the text's settings beside its checks."""
    import sys
    import types

    from attn_cli.published import catalogue
    from attn_cli.published.types import Artifact, num

    module = types.ModuleType("attn_cli.published.w9_new")
    module.CATALOGUE = (Artifact("w9-new", "W9", "5.3", "a new table", "order"),)
    module.CHECKS = (num("w9-new.value", "w9-new", 1.0, 0.5, "half a unit of the last digit"),)
    module.TEXT_SETTINGS = {"w9-new": {"seed": 0, "d": 6}}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(catalogue, "families", lambda: ["w9_new"])
    return module


def test_a_family_declares_its_catalogue_entries_placed_after_their_source(family_of_a_new_experiment):
    from attn_cli.published import catalogue

    listed = catalogue.placed(catalogue.ARTIFACTS, catalogue.family_entries())
    ids = [a.id for a in listed]
    assert ids.index("w9-new") == ids.index("w9-scaling") + 1  # after the last W9 entry, before D2L's
    assert ids[: ids.index("w9-new")] + ids[ids.index("w9-new") + 1 :] == [a.id for a in catalogue.ARTIFACTS]
    with pytest.raises(ValueError, match="catalogue ID 'w9-masks' is declared twice"):
        catalogue.placed(catalogue.ARTIFACTS, (catalogue.BY_ID["w9-masks"],))


def test_a_family_declares_the_texts_settings_of_its_values(family_of_a_new_experiment):
    from attn_cli.published.settings import at_text_settings, text_settings

    (check,) = family_of_a_new_experiment.CHECKS
    assert text_settings("w9-new") == {"seed": 0, "d": 6}
    assert at_text_settings(check, {"seed": 0, "d": 6}) and not at_text_settings(check, {"seed": 0, "d": 8})
    assert text_settings("w9-order") == {"seed": 0, "d_model": 6, "weight_scale": 0.5, "words": ("dog", "bites", "man")}


def test_the_design_page_lists_at_most_four_files_for_a_new_experiment():
    import re
    from pathlib import Path

    design = (Path(__file__).parents[1] / "docs" / "design.md").read_text()
    section = design.split("## A new experiment", 1)[1].split("\n#", 1)[0]
    steps = re.findall(r"^\d+\. `([^`]+)`", section, re.M)
    assert steps == [
        "attn_cli/published/<text>.py",
        "attn_cli/experiments/<name>.py",
        "attn_cli/render/<name>.py",
        "attn_cli/cli/commands/<family>.py",
    ], steps
    assert "tests/test_experiment_recipe.py" in section
