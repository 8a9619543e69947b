"""``attn cache``: where the per-user cache is and what it holds; ``attn cache clear`` empties it.

Also :func:`cache_root`, how every command that caches finds its cache folder: once per
command, with one warning (and a run without cache) when the folder cannot be used.
"""

from __future__ import annotations

import json
import os

import click

from attn_cli.options import CACHE_DIR, Common, JudgedCommand


def cache_root(common: Common) -> str | None:
    """The per-user cache folder for this command (``--cache-dir``, ``$ATTN_CACHE_DIR``,
    ``$XDG_CACHE_HOME/attn``, ``~/.cache/attn``), made and checked now; None, after one
    warning on stderr, when it is not private or cannot be written: the run goes on without it."""
    from attn_cli import cache, private

    root = None
    try:
        root = private.user_cache_root(common.cache_dir)
        with cache.Cache.open(root):
            pass
    except (cache.Unavailable, RuntimeError, KeyError) as exc:  # Path.home(): RuntimeError, KeyError
        source = "" if common.cache_dir is not None or not os.environ.get("ATTN_CACHE_DIR") else ", from ATTN_CACHE_DIR"
        message = (f"warning: the cache cannot be used ({exc}{source}); running without cache"
                   + (f", nothing is kept in {root}" if root is not None else ""))
        if root is None:
            click.echo(message, err=True)
        else:  # one line for this folder, whatever else would keep files there (the C kernel)
            private.warn_unusable(root, message)
        return None
    return str(root)


@click.command(cls=JudgedCommand, name="cache")
@click.argument("action", type=click.Choice(["show", "clear"]), default="show")
@CACHE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout instead of the text.")
def cache_(action: str, cache_dir, as_json: bool) -> None:
    """The per-user cache: its location, entries and size; `attn cache clear` empties it.

    The cache keeps the copy task's finished training runs and the Results of the slower
    experiments, keyed by everything that decides their numbers (configuration, code, numeric
    mode, versions), and is shared by every --out: a run cached by one command is reused by
    the next. Its folder is --cache-dir, else $ATTN_CACHE_DIR, else
    $XDG_CACHE_HOME/attn, else ~/.cache/attn; it must be private (ours, mode 0700, no parent
    writable by others), else commands warn once and run without cache. Each entry carries an
    HMAC under a random key kept there (hmac.key, 0600): an entry edited or copied from elsewhere
    is recomputed.

    `attn cache` (show) prints the location, whether it is private, and the entries and bytes
    per experiment. `attn cache clear` removes the entries and the key, nothing else, asks
    nothing, and prints what it removed. --json prints the same as one object.

    \b
    Examples:
        attn cache
        attn cache clear
        attn cache --cache-dir /tmp/attn-cache --json
    """
    from attn_cli import cache, private
    from attn_cli.units import human_bytes

    root = private.user_cache_root(cache_dir)
    info: dict = {"location": str(root), "exists": root.is_dir(), "private": False, "reason": None}
    store = None
    if info["exists"] or action == "show":
        try:
            store = cache.Cache.open(root, create=False)
            info["private"] = True
        except cache.Unavailable as exc:
            info["reason"] = str(exc) if info["exists"] else "not created yet"
    if store is None:
        if action == "clear" and info["exists"]:
            raise click.ClickException(f"{info['reason']}: nothing removed")
        per = {}
    else:
        with store:
            per = store.clear() if action == "clear" else store.summary()
    info["experiments"] = {name: {"entries": n, "bytes": b} for name, (n, b) in sorted(per.items())}
    info["entries"] = sum(n for n, _ in per.values())
    info["bytes"] = sum(b for _, b in per.values())
    if action == "clear":
        info["removed"] = info.pop("experiments")
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return

    def count(n: int) -> str:
        return f"{n} entr{'y' if n == 1 else 'ies'}"

    state = "private" if info["private"] else f"not usable: {info['reason']}"
    if action == "clear":
        click.echo(f"removed {count(info['entries'])} ({human_bytes(info['bytes'])}) and the key from {root}"
                   if store is not None else f"nothing to remove: {root} does not exist")
        rows = info["removed"]
    else:
        click.echo(f"cache: {root} ({state})")
        rows = info["experiments"]
        width = max([len(name) for name in rows] + [5])
        for name, row in rows.items():
            click.echo(f"  {name:<{width}}  {count(row['entries']):>12}  {human_bytes(row['bytes']):>9}")
        click.echo(f"  {'total':<{width}}  {count(info['entries']):>12}  {human_bytes(info['bytes']):>9}")
        return
    for name, row in rows.items():
        click.echo(f"  {name}: {count(row['entries'])}, {human_bytes(row['bytes'])}")


COMMANDS = [cache_]
