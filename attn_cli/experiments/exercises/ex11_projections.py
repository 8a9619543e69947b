"""Exercise 11, random projections and readable maps."""

from __future__ import annotations

from dataclasses import dataclass, field

from attn_cli.experiments.exercises.common import Config, ProgressCallback
from attn_cli.published.settings import TEXT

TITLE = "random projections and readable maps"
HEADS = 4
QUERY_WORD, KEY_WORD, DIM = (TEXT["d2l-crossattn-map"][k] for k in ("query_word", "key_word", "d_model"))


@dataclass
class HeadProps:
    head: str  # "plain" or "head 1".."head 4"
    row_sum_error: float  # max |sum of a row - 1|
    same_rows: float  # max difference between rows of identical query letters
    same_columns: float  # max difference between columns of identical key letters
    match_wins: float  # fraction of query rows with a matching key whose largest weight is on one
    mean_max_weight: float
    regimes: list[str]  # per query row (crossattn.classify_row)


@dataclass
class Result:
    queries: list[str]
    keys: list[str]
    d_model: int  # letter embedding width (crossattn's d_model)
    heads: int
    plain: list[list[float]]  # (n_q, n_k)
    head_weights: list[list[list[float]]]  # (h, n_q, n_k)
    props: list[HeadProps] = field(default_factory=list)
    hold_in_every_head: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


def _props(name: str, W: list[list[float]]) -> HeadProps:
    from attn_cli.experiments.crossattn import classify_row

    def groups(word: str) -> list[list[int]]:
        return [[i for i, c in enumerate(word) if c == ch] for ch in sorted(set(word))]

    same_rows = max(
        (max(abs(a - b) for a, b in zip(W[g[0]], W[i])) for g in groups(QUERY_WORD) for i in g[1:]), default=0.0
    )
    same_cols = max((abs(row[g[0]] - row[j]) for row in W for g in groups(KEY_WORD) for j in g[1:]), default=0.0)
    rows_with_match = [i for i, c in enumerate(QUERY_WORD) if c in KEY_WORD]
    wins = sum(KEY_WORD[max(range(len(KEY_WORD)), key=lambda j: W[i][j])] == QUERY_WORD[i] for i in rows_with_match)
    row_sums, mean_max = max(abs(sum(r) - 1) for r in W), sum(max(r) for r in W) / len(W)
    match_wins, regimes = wins / max(1, len(rows_with_match)), [classify_row(r)[0] for r in W]
    return HeadProps(name, row_sums, same_rows, same_cols, match_wins, mean_max, regimes)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    from attn_cli.experiments import crossattn

    res = crossattn.run(crossattn.Config(config.seed, config.device, QUERY_WORD, KEY_WORD, DIM, HEADS))
    props = [_props("plain", res.weights)] + [_props(f"head {i + 1}", W) for i, W in enumerate(res.head_weights)]
    heads = props[1:]
    checks = {
        "rows sum to 1": all(p.row_sum_error < 1e-5 for p in heads),
        "identical query letters give identical rows": all(p.same_rows < 1e-6 for p in heads),
        "identical key letters give identical columns": all(p.same_columns < 1e-6 for p in heads),
        "the matching letter gets the largest weight": all(p.match_wins == 1.0 for p in heads),
        "the plain map's regimes (sharp / split / diffuse)": all(p.regimes == props[0].regimes for p in heads),
    }
    held, lost = [k for k, v in checks.items() if v], [k for k, v in checks.items() if not v]
    return Result(list(QUERY_WORD), list(KEY_WORD), DIM, HEADS, res.weights, res.head_weights, props, held, lost)


def validate_result(result: Result, config: Config) -> None:
    """A cached Result's words, maps and properties fit the text and HEADS (:mod:`attn_cli.store.typed`)."""
    from attn_cli.store.typed import check, check_grid, check_len, check_range

    check(result.queries == list(QUERY_WORD) and result.keys == list(KEY_WORD), "queries", "not the text's words")
    n_q, n_k = len(QUERY_WORD), len(KEY_WORD)
    check_grid(result.plain, (n_q, n_k), "plain")
    check_grid(result.head_weights, (HEADS, n_q, n_k), "head_weights")
    check_range([result.plain, result.head_weights], 0.0, 1.0, "weights")
    check_len(result.props, HEADS + 1, "props")
    for i, p in enumerate(result.props):
        check_len(p.regimes, n_q, f"props[{i}].regimes")
