"""The texts' published values: one package, one module per family of checks.

Every module of this package other than ``types``, ``catalogue``, ``settings`` and
``compare`` is a family of checks (one per experiment family) and defines ``CHECKS:
tuple[Check, ...]``; :func:`all_checks` collects them all, keyed by check ID.  A family may
also declare its catalogue entries (``CATALOGUE``) and the text's settings its values hold at
(``TEXT_SETTINGS``), so that a new experiment's published side is that one module.  The catalogue
of tables and figures is :mod:`attn_cli.published.catalogue`; the texts' settings (is a
run at them?) :mod:`attn_cli.published.settings`; the one comparison of regenerated values
with published ones, whose outcomes every table and report prints,
:func:`attn_cli.published.compare.compare`.
"""

from __future__ import annotations

import importlib

from attn_cli.published.catalogue import ARTIFACTS, BY_ID, families
from attn_cli.published.types import Artifact, Check


def all_checks() -> dict[str, Check]:
    checks: dict[str, Check] = {}
    for family in families():
        module = importlib.import_module(f"{__name__}.{family}")
        for check in module.CHECKS:
            if check.id in checks:
                raise ValueError(f"duplicate check id {check.id}")
            if check.artifact not in BY_ID:
                raise ValueError(f"check {check.id} names unknown artifact {check.artifact}")
            checks[check.id] = check
    return checks


__all__ = ["ARTIFACTS", "BY_ID", "Artifact", "Check", "all_checks"]
