"""The synthetic tasks of the experiment: copy or sort a sequence of symbols.

Taught in chapter 10 (``chapters/10_experiment.ipynb``); chapter 11 reuses it for the ablations.

A prompt is L symbols drawn uniformly from an alphabet of 20, followed by a separator; the
answer is the same L symbols (copy) or the same symbols in increasing order (sort). The model
reads the whole sequence [s_1 .. s_L, SEP, a_1 .. a_L] and predicts the next token at every
position; only the L answer positions count in the loss:

    position  0    ..  L-1   L      L+1  ..  2L-1
    input     s_1  ..  s_L   SEP    a_1  ..  a_{L-1}
    target    s_2  ..  SEP   a_1    a_2  ..  a_L
    loss      0    ..  0     1      1    ..  1
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Number of ordinary symbols; they are the tokens 0 .. 19.
ALPHABET_SIZE = 20
#: The separator between the prompt and the answer: the 21st token.
SEP = ALPHABET_SIZE
#: Ordinary symbols plus the separator.
VOCAB_SIZE = ALPHABET_SIZE + 1
#: The tasks the generator knows.
TASKS = ("copy", "sort")


class Batch(NamedTuple):
    """One training batch: model inputs, next-token targets, and the 0/1 loss mask."""

    tokens: np.ndarray  # (B, 2L) int64: [s_1 .. s_L, SEP, a_1 .. a_{L-1}]
    targets: np.ndarray  # (B, 2L) int64: the input shifted left by one
    loss_mask: np.ndarray  # (B, 2L) float: 1 on the L answer positions, 0 elsewhere


def answer(prompts, task: str) -> np.ndarray:
    """The answer the task asks for: the prompt itself (copy) or sorted along the last axis (sort).

    Shapes: prompts (..., L) of symbols in [0, 20). Returns an int64 array of the same shape.
    """
    prompts = np.asarray(prompts).astype(np.int64, copy=False)
    return np.sort(prompts, axis=-1) if task == "sort" else prompts.copy()


def random_prompts(rng: np.random.Generator, batch_size: int, length: int) -> np.ndarray:
    """``batch_size`` prompts of ``length`` symbols, uniform over the alphabet: (B, L) int64."""
    return rng.integers(0, ALPHABET_SIZE, size=(batch_size, length))  # (B, L)


def make_batch(
    rng: np.random.Generator, batch_size: int, length: int, task: str, dtype=np.float32
) -> Batch:
    """A fresh batch of the task: inputs, targets shifted by one, and the loss mask.

    The full sequence is [s_1 .. s_L, SEP, a_1 .. a_L] of length 2L + 1; the model sees its
    first 2L tokens and must predict its last 2L. The loss mask is 1 on the last L positions
    (those whose target is an answer symbol) and 0 on the prompt. ``dtype`` is the mask's.

    Returns a :class:`Batch` of three (B, 2L) arrays.
    """
    if task not in TASKS:  # ``answer`` reads anything but "sort" as copy
        raise ValueError(f"make_batch: task must be one of {TASKS}, got {task!r}")
    prompts = random_prompts(rng, batch_size, length)  # (B, L)
    sep = np.full((batch_size, 1), SEP, dtype=np.int64)  # (B, 1)
    sequence = np.concatenate([prompts, sep, answer(prompts, task)], axis=1)  # (B, 2L + 1)
    loss_mask = np.zeros((batch_size, 2 * length), dtype=dtype)  # (B, 2L)
    loss_mask[:, length:] = 1
    return Batch(sequence[:, :-1], sequence[:, 1:], loss_mask)


#: The seed of the held-out prompts every chapter scores on: one fixed set, never drawn from a
#: training stream.
EVALUATION_SEED = 7919


def evaluation_prompts(n: int, length: int, seed: int = EVALUATION_SEED) -> np.ndarray:
    """The fixed held-out prompts of the evaluation: ``n`` prompts from their own seed, (n, L)."""
    return random_prompts(np.random.default_rng(seed), n, length)


def with_separator(prompts) -> np.ndarray:
    """Append the separator to each prompt: (B, L) -> (B, L + 1), what generation starts from."""
    prompts = np.asarray(prompts)
    if prompts.size and (prompts.min() < 0 or prompts.max() >= ALPHABET_SIZE):  # SEP included
        raise ValueError(
            f"with_separator: prompts must hold symbols in [0, {ALPHABET_SIZE}), got shape "
            f"{prompts.shape} with values in [{prompts.min()}, {prompts.max()}]"
        )
    sep = np.full((prompts.shape[0], 1), SEP, dtype=np.int64)  # (B, 1)
    return np.concatenate([prompts.astype(np.int64, copy=False), sep], axis=1)  # (B, L + 1)


def all_distinct(prompts) -> np.ndarray:
    """Which prompts hold no symbol twice: (n, L) -> (n,) bool (each row sorted, then no two
    neighbours equal). Over uniform prompts its mean tends to :func:`distinct_share`."""
    ordered = np.sort(np.asarray(prompts), axis=1)  # (n, L)
    return (np.diff(ordered, axis=1) != 0).all(axis=1)  # (n,)


def distinct_share(length: int, alphabet_size: int = ALPHABET_SIZE) -> float:
    """Probability that ``length`` uniform symbols are all different: a!/(a-L)! / a^L."""
    share = 1.0
    for k in range(length):
        share *= (alphabet_size - k) / alphabet_size
    return share
