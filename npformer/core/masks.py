"""Attention masks: causal, key padding, and their combination.

Taught in chapter 03 (``chapters/03_masks.ipynb``). Every mask here is boolean with True meaning
"this query may attend to this key"; the masking itself (``-inf`` before the softmax, never zeros
after it) lives in :func:`npformer.core.attention.masked_softmax`.
"""

from __future__ import annotations

import numpy as np


def causal_mask(T, S=None) -> np.ndarray:
    """Boolean (T, S) mask: query i may attend to key j iff j <= i + (S - T).

    With S == T (the default) this is the lower triangle including the diagonal. With S > T the
    T queries are the LAST T positions of a key sequence of length S (what a KV cache needs):
    query i sits at absolute position i + S - T and sees every key up to and including it.

    Returns a bool array of shape (T, S), True = may attend.
    """
    fn = "causal_mask"
    S = T if S is None else S
    if S < T:
        raise ValueError(
            f"{fn}: S={S} keys is fewer than T={T} queries; the queries must be the last T of "
            f"the S positions, so S >= T (shape (T, S) = ({T}, {S}))"
        )
    query_pos = np.arange(T)[:, None] + (S - T)  # (T, 1) absolute positions
    key_pos = np.arange(S)[None, :]  # (1, S)
    return key_pos <= query_pos  # (T, S)


def padding_mask(lengths, S) -> np.ndarray:
    """Boolean (B, S) mask of real tokens: entry (b, j) is True iff j < lengths[b].

    ``lengths`` holds the true length of each of the B sequences of a batch padded to S
    positions; every length must lie in [0, S]. Returns a bool array of shape (B, S).
    """
    fn = "padding_mask"
    lengths = np.asarray(lengths)
    if lengths.size and (lengths.min() < 0 or lengths.max() > S):
        raise ValueError(
            f"{fn}: every length must lie in [0, S={S}], got lengths {lengths.tolist()} "
            f"of shape {lengths.shape}"
        )
    return np.arange(S)[None, :] < lengths[:, None]  # (B, S)


def key_padding_to_scores(pad) -> np.ndarray:
    """View a (B, S) key padding mask as (B, 1, 1, S), which broadcasts against (B, h, T, S).

    The padding mask is a property of the KEYS only: every head and every query of sequence b
    ignores the same padded keys, hence the two singleton axes. Returns a view, not a copy.
    """
    pad = np.asarray(pad)
    return pad[:, None, None, :]  # (B, 1, 1, S)


def combine_masks(*masks) -> np.ndarray | None:
    """Logical AND of boolean masks with broadcasting; ``None`` entries are ignored.

    A key is visible only if every mask allows it, e.g. causal (T, S) AND key padding
    (B, 1, 1, S) gives (B, 1, T, S). Returns None when every entry is None (no masking).
    """
    arrays = []
    for _k, m in enumerate(masks):
        if m is None:
            continue
        arrays.append(np.asarray(m))
    if not arrays:
        return None
    out = arrays[0]
    for m in arrays[1:]:
        out = out & m  # broadcast shape
    return out


def sliding_window_mask(T, window) -> np.ndarray:
    """Boolean (T, T) band: query i may attend to key j iff i - window < j <= i.

    Each query sees itself and the ``window - 1`` positions before it: what a sliding-window
    cache of ``window`` slots lets a token read (chapter 09's deeper page on the cache's life).
    """
    if window < 1:  # a window of 0 would hide every key, itself included
        raise ValueError(f"sliding_window_mask: window must be >= 1, got {window}")
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return (j <= i) & (j > i - window)  # (T, T)


def left_padding_mask(pad, start, n) -> np.ndarray:
    """Boolean (B, 1, n, start + n) mask for n new columns of a left-padded batch.

    Row b holds ``pad[b]`` pad tokens in columns 0 ... pad[b] - 1, then its tokens. New row i
    (column start + i) may attend to column j iff pad[b] <= j <= start + i: causal, and never a
    pad. A pad column's own query sees nothing (zero weights, a zero output nobody reads).
    """
    fn = "left_padding_mask"
    pad = np.asarray(pad)
    if pad.min() < 0 or pad.max() >= start + n:
        raise ValueError(
            f"{fn}: every pad count must lie in [0, start + n = {start + n}), got "
            f"{pad.tolist()} of shape {pad.shape}"
        )
    columns = np.arange(start + n)  # (S,)
    causal = columns[None, :] <= np.arange(start, start + n)[:, None]  # (n, S)
    real = columns[None, :] >= pad[:, None]  # (B, S): no pad column
    return (causal[None] & real[:, None, :])[:, None]  # (B, 1, n, S)
