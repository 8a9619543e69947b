"""The Result cache (attn_cli/cache.py): JSON only, typed on the way back, never code."""

from __future__ import annotations

import dataclasses
import json

import pytest

from attn_cli import cache, runner


@dataclasses.dataclass
class Plain:
    x: float


@dataclasses.dataclass
class Opaque:
    value: object


@pytest.mark.parametrize("name", ["copy_both", "embeddings", "sqrt_dk", "exercises"])
def test_every_cached_experiment_round_trips_through_json(tmp_path, name):
    exp = next(e for e in runner.discover() if e.name == name)
    assert exp.cached
    config = exp.config(quick=True)
    if name == "exercises":
        config = dataclasses.replace(config, exercises=(1, 4, 9))
    result = exp.run(config)
    key = {"experiment": name}
    path = tmp_path / "entry.json"
    assert cache.store_result(path, key, result)  # a dataclass of plain values: kept
    back = cache.load_result(path, key, type(result))
    assert type(back) is type(result)
    assert json.dumps(dataclasses.asdict(back), sort_keys=True) == json.dumps(dataclasses.asdict(result),
                                                                             sort_keys=True)


def test_a_result_that_does_not_read_back_is_not_stored(tmp_path):
    assert not cache.store_result(tmp_path / "x.json", {}, Opaque(value={1, 2}))  # a set is not JSON
    assert not (tmp_path / "x.json").exists()


def test_an_entry_is_data_never_code(tmp_path):
    import pickle

    R = Plain
    path = tmp_path / "entry.json"
    assert cache.store_result(path, {"k": 1}, R(1.5))
    path.write_bytes(pickle.dumps(R(2.0)))  # a planted pickle is not read as one: refused
    assert cache.load_result(path, {"k": 1}, R) is None
    entry = {"key": {"k": 1}, "payload": {"x": 2.0}}
    entry["digest"] = cache.digest(entry["payload"])
    path.write_text(json.dumps(entry))  # a well-formed entry is plain data, typed by R
    assert cache.load_result(path, {"k": 1}, R) == R(2.0)
