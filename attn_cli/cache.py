"""Cached results, keyed by everything that determines them.

A cache entry is a file under ``<root>/.cache/<name>/<sha256 of key>.<suffix>``; the key holds
the experiment's configuration, a digest of the source files that compute it
(:func:`code_digest`), the numeric mode, and the versions of attn and torch; the entry holds
the key again and a digest of its payload, so an edited or damaged file is refused, not
trusted.  Used by the runner for every experiment that declares ``CACHED = True``, and by the
copy task for its training runs.  Writes are atomic (:mod:`attn_cli.io`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
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


def load_result(path: Path, key: dict) -> Any | None:
    """A Result stored by :func:`store_result` for ``key``; None when there is none or it
    cannot be trusted (a stale or damaged entry is recomputed, never an error)."""
    try:
        meta = load_json(path.with_suffix(".json"), key)
        if meta is None or not path.exists():
            return None
        data = path.read_bytes()
        if digest(data) != meta["pickle"]:
            return None
        return pickle.loads(data)  # written by this package under the user's own --out
    except (OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError, AttributeError, ImportError):
        return None


def store_result(path: Path, key: dict, result: Any) -> None:
    """Store a Result (pickled, exact floats and types) beside a JSON entry naming its digest."""
    try:
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):  # a class defined in a function: not kept
        return
    io.write_bytes(path, data)
    store_json(path.with_suffix(".json"), key, {"pickle": digest(data)})
