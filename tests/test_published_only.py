"""Published values live only in attn_cli/published/ (STYLE.md: "the only place a published
number or 'is this the text's setting' appears"), and every check declares an honest kind."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import attn_cli
from attn_cli.published import all_checks
from attn_cli.published.compare import Outcome, compare, judge, summary
from attn_cli.published.types import KINDS, Check, exact, identity, num, rule

PACKAGE = Path(attn_cli.__file__).parent

# Modules not scanned: none (every module outside published/ is scanned).
NOT_SCANNED: set[str] = set()
# Numbers too common to be evidence of a leak: integers below 1000 (shapes, sizes, head
# counts: [2, 4, 100] is a published shape and 4 a plot's width alike) and floats with one
# significant digit (0.3, 0.05, 1.0: plot coordinates, tolerances).  Of the rest, these equal
# a published value by coincidence:
INCIDENTAL = {
    0.12: "exercise thresholds and a bar width (exercises 5, 8)",
    0.25: "plot offsets and an exercise's mixing weight",
    0.32: "inches per cell of the letter map",
    0.95: "figure layout fractions and an exercise's weight",
    0.999: "Adam's beta2 in the copy-task engine",
    1e6: "bytes in a MB (a unit, as 1e9 in a GB)",
}


def _numbers(value):
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v)


def _significant(x: float) -> int:
    digits = f"{abs(x):.12g}".split("e")[0].replace(".", "").strip("0")
    return len(digits)


def _distinctive(x) -> bool:
    if isinstance(x, int) or float(x).is_integer():
        return abs(x) >= 1000
    return _significant(x) >= 2


def published_numbers() -> set:
    return {x for c in all_checks().values() for x in _numbers(c.published) if _distinctive(x) and x not in INCIDENTAL}


def _printed(x) -> set[str]:
    """The ways a table prints a number: as written, with thousands separators, rounded."""
    forms = {repr(x), str(x)}
    if isinstance(x, int) or float(x).is_integer():
        forms |= {f"{int(x):,}", str(int(x))}
    else:
        forms |= {f"{x:.{d}f}" for d in range(1, 5) if math.isclose(float(f"{x:.{d}f}"), x)}
    return forms


def published_strings() -> set[str]:
    """Printed forms of the published numbers, shapes as printed, and published words."""
    out = {f for x in published_numbers() for f in _printed(x)}
    for c in all_checks().values():
        p = c.published
        if isinstance(p, list) and p and all(isinstance(v, int) for v in p):
            out |= {str(tuple(p)), str(p)}
        if isinstance(p, str) and c.kind != "rule":
            out.add(p)
        if isinstance(p, list) and p and all(isinstance(v, str) for v in p):
            out.add(", ".join(p))
    return out


def _docstrings(tree) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _leaks(path: Path, numbers: set, strings: set) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)  # help text may quote the texts; it prints no table
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in docs or isinstance(node.value, bool):
            continue
        v = node.value
        if isinstance(v, (int, float)) and v in numbers:
            found.append(f"{node.lineno}: {v!r}")
        elif isinstance(v, str):
            tokens = set(v.replace("(", " ( ").replace(")", " ) ").split()) | {v.strip()}
            # a published word only as a whole string (a corpus uses words); printed numbers as
            # tokens; shapes and lists of words also inside a longer string
            hits = {
                s
                for s in strings
                if s == v.strip() or (not s.isalpha() and s in tokens) or (not s.isalpha() and len(s) > 4 and s in v)
            }
            found += [f"{node.lineno}: {s!r} in {v[:40]!r}" for s in sorted(hits)]
    return found


def test_no_published_value_outside_published():
    numbers, strings = published_numbers(), published_strings()
    assert 2.841 in numbers and 15_000_000 in numbers and "(2, 4, 100)" in strings  # the scan sees them
    leaks = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("published/") or rel in NOT_SCANNED:
            continue
        found = _leaks(path, numbers, strings)
        if found:
            leaks[rel] = found
    assert not leaks, f"published values outside attn_cli/published/: {leaks}"


def test_the_scan_finds_a_planted_leak(tmp_path):
    planted = tmp_path / "leak.py"
    planted.write_text(
        '"""Docstrings may quote 2.841."""\nX = 2.841\nROW = ("distance", "2.841")\n'
        'P = 15_000_000\nS = "(2, 4, 100)"\nOK = 0.3\nW = "kingdom"\nCORPUS = "ruled the kingdom"\n'
    )
    found = _leaks(planted, published_numbers(), published_strings())
    assert sorted({int(f.split(":")[0]) for f in found}) == [2, 3, 4, 5, 7]


# --------------------------------------------------------------------------- kinds


def test_every_check_declares_a_kind():
    checks = all_checks().values()
    assert {c.kind for c in checks} == set(KINDS)
    for c in checks:
        assert c.kind in KINDS, c.id
        if c.kind == "identity":
            assert c.reason, c.id  # an identity says why it cannot fail


@pytest.mark.parametrize(
    "check_id, kind",
    [
        ("w9-sqrt-dk.1024.grad_scaled", "measured"),
        ("w9-masks.padding_weight.text_recipe", "measured"),  # the text's -inf recipe: could differ
        ("w9-masks.padding_weight", "identity"),  # forced to 0 by masked_fill
        ("w9-scaling.512.entries", "identity"),  # n^2
        ("w9-heads.head_size.2", "identity"),  # d / h
        ("w9-onehot.parameters", "identity"),  # V * d
        ("w9-onehot.onehot_dims", "identity"),  # the setting echoed back
        ("d2l-copy-both-one-head.theory", "identity"),  # the constant sqrt(1/2)
        ("d2l-fig-10.3.2.layout", "identity"),  # true once its inputs validate
        ("d2l-crossattn-map.regimes", "rule"),
        ("w9-copy-task.attention.32.exact", "measured"),  # copy task: the default kind
        ("w9-copy-task-map.near_diagonal", "rule"),
    ],
)
def test_kinds_of_known_checks(check_id, kind):
    assert all_checks()[check_id].kind == kind


def test_unknown_kind_or_test_is_refused():
    with pytest.raises(ValueError, match="unknown kind"):
        Check("x", "a", 1.0, kind="evidence")
    with pytest.raises(ValueError, match="unknown test"):
        Check("x", "a", 1.0, test="close")


_M = num("t.m", "t", 0.5, 0.01)
_R = rule("t.r", "t", "a claim", "its test")
_I = identity(exact("t.i", "t", 4), "2 + 2")


@pytest.mark.parametrize("check, good, bad", [(_M, 0.505, 0.52), (_R, True, False), (_I, 4, 5)])
def test_each_kind_passes_and_fails(check, good, bad):
    assert judge(check, good).status == "pass"
    assert judge(check, bad).status == "fail"


def test_identities_are_shown_not_counted():
    outcomes = list(compare([_M, _R, _I], {"t.m": 0.5, "t.r": True, "t.i": 4}).values())
    assert summary(outcomes) == "1 measured and 1 rule passed; 1 identity shown"
    # a passing identity adds nothing to the evidence; a failing one is still a failure
    assert summary(outcomes[:2]) == "1 measured and 1 rule passed; 0 identities shown"
    failed = list(compare([_M, _R, _I], {"t.m": 0.5, "t.r": True, "t.i": 5}).values())
    assert summary(failed) == "1 measured and 1 rule passed, 1 failed; 0 identities shown"


def test_summary_format_plurals_and_skips():
    many = [judge(_M, 0.5)] * 96 + [judge(_R, True)] * 8 + [judge(_I, 4)] * 23
    assert summary(many) == "96 measured and 8 rules passed; 23 identities shown"
    skipped = [judge(_M, 0.5, unjudged="quick")] * 2
    assert summary(many + skipped) == "96 measured and 8 rules passed; 23 identities shown, 2 skipped (quick)"


def test_off_the_texts_settings_does_not_apply_and_fails_verify():
    check = num("w9-masks.causal_weights", "w9-masks", [[1.0]], 0.005)
    o = judge(check, [[1.0]], {"seed": 1, "n": 5, "d_k": 4, "changed_from": 3, "padding_from": 3})
    assert o.status == "n/a" and o.ok is None
    assert "1 failed" in summary([o])


def test_experiment_defaults_are_the_texts_settings():
    """published/settings.TEXT and the experiments' Config defaults say the same."""
    from attn_cli import experiment_registry
    from attn_cli.published.settings import TEXT, at_text_settings

    registry = experiment_registry.Registry.load()
    for check in registry.checks.values():
        exp = registry.experiment_of(check.artifact)
        if exp is None or check.artifact not in TEXT:
            continue
        import dataclasses

        assert at_text_settings(check, dataclasses.asdict(exp.module.Config())), check.id


def test_outcome_json_has_kind_and_test():
    row = judge(_I, 4).as_json()
    assert (row["kind"], row["test"], row["status"]) == ("identity", "exact", "pass")
    assert isinstance(judge(_M, 0.5), Outcome)
