"""Exercise 5, head pruning: importance is not additive."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import ClassVar

from attn_cli.experiments.exercises.common import DIM, Config, ProgressCallback

TITLE = "head pruning"
HEADS = ((1.0, 0.0), (0.88, 0.12), (0.88, 0.12))  # the exercise's three heads
TAU = 0.01  # the exercise's tolerance
WIDE_LAYER_HEADS = 96  # a wide layer's head count (GPT-3), for the evaluation counts quoted in the reading


@dataclass
class Subset:
    kept: list[int]  # 1-based head numbers kept
    removed: list[int]
    error: float


@dataclass
class Result:
    WIDE_LAYER_HEADS: ClassVar[int] = WIDE_LAYER_HEADS  # for the table's reading

    heads: list[list[float]]
    tau: float
    full_error: float
    subsets: list[Subset] = field(default_factory=list)  # every single and pair removal
    importance: list[float] = field(default_factory=list)  # per head (1-based order)
    one_shot_removed: list[int] = field(default_factory=list)
    one_shot_kept: list[int] = field(default_factory=list)
    one_shot_error: float = 0.0
    one_shot_evaluations: int = 0  # evaluations to compute the importances (1 + h)
    greedy_removed: list[int] = field(default_factory=list)  # in removal order
    greedy_kept: list[int] = field(default_factory=list)
    greedy_error: float = 0.0
    greedy_steps: list[dict] = field(default_factory=list)  # {"kept", "importance", "removed"}
    greedy_evaluations: int = 0  # evaluations the greedy run made (with its stopping rule)
    greedy_to_one: int = 0  # evaluations, counted, to prune h heads down to one without stopping
    greedy_to_one_formula: str = "h(h+1)/2"
    one_shot_formula: str = "h+1"
    solver: str = "torch.linalg.lstsq, float64, driver gelsd (SVD)"
    float32_spread: float = 0.0  # spread of the text's float32 solver on the duplicate pair

    @staticmethod
    def evaluations_at(h: int) -> tuple[int, int]:
        """(one-shot, greedy) evaluations to prune ``h`` heads: h + 1; 1 + h + (h - 1) + ... + 2 = h (h + 1) / 2."""
        return h + 1, h * (h + 1) // 2


Error = Callable[[tuple[int, ...]], float]  # the readout error of a subset of heads (0-based)


def _importances(error: Error, kept: tuple[int, ...]) -> dict[int, float]:
    base = error(kept)
    return {i: error(tuple(j for j in kept if j != i)) - base for i in kept}


def _greedy(error: Error, everything: tuple[int, ...], stop: bool) -> tuple[list[int], tuple[int, ...], list[dict]]:
    """Greedy pruning (stopping at TAU if ``stop``); returns removed (1-based), kept, steps."""
    kept, order, steps = everything, [], []
    while len(kept) > 1:
        imp_now = _importances(error, kept)
        least = min(kept, key=lambda i: (imp_now[i], i))
        done = stop and imp_now[least] >= TAU
        removed = None if done else least + 1
        steps.append({"kept": [i + 1 for i in kept], "importance": [imp_now[i] for i in kept], "removed": removed})
        if done:
            break
        order.append(least + 1)
        kept = tuple(i for i in kept if i != least)
    return order, kept, steps


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.measure import readout_error

    torch.manual_seed(config.seed)
    V1, V2 = torch.randn(config.samples, DIM), torch.randn(config.samples, DIM)  # the text's draws, on the CPU
    target = torch.cat([V1, V2], 1)  # (N, 2d)
    mixtures = [a * V1 + b * V2 for a, b in HEADS]  # h x (N, d)

    @functools.cache  # cache_info().misses counts the evaluations since the last cache_clear()
    def error(kept: tuple[int, ...]) -> float:
        M = torch.cat([mixtures[i] for i in kept], 1)
        return readout_error(M.double(), target.double(), driver="gelsd")  # float64, SVD: rank-safe

    everything = tuple(range(len(HEADS)))
    full = error(everything)
    subsets = [
        Subset([i + 1 for i in kept], [i + 1 for i in everything if i not in kept], error(kept))
        for r in (len(HEADS) - 1, len(HEADS) - 2)
        for kept in combinations(everything, r)
    ]
    error.cache_clear()  # one-shot: every importance once (counted from a fresh cache), remove all below tau
    imp = _importances(error, everything)
    one_shot_evals = error.cache_info().misses
    removed = [i for i in everything if imp[i] < TAU]
    kept_one = tuple(i for i in everything if i not in removed)
    one_shot_error = error(kept_one) if kept_one else float("nan")
    error.cache_clear()
    g_removed, g_kept, g_steps = _greedy(error, everything, stop=True)
    g_evals = error.cache_info().misses
    g_error = error(g_kept)  # already cached: the last round's base error
    error.cache_clear()
    _greedy(error, everything, stop=False)
    to_one = error.cache_info().misses
    pair = torch.cat([mixtures[1], mixtures[2]], 1)  # the duplicate pair, solved by the text's float32 gelsy
    spread = [readout_error(pair, target, driver=None) for _ in range(4)]  # repeated identical solves
    return Result(
        float32_spread=max(spread) - min(spread),
        heads=[list(hd) for hd in HEADS],
        tau=TAU,
        full_error=full,
        subsets=subsets,
        importance=[imp[i] for i in everything],
        one_shot_removed=[i + 1 for i in removed],
        one_shot_kept=[i + 1 for i in kept_one],
        one_shot_error=one_shot_error,
        one_shot_evaluations=one_shot_evals,
        greedy_removed=g_removed,
        greedy_kept=[i + 1 for i in g_kept],
        greedy_error=g_error,
        greedy_steps=g_steps,
        greedy_evaluations=g_evals,
        greedy_to_one=to_one,
    )
