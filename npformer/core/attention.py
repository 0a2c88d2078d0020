"""Softmax and scaled dot-product attention: the package's one attention core.

Taught in chapter 01 (``chapters/01_attention.ipynb``); the masked behaviour is discussed in
chapter 03, the additive score bias (ALiBi, T5) in chapter 05; the backward pass
(``scaled_dot_product_attention_backward``) is taught in chapter 06 (``chapters/06_block.ipynb``).

Every attention in the package runs this core: multi-head attention (``npformer.core.multi_head``),
the decoder's blocks (``npformer.core.block``, through the unchecked core ``attention`` and
``attention_backward`` with the causal fast path and preallocated gradient buffers), and
``npformer.core.positions.attention_with_bias``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from npformer.core.reductions import max_last, sum_last
from npformer.core.validation import (
    attention_inputs,
    axis_of,
    bool_mask,
    flag,
    float_array,
)


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``: exp(x - max) / sum(exp(x - max)).

    Subtracting the maximum changes nothing mathematically (softmax is invariant to adding a
    constant along the axis) and keeps ``exp`` from overflowing. Keeps the input's dtype.
    """
    x = float_array("softmax", "x", x)
    axis = axis_of("softmax", axis, x.ndim, x.shape)
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def masked_softmax(scores, mask=None, axis: int = -1) -> np.ndarray:
    """Softmax of ``scores`` along ``axis`` where only entries with ``mask`` True take part.

    Masked entries get weight exactly zero. A slice whose entries are ALL masked gets all-zero
    weights (the naive ``exp(-inf) / 0`` would give NaN): a query with nothing to attend to
    reads nothing. ``mask`` must broadcast to ``scores.shape``.
    """
    scores = float_array("masked_softmax", "scores", scores)
    axis = axis_of("masked_softmax", axis, scores.ndim, scores.shape)
    if mask is None:
        return softmax(scores, axis=axis)
    mask = bool_mask("masked_softmax", mask, scores.shape, "scores of shape")
    masked = np.where(mask, scores, -np.inf)
    row_max = masked.max(axis=axis, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0)  # all-masked rows: any finite shift
    e = np.where(mask, np.exp(masked - row_max), 0).astype(scores.dtype, copy=False)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


