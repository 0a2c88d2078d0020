"""Checker for the exercise of chapter 06 (``chapters/06_block.ipynb``): layer norm's backward.

The reader writes ``fn(dy, x, gamma, eps=1e-5) -> (dx, dgamma, dbeta)``, the gradients of
y = gamma * (x - mean) / sqrt(var + eps) + beta over the last axis, given dy = dL/dy. The checks
run from the most telling property to the full comparison, so that the first failure points
at the mistake: the gradient of beta and of gamma (summed over every leading axis), then dx
for an upstream gradient that only shifts (the mean term), then one that mostly stretches along
x_hat (the variance term), then random cases of rank 1, 2 and 3 against
``npformer.core.block.layer_norm_backward``.
"""

from __future__ import annotations

import numpy as np

from npformer.book.exercises import Check, compare, run_checks
from npformer.core.block import layer_norm, layer_norm_backward

EPS = 1e-5


def _case(shape, seed):
    rng = np.random.default_rng(seed)
    d = shape[-1]
    x = rng.normal(1.0, 2.0, size=shape)
    gamma = rng.normal(1.0, 0.5, size=d)
    beta = rng.normal(size=d)
    dy = rng.normal(size=shape)
    return dy, x, gamma, beta


def _reference(dy, x, gamma, beta):
    _, cache = layer_norm(x, gamma, beta, EPS)
    return layer_norm_backward(dy, cache)  # (dx, dgamma, dbeta)


def _three(got):
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return None, f"expected a tuple (dx, dgamma, dbeta), got {type(got).__name__}"
    return got, None


def _part(index: int, name: str, shape, seed: int, dy_of=None):
    def run(fn):
        dy, x, gamma, beta = _case(shape, seed)
        if dy_of is not None:
            dy = dy_of(x, gamma)
        got, problem = _three(fn(dy.copy(), x.copy(), gamma.copy(), EPS))
        if problem:
            return problem
        problem = compare(_reference(dy, x, gamma, beta)[index], got[index], rtol=1e-6, atol=1e-9)
        return None if problem is None else f"{name} for x of shape {shape}: {problem}"

    return run


def _shift_only(x, gamma):
    """dy such that g = dy * gamma is the same in every component: only the mean term acts."""
    return np.broadcast_to(1.0 / gamma, x.shape) * 0.7


def _mostly_stretch(x, gamma):
    """dy such that g = 2 x_hat + a little noise: the variance term removes the 2 x_hat."""
    x_hat, _ = layer_norm(x, np.ones(x.shape[-1]), np.zeros(x.shape[-1]), EPS)
    noise = 0.1 * np.random.default_rng(7).normal(size=x.shape)
    return (2.0 * x_hat + noise) / gamma


CHECKS = [
    Check("dbeta sums dy over every position", _part(2, "dbeta", (2, 3, 4), 1)),
    Check("dgamma sums dy * x_hat over every position", _part(1, "dgamma", (2, 3, 4), 2)),
    Check(
        "dx when dy * gamma is constant along d (a shift of x changes nothing: dx = 0)",
        _part(0, "dx", (3, 4), 3, _shift_only),
    ),
    Check(
        "dx when dy * gamma is mostly 2 x_hat (a stretch of x changes nothing)",
        _part(0, "dx", (3, 4), 4, _mostly_stretch),
    ),
    Check("dx for one position, x of shape (d,)", _part(0, "dx", (6,), 5)),
    Check("dx, dgamma, dbeta for x of shape (B, T, d)", lambda fn: _all_three(fn, (2, 5, 3), 6)),
]


def _all_three(fn, shape, seed):
    dy, x, gamma, beta = _case(shape, seed)
    got, problem = _three(fn(dy.copy(), x.copy(), gamma.copy(), EPS))
    if problem:
        return problem
    names = ("dx", "dgamma", "dbeta")
    for name, want, have in zip(names, _reference(dy, x, gamma, beta), got, strict=True):
        problem = compare(want, have, rtol=1e-6, atol=1e-9)
        if problem:
            return f"{name} for x of shape {shape}: {problem}"
    return None


def check_layer_norm_backward(fn, *, show: bool = True):
    """Check the reader's ``fn(dy, x, gamma, eps) -> (dx, dgamma, dbeta)``; print one line."""
    return run_checks(fn, CHECKS, show=show)
