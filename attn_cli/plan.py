"""What ``attn verify`` and ``attn all`` run: one ``(experiment, config, unjudged)`` per experiment, built
here only, so both commands judge every check the same way and request the same cached runs (design
notes: ``docs/design.md``, section ``attn_cli.plan``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attn_cli.experiment_registry import Experiment

QUICK = "quick"  # the ``unjudged`` reason of a --quick run: its checks are "skipped (quick)"
QUICK_NOTE = (
    "a smoke run at reduced sizes that judges nothing against the texts, nothing trained included; "
    "without --quick every check is judged as `attn verify` judges it"
)

Plan = list[tuple[Any, Any, str | None]]  # (Experiment, its Config, why it is not judged or None)


def judged(
    experiments: Iterable[Experiment],
    *,
    seed: int,
    device: str,
    use_cache: bool = True,
    quick: bool = False,
    seeds: int | None = None,
    **cluster: Any,
) -> Plan:
    """Each experiment at the configuration its checks are judged at; ``seeds``: how many seeds judge
    a trained value (None: the seed rule's default)."""
    from attn_cli.published.seed_rule import MAX_SEEDS

    if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
        raise ValueError(f"the seed rule takes 1 to {MAX_SEEDS} seeds, not {seeds}")
    plan: Plan = []
    for exp in experiments:
        reduced = quick and exp.slow
        config = exp.config(
            seed=seed,
            device=device,
            quick=reduced,
            use_cache=use_cache,
            verify=not reduced,
            verify_seeds=seeds,
            **cluster,
        )
        plan.append((exp, config, QUICK if reduced else None))
    return plan


def smoke(experiments: Iterable[Experiment], *, seed: int, device: str, use_cache: bool = True, **cluster: Any) -> Plan:
    """Each experiment at ``Config.quick()`` with its fast engine if any, nothing judged (``attn all --quick``)."""
    return [
        (exp, exp.config(seed=seed, device=device, quick=True, use_cache=use_cache, engine="fast", **cluster), QUICK)
        for exp in experiments
    ]
