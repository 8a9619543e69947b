"""``--seeds`` takes inclusive ranges (``0-63``) as well as lists (``0 1 2``), mixed (issue 16)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from attn_cli.cli import cli
from attn_cli.cli.types import MAX_SEEDS, SEEDS
from attn_cli.errors import SEED_MAX, SEED_MIN
from tests.conftest import run_json


@pytest.mark.parametrize(
    "value, seeds",
    [
        ("7", (7,)),
        (7, (7,)),
        ("0-3", (0, 1, 2, 3)),
        ("5-5", (5,)),
        ("-2", (-2,)),
        ("-2-1", (-2, -1, 0, 1)),
        (f"{SEED_MAX - 1}-{SEED_MAX}", (SEED_MAX - 1, SEED_MAX)),
    ],
)
def test_a_seed_or_an_inclusive_range(value, seeds):
    assert SEEDS.convert(value, None, None) == seeds


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("5-3", "a range runs upward"),
        (f"0-{MAX_SEEDS}", "more than"),
        ("0-x", "is not an integer"),
        (f"0-{SEED_MAX + 1}", "not in the range"),
        (f"{SEED_MIN - 1}-0", "not in the range"),
        ("1.5", "is not an integer"),
    ],
)
def test_a_bad_seed_range_is_refused(value, fragment):
    with pytest.raises(click.BadParameter, match=fragment):
        SEEDS.convert(value, None, None)


def test_a_reversed_range_is_one_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["copy-task", "--seeds", "9-2", "--out", str(tmp_path / "new")])
    assert result.exit_code == 2 and "'--seeds': '9-2': a range runs upward" in result.output
    assert not (tmp_path / "new").exists()


def test_ranges_and_lists_mix_in_order_each_seed_once(tmp_path):
    result = run_json(
        "copy-task",
        "--seeds",
        "0-2",
        "7",
        "1",
        "--lengths",
        "3",
        "--steps",
        "2",
        "--eval-size",
        "4",
        "--model",
        "plain",
        "--engine",
        "fast",
        tmp_path=tmp_path,
    )
    assert result["config"]["seeds"] == [0, 1, 2, 7]
    assert [r["seed"] for r in result["runs"]] == [0, 1, 2, 7]
