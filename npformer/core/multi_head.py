"""Multi-head attention: split the width into heads, attend in each, merge, project.

Taught in chapter 04 (``chapters/04_multi_head.ipynb``); the backward pass
(:func:`multi_head_attention_backward`) is what chapter 07's encoder and decoder layers train
with.

Weight convention of the book: a linear layer is ``x @ W + b`` with ``W`` of shape (d_in, d_out).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from npformer.core.attention import AttentionCache, HeadsCache, multi_head, multi_head_backward
from npformer.core.validation import (
    divisible,
)

#: The parameter names of one multi-head attention layer, in the order Q, K, V, output.
WEIGHT_NAMES = ("W_q", "W_k", "W_v", "W_o")
BIAS_NAMES = ("b_q", "b_k", "b_v", "b_o")


def split_heads(X, num_heads: int) -> np.ndarray:
    """Cut the last axis into ``num_heads`` heads of width d_h = d / h, one slice per head.

    X[b, t, k * d_h + c] becomes out[b, k, t, c]: head k owns the contiguous columns
    k d_h ... (k + 1) d_h - 1. Done as a reshape (B, T, h, d_h) THEN a transpose to
    (B, h, T, d_h); reshaping straight to (B, h, T, d_h) mixes positions into heads.

    Shapes: X (B, T, d) -> (B, h, T, d_h). Returns a view when possible.
    """
    fn = "split_heads"
    X = np.asarray(X)
    B, T, d = X.shape
    divisible(fn, d, num_heads)
    d_h = d // num_heads
    X = X.reshape(B, T, num_heads, d_h)  # (B, T, h, d_h)
    return X.transpose(0, 2, 1, 3)  # (B, h, T, d_h)


def merge_heads(X) -> np.ndarray:
    """The exact inverse of :func:`split_heads`: out[b, t, k * d_h + c] = X[b, k, t, c].

    Transpose back to (B, T, h, d_h), then reshape to (B, T, h d_h) (a copy, since the
    transposed array is not contiguous).

    Shapes: X (B, h, T, d_h) -> (B, T, d) with d = h d_h.
    """
    X = np.asarray(X)
    B, h, T, d_h = X.shape
    X = X.transpose(0, 2, 1, 3)  # (B, T, h, d_h)
    return X.reshape(B, T, h * d_h)  # (B, T, d)


def init_multi_head_params(d_model: int, rng: np.random.Generator, dtype=np.float64) -> dict:
    """Random parameters of one multi-head attention layer (they do not depend on h).

    W_q, W_k, W_v, W_o have shape (d, d) with entries N(0, 1/d), so that x @ W keeps the scale
    of x; the biases b_q, b_k, b_v, b_o have shape (d,) and start at zero. The count is
    4 d^2 weights + 4 d biases whatever the number of heads.

    Returns a dict name -> array of ``dtype``.
    """
    dtype = np.dtype(dtype)
    std = 1.0 / math.sqrt(d_model)
    params = {}
    for name in WEIGHT_NAMES:
        params[name] = (rng.standard_normal((d_model, d_model)) * std).astype(dtype)
    for name in BIAS_NAMES:
        params[name] = np.zeros(d_model, dtype=dtype)
    return params


class MultiHeadCache(NamedTuple):
    """What a backward pass through multi-head attention needs (chapter 06)."""

    X_q: np.ndarray  # (B, T, d) the queries' input
    X_kv: np.ndarray  # (B, S, d) the keys' and values' input
    Q: np.ndarray  # (B, h, T, d_h) projected and split
    K: np.ndarray  # (B, h, S, d_h)
    V: np.ndarray  # (B, h, S, d_h)
    attention: AttentionCache  # per-head attention cache; .weights is (B, h, T, S)
    merged: np.ndarray  # (B, T, d) the heads' outputs side by side, before W_o
    num_heads: int


def multi_head_attention(X_q, X_kv, params, num_heads: int, mask=None, scale: bool = True):
    """Multi-head attention: concat_k(attention(X_q W_q^k, X_kv W_k^k, X_kv W_v^k)) W_o + b_o.

    Q = X_q W_q + b_q, K = X_kv W_k + b_k, V = X_kv W_v + b_v, each split into h heads of
    width d_h = d / h; each head runs scaled dot-product attention on its own slice; the h
    outputs are merged side by side and projected by W_o. Self-attention is X_q = X_kv.

    Shapes: X_q (B, T, d), X_kv (B, S, d), params as in :func:`init_multi_head_params`;
    ``mask`` is boolean (True = may attend) and broadcasts to (B, h, T, S): a (T, S) causal
    mask or a (B, 1, 1, S) key padding mask both work.

    Returns (out (B, T, d), MultiHeadCache) with the weights in ``cache.attention.weights``
    (B, h, T, S).
    """
    fn = "multi_head_attention"
    X_q, X_kv = np.asarray(X_q), np.asarray(X_kv)
    d = X_q.shape[-1]
    divisible(fn, d, num_heads)  # (the mask is checked by the core's masked_softmax)

    factor = 1.0 / math.sqrt(d // num_heads) if scale else 1.0
    merged, heads = multi_head(
        X_q @ params["W_q"] + params["b_q"],  # (B, T, d)
        X_kv @ params["W_k"] + params["b_k"],  # (B, S, d)
        X_kv @ params["W_v"] + params["b_v"],  # (B, S, d)
        num_heads,
        factor=factor,
        mask=mask,
    )  # (B, T, d)
    out = merged @ params["W_o"] + params["b_o"]  # (B, T, d)
    core = heads.core  # Q (B, h, T, d_h), K, V (B, h, S, d_h), weights (B, h, T, S)
    return out, MultiHeadCache(X_q, X_kv, core.Q, core.K, core.V, core, merged, num_heads)


def multi_head_attention_backward(d_out, cache: MultiHeadCache, params):
    """Gradients of :func:`multi_head_attention`: the projections and the head split, around
    the attention core's backward.

    With Q = X_q W_q + b_q (K and V from X_kv), heads = attention(Q, K, V) and
    out = merge(heads) W_o + b_o:
        dW_o = merged^T d_out, db_o = sum of d_out's rows,
        (dQ, dK, dV) = merge(the attention core's backward of split(d_out W_o^T)) (that is
        ``npformer.core.attention.multi_head_backward``),
        dW_q = X_q^T dQ, db_q = sum of dQ's rows, dX_q = dQ W_q^T,
        dX_kv = dK W_k^T + dV W_v^T (and dW_k, dW_v, db_k, db_v alike).
    For self-attention (X_q and X_kv the same array) the gradient of X is dX_q + dX_kv.
    Shapes: d_out (B, T, d) like the output. Returns (dX_q (B, T, d), dX_kv (B, S, d), grads: a
    dict with the names and shapes of ``params``).
    """
    d = cache.X_q.shape[-1]
    g = d_out.reshape(-1, d)  # (B T, d)
    grads = {
        "W_o": cache.merged.reshape(-1, d).T @ g,  # (d, d)
        "b_o": g.sum(axis=0),  # (d,)
    }
    heads = HeadsCache(cache.attention, cache.num_heads)
    d_merged = d_out @ params["W_o"].T  # (B, T, d)
    dQ, dK, dV = multi_head_backward(d_merged, heads)  # (B, T, d), (B, S, d), (B, S, d)
    dX_q = np.zeros_like(cache.X_q)  # (B, T, d)
    dX_kv = np.zeros_like(cache.X_kv)  # (B, S, d)
    for name, dP, X, dX in (
        ("q", dQ, cache.X_q, dX_q),  # dP: the gradient of X W + b, (B, T or S, d)
        ("k", dK, cache.X_kv, dX_kv),
        ("v", dV, cache.X_kv, dX_kv),
    ):
        grads[f"W_{name}"] = X.reshape(-1, d).T @ dP.reshape(-1, d)  # (d, d)
        grads[f"b_{name}"] = dP.reshape(-1, d).sum(axis=0)  # (d,)
        dX += dP @ params[f"W_{name}"].T
    return dX_q, dX_kv, {name: grads[name] for name in WEIGHT_NAMES + BIAS_NAMES}
