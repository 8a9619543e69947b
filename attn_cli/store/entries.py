"""Results (:func:`load_result`, :func:`store_result`) and pieces of work (:class:`Pieces`: the
copy task's training runs) in the cache, read back as typed data, never code (:func:`revive`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attn_cli.store.cache import RESULT_MAX_BYTES, Cache, Refused, cache_path
from attn_cli.store.typed import InvalidEntry, revive  # revive: JSON read back as a type, every value checked


def _revived(tp: type, payload: Any, check: Callable[[Any], None] | None = None) -> Any:
    """``payload`` as ``tp`` and passed through ``check``; InvalidEntry (the reason) otherwise."""
    try:
        value = revive(tp, payload)
        if check is not None:
            check(value)
        return value
    except InvalidEntry:  # the reason is its path: "rows[3].free_running: expected a number, got str"
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidEntry(f"{type(exc).__name__}: {exc}") from None


def load_result(store: Cache, name: str, key: dict, result_type: type, max_bytes: int = RESULT_MAX_BYTES) -> Any | None:
    """A Result stored by :func:`store_result` for ``key``, rebuilt as ``result_type``; None when
    there is none.  Raises :class:`Refused` (the reason) for an entry that cannot be trusted or
    does not read back: the caller recomputes it with a note.  Loading runs no code (no pickle)."""
    payload = store.load(name, key, max_bytes)
    try:
        return None if payload is None else _revived(result_type, payload)
    except InvalidEntry as exc:
        raise Refused(str(exc)) from None


def store_result(store: Cache, name: str, key: dict, result: Any) -> bool:
    """Store a Result as JSON for ``key``, only one that reads back as the same data (a tuple may
    come back as a list); else store nothing and return False.  Unavailable when the cache
    cannot be written."""
    try:
        text = json.dumps(dataclasses.asdict(result), sort_keys=True)
        payload = json.loads(text)
        if json.dumps(dataclasses.asdict(revive(type(result), payload)), sort_keys=True) != text:
            return False
    except (TypeError, KeyError, ValueError):
        return False
    store.store(name, key, payload)
    return True


class Pieces:
    """An experiment's pieces of work in the opened cache, each its own entry in the
    experiment's group (the copy task: one per training run, stored the moment it finishes,
    so an interrupted or distributed sweep keeps what it finished).  The pipeline hands this to
    ``run(config, progress, store=...)`` of an experiment with ``CACHES_PIECES = True``.
    ``reuse``: False recomputes every piece and overwrites its entry (``--no-cache``)."""

    def __init__(self, store: Cache, name: str, reuse: bool = True):
        self.cache, self.name, self.reuse = store, name, reuse

    def path(self, key: dict) -> Path:
        """``key``'s entry relative to the cache folder, for notes: ``copy_task/<sha256>.json``."""
        return cache_path("", self.name, key)

    def load(
        self, key: dict, max_bytes: int, piece_type: type, check: Callable[[Any, dict], None] | None = None
    ) -> Any | None:
        """The piece stored for ``key``, rebuilt as ``piece_type`` and passed through
        ``check(piece, key)`` (shapes, ranges); None when there is none, or with ``reuse`` False.
        Raises :class:`Refused` or :class:`InvalidEntry` (the reason) for one that cannot be trusted."""
        if not self.reuse:
            return None
        payload = self.cache.load(self.name, key, max_bytes)
        if payload is None:
            return None
        return _revived(piece_type, payload, None if check is None else lambda piece: check(piece, key))

    def store(self, key: dict, piece: Any) -> None:
        """Store a finished piece (a dataclass of plain values; atomic, signed); Unavailable when
        the cache cannot be written."""
        self.cache.store(self.name, key, dataclasses.asdict(piece))
