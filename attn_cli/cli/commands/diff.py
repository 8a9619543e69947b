"""``attn diff``: compare two runs' check records."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from attn_cli.records import Diff


@click.command(name="diff")
@click.argument("before", type=click.Path(exists=True))
@click.argument("after", type=click.Path(exists=True))
@click.option("--all", "everything", is_flag=True, help="List the unchanged checks too.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def diff(before: str, after: str, everything: bool, as_json: bool) -> None:
    """Compare two runs: which values moved and which verdicts changed.

    BEFORE and AFTER are each a verify.json (attn verify --out), a report folder
    (attn all --out, attn verify --out) or a manifest.json; an earlier attn's bare list of
    records is read too. Prints the header fields that differ (torch, numerics, machine:
    usually why values moved), then per changed check: id, before, after, delta, both
    verdicts and both margins; then new and removed checks and a summary line
    "N values moved, M verdicts changed (K now failing)".

    Exits 1 when a check that passed now fails, otherwise 0.

    \b
    Examples:
        attn verify --out before/ && attn verify --out after/ && attn diff before/ after/
        attn diff old/verify.json new/verify.json --json
        attn verify --diff before/verify.json
    """
    from attn_cli import records

    try:
        d = records.diff(records.load(before), records.load(after))
    except records.Unreadable as exc:
        raise click.BadParameter(str(exc)) from None
    show(d, everything, as_json)
    sys.exit(d.exit_code)


def show(d: Diff, everything: bool, as_json: bool, stderr: bool = False) -> None:
    """The comparison as JSON or as tables, on stdout (``stderr``: there, as a note beside
    another command's JSON)."""
    from attn_cli.render import console
    from attn_cli.render.diff import blocks
    from attn_cli.render.table import to_rich

    if as_json:
        print(json.dumps(d.as_json(everything), indent=2, default=str))
        return
    for b in blocks(d, everything):
        (console.stderr if stderr else console.stdout).print(to_rich(b))


COMMANDS = [diff]
