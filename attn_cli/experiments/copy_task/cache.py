"""The copy task's cache of finished runs: ``<cache_root>/.cache/copy_task/<sha256>.json``.

An entry is keyed by everything that determines a run (:func:`cache_key`): the RunSpec,
engine, device, the numeric mode and CPU kernels (:mod:`attn_cli.numerics`), the package
and torch versions and a digest of the source files that compute a run (:func:`code_digest`
over :data:`CODE_GLOBS`).  Each entry stores a digest of its own payload; a corrupt,
truncated or edited entry is reported and recomputed, never trusted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from attn_cli.core.copy_spec import RunOutcome, RunSpec
from attn_cli.experiments.copy_task.config import METRICS

CACHE_SUBDIR = Path(".cache") / "copy_task"
CACHE_FORMAT = 2  # bump when the cached fields change
# the sources that compute a run (models, data, training loop, both engines, the kernel), relative
# to the package: a change to any of them is a cache miss
CODE_GLOBS = ("core/copy_*.py", "core/copy_*/**/*.py", "core/copy_*/**/*.c", "core/copy_*/**/*.h")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # attn_cli/, which CODE_GLOBS are relative to

_CODE_DIGEST: dict[str, str] = {}  # package root -> digest, computed once per process


def torch_version() -> str:
    """torch's version without importing torch (a cached rerun never needs it)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover
        import torch

        return torch.__version__


def code_digest() -> str:
    """SHA-256 over the source files that compute a run (:data:`CODE_GLOBS`), names and bytes."""
    root = PACKAGE_ROOT
    if str(root) not in _CODE_DIGEST:
        files = sorted({p for pattern in CODE_GLOBS for p in root.glob(pattern) if p.is_file()})
        h = hashlib.sha256()
        for path in files:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        _CODE_DIGEST[str(root)] = h.hexdigest()
    return _CODE_DIGEST[str(root)]


def cache_key(spec: RunSpec, engine: str, device: str) -> dict:
    """Everything that determines a run's numbers."""
    from attn_cli import __version__, numerics

    return {"format": CACHE_FORMAT, "spec": dataclasses.asdict(spec), "engine": engine, "device": device,
            "numerics": numerics.key(), "attn": __version__, "torch": torch_version(), "code": code_digest()}


def payload_digest(outcome: dict) -> str:
    return hashlib.sha256(json.dumps(outcome, sort_keys=True).encode()).hexdigest()


def cache_path(root: str | os.PathLike, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return Path(root) / CACHE_SUBDIR / f"{digest}.json"


def load_cached(path: Path, key: dict) -> RunOutcome | None:
    """The cached outcome at ``path`` if it is complete and was made for ``key``; else None.

    Raises ValueError (with the reason) for a file that exists but cannot be trusted.
    """
    if not path.exists():
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        if obj.get("key") != key:
            raise ValueError("its key does not match")
        o = obj["outcome"]
        if obj.get("digest") != payload_digest(o):
            raise ValueError("its payload does not match its digest (edited or damaged)")
        spec = RunSpec(**o["spec"])
        if dataclasses.asdict(spec) != key["spec"]:
            raise ValueError("its run does not match")
        floats = {name: float(o[name]) for name in (*METRICS, "seconds", "final_loss")}
        floats["diagonal"] = None if o["diagonal"] is None else float(o["diagonal"])
        if not all(0.0 <= floats[m] <= 1.0 for m in METRICS):
            raise ValueError("its accuracies are out of range")
        src = [int(t) for t in o["example_src"]]
        weights = [[float(w) for w in row] for row in o["example_weights"]]
        return RunOutcome(spec=spec, **floats, example_src=src, example_weights=weights,
                          engine=str(o["engine"]), cpu_seconds=float(o.get("cpu_seconds", 0.0)), isa=str(o["isa"]),
                          backend=str(o.get("backend", "torch" if o["engine"] == "exact" else "unknown")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def store_cached(path: Path, key: dict, outcome: RunOutcome) -> None:
    from attn_cli.io import write_text

    payload = json.loads(json.dumps(dataclasses.asdict(outcome)))  # exactly as it reads back
    entry = {"key": key, "outcome": payload, "digest": payload_digest(payload)}
    write_text(path, json.dumps(entry, indent=2) + "\n")  # atomic
