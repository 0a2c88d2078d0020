"""Length extrapolation: one tiny decoder per position scheme, trained at n, tested at 2n and 4n.

Taught in chapter 05 (``chapters/05_positions.ipynb``), which runs the experiment below.

The task, "k back": the input is a sequence of symbols drawn uniformly from an alphabet of 20,
and at every position t >= k the model must output the symbol at t - k (positions t < k carry
no loss). The answer depends only on the relative offset k, never on the absolute position, so
a model whose position information is relative has no reason to fail on longer sequences,
while one that learned absolute positions meets positions it never saw. Since the symbols are
independent and uniform, a model that does not read position t - k is right with probability
1/20 at best: the chance level.

The experiment, fixed before it was run (``EXPERIMENT``): k = 2, training length n = 16, a
decoder of width 32 (4 heads, 2 blocks, d_ff 64, pre-LN) per scheme ("learned",
"sinusoidal", "rope", "alibi" and "none" as a control), seeds 0, 1, 2, Adam at 3e-3 on fresh
batches of 32; evaluation on 512 held-out sequences of each length n, 2n, 4n, reading the
argmax at every position (the inputs are given, so nothing is generated). The learned table has
4n rows so that the longer sequences can be run at all; rows n .. 4n - 1 never receive a
gradient and keep their random initial values.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from npformer.core.model import DecoderConfig, forward, init_params, loss_and_grads
from npformer.core.optim import Adam
from npformer.training.experiment import map_in_processes
from npformer.training.tasks import ALPHABET_SIZE
from npformer.training.train import one_blas_thread

#: The probability of the right symbol for a model that does not read position t - k.
CHANCE = 1.0 / ALPHABET_SIZE


@dataclasses.dataclass(frozen=True)
class ExtrapolationConfig:
    """One run: a position scheme, a seed, the task's offset and length, the model, Adam."""

    positions: str = "learned"
    seed: int = 0
    offset: int = 2
    train_length: int = 16
    longest: int = 64  # the longest evaluated length: the learned table's rows
    steps: int = 500
    batch_size: int = 32
    lr: float = 3e-3
    d_model: int = 32
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 64
    dtype: str = "float32"

    def __post_init__(self):
        fn = "ExtrapolationConfig"
        counts = (self.offset, self.steps, self.batch_size, self.seed + 1)
        if min(counts) < 1 or not self.offset < self.train_length <= self.longest:
            raise ValueError(
                f"{fn}: offset, steps, batch_size must be >= 1, seed >= 0, and offset < "
                f"train_length <= longest (or no position has an answer), got {self}"
            )
        if not self.lr > 0 or self.dtype not in ("float32", "float64"):
            raise ValueError(f"{fn}: lr must be > 0 and dtype float32 or float64, got {self}")
        self.model_config()  # the model checks the rest (d_model % num_heads, even widths)

    def model_config(self) -> DecoderConfig:
        """The decoder: 20 symbols, a learned table (if any) of ``longest`` rows."""
        return DecoderConfig(
            vocab_size=ALPHABET_SIZE,
            d_model=self.d_model,
            num_heads=self.num_heads,
            num_layers=self.num_layers,
            d_ff=self.d_ff,
            max_len=self.longest,
            positions=self.positions,
        )


#: The experiment of chapter 05, fixed before it was run: schemes x seeds at these settings.
EXPERIMENT = {
    "schemes": ("learned", "sinusoidal", "rope", "alibi", "none"),
    "seeds": (0, 1, 2),
    "length_factors": (1, 2, 4),  # evaluate at n, 2n, 4n
    "eval_size": 512,
    "eval_seed": 12345,
}


def k_back_batch(rng: np.random.Generator, batch_size: int, length: int, offset: int):
    """A batch of the task: tokens (B, T), targets (B, T) with target[t] = token[t - k] for
    t >= k (0 elsewhere), and the 0/1 loss mask (B, T), 1 where t >= k."""
    B, T, k = batch_size, length, offset
    tokens = rng.integers(0, ALPHABET_SIZE, size=(B, T))  # (B, T)
    targets = np.zeros_like(tokens)  # (B, T)
    targets[:, k:] = tokens[:, :-k]
    loss_mask = np.zeros((B, T))
    loss_mask[:, k:] = 1.0
    return tokens, targets, loss_mask