class AttentionCache(NamedTuple):
    """What the backward pass of attention needs (chapter 06)."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    weights: np.ndarray  # (..., T, S) the softmax output P
    scale: float  # the factor applied to Q K^T (1 / sqrt(d_h), or 1)
    bias_shape: tuple | None = None  # the shape of the additive score bias, if there was one


def scaled_dot_product_attention(
    Q, K, V, mask=None, scale: bool = True, bias=None, *, causal: bool = False
):
    """softmax(Q K^T / sqrt(d_h) + bias) V over the keys; masked keys get zero weight.

    Shapes: Q (..., T, d_h), K (..., S, d_h), V (..., S, d_v); the leading axes of Q and K/V
    broadcast. ``mask`` is boolean, True = may attend, and broadcasts to (..., T, S): a causal
    mask (T, S), a key padding mask (B, 1, 1, S), or their AND. A query whose keys are all masked
    gets zero weights and a zero output. ``scale=False`` drops the 1/sqrt(d_h) (chapter 02).
    ``bias`` (float, broadcasting to (..., T, S)) is added to the scaled scores before the mask:
    how ALiBi and T5 positions enter (chapter 05). ``causal=True`` applies the causal mask of T
    queries that are the last T of the S keys (key j visible to query i when j <= i + S - T)
    without building a boolean mask: the fast path the decoder uses, which may be combined with
    ``mask``. All inputs share one floating dtype, which the outputs keep (a bias of another
    floating dtype is cast to it).

    Returns (out (..., T, d_v), AttentionCache with ``weights`` (..., T, S)).
    """
    fn = "scaled_dot_product_attention"
    Q, K, V, batch = attention_inputs(fn, Q, K, V)
    T, S = Q.shape[-2], K.shape[-2]
    scores_shape = batch + (T, S)
    flag(fn, "scale", scale)
    flag(fn, "causal", causal)
    if causal and T > S:
        raise ValueError(
            f"{fn}: causal=True needs at least as many keys as queries (the queries are the last "
            f"T of the S positions); got Q {Q.shape} and K {K.shape}"
        )
    if mask is not None:
        mask = bool_mask(fn, mask, scores_shape, "scores of shape")
    if bias is not None:
        bias = score_bias(fn, bias, scores_shape, Q.dtype)
    factor = 1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0
    return attention(Q, K, V, factor=factor, mask=mask, bias=bias, causal=causal)


def score_bias(fn: str, bias, scores_shape: tuple, dtype) -> np.ndarray:
    """``bias`` as a float array of ``dtype`` that broadcasts to ``scores_shape``, or ValueError.

    The bias may not add axes or stretch the scores: its broadcast with the scores' shape must be
    the scores' shape itself.
    """
    bias = np.asarray(bias)
    if np.broadcast_shapes(scores_shape, bias.shape) != tuple(scores_shape):
        raise ValueError(
            f"{fn}: bias of shape {bias.shape} does not broadcast to scores of shape "
            f"{tuple(scores_shape)}"
        )
    return bias.astype(dtype, copy=False)


def scaled_dot_product_attention_backward(d_out, cache: AttentionCache, *, bias_grad: bool = False):
    """Gradients of ``scaled_dot_product_attention`` with respect to Q, K and V (and the bias).

    With Z = c Q K^T + bias the scores, P = softmax(Z) the attention weights, c the scale and
    dY = d_out:
        dV = P^T dY,   dP = dY V^T,   dZ = P * (dP - rowsum(dP * P)),
        dQ = c dZ K,   dK = c dZ^T Q,   d_bias = dZ (summed to the bias's shape).
    The third formula is the softmax Jacobian p_i (delta_ij - p_j) applied row by row (many
    texts, and the first source, call the scores S and write it dS; in this book S counts the
    keys). Where the mask made P = 0, dZ is 0 too, so masked keys receive no gradient. When the
    leading axes of Q and K/V (or the bias) were broadcast in the forward pass, the gradients are
    summed back to their shapes.
    Shapes: d_out (..., T, d_v). Returns (dQ like Q, dK like K, dV like V), and d_bias shaped like
    the bias as a fourth item when ``bias_grad=True`` (which needs a forward pass with a bias).
    """
    P, V = cache.weights, cache.V
    expected = P.shape[:-1] + (V.shape[-1],)
    if np.shape(d_out) != expected:  # a d_out that broadcasts would give wrong gradients
        raise ValueError(
            f"scaled_dot_product_attention_backward: d_out has shape {np.shape(d_out)} but the "
            f"forward output had shape {expected}"
        )
    return attention_backward(np.asarray(d_out), cache, bias_grad=bias_grad)


# ------------------------------------------------------------ the core, forward and backward


def attention(Q, K, V, *, factor: float, mask=None, bias=None, causal: bool = False):
    """The attention core, unchecked: what every attention in the package runs.

    scores = factor Q K^T (+ bias) (the causal entries set to -inf), softmax over the keys (in place
    when the only mask is the causal one: the last key a query may see is never masked, so every
    row has a finite maximum; otherwise ``masked_softmax``), weights @ V. ``bias`` must already
    broadcast to the scores' shape; the callers have checked the inputs (readers call
    ``scaled_dot_product_attention``). Returns (out (..., T, d_v), AttentionCache).
    """
    scores = Q @ K.swapaxes(-1, -2)  # (..., T, S) a new array
    if factor != 1.0:
        scores *= factor  # a Python float keeps float32
    if bias is not None:
        scores += bias
    if causal:
        T, S = scores.shape[-2:]
        # (T, S) True after the last key query i may see; built per call, never kept
        future = np.arange(S) > np.arange(T)[:, None] + (S - T)
        np.copyto(scores, -np.inf, where=future)
    if causal and mask is None:
        # softmax in place; halving beats np.max only on a short last axis
        scores -= max_last(scores) if S <= 32 else scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores, out=scores)
        weights /= sum_last(weights)
    else:
        weights = masked_softmax(scores, mask, axis=-1)  # rows sum to 1, or 0 if all masked
    out = weights @ V  # (..., T, d_v)
    bias_shape = None if bias is None else bias.shape
    return out, AttentionCache(Q, K, V, weights, factor, bias_shape)


def attention_backward(d_out, cache: AttentionCache, *, out=None, bias_grad: bool = False):
    """The backward of :func:`attention`, unchecked; the formulas are those of
    ``scaled_dot_product_attention_backward``.

    ``out`` = (dQ, dK, dV): preallocated arrays (or views, e.g. into one fused buffer) of the
    full broadcast shapes that receive the gradients; then nothing is summed back.
    Returns (dQ, dK, dV) or (dQ, dK, dV, d_bias).
    """
    Q, K, V, P, factor, bias_shape = cache
    dq, dk, dv = (None, None, None) if out is None else out
    dV = np.matmul(P.swapaxes(-1, -2), d_out, out=dv)  # (..., S, d_v) dV = P^T dY
    dZ = d_out @ V.swapaxes(-1, -2)  # (..., T, S) dP = dY V^T
    row = sum_last(dZ * P)  # (..., T, 1) rowsum(dP * P)
    dZ -= row
    dZ *= P  # dZ = P * (dP - rowsum(dP * P))
    d_bias = None
    if bias_grad:
        d_bias = _sum_to_shape(dZ, bias_shape).copy()
    if factor != 1.0:
        dZ *= factor  # now c dZ, the gradient of the unscaled Q K^T
    dQ = np.matmul(dZ, K, out=dq)  # (..., T, d_h) dQ = c dZ K
    dK = np.matmul(dZ.swapaxes(-1, -2), Q, out=dk)  # (..., S, d_h) dK = c dZ^T Q
    if out is None:
        dQ, dK, dV = (
            _sum_to_shape(dQ, Q.shape),
            _sum_to_shape(dK, K.shape),
            _sum_to_shape(dV, V.shape),
        )
    return (dQ, dK, dV, d_bias) if bias_grad else (dQ, dK, dV)


def _sum_to_shape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``x`` over the axes that broadcasting added or stretched, so that it has ``shape``."""
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead))) if lead else x
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(axis=stretched, keepdims=True) if stretched else x


