"""The running example of chapters 01-04: two short sentences, their token ids and embeddings.

Chapter 01 computes attention over the first sentence, chapter 03 hides each word's future
and pads the batch of both sentences, chapter 04 splits the same queries into heads. The
embeddings are random, so no weight means anything about English: the words are there so
that every row and column of every matrix has a name.

    words, ids, lengths, X = running_example()
    # ids (2, 7): the second sentence padded with PAD; lengths [7, 4]; X (2, 7, d)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SENTENCES = (
    ("a", "storm", "hit", "the", "river", "bank", "today"),
    ("the", "bank", "lent", "money"),
)
PAD = "<pad>"
# token id 0 is the filler; the words follow in alphabetical order
VOCAB = (PAD, *sorted({w for s in SENTENCES for w in s}))
SEED = 2024


class Example(NamedTuple):
    words: tuple[tuple[str, ...], ...]  # each sentence padded with PAD to the longest
    ids: np.ndarray  # (B, T) int token ids, PAD = 0
    lengths: np.ndarray  # (B,) real tokens per sentence
    X: np.ndarray  # (B, T, d) embeddings, one random row per vocabulary entry


def running_example(d: int = 8, seed: int = SEED) -> Example:
    """The two sentences as a padded batch with random embeddings of width ``d``.

    The embedding table is drawn once per (d, seed) from a standard normal, so the same word
    has the same row wherever it occurs (both sentences contain "the" and "bank").
    """
    T = max(len(s) for s in SENTENCES)
    words = tuple(s + (PAD,) * (T - len(s)) for s in SENTENCES)
    index = {w: i for i, w in enumerate(VOCAB)}
    ids = np.array([[index[w] for w in s] for s in words])  # (B, T)
    lengths = np.array([len(s) for s in SENTENCES])  # (B,)
    table = np.random.default_rng(seed).standard_normal((len(VOCAB), d))  # (vocab, d)
    return Example(words, ids, lengths, table[ids])


def format_weights(weights, rows, cols=None, digits: int = 2) -> str:
    """A (T, S) matrix as text, its rows named by ``rows`` and its columns by ``cols``.

    Chapter 01 prints attention weights this way: row = the word that reads (its query),
    column = the word read (its key). ``cols`` defaults to ``rows`` (self-attention).
    """
    weights = np.asarray(weights)
    cols = rows if cols is None else cols
    if weights.ndim != 2 or weights.shape != (len(rows), len(cols)):
        raise ValueError(
            f"format_weights: weights of shape {weights.shape} do not match "
            f"{len(rows)} row names and {len(cols)} column names"
        )
    width = max(digits + 3, *(len(c) for c in cols))
    left = max(len(r) for r in rows)
    lines = [" " * left + " " + " ".join(f"{c:>{width}}" for c in cols)]
    for name, row in zip(rows, weights, strict=True):
        cells = " ".join(f"{p:>{width}.{digits}f}" for p in row)
        lines.append(f"{name:>{left}} {cells}")
    return "\n".join(lines)
