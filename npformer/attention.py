"""Softmax and scaled dot-product attention.

Taught in chapter 01 (``chapters/01_attention.ipynb``); the masked behaviour is discussed in
chapter 03; the backward pass (``scaled_dot_product_attention_backward``) is taught in chapter 06
(``chapters/06_block.ipynb``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from npformer.validation import attention_inputs, bool_mask, float_array, same_dtype


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``: exp(x - max) / sum(exp(x - max)).

    Subtracting the maximum changes nothing mathematically (softmax is invariant to adding a
    constant along the axis) and keeps ``exp`` from overflowing. Keeps the input's dtype.
    """
    x = float_array("softmax", "x", x)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"softmax: axis {axis} is out of range for shape {x.shape}")
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


def scaled_dot_product_attention(Q, K, V, mask=None, scale: bool = True):
    """softmax(Q K^T / sqrt(d_h)) V over the keys; masked keys get zero weight.

    Shapes: Q (..., T, d_h), K (..., S, d_h), V (..., S, d_v); the leading axes of Q and K/V
    broadcast. ``mask`` is boolean, True = may attend, and broadcasts to (..., T, S): a causal
    mask (T, S), a key padding mask (B, 1, 1, S), or their AND. A query whose keys are all masked
    gets zero weights and a zero output. ``scale=False`` drops the 1/sqrt(d_h) (chapter 02).
    All inputs share one floating dtype, which the outputs keep.

    Returns (out (..., T, d_v), AttentionCache with ``weights`` (..., T, S)).
    """
    fn = "scaled_dot_product_attention"
    Q, K, V, batch = attention_inputs(fn, Q, K, V)
    T, S = Q.shape[-2], K.shape[-2]

    factor = 1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0
    scores = Q @ K.swapaxes(-1, -2)  # (..., T, S)
    if scale:
        scores *= factor  # a Python float keeps float32
    if mask is not None:
        mask = bool_mask(fn, mask, batch + (T, S), "scores of shape")
    weights = masked_softmax(scores, mask, axis=-1)  # (..., T, S) rows sum to 1 or 0
    out = weights @ V  # (..., T, d_v)
    return out, AttentionCache(Q, K, V, weights, factor)


def _sum_to_shape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``x`` over the axes that broadcasting added or stretched, so that it has ``shape``."""
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead))) if lead else x
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(axis=stretched, keepdims=True) if stretched else x


def scaled_dot_product_attention_backward(d_out, cache: AttentionCache):
    """Gradients of ``scaled_dot_product_attention`` with respect to Q, K and V.

    With Z = c Q K^T the scores, P = softmax(Z) the attention weights, c the scale and
    dY = d_out:
        dV = P^T dY,   dP = dY V^T,   dZ = P * (dP - rowsum(dP * P)),
        dQ = c dZ K,   dK = c dZ^T Q.
    The third formula is the softmax Jacobian p_i (delta_ij - p_j) applied row by row (many
    texts, and the first source, call the scores S and write it dS; in this book S counts the
    keys). Where the mask made P = 0, dZ is 0 too, so masked keys receive no gradient. When the
    leading axes of Q and K/V were broadcast in the forward pass, the gradients are summed back
    to their shapes.
    Shapes: d_out (..., T, d_v). Returns (dQ like Q, dK like K, dV like V).
    """
    fn = "scaled_dot_product_attention_backward"
    d_out = float_array(fn, "d_out", d_out, min_rank=2)
    Q, K, V, P, factor = cache
    expected = P.shape[:-1] + (V.shape[-1],)
    if d_out.shape != expected:
        raise ValueError(
            f"{fn}: d_out has shape {d_out.shape} but the forward output had shape {expected} "
            f"(weights {P.shape}, V {V.shape})"
        )
    same_dtype(fn, d_out=d_out, Q=Q)
    dV = P.swapaxes(-1, -2) @ d_out  # (..., S, d_v)
    dP = d_out @ V.swapaxes(-1, -2)  # (..., T, S)
    row = np.einsum("...ts,...ts->...t", dP, P)[..., None]  # (..., T, 1) rowsum(dP * P)
    dZ = dP  # reuse the buffer
    dZ -= row
    dZ *= P  # (..., T, S)
    if factor != 1.0:
        dZ *= factor  # now c dZ, the gradient of the unscaled Q K^T
    dQ = dZ @ K  # (..., T, d_h)
    dK = dZ.swapaxes(-1, -2) @ Q  # (..., S, d_h)
    return _sum_to_shape(dQ, Q.shape), _sum_to_shape(dK, K.shape), _sum_to_shape(dV, V.shape)
