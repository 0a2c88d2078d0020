"""Why attention divides by sqrt(d_k): softmax Jacobian, entropy, sensitivity, a measurement.

Taught in chapter 02 (``chapters/02_scaling.ipynb``). The dot product of two vectors with d_k
independent unit-variance components has variance d_k; without the 1/sqrt(d_k) the softmax
saturates as d_k grows: most rows put nearly all their weight on one key, and those rows pass
almost no gradient back to the scores, while a few unsaturated rows carry the rest
(:func:`row_gradients` measures it row by row with the attention core's own backward pass).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from npformer.core.attention import (
    attention,
    scaled_dot_product_attention,
    scaled_dot_product_attention_backward,
)


def softmax_jacobian(p) -> np.ndarray:
    """Jacobian of the softmax along the last axis, from its output p: J = diag(p) - p p^T.

    Entry (i, j) is dp_i/ds_j = p_i (delta_ij - p_j). Shapes: p (..., S) -> J (..., S, S).
    J is symmetric and each of its rows sums to zero (the weights always sum to one).
    """
    p = np.asarray(p)
    outer = p[..., :, None] * p[..., None, :]  # (..., S, S)  p_i p_j
    diag = p[..., :, None] * np.eye(p.shape[-1], dtype=p.dtype)  # (..., S, S)  p_i delta_ij
    return diag - outer


def softmax_backward(p, dp) -> np.ndarray:
    """Gradient on the scores from the gradient on the weights: dz = J dp, row by row.

    With J = diag(p) - p p^T (see :func:`softmax_jacobian`), J dp = p * (dp - sum_j p_j dp_j),
    computed without building J. Shapes: p (..., S), dp (..., S) -> dz (..., S).
    """
    fn = "softmax_backward"
    p = np.asarray(p)
    dp = np.asarray(dp)
    if p.shape != dp.shape:
        raise ValueError(f"{fn}: p has shape {p.shape} but dp has shape {dp.shape}")
    return p * (dp - (p * dp).sum(axis=-1, keepdims=True))  # (..., S)


def entropy(p) -> np.ndarray:
    """Shannon entropy of each distribution along the last axis: H = -sum_j p_j ln p_j.

    Uses 0 ln 0 = 0, so weights that underflowed to zero are fine. 0 <= H <= ln S, with ln S
    for the uniform distribution. Shapes: p (..., S) -> (...).
    """
    p = np.asarray(p)
    safe = np.where(p > 0, p, 1)  # ln 1 = 0 where p == 0
    return 0.0 - (p * np.log(safe)).sum(axis=-1)  # (...); 0.0 - x keeps one-hot rows at +0.0


def sensitivity(p) -> np.ndarray:
    """Trace of the softmax Jacobian for each distribution along the last axis.

    sum_j dp_j/ds_j = sum_j p_j (1 - p_j) = 1 - sum_j p_j^2 (when p sums to one). It is 0 for a
    one-hot p (the softmax no longer responds to its scores) and at most 1 - 1/S, reached by
    the uniform distribution. Shapes: p (..., S) -> (...).
    """
    p = np.asarray(p)
    return (p * (1.0 - p)).sum(axis=-1)  # (...)


class ScalingStats(NamedTuple):
    """What :func:`measure_scaling` reports for one (d_k, scale) pair (means over all rows)."""

    d_k: int
    scale: bool
    score_variance: float  # Var(q . k) of the raw dot products (before any scaling)
    score_sd: float  # standard deviation of the scores that enter the softmax
    max_weight: float  # mean over rows of the largest weight
    entropy: float  # mean over rows of the entropy of the weights
    sensitivity: float  # mean over rows of the trace of the softmax Jacobian


def score_statistics(Q, K, scale: bool) -> ScalingStats:
    """Statistics of the scores Q K^T (divided by sqrt(d_k) when ``scale``) and their softmax.

    Shapes: Q (..., T, d_k), K (..., S, d_k) with broadcasting leading axes. The softmax runs
    over the S keys of each row; the weight statistics are means over all rows, the score
    statistics are over all entries. Returns a :class:`ScalingStats`.
    """
    d_k = Q.shape[-1]
    factor = 1.0 / math.sqrt(d_k) if scale else 1.0
    raw = Q @ K.swapaxes(-1, -2)  # (..., T, S)
    scores = raw * factor  # (..., T, S)
    # the core's weights; values of width 0, since only the weights are wanted
    weights = attention(Q, K, K[..., :0], factor=factor)[1].weights  # (..., T, S)
    return ScalingStats(
        d_k=d_k,
        scale=bool(scale),
        score_variance=float(raw.var()),
        score_sd=float(scores.std()),
        max_weight=float(weights.max(axis=-1).mean()),
        entropy=float(entropy(weights).mean()),
        sensitivity=float(sensitivity(weights).mean()),
    )


def measure_scaling(d_k: int, *, scale: bool, seed: int, keys: int = 64, draws: int = 400):
    """Score and weight statistics of random attention, with or without the 1/sqrt(d_k).

    ``draws`` independent sets of ``keys`` queries and ``keys`` keys, every component N(0, 1)
    from ``np.random.default_rng(seed)`` (all the queries first, then all the keys), each of
    width ``d_k``; returns ``score_statistics(Q, K, scale)``, means over the draws * keys query
    rows, in float64.

    Returns a :class:`ScalingStats`.
    """
    if min(d_k, keys, draws) < 1:  # d_k = 0 would divide by zero into NaN statistics
        raise ValueError(f"measure_scaling: d_k={d_k}, keys={keys} and draws={draws} must be >= 1")
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(draws, keys, d_k))  # (draws, T, d_k)
    K = rng.normal(size=(draws, keys, d_k))  # (draws, S = T, d_k)
    return score_statistics(Q, K, scale)


class RowGradients(NamedTuple):
    """Per-row quantities of one attention call and its backward pass (see :func:`row_gradients`).

    Every field has the shape (..., T) of the rows: one number per query.
    """

    max_weight: np.ndarray  # largest weight of the row
    dZ_norm: np.ndarray  # ||dL/dz_i||: the gradient on the row's scores Z = c Q K^T
    dQ_norm: np.ndarray  # ||dL/dq_i||: the gradient on the query, what W_Q receives via row i


def row_gradients(Q, K, V, d_out, score_scale: float) -> RowGradients:
    """Forward and backward of attention with scores Z = score_scale * Q K^T, summarised per row.

    Calls the attention core (``scaled_dot_product_attention`` and its backward, unscaled, on
    ``score_scale * Q``), so the gradients are the ones training would see. The gradient on the
    scores, dZ = J dP with dP = d_out V^T, is recomputed here from the weights with
    :func:`softmax_backward` (the core keeps it internal); the core's dQ equals
    score_scale * dZ K (tested). With Q = X W_Q, row i adds x_i^T dq_i to the
    gradient of W_Q, whose norm is ||x_i|| ||dq_i||.

    Shapes: Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v), d_out (..., T, d_v).
    Returns a :class:`RowGradients` of (..., T) arrays.
    """
    Q, K, V, d_out = np.asarray(Q), np.asarray(K), np.asarray(V), np.asarray(d_out)
    c = float(score_scale)  # the core's forward and backward check the shapes
    Qc = c * Q  # (..., T, d_k): the unscaled core on c Q gives Z = c Q K^T
    out, cache = scaled_dot_product_attention(Qc, K, V, scale=False)  # (..., T, d_v)
    dQc, _, _ = scaled_dot_product_attention_backward(d_out, cache)  # (..., T, d_k)
    dQ = c * dQc  # (..., T, d_k): chain rule through Qc = c Q
    P = cache.weights  # (..., T, S)
    dZ = softmax_backward(P, d_out @ V.swapaxes(-1, -2))  # (..., T, S)
    return RowGradients(
        max_weight=P.max(axis=-1),
        dZ_norm=np.linalg.norm(dZ, axis=-1),
        dQ_norm=np.linalg.norm(dQ, axis=-1),
    )
