"""What the exercises share: a Config base, and the size of the text's copy-both data (N x d),
which exercises 1, 2, 3 and 5 draw (``--quick`` shrinks N to ``QUICK_SAMPLES``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from attn_cli.published.settings import TEXT

if TYPE_CHECKING:
    from typing_extensions import Self

SAMPLES = TEXT["d2l-copy-both-one-head"]["samples"]  # N of the text's copy-both data
DIM = TEXT["d2l-copy-both-one-head"]["d_v"]  # d of the text's copy-both data
QUICK_SAMPLES = 4000  # N under --quick
ONE_HEAD_ERROR = 0.5**0.5  # sqrt(1/2): the best readout of [v1; v2] from one Gaussian mixture


@dataclass(frozen=True)
class ExerciseConfig:
    """Every exercise's Config derives from this: ``seed`` seeds its draws, and
    ``quick()`` applies the subclass's ``QUICK`` sizes (then any overrides)."""

    seed: int = 0  # torch.manual_seed(seed) and/or a torch.Generator seeded with it
    QUICK: ClassVar[dict[str, Any]] = {}  # field -> value under --quick (a class attribute, not a field)

    @classmethod
    def quick(cls, **overrides: Any) -> Self:
        return cls(**{**cls.QUICK, **overrides})
