"""Helpers shared by experiment modules (this module defines no ARTIFACTS)."""

from __future__ import annotations

import dataclasses
from typing import Iterable


def at_defaults(config: dict, config_cls: type, fields: Iterable[str]) -> bool:
    """True when ``config`` (a ``dataclasses.asdict`` dict) has ``config_cls``'s default for
    every one of ``fields``: the settings the texts' published values depend on."""
    default = dataclasses.asdict(config_cls())
    return all(config[k] == default[k] for k in fields)
