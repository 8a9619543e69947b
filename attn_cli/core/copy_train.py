"""The exact engine: the copy-task models (W9 2.3's attention encoder-decoder, the Week 8 plain one) and
one run, the W9 2.3 way, bit for bit (design notes: ``docs/design.md``, section ``attn_cli.core.copy_train``)."""

from __future__ import annotations

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_cli.core.copy_spec import BOS, EMBED, VOCAB, RunOutcome, RunSpec, StepCallback
from attn_cli.core.numerics import effective_isa, prepare_device
from attn_cli.core.optim import adam

StepOut = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]  # logits (B, V), state (B, h), weights (B, T)
Encoded = tuple[torch.Tensor, torch.Tensor]  # encoder states (B, T, h), initial decoder state (B, h)


class AttnSeq2Seq(nn.Module):
    """GRU encoder; GRU decoder cell fed [embedding; context]; readout from [state; context]. The context:
    dot-product attention of the decoder state over all encoder states, scaled by sqrt(h), computed
    before the cell update (input to the cell) and after it (input to the readout)."""

    uses_attention = True
    # both switches give the program's bits (tested); the defaults are faster
    contiguous_states = True  # one contiguous copy of the encoder states per batch, not the GRU's strided view
    program_calls = False  # False: F.embedding, torch.gru_cell, F.linear called directly, not nn.Module.__call__

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
        ``record``, one (T,) row per decoder step; and the diagonal fraction: how often, over all B
        sequences and steps, they peak at the step's own input position (plain model: [], None)."""
        enc, state = encoded if encoded is not None else self.encode(src)
        tok = torch.full((src.size(0),), BOS, device=src.device)  # (B,)
        res, rows, hits, steps = [], [], 0, 0
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


def build_model(model: str, hidden: int) -> AttnSeq2Seq:
    """A fresh model; the caller seeds torch first (parameter creation draws from the RNG)."""
    classes = {"attention": AttnSeq2Seq, "plain": PlainSeq2Seq}
    if model not in classes:
        raise ValueError(f"unknown model {model!r}; choose from {', '.join(classes)}")
    return classes[model](hidden)


# --------------------------------------------------------------------------- one run

PROGRESS_EVERY_S = 0.2  # at most this often a progress report (plus the last step)


def make_batch(batch_size: int, length: int, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """One draw of the program's ``batch(B)``: src (B, T) digits, tgt_in (B, T) = [BOS, src[:, :-1]]."""
    src = torch.randint(0, 10, (batch_size, length))  # (B, T), drawn on the CPU generator
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), src[:, :-1]], 1)  # (B, T)
    return src.to(device), tgt_in.to(device)


def train_and_evaluate(
    spec: RunSpec, device: str = "cpu", progress: StepCallback = None, program_layout: bool = False
) -> RunOutcome:
    """Train ``spec.model`` on the copy task and evaluate it, exactly as the W9 2.3 program does.
    ``program_layout=True``: the program's strided encoder states, module calls and Adam's public
    methods (which import torch._dynamo): the same floats, slower; the benchmark's stand-in for the program."""
    prepare_device(device)  # cuda: deterministic kernels, no TF32, in this (worker) process too
    start, cpu = time.perf_counter(), time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the program's torch.set_num_threads(1)
    try:
        torch.manual_seed(spec.seed)
        model = build_model(spec.model, spec.hidden)
        model.contiguous_states = not program_layout
        model.program_calls = program_layout
        if device != "cpu":
            model = model.to(device)
        final_loss = _train(model, spec, device, progress, program_layout, start)
        src, tgt_in = make_batch(spec.eval_size, spec.length, device)  # one evaluation batch
        model.eval()  # no dropout or batch norm here: changes nothing numerically
        with torch.no_grad():
            encoded = model.encode(src)  # (B, T, h), (B, h): shared by both decoders
            forced = (model(src, tgt_in, encoded).argmax(-1) == src).float().mean().item()
            free, rows, diagonal = model.generate(src, spec.length, encoded, record=0)  # (B, T)
            correct = free == src  # (B, T)
        return RunOutcome(
            spec=spec,
            teacher_forced=forced,
            free_running=correct.float().mean().item(),
            exact=correct.all(1).float().mean().item(),
            seconds=time.perf_counter() - start,
            final_loss=final_loss,
            example_src=src[0].tolist(),
            example_weights=torch.stack(rows).tolist() if rows else [],  # (T_out, T_in) for sequence 0
            engine="exact",
            cpu_seconds=time.process_time() - cpu,
            diagonal=diagonal,
            isa=effective_isa(),
        )
    finally:
        torch.set_num_threads(threads)


def _train(
    model: AttnSeq2Seq, spec: RunSpec, device: str, progress: StepCallback, program_layout: bool, start: float
) -> float:
    """``spec.steps`` Adam steps on fresh batches, with clipping; the last step's loss (nan without steps)."""
    params = list(model.parameters())
    opt = adam(params, spec.lr, program_calls=program_layout)
    loss, last_report = None, start
    for step in range(1, spec.steps + 1):
        src, tgt_in = make_batch(spec.batch_size, spec.length, device)
        loss = F.cross_entropy(model(src, tgt_in).reshape(-1, VOCAB), src.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, spec.clip)
        opt.step()
        if progress is not None:
            now = time.perf_counter()
            if now - last_report >= PROGRESS_EVERY_S or step == spec.steps:
                progress(step, spec.steps, loss.item())
                last_report = now
    return loss.item() if loss is not None else float("nan")
