"""Central-difference gradient checks, and the test that tells a ReLU kink from a wrong gradient.

Taught in chapter 06 (``chapters/06_block.ipynb``), where central differences check the
hand-written backward pass; its Going deeper page (``chapters/06_deeper_depth.ipynb``) runs the
whole-model check with its kinks. The tests use it for every backward in the package.

The central difference (L(theta + eps) - L(theta - eps)) / (2 eps) differs from dL/dtheta by
O(eps^2) where L is smooth, plus a rounding error of about u |L| / eps (u the unit roundoff).
Where the perturbation makes some ReLU input change sign, L is not smooth in [theta - eps,
theta + eps] and the central difference measures an average of two slopes instead.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np


def relative_error(a, b) -> np.ndarray:
    """|a - b| / max(|a|, |b|), elementwise; 0 where both are 0."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"relative_error: a has shape {a.shape} and b has shape {b.shape}")
    scale = np.maximum(np.abs(a), np.abs(b))
    return np.divide(np.abs(a - b), scale, out=np.zeros_like(scale), where=scale > 0)


def normwise_relative_error(a: dict, b: dict) -> float:
    """||a - b|| / ||b|| over all entries of two dicts of arrays with the same names and shapes."""
    shapes = {n: (np.shape(a[n]), np.shape(b.get(n))) for n in a}
    if a.keys() != b.keys() or any(sa != sb for sa, sb in shapes.values()):
        raise ValueError(f"normwise_relative_error: a and b must match, got shapes {shapes}")
    num = sum(float(np.sum((np.asarray(a[n]) - np.asarray(b[n])) ** 2)) for n in a)
    den = sum(float(np.sum(np.asarray(b[n]) ** 2)) for n in a)
    return float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))


def central_difference(loss_fn: Callable[[], float], array: np.ndarray, index, eps: float):
    """(L(theta + eps) - L(theta - eps)) / (2 eps) for the entry ``array[index]``.

    ``loss_fn()`` must read ``array`` (a parameter, perturbed in place and restored exactly).
    Returns (estimate, L(theta + eps), L(theta - eps)).
    """
    if array.dtype != np.float64:
        raise ValueError(
            f"central_difference: finite differences need float64, got {array.dtype} "
            f"for an array of shape {array.shape}"
        )
    old = array[index]
    try:
        array[index] = old + eps
        plus = loss_fn()
        array[index] = old - eps
        minus = loss_fn()
    finally:
        array[index] = old
    return (plus - minus) / (2 * eps), plus, minus


def select_coordinates(grads: dict, threshold: float = 1e-6, per_tensor=None, rng=None) -> dict:
    """Flat indices, per tensor, of the coordinates whose |gradient| exceeds ``threshold``.

    With ``per_tensor`` an integer, keep a random subset of at most that many per tensor
    (drawn from ``rng``, sorted). Returns {name: 1-D int array} (tensors with none are left out).
    """
    chosen = {}
    for name, g in grads.items():
        idx = np.flatnonzero(np.abs(g) > threshold)
        if per_tensor is not None and idx.size > per_tensor:
            idx = np.sort(rng.choice(idx, size=per_tensor, replace=False))
        if idx.size:
            chosen[name] = idx
    return chosen


class GradCheck(NamedTuple):
    """One row per checked coordinate."""

    names: list  # parameter name of each row
    indices: np.ndarray  # flat index inside that parameter
    analytic: np.ndarray  # the hand-written gradient
    numeric: np.ndarray  # the central difference
    errors: np.ndarray  # relative_error(analytic, numeric)

    @property
    def worst(self) -> float:
        return float(self.errors.max()) if self.errors.size else 0.0

    def failures(self, tol: float) -> list:
        """(name, flat index) of the rows whose relative error exceeds ``tol``."""
        rows = np.flatnonzero(self.errors > tol)
        return [(self.names[r], int(self.indices[r])) for r in rows]


def gradient_check(
    loss_fn: Callable[[], float], params: dict, grads: dict, coordinates: dict, eps: float
) -> GradCheck:
    """Compare ``grads`` with central differences of ``loss_fn`` at ``coordinates``.

    ``coordinates`` is {name: flat indices} (see ``select_coordinates``); ``loss_fn()`` reads
    ``params``, which are perturbed in place one entry at a time and restored exactly.
    """
    names, indices, analytic, numeric = [], [], [], []
    for name, idx in coordinates.items():
        flat = params[name].reshape(-1)
        if not np.shares_memory(flat, params[name]):
            raise ValueError(f"gradient_check: parameter {name} must be contiguous")
        g = grads[name].reshape(-1)
        for i in idx:
            est, _, _ = central_difference(loss_fn, flat, int(i), eps)
            names.append(name)
            indices.append(int(i))
            analytic.append(g[i])
            numeric.append(est)
    analytic, numeric = np.array(analytic), np.array(numeric)
    return GradCheck(
        names,
        np.array(indices, dtype=np.int64),
        analytic,
        numeric,
        relative_error(analytic, numeric),
    )


def kink_crossed(
    preactivations_fn: Callable[[], np.ndarray], array: np.ndarray, index, eps: float
) -> bool:
    """Does some ReLU input change sign between theta - eps and theta + eps?

    ``preactivations_fn()`` returns every ReLU input of the model (any shape) for the current
    parameters; ``array[index]`` is perturbed in place to theta + eps and theta - eps, then
    restored exactly. True if any entry is positive at one end and non-positive at the other.
    """
    old = array[index]
    try:
        array[index] = old + eps
        plus = preactivations_fn() > 0
        array[index] = old - eps
        minus = preactivations_fn() > 0
    finally:
        array[index] = old
    return bool(np.any(plus != minus))
