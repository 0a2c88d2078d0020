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

import operator
from typing import Callable, NamedTuple

import numpy as np

from npformer.validation import array_dict, int_at_least, positive_number


def _callable(fn: str, name: str, f) -> None:
    if not callable(f):
        raise ValueError(f"{fn}: {name} must be a function of no arguments, got {type(f).__name__}")


def _entry(fn: str, array, index) -> tuple | int:
    """``index`` as an int (or a tuple of ints) naming one entry of ``array``, or ValueError."""
    items = index if isinstance(index, tuple) else (index,)
    try:
        if any(isinstance(i, (bool, np.bool_)) for i in items):
            raise TypeError
        items = tuple(operator.index(i) for i in items)
    except TypeError:
        raise ValueError(
            f"{fn}: index must be an integer (or a tuple of them), got {index!r}"
        ) from None
    shape = array.shape if len(items) == array.ndim else (array.size,) if array.ndim == 1 else None
    if shape is None or len(items) != len(shape):
        raise ValueError(
            f"{fn}: index {index!r} does not name one entry of an array of shape {array.shape}"
        )
    if not all(-n <= i < n for i, n in zip(items, shape, strict=True)):
        raise ValueError(
            f"{fn}: index {index!r} is out of range for an array of shape {array.shape}"
        )
    return items if isinstance(index, tuple) else items[0]


def relative_error(a, b) -> np.ndarray:
    """|a - b| / max(|a|, |b|), elementwise; 0 where both are 0."""
    a = np.asarray(a)
    b = np.asarray(b)
    for name, x in (("a", a), ("b", b)):
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
            raise ValueError(f"relative_error: {name} must be numbers, got dtype {x.dtype}")
    a, b = a.astype(np.float64), b.astype(np.float64)
    if a.shape != b.shape:
        raise ValueError(f"relative_error: a has shape {a.shape} and b has shape {b.shape}")
    scale = np.maximum(np.abs(a), np.abs(b))
    return np.divide(np.abs(a - b), scale, out=np.zeros_like(scale), where=scale > 0)


def normwise_relative_error(a: dict, b: dict) -> float:
    """||a - b|| / ||b|| over all entries of two dicts of arrays with the same names and shapes."""
    array_dict("normwise_relative_error", "a", a)
    array_dict("normwise_relative_error", "b", b)
    if a.keys() != b.keys():
        raise ValueError(
            f"normwise_relative_error: a and b name different arrays: {sorted(set(a) ^ set(b))}"
        )
    for name in a:
        if np.shape(a[name]) != np.shape(b[name]):
            raise ValueError(
                f"normwise_relative_error: {name} has shapes {np.shape(a[name])} and "
                f"{np.shape(b[name])}"
            )
    num = sum(float(np.sum((np.asarray(a[n]) - np.asarray(b[n])) ** 2)) for n in a)
    den = sum(float(np.sum(np.asarray(b[n]) ** 2)) for n in a)
    return float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))


def central_difference(loss_fn: Callable[[], float], array: np.ndarray, index, eps: float):
    """(L(theta + eps) - L(theta - eps)) / (2 eps) for the entry ``array[index]``.

    ``loss_fn()`` must read ``array`` (a parameter, perturbed in place and restored exactly).
    Returns (estimate, L(theta + eps), L(theta - eps)).
    """
    fn = "central_difference"
    _callable(fn, "loss_fn", loss_fn)
    eps = positive_number(fn, "eps", eps)
    if not isinstance(array, np.ndarray):
        raise ValueError(
            f"{fn}: array must be an ndarray (perturbed in place), got {type(array).__name__}"
        )
    index = _entry(fn, array, index)
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
    fn = "select_coordinates"
    array_dict(fn, "grads", grads)
    if (
        isinstance(threshold, (bool, np.bool_))
        or not isinstance(threshold, (int, float, np.integer, np.floating))
        or not 0 <= threshold < np.inf
    ):
        raise ValueError(f"{fn}: threshold must be a finite number >= 0, got {threshold!r}")
    if per_tensor is not None:
        per_tensor = int_at_least(fn, "per_tensor", per_tensor)
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"{fn}: a random subset (per_tensor) needs an rng (a Generator)")
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
    fn = "gradient_check"
    _callable(fn, "loss_fn", loss_fn)
    for name, value in (("params", params), ("grads", grads), ("coordinates", coordinates)):
        array_dict(fn, name, value)
    eps = positive_number(fn, "eps", eps)
    names, indices, analytic, numeric = [], [], [], []
    for name, idx in coordinates.items():
        if name not in params or name not in grads or params[name].shape != grads[name].shape:
            raise ValueError(
                f"gradient_check: coordinates name {name!r}, which params and grads must both "
                f"hold with one shape"
            )
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
    fn = "kink_crossed"
    _callable(fn, "preactivations_fn", preactivations_fn)
    eps = positive_number(fn, "eps", eps)
    if not isinstance(array, np.ndarray):
        raise ValueError(
            f"{fn}: array must be an ndarray (perturbed in place), got {type(array).__name__}"
        )
    index = _entry(fn, array, index)
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"{fn}: array must be floating, got {array.dtype} shape {array.shape}")
    old = array[index]
    try:
        array[index] = old + eps
        plus = preactivations_fn() > 0
        array[index] = old - eps
        minus = preactivations_fn() > 0
    finally:
        array[index] = old
    return bool(np.any(plus != minus))