# ---------------------------------------------------------------------------- multi-head attention


class HeadsCache(NamedTuple):
    """What ``multi_head_backward`` needs."""

    core: AttentionCache  # q, k (rotated by RoPE), v cut into heads; weights (..., T, S)
    num_heads: int
    rope: np.ndarray | None = None  # (T,) the positions q and k were rotated by, or None
    rotate: object = None  # the rotation (npformer.core.positions.apply_rope), with ``rope``


def _split(x, num_heads: int, groups: int = 1):
    """(B, T, h d_h) -> (B, h, T, d_h), or (B, g, h/g, T, d_h) with ``groups`` = g > 1: a view."""
    B, T, d = x.shape
    if groups == 1:
        return x.reshape(B, T, num_heads, d // num_heads, copy=False).transpose(0, 2, 1, 3)
    x = x.reshape(B, T, groups, num_heads // groups, d // num_heads, copy=False)
    return x.transpose(0, 2, 3, 1, 4)  # (B, g, h/g, T, d_h): query heads by group


def _merge(x):
    """(B, h, T, d_h) -> (B, T, h d_h), the heads side by side (a copy)."""
    B, h, T, d_h = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


def multi_head(
    q,
    k,
    v,
    num_heads: int,
    num_kv_heads: int | None = None,
    *,
    factor: float,
    mask=None,
    bias=None,
    causal: bool = False,
    rope=None,
    rotate=None,
    kv_cache=None,
    layer: int = 0,
    head_edit=None,
):
    """The heads of multi-head attention on projected queries, keys and values; unchecked.

    q (B, T, d) is cut into h = ``num_heads`` heads of width d_h = d / h, k and v (B, S, g d_h)
    into g = ``num_kv_heads`` heads (default h); query head i reads key-value head i // (h / g),
    each group's keys and values broadcast over its h / g query heads, never copied (the
    weights are (B, g, h/g, T, S) when 1 < g < h, else (B, h, T, S)). ``rope``
    (T,) rotates the queries and keys by those positions with ``rotate``
    (``npformer.core.positions.apply_rope``). A ``kv_cache`` (``npformer.core.kv_cache.KVCache``)
    takes the new keys and values of ``layer`` and gives back all S of them. Then the core
    :func:`attention` with ``factor``, ``mask``, ``bias`` (broadcasting to (B, h, T, S)) and
    ``causal``, and the heads merged side by side.

    ``head_edit(weights (B, h, T, S), v (B, h, S, d_h), heads (B, h, T, d_h))``, when given,
    returns the heads' outputs to merge instead of ``heads`` (forward only).
    Returns (merged (B, T, d), HeadsCache); the output projection is the caller's.
    """
    B, T, d = q.shape
    g = num_heads if num_kv_heads is None else num_kv_heads
    q = _split(q, num_heads, g if g < num_heads else 1)  # (B, h, T, d_h) or (B, g, h/g, T, d_h)
    k = _split(k, g)  # (B, g, T_new, d_h)
    v = _split(v, g)  # (B, g, T_new, d_h)
    if rope is not None:  # rotate pair i of the query and key at position m by m w_i
        q, k = rotate(q, rope), rotate(k, rope)
    if kv_cache is not None:
        k, v = kv_cache.write(layer, k, v)  # (B, g, S, d_h): every key and value so far
    if q.ndim == 5:  # grouped: (B, g, 1, S, d_h) broadcasts over the h/g query heads
        k, v = k[:, :, None], v[:, :, None]
    heads, core = attention(q, k, v, factor=factor, mask=mask, bias=bias, causal=causal)
    if q.ndim == 5:
        heads = heads.reshape(B, num_heads, T, d // num_heads)  # (B, h, T, d_h) a view
    if head_edit is not None:
        weights = core.weights.reshape(B, num_heads, T, -1)  # (B, h, T, S)
        v_heads = np.repeat(v[:, :, 0], num_heads // g, axis=1) if q.ndim == 5 else v
        heads = head_edit(weights, v_heads, heads)  # (B, h, T, d_h)
    return _merge(heads), HeadsCache(core, num_heads, rope, rotate)  # (B, T, d)


def multi_head_backward(d_merged, cache: HeadsCache, *, out=None):
    """Backward of :func:`multi_head` (without a cache): the head split, the core's backward,
    the rotation undone (R_m^T = R_-m), the heads merged.

    Shapes: d_merged (B, T, d). ``out`` = (dq, dk, dv): arrays (B, T, d) and (B, S, g d_h),
    e.g. views into one fused buffer, that receive the gradients in place (g = h only).
    Returns (dq (B, T, d), dk (B, S, g d_h), dv (B, S, g d_h)).
    """
    core, num_heads, rope, rotate = cache
    grouped = core.Q.ndim == 5
    g = core.K.shape[1]
    d_heads = _split(d_merged, num_heads, g if grouped else 1)  # like q's heads
    if out is None:
        dQ, dK, dV = attention_backward(d_heads, core)  # summed over each group's heads
        if grouped:
            dQ = dQ.reshape(dQ.shape[0], num_heads, *dQ.shape[3:])  # (B, h, T, d_h)
            dK, dV = dK[:, :, 0], dV[:, :, 0]  # (B, g, S, d_h)
        if rope is not None:  # the gradients arrived for the rotated q, k: rotate them back
            dQ, dK = rotate(dQ, -rope), rotate(dK, -rope)
        return _merge(dQ), _merge(dK), _merge(dV)
    dq, dk, dv = out
    dQ, dK, dV = _split(dq, num_heads), _split(dk, g), _split(dv, g)  # views into out
    attention_backward(d_heads, core, out=(dQ, dK, dV))
    if rope is not None:
        dQ[...] = rotate(dQ, -rope)
        dK[...] = rotate(dK, -rope)
    return dq, dk, dv
