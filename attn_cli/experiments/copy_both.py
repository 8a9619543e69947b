"""D2L 10.3.1: the copy-both task. One head loses half the variance; two heads recover it.

V1, V2 (N x d, drawn in that order) are read out of attention mixtures by least squares: one
mixture ``a V1 + (1 - a) V2`` leaves relative error sqrt(1/2) for every ``a``; two mirrored
heads leave solver noise, except at ``a = 0.5`` where their mixtures coincide."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from attn_cli.errors import AttnError
from attn_cli.experiments import ProgressCallback, QuickConfig

ARTIFACTS = ("d2l-copy-both-one-head", "d2l-copy-both-two-heads", "d2l-fig-10.3.1")
FIGURES = ("copy_both.png",)
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, True  # about a second of least squares

THEORY = math.sqrt(0.5)  # best relative error of one head, for every softmax pair


@dataclass(frozen=True)
class Config(QuickConfig):
    samples: int = 10_000  # N in the text
    d_v: int = 16  # d in the text: the width of the values V1, V2
    weights: tuple[float, ...] = (0.5, 0.7, 0.9, 1.0)  # first weight a of the single head
    two_head_weights: tuple[float, ...] = (1.0, 0.88)  # heads (a, 1-a) and (1-a, a)
    curve_points: int = 41  # points of a in [0, 1] for figure 10.3.1 (step 0.025)

    # N = 10000 is cheap (a 10000 x 32 least-squares problem): keep the text's data
    QUICK: ClassVar[dict[str, Any]] = {"curve_points": 11}


@dataclass
class Result:
    config: dict
    one_head: list[dict] = field(default_factory=list)  # {"a", "b", "error"}
    two_heads: list[dict] = field(default_factory=list)  # {"a", "b", "error"}
    theory: float = THEORY
    curve: dict = field(default_factory=dict)  # {"a": [...], "one_head": [...], "two_heads": [...]}
    solver: str = "torch.linalg.lstsq (driver gelsd)"

    def measured(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"d2l-copy-both-one-head.{row['a']:.1f}": row["error"] for row in self.one_head}
        out["d2l-copy-both-one-head.theory"] = self.theory
        out.update({f"d2l-copy-both-two-heads.{row['a']:.2f}": row["error"] for row in self.two_heads})
        if self.curve:
            out["d2l-fig-10.3.1.shape"] = curve_verdict(self.curve)
        return out


def curve_verdict(curve: dict, flat_tol: float = 0.01, tiny: float = 1e-4, near: float = 0.05) -> bool:
    """The figure shows what the text says: one head flat at sqrt(1/2); two heads tiny
    except within ``near`` of a = 0.5, where the two mixtures coincide."""
    flat = all(abs(e - THEORY) <= flat_tol for e in curve["one_head"])
    recovered = all(e < tiny for a, e in zip(curve["a"], curve["two_heads"]) if abs(a - 0.5) > near)
    coincide = [e for a, e in zip(curve["a"], curve["two_heads"]) if abs(a - 0.5) < 1e-9]
    return flat and recovered and all(abs(e - THEORY) <= flat_tol for e in coincide)


def validate(config: Config) -> None:
    """The sizes and weights are in range (the options' types); the readout needs more samples than unknowns."""
    unknowns = 2 * config.d_v  # per output column of the widest readout (two heads: 2 d inputs)
    if config.samples <= unknowns:
        raise AttnError(
            f"--samples {config.samples} is fewer samples than unknowns: the two-head readout "
            f"fits {unknowns} unknowns per output (2 x --d-v {config.d_v}), so it needs "
            f"more than {unknowns} samples"
        )


ROW = {"a": float, "b": float, "error": float}  # one_head, two_heads
CURVE = {"a": list[float], "one_head": list[float], "two_heads": list[float], "driver": str}


def validate_result(result: Result, config: Config) -> None:
    """A cached Result's sizes follow from ``config`` (:mod:`attn_cli.store.typed`)."""
    from attn_cli.store.typed import check_fields, check_len

    for name, weights in (("one_head", config.weights), ("two_heads", config.two_head_weights)):
        check_len(getattr(result, name), len(weights), name)
        for i, row in enumerate(getattr(result, name)):
            check_fields(row, ROW, f"{name}[{i}]")
    check_fields(result.curve, CURVE, "curve")
    for name in ("a", "one_head", "two_heads"):
        check_len(result.curve[name], config.curve_points if config.curve_points > 1 else 1, f"curve.{name}")


def estimate_bytes(config: Config) -> int:
    """V1, V2, target (2d), M2 (2d), a lstsq copy and solution: about 12 d floats per sample."""
    return 4 * config.samples * config.d_v * 12


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.measure import readout_error  # gelsd: the same bits on every call
    from attn_cli.core.memory import guard

    n, d = config.samples, config.d_v
    guard(estimate_bytes(config), f"copy-both with --samples {n} --d-v {d}", config.device)

    threads = torch.get_num_threads()
    if config.device == "cpu":
        # each solve is a small (10000 x 32) problem: threads only add contention; the numbers
        # do not depend on them
        torch.set_num_threads(1)
    try:
        torch.manual_seed(config.seed)
        V1, V2 = (torch.randn(n, d).to(config.device) for _ in range(2))  # (N, d) each, in the text's order
        target = torch.cat([V1, V2], dim=1)  # (N, 2d)

        def one(a: float) -> float:
            return readout_error(a * V1 + (1 - a) * V2, target)  # M: (N, d)

        def two(a: float) -> float:
            M2 = torch.cat([a * V1 + (1 - a) * V2, (1 - a) * V1 + a * V2], dim=1)  # (N, 2d)
            return readout_error(M2, target)

        grid = [i / (config.curve_points - 1) for i in range(config.curve_points)] if config.curve_points > 1 else [0.5]
        curve = {"a": grid, "one_head": [one(a) for a in grid], "two_heads": [two(a) for a in grid], "driver": "gelsd"}
        return Result(
            config=asdict(config),
            one_head=[{"a": a, "b": 1 - a, "error": one(a)} for a in config.weights],
            two_heads=[{"a": a, "b": 1 - a, "error": two(a)} for a in config.two_head_weights],
            curve=curve,
            solver="torch.linalg.lstsq (driver gelsd)" if config.device == "cpu" else "torch.linalg.pinv",
        )
    finally:
        torch.set_num_threads(threads)
