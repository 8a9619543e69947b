"""Cached results, keyed by everything that determines them.

A cache entry is a file under ``<root>/.cache/<name>/<sha256 of key>.<suffix>``; the key holds
the experiment's configuration, a digest of the source files that compute it
(:func:`code_digest`), the numeric mode, and the versions of attn and torch; the entry holds
the key again and a digest of its payload, so an edited or damaged file is refused, not
trusted.  Entries are JSON only, read back into typed dataclasses (:func:`revive`): loading
one never runs code, whoever wrote it.  Used by the runner for every experiment that declares ``CACHED = True``, and by the
copy task for its training runs.  Writes are atomic (:mod:`attn_cli.io`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

from attn_cli import io

CACHE_DIR = ".cache"
# the sources that compute an experiment's values (not how they are drawn or printed)
RESULT_CODE_GLOBS = ("experiments/**/*.py", "core/**/*.py", "core/**/*.c", "core/**/*.h",
                     "published/**/*.py", "numerics.py", "cache.py")

_CODE_DIGEST: dict[tuple, str] = {}


def torch_version() -> str:
    """torch's version without importing torch (a cached rerun never needs it)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover
        import torch

        return torch.__version__


def code_digest(globs: Iterable[str]) -> str:
    """SHA-256 over the package's source files matching ``globs``, names and bytes."""
    root = Path(__file__).resolve().parent  # the attn_cli package
    memo = (str(root), tuple(globs))
    if memo not in _CODE_DIGEST:
        files = sorted({p for pattern in memo[1] for p in root.glob(pattern) if p.is_file()})
        h = hashlib.sha256()
        for path in files:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        _CODE_DIGEST[memo] = h.hexdigest()
    return _CODE_DIGEST[memo]


def cache_key(fields: dict, globs: Iterable[str]) -> dict:
    """``fields`` (what the entry is: a configuration, a run) with what else decides its numbers."""
    from attn_cli import __version__, numerics

    key = {**fields, "numerics": numerics.key(), "attn": __version__, "torch": torch_version(),
           "code": code_digest(globs)}
    return json.loads(json.dumps(key))  # as it reads back from the file (tuples become lists)


def digest(data: Any) -> str:
    """SHA-256 of bytes, or of a JSON value (keys sorted)."""
    raw = data if isinstance(data, bytes) else json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()


def cache_path(root: str | os.PathLike, name: str, key: dict, suffix: str = ".json") -> Path:
    return Path(root) / CACHE_DIR / name / f"{digest(key)}{suffix}"


def load_json(path: Path, key: dict) -> Any | None:
    """The payload stored at ``path`` for ``key``; None when there is no file.

    Raises ValueError (with the reason) for a file that exists but cannot be trusted.
    """
    if not path.exists():
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    if not isinstance(obj, dict) or obj.get("key") != key:
        raise ValueError("its key does not match")
    if obj.get("digest") != digest(obj.get("payload")):
        raise ValueError("its payload does not match its digest (edited or damaged)")
    return obj["payload"]


def store_json(path: Path, key: dict, payload: Any) -> None:
    """Store a JSON payload for ``key`` (atomic)."""
    payload = json.loads(json.dumps(payload))  # exactly as it reads back
    io.write_text(path, json.dumps({"key": key, "payload": payload, "digest": digest(payload)}) + "\n")


def load_result(path: Path, key: dict, result_type: type) -> Any | None:
    """A Result stored by :func:`store_result` for ``key``, rebuilt as ``result_type``; None when
    there is none or it cannot be trusted (a stale or damaged entry is recomputed, never an
    error).  The entry is JSON read into typed dataclasses: loading it runs no code (no pickle)."""
    try:
        payload = load_json(path, key)
        return None if payload is None else revive(result_type, payload)
    except (ValueError, KeyError, TypeError):
        return None


def store_result(path: Path, key: dict, result: Any) -> bool:
    """Store a Result as JSON for ``key``; only one that reads back as the same data (a
    dataclass of plain values, as STYLE.md asks: a tuple may come back as a list), else
    nothing is stored and False is returned."""
    import dataclasses

    try:
        text = json.dumps(dataclasses.asdict(result), sort_keys=True)
        payload = json.loads(text)
        if json.dumps(dataclasses.asdict(revive(type(result), payload)), sort_keys=True) != text:
            return False
    except (TypeError, KeyError, ValueError):
        return False
    store_json(path, key, payload)
    return True


def revive(tp: Any, data: Any) -> Any:
    """JSON data (``dataclasses.asdict`` of a value, read back) as the type ``tp``: dataclasses,
    ``X | None``, lists, tuples and dicts of them, by the type hints; anything else as read."""
    import dataclasses
    import types
    import typing

    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, dict):
            raise TypeError(f"{tp.__name__}: expected an object")
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: revive(hints.get(f.name, Any), data[f.name])
                     for f in dataclasses.fields(tp) if f.init and f.name in data})
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        return revive(options[0], data) if len(options) == 1 else data
    if origin in (list, tuple) and isinstance(data, list):
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(revive(args[0], v) for v in data)
        if origin is tuple and args:
            return tuple(revive(a, v) for a, v in zip(args, data))
        return origin(revive(args[0], v) for v in data) if args else origin(data)
    if origin is dict and isinstance(data, dict) and len(args) == 2:
        return {k: revive(args[1], v) for k, v in data.items()}
    return data
