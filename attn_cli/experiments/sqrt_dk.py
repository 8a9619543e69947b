"""W9 3.3: why scores are divided by sqrt(d_k) (design notes: ``docs/design.md``, this module's section)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from attn_cli.experiments import ProgressCallback, ProgressEvent, QuickConfig
from attn_cli.published.settings import SQRT_DK_DIMS, SQRT_DK_N_KEYS, SQRT_DK_TRIALS, sqrt_dk_text_draws

ARTIFACTS = ("w9-sqrt-dk", "w9-sqrt-dk-plot")
FIGURES = ("sqrt_dk.png",)
ENGINES: tuple[str, ...] = ()
SLOW, CACHED = False, True  # seconds: 20000 trials per d_k

QUICK_TRIALS = 2000  # --quick: 10x fewer trials (numbers then differ from the text's)
STATS = ("std", "std_scaled", "max_weight_unscaled", "max_weight_scaled", "grad_unscaled", "grad_scaled")  # checked


@dataclass(frozen=True)
class Config(QuickConfig):
    d_k: tuple[int, ...] = SQRT_DK_DIMS  # key dimensions d_k, drawn in this order (the text's)
    trials: int = SQRT_DK_TRIALS  # independent (query, key set) pairs per d_k
    n_keys: int = SQRT_DK_N_KEYS  # keys per query: the softmax runs over this many logits

    QUICK: ClassVar[dict[str, Any]] = {"trials": QUICK_TRIALS}  # 10x fewer trials


@dataclass
class Row:
    d_k: int
    std: float  # std of q.k over all trials and keys (theory: sqrt(d_k))
    std_scaled: float  # std of q.k / sqrt(d_k) (theory: 1)
    max_weight_unscaled: float  # mean over trials of the largest softmax weight
    max_weight_scaled: float
    grad_unscaled: float  # mean over trials of ||d w_0 / d logits||
    grad_scaled: float
    text_draws: bool  # True when this row's random draws are exactly the text's


@dataclass
class Result:
    config: dict
    rows: list[Row] = field(default_factory=list)

    def measured(self) -> dict[str, Any]:
        """Check ID -> regenerated value, every row (published.compare decides which apply)."""
        out: dict[str, Any] = {f"w9-sqrt-dk.{r.d_k}.{name}": getattr(r, name) for r in self.rows for name in STATS}
        if self.rows:
            out["w9-sqrt-dk-plot.curves"] = curves_as_described(self.rows)
        return out


def curves_as_described(rows: list[Row]) -> bool:
    """The text's reading of the figure, over rows sorted by d_k: unscaled, the largest weight strictly
    climbs and the gradient norm strictly falls; scaled, they vary by less than 0.03 and 0.001."""
    rows = sorted(rows, key=lambda r: r.d_k)
    weight, grad = [r.max_weight_unscaled for r in rows], [r.grad_unscaled for r in rows]
    weight_scaled, grad_scaled = [r.max_weight_scaled for r in rows], [r.grad_scaled for r in rows]
    return (
        all(b > a for a, b in zip(weight, weight[1:]))
        and all(b < a for a, b in zip(grad, grad[1:]))
        and max(weight_scaled) - min(weight_scaled) < 0.03
        and max(grad_scaled) - min(grad_scaled) < 0.001
    )


def validate_result(result: Result, config: Config) -> None:
    """A cached Result has one row per d_k of ``config``, in order, weights in [0, 1]."""
    from attn_cli.store.typed import check, check_range

    check([r.d_k for r in result.rows] == list(config.d_k), "rows", "not one row per --d-k value")
    for i, r in enumerate(result.rows):
        check_range([r.max_weight_unscaled, r.max_weight_scaled], 0.0, 1.0, f"rows[{i}].max_weight")


def estimate_bytes(config: Config) -> int:
    """Peak float32 memory of one d_k step: q and k at the largest d_k, about twelve (trials, n_keys) tensors."""
    return 4 * config.trials * ((config.n_keys + 1) * max(config.d_k) + 12 * config.n_keys)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    """Regenerate the table; ``progress`` hears after each d_k."""
    import torch

    from attn_cli.core.memory import guard

    what = f"sqrt-dk with {config.trials} trials x {config.n_keys} keys x d_k={max(config.d_k)}"
    guard(estimate_bytes(config), what, config.device)  # draws are made on the CPU, then moved

    gen = torch.Generator().manual_seed(config.seed)  # same stream as torch.manual_seed(seed)
    same = sqrt_dk_text_draws(asdict(config))  # per d_k: are this row's draws the text's? (published decides)

    def softmax_stats(logits: torch.Tensor) -> tuple[float, float]:  # (mean max weight, mean |d w_0 / d logits|)
        s = logits.detach().clone().requires_grad_()  # (trials, n_keys)
        w = torch.softmax(s, -1)  # (trials, n_keys)
        w[:, 0].sum().backward()  # how strongly does the first logit move the first weight?
        assert s.grad is not None  # backward() filled it
        return w.max(-1).values.mean().item(), s.grad.norm(dim=-1).mean().item()

    rows = []
    for i, d in enumerate(config.d_k):
        q = torch.randn(config.trials, 1, d, generator=gen).to(config.device)  # (trials, 1, d_k)
        k = torch.randn(config.trials, config.n_keys, d, generator=gen).to(config.device)  # (trials, n_keys, d_k)
        raw = (q @ k.transpose(1, 2)).squeeze(1)  # (trials, n_keys)
        del q, k
        scaled = raw / d**0.5  # (trials, n_keys)
        (mw_raw, g_raw), (mw_scaled, g_scaled) = softmax_stats(raw), softmax_stats(scaled)
        rows.append(Row(d, raw.std().item(), scaled.std().item(), mw_raw, mw_scaled, g_raw, g_scaled, same[i]))
        del raw, scaled
        if progress is not None:
            progress(ProgressEvent(i + 1, len(config.d_k), f"d_k={d}"))
    return Result(config=asdict(config), rows=rows)
