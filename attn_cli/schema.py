"""Strict typed read-back: JSON becomes a typed value only when it is exactly what the type
hints say, else :class:`InvalidEntry` with a short path and reason.

Design notes: ``docs/design.md``, section ``attn_cli.schema``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import types
import typing
from typing import Any, Iterable

MAX_DEPTH = 32  # JSON nesting any stored entry may have (the deepest, the exercises' Result, has 7)

__all__ = ["InvalidEntry", "MAX_DEPTH", "check", "check_fields", "check_grid", "check_len", "check_range",
           "json_depth_ok", "parse_json", "revive"]


class InvalidEntry(ValueError):
    """A value read back that does not match its schema; the message names where and why,
    e.g. ``rows[3].free_running: expected a number, got str``."""


# --------------------------------------------------------------------------- parsing

_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)  # an unterminated one: to the end (linear)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth_ok(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the brackets of JSON ``text`` (outside strings) nest at most ``limit`` deep.
    No recursion and no parse: a running sum over the brackets (C loops, milliseconds for MBs)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) <= limit


def parse_json(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """``json.loads(text)`` for text nested at most ``limit`` deep; InvalidEntry otherwise
    (not JSON, not UTF-8, too deep), never RecursionError."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidEntry(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not json_depth_ok(text, limit):
        raise InvalidEntry(f"nested deeper than {limit} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidEntry(f"not JSON ({type(exc).__name__}: {exc})") from None


# --------------------------------------------------------------------------- typed read-back


def revive(tp: Any, data: Any, path: str = "") -> Any:
    """JSON ``data`` (``dataclasses.asdict`` of a value, read back) as the type ``tp``, every
    value checked against its type hint; InvalidEntry (with the path) at the first mismatch."""
    if tp is Any or tp is object:
        return _plain(data, path, 0)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp, data, path)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(tp, args, data, path)
    if tp in (list, tuple) or origin in (list, tuple):
        return _sequence(origin or tp, args, data, path)
    if tp is dict or origin is dict:
        return _mapping(args, data, path)
    if tp in _SCALARS:
        return _SCALARS[tp](data, path)
    raise InvalidEntry(f"{_here(path)}: unsupported type {_name(tp)}")


def _union(tp: Any, args: tuple, data: Any, path: str) -> Any:
    """``X | None``: null or X; other unions: the first option that fits."""
    if data is None and type(None) in args:
        return None
    options = [a for a in args if a is not type(None)]
    errors = []
    for option in options:
        try:
            return revive(option, data, path)
        except InvalidEntry as exc:
            errors.append(str(exc))
    if len(options) == 1:
        raise InvalidEntry(errors[0])
    raise InvalidEntry(f"{_here(path)}: matches none of {_name(tp)} (got {_kind(data)})")


