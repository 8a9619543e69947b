"""The texts' published values: one package, one module per family of checks (design notes:
``docs/design.md``, section ``attn_cli.published``)."""

from __future__ import annotations

from attn_cli.published.types import Check


def all_checks() -> dict[str, Check]:
    from attn_cli.published.catalogue import BY_ID, family_modules  # when asked for, not by `attn --help`

    checks: dict[str, Check] = {}
    for module in family_modules():
        for check in module.CHECKS:
            if check.id in checks:
                raise ValueError(f"duplicate check id {check.id}")
            if check.artifact not in BY_ID:
                raise ValueError(f"check {check.id} names unknown artifact {check.artifact}")
            checks[check.id] = check
    return checks


__all__ = ["all_checks"]
