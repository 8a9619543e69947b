"""Exercise 10, permuting the source of cross-attention."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from attn_cli.experiments.exercises.common import Config, ProgressCallback

if TYPE_CHECKING:
    from torch import Tensor

TITLE = "permuting the source"
D_MODEL, HEADS, N_Q, M_SRC, VALID = 16, 4, 5, 7, 4
TOL = 1e-5


@dataclass
class Check:
    name: str
    max_diff: float
    unchanged: bool  # max_diff < TOL
    expected_unchanged: bool


@dataclass
class Result:
    d: int
    h: int
    n: int
    m: int
    valid: int
    tolerance: float
    checks: list[Check] = field(default_factory=list)
    all_as_expected: bool = False


def sinusoidal(n: int, d: int) -> Tensor:
    import torch

    pos = torch.arange(n, dtype=torch.float32)[:, None]  # (n, 1)
    freq = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,)
    P = torch.zeros(n, d)
    P[:, 0::2], P[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return P  # (n, d)


def _check(name: str, out: Tensor, ref: Tensor, expected: bool) -> Check:
    diff = (out - ref).abs().max().item()
    return Check(name, diff, diff < TOL, expected)


def run(config: Config, progress: ProgressCallback = None) -> Result:
    import torch

    from attn_cli.core.attention import MultiHeadAttention

    torch.manual_seed(config.seed)
    mha = MultiHeadAttention(D_MODEL, HEADS, dropout=0.0).eval()
    A, B = torch.randn(1, N_Q, D_MODEL), torch.randn(1, M_SRC, D_MODEL)
    perm = torch.randperm(M_SRC)  # a permutation of the source that is not the identity
    while torch.equal(perm, torch.arange(M_SRC)):
        perm = torch.randperm(M_SRC)
    within = torch.cat([torch.randperm(VALID), VALID + torch.randperm(M_SRC - VALID)])  # keeps {0..l-1}
    crossing = torch.arange(M_SRC)
    crossing[[0, M_SRC - 1]] = crossing[[M_SRC - 1, 0]]  # swaps a valid row with a masked one
    with torch.no_grad():  # parts 1 and 2: permuting the keys and values, the keys only, and under valid_lens
        ref, _ = mha(A, B, B)
        checks = [
            _check("ΠB as keys and values", mha(A, B[:, perm], B[:, perm])[0], ref, True),
            _check("ΠB as keys only", mha(A, B[:, perm], B)[0], ref, False),
        ]
        lens = torch.tensor([VALID])
        ref_l, _ = mha(A, B, B, lens)
        for name, rows, expected in (
            (f"permute within the first {VALID} and within the rest", within, True),
            (f"swap row 0 with row {M_SRC - 1} (masked)", crossing, False),
        ):
            out = mha(A, B[:, rows], B[:, rows], lens)[0]
            checks.append(_check(f"valid_lens {VALID}: {name}", out, ref_l, expected))
        # part 3: encoder (self-attention, no positions) then decoder cross-attention
        words = {w: torch.randn(1, 1, D_MODEL) for w in ("dog", "bites", "man")}
        encoder = MultiHeadAttention(D_MODEL, HEADS, dropout=0.0).eval()
        decoder_queries = torch.randn(1, 3, D_MODEL)

        def translate(sentence: str, positions: bool) -> Tensor:
            x = torch.cat([words[w] for w in sentence.split()], 1)  # (1, 3, d)
            if positions:
                x = x + sinusoidal(3, D_MODEL)[None]
            memory, _ = encoder(x, x, x)  # (1, 3, d): permutation equivariant without positions
            return mha(decoder_queries, memory, memory)[0]  # (1, 3, d)

        s1, s2 = "dog bites man", "man bites dog"
        for name, pos in (("no positions", False), ("sinusoidal positions", True)):
            checks.append(_check(f"{s1} vs {s2}, {name}", translate(s1, pos), translate(s2, pos), not pos))
    as_expected = all(c.unchanged == c.expected_unchanged for c in checks)
    return Result(D_MODEL, HEADS, N_Q, M_SRC, VALID, TOL, checks, as_expected)
