"""The two-sample statistics of benchmarks/copy_task_seeds.py (numpy only) against closed forms."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "copy_task_seeds.py"
_spec = importlib.util.spec_from_file_location("copy_task_seeds", _PATH)
stats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stats)


@pytest.mark.parametrize("t", [0.1, 1.0, 2.5, 10.0])
def test_t_distribution_closed_forms(t):
    assert stats.t_two_sided(t, 1) == pytest.approx(1 - 2 * math.atan(t) / math.pi, rel=1e-10)  # Cauchy
    assert stats.t_two_sided(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-10)


@pytest.mark.parametrize("f", [0.2, 1.0, 3.0, 50.0])
def test_f_distribution_closed_forms(f):
    assert stats.f_upper(f, 2, 2) == pytest.approx(1 / (1 + f), rel=1e-10)
    assert stats.f_upper(f, 1, 1) == pytest.approx(1 - 2 * math.atan(math.sqrt(f)) / math.pi, rel=1e-10)
    assert stats.f_quantile(1 - 1 / (1 + f), 2, 2) == pytest.approx(f, rel=1e-8)


def test_tables():
    assert stats.t_two_sided(2.228, 10) == pytest.approx(0.05, abs=2e-4)  # t_{0.975, 10}
    assert stats.f_upper(4.965, 1, 10) == pytest.approx(0.05, abs=2e-4)  # F_{0.95}(1, 10)


def test_tests_see_a_difference_only_where_there_is_one():
    rng = np.random.default_rng(0)
    a, same, shifted, wide = (rng.normal(0, 1, 30), rng.normal(0, 1, 30), rng.normal(2, 1, 30), rng.normal(0, 4, 30))
    assert stats.welch(a, same)[2] > 0.05 and stats.welch(a, shifted)[2] < 1e-6
    assert stats.brown_forsythe(a, same)[1] > 0.05 and stats.brown_forsythe(a, wide)[1] < 1e-4
    p_mean, p_spread = stats.permutation_p(a, wide, rounds=400)
    assert p_mean > 0.05 and p_spread < 0.01
    ratio, lo, hi = stats.std_ratio_interval(wide, a)
    assert lo < 4 < hi and lo < ratio < hi
