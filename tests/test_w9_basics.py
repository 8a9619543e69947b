"""W9 1.1-1.3, 3.1, 3.2, 4.3: ``embeddings``, ``analogy``, ``formula``, ``order``.

Every published value of w9-onehot, w9-ppmi, w9-contextual, w9-worked, w9-properties and
w9-order is regenerated in-process and compared with the published values (tolerance = half a unit
of the printed digit, or the stated rule); each command also runs once through the
installed ``attn`` entry point.  Nothing here writes into the repository's outputs/.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys

import pytest

from attn_cli.experiments import analogy, embeddings, formula, order
from attn_cli.published import all_checks
from attn_cli.published import w9_basics as family
from attn_cli.published.catalogue import BY_ID
from attn_cli.published.compare import compare_result
from tests.conftest import assert_png, assert_user_error, run_attn, run_json

MODULES = {"embeddings": embeddings, "analogy": analogy, "formula": formula, "order": order}
COMMANDS = list(MODULES)


@pytest.fixture(scope="module")
def results():
    """Each experiment once, at the text's settings."""
    return {name: module.run(module.Config()) for name, module in MODULES.items()}


@pytest.fixture(scope="module")
def measured(results):
    out = {}
    for result in results.values():
        out.update(result.measured())
    return out


# ------------------------------------------------------------------ published values


@pytest.mark.parametrize("check", family.CHECKS, ids=lambda c: c.id)
def test_published_value_regenerated(check, measured):
    assert check.id in measured, f"no experiment measures {check.id}"
    assert check.ok(measured[check.id]), (check.id, measured[check.id], check.published, check.tolerance_text())


def test_every_check_has_a_reason_and_is_registered():
    registered = all_checks()
    for check in family.CHECKS:
        assert check.reason
        assert registered[check.id] is check
        assert BY_ID[check.artifact].command in COMMANDS


def test_measured_ids_are_all_published(measured):
    assert set(measured) == {c.id for c in family.CHECKS}


def test_key_numbers_directly(results):
    """The headline numbers, asserted here as well as through the published checks (half a printed unit)."""
    e, a, f, o = (results[n] for n in COMMANDS)
    assert e.distance == pytest.approx(2.841, abs=5e-4)
    assert e.static_bank == pytest.approx([-0.89, -1.51, 0.37, 1.46, 0.94, 0.77], abs=5e-3)
    assert e.bank_outputs[0] == pytest.approx([0.12, 0.04, 0.07, -0.15, 0.2, 1.09], abs=5e-3)
    assert e.bank_outputs[1] == pytest.approx([0.22, 1.62, -0.44, 0.97, 0.03, -0.92], abs=5e-3)
    assert (e.onehot_king_queen, e.onehot_king_apple, e.lookup_equals_matmul, e.parameters) == (
        0.0,
        0.0,
        True,
        15_000_000,
    )
    assert a.similarities == pytest.approx(
        {"king~prince": 1.0, "king~queen": 0.997, "king~woman": 0.374, "king~bread": 0.316}, abs=5e-4
    )
    assert sorted(a.analogy[:2]) == ["princess", "queen"] and a.analogy[2] == "kingdom"
    assert a.bank_nearest[:7] == ["river", "money", "water", "loan", "market", "crown", "ruled"]
    assert a.bank_nearest[7] in ("queen", "princess")
    assert f.scores == pytest.approx([0.707, 0.0, 0.707], abs=5e-4)
    assert f.weights == pytest.approx([0.401, 0.198, 0.401], abs=5e-4)
    assert f.weights_sum == pytest.approx(1.0, abs=5e-4) and f.output == pytest.approx(20.0, abs=5e-3)
    assert f.closed_form_max_diff < 1e-12
    assert f.matches_sdpa and f.non_negative and f.convex and f.core_max_diff < 1e-6
    assert f.row_sums == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)
    published_bites = [-0.72, 0.958, 1.767, 0.24, 1.691, 0.924]
    assert o.output_a == pytest.approx(published_bites, abs=5e-4)
    assert o.output_b == pytest.approx(published_bites, abs=5e-4)
    assert o.identical is True and o.identical_with_positions is False


# ------------------------------------------------------------------ the queen/princess tie


def test_queen_and_princess_are_tied_exactly(results):
    tie = results["analogy"].tie
    assert abs(tie["analogy.queen"] - tie["analogy.princess"]) < analogy.TIE_TOLERANCE
    assert abs(tie["bank.queen"] - tie["bank.princess"]) < analogy.TIE_TOLERANCE


@pytest.mark.parametrize("eighth", ["queen", "princess"])
@pytest.mark.parametrize("top2", [["queen", "princess"], ["princess", "queen"]])
def test_tie_rules_accept_either_order(results, eighth, top2):
    r = dataclasses.replace(
        results["analogy"], analogy=[*top2, "kingdom"], bank_nearest=[*results["analogy"].bank_nearest[:7], eighth]
    )
    m = r.measured()
    assert m["w9-ppmi.analogy.top2"] is True and m["w9-ppmi.bank_nearest.8th"] is True


