"""The copy task's Result: every run's numbers, aggregated per (model, length) over the seeds, and
the values its checks judge (:meth:`Result.measured`); the published ones live in published/."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from attn_cli.core.copy_spec import RunOutcome
from attn_cli.experiments.copy_task.config import Config, recorded
from attn_cli.published.copy_task import CHECK_IDS, MAP_RULE_ID, METRICS, MapSample, check_id
from attn_cli.published.seed_rule import SeedSample

if TYPE_CHECKING:
    from attn_cli.published.compare import Outcome


@dataclass
class Result:
    config: dict  # config.recorded(config): the Config without its local cache path
    rows: list[dict] = field(default_factory=list)  # per run: model, length, seed, engine, accuracies, diagonal
    cells: list[dict] = field(default_factory=list)  # per (model, length): mean, std, min, max per metric
    maps: list[dict] = field(default_factory=list)  # attention, per length (first seed): src, weights, diagonal
    runs: list[dict] = field(default_factory=list)  # per run: seconds, loss, engine, isa, backend, kernel_isa, cached
    seconds: float = 0.0  # wall time of run()
    notes: list[str] = field(default_factory=list)  # cache repairs and other remarks for stderr
    TIMING: ClassVar[tuple[str, ...]] = ("seconds", "runs.*.seconds", "runs.*.cpu_seconds")  # JSON: under "timing"

    def cell(self, model: str, length: int) -> dict | None:
        return next((c for c in self.cells if c["model"] == model and c["length"] == length), None)

    def cached_runs(self) -> tuple[int, int]:
        """(training runs taken from the cache, training runs)."""
        return sum(bool(r["cached"]) for r in self.runs), len(self.runs)

    def cache_line(self) -> str:
        """How many training runs came from the cache, e.g. "8 training runs: 8 from cache"."""
        cached, n = self.cached_runs()
        return f"{n} training run{'s' if n != 1 else ''}: {cached} from cache, {n - cached} computed"

    def published_beside(self, outcomes: Mapping[str, Outcome]) -> dict[str, Any]:
        """The JSON's cells with the text's values beside (:func:`attn_cli.render.files.result_json`):
        each metric's ``published`` and ``status`` from ``outcomes`` (None where the text prints none)."""
        cells = copy.deepcopy(self.cells)
        for c in cells:
            for metric in METRICS:
                found = outcomes.get(check_id(c["model"], c["length"], metric))
                c[metric]["published"] = None if found is None else found.published
                c[metric]["status"] = None if found is None else found.status
        return {"cells": cells}

    def measured(self) -> dict[str, Any]:
        """Check ID -> regenerated value: per published cell a SeedSample (the first seed's value,
        and every seed's, judged by the seed rule); for the map, a MapSample of every attention run."""
        out: dict[str, Any] = {}
        for c in self.cells:
            rows = [r for r in self.rows if r["model"] == c["model"] and r["length"] == c["length"]]
            for metric in METRICS:
                cid = check_id(c["model"], c["length"], metric)
                if cid in CHECK_IDS:
                    values, seeds, engines = ([r[k] for r in rows] for k in (metric, "seed", "engine"))
                    out[cid] = SeedSample(value=values[0], values=values, seeds=seeds, engines=engines)
        att = [r for r in self.rows if r["model"] == "attention"]
        if att:
            out[MAP_RULE_ID] = MapSample(
                lengths=[r["length"] for r in att],
                seeds=[r["seed"] for r in att],
                diagonal=[r["diagonal"] for r in att],
                free_running=[r["free_running"] for r in att],
            )
        return out


def diagonal_fraction(weights: list[list[float]]) -> float:
    """Fraction of decoder steps t whose readout attention peaks at input position t (one sequence)."""
    if not weights:
        return float("nan")
    hits = sum(max(range(len(row)), key=row.__getitem__) == t for t, row in enumerate(weights))
    return hits / len(weights)


def _stats(values: list[float]) -> dict:
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "std": std, "min": min(values), "max": max(values)}


def _aggregate(config: Config, outcomes: list[RunOutcome]) -> tuple[list[dict], list[dict]]:
    cells, maps = [], []
    for model in config.model_list:
        for length in config.lengths:
            group = [o for o in outcomes if o.spec.model == model and o.spec.length == length]
            cell: dict = {"model": model, "length": length, "n": len(group), "seeds": [o.spec.seed for o in group]}
            for metric in METRICS:
                cell[metric] = _stats([getattr(o, metric) for o in group])
            cells.append(cell)
            first = group[0]
            if first.example_weights:
                maps.append(
                    {
                        "model": model,
                        "length": length,
                        "seed": first.spec.seed,
                        "src": list(first.example_src),
                        "weights": first.example_weights,
                        "free_running": first.free_running,
                        "diagonal": diagonal_fraction(first.example_weights),
                        "diagonal_all": _stats([o.diagonal for o in group if o.diagonal is not None])["mean"],
                    }
                )
    return cells, maps


# a row's and a run's fields after the run's model, length and seed (RunOutcome's names)
ROW_FIELDS = ("engine", "teacher_forced", "free_running", "exact", "diagonal")
RUN_FIELDS = ("seconds", "cpu_seconds", "final_loss", "engine", "isa", "backend", "kernel_isa")


def assemble(
    config: Config,
    outcomes: list[RunOutcome],
    cached: list[bool] | None = None,
    seconds: float = 0.0,
    notes: list[str] | None = None,
) -> Result:
    """The Result of ``config`` from its runs' outcomes (in plan order)."""
    cached = cached or [False] * len(outcomes)
    which = [{"model": o.spec.model, "length": o.spec.length, "seed": o.spec.seed} for o in outcomes]
    rows = [{**w, **{k: getattr(o, k) for k in ROW_FIELDS}} for w, o in zip(which, outcomes)]
    runs = [
        {**w, **{k: getattr(o, k) for k in RUN_FIELDS}, "cached": c, **({"ran_on": o.ran_on} if o.ran_on else {})}
        for w, o, c in zip(which, outcomes, cached)
    ]
    cells, maps = _aggregate(config, outcomes)
    return Result(
        config=recorded(config), rows=rows, cells=cells, maps=maps, runs=runs, seconds=seconds, notes=list(notes or [])
    )
