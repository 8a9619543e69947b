"""Strict typed read-back with msgspec, for every cache entry and cluster worker's answer (``docs/design.md``);
the ``check_*`` helpers state what types cannot: sizes and ranges that follow from a run's configuration."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import re
import types
import typing
from collections.abc import Iterable
from typing import Any

import msgspec

MAX_DEPTH = 32  # JSON nesting any stored entry may have (the deepest, the exercises' Result, has 7)


class InvalidEntry(ValueError):
    """A value read back that does not match its type; the message names where and why (``rows[3].x: ...``)."""


_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)  # an unterminated one: to the end (linear)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth_ok(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the brackets of JSON ``text`` (outside strings) nest at most ``limit`` deep (no parse)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) <= limit


def parse_json(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """``json.loads(text)`` for text nested at most ``limit`` deep; InvalidEntry otherwise (not
    JSON, not UTF-8, too deep), never RecursionError.  NaN is parsed: :func:`revive` names its field."""
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


_DATACLASS: dict[type, type] = {}  # generated Struct -> its dataclass


@functools.cache
def _struct(tp: type) -> type:
    """A Struct with ``tp``'s fields; one with a default (or not an init field) may be absent."""
    hints = typing.get_type_hints(tp)
    fields: list[tuple] = []
    for f in dataclasses.fields(tp):
        kind = _spec(hints.get(f.name, Any))
        required = f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        fields.append((f.name, kind) if required else (f.name, kind | msgspec.UnsetType, msgspec.UNSET))
    struct = msgspec.defstruct(tp.__name__, fields, kw_only=True, forbid_unknown_fields=True)
    _DATACLASS[struct] = tp
    return struct


def _spec(tp: Any) -> Any:
    """``tp`` as msgspec reads it: dataclasses as Structs, ``float`` as ``int | float``."""
    if tp is float:
        return int | float
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _struct(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_spec(a) for a in args)]  # noqa: UP007 (built from a tuple)
    if origin in (list, tuple, dict) and args:
        return origin[tuple(a if a is Ellipsis else _spec(a) for a in args)]
    return tp


def _rebuild(value: Any) -> Any:
    """Structs back into their dataclasses (init fields only), through lists, tuples and dicts."""
    if isinstance(value, msgspec.Struct):
        tp = _DATACLASS[type(value)]
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(tp) if f.init}
        return tp(**{name: _rebuild(v) for name, v in fields.items() if v is not msgspec.UNSET})
    if isinstance(value, (list, tuple)):
        return type(value)(_rebuild(v) for v in value)
    if isinstance(value, dict):
        return {k: _rebuild(v) for k, v in value.items()}
    return value


def _finite(data: Any, path: str = "", depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise InvalidEntry(f"{path or '(top level)'}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(data, float) and not (data - data == 0):  # nan and ±inf
        raise InvalidEntry(f"{path or '(top level)'}: expected a finite number, got {data}")
    if isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            _finite(v, f"{path}[{i}]", depth + 1)
    elif isinstance(data, dict):
        for k, v in data.items():
            _finite(v, f"{path}.{k}" if path else str(k), depth + 1)


def revive(tp: Any, data: Any) -> Any:
    """JSON ``data`` (``dataclasses.asdict`` of a value, read back) as the type ``tp``, every value
    finite and checked against its type hint; InvalidEntry (with the path) at the first mismatch."""
    _finite(data)
    try:
        value = msgspec.convert(data, _spec(tp), strict=True)
    except msgspec.ValidationError as exc:  # "Expected `str`, got `int` - at `$.rows[0].name`"
        text, _, where = str(exc).partition(" - at `$")
        path = where.rstrip("`").lstrip(".") or "(top level)"
        raise InvalidEntry(f"{path}: {text[:1].lower()}{text[1:]}") from None  # "rows[0].name: expected ..."
    return _rebuild(value)


def _kind(data: Any) -> str:
    return {type(None): "null", dict: "object"}.get(type(data), type(data).__name__)  # these two by their JSON names


def check(ok: bool, path: str, reason: str) -> None:
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
    """``obj`` (a ``dict`` field) has exactly ``fields``, each value of its type: ``{"a": float}``."""
    check(isinstance(obj, dict), path, f"expected an object, got {_kind(obj)}")
    check(set(obj) == set(fields), path, f"expected the fields {', '.join(fields)}")
    for name, tp in fields.items():
        try:
            revive(tp, obj[name])
        except InvalidEntry as exc:
            raise InvalidEntry(f"{path}.{name}: {str(exc).partition(': ')[2]}") from None


def check_range(values: Iterable[Any], low: float, high: float, path: str) -> None:
    """Every number in ``values`` (nested lists flattened) is finite and in [low, high]."""
    for i, v in enumerate(values):
        if isinstance(v, (list, tuple)):
            check_range(v, low, high, f"{path}[{i}]")
            continue
        where = f"{path}[{i}]"
        check(isinstance(v, (int, float)) and not isinstance(v, bool), where, f"expected a number, got {_kind(v)}")
        check(low <= v <= high, where, f"{v} is outside [{low}, {high}]")
