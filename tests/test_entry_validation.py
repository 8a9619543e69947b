"""Nothing read back is trusted blindly, everything written is escaped for its medium.

Cache entries with a valid integrity check but wrong contents (issue 14 item 5, issue 19
item 3) are refused by :mod:`attn_cli.store.typed` and the per-run / per-experiment checks, and
recomputed with a one-line note: never a traceback, a hang or a failed command.  Strings
from data reach Markdown, a rich terminal and matplotlib as literal text.

Entries are forged with :func:`forge`, the one place that signs an entry as the cache does.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import attn_cli.experiments.copy_task as copy_task
from attn_cli import experiment_registry, pipeline
from attn_cli.store import cache, entries
from attn_cli.store import typed as schema
from attn_cli.store.typed import InvalidEntry
from tests.conftest import assert_png, run_attn, run_copy_task

HOSTILE_ENGINE = "fast<img src=x onerror=alert(1)>"
DEEP = "[" * 100_000 + "]" * 100_000  # json.loads alone raises RecursionError on this


@dataclasses.dataclass
class Entry:
    """One cache entry, addressed as the cache addresses it: ``root`` (the cache folder:
    ``--cache-dir``, the pipeline's ``cache_root``), the entry group ``name`` ("copy_task",
    "embeddings", ...) and its ``key``.

    With :func:`forge` and :func:`load_run`, the ONE place that knows where entries live, how
    they are read and how they are signed: switch these when the cache changes (per-user
    folder, HMAC)."""

    root: Path
    name: str
    key: dict

    @property
    def path(self) -> Path:
        return cache.cache_path(self.root, self.name, self.key)

    def save(self) -> bytes:
        return self.path.read_bytes()

    def restore(self, data: bytes) -> None:
        self.path.write_bytes(data)

    def store(self, payload: Any) -> None:
        """Store ``payload`` as a run would (signed with this user's key)."""
        with cache.Cache.open(self.root) as store:
            store.store(self.name, self.key, payload)

    def sign(self, payload_json: str) -> None:
        """Write an entry whose payload is the JSON text ``payload_json`` (say, 100,000 nested
        brackets, which json.dumps cannot even write), signed as the cache signs entries."""
        body = f'{{"key": {json.dumps(self.key, sort_keys=True)}, "payload": {payload_json}}}'.encode()
        with cache.Cache.open(self.root) as store:
            mac = store._mac(body).encode()
        self.path.write_bytes(cache._HEAD + mac + cache._MID + body + cache._TAIL)


def forge(entry: Entry, mutate: Callable[[Any], Any]) -> None:
    """Edit ``entry``: ``mutate(payload)`` changes the payload in place, and the entry is signed
    again with this user's HMAC key, exactly as the cache signs entries, so only the
    validation of its contents stands between it and the report."""
    with cache.Cache.open(entry.root) as store:
        payload = store.load(entry.name, entry.key, cache.RESULT_MAX_BYTES)
        mutate(payload)
        store.store(entry.name, entry.key, payload)


def load_run(entry: Entry):
    """The copy task's cached outcome for ``entry`` (raises a ValueError for one refused)."""
    with cache.Cache.open(entry.root) as store:
        return copy_task.load_cached(entries.Pieces(store, "copy_task"), entry.key)


def run_entry(config, root: Path) -> Entry:
    """The copy-task entry of ``config``'s first run in the cache at ``root``."""
    spec = config.plan()[0]
    return Entry(Path(root), "copy_task", copy_task.cache_key(spec, config.engine_of(spec), config.device))


def result_entry(exp, config, root: Path) -> Entry:
    """The Result-cache entry the pipeline uses for ``exp`` at ``config``."""
    return Entry(root, exp.name, pipeline._cache_key(exp, config, root))


def setter(*path_and_value) -> Callable[[Any], None]:
    """``setter("a", 0, "b", value)``: payload["a"][0]["b"] = value."""
    *path, value = path_and_value

    def mutate(obj):
        for part in path[:-1]:
            obj = obj[part]
        obj[path[-1]] = value

    return mutate


# --------------------------------------------------------------------------- the schema itself


@dataclasses.dataclass
class Inner:
    x: float
    n: int = 0


@dataclasses.dataclass
class Outer:
    name: str
    flag: bool
    pair: tuple[int, str]
    items: list[Inner]
    maybe: float | None = None
    extra: Any = None
    table: dict[str, list[float]] = dataclasses.field(default_factory=dict)


GOOD = {
    "name": "a",
    "flag": True,
    "pair": [1, "b"],
    "items": [{"x": 1, "n": 2}, {"x": 0.5}],
    "maybe": None,
    "extra": {"k": [1, 2.5, None, "s"]},
    "table": {"t": [1.0]},
}


def test_schema_accepts_exact_types_and_returns_them_as_read():
    back = schema.revive(Outer, GOOD)
    assert back == Outer("a", True, (1, "b"), [Inner(1, 2), Inner(0.5)], None, {"k": [1, 2.5, None, "s"]}, {"t": [1.0]})
    assert type(back.items[0].x) is int  # an int where a float is hinted is kept as read (round trip)


@pytest.mark.parametrize(
    "mutate, reason",
    [  # msgspec's words, after the path
        (setter("name", 3), "name: expected `str`, got `int`"),
        (setter("flag", 1), "flag: expected `bool`, got `int`"),
        (setter("items", 0, "x", "1.5"), "items[0].x: expected `int | float`, got `str`"),
        (setter("items", 0, "x", True), "items[0].x: expected `int | float`, got `bool`"),
        (setter("items", 0, "n", 2.0), "items[0].n: expected `int`, got `float`"),
        (setter("items", 0, "n", False), "items[0].n: expected `int`, got `bool`"),
        (setter("items", 1, "x", math.nan), "items[1].x: expected a finite number, got nan"),
        (setter("items", 1, "x", math.inf), "items[1].x: expected a finite number, got inf"),
        (setter("items", 3), "items: expected `array`, got `int`"),
        (setter("pair", [1, "b", 2]), "pair: expected `array` of length 2, got 3"),
        (setter("pair", ["1", "b"]), "pair[0]: expected `int`, got `str`"),
        (setter("maybe", "x"), "maybe: expected `int | float | null`, got `str`"),
        (setter("extra", "k", 0, math.nan), "extra.k[0]: expected a finite number"),
        (setter("extra", json.loads("[" * 40 + "]" * 40)), "nested deeper than"),
        (setter("table", "t", [[1.0]]), "expected `int | float`, got `array`"),
        (setter("items", 0, "zzz", 1), "items[0]: object contains unknown field `zzz`"),
        (lambda d: d.pop("flag"), "object missing required field `flag`"),
        (setter("unknown", 1), "object contains unknown field `unknown`"),
    ],
)
def test_schema_refuses_every_mismatch_with_its_path(mutate, reason):
    data = copy.deepcopy(GOOD)
    mutate(data)
    with pytest.raises(InvalidEntry, match=None) as exc:
        schema.revive(Outer, data)
    assert reason in str(exc.value)


def test_parse_json_bounds_depth_without_recursion():
    assert schema.parse_json('{"a": "[[[[[[", "b": [1, {"c": "\\"]]"}]}') == {"a": "[[[[[[", "b": [1, {"c": '"]]'}]}
    assert schema.json_depth_ok("[" * 32 + "]" * 32) and not schema.json_depth_ok("[" * 33 + "]" * 33)
    start = time.perf_counter()
    with pytest.raises(InvalidEntry, match="nested deeper than 32"):
        schema.parse_json(DEEP)
    assert time.perf_counter() - start < 5
    with pytest.raises(InvalidEntry, match="not UTF-8"):
        schema.parse_json(b'{"a": "\xff"}')
    with pytest.raises(InvalidEntry, match="not JSON"):
        schema.parse_json("{")
    with pytest.raises(RecursionError):  # why parse_json exists
        json.loads(DEEP)


def test_the_check_helpers_refuse():
    with pytest.raises(InvalidEntry, match=r"w\[1\]: expected 2 items, got 3"):
        schema.check_grid([[0, 0], [0, 0, 0]], (2, 2), "w")
    with pytest.raises(InvalidEntry, match=r"w\[0\]\[1\]: 1.5 is outside \[0.0, 1.0\]"):
        schema.check_range([[0.5, 1.5]], 0.0, 1.0, "w")
    with pytest.raises(InvalidEntry, match="r: expected the fields a, error"):
        schema.check_fields({"a": 1.0}, {"a": float, "error": float}, "r")


# --------------------------------------------------------------------------- copy-task run records

TINY = dict(lengths=(3,), steps=4, eval_size=16, jobs=1)  # well under a second in-process


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """One attention and one plain run, cached: (config, result, {model: Entry})."""
    root = tmp_path_factory.mktemp("copy_task") / "cache"
    config = copy_task.Config(model="both", **TINY)
    result = run_copy_task(config, root)
    where = {}
    for spec in config.plan():
        where[spec.model] = Entry(root, "copy_task", copy_task.cache_key(spec, config.engine_of(spec), config.device))
    return config, result, where


@pytest.fixture
def entry(tiny_runs):
    """The attention run's entry, restored after the test."""
    attention = tiny_runs[2]["attention"]
    original = attention.save()
    yield attention
    attention.restore(original)


def _mutated(entry: Entry, mutate) -> str:
    forge(entry, mutate)
    with pytest.raises(ValueError) as exc:  # InvalidEntry, or the cache's Refused (a size bound)
        load_run(entry)
    return str(exc.value)


COPY_TASK_CASES = {  # the cases first, then one per rule of check_outcome
    "final_loss a string": (setter("final_loss", "abc"), "final_loss: expected `int | float`, got `str`"),
    "weights of strings": (
        setter("example_weights", [["x"]]),
        "example_weights[0][0]: expected `int | float`, got `str`",
    ),
    "diagonal a string": (setter("diagonal", "lots"), "diagonal: expected `int | float | null`, got `str`"),
    "100,000-row map": (
        setter("example_weights", [[1.0]] * 100_000),  # or a size bound on reading, first
        ("example_weights: expected 3 items, got 100000", "allowed"),
    ),
    "NaN accuracy": (setter("free_running", math.nan), "free_running: expected a finite number, got nan"),
    "planted engine": (setter("engine", HOSTILE_ENGINE), "engine: 'fast<img"),
    "accuracy above 1": (setter("exact", 1.5), "exact[0]: 1.5 is outside [0.0, 1.0]"),
    "accuracy a bool": (setter("teacher_forced", True), "teacher_forced: expected `int | float`, got `bool`"),
    "infinite loss": (setter("final_loss", math.inf), "final_loss: expected a finite number"),
    "negative seconds": (setter("seconds", -1.0), "seconds[0]: -1.0 is outside"),
    "planted isa": (setter("isa", "<b>AVX</b>"), "isa: unknown ISA"),
    "planted backend": (setter("backend", "gpu"), "backend: unknown backend"),
    "planted kernel variant": (setter("kernel_isa", "avx1024<script>"), "kernel_isa: unknown kernel variant"),
    "another spec": (setter("spec", "length", 4), "spec: not the run it is stored for"),
    "short source": (setter("example_src", [1, 2]), "example_src: expected 3 items, got 2"),
    "source not digits": (setter("example_src", [1, 2, 10]), "example_src[2]: 10 is outside"),
    "map rows too long": (lambda d: d["example_weights"][0].append(0.0), "example_weights[0]: expected 3 items"),
    "weight above 1": (setter("example_weights", 1, 1, 2.0), "example_weights[1][1]: 2.0 is outside"),
    "diagonal missing": (setter("diagonal", None), "diagonal: missing for the attention model"),
    "diagonal above 1": (setter("diagonal", 3.0), "diagonal[0]: 3.0 is outside"),
    "unknown field": (setter("losses", [1.0]), "object contains unknown field `losses`"),
    "missing field": (lambda d: d.pop("final_loss"), "object missing required field `final_loss`"),
    "accuracy a list": (setter("free_running", [0.5]), "free_running: expected `int | float`, got `array`"),
}


@pytest.mark.parametrize("case", list(COPY_TASK_CASES))
def test_a_forged_run_record_is_refused_with_its_reason(entry, case):
    mutate, reasons = COPY_TASK_CASES[case]
    message = _mutated(entry, mutate)
    assert any(r in message for r in ((reasons,) if isinstance(reasons, str) else reasons)), message


def test_the_plain_model_has_no_map(tiny_runs):
    plain = tiny_runs[2]["plain"]
    original = plain.save()
    try:
        assert load_run(plain) is not None
        assert "the plain model has no attention map" in _mutated(plain, setter("example_weights", [[1.0]]))
        plain.restore(original)
        assert "the plain model has no attention map" in _mutated(plain, setter("diagonal", 0.5))
        plain.restore(original)
        assert "example_src: expected 0 or 3 items" in _mutated(plain, setter("example_src", [1]))
    finally:
        plain.restore(original)


def test_deep_nesting_is_refused_not_a_recursion_error(entry):
    entry.sign(DEEP)
    with pytest.raises(ValueError, match="nested|allowed"):  # a run's entry: its size bound first
        load_run(entry)


@pytest.mark.parametrize("case", ["final_loss a string", "100,000-row map", "planted engine", "NaN accuracy"])
def test_a_refused_run_is_recomputed_with_a_note(tiny_runs, entry, case):
    config, first, _ = tiny_runs
    forge(entry, COPY_TASK_CASES[case][0])
    start = time.perf_counter()
    again = run_copy_task(config, entry.root)
    assert time.perf_counter() - start < 60  # not a hang
    assert again.rows == first.rows and again.maps == first.maps
    assert [r["cached"] for r in again.runs] == [False, True]
    assert len(again.notes) == 1 and "recomputing it" in again.notes[0]
    assert load_run(entry) is not None  # rewritten whole


def test_copy_task_command_recomputes_a_planted_engine(tmp_path):
    """End to end: the run `attn copy-task` will look up, cached in-process, then forged."""
    config = copy_task.Config(model="attention", **TINY)
    run_copy_task(config, tmp_path / "cache")  # what the command below caches on its first run
    planted = run_entry(config, tmp_path / "cache")
    forge(planted, setter("engine", HOSTILE_ENGINE))
    proc = run_attn(
        "copy-task",
        "--lengths",
        "3",
        "--steps",
        "4",
        "--eval-size",
        "16",
        "--model",
        "attention",
        "--jobs",
        "1",
        "--out",
        tmp_path,
        "--cache-dir",
        tmp_path / "cache",
        timeout=180,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    stderr = " ".join(proc.stderr.split())  # as one line, however the console wrapped it
    assert f"is unreadable (engine: {HOSTILE_ENGINE!r} is not the 'exact' engine" in stderr
    assert "recomputing it" in stderr and "<img" not in proc.stdout
    assert load_run(planted) is not None


# --------------------------------------------------------------------------- the Result cache


def _experiment(name: str):
    return next(e for e in experiment_registry.discover() if e.name == name)


CONFIGS = {"embeddings": {}, "copy_both": {}, "sqrt_dk": {}, "exercises": {"exercises": (2, 6, 11, 12)}}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Per cached experiment: (experiment, quick config, its Result's JSON payload)."""
    out = {}
    for name, overrides in CONFIGS.items():
        exp = _experiment(name)
        config = dataclasses.replace(exp.config(quick=True), **overrides)
        payload = json.loads(json.dumps(dataclasses.asdict(exp.run(config))))
        out[name] = (exp, config, payload)
    return out


def _refusal(fresh, name: str, mutate) -> str:
    exp, config, payload = fresh[name]
    data = copy.deepcopy(payload)
    mutate(data)
    with pytest.raises(InvalidEntry) as exc:
        exp.module.validate_result(entries.revive(exp.module.Result, data), config)
    return str(exc.value)


def test_every_cached_experiment_bounds_its_result_by_its_config():
    cached = {e.name: e for e in experiment_registry.discover() if e.cached}
    assert set(cached) == set(CONFIGS)  # a new cached experiment: add it here and give it validate_result
    assert all(callable(getattr(e.module, "validate_result", None)) for e in cached.values())


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_fresh_result_passes_its_own_validation(fresh, name):
    exp, config, payload = fresh[name]
    exp.module.validate_result(entries.revive(exp.module.Result, payload), config)
    assert exp.cached


RESULT_CASES = [  # (experiment, mutation, reason): the issue's, then one per rule of each validate_result
    ("embeddings", setter("distance", "1.5"), "distance: expected `int | float`, got `str`"),
    ("embeddings", setter("bank_outputs", 3), "bank_outputs: expected `array`, got `int`"),
    ("embeddings", setter("tokens", 0, 0, "<script>"), "tokens: not the text's sentences"),
    ("embeddings", setter("static_bank", [0.5]), "static_bank: expected 6 items, got 1"),
    ("embeddings", setter("bank_outputs", 1, [0.0]), "bank_outputs[1]: expected 6 items, got 1"),
    ("embeddings", setter("weights", 0, [[0.2]] * 100_000), "weights[0]: expected 5 items, got 100000"),
    ("embeddings", setter("weights", 1, 0, 0, 7.0), "weights[1][0][0]: 7.0 is outside"),
    ("copy_both", setter("one_head", 0, "error", "0.7"), "one_head[0].error: expected `int | float`, got `str`"),
    ("copy_both", setter("curve", "a", 7), "curve.a: expected `array`, got `int`"),
    ("copy_both", lambda d: d["two_heads"].pop(), "two_heads: expected 2 items, got 1"),
    ("copy_both", setter("one_head", 0, "x", 1.0), "one_head[0]: expected the fields a, b, error"),
    ("copy_both", lambda d: d["curve"].pop("driver"), "curve: expected the fields"),
    ("copy_both", setter("curve", "one_head", [0.7] * 100_000), "curve.one_head: expected 11 items, got 100000"),
    ("copy_both", setter("theory", math.nan), "theory: expected a finite number, got nan"),
    ("sqrt_dk", setter("rows", 0, "std", "big"), "rows[0].std: expected `int | float`, got `str`"),
    ("sqrt_dk", lambda d: d["rows"].pop(), "rows: not one row per --d-k value"),
    ("sqrt_dk", setter("rows", 1, "max_weight_scaled", 1.5), "rows[1].max_weight[1]: 1.5 is outside"),
    ("exercises", setter("ex2", "sweeps", 0, "points", 0, "error", "x"), "ex2.sweeps[0].points[0].error: expected"),
    ("exercises", setter("ex11", "plain", 5), "ex11.plain: expected `array`, got `int`"),
    ("exercises", setter("ex3", {"value_dim": 1, "samples": 1}), "ex3: present but not selected"),
    ("exercises", setter("ex2", None), "ex2: selected but missing"),
    ("exercises", lambda d: d["ex2"]["sweeps"][1]["points"].pop(), "ex2.sweeps[1].points: not one point per epsilon"),
    ("exercises", lambda d: d["ex6"]["rows"].pop(), "ex6.rows: not one row per head count"),
    ("exercises", setter("ex11", "queries", ["<", "b"]), "ex11.queries: not the text's words"),
    ("exercises", setter("ex11", "plain", [[0.1]] * 100_000), "ex11.plain: expected 9 items, got 100000"),
    ("exercises", setter("ex11", "head_weights", 0, 0, 0, -1.0), "ex11.weights[1][0][0][0]: -1.0 is outside"),
    ("exercises", lambda d: d["ex11"]["props"].pop(), "ex11.props: expected 5 items, got 4"),
    ("exercises", setter("ex11", "props", 0, "regimes", []), "ex11.props[0].regimes: expected 9 items, got 0"),
    ("exercises", lambda d: d["ex12"]["runs"].pop(), "ex12.runs: not one run per head count"),
    ("exercises", setter("ex12", "runs", 1, "weights", [[0.5, 0.5]]), "ex12.runs[1].weights: expected 2 items"),
    (
        "exercises",
        setter("ex12", "runs", 1, "initial_weights", [[0.5]] * 2),
        "ex12.runs[1].initial_weights[0]: expected 2 items",
    ),
    ("exercises", setter("ex12", "runs", 0, "kinds", []), "ex12.runs[0].kinds: expected 1 items, got 0"),
    ("exercises", setter("ex12", "runs", 0, "kinds", ["<b>"]), "ex12.runs[0].kinds: not one of one-hot"),
    ("exercises", setter("ex12", "runs", 0, "curve", [[1, 0.5]] * 100_000), "ex12.runs[0].curve: more than 150"),
    ("exercises", setter("ex12", "runs", 0, "curve", [[1, 0.5, 3]]), "ex12.runs[0].curve[0]: expected 2 items"),
]


@pytest.mark.parametrize(
    "name, mutate, reason", RESULT_CASES, ids=[f"{n}-{r.split(':')[0]}" for n, _, r in RESULT_CASES]
)
def test_a_forged_result_is_refused_with_its_reason(fresh, name, mutate, reason):
    assert reason in _refusal(fresh, name, mutate)


def test_a_result_stored_for_another_config_is_refused(tmp_path):
    exp = _experiment("copy_both")
    config = exp.config(quick=True)
    assert pipeline.run(exp, config, cache_root=tmp_path / "cache").error is None
    forge(result_entry(exp, config, tmp_path / "cache"), setter("config", "seed", 7))
    again = pipeline.run(exp, config, cache_root=tmp_path / "cache")
    assert not again.from_cache and again.error is None
    assert len(again.notes) == 1
    assert "config: not the configuration it is stored for); recomputing it" in again.notes[0]


@pytest.mark.parametrize(
    "name, overrides, mutate",
    [
        ("embeddings", {}, setter("distance", "1.5")),  # a float turned into a string (was: AttributeError)
        ("embeddings", {}, setter("bank_outputs", 3)),  # a list turned into an int
        ("copy_both", {}, setter("curve", "a", 7)),  # (was: ValueError)
        ("exercises", {"exercises": (11,)}, setter("ex11", "props", 0, "mean_max_weight", "0.5")),  # (was: rendering
        ("exercises", {"exercises": (11,)}, None),  # failed: TypeError); None: 100,000 nested brackets for a file
    ],
)
def test_the_runner_recomputes_a_refused_result_with_a_note(tmp_path, name, overrides, mutate):
    exp = _experiment(name)
    config = dataclasses.replace(exp.config(quick=True), **overrides)
    first = pipeline.run(exp, config, cache_root=tmp_path / "cache")
    assert first.error is None and not first.from_cache and not first.notes
    stored = result_entry(exp, config, tmp_path / "cache")
    if mutate is None:
        stored.sign(DEEP)
    else:
        forge(stored, mutate)
    run = pipeline.run(exp, config, cache_root=tmp_path / "cache")
    assert run.error is None and not run.from_cache and run.result is not None
    assert len(run.notes) == 1 and run.notes[0].startswith("cache entry ")
    assert run.notes[0].endswith("); recomputing it")
    if name != "exercises":  # (its Result records wall-clock seconds)
        assert run.result == first.result  # recomputed: the same numbers
    assert pipeline.run(exp, config, cache_root=tmp_path / "cache").from_cache  # stored again, whole


def test_attn_all_recomputes_forged_results_and_exits_0(fresh, tmp_path):
    """End to end: the entries `attn all --quick` looks up, stored in-process, then forged."""
    for name, mutate in (("embeddings", setter("distance", "1.5")), ("copy_both", setter("one_head", 5))):
        exp, config, payload = fresh[name]
        stored = result_entry(exp, config, tmp_path / "cache")
        stored.store(payload)
        forge(stored, mutate)
    proc = run_attn(
        "all",
        "--quick",
        "--only",
        "w9-onehot",
        "d2l-copy-both-one-head",
        "--out",
        tmp_path,
        "--cache-dir",
        tmp_path / "cache",
        timeout=240,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    stderr = " ".join(proc.stderr.split())  # as one line, however the console wrapped it
    assert "embeddings: cache entry" in stderr and "copy_both: cache entry" in stderr
    assert "distance: expected `int | float`, got `str`); recomputing it" in stderr
    assert "one_head: expected `array`, got `int`); recomputing it" in stderr
    assert "failed" not in stderr


# --------------------------------------------------------------------------- escaping per medium


def test_markdown_cells_and_paragraphs_are_literal():
    from attn_cli.render.table import Table, md_escape, to_markdown

    assert md_escape("a|b <script>&`x` \\ \nz") == "a\\|b &lt;script&gt;&amp;\\`x\\` \\\\ <br>z"
    assert md_escape("a|b <i>\nz", cell=False) == "a|b &lt;i&gt;\nz"  # a paragraph: lines kept
    t = Table(title="<b>t</b>")
    t.add_column("word")
    t.add_row("a|b")
    t.add_row("<img src=x onerror=alert(1)>")
    t.add_row("x\ny")
    md = to_markdown([t, "<script>alert(1)</script>"])
    assert md.splitlines() == [
        "**&lt;b&gt;t&lt;/b&gt;**",
        "",
        "| word |",
        "| --- |",
        "| a\\|b |",
        "| &lt;img src=x onerror=alert(1)&gt; |",
        "| x<br>y |",
        "",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
    ]


def test_the_check_table_in_markdown_escapes_data():
    from attn_cli.published.compare import Outcome
    from attn_cli.published.types import Check
    from attn_cli.render import report

    check = Check(id="x.y", artifact="x", published=1.0, tolerance=0.01)
    o = Outcome(check, status="fail", regenerated="a|b<i>", note="<script>`boom`</script>")
    md = report.checks_markdown([o])
    row = md.splitlines()[-1]
    assert "<script>" not in row and "&lt;script&gt;\\`boom\\`&lt;/script&gt;" in row
    assert "a\\|b&lt;i&gt;" in row and row.count(" | ") == 5  # id, published, regenerated, tolerance, margin, status


def test_a_note_is_printed_as_written_not_as_rich_markup(monkeypatch):
    from rich.console import Console

    from attn_cli.render import console

    recorder = Console(record=True, width=200, color_system=None, file=open("/dev/null", "w"))
    monkeypatch.setattr(console, "stderr", recorder)
    console.note("cache entry [bold]x[/] is invalid (engine: '[red]fast[/red]')")
    assert "[bold]x[/] is invalid (engine: '[red]fast[/red]')" in recorder.export_text()


def test_heatmap_words_print_literally_and_draw_literally(tmp_path):
    proc = run_attn("heatmap", "[red]x[/red]", "a|b$\\frac$", "--out", tmp_path, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "'[red]x[/red]'" in proc.stdout and "a|b$\\\\frac$" in proc.stdout  # the title, as given (repr)
    (png,) = tmp_path.glob("heatmap_*.png")  # mathtext not parsed: drawn as text
    assert_png(png)


def test_a_hostile_string_in_a_valid_entry_reaches_markdown_and_html_as_text(fresh):
    """A free-text field that passes validation (ex2's formula) is still data: escaped in
    ``exercises.md`` / ``index.md`` and in ``index.html``."""
    from attn_cli.render.table import to_html, to_markdown

    exp, config, payload = fresh["exercises"]
    data = copy.deepcopy(payload)
    data["ex2"]["eigenvalues"] = "<script>alert(1)</script>|`x`"
    result = entries.revive(exp.module.Result, data)
    exp.module.validate_result(result, config)  # accepted: a string, as the type says
    tables = exp.tables(result, {})  # the exercises have no published value
    md, page = to_markdown(tables), to_html(tables)
    assert "<script>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;|\\`x\\`" in md  # a caption
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
