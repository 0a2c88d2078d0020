"""Training the encoder-decoder on a sequence-to-sequence task (reversal), and measuring
exposure bias on the trained model.

Taught in chapter 07 (``chapters/07_encoder_decoder.ipynb``).

The task: a source of L symbols drawn uniformly from an alphabet of A, and as target the same
symbols in reverse order. Token 0 is the start token; the symbols are the tokens 1 .. A, shared
by source and target (one vocabulary, as the tied embedding of the model wants):

    source       x_1  x_2  ..  x_L
    decoder in   <s>  x_L  ..  x_2         (the target shifted right: teacher forcing)
    target       x_L  x_{L-1} .. x_1

Training: Adam (betas 0.9, 0.98, eps 1e-9 as in the 2017 paper) on the label-smoothed
cross-entropy of :mod:`npformer.core.label_smoothing`, the learning rate set at every step by the
warm-up schedule of :mod:`npformer.training.schedules`, a fresh seeded batch at every step.

Evaluation compares two ways of running the same trained decoder on fresh sources:
teacher-forced (its input at step t is the true prefix) and free-running (its input is its own
greedy choices, :func:`npformer.core.encoder_decoder.greedy_generate`); and a third, where one wrong
token is planted in an otherwise true prefix, to see what a single error does to the steps
after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from npformer.core.encoder_decoder import (
    EncoderDecoderConfig,
    encoder_decoder_backward,
    encoder_decoder_forward,
    greedy_generate,
    init_encoder_decoder_params,
    named_parameters,
)
from npformer.core.label_smoothing import (
    label_smoothed_cross_entropy,
    label_smoothed_cross_entropy_backward,
)
from npformer.core.optim import Adam
from npformer.training.schedules import warmup_inverse_sqrt

#: The start token; the symbols are 1 .. num_symbols.
START = 0


class ReversalBatch(NamedTuple):
    """Sources, decoder inputs (teacher forcing) and targets of the reversal task."""

    src: np.ndarray  # (B, L) int64 symbols in 1 .. A
    tgt_in: np.ndarray  # (B, L) int64: START, then the target without its last token
    tgt_out: np.ndarray  # (B, L) int64: the source reversed


def reversal_batch(
    rng: np.random.Generator, batch_size: int, length: int, num_symbols: int
) -> ReversalBatch:
    """A batch of the reversal task: uniform symbols in 1 .. num_symbols, target reversed."""
    src = rng.integers(1, num_symbols + 1, (batch_size, length))  # (B, L)
    return reversal_of(src)


def reversal_of(src) -> ReversalBatch:
    """The decoder input and target of given sources: tgt_out = src reversed."""
    src = np.asarray(src).astype(np.int64)
    tgt_out = src[:, ::-1].copy()  # (B, L)
    start = np.full((src.shape[0], 1), START, dtype=np.int64)
    tgt_in = np.concatenate([start, tgt_out[:, :-1]], axis=1)  # (B, L) shifted right
    return ReversalBatch(src, tgt_in, tgt_out)


@dataclass(frozen=True)
class Seq2SeqRun:
    """One training run on the reversal task: the task, the model, the schedule, the seed."""

    length: int = 8
    num_symbols: int = 10
    d_model: int = 32
    num_heads: int = 4
    d_ff: int = 64
    num_layers: int = 1
    steps: int = 300
    batch_size: int = 32
    warmup: int = 60
    factor: float = 1.0
    smoothing: float = 0.1
    ramp: bool = True  # False: the rate starts at its peak (no warm-up), then decays the same
    moment_warmup: int = 0  # steps before training at rate 0: Adam's moments fill, weights stay
    fill_momentum: bool = True  # False: those steps fill v only; m starts at zero (Adam-2k)
    seed: int = 0
    ln: str = "post"  # "pre": each sublayer reads LN(stream), x + f(LN(x))

    def __post_init__(self):
        fn = "Seq2SeqRun"
        sizes = (self.length, self.num_symbols, self.d_model, self.num_heads, self.d_ff)
        if min(sizes + (self.num_layers, self.steps, self.batch_size, self.warmup)) < 1:
            raise ValueError(f"{fn}: every size, steps and warmup must be >= 1, got {self}")
        if not 0 <= self.smoothing < 1 or not self.factor > 0 or self.moment_warmup < 0:
            raise ValueError(
                f"{fn}: smoothing must lie in [0, 1), factor be > 0 and moment_warmup >= 0, got "
                f"{self.smoothing!r}, {self.factor!r} and {self.moment_warmup!r}"
            )

    def model_config(self) -> EncoderDecoderConfig:
        return EncoderDecoderConfig(
            vocab_size=self.num_symbols + 1,
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            num_encoder_layers=self.num_layers,
            num_decoder_layers=self.num_layers,
            ln=self.ln,
        )


class Seq2SeqResult(NamedTuple):
    params: dict
    config: EncoderDecoderConfig
    losses: np.ndarray  # (steps,) the label-smoothed training loss of every step
    rates: np.ndarray  # (steps,) the learning rate of every step


def train_reversal(run: Seq2SeqRun) -> Seq2SeqResult:
    """Train an encoder-decoder on reversal with the hand-written backward pass and Adam.

    With ``run.moment_warmup = m > 0``, m gradients on batches of a separate generator (seeded
    ``run.seed + 10**6``) first go through Adam at learning rate 0: its moment estimates fill
    while the weights stay at their initial values; the training steps and their batches are
    then the same as without it. With ``run.fill_momentum = False`` those gradients fill only
    the second moment v (``Adam.fill_second_moment``, as Liu et al.'s Adam-2k), and m starts
    from zero at the first training step. ``losses`` and ``rates`` cover the training steps.
    """
    config = run.model_config()
    rng = np.random.default_rng(run.seed)
    params = init_encoder_decoder_params(config, rng)
    named = dict(named_parameters(params))
    opt = Adam(named, lr=1e-3, betas=(0.9, 0.98), eps=1e-9)

    def gradients(batch):
        logits, cache = encoder_decoder_forward(batch.src, batch.tgt_in, params, config)
        loss, loss_cache = label_smoothed_cross_entropy(logits, batch.tgt_out, run.smoothing)
        grads = encoder_decoder_backward(
            label_smoothed_cross_entropy_backward(loss_cache), cache, params, config
        )
        return loss, dict(named_parameters(grads))

    side = np.random.default_rng(run.seed + 10**6)
    for _ in range(run.moment_warmup):
        _, grads = gradients(reversal_batch(side, run.batch_size, run.length, run.num_symbols))
        if run.fill_momentum:
            opt.lr = 0.0  # Adam's m and v take the gradient; the update is zero
            opt.step(grads)
        else:
            opt.fill_second_moment(grads)  # v only
    losses, rates = np.empty(run.steps), np.empty(run.steps)
    for step in range(1, run.steps + 1):
        loss, grads = gradients(reversal_batch(rng, run.batch_size, run.length, run.num_symbols))
        at = step if run.ramp else max(step, run.warmup)  # without the ramp: flat at the peak
        opt.lr = warmup_inverse_sqrt(at, run.d_model, run.warmup, run.factor)
        opt.step(grads)
        losses[step - 1], rates[step - 1] = loss, opt.lr
    return Seq2SeqResult(params, config, losses, rates)


class ExposureBias(NamedTuple):
    """Per-output-position accuracies of one trained model on fresh sources."""

    teacher_forced: np.ndarray  # (L,) accuracy at position t given the true prefix
    free_running: np.ndarray  # (L,) accuracy at position t given the model's own prefix
    after_first_error: np.ndarray  # (L,) free-running accuracy at t among the sources whose
    #   first error came before t (NaN where there is none)
    forced_after_first_error: np.ndarray  # (L,) teacher-forced accuracy at t on those same
    #   sources: what the true prefix gives there (the difference to the line above is what
    #   the model's own prefix costs on the sources where it erred)
    first_error_skips: float  # share of first errors that write the NEXT target token early
    clean_after: float  # teacher-forced accuracy at the positions after the planted token
    random_after: float  # the same, a random wrong symbol planted in the true prefix
    skip_after: float  # the same, the next target token planted (a skip, as the model's errors)
    skip_follows: float  # share of those positions that continue from the skipped place
    sequence_free_running: float  # share of sources reversed without a single error
    num_sources: int
    after_counts: np.ndarray | None = None  # (L,) how many sources the after_first_error
    #   accuracies at t average over: those whose first error came before t


def exposure_bias(params, config: EncoderDecoderConfig, src, plant_at: int, seed: int = 0):
    """Teacher-forced vs free-running accuracy by position, and what one planted error does.

    ``src`` (N, L) fresh sources. The planted error replaces the decoder input at position
    ``plant_at`` (0-based, in 1 .. L - 1) of the true prefix, the token that position t =
    plant_at reads, either by a different random symbol or by the token that should come one
    step later (a skip). The planted accuracies are teacher-forced accuracies over the
    positions plant_at .. L - 1, which all read the planted token; ``skip_follows`` counts the
    predictions equal to the target one step further on, as if the model had skipped a token.
    """
    batch = reversal_of(src)
    N, L = batch.src.shape
    if not 1 <= plant_at < L - 1:
        raise ValueError(
            f"exposure_bias: plant_at must lie in [1, {L - 2}] for src of shape {(N, L)}, "
            f"got {plant_at}"
        )
    num_symbols = config.vocab_size - 1
    truth = batch.tgt_out  # (N, L)
    logits, _ = encoder_decoder_forward(batch.src, batch.tgt_in, params, config)
    forced_right = logits.argmax(axis=-1) == truth  # (N, L)
    generated = greedy_generate(batch.src, params, config, START, L).tokens[:, 1:]  # (N, L)
    free_right = generated == truth  # (N, L)
    wrong = ~free_right
    has_error = wrong.any(axis=1)
    first = np.where(has_error, wrong.argmax(axis=1), L)  # (N,) first error, or L
    after, forced_after = np.full(L, np.nan), np.full(L, np.nan)
    after_counts = np.zeros(L, dtype=int)  # (L,) sources whose first error came before t
    for t in range(L):
        rows = first < t
        after_counts[t] = rows.sum()
        if rows.any():
            after[t] = free_right[rows, t].mean()
            forced_after[t] = forced_right[rows, t].mean()
    rows = np.flatnonzero(has_error & (first < L - 1))
    skips = float(np.mean(generated[rows, first[rows]] == truth[rows, first[rows] + 1]))
    rng = np.random.default_rng(seed)
    random_in = batch.tgt_in.copy()  # (N, L); input at plant_at is truth[:, plant_at - 1]
    shift = rng.integers(1, num_symbols, N)  # another symbol, uniform among the other A - 1
    random_in[:, plant_at] = (random_in[:, plant_at] - 1 + shift) % num_symbols + 1
    skip_in = batch.tgt_in.copy()
    skip_in[:, plant_at] = truth[:, plant_at]  # as if position plant_at - 1 had written it
    random_pred = encoder_decoder_forward(batch.src, random_in, params, config)[0].argmax(-1)
    skip_pred = encoder_decoder_forward(batch.src, skip_in, params, config)[0].argmax(-1)
    span = slice(plant_at, L - 1)  # positions that read the planted token and have a successor
    return ExposureBias(
        forced_right.mean(axis=0),
        free_right.mean(axis=0),
        after,
        forced_after,
        skips if rows.size else float("nan"),
        float(forced_right[:, span].mean()),
        float((random_pred == truth)[:, span].mean()),
        float((skip_pred == truth)[:, span].mean()),
        float((skip_pred[:, span] == truth[:, plant_at + 1 :]).mean()),
        float(free_right.all(axis=1).mean()),
        N,
        after_counts,
    )
