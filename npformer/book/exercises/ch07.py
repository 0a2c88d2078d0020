"""Checker for the exercise of chapter 07 (``chapters/07_encoder_decoder.ipynb``): the reader
writes the label-smoothed cross-entropy.

The reader's ``fn(logits, targets, smoothing)`` takes logits (..., V), integer targets (...) and
epsilon, and returns the mean over positions of -sum_v q_v log softmax(logits)_v with
q = (1 - epsilon) onehot(target) + epsilon / V (the uniform share lands on the target too).
The reference is :func:`npformer.core.label_smoothing.label_smoothed_cross_entropy`.
"""

from __future__ import annotations

import math

import numpy as np

from npformer.book.exercises import Check, compare, fmt, run_checks
from npformer.core.label_smoothing import label_smoothed_cross_entropy


def _reference(logits, targets, smoothing):
    return label_smoothed_cross_entropy(logits, targets, smoothing)[0]


def _case(seed: int, shape=(2, 3), V: int = 5):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape + (V,)) * 2, rng.integers(0, V, shape)


def _value(fn, logits, targets, smoothing):
    got = fn(logits.copy(), targets.copy(), smoothing)
    return compare(_reference(logits, targets, smoothing), got, rtol=1e-6, atol=1e-9)


def _check_plain(fn):
    logits, targets = _case(0)
    problem = _value(fn, logits, targets, 0.0)
    return None if problem is None else f"with smoothing 0 (plain cross-entropy): {problem}"


def _check_uniform(fn):
    V = 5
    logits, targets = np.zeros((2, 3, V)), np.array([[0, 1, 2], [3, 4, 0]])
    got = fn(logits, targets, 0.3)
    expected = math.log(V)
    if got is None or not np.isfinite(got) or abs(float(got) - expected) > 1e-9:
        return (
            f"equal logits must cost log V = {fmt(expected)} whatever the smoothing "
            f"(q sums to 1), got {fmt(got) if got is not None else None}"
        )
    return None


def _check_value(fn):
    logits, targets = _case(1)
    problem = _value(fn, logits, targets, 0.1)
    return None if problem is None else f"logits of _case(1), smoothing 0.1: {problem}"


def _check_floor(fn):
    V, eps = 5, 0.2
    targets = np.array([[1, 4]])
    q = np.full((1, 2, V), eps / V)
    np.put_along_axis(q, targets[..., None], 1 - eps + eps / V, axis=-1)
    entropy = float(-(q * np.log(q)).sum(-1).mean())
    got = fn(np.log(q), targets, eps)
    if got is None or not np.isfinite(got) or abs(float(got) - entropy) > 1e-9:
        return (
            f"logits log q must give the floor H(q) = {fmt(entropy)}, got "
            f"{fmt(got) if got is not None else None}"
        )
    return None


def _check_large(fn):
    V = 5
    targets = np.array([[2, 0]])
    logits = np.where(np.arange(V) == targets[..., None], 800.0, -800.0)
    problem = _value(fn, logits, targets, 0.1)
    return None if problem is None else f"logits of +-800 (exp overflows unless shifted): {problem}"


def _check_mean(fn):
    logits, targets = _case(2, shape=(4, 6), V=9)
    problem = _value(fn, logits, targets, 0.1)
    return None if problem is None else f"a (4, 6, 9) batch, mean over the 24 positions: {problem}"


CHECKS = [
    Check("smoothing 0 is the plain cross-entropy", _check_plain),
    Check("equal logits cost log V", _check_uniform),
    Check("value against the reference", _check_value),
    Check("the best logits reach the entropy of q", _check_floor),
    Check("large logits stay finite", _check_large),
    Check("the mean over every position", _check_mean),
]


def check_label_smoothing(fn, show: bool = True):
    """Run the six checks on the reader's label-smoothed cross-entropy; print one line."""
    return run_checks(fn, CHECKS, show=show)
