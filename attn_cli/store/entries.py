"""What a cache entry holds: its key (configuration, numeric record, attn and torch versions, a digest
of the code), and Results and pieces of work (:class:`Pieces`) read back as typed data, never code."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attn_cli.store.cache import RESULT_MAX_BYTES, Cache, Refused, cache_path
from attn_cli.store.typed import InvalidEntry, revive  # revive: JSON read back as a type, every value checked

# the sources that compute an experiment's values (not how they are drawn or printed)
RESULT_CODE_GLOBS = (
    "experiments/**/*.py",
    "core/**/*.py",
    "core/**/*.c",
    "core/**/*.h",
    "published/**/*.py",
    "store/cache.py",
)  # core/numerics.py among core/

_VERSION_LINE = re.compile(r"""^__version__\s*=\s*['"]([^'"\n]+)['"]""", re.MULTILINE)


@functools.cache
def torch_version() -> str:
    """``torch.__version__`` read as text from the ``version.py`` of the torch ``import torch``
    would load (a cached rerun never imports torch); else the distribution's metadata."""
    import importlib.util

    with contextlib.suppress(OSError, ImportError, ValueError, UnicodeDecodeError):
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.origin:
            found = _VERSION_LINE.search((Path(spec.origin).parent / "version.py").read_text(encoding="utf-8"))
            if found:
                return found.group(1)
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover
        import torch

        return torch.__version__


@functools.cache
def code_digest(globs: tuple[str, ...]) -> str:
    """SHA-256 over the package's source files matching ``globs``, names and bytes (once per process)."""
    root = Path(__file__).resolve().parent.parent  # the attn_cli package
    h = hashlib.sha256()
    for path in sorted({p for pattern in globs for p in root.glob(pattern) if p.is_file()}):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_key(fields: dict, globs: tuple[str, ...], numerics: dict) -> dict:
    """``fields`` (a configuration, a run) with what else decides its numbers: ``numerics``
    (:func:`attn_cli.core.numerics.key`), the versions of attn and torch, and the code."""
    from attn_cli import __version__

    key = {**fields, "numerics": numerics, "attn": __version__, "torch": torch_version(), "code": code_digest(globs)}
    return json.loads(json.dumps(key))  # as it reads back from the file (tuples become lists)


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
    """A Result stored for ``key``, rebuilt as ``result_type`` (no code runs: no pickle); None when
    there is none; :class:`Refused` (the reason) for one that cannot be trusted or read back."""
    payload = store.load(name, key, max_bytes)
    try:
        return None if payload is None else _revived(result_type, payload)
    except InvalidEntry as exc:
        raise Refused(str(exc)) from None


def store_result(store: Cache, name: str, key: dict, result: Any) -> bool:
    """Store a Result as JSON for ``key`` if it reads back as the same data (else False); Unavailable: unwritable."""
    try:
        data = dataclasses.asdict(result)
        text = json.dumps(data, sort_keys=True)
        payload = json.loads(json.dumps(data))  # in the Result's own key order: the same JSON cold and warm
        if json.dumps(dataclasses.asdict(revive(type(result), payload)), sort_keys=True) != text:
            return False
    except (TypeError, KeyError, ValueError):
        return False
    store.store(name, key, payload)
    return True


class Pieces:
    """An experiment's pieces of work (the copy task's runs), each its own entry stored when it finishes,
    handed to ``run(..., store=)`` where ``CACHES_PIECES``; ``reuse`` False: recompute, overwrite."""

    def __init__(self, store: Cache, name: str, reuse: bool = True):
        self.cache, self.name, self.reuse = store, name, reuse

    def path(self, key: dict) -> Path:
        """``key``'s entry relative to the cache folder, for notes: ``copy_task/<sha256>.json``."""
        return cache_path("", self.name, key)

    def load(
        self, key: dict, max_bytes: int, piece_type: type, check: Callable[[Any, dict], None] | None = None
    ) -> Any | None:
        """The piece stored for ``key`` as ``piece_type``, passed through ``check(piece, key)``; None
        when there is none or not ``reuse``; Refused or InvalidEntry (the reason) when untrusted."""
        if not self.reuse:
            return None
        payload = self.cache.load(self.name, key, max_bytes)
        if payload is None:
            return None
        return _revived(piece_type, payload, None if check is None else lambda piece: check(piece, key))

    def store(self, key: dict, piece: Any) -> None:
        """Store a finished piece (a dataclass of plain values); Unavailable when it cannot be written."""
        self.cache.store(self.name, key, dataclasses.asdict(piece))