def test_tie_rules_reject_a_real_gap_or_another_word(results):
    base = results["analogy"]
    gap = dataclasses.replace(
        base,
        tie={
            **base.tie,
            "bank.queen": base.tie["bank.princess"] + 0.01,
            "analogy.queen": base.tie["analogy.princess"] + 0.01,
        },
    )
    assert gap.measured()["w9-ppmi.bank_nearest.8th"] is False
    assert gap.measured()["w9-ppmi.analogy.top2"] is False
    other = dataclasses.replace(base, bank_nearest=[*base.bank_nearest[:7], "bread"])
    assert other.measured()["w9-ppmi.bank_nearest.8th"] is False


def test_svd_sign_flips_leave_cosines_unchanged():
    import numpy as np

    space = analogy.build_space(analogy.Config())
    signs = np.random.default_rng(0).choice([-1.0, 1.0], size=space.E.shape[1])
    flipped = analogy.Space(space.vocab, space.index, space.E * signs)
    for a, b in analogy.PAIRS:
        assert flipped.similarity(a, b) == pytest.approx(space.similarity(a, b), abs=1e-12)


def test_unknown_word_lists_the_vocabulary():
    from attn_cli.errors import AttnError

    with pytest.raises(AttnError, match=r"unknown word 'xyzzy'; the vocabulary is: a and at bank"):
        analogy.run(analogy.Config(query=("king", "man", "xyzzy")))


# ------------------------------------------------------------------ results are plain values


@pytest.mark.parametrize("name", COMMANDS)
def test_result_is_plain_json(results, name):
    result = results[name]
    assert json.loads(json.dumps(dataclasses.asdict(result))) is not None
    outcomes = compare_result(result, MODULES[name].ARTIFACTS)
    assert outcomes and all(o.status == "pass" for o in outcomes.values())  # defaults are the text's settings
    assert isinstance(MODULES[name].ARTIFACTS, tuple)
    assert MODULES[name].Config.quick() == MODULES[name].Config()  # instant: quick is the full run


def test_other_settings_are_marked_not_comparable():
    r = order.run(order.Config(seed=1))
    outcomes = compare_result(r, order.ARTIFACTS)
    assert {o.status for o in outcomes.values()} == {"n/a"}  # published/ decides, for every check
    assert r.identical and not r.identical_with_positions  # the point holds for any seed


# ------------------------------------------------------------------ the command line


def test_embeddings_cli_json_and_figure(tmp_path):
    data = run_json("embeddings", "--quick", tmp_path=tmp_path)
    assert data["distance"] == pytest.approx(2.841, abs=5e-4)
    assert data["parameters"] == 15_000_000
    png, csv_name = BY_ID["w9-contextual"].files
    assert_png(tmp_path / png)
    rows = list(csv.DictReader((tmp_path / csv_name).open()))
    assert len(rows) == 2 * 5 * 5 and set(rows[0]) == {"sentence", "query", "key", "weight"}
    for sentence in ("the river bank was deep", "the money bank was closed"):
        for query in sentence.split():
            total = sum(float(r["weight"]) for r in rows if r["sentence"] == sentence and r["query"] == query)
            assert total == pytest.approx(1.0, abs=1e-6)


def test_analogy_cli_json(tmp_path):
    data = run_json("analogy", "prince", "boy", "girl", "--nearest", "money", "--quick", tmp_path=tmp_path)
    assert data["similarities"]["king~queen"] == pytest.approx(0.997, abs=5e-4)
    assert data["query"] == ["prince", "boy", "girl"]
    assert sorted(data["query_answer"][:2]) == ["princess", "queen"]
    assert data["nearest_word"] == "money" and data["nearest"][0] == "loan"
    assert list(tmp_path.iterdir()) == []  # a table only


def test_formula_cli_json(tmp_path):
    data = run_json("formula", "--quick", tmp_path=tmp_path)
    assert data["weights"] == pytest.approx([0.401, 0.198, 0.401], abs=5e-4)
    assert data["output"] == pytest.approx(20.0, abs=5e-3)
    assert data["shapes"]["output"] == [3, 6] and data["matches_sdpa"] is True


def test_order_cli_json(tmp_path):
    data = run_json("order", "--quick", tmp_path=tmp_path)
    assert data["output_a"] == pytest.approx([-0.72, 0.958, 1.767, 0.24, 1.691, 0.924], abs=5e-4)
    assert data["identical"] is True and data["identical_with_positions"] is False


def test_table_shows_published_beside_regenerated(tmp_path):
    proc = run_attn("analogy", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0.997" in proc.stdout and "DIFF" not in proc.stdout
    assert "princess" in proc.stdout and "tie" in proc.stdout  # the near-tie is named beside the value


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_an_example(name):
    proc = run_attn(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Example" in proc.stdout


@pytest.mark.parametrize(
    "args, fragments",
    [
        (("analogy", "king", "man", "xyzzy"), ("unknown word 'xyzzy'", "the vocabulary is:", "queen")),
        (("analogy", "--nearest", "xyzzy"), ("unknown word 'xyzzy'",)),
        (("analogy", "king", "man"), ("three words",)),
        (("analogy", "--rank", "0"), ("--rank",)),
        (("formula", "--d-k", "0"), ("--d-k",)),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, args, fragments):
    proc = run_attn(*args, "--out", tmp_path, cwd=tmp_path)
    assert_user_error(proc, *fragments)


def test_commands_module_does_not_import_torch():
    code = (
        "import sys, attn_cli.cli.commands.w9; "
        "sys.exit(1 if 'torch' in sys.modules or 'matplotlib' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
