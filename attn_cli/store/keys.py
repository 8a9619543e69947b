"""What decides a cache entry: its key (the configuration with the numeric record, the
versions of attn and torch, and a digest of the code that computes it)."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
    """``torch.__version__`` as the torch that ``import torch`` would load writes it in its
    ``version.py``, read as text once per process (a cached rerun never imports torch); else
    the distribution's metadata, else torch itself."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        origin = spec.origin if spec is not None else None
        if origin:
            found = _VERSION_LINE.search((Path(origin).parent / "version.py").read_text(encoding="utf-8"))
            if found:
                return found.group(1)
    except (OSError, ImportError, ValueError, UnicodeDecodeError):
        pass
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover
        import torch

        return torch.__version__


def code_digest(globs: Iterable[str]) -> str:
    """SHA-256 over the package's source files matching ``globs``, names and bytes."""
    return _code_digest(tuple(globs))


@functools.cache
def _code_digest(globs: tuple[str, ...]) -> str:
    root = Path(__file__).resolve().parent.parent  # the attn_cli package
    h = hashlib.sha256()
    for path in sorted({p for pattern in globs for p in root.glob(pattern) if p.is_file()}):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_key(fields: dict, globs: Iterable[str], numerics: dict) -> dict:
    """``fields`` (what the entry is: a configuration, a run) with what else decides its numbers:
    ``numerics`` (:func:`attn_cli.core.numerics.key`: the numeric mode and ISA; on cuda the GPU,
    its driver and precision settings too), the versions of attn and torch, and the code."""
    from attn_cli import __version__

    key = {**fields, "numerics": numerics, "attn": __version__, "torch": torch_version(), "code": code_digest(globs)}
    return json.loads(json.dumps(key))  # as it reads back from the file (tuples become lists)


def digest(data: Any) -> str:
    """SHA-256 of bytes, or of a JSON value (keys sorted)."""
    raw = data if isinstance(data, bytes) else json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()
