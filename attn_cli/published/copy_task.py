"""Published values of W9 2.3: the copy task with attention, and the Week 8 plain model.  Each cell is judged
among several regenerated seeds (:mod:`attn_cli.published.seed_rule`), the near-diagonal map claim over all
evaluation sequences and seeds (:func:`map_rule`), never on one run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attn_cli.published import seed_rule
from attn_cli.published.settings import TEXT
from attn_cli.published.types import Check, rule

REASON = (
    "one seed of training on an unknown machine: judged by where it falls among the regenerated "
    f"seeds ({seed_rule.RULE}; one seed: ±{seed_rule.FLOOR:g})"
)

# W9 2.3 table: length -> (teacher-forced, free-running, whole sequence exact)
ATTENTION = {
    4: (1.000, 1.000, 1.000),
    8: (1.000, 1.000, 1.000),
    16: (0.999, 0.995, 0.982),
    32: (0.988, 0.894, 0.738),
}
# Week 8's plain encoder-decoder as W9 quotes it: free-running accuracy only
PLAIN_FREE_RUNNING = {4: 0.997, 16: 0.30, 32: 0.15}
METRICS = ("teacher_forced", "free_running", "exact")

MAP_RULE_ID = "w9-copy-task-map.near_diagonal"

# The text's training and evaluation sizes: its published values apply only there (the table's
# cells; the map rule is a claim about any trained model, judged wherever a length >= 16 ran).
TEXT_SETTING = TEXT["w9-copy-task"]

# The map rule.  It is judged where attention is needed: at lengths from 16 on, where W9's plain
# encoder-decoder fails (free-running 0.30 at 16, 0.15 at 32); at length 4 the plain model copies
# (0.997) and a trained attention model need not look at the copied position at all.
MAP_MIN_LENGTH = 16
MAP_MARGIN = 0.05  # a step may be copied right without its attention peaking there: 5% of steps at most
MAP_MAJORITY = 0.5  # and the peak is on the copied position for most steps (chance: 1/length)
MAP_RULE = (
    f"at every length >= {MAP_MIN_LENGTH} (where the plain model fails), over all evaluation "
    "sequences and seeds, the readout attention of a decoder step peaks at the step's own input "
    f"position for at least max({MAP_MAJORITY:g}, free-running accuracy - {MAP_MARGIN:g}) of the "
    "steps: attention follows the position being copied wherever the model copies"
)


def check_id(model: str, length: int, metric: str) -> str:
    """The ID of one cell of the table, e.g. ``w9-copy-task.attention.32.free_running``
    (a check exists only where the text prints the cell: :data:`CHECK_IDS`)."""
    return f"w9-copy-task.{model}.{length}.{metric}"


def cell_of(check: str) -> tuple[str, int, str]:
    """(model, length, metric) of a cell's check ID: the inverse of :func:`check_id`."""
    _, model, length, metric = check.split(".")
    return model, int(length), metric


@dataclass
class MapSample:
    """The near-diagonal measure of every attention run: one entry per (length, seed)."""

    lengths: list[int] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    diagonal: list[float] = field(default_factory=list)  # fraction of steps peaking on their own position
    free_running: list[float] = field(default_factory=list)  # the same run's free-running accuracy
    rule: str = MAP_RULE

    def per_length(self) -> dict[int, tuple[float, float]]:
        """length -> (mean diagonal fraction, mean free-running accuracy) over its seeds."""

        def mean(values: list[float], length: int) -> float:
            picked = [v for v, L in zip(values, self.lengths) if L == length]
            return sum(picked) / len(picked)

        return {L: (mean(self.diagonal, L), mean(self.free_running, L)) for L in sorted(set(self.lengths))}

    def record(self) -> dict:
        """The fields a verify record adds: one diagonal fraction per (length, seed) run, and the rule."""
        return {
            "values": list(self.diagonal),
            "lengths": list(self.lengths),
            "seeds": list(self.seeds),
            "free_running": list(self.free_running),
            "rule": self.rule,
        }

    def __str__(self) -> str:
        parts = [f"L{L} {d:.3f} (acc {a:.3f})" for L, (d, a) in self.per_length().items() if L >= MAP_MIN_LENGTH]
        n = len(set(self.seeds))
        return (", ".join(parts) or f"no length >= {MAP_MIN_LENGTH}") + f"; {n} seed{'s' if n != 1 else ''}"


def map_rule(sample: MapSample | dict, published: Any = None) -> bool:
    """The near-diagonal claim (:data:`MAP_RULE`); False when no judged length was run."""
    if isinstance(sample, dict):
        sample = MapSample(**{k: v for k, v in sample.items() if k != "rule"})
    judged = {L: v for L, v in sample.per_length().items() if L >= MAP_MIN_LENGTH}
    return bool(judged) and all(diag >= max(MAP_MAJORITY, acc - MAP_MARGIN) for diag, acc in judged.values())


def _seeds(model: str, length: int, metric: str, value: float, reason: str = REASON) -> Check:
    """One trained cell, judged by the seed rule (one seed alone: within ``seed_rule.FLOOR``)."""
    cell = check_id(model, length, metric)
    return Check(cell, "w9-copy-task", value, "seeds", seed_rule.FLOOR, reason, judge=seed_rule.judge)


CHECKS: tuple[Check, ...] = (
    *(_seeds("attention", L, metric, value) for L, row in ATTENTION.items() for metric, value in zip(METRICS, row)),
    *(
        _seeds("plain", L, "free_running", value, REASON + "; Week 8's value as W9 quotes it")
        for L, value in PLAIN_FREE_RUNNING.items()
    ),
    rule(
        MAP_RULE_ID,
        "w9-copy-task-map",
        "the trained model's attention (output step x input position) is near-diagonal",
        "rule: " + MAP_RULE,
        judge=map_rule,
    ),
)
CHECK_IDS = frozenset(c.id for c in CHECKS)
