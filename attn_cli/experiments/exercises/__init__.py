"""D2L 10.3.5 exercises: the measurable part of each of the twelve, one module per exercise.

``run(Config(exercises=(2, 5)))`` runs exercises 2 and 5 and returns one :class:`Result`
whose fields ``ex1`` .. ``ex12`` hold each exercise's result (``None`` when not run).
Every exercise starts from ``torch.manual_seed(config.seed)`` of its own, so the numbers
of one exercise do not depend on which others ran before it.

The texts publish no numbers for the exercises, so :meth:`Result.measured` is empty; the
properties each run must show (an exact rank formula, an equality, an invariance) are
asserted in ``tests/test_exercises.py`` and summarised in each result's fields.

=====  ============================================  ===========================
 ex    module                                         what is measured
=====  ============================================  ===========================
 1     :mod:`.ex01_readouts`                          MLP vs linear readout error
 2     :mod:`.ex02_noise`                             error vs epsilon, two noise levels
 3     :mod:`.ex03_rank`                              1 - rank(A)/k for softmax A
 4     :mod:`.ex04_key_noise`                         median error, failure fraction
 5     :mod:`.ex05_pruning`                           one-shot vs greedy head pruning
 6     :mod:`.ex06_timing`                            forward time against h
 7     :mod:`.ex07_cross_cost`                        cross-attention FLOPs, K/V cache
 8     :mod:`.ex08_gqa`                               MHA / GQA / MQA counts and cache
 9     :mod:`.ex09_slices`                            head loop = folded; tiled valid_lens
 10    :mod:`.ex10_permute`                           permutation checks of cross-attention
 11    :mod:`.ex11_projections`                       per-head maps through random projections
 12    :mod:`.ex12_learned`                           trained copy-both heads, h = 1, 2, 4, 8
=====  ============================================  ===========================
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import asdict, dataclass
from typing import Any, Callable, ClassVar

from attn_cli.errors import AttnError

ARTIFACTS = tuple(f"d2l-ex{i}" for i in range(1, 13))

NUMBERS = tuple(range(1, 13))

# exercise number -> (module, short title); the title is the exercise's own heading
EXERCISES: dict[int, tuple[str, str]] = {
    1: ("ex01_readouts", "nonlinear readouts"),
    2: ("ex02_noise", "nearly identical heads"),
    3: ("ex03_rank", "what the bound counts"),
    4: ("ex04_key_noise", "averages under key noise"),
    5: ("ex05_pruning", "head pruning"),
    6: ("ex06_timing", "narrow heads"),
    7: ("ex07_cross_cost", "cost of cross-attention"),
    8: ("ex08_gqa", "multi-query and grouped-query attention"),
    9: ("ex09_slices", "heads as slices"),
    10: ("ex10_permute", "permuting the source"),
    11: ("ex11_projections", "random projections and readable maps"),
    12: ("ex12_learned", "learned copy-both heads"),
}


@dataclass(frozen=True)
class Config:
    seed: int = 0  # torch.manual_seed(seed) at the start of every exercise
    device: str = "cpu"  # data drawn on the CPU generator, then moved; ex6 times this device
    exercises: tuple[int, ...] = NUMBERS  # which exercises to run, in this order
    samples: int = 10_000  # N of the text's copy-both data (ex1, ex2, ex5); d = 16
    mlp_hidden: int = 16  # ex1: hidden width of the per-coordinate perceptron (1 -> H -> H -> 2)
    mlp_steps: int = 300  # ex1: full-batch Adam steps
    mlp_points: int = 4096  # ex1: training coordinates for the perceptron (scalar examples)
    resamples: int = 1000  # ex4: resamples of the keys (the exercise's 1000)
    timing_n: int = 512  # ex6: sequence length n (the exercise's 512)
    timing_repeats: int = 3  # ex6: timed calls per head count after one warm-up (median kept)
    train_steps: int = 300  # ex12: Adam steps (batches of 256) per head count

    @classmethod
    def quick(cls, **overrides) -> "Config":
        return cls(**{"samples": 4000, "mlp_steps": 150, "mlp_points": 1024, "resamples": 1000, "timing_n": 128,
                      "timing_repeats": 2, "train_steps": 150, **overrides})


@dataclass
class Result:
    config: dict
    ex1: Any = None
    ex2: Any = None
    ex3: Any = None
    ex4: Any = None
    ex5: Any = None
    ex6: Any = None
    ex7: Any = None
    ex8: Any = None
    ex9: Any = None
    ex10: Any = None
    ex11: Any = None
    ex12: Any = None
    seconds: dict = dataclasses.field(default_factory=dict)  # "ex1" -> wall seconds
    # wall-clock values (JSON: under "timing"): each exercise's seconds and ex6's timings and
    # everything fitted to them
    TIMING: ClassVar[tuple[str, ...]] = ("seconds", "ex6.rows.*.seconds", "ex6.ratio", "ex6.slowest_h",
                                         "ex6.fastest_h", "ex6.ns_per_entry", "ex6.fixed_seconds", "ex6.r_squared")

    def ran(self) -> list[int]:
        """The exercises that ran, in the order they were asked for."""
        order = list(self.config.get("exercises", NUMBERS))
        return [n for n in order if n in EXERCISES and getattr(self, f"ex{n}") is not None]

    def measured(self) -> dict[str, Any]:
        return {}  # no published numbers exist for the exercises


def parse_selection(tokens) -> tuple[int, ...]:
    """``("3", "1", "all")`` -> exercise numbers in the order given, duplicates dropped."""
    chosen: list[int] = []
    for token in tokens:
        token = str(token).strip().lower()
        if token == "all":
            numbers = list(NUMBERS)
        else:
            try:
                numbers = [int(token)]
            except ValueError:
                raise AttnError(f"{token!r} is not an exercise: give a number from 1 to 12 or 'all'") from None
            if numbers[0] not in EXERCISES:
                raise AttnError(f"there is no exercise {numbers[0]}: D2L 10.3.5 has exercises 1 to 12")
        chosen.extend(n for n in numbers if n not in chosen)
    return tuple(chosen)


def validate(config: Config) -> None:
    parse_selection(config.exercises)
    if config.samples < 100:
        raise AttnError(f"samples must be at least 100, got {config.samples}")
    for name in ("mlp_hidden", "mlp_steps", "mlp_points", "resamples", "timing_n", "timing_repeats", "train_steps"):
        if getattr(config, name) < 1:
            raise AttnError(f"{name} must be at least 1, got {getattr(config, name)}")


def estimate_bytes(config: Config) -> int:
    """The largest tensors any selected exercise holds at once (float64 to be safe):
    copy-both data (ex1, 2, 5: a few (N, 16) matrices), the perceptron's points (ex1), the key
    resamples (ex4: R x 8 x 8), the timed layer (ex6: (8, n, 256) inputs, (8, 64, n, n) scores
    at the most heads) and ex12's held-out batch."""
    n = config.timing_n
    return 8 * max(8 * config.samples * 16,
                   4 * config.mlp_points * config.mlp_hidden,
                   8 * config.resamples * 64,
                   (6 * 8 * n * 256 + 2 * 8 * 64 * n * n) // 2,
                   8 * 4096 * 2 * 16)


def module(number: int):
    return importlib.import_module(f"{__name__}.{EXERCISES[number][0]}")


def run(config: Config, progress: Callable[[int, str], None] | None = None) -> Result:
    """Run the selected exercises; ``progress(number, title)`` is called before each."""
    import time

    import torch

    from attn_cli.core.memory import guard

    validate(config)
    guard(estimate_bytes(config), "exercises " + " ".join(map(str, config.exercises)), config.device)
    result = Result(config=asdict(config))
    for number in parse_selection(config.exercises):
        if progress is not None:
            progress(number, EXERCISES[number][1])
        torch.manual_seed(config.seed)
        start = time.perf_counter()
        setattr(result, f"ex{number}", module(number).run(config))
        result.seconds[f"ex{number}"] = round(time.perf_counter() - start, 3)
    return result
