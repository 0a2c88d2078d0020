"""Look-back tasks with a known solution, and the one-layer attention model trained on them.

Taught in chapter 01 (``chapters/01_attention.ipynb``: one head learns to read the token k
positions back) and chapter 04's deeper page (``chapters/04_deeper_heads.ipynb``: a task that
needs two such look-ups at once, which two heads do and one head with a linear readout does not).

The task. A sequence of ``seq_len`` random tokens from ``vocab_size`` symbols is read as a
circle; at every position i the model must output, for each offset k in ``offsets``, the token
at position (i - k) mod seq_len. The solution is known: attend from i to i - k and copy.

The model. Each token enters as its one-hot symbol next to its one-hot position,
x_i = [onehot(token_i), onehot(i)] of width d_in = vocab_size + seq_len (chapter 05 gives
positions properly; here they are plain coordinates). One multi-head attention layer with
learned W_q, W_k, W_v of shape (d_in, d_model), split into ``num_heads`` heads, and a readout
W_o of shape (d_model, len(offsets) * vocab_size) gives one set of logits per offset:

    Q, K, V = X W_q, X W_k, X W_v;   Y = merge(attention(split(Q), split(K), split(V)));
    logits = Y W_o  -> (B, T, len(offsets), vocab_size).

The forward and backward pass call the attention core (``npformer.core.attention``) and the
head split/merge of ``npformer.core.multi_head``; training uses ``npformer.core.optim.Adam``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from npformer.core.attention import (
    AttentionCache,
    scaled_dot_product_attention,
    scaled_dot_product_attention_backward,
)
from npformer.core.model import masked_cross_entropy, masked_cross_entropy_backward
from npformer.core.multi_head import merge_heads, split_heads
from npformer.core.optim import Adam

#: The parameter names of the model, in order.
PARAM_NAMES = ("W_q", "W_k", "W_v", "W_o")


class LookbackTask(NamedTuple):
    """Output, at every position i, the token at (i - k) mod seq_len for each k in offsets."""

    vocab_size: int
    seq_len: int
    offsets: tuple[int, ...]

    @property
    def d_in(self) -> int:
        """Width of one encoded token: one-hot symbol and one-hot position side by side."""
        return self.vocab_size + self.seq_len

    @property
    def chance(self) -> float:
        """Accuracy of a guess that ignores the input, for all outputs of a position at once."""
        return float(self.vocab_size) ** -len(self.offsets)


def make_task(vocab_size: int, seq_len: int, offsets) -> LookbackTask:
    """A validated :class:`LookbackTask`; each offset in 1 .. seq_len - 1, no repeats."""
    offsets = tuple(int(k) for k in offsets)  # an offset outside 1 .. T - 1 would wrap
    if (
        not offsets
        or len(set(offsets)) != len(offsets)
        or not 0 < min(offsets) <= max(offsets) < seq_len
    ):
        raise ValueError(
            f"make_task: offsets {offsets} must be distinct integers in 1 .. {seq_len - 1} "
            f"(seq_len={seq_len})"
        )
    return LookbackTask(vocab_size, seq_len, offsets)


def sample_batch(task: LookbackTask, batch_size: int, rng: np.random.Generator):
    """Random tokens (B, T) and their targets (B, T, len(offsets)), both int64."""
    tokens = rng.integers(0, task.vocab_size, size=(batch_size, task.seq_len))  # (B, T)
    return tokens, targets_of(task, tokens)


def targets_of(task: LookbackTask, tokens) -> np.ndarray:
    """targets[b, i, r] = tokens[b, (i - offsets[r]) mod T]. Shapes: (B, T) -> (B, T, m)."""
    positions = np.arange(task.seq_len)
    source = (positions[:, None] - np.array(task.offsets)[None, :]) % task.seq_len  # (T, m)
    return tokens[:, source]  # (B, T, m)


def _tokens(fn: str, task: LookbackTask, tokens) -> np.ndarray:
    """(B, seq_len) ids of the task's vocabulary: others would be encoded or scored wrongly."""
    tokens = np.asarray(tokens)
    if (
        tokens.ndim != 2
        or tokens.shape[1] != task.seq_len
        or not 0 <= tokens.min() <= tokens.max() < task.vocab_size
    ):
        raise ValueError(
            f"{fn}: tokens must have shape (B, {task.seq_len}) and lie in 0 .. "
            f"{task.vocab_size - 1}, got shape {tokens.shape}"
        )
    return tokens


def encode(task: LookbackTask, tokens) -> np.ndarray:
    """One-hot symbol and one-hot position side by side: (B, T) -> (B, T, vocab_size + T)."""
    tokens = _tokens("encode", task, tokens)
    B, T = tokens.shape
    X = np.zeros((B, T, task.d_in))
    X[np.arange(B)[:, None], np.arange(T)[None, :], tokens] = 1.0  # the symbol
    X[:, np.arange(T), task.vocab_size + np.arange(T)] = 1.0  # the position
    return X


