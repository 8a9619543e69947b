"""The check record of a run: a header naming where the numbers came from, then the checks.

``verify.json`` and ``attn verify --json`` are ``{"header": ..., "checks": [...]}``;
``manifest.json`` of ``attn all`` has the same header and the checks as ``records``.
:func:`load` reads any of them, a report folder, and an earlier version's bare list.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "attn-checks/1"


def header(*, command: str, where: dict, device: str, seed: int, seeds: int | None, quick: bool) -> dict:
    """Versions (attn, torch, python, numpy), machine, numerics, device, seeds and the date;
    ``where``: :func:`attn_cli.pipeline.where_it_ran`."""
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "format": FORMAT,
        "command": command,
        "timing": {"date": date},  # wall clock: under timing
        **where,  # versions, machine, numerics
        "device": device,
        "seed": seed,
        "seeds": seeds,
        "quick": quick,
    }


def record(outcomes: Sequence, head: dict) -> dict:
    return {"header": head, "checks": [o.as_json() for o in outcomes]}


class Unreadable(ValueError):
    """Not a check record: the message says what the path holds instead."""


@dataclass
class Loaded:
    header: dict | None  # None: an old bare list
    checks: list[dict]
    path: Path | str  # the file read, or a label (verify --diff: "this run")


def load(path: str | Path) -> Loaded:
    """A check record from ``verify.json`` (object or old bare list), ``manifest.json`` or a
    report folder holding one of them (``verify.json`` first)."""
    path = Path(path)
    if path.is_dir():
        found = [path / name for name in ("verify.json", "manifest.json") if (path / name).is_file()]
        if not found:
            raise Unreadable(f"{path} holds neither verify.json nor manifest.json")
        path = found[0]
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Unreadable(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"{path} is not JSON ({exc})") from None
    listed = "records" if isinstance(data, dict) and "records" in data else "checks"  # manifest.json: records
    if isinstance(data, list):
        head, checks = None, data
    elif isinstance(data, dict) and isinstance(data.get(listed), list):
        head, checks = data.get("header"), data[listed]
    else:
        raise Unreadable(f"{path} holds no check records (a manifest from an earlier attn has none: rerun attn all)")
    if not all(isinstance(c, dict) and isinstance(c.get("id"), str) and "status" in c for c in checks):
        raise Unreadable(f"{path}: a check record without an id or a status")
    return Loaded(head if isinstance(head, dict) else None, checks, path)