def _sequence(kind: type, args: tuple, data: Any, path: str) -> Any:
    """``list[X]``, ``tuple[X, ...]``: a JSON list of X; ``tuple[A, B]``: exactly A then B."""
    if not isinstance(data, list):
        raise _mismatch(path, "a list", data)
    if not args:
        return kind(_plain(v, f"{path}[{i}]", 1) for i, v in enumerate(data))
    if kind is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        if len(data) != len(args):
            raise InvalidEntry(f"{_here(path)}: expected {len(args)} items, got {len(data)}")
        return tuple(revive(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
    return kind(revive(args[0], v, f"{path}[{i}]") for i, v in enumerate(data))


def _mapping(args: tuple, data: Any, path: str) -> dict:
    """``dict[str, X]``: a JSON object of X; a bare ``dict``: plain JSON."""
    if not isinstance(data, dict):
        raise _mismatch(path, "an object", data)
    if not args:
        return _plain(data, path, 0)
    if args[0] not in (str, Any):
        raise InvalidEntry(f"{_here(path)}: unsupported key type {_name(args[0])}")
    return {k: revive(args[1], v, _key(path, k)) for k, v in data.items()}


def _exactly(tp: type, expected: str):
    """A scalar check: ``data`` is exactly of ``tp`` (a bool is no int)."""
    def check(data: Any, path: str) -> Any:
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise _mismatch(path, expected, data)
        return data

    return check


def _null(data: Any, path: str) -> None:
    if data is not None:
        raise _mismatch(path, "null", data)
    return None


def _dataclass(tp: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise _mismatch(path, f"an object ({tp.__name__})", data)
    fields = {f.name: f for f in dataclasses.fields(tp)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise InvalidEntry(f"{_key(path, str(unknown[0]))}: unknown field of {tp.__name__}")
    hints = typing.get_type_hints(tp)
    values = {}
    for name, f in fields.items():
        if name not in data:
            if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InvalidEntry(f"{_key(path, name)}: missing")
            continue
        value = revive(hints.get(name, Any), data[name], _key(path, name))
        if f.init:
            values[name] = value
    return tp(**values)


def _plain(data: Any, path: str, depth: int) -> Any:
    """An ``Any`` value: JSON null, bool, int, finite float, str, or lists and objects of them,
    at most :data:`MAX_DEPTH` deep."""
    if depth > MAX_DEPTH:
        raise InvalidEntry(f"{_here(path)}: nested deeper than {MAX_DEPTH} levels")
    if data is None or isinstance(data, (bool, int, str)):
        return data
    if isinstance(data, float):
        return _number(data, path)
    if isinstance(data, list):
        return [_plain(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(data)]
    if isinstance(data, dict):
        return {k: _plain(v, _key(path, k), depth + 1) for k, v in data.items()}
    raise _mismatch(path, "a JSON value", data)


def _number(data: Any, path: str) -> int | float:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise _mismatch(path, "a number", data)
    if isinstance(data, float) and not math.isfinite(data):
        raise InvalidEntry(f"{_here(path)}: expected a finite number, got {data}")
    return data


def _mismatch(path: str, expected: str, data: Any) -> InvalidEntry:
    return InvalidEntry(f"{_here(path)}: expected {expected}, got {_kind(data)}")


def _kind(data: Any) -> str:
    return {type(None): "null", bool: "bool", int: "int", float: "float", str: "str", list: "list",
            dict: "object"}.get(type(data), type(data).__name__)


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _here(path: str) -> str:
    return path or "(top level)"


def _key(path: str, key: str) -> str:
    key = key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", key) else json.dumps(key[:40])
    return f"{path}.{key}" if path else key


_SCALARS = {bool: _exactly(bool, "true or false"), int: _exactly(int, "an integer"), float: lambda d, p: _number(d, p),
            str: _exactly(str, "a string"), type(None): _null}


# --------------------------------------------------------------------------- sizes and ranges


def check(ok: bool, path: str, reason: str) -> None:
    """InvalidEntry ``"<path>: <reason>"`` unless ``ok``."""
    if not ok:
        raise InvalidEntry(f"{path}: {reason}")


def check_len(values: Any, n: int, path: str) -> None:
    """``values`` is a list (or tuple) of exactly ``n`` items."""
    check(isinstance(values, (list, tuple)), path, f"expected a list, got {_kind(values)}")
    check(len(values) == n, path, f"expected {n} items, got {len(values)}")


def check_grid(values: Any, shape: tuple[int, ...], path: str) -> None:
    """``values`` is nested lists of exactly ``shape`` (e.g. an attention map of n x m)."""
    check_len(values, shape[0], path)
    if len(shape) > 1:
        for i, row in enumerate(values):
            check_grid(row, shape[1:], f"{path}[{i}]")


def check_fields(obj: Any, fields: dict[str, Any], path: str) -> None:
    """``obj`` (a ``dict`` field: plain JSON) is an object of exactly ``fields``, each value of its
    type (as :func:`revive` checks it), e.g. ``{"a": float, "error": float}``."""
    check(isinstance(obj, dict), path, f"expected an object, got {_kind(obj)}")
    check(set(obj) == set(fields), path, f"expected the fields {', '.join(fields)}")
    for name, tp in fields.items():
        revive(tp, obj[name], _key(path, name))


def check_range(values: Iterable[Any], low: float, high: float, path: str) -> None:
    """Every number in ``values`` (nested lists flattened) is finite and in [low, high]."""
    for i, v in enumerate(values):
        if isinstance(v, (list, tuple)):
            check_range(v, low, high, f"{path}[{i}]")
            continue
        _number(v, f"{path}[{i}]")
        check(low <= v <= high, f"{path}[{i}]", f"{v} is outside [{low}, {high}]")
