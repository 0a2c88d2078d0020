"""Label smoothing: cross-entropy against a target distribution that keeps some mass off the answer.

Taught in chapter 07 (``chapters/07_encoder_decoder.ipynb``), where the encoder-decoder is
trained with it, as the 2017 Transformer was (epsilon = 0.1, Vaswani et al., Section 5.4).

With V classes, smoothing epsilon and the right answer y, the target distribution is

    q_v = (1 - epsilon) [v = y] + epsilon / V,

the convention of ``torch.nn.functional.cross_entropy(..., label_smoothing=epsilon)`` (the
uniform share also lands on y). The loss at one position is -sum_v q_v log softmax(z)_v
= logsumexp(z) - sum_v q_v z_v, averaged over the positions the loss mask selects; its
gradient with respect to the logits is (softmax(z) - q) / (number of positions). With
epsilon = 0 it is the ordinary cross-entropy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class LabelSmoothingCache(NamedTuple):
    """What ``label_smoothed_cross_entropy_backward`` needs."""

    probs: np.ndarray  # (..., V) softmax of the logits
    targets: np.ndarray  # (...) the right answers
    weights: np.ndarray  # (...) the loss mask divided by its sum
    smoothing: float


def smoothed_targets(targets, num_classes: int, smoothing: float) -> np.ndarray:
    """The target distribution q = (1 - smoothing) onehot(targets) + smoothing / V.

    Shapes: targets (...) integer ids in [0, V). Returns (..., V) float64; every row sums to 1.
    """
    fn = "smoothed_targets"
    targets = _check(fn, targets, num_classes, smoothing)
    q = np.full(targets.shape + (num_classes,), smoothing / num_classes)  # (..., V)
    np.put_along_axis(q, targets[..., None], 1.0 - smoothing + smoothing / num_classes, axis=-1)
    return q


def _check(fn: str, targets, num_classes: int, smoothing) -> np.ndarray:
    """Targets outside [0, V) would wrap or fail far away; smoothing outside [0, 1) is no
    distribution."""
    targets = np.asarray(targets)
    if not 0 <= smoothing < 1 or targets.min() < 0 or targets.max() >= num_classes:
        raise ValueError(
            f"{fn}: smoothing must lie in [0, 1) and targets in [0, {num_classes}), got "
            f"{smoothing!r} and targets {targets.shape} in [{targets.min()}, {targets.max()}]"
        )
    return targets


def label_smoothed_cross_entropy(logits, targets, smoothing: float = 0.1, loss_mask=None):
    """Mean over the selected positions of -sum_v q_v log softmax(logits)_v.

    Shapes: logits (..., V) floating, targets (...) integer ids in [0, V), ``loss_mask``
    broadcasting to targets' shape, 0/1 or bool (None: every position counts). Computed from
    logits - max, so large logits do not overflow. Returns (loss as a Python float,
    LabelSmoothingCache).
    """
    fn = "label_smoothed_cross_entropy"
    logits = np.asarray(logits)
    V = logits.shape[-1]
    targets = _check(fn, targets, V, smoothing)
    if targets.shape != logits.shape[:-1]:  # targets that broadcast would score other rows
        raise ValueError(
            f"{fn}: targets of shape {targets.shape} must match logits of shape "
            f"{logits.shape} without its last axis"
        )
    if loss_mask is None:
        weights = np.ones(targets.shape, dtype=logits.dtype)
    else:
        m = np.asarray(loss_mask)
        weights = np.broadcast_to(m, targets.shape).astype(logits.dtype)
        if not ((weights == 0) | (weights == 1)).all() or weights.sum() == 0:
            raise ValueError(
                f"{fn}: loss_mask of shape {m.shape} must hold 0/1 values, at least one 1"
            )
    weights = weights / weights.sum()  # (...) sums to 1
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (..., V)
    exp = np.exp(shifted)
    total = exp.sum(axis=-1, keepdims=True)  # (..., 1)
    log_probs = shifted - np.log(total)  # (..., V)
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # (...)
    per_position = -(1.0 - smoothing) * picked - smoothing * log_probs.mean(axis=-1)
    loss = float(np.sum(weights * per_position))
    return loss, LabelSmoothingCache(exp / total, targets, weights, smoothing)


def label_smoothed_cross_entropy_backward(cache: LabelSmoothingCache) -> np.ndarray:
    """dL/dlogits = (softmax(logits) - q) * weight of each position. Returns (..., V)."""
    probs, targets, weights, smoothing = cache
    V = probs.shape[-1]
    d = probs - smoothing / V  # (..., V)
    np.put_along_axis(
        d,
        targets[..., None],
        np.take_along_axis(d, targets[..., None], axis=-1) - (1.0 - smoothing),
        axis=-1,
    )
    d *= weights[..., None]
    return d
