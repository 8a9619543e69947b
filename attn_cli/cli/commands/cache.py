"""``attn cache`` (show, clear), and :func:`cache_root`: how every command that caches finds its folder."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import TYPE_CHECKING

import click

from attn_cli.cli.options import CACHE_DIR, Common, JudgedCommand
from attn_cli.units import human_bytes

if TYPE_CHECKING:
    from pathlib import Path

    from attn_cli.store.cache import Cache


def cache_root(common: Common) -> str | None:
    """The per-user cache folder, made and checked now; None (warned once) when unusable: the run goes on without it."""
    from attn_cli.store import cache, private

    root = None
    try:
        root = private.user_cache_root(common.cache_dir)
        cache.Cache.open(root).close()
    except (cache.Unavailable, RuntimeError, KeyError) as exc:  # Path.home(): RuntimeError, KeyError
        source = "" if common.cache_dir is not None or not os.environ.get("ATTN_CACHE_DIR") else ", from ATTN_CACHE_DIR"
        message = f"warning: the cache cannot be used ({exc}{source}); running without cache"
        if root is None:
            click.echo(message, err=True)
        else:  # one line for this folder, whatever else would keep files there (the C kernel)
            private.warn_unusable(root, f"{message}, nothing is kept in {root}")
        return None
    return str(root)


@click.command(cls=JudgedCommand, name="cache")
@click.argument("action", type=click.Choice(["show", "clear"]), default="show")
@CACHE_DIR
@click.option("--dry-run", is_flag=True, help="With clear: list what would be removed, remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout instead of the text.")
def cache_(action: str, cache_dir: Path | None, dry_run: bool, as_json: bool) -> None:
    """The per-user cache: its location, entries and size; `attn cache clear` empties it.

    The cache keeps the copy task's finished training runs and the Results of the slower
    experiments, keyed by everything that decides their numbers (configuration, code, numeric
    mode, versions), and is shared by every --out: a run cached by one command is reused by
    the next. Its folder is --cache-dir, else $ATTN_CACHE_DIR, else
    $XDG_CACHE_HOME/attn, else ~/.cache/attn. attn makes it itself (mode 0700) and tags it
    with a CACHEDIR.TAG naming attn (backup tools skip it); a folder that is not private, or
    not attn's, is left as it is, and commands warn once and run without cache. Each entry
    carries an HMAC under a random key kept there (hmac.key, 0600): an entry edited or copied
    from elsewhere is recomputed.

    `attn cache` (show) prints the location, whether it is usable, and the entries and bytes
    per experiment. `attn cache clear` removes, from a folder tagged as attn's only, the
    entries whose HMAC proves them attn's, the folders that held them, and the key; nothing
    else. It refuses /, the home folder and mount points by name. --dry-run lists what would
    go; --json prints the same as one object.

    \b
    Examples:
        attn cache
        attn cache clear --dry-run
        attn cache clear
        attn cache --cache-dir /tmp/attn-cache --json
    """
    from attn_cli.store import cache, private

    if dry_run and action != "clear":
        raise click.UsageError("--dry-run goes with attn cache clear")
    root = private.user_cache_root(cache_dir)
    info, store = _state(root)
    with store or contextlib.nullcontext():
        if action == "show":
            info = _counted(info, store.summary() if store else {}, "experiments")
        elif (special := cache.special_folder(root)) or (store is None and info["reason"] != "not created yet"):
            raise click.ClickException(
                f"{special or info['reason']}: nothing removed (attn clears only its own cache folder)"
            )
        else:
            info["dry_run"] = dry_run
            cleared = store.clear(dry_run=dry_run) if store else cache.Cleared()
            info = {**_counted(info, cleared.removed, "removed"), "key": cleared.key, "kept": cleared.kept}
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        click.echo("\n".join(_clear_lines(info) if action == "clear" else _show_lines(info)))


def _state(root: Path) -> tuple[dict, Cache | None]:
    """What ``root`` is (through symlinks), and the cache opened there without creating anything (None: none)."""
    from attn_cli.store import cache

    try:
        mode = stat.S_IFMT(os.stat(root).st_mode)
        kind = {stat.S_IFDIR: "folder", stat.S_IFREG: "a file"}.get(mode, "a device or other special file")
    except FileNotFoundError:
        kind = "missing" if not os.path.islink(root) else "a dangling symlink"
    except OSError as exc:
        kind = exc.strerror or "unreadable"
    reason = {"folder": None, "missing": "not created yet"}.get(kind, f"{root} is not a folder ({kind})")
    info: dict = {"location": str(root), "exists": kind == "folder", "private": False, "reason": reason}
    store = None
    if kind == "folder":
        try:
            store = cache.Cache.open(root, create=False)
            info["private"] = True
        except cache.Unavailable as exc:
            info["reason"] = str(exc)
    return info, store


def _counted(info: dict, per: dict, key: str) -> dict:
    info[key] = {name: {"entries": n, "bytes": b} for name, (n, b) in sorted(per.items())}
    info["entries"] = sum(n for n, _ in per.values())
    info["bytes"] = sum(b for _, b in per.values())
    return info


def _count(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _show_lines(info: dict) -> list[str]:
    state = "private" if info["private"] else f"not usable: {info['reason']}"
    rows = {**info["experiments"], "total": info}
    width = max(len(name) for name in rows)
    lines = [f"  {name:<{width}}  {_count(r['entries']):>12}  {human_bytes(r['bytes']):>9}" for name, r in rows.items()]
    return [f"cache: {info['location']} ({state})", *lines]


def _clear_lines(info: dict) -> list[str]:
    if not info["exists"]:
        return [f"nothing to remove: {info['location']} does not exist"]
    verb = "would remove" if info["dry_run"] else "removed"
    key = " and the key" if info["key"] else ""
    lines = [
        f"{verb} {_count(info['entries'])} ({human_bytes(info['bytes'])}){key} from {info['location']}",
        *(f"  {name}: {_count(row['entries'])}, {human_bytes(row['bytes'])}" for name, row in info["removed"].items()),
    ]
    if kept := info["kept"]:
        more = " ..." if len(kept) > 5 else ""
        lines.append(f"kept {len(kept)} file(s) whose HMAC does not prove them attn's: {', '.join(kept[:5])}{more}")
    return lines


COMMANDS = [cache_]
