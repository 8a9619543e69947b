"""How a trained value is judged: by where the published number falls among seeds (design notes:
``docs/design.md``, section ``attn_cli.published.seed_rule``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

FLOOR = 0.02  # the narrowest interval: a few sequences in 1000 between builds
LEVEL = 0.99  # two-sided prediction level
MIN_SEEDS = 5  # attn verify judges trained cells over this many seeds by default (``--seeds N``)
MAX_SEEDS = 1024  # the most ``attn verify --seeds N`` accepts: 1024 training runs per cell


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom (0.5 < p < 1): what
    ``scipy.stats.t.ppf`` computes, by the function it calls (a cheaper import)."""
    if not 0.5 < p < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df > 0, not p={p}, df={df}")
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


@dataclass(frozen=True)
class Interval:
    mean: float
    std: float  # sample standard deviation (n - 1); 0 for one seed
    n: int
    half_width: float  # max(FLOOR, t * std * sqrt(1 + 1/n))

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def contains(self, value: float) -> bool:
        return self.low - 1e-12 <= value <= self.high + 1e-12

    def record(self) -> dict:
        """The interval as plain data (JSON): mean, half-width, its ends, n and std."""
        return dict(mean=self.mean, half_width=self.half_width, low=self.low, high=self.high, n=self.n, std=self.std)


def interval(values: Sequence[float], floor: float = FLOOR, level: float = LEVEL) -> Interval:
    """The prediction interval of the rule above for ``values`` (one per seed)."""
    xs = [float(v) for v in values]
    if not xs or not all(math.isfinite(x) for x in xs):
        raise ValueError("the seed rule needs at least one finite value")
    n = len(xs)
    mean = sum(xs) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    spread = t_quantile((1 + level) / 2, n - 1) * std * math.sqrt(1 + 1 / n) if n > 1 else 0.0
    return Interval(mean=mean, std=std, n=n, half_width=max(floor, spread))


def formula() -> str:
    """The interval as help, docs/checking.md and :data:`RULE` write it, from the constants now."""
    return f"mean ± max({FLOOR:g}, t({(1 + LEVEL) / 2:g}, n-1) · std · √(1 + 1/n))"


RULE = f"published inside the seeds' {LEVEL:.0%} prediction interval: {formula()}"


@dataclass
class SeedSample:
    """A trained value regenerated over several seeds: the first seed's value (printed as the
    text's program prints it) and every seed's value (judged by :data:`RULE`)."""

    value: float  # the first seed's value
    values: list[float] = field(default_factory=list)  # one per seed, first seed first
    seeds: list[int] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)  # the engine of each seed's run
    rule: str = RULE

    def interval(self) -> Interval:
        return interval(self.values or [self.value])

    def record(self) -> dict:
        """The fields a verify record adds: one value per seed, the rule, and its interval
        (:meth:`Interval.record`: the band the published value must fall in)."""
        fields = {k: v for k, v in asdict(self).items() if k != "value"}
        return {**fields, "interval": self.interval().record()}

    def __str__(self) -> str:
        if len(self.values) <= 1:
            return f"{self.value:.4g}"
        iv = self.interval()
        return (
            f"{self.value:.3f} (seed {self.seeds[0]}); {iv.n} seeds {iv.mean:.3f} ± {iv.std:.3f}, "
            f"interval {iv.mean:.3f} ± {iv.half_width:.3f}"
        )


def seed_values(sample: SeedSample | dict | float) -> list[float]:
    """The per-seed values of a SeedSample, of one read back from JSON, or of a plain number."""
    if isinstance(sample, SeedSample):
        return sample.values or [sample.value]
    if isinstance(sample, dict):  # a sample read back from JSON
        return sample.get("values") or [sample["value"]]
    return [sample]


def judge(sample: SeedSample | dict | float, published: float) -> bool:
    """The rule: ``published`` inside the prediction interval of ``sample``'s seeds."""
    return interval(seed_values(sample)).contains(float(published))