class ExtrapolationResult(NamedTuple):
    """A trained run: its configuration, loss curve, and accuracy at every evaluated position."""

    config: ExtrapolationConfig
    losses: np.ndarray  # (steps,)
    accuracy: dict  # length -> (length,) share right at each position (nan where t < k)
    params: dict | None
    interpolated: dict | None = None  # RoPE only: the same, with position interpolation
    windowed: dict | None = None  # lengths above n: the same, each query seeing its last n keys
    near_far: dict | None = None  # 4n: each query seeing its last n/2 keys and n/2 at 3n back
    interpolated_read: dict | None = None  # RoPE only: interpolated, scored at token[t - k L/n]


def train_k_back(config: ExtrapolationConfig) -> tuple[dict, np.ndarray]:
    """Train from scratch at ``config.train_length``; returns (params, losses (steps,))."""
    rng = np.random.default_rng(config.seed)
    model_config = config.model_config()
    dtype = np.dtype(config.dtype)
    params = init_params(model_config, rng, dtype=dtype)
    optimizer = Adam(params, lr=config.lr)
    losses = np.empty(config.steps)
    with one_blas_thread():
        for step in range(config.steps):
            tokens, targets, loss_mask = k_back_batch(
                rng, config.batch_size, config.train_length, config.offset
            )
            loss, grads = loss_and_grads(
                params, model_config, tokens, targets, loss_mask.astype(dtype)
            )
            optimizer.step(grads)
            losses[step] = loss
    return params, losses


def accuracy_by_position(
    params: dict,
    config: ExtrapolationConfig,
    length: int,
    n: int = 512,
    seed: int = 12345,
    interpolate: bool = False,
    window: int | None = None,
    distances=None,
    read_offset: int | None = None,
) -> np.ndarray:
    """Share of ``n`` held-out sequences of ``length`` whose argmax at t is token[t - k].

    The sequences come from their own generator (``seed``). ``interpolate`` runs a RoPE model
    with positions m n / length (``DecoderConfig.rope_scale``). ``window`` lets each query attend
    only to its last ``window`` keys (itself included), so that no query-key distance exceeds
    window - 1. ``distances`` (a sequence of integers in [0, length)) lets each query attend
    only to the keys at those distances back (0 is itself); it cannot be combined with
    ``window``. ``read_offset`` scores the argmax against token[t - read_offset] instead of the
    task's token[t - k] (default k). Returns (length,), nan where t < the offset read.
    """
    read = config.offset if read_offset is None else read_offset
    tokens, _, _ = k_back_batch(np.random.default_rng(seed), n, length, config.offset)
    targets = np.zeros_like(tokens)  # (n, T)
    targets[:, read:] = tokens[:, :-read]
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    mask = None
    if window is not None:
        mask = (j <= i) & (i - j < window)  # (T, T) causal, distances 0 .. window - 1
    if distances is not None:
        allowed = np.zeros(length, dtype=bool)
        allowed[np.asarray(distances)] = True
        mask = (j <= i) & allowed[np.clip(i - j, 0, length - 1)]  # (T, T)
    model = config.model_config()
    if interpolate:  # RoPE turns position m by the angle of m n / length
        model = dataclasses.replace(model, rope_scale=config.train_length / length)
    with one_blas_thread():
        logits = forward(params, model, tokens, mask)[0]  # (n, T, vocab)
    right = (logits.argmax(axis=-1) == targets).mean(axis=0)  # (T,)
    return np.where(np.arange(length) >= read, right, np.nan)


