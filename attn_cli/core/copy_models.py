"""The copy-task models: W9 2.3's attention encoder-decoder and the Week 8 plain one.

Design notes: ``docs/design.md``, section ``attn_cli.core.copy_models``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_cli.core.copy_spec import BOS, EMBED, VOCAB

StepOut = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]  # logits (B, V), state (B, h), weights (B, T)
Encoded = tuple[torch.Tensor, torch.Tensor]  # encoder states (B, T, h), initial decoder state (B, h)


class AttnSeq2Seq(nn.Module):
    """GRU encoder; GRU decoder cell fed [embedding; context]; readout from [state; context]. The context:
    dot-product attention of the decoder state over all encoder states, scaled by sqrt(h), computed
    before the cell update (input to the cell) and after it (input to the readout)."""

    uses_attention = True
    # True: one contiguous copy of the encoder states per batch, where the program hands every bmm
    # the GRU's strided (B, T, h) view: the same floats (tested), faster
    contiguous_states = True
    # False: the decoder calls the functions behind the program's modules (F.embedding,
    # torch.gru_cell, F.linear) directly: the same ops and bits (tested), without
    # nn.Module.__call__'s overhead per step; True: the program's module calls
    program_calls = False

    def __init__(self, hidden: int):
        super().__init__()
        context = hidden if self.uses_attention else 0  # the cell's and the readout's extra input
        self.emb = nn.Embedding(VOCAB, EMBED)
        self.encoder = nn.GRU(EMBED, hidden, batch_first=True)
        self.cell = nn.GRUCell(EMBED + context, hidden)
        self.out = nn.Linear(hidden + context, VOCAB)

    def attend(self, query: torch.Tensor, enc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, h); enc (B, T, h) are the keys AND the values -> context (B, h), weights (B, T)."""
        scores = torch.bmm(enc, query.unsqueeze(2)).squeeze(2) / math.sqrt(enc.size(2))  # (B, T)
        weights = torch.softmax(scores, dim=1)  # (B, T): where to look in the input
        context = torch.bmm(weights.unsqueeze(1), enc).squeeze(1)  # (B, h): weighted average of ALL states
        return context, weights

    # the decoder's three module calls, or (program_calls False) the functions behind them
    def embed(self, tok: torch.Tensor) -> torch.Tensor:  # (B,) -> (B, E); nn.Embedding: no padding or max norm
        return self.emb(tok) if self.program_calls else F.embedding(tok, self.emb.weight)

    def update(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:  # nn.GRUCell on a batch -> (B, h)
        if self.program_calls:
            return self.cell(x, state)
        c = self.cell
        return torch.gru_cell(x, state, c.weight_ih, c.weight_hh, c.bias_ih, c.bias_hh)

    def readout(self, x: torch.Tensor) -> torch.Tensor:  # -> logits (B, V)
        return self.out(x) if self.program_calls else F.linear(x, self.out.weight, self.out.bias)

    def step(self, tok: torch.Tensor, state: torch.Tensor, enc: torch.Tensor) -> StepOut:
        """tok (B,), state (B, h), enc (B, T, h) -> logits (B, V), new state (B, h), readout weights (B, T)."""
        # same op order as the program (embedding first): it fixes the autograd graph's
        # sequence numbers, hence the order in which gradients are summed
        x = self.embed(tok)  # (B, E)
        context, _ = self.attend(state, enc)  # (B, h), attention before the update
        state = self.update(torch.cat([x, context], 1), state)  # (B, h)
        context, weights = self.attend(state, enc)  # (B, h), attention after the update
        return self.readout(torch.cat([state, context], 1)), state, weights  # (B, V), (B, h), (B, T)

    def encode(self, src: torch.Tensor) -> Encoded:
        """src (B, T) -> encoder states (B, T, h), initial decoder state (B, h)."""
        enc, last = self.encoder(self.emb(src))  # (B, T, h), (1, B, h)
        if self.uses_attention and self.contiguous_states:
            enc = enc.contiguous()  # (B, T, h), same values
        return enc, last[0]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, encoded: Encoded | None = None) -> torch.Tensor:
        """Teacher forcing: src (B, T), tgt_in (B, T) = [BOS, src[:, :-1]] -> logits (B, T, V)."""
        enc, state = encoded if encoded is not None else self.encode(src)
        outs = []
        for t in range(tgt_in.size(1)):
            o, state, _ = self.step(tgt_in[:, t], state, enc)  # (B, V)
            outs.append(o)
        return torch.stack(outs, 1)  # (B, T, V)

    @torch.no_grad()
    def generate(
        self, src: torch.Tensor, length: int, encoded: Encoded | None = None, record: int = 0
    ) -> tuple[torch.Tensor, list[torch.Tensor], float | None]:
        """Free running from BOS: src (B, T) -> tokens (B, length); the readout weights of sequence
        ``record``, one (T,) row per decoder step (empty for the plain model); and the diagonal
        fraction: over all B sequences and decoder steps, how often the readout weights peak at the
        step's own input position (None for the plain model).  Reading the weights changes no token.
        """
        enc, state = encoded if encoded is not None else self.encode(src)
        tok = torch.full((src.size(0),), BOS, device=src.device)  # (B,)
        res, rows = [], []
        hits, steps = 0, 0
        for t in range(length):
            o, state, weights = self.step(tok, state, enc)
            tok = o.argmax(-1)  # (B,)
            res.append(tok)
            if weights is not None:
                rows.append(weights[record])  # (T,)
                if t < weights.size(1):
                    hits += int((weights.argmax(1) == t).sum())  # (B,) -> sequences peaking at t
                steps += weights.size(0)
        return torch.stack(res, 1), rows, (hits / steps if steps else None)  # (B, length), ...


class PlainSeq2Seq(AttnSeq2Seq):
    """The Week 8 encoder-decoder: W9 2.3's model without the attention context (the decoder cell
    on the token embedding alone, from the encoder's last state; a linear readout of the state)."""

    uses_attention = False

    def step(self, tok: torch.Tensor, state: torch.Tensor, enc: torch.Tensor) -> StepOut:
        state = self.update(self.embed(tok), state)  # (B, h)
        return self.readout(state), state, None  # (B, V), (B, h), no weights


MODEL_CLASSES = {"attention": AttnSeq2Seq, "plain": PlainSeq2Seq}


def build_model(model: str, hidden: int) -> AttnSeq2Seq:
    """A fresh model; the caller seeds torch first (parameter creation draws from the RNG)."""
    try:
        cls = MODEL_CLASSES[model]
    except KeyError:
        raise ValueError(f"unknown model {model!r}; choose from {', '.join(MODEL_CLASSES)}") from None
    return cls(hidden)
