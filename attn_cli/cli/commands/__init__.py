"""Click commands, one module per family; each module exposes ``COMMANDS``, and
:mod:`attn_cli.cli` names the modules.  A run command parses its options and returns a
:class:`~attn_cli.cli.commands.execute.Job`; heavy imports (torch, matplotlib, experiments)
stay inside the command functions, so ``attn --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from attn_cli.cli.types import AliasedOption, IntRange


def option(*decls: str, **attrs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``click.option`` for a valued option as the commands declare theirs: a positive integer
    unless ``type`` says otherwise, its default shown when it has one, and old names kept hidden
    through ``aliases`` (an :class:`~attn_cli.cli.types.AliasedOption` unless ``cls`` is given)."""
    attrs.setdefault("type", IntRange(min=1))
    if attrs.get("default") is not None:
        attrs.setdefault("show_default", True)
    if "aliases" in attrs:
        attrs.setdefault("cls", AliasedOption)
    return click.option(*decls, **attrs)
