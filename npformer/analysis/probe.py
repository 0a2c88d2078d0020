"""A linear probe: how much of a label can a linear map read off a model's hidden states?

Taught in chapter 11 (``chapters/11_ablations.ipynb``), where it asks whether a decoder without
position embeddings still knows the position of each token (through the causal mask).

The probe is a ridge-regression classifier: standardize the features, regress the one-hot
labels on them (plus a bias) in closed form, predict the class with the largest output,

    W = (X^T X + lambda N I)^{-1} X^T Y,     y_hat = argmax_c (x W)_c .

It is linear and deterministic (no training loop, no learning rate): if it reads a label
well above chance on held-out data, the label is linearly decodable from the states.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class LinearProbe(NamedTuple):
    """A fitted probe: standardization, then weights (d + 1, C) with the bias in the last row."""

    mean: np.ndarray  # (d,)
    std: np.ndarray  # (d,)
    weights: np.ndarray  # (d + 1, C)


def _check(fn: str, features, labels):
    X, y = np.asarray(features), np.asarray(labels)
    if X.ndim != 2 or y.shape != X.shape[:1]:  # labels of another shape would broadcast
        raise ValueError(
            f"{fn}: features (N, d) and labels (N,) must match, got {X.shape}, {y.shape}"
        )
    return X, y


def _design(probe_mean, probe_std, X):
    Z = (X.astype(np.float64) - probe_mean) / probe_std  # (N, d)
    return np.concatenate([Z, np.ones((X.shape[0], 1))], axis=1)  # (N, d + 1)


def fit_linear_probe(features, labels, num_classes: int, ridge: float = 1e-3) -> LinearProbe:
    """Fit the ridge classifier W = (X^T X + ridge N I)^{-1} X^T onehot(labels), in float64.

    Features are standardized per column first (a constant column is left unscaled), so
    ``ridge`` is relative to unit-variance features. The bias is not penalized.
    Shapes: features (N, d), labels (N,) in [0, num_classes). Returns a :class:`LinearProbe`.
    """
    fn = "fit_linear_probe"
    X, y = _check(fn, features, labels)
    if num_classes < 2 or y.max() >= num_classes or not ridge > 0:
        raise ValueError(
            f"{fn}: num_classes={num_classes} must be >= 2 and exceed every label "
            f"(largest {y.max()}), and ridge={ridge} be > 0"
        )
    mean = X.mean(axis=0).astype(np.float64)  # (d,)
    std = X.std(axis=0).astype(np.float64)  # (d,)
    std[std == 0] = 1.0
    A = _design(mean, std, X)  # (N, d + 1)
    Y = np.eye(num_classes)[y]  # (N, C) one-hot
    penalty = ridge * X.shape[0] * np.eye(A.shape[1])  # (d + 1, d + 1)
    penalty[-1, -1] = 0.0  # no penalty on the bias
    weights = np.linalg.solve(A.T @ A + penalty, A.T @ Y)  # (d + 1, C)
    return LinearProbe(mean, std, weights)


def probe_predict(probe: LinearProbe, features) -> np.ndarray:
    """The class with the largest output for each row of ``features`` (N, d). Returns (N,)."""
    X = np.asarray(features)
    return (_design(probe.mean, probe.std, X) @ probe.weights).argmax(axis=1)


def probe_accuracy(probe: LinearProbe, features, labels) -> float:
    """Share of rows whose predicted class equals the label."""
    X, y = _check("probe_accuracy", features, labels)
    return float((probe_predict(probe, X) == y).mean())


def probe_directions(probe: LinearProbe) -> np.ndarray:
    """The directions of the hidden-state space that the probe reads: (C - 1, d), orthonormal.

    The probe's class scores are ((x - mean) / std) W + b, so class c reads x along
    w_c = W[:d, c] / std. Adding one vector to every w_c changes no argmax, so what the probe
    uses is the span of the differences w_c - mean_c(w_c): C - 1 directions.
    """
    w = probe.weights[:-1] / probe.std[:, None]  # (d, C) in the units of x
    centred = (w - w.mean(axis=1, keepdims=True)).T  # (C, d), rank C - 1
    U, s, Vt = np.linalg.svd(centred, full_matrices=False)
    return Vt[: centred.shape[0] - 1]  # (C - 1, d)


def class_mean_directions(features, labels, num_classes: int) -> np.ndarray:
    """The directions along which the class means of ``features`` differ: (C - 1, d), orthonormal.

    A least-squares probe sees the labels only through X^T Y, the class means of the centred
    features: when the C class means coincide its weights vanish and it predicts one class for
    every input. Projecting out these directions through the overall mean
    (``direction_ablation.remove_directions(x, D, features.mean(axis=0))``) moves every class
    mean onto the overall mean: a linear erasure (LEACE, Belrose et al. 2023, does the same
    with an oblique projection that moves the states least). ``probe_directions``, the
    differences of a fitted probe's class weights, are tilted by the covariance of the
    features and need not span these directions.
    """
    fn = "class_mean_directions"
    X, y = _check(fn, features, labels)
    C = num_classes
    present = np.bincount(y, minlength=C)
    if len(present) > C or (present == 0).any():
        raise ValueError(
            f"{fn}: labels must hold every class of num_classes={C} (0..{C - 1}) and no "
            f"other, got counts {present.tolist()} for features {X.shape}"
        )
    X = X.astype(np.float64)
    means = np.stack([X[y == c].mean(axis=0) for c in range(C)])  # (C, d)
    # rank C - 1 at most: the counts-weighted rows sum to zero
    offsets = means - X.mean(axis=0)  # (C, d)
    return np.linalg.svd(offsets, full_matrices=False)[2][: C - 1]  # (C - 1, d)