def init_params(task: LookbackTask, d_model: int, rng: np.random.Generator) -> dict:
    """Random W_q, W_k, W_v (d_in, d_model) and W_o (d_model, m vocab_size), N(0, 1/fan_in)."""
    d_out = len(task.offsets) * task.vocab_size
    shapes = {"W_q": (task.d_in, d_model), "W_k": (task.d_in, d_model)}
    shapes |= {"W_v": (task.d_in, d_model), "W_o": (d_model, d_out)}
    return {n: rng.standard_normal(s) / math.sqrt(s[0]) for n, s in shapes.items()}


class ModelCache(NamedTuple):
    """What :func:`backward` needs."""

    X: np.ndarray  # (B, T, d_in)
    attention: AttentionCache  # per-head; .weights is (B, h, T, T)
    merged: np.ndarray  # (B, T, d_model) heads side by side, before W_o
    params: dict
    num_heads: int
    num_outputs: int


def forward(X, params: dict, num_heads: int, num_outputs: int = 1):
    """logits = merge(attention(split(X W_q), split(X W_k), split(X W_v))) W_o.

    Shapes: X (B, T, d_in); params from :func:`init_params`. Returns
    (logits (B, T, num_outputs, vocab_size), ModelCache).
    """
    X = np.asarray(X)
    d_out = params["W_o"].shape[1]
    Q = split_heads(X @ params["W_q"], num_heads)  # (B, h, T, d_h)
    K = split_heads(X @ params["W_k"], num_heads)  # (B, h, T, d_h)
    V = split_heads(X @ params["W_v"], num_heads)  # (B, h, T, d_h)
    heads, att = scaled_dot_product_attention(Q, K, V)  # (B, h, T, d_h)
    merged = merge_heads(heads)  # (B, T, d_model)
    logits = merged @ params["W_o"]  # (B, T, m vocab)
    B, T, _ = X.shape
    logits = logits.reshape(B, T, num_outputs, d_out // num_outputs)  # (B, T, m, vocab)
    return logits, ModelCache(X, att, merged, params, num_heads, num_outputs)


def backward(d_logits, cache: ModelCache) -> dict:
    """Gradients of a loss with respect to W_q, W_k, W_v, W_o, given dL/dlogits.

    dW_o = Y^T dlogits; dY = dlogits W_o^T; the attention core's backward gives dQ, dK, dV
    per head; merged back, dW_q = X^T dQ (and likewise for K, V), summed over the batch.
    """
    X, att, merged, params, h, m = cache
    B, T, _ = X.shape
    d_flat = d_logits.reshape(B, T, -1)  # (B, T, m vocab)
    grads = {"W_o": np.einsum("btd,bto->do", merged, d_flat)}  # (d_model, m vocab)
    d_heads = split_heads(d_flat @ params["W_o"].T, h)  # (B, h, T, d_h)
    dQ, dK, dV = scaled_dot_product_attention_backward(d_heads, att)  # (B, h, T, d_h) each
    for name, d in (("W_q", dQ), ("W_k", dK), ("W_v", dV)):
        grads[name] = np.einsum("bti,btd->id", X, merge_heads(d))  # (d_in, d_model)
    return {n: grads[n] for n in PARAM_NAMES}


def cross_entropy(logits, targets):
    """Mean cross-entropy of integer ``targets`` (B, T, m) under ``logits`` (B, T, m, vocab).

    Returns (loss, dL/dlogits of the same shape as logits).
    """
    # the decoder's loss with every position selected: (B, T, m, V) -> (B, T * m, V)
    B, T, m, V = logits.shape
    loss, cache = masked_cross_entropy(logits.reshape(B, T * m, V), targets.reshape(B, T * m), 1)
    return loss, masked_cross_entropy_backward(cache).reshape(logits.shape)


class TrainResult(NamedTuple):
    params: dict
    losses: np.ndarray  # (steps,) training loss at each step


def train(
    task: LookbackTask,
    d_model: int,
    num_heads: int,
    seed: int,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 0.05,
) -> TrainResult:
    """Adam on fresh random batches; the seed fixes the initial weights and every batch."""
    rng = np.random.default_rng(seed)
    params = init_params(task, d_model, rng)
    return _adam_loop(task, params, forward, backward, num_heads, rng, steps, batch_size, lr)


def _adam_loop(task, params, forward_fn, backward_fn, num_heads, rng, steps, batch_size, lr):
    """Adam from ``params`` on ``steps`` fresh batches drawn from ``rng`` (after the weights)."""
    optimizer = Adam(params, lr=lr)
    m = len(task.offsets)
    losses = np.empty(steps)
    for step in range(steps):
        tokens, targets = sample_batch(task, batch_size, rng)
        logits, cache = forward_fn(encode(task, tokens), params, num_heads, m)
        losses[step], d_logits = cross_entropy(logits, targets)
        optimizer.step(backward_fn(d_logits, cache))
    return TrainResult(params, losses)


class Evaluation(NamedTuple):
    per_output: np.ndarray  # (m,) accuracy of each offset's prediction
    joint: float  # accuracy of all m predictions of a position at once
    weights: np.ndarray  # (B, h, T, T) the attention weights on the evaluation batch


def evaluate(task: LookbackTask, params: dict, num_heads: int, tokens) -> Evaluation:
    """Accuracy of the model's argmax predictions on ``tokens`` (B, T), and its weights."""
    tokens = _tokens("evaluate", task, tokens)
    logits, cache = forward(encode(task, tokens), params, num_heads, len(task.offsets))
    correct = logits.argmax(axis=-1) == targets_of(task, tokens)  # (B, T, m)
    return Evaluation(
        correct.mean(axis=(0, 1)), float(correct.all(axis=-1).mean()), cache.attention.weights
    )


def most_frequent_accuracy(task: LookbackTask, tokens) -> float:
    """Accuracy of a guess that reads the tokens but not their positions.

    The guess is the symbol that occurs most often in the sequence (ties go to the smallest
    symbol), the same for every position and every offset. It is the chance level for a layer
    that has learned what the sequence contains but not where: anything that beats it must
    use positions. Averaged over positions and offsets. Ties do not matter: the targets of one
    offset are the sequence's own tokens in another order, so the guess is right at
    (largest count) / seq_len of the positions.
    """
    tokens = _tokens("most_frequent_accuracy", task, tokens)
    symbols = np.arange(task.vocab_size)
    counts = (tokens[:, :, None] == symbols).sum(axis=1)  # (B, vocab)
    guess = counts.argmax(axis=-1)  # (B,) a commonest symbol
    return float((targets_of(task, tokens) == guess[:, None, None]).mean())


def position_blind_accuracy(task: LookbackTask, tokens) -> float:
    """Expected accuracy of the best guess that sees every token but no position.

    A layer blind to positions still knows its own token and which tokens the rest of the
    sequence holds, but not where they are. Given that, the token ``offset`` places back is
    equally likely to be any of the other ``seq_len - 1`` tokens, so the best guess is the
    commonest among them, right with probability (its count) / (seq_len - 1). Returns that
    probability averaged over sequences and positions: the bar a layer must clear before its
    accuracy shows that it reads positions. One offset only (several targets share one guess
    budget differently).
    """
    fn = "position_blind_accuracy"
    if len(task.offsets) != 1:
        raise ValueError(f"{fn}: needs a task with one offset, got offsets {task.offsets}")
    tokens = _tokens(fn, task, tokens)
    own = tokens[:, :, None] == np.arange(task.vocab_size)  # (B, T, vocab) one-hot
    others = own.sum(axis=1, keepdims=True) - own  # (B, T, vocab) counts of the other tokens
    return float((others.max(axis=-1) / (task.seq_len - 1)).mean())


# --- the same layer with a nonlinear readout (chapter 04's "Going deeper" page) ----------
#
# Chapter 04 asks whether one head fails the two-look-back task for want of a second row of
# weights or for want of a nonlinear readout. The control keeps the attention layer and
# replaces the linear readout W_o by a ReLU MLP, Y -> relu(Y W_1 + b_1) W_2 + b_2.

#: The parameter names of the model with an MLP readout, in order.
MLP_PARAM_NAMES = ("W_q", "W_k", "W_v", "W_1", "b_1", "W_2", "b_2")


def _init_mlp_params(task: LookbackTask, d_model: int, hidden: int, rng) -> dict:
    """W_q, W_k, W_v as :func:`init_params`; W_1 N(0, 2/d_model), W_2 N(0, 1/hidden), b = 0."""
    d_out = len(task.offsets) * task.vocab_size
    params = init_params(task, d_model, rng)
    del params["W_o"]
    params["W_1"] = rng.standard_normal((d_model, hidden)) * math.sqrt(2.0 / d_model)
    params["b_1"] = np.zeros(hidden)
    params["W_2"] = rng.standard_normal((hidden, d_out)) / math.sqrt(hidden)
    params["b_2"] = np.zeros(d_out)
    return {n: params[n] for n in MLP_PARAM_NAMES}


def _forward_mlp(X, params: dict, num_heads: int, num_outputs: int):
    """logits = relu(merge(attention(...)) W_1 + b_1) W_2 + b_2 -> (B, T, m, vocab), cache."""
    Q = split_heads(X @ params["W_q"], num_heads)  # (B, h, T, d_h)
    K = split_heads(X @ params["W_k"], num_heads)  # (B, h, T, d_h)
    V = split_heads(X @ params["W_v"], num_heads)  # (B, h, T, d_h)
    heads, att = scaled_dot_product_attention(Q, K, V)  # (B, h, T, d_h)
    merged = merge_heads(heads)  # (B, T, d_model)
    pre = merged @ params["W_1"] + params["b_1"]  # (B, T, hidden)
    hidden = np.maximum(pre, 0.0)
    logits = hidden @ params["W_2"] + params["b_2"]  # (B, T, m vocab)
    B, T, d_out = logits.shape
    logits = logits.reshape(B, T, num_outputs, d_out // num_outputs)
    return logits, (X, att, merged, pre, hidden, params, num_heads)


def _backward_mlp(d_logits, cache) -> dict:
    """Gradients of the loss with respect to every parameter of :func:`_forward_mlp`."""
    X, att, merged, pre, hidden, params, h = cache
    B, T, _ = X.shape
    d_flat = d_logits.reshape(B, T, -1)  # (B, T, m vocab)
    grads = {"W_2": np.einsum("btj,bto->jo", hidden, d_flat), "b_2": d_flat.sum(axis=(0, 1))}
    d_pre = (d_flat @ params["W_2"].T) * (pre > 0)  # (B, T, hidden)
    grads["W_1"] = np.einsum("btd,btj->dj", merged, d_pre)
    grads["b_1"] = d_pre.sum(axis=(0, 1))
    d_heads = split_heads(d_pre @ params["W_1"].T, h)  # (B, h, T, d_h)
    dQ, dK, dV = scaled_dot_product_attention_backward(d_heads, att)
    for name, d in (("W_q", dQ), ("W_k", dK), ("W_v", dV)):
        grads[name] = np.einsum("bti,btd->id", X, merge_heads(d))  # (d_in, d_model)
    return {n: grads[n] for n in MLP_PARAM_NAMES}


def train_mlp_readout(
    task: LookbackTask,
    d_model: int,
    num_heads: int,
    seed: int,
    hidden: int = 128,
    steps: int = 1500,
    batch_size: int = 32,
    lr: float = 0.01,
) -> TrainResult:
    """:func:`train` with a ReLU MLP readout (d_model -> hidden -> m vocab) in place of W_o."""
    rng = np.random.default_rng(seed)
    params = _init_mlp_params(task, d_model, hidden, rng)
    return _adam_loop(
        task, params, _forward_mlp, _backward_mlp, num_heads, rng, steps, batch_size, lr
    )


def evaluate_mlp_readout(task: LookbackTask, params: dict, num_heads: int, tokens) -> Evaluation:
    """:func:`evaluate` for a model trained by :func:`train_mlp_readout`."""
    tokens = _tokens("evaluate_mlp_readout", task, tokens)
    m = len(task.offsets)
    logits, cache = _forward_mlp(encode(task, tokens), params, num_heads, m)
    correct = logits.argmax(axis=-1) == targets_of(task, tokens)  # (B, T, m)
    return Evaluation(
        correct.mean(axis=(0, 1)), float(correct.all(axis=-1).mean()), cache[1].weights
    )


def one_job_plus_commonest_accuracy(task: LookbackTask, tokens) -> float:
    """Both answers right for a layer that does the first look-up exactly and ignores positions
    for the others.

    Such a layer knows its own symbol and the first offset's symbol; for every further offset
    it guesses the commonest symbol among the remaining tokens of the sequence (ties go to the
    smallest symbol). Its joint accuracy is the bar a layer must beat to show that it uses
    positions for more than one look-up. Needs two or more offsets.
    """
    fn = "one_job_plus_commonest_accuracy"
    tokens = _tokens(fn, task, tokens)
    if len(task.offsets) < 2:
        raise ValueError(f"{fn}: task needs two or more offsets, got offsets={task.offsets}")
    B, T = tokens.shape
    positions = np.arange(T)
    # (T, T) True where key j is neither query i itself nor its first look-up
    known = (positions[None, :] == positions[:, None]) | (
        positions[None, :] == (positions[:, None] - task.offsets[0]) % T
    )
    symbols = np.arange(task.vocab_size)
    one_hot = tokens[:, :, None] == symbols  # (B, T, vocab)
    counts = np.einsum("ij,bjv->biv", ~known, one_hot.astype(float))  # (B, T, vocab)
    guess = counts.argmax(axis=-1)  # (B, T)
    rest = targets_of(task, tokens)[:, :, 1:]  # (B, T, m - 1)
    return float((rest == guess[:, :, None]).all(axis=-1).mean())
