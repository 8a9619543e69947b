"""D2L 10.3.5 exercises: the measurable part of each of the twelve, one module per exercise
(design notes: ``docs/exercises.md``, one section per module)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from attn_cli.errors import AttnError
from attn_cli.experiments import ProgressCallback, ProgressEvent
from attn_cli.experiments.exercises import (
    ex01_readouts,
    ex02_noise,
    ex03_rank,
    ex04_key_noise,
    ex05_pruning,
    ex06_timing,
    ex07_cross_cost,
    ex08_gqa,
    ex09_slices,
    ex10_permute,
    ex11_projections,
    ex12_learned,
)
from attn_cli.experiments.exercises.common import NUMBERS, Config

ARTIFACTS = tuple(f"d2l-ex{i}" for i in range(1, 13))
SLOW = False  # seconds at --quick, about 15 s at full size
CACHED = True  # the pipeline keeps the Result in the per-user cache (keyed by the config and the code)
ENGINES: tuple[str, ...] = ()
FIGURES = ("exercise_2.png", "exercise_6.png", "exercise_11.png", "exercise_12.png")

# exercise number -> its module; each module's TITLE is the exercise's own heading
MODULES = {
    1: ex01_readouts,
    2: ex02_noise,
    3: ex03_rank,
    4: ex04_key_noise,
    5: ex05_pruning,
    6: ex06_timing,
    7: ex07_cross_cost,
    8: ex08_gqa,
    9: ex09_slices,
    10: ex10_permute,
    11: ex11_projections,
    12: ex12_learned,
}
TITLES: dict[int, str] = {n: m.TITLE for n, m in MODULES.items()}
SEED_OFFSETS = (0, 1, 2)  # seeds drawn from: seed, and exercise 12's data streams seed + 1, seed + 2


@dataclass
class Result:
    TITLES: ClassVar[dict[int, str]] = TITLES  # for the tables: each exercise's heading

    config: dict
    ex1: ex01_readouts.Result | None = None
    ex2: ex02_noise.Result | None = None
    ex3: ex03_rank.Result | None = None
    ex4: ex04_key_noise.Result | None = None
    ex5: ex05_pruning.Result | None = None
    ex6: ex06_timing.Result | None = None
    ex7: ex07_cross_cost.Result | None = None
    ex8: ex08_gqa.Result | None = None
    ex9: ex09_slices.Result | None = None
    ex10: ex10_permute.Result | None = None
    ex11: ex11_projections.Result | None = None
    ex12: ex12_learned.Result | None = None
    seconds: dict = field(default_factory=dict)  # "ex1" -> wall seconds
    # wall-clock values (JSON: under "timing"): each exercise's seconds, ex6's timings and all fitted to them
    TIMING: ClassVar[tuple[str, ...]] = ("seconds", "ex6.rows.*.seconds") + tuple(
        f"ex6.{name}" for name in ("ratio", "slowest_h", "fastest_h", "ns_per_entry", "fixed_seconds", "r_squared")
    )

    def ran(self) -> list[int]:
        """The exercises that ran, in the order they were asked for."""
        order = list(self.config.get("exercises", NUMBERS))
        return [n for n in order if n in MODULES and getattr(self, f"ex{n}") is not None]

    def measured(self) -> dict[str, Any]:
        return {}  # no published numbers exist for the exercises


def parse_selection(tokens: Iterable[str | int]) -> tuple[int, ...]:
    """``("3", "1", "all")`` -> exercise numbers in the order given, duplicates dropped."""
    chosen: list[int] = []
    for token in tokens:
        token = str(token).strip().lower()
        if token == "all":
            chosen += NUMBERS
            continue
        try:
            number = int(token)
        except ValueError:
            raise AttnError(f"{token!r} is not an exercise: give a number from 1 to 12 or 'all'") from None
        if number not in MODULES:
            raise AttnError(f"there is no exercise {number}: D2L 10.3.5 has exercises 1 to 12")
        chosen.append(number)
    return tuple(dict.fromkeys(chosen))


def validate(config: Config) -> tuple[int, ...]:
    """Refuse a config no exercise can run; the selected exercises, in order."""
    selected = parse_selection(config.exercises)
    if config.samples < 100:
        raise AttnError(f"samples must be at least 100, got {config.samples}")
    for name in ("mlp_hidden", "mlp_steps", "mlp_points", "resamples", "timing_n", "timing_repeats", "train_steps"):
        if getattr(config, name) < 1:
            raise AttnError(f"{name} must be at least 1, got {getattr(config, name)}")
    return selected


def validate_result(result: Result, config: Config) -> None:
    """A cached Result holds exactly the exercises ``config`` selects, each valid (:mod:`attn_cli.store.typed`)."""
    from attn_cli.store.typed import InvalidEntry, check

    selected = parse_selection(config.exercises)
    for number, module in MODULES.items():
        got = getattr(result, f"ex{number}")
        why = "present but not selected" if got is not None else "selected but missing"
        check((got is not None) == (number in selected), f"ex{number}", why)
        validate = getattr(module, "validate_result", None)
        if got is not None and validate is not None:
            try:
                validate(got, config)
            except InvalidEntry as exc:
                raise InvalidEntry(f"ex{number}.{exc}") from None


def estimate_bytes(config: Config) -> int:
    """The largest tensors any selected exercise holds at once (float64 to be safe)."""
    n = config.timing_n
    return 8 * max(
        8 * config.samples * 16,  # copy-both data (ex1, 2, 5: a few (N, 16) matrices)
        4 * config.mlp_points * config.mlp_hidden,  # the perceptron's points (ex1)
        8 * config.resamples * 64,  # the key resamples (ex4: R x 8 x 8)
        (6 * 8 * n * 256 + 2 * 8 * 64 * n * n) // 2,  # ex6: (8, n, 256) inputs, (8, 64, n, n) scores at 64 heads
        8 * 4096 * 2 * 16,  # ex12's held-out batch
    )


def run(config: Config, progress: ProgressCallback = None) -> Result:
    """Run the selected exercises; ``progress`` hears a ProgressEvent before each (label "N. title")."""
    import torch

    from attn_cli.core.memory import guard

    selected = validate(config)
    guard(estimate_bytes(config), "exercises " + " ".join(map(str, config.exercises)), config.device)
    result = Result(config=asdict(config))
    for i, number in enumerate(selected):
        if progress is not None:
            progress(ProgressEvent(i, len(selected), f"{number}. {TITLES[number]}"))
        torch.manual_seed(config.seed)
        start = time.perf_counter()
        setattr(result, f"ex{number}", MODULES[number].run(config))
        result.seconds[f"ex{number}"] = round(time.perf_counter() - start, 3)
    return result