def run_one(config: ExtrapolationConfig, keep: bool = False) -> ExtrapolationResult:
    """Train one run; evaluate it at n, 2n, 4n (``EXPERIMENT``), up to ``config.longest``; at
    the lengths above n also with a window of the last n keys (no distance beyond the trained
    ones) and, for RoPE, with position interpolation."""
    params, losses = train_k_back(config)
    lengths = [f * config.train_length for f in EXPERIMENT["length_factors"]]
    lengths = [L for L in lengths if L <= config.longest]
    size, seed = EXPERIMENT["eval_size"], EXPERIMENT["eval_seed"]
    accuracy = {L: accuracy_by_position(params, config, L, n=size, seed=seed) for L in lengths}
    interpolated = None
    if config.positions == "rope":
        interpolated = {
            L: accuracy_by_position(params, config, L, n=size, seed=seed, interpolate=True)
            for L in lengths
            if L > config.train_length
        }
    n = config.train_length
    windowed = {
        L: accuracy_by_position(params, config, L, n=size, seed=seed, window=n)
        for L in lengths
        if L > n
    }
    # Two more measures on the same trained models:
    # near_far: at 4n, each query sees its last n/2 keys and the n/2 keys 3n .. 3n + n/2 - 1
    # back: as many keys as the window of n, but some at distances far beyond the trained ones.
    # interpolated_read: RoPE with interpolation, scored against token[t - k L / n], the token
    # whose squeezed distance is the trained offset k.
    near_far = None
    L = 4 * n
    if L in accuracy:
        near = np.arange(n // 2)
        far = np.arange(3 * n, 3 * n + n // 2)
        near_far = {
            L: accuracy_by_position(
                params, config, L, n=size, seed=seed, distances=np.concatenate([near, far])
            )
        }
    interpolated_read = None
    if config.positions == "rope":
        interpolated_read = {
            L: accuracy_by_position(
                params, config, L, n=size, seed=seed, interpolate=True,
                read_offset=config.offset * L // n,
            )
            for L in lengths
            if L > n and (config.offset * L) % n == 0
        }  # fmt: skip
    return ExtrapolationResult(
        config, losses, accuracy, params if keep else None, interpolated, windowed,
        near_far, interpolated_read,
    )  # fmt: skip


def run_configs(configs, workers: int | None = None) -> list[ExtrapolationResult]:
    """Run ``configs`` in parallel (see ``npformer.training.experiment.map_in_processes``: one
    process per core, capped by $NPFORMER_WORKERS, each with one BLAS thread). Results in the given
    order."""
    return map_in_processes(run_one, list(configs), workers)


def past_training_accuracy(result: ExtrapolationResult, length: int) -> float:
    """Mean accuracy over the positions t >= n of a sequence of ``length`` (> n): the part of
    the sequence the model never saw in training."""
    n = result.config.train_length
    if length <= n or length not in result.accuracy:
        raise ValueError(
            f"past_training_accuracy: length={length} must be an evaluated length above n={n}"
        )
    return float(np.mean(result.accuracy[length][n:]))


def in_range_accuracy(result: ExtrapolationResult) -> float:
    """Mean accuracy over the answered positions k <= t < n of a training-length sequence."""
    n = result.config.train_length
    return float(np.nanmean(result.accuracy[n]))


def fine_tune(
    params: dict,
    config: ExtrapolationConfig,
    length: int,
    steps: int,
    interpolate: bool,
    seed: int = 1000,
) -> tuple[dict, np.ndarray]:
    """Continue training a copy of ``params`` on sequences of ``length`` for ``steps`` Adam
    steps (a fresh optimizer, the run's learning rate). ``interpolate`` (RoPE only) turns
    position m by the angle of m n / length during the fine-tune, as position interpolation
    does. Returns (the fine-tuned params, losses (steps,)); ``params`` is left unchanged."""
    fn = "fine_tune"
    if interpolate and config.positions != "rope":  # else rope_scale would change nothing
        raise ValueError(f"{fn}: interpolate needs positions='rope', got {config.positions!r}")
    model = config.model_config()
    if interpolate:
        model = dataclasses.replace(model, rope_scale=config.train_length / length)
    dtype = np.dtype(config.dtype)
    params = {name: np.array(value, copy=True) for name, value in params.items()}
    optimizer = Adam(params, lr=config.lr)
    rng = np.random.default_rng(seed)
    losses = np.empty(steps)
    with one_blas_thread():
        for step in range(steps):
            tokens, targets, loss_mask = k_back_batch(rng, config.batch_size, length, config.offset)
            loss, grads = loss_and_grads(params, model, tokens, targets, loss_mask.astype(dtype))
            optimizer.step(grads)
            losses[step] = loss
    return params, losses
