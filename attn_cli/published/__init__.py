"""The registry of published values: one package, one module per family of checks.

Each family module (``w9``, ``copy_task``, ``d2l``) defines ``CHECKS: tuple[Check, ...]``;
:data:`CHECKS` collects them, keyed by check ID.  The catalogue of tables and figures is
:mod:`attn_cli.published.catalogue`.
"""

from __future__ import annotations

import importlib

from attn_cli.published.catalogue import ARTIFACTS, BY_ID
from attn_cli.published.types import Artifact, Check

FAMILIES = ("w9", "copy_task", "d2l")


def all_checks() -> dict[str, Check]:
    checks: dict[str, Check] = {}
    for family in FAMILIES:
        try:
            module = importlib.import_module(f"{__name__}.{family}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{family}":
                continue  # family not written yet
            raise
        for check in module.CHECKS:
            if check.id in checks:
                raise ValueError(f"duplicate check id {check.id}")
            if check.artifact not in BY_ID:
                raise ValueError(f"check {check.id} names unknown artifact {check.artifact}")
            checks[check.id] = check
    return checks


def published(check_id: str):
    """The published value of one check (for printing beside a regenerated one)."""
    return all_checks()[check_id].published


__all__ = ["ARTIFACTS", "BY_ID", "Artifact", "Check", "all_checks", "published"]
