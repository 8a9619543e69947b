"""What the exercises share: their one Config, the type of run()'s ``progress``, and the size of
the text's copy-both data (N x d), which exercises 1, 2, 3 and 5 draw (--quick: 4000 samples)."""

from __future__ import annotations

from dataclasses import dataclass

from attn_cli.experiments import ProgressCallback as ProgressCallback  # for every exercise's run()
from attn_cli.experiments import QuickConfig
from attn_cli.published.settings import TEXT

SAMPLES = TEXT["d2l-copy-both-one-head"]["samples"]  # N of the text's copy-both data
DIM = TEXT["d2l-copy-both-one-head"]["d_v"]  # d of the text's copy-both data
ONE_HEAD_ERROR = 0.5**0.5  # sqrt(1/2): the best readout of [v1; v2] from one Gaussian mixture
NUMBERS = tuple(range(1, 13))


@dataclass(frozen=True)
class Config(QuickConfig):
    """The settings of all twelve exercises: each exercise's ``run(config)`` reads the fields it names
    (every exercise starts from ``torch.manual_seed(seed)``; ex6 times ``device``, ex3 and ex5 solve on the CPU)."""

    exercises: tuple[int, ...] = NUMBERS  # which exercises to run, in this order
    samples: int = SAMPLES  # ex1, ex2, ex5: N of the copy-both data; ex3 samples max(200, N // 5)
    mlp_hidden: int = 16  # ex1: hidden width of the per-coordinate perceptron (1 -> H -> H -> 2)
    mlp_steps: int = 300  # ex1: full-batch Adam steps
    mlp_points: int = 4096  # ex1: training coordinates for the perceptron (scalar examples)
    resamples: int = 1000  # ex4: resamples of the keys (the exercise's 1000; --quick keeps them: ms)
    timing_n: int = 512  # ex6: sequence length n (the exercise's 512)
    timing_repeats: int = 3  # ex6: timed calls per head count after one warm-up (median kept)
    train_steps: int = 300  # ex12: Adam steps (batches of 256) per head count

    QUICK = dict(samples=4000, mlp_steps=150, mlp_points=1024, timing_n=128, timing_repeats=2, train_steps=150)
