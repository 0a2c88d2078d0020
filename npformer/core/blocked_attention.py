"""Blocked attention with an online softmax: exact attention that never holds the T x T matrix.

Taught in chapter 08 (``chapters/08_quadratic_cost.ipynb``), after the cost of the naive
``scaled_dot_product_attention`` has been measured.

The keys are read in tiles. For each tile of queries the forward pass keeps three running
quantities per query row (the online softmax of Milakov and Gimelshein, 2018): the largest
score seen so far ``m``, the sum of exponentials ``l`` taken relative to ``m``, and the
unnormalised output ``acc``. When a new tile raises the maximum from ``m`` to ``m'``, what was
accumulated is rescaled by ``exp(m - m')``:

    m' = max(m, max_j s_j),   l' = exp(m - m') l + sum_j exp(s_j - m'),
    acc' = exp(m - m') acc + sum_j exp(s_j - m') v_j,                out = acc / l.

Only a (block_q, block_k) tile of scores exists at any time, so the extra memory is linear in
T. With a causal mask, tiles entirely above the diagonal are never computed. The forward pass
saves the log-sum-exp of every row, ``m + log l``; the backward pass recomputes each tile of
weights from it (``P = exp(s - logsumexp)``) instead of storing the T x S weights, as
FlashAttention does (Dao et al., 2022; Rabe and Staats, 2021).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class BlockedAttentionCache(NamedTuple):
    """What ``blocked_attention_backward`` needs: inputs, output and one statistic per row."""

    Q: np.ndarray  # (..., T, d_h)
    K: np.ndarray  # (..., S, d_h)
    V: np.ndarray  # (..., S, d_v)
    out: np.ndarray  # (..., T, d_v)
    logsumexp: np.ndarray  # (..., T) log sum_j exp(s_ij) over the keys row i may attend to
    scale: float  # the factor applied to Q K^T (1 / sqrt(d_h), or 1)
    causal: bool
    block_q: int
    block_k: int


def _check_inputs(fn: str, Q, K, V, causal: bool):
    """Equal leading axes (no broadcasting) and, with a causal mask, S >= T (else some
    queries would see no key)."""
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    if Q.shape[:-2] != K.shape[:-2] or (causal and K.shape[-2] < Q.shape[-2]):
        raise ValueError(
            f"{fn}: Q {Q.shape} and K {K.shape} must have equal leading axes (this function "
            f"does not broadcast them) and, with causal=True, S >= T"
        )
    return Q, K, V


def blocked_attention(Q, K, V, causal: bool = True, scale: bool = True, block_q=128, block_k=256):
    """softmax(Q K^T / sqrt(d_h)) V computed tile by tile, never holding the T x S scores.

    Equal to ``scaled_dot_product_attention(Q, K, V, mask)`` with ``mask = causal_mask(T, S)``
    (or no mask when ``causal=False``), up to rounding. With a causal mask query i may attend to
    key j iff j <= i + (S - T), so S >= T is required and every query sees at least one key.
    Queries are processed in tiles of ``block_q`` rows and keys in tiles of ``block_k``; per
    query row the pass keeps the running maximum m, the running sum l of exp(s - m) and the
    rescaled accumulator of exp(s - m) V (see the module docstring).

    Shapes: Q (..., T, d_h), K (..., S, d_h), V (..., S, d_v) with equal leading axes and one
    floating dtype. Extra memory: O(T d + block_q block_k), never O(T S).
    Returns (out (..., T, d_v), BlockedAttentionCache with the row log-sum-exp (..., T)).
    """
    fn = "blocked_attention"
    Q, K, V = _check_inputs(fn, Q, K, V, causal)
    factor = 1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0
    lead, T, d_v = Q.shape[:-2], Q.shape[-2], V.shape[-1]
    out = np.empty(lead + (T, d_v), dtype=Q.dtype)  # (..., T, d_v)
    lse = np.empty(lead + (T,), dtype=Q.dtype)  # (..., T)
    for b in np.ndindex(*lead):  # one head of one batch element at a time
        _forward_2d(Q[b], K[b], V[b], factor, causal, block_q, block_k, out[b], lse[b])
    return out, BlockedAttentionCache(Q, K, V, out, lse, factor, causal, block_q, block_k)


def _tiles(T: int, S: int, causal: bool, block_q: int, block_k: int):
    """Yield (i0, i1, [(j0, j1, crosses_diagonal), ...]) for the tiles that hold any score."""
    offset = S - T
    for i0 in range(0, T, block_q):
        i1 = min(i0 + block_q, T)
        # Keys after the last query's position are masked for the whole tile: skip them.
        key_end = min(S, i1 + offset) if causal else S
        keys = []
        for j0 in range(0, key_end, block_k):
            j1 = min(j0 + block_k, key_end)
            keys.append((j0, j1, causal and j1 - 1 > i0 + offset))
        yield i0, i1, keys


class TileCounts(NamedTuple):
    """What the forward pass of one head computes, counted exactly from its loop."""

    tile_pairs: int  # (query tile, key tile) pairs computed: two BLAS calls each
    all_pairs: int  # pairs in the full grid, had nothing been skipped
    diagonal_pairs: int  # computed pairs that cross the causal diagonal (masked inside)
    cells: int  # scores computed, the masked ones inside diagonal tiles included
    visible: int  # scores a query may attend to: T (T + 1) / 2 + T (S - T) causal, else T S


def tile_counts(T: int, S: int | None = None, causal: bool = True, block_q=128, block_k=256):
    """Count the tiles and scores ``blocked_attention`` computes for one head of T queries.

    The same loop as the forward pass (``S`` defaults to T; tiles clipped as there): key
    tiles that start after the last query of a query tile are skipped when ``causal``.
    Returns a :class:`TileCounts`.
    """
    fn = "tile_counts"
    S = T if S is None else S
    if causal and S < T:
        raise ValueError(f"{fn}: a causal mask needs S >= T, got T={T} and S={S}")
    block_q, block_k = min(block_q, T), min(block_k, S)
    pairs = diagonal = cells = 0
    for i0, i1, keys in _tiles(T, S, causal, block_q, block_k):
        for j0, j1, crosses in keys:
            pairs += 1
            diagonal += crosses
            cells += (i1 - i0) * (j1 - j0)
    all_pairs = -(-T // block_q) * -(-S // block_k)
    visible = T * (T + 1) // 2 + T * (S - T) if causal else T * S
    return TileCounts(pairs, all_pairs, diagonal, cells, visible)


def _forward_2d(Q, K, V, factor, causal, block_q, block_k, out, lse):
    """One head: Q (T, d_h), K (S, d_h), V (S, d_v); writes out (T, d_v) and lse (T,)."""
    (T, d_h), (S, d_v) = Q.shape, V.shape
    dtype = Q.dtype
    offset = S - T  # query i sits at position i + offset
    block_q, block_k = max(1, min(block_q, T)), min(block_k, S)  # no tile larger than needed
    # Work buffers, reused by every tile: the pass allocates nothing of size T x S (or T x d).
    q_buf = np.empty((block_q, d_h), dtype=dtype)
    scores_buf = np.empty((block_q, block_k), dtype=dtype)
    pv_buf = np.empty((block_q, d_v), dtype=dtype)
    acc_buf = np.empty((block_q, d_v), dtype=dtype)
    m_buf, new_m_buf, rescale_buf, l_buf, row_sum_buf = np.empty((5, block_q, 1), dtype=dtype)
    for i0, i1, keys in _tiles(T, S, causal, block_q, block_k):
        n = i1 - i0
        q = np.multiply(Q[i0:i1], factor, out=q_buf[:n])  # (n, d_h) scaled queries
        m, new_m, rescale = m_buf[:n], new_m_buf[:n], rescale_buf[:n]  # (n, 1) each
        l, row_sum, acc, pv = l_buf[:n], row_sum_buf[:n], acc_buf[:n], pv_buf[:n]
        m.fill(-np.inf)
        l.fill(0)
        acc.fill(0)
        for j0, j1, crosses_diagonal in keys:
            s = scores_buf[:n, : j1 - j0]  # (n, k) this tile's scores
            np.matmul(q, K[j0:j1].T, out=s)  # one matrix product per tile pair
            if crosses_diagonal:  # mask the keys that come after each query of the tile
                future = np.arange(j0, j1)[None, :] > np.arange(i0, i1)[:, None] + offset
                np.copyto(s, -np.inf, where=future)  # (n, k)
            np.max(s, axis=1, keepdims=True, out=new_m)  # (n, 1)
            np.maximum(new_m, m, out=new_m)  # m' = max(m, max_j s_j): finite from tile 0 on
            np.subtract(m, new_m, out=rescale)
            np.exp(rescale, out=rescale)  # exp(m - m') <= 1 (0 on the first tile)
            np.subtract(s, new_m, out=s)
            np.exp(s, out=s)  # p = exp(s - m'), masked entries exactly 0
            l *= rescale
            np.sum(s, axis=1, keepdims=True, out=row_sum)
            l += row_sum  # l' = exp(m - m') l + sum_j p_j
            acc *= rescale
            np.matmul(s, V[j0:j1], out=pv)  # (n, d_v)
            acc += pv  # acc' = exp(m - m') acc + p V
            m, new_m = new_m, m  # the new maximum becomes the running one
        np.divide(acc, l, out=out[i0:i1])  # (n, d_v)
        np.log(l, out=l)
        np.add(m, l, out=lse[i0:i1, None])  # (n, 1) log-sum-exp of the row's scores


def blocked_attention_backward(d_out, cache: BlockedAttentionCache):
    """Gradients of ``blocked_attention`` with respect to Q, K and V, tile by tile.

    Each tile of weights is recomputed from the saved row log-sum-exp L instead of being
    stored: P = exp(c Q K^T - L) on the tile (c the scale). With D = rowsum(dO * O),
        dV = P^T dO,   dP = dO V^T,   dS = P * (dP - D),   dQ = c dS K,   dK = c dS^T Q,
    summed over tiles; rowsum(dP * P) = D because O = P V, so no T x S product is needed.
    Shapes: d_out (..., T, d_v). Returns (dQ like Q, dK like K, dV like V).
    """
    d_out = np.asarray(d_out)
    Q, K, V, _out = cache.Q, cache.K, cache.V, cache.out
    dQ, dK, dV = np.empty_like(Q), np.empty_like(K), np.empty_like(V)
    for b in np.ndindex(*Q.shape[:-2]):
        _backward_2d(d_out[b], cache, b, dQ[b], dK[b], dV[b])
    return dQ, dK, dV


def _backward_2d(d_out, cache, b, dQ, dK, dV):
    """One head: fills dQ (T, d_h), dK (S, d_h), dV (S, d_v) from d_out (T, d_v)."""
    Q, K, V, out, lse = cache.Q[b], cache.K[b], cache.V[b], cache.out[b], cache.logsumexp[b]
    factor, causal = cache.scale, cache.causal
    (T, _), (S, _) = Q.shape, K.shape
    dtype = Q.dtype
    Qs = Q * factor  # (T, d_h)
    D = np.einsum("tv,tv->t", d_out, out)[:, None]  # (T, 1) rowsum(dO * O)
    offset = S - T
    dQ.fill(0)
    dK.fill(0)
    dV.fill(0)
    p_buf = np.empty((max(1, min(cache.block_q, T)), min(cache.block_k, S)), dtype=dtype)
    dp_buf = np.empty_like(p_buf)
    for i0, i1, keys in _tiles(T, S, causal, cache.block_q, cache.block_k):
        n = i1 - i0
        q, do, dq = Qs[i0:i1], d_out[i0:i1], dQ[i0:i1]  # (n, d_h), (n, d_v), (n, d_h)
        for j0, j1, crosses_diagonal in keys:
            p, dp = p_buf[:n, : j1 - j0], dp_buf[:n, : j1 - j0]  # (n, k)
            np.matmul(q, K[j0:j1].T, out=p)
            if crosses_diagonal:
                future = np.arange(j0, j1)[None, :] > np.arange(i0, i1)[:, None] + offset
                np.copyto(p, -np.inf, where=future)  # (n, k)
            np.subtract(p, lse[i0:i1, None], out=p)
            np.exp(p, out=p)  # P = exp(s - L): this tile of the forward's weights
            dV[j0:j1] += p.T @ do  # (k, d_v)
            np.matmul(do, V[j0:j1].T, out=dp)  # dP (n, k)
            dp -= D[i0:i1]
            dp *= p  # dS = P * (dP - D)
            dq += dp @ K[j0:j1]  # (n, d_h), times c below
            dK[j0:j1] += dp.T @ q  # (k, d_h): q already carries the factor c
    dQ *= factor
