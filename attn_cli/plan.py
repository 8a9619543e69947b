"""What ``attn verify`` and ``attn all`` run: one ``(experiment, config, unjudged)`` per
experiment, built here and nowhere else, so that both commands judge every check the same
way and request the same cached runs (the copy task's cache keys come from its Config; the per-user cache
itself is the pipeline's, never part of a Config or a key).

- :func:`judged`: the configuration every check is judged at: each experiment's defaults
  (the texts' settings) with ``--seed`` and ``--device``, and where the experiment has one
  its ``verify_config`` (the copy task: ``--seed`` with the exact engine and the next seeds
  with the fast one, judged by :mod:`attn_cli.published.seed_rule`; ``seeds`` of them in all,
  default :data:`~attn_cli.published.seed_rule.MIN_SEEDS`).  ``quick`` (``attn
  verify --quick``) runs the slow experiments at ``Config.quick()`` instead, not judged.
- :func:`smoke`: ``attn all --quick``, every experiment at ``Config.quick()`` (on its fast
  engine where it has one): a smoke run that judges nothing, nothing trained included
  (:data:`QUICK_NOTE`).

``cluster`` (``scheduler``, ``scheduler_from``): the Dask scheduler the copy task trains on, if any.

``unjudged`` is why an experiment's values are shown but not judged (None: judged).
"""

from __future__ import annotations

from typing import Any, Iterable

QUICK = "quick"  # the ``unjudged`` reason of a --quick run: its checks are "skipped (quick)"
QUICK_NOTE = ("a smoke run at reduced sizes that judges nothing against the texts, nothing trained included; "
              "without --quick every check is judged as `attn verify` judges it")

Plan = list[tuple[Any, Any, str | None]]  # (Experiment, its Config, why it is not judged or None)


def judged(experiments: Iterable, *, seed: int, device: str, use_cache: bool = True,
           quick: bool = False, seeds: int | None = None, **cluster) -> Plan:
    """Each experiment at the configuration its checks are judged at (see the module);
    ``seeds``: how many seeds judge a trained value (None: the seed rule's default)."""
    from attn_cli.published.seed_rule import MAX_SEEDS

    if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
        raise ValueError(f"the seed rule takes 1 to {MAX_SEEDS} seeds, not {seeds}")
    plan = []
    for exp in experiments:
        reduced = quick and exp.slow
        plan.append((exp, exp.config(seed=seed, device=device, quick=reduced, use_cache=use_cache,
                                     verify=not reduced, verify_seeds=seeds, **cluster), QUICK if reduced else None))
    return plan


def smoke(experiments: Iterable, *, seed: int, device: str, use_cache: bool = True, **cluster) -> Plan:
    """Each experiment at ``Config.quick()``, nothing judged (``attn all --quick``); one with a
    fast engine uses it (the quickest smoke run)."""
    return [(exp, exp.config(seed=seed, device=device, quick=True, use_cache=use_cache, engine="fast",
                        **cluster), QUICK) for exp in experiments]

