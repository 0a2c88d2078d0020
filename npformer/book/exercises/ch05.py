"""Checker for chapter 05's exercise (``chapters/05_positions.ipynb``): write RoPE yourself.

The reader writes ``rope(X)``: rotate every pair of coordinates (2i, 2i+1) of the row at
position m by the angle m w_i, w_i = 10000^(-2i/d_h), for X of shape (T, d_h) and positions
0 .. T-1. The checks run from the coarsest property to the full comparison with
``npformer.core.positions.apply_rope``, so the first failing one names the mistake: sin and cos
swapped (position 0 moves), a rotation by -m w_i (the wrong sign), the half-split pairing
(i, i + d_h/2) instead of adjacent pairs, and i running over the d_h columns instead of the
d_h/2 pairs (the frequencies fall too fast).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npformer.book.exercises import Check, Report, compare, fmt, run_checks
from npformer.core.positions import apply_rope


def _unit(T: int, d: int, column: int) -> np.ndarray:
    X = np.zeros((T, d))
    X[:, column] = 1.0
    return X  # (T, d): the same basis vector at every position


def _shape(fn: Callable) -> str | None:
    X = np.random.default_rng(50).standard_normal((5, 8))
    out = np.asarray(fn(X))
    if out.shape != X.shape:
        return f"X of shape {X.shape} came back with shape {out.shape}"
    return None


def _position_zero(fn: Callable) -> str | None:
    X = np.random.default_rng(51).standard_normal((3, 8))
    out = np.asarray(fn(X))
    return compare(X[0], out[0], rtol=0, atol=1e-9)  # angle 0: nothing turns


def _lengths(fn: Callable) -> str | None:
    X = np.random.default_rng(52).standard_normal((6, 8))
    out = np.asarray(fn(X))
    return compare(np.linalg.norm(X, axis=1), np.linalg.norm(out, axis=1), rtol=1e-9, atol=1e-9)


def _sign(fn: Callable) -> str | None:
    # x = (1, 0) at position 1 turns by +1 radian: (cos 1, sin 1); with d_h = 2 there is
    # one pair, the same in every layout, so only the direction of the turn is tested
    out = np.asarray(fn(_unit(2, 2, 0)))
    problem = compare(np.array([np.cos(1.0), np.sin(1.0)]), out[1, :2], rtol=0, atol=1e-9)
    return None if problem is None else f"e_0 at position 1: {problem}"


def _pairing(fn: Callable) -> str | None:
    # coordinate 1 of a d_h = 8 head belongs to pair 0 = (0, 1): nothing else may move
    out = np.asarray(fn(_unit(3, 8, 1)))
    outside = np.abs(out[:, 2:]).max()
    if outside > 1e-9:
        nonzero = sorted({int(j) for j in np.flatnonzero(np.abs(out).max(axis=0) > 1e-9)})
        return f"e_1 (pair (0, 1)) leaked into columns {nonzero}: pairs must be (2i, 2i + 1)"
    return None


def _frequencies(fn: Callable) -> str | None:
    X = np.random.default_rng(53).standard_normal((40, 16))
    got = np.asarray(fn(X))
    expected = apply_rope(X)
    problem = compare(expected, got, rtol=1e-7, atol=1e-9)
    if problem is None:
        return None
    # say which pair turns at the wrong rate: the first whose columns differ
    worst = np.abs(got - expected).max(axis=0)  # (16,)
    pair = int(np.flatnonzero(worst > 1e-9)[0]) // 2
    rate = fmt(1e4 ** (-pair / 8))  # w_i = 10000^(-2i/16)
    return f"pair i = {pair} turns at the wrong rate (expected w_{pair} = {rate}); {problem}"


CHECKS = [
    Check("returns an array of the shape of X", _shape),
    Check("leaves position 0 unchanged", _position_zero),
    Check("keeps the length of every row", _lengths),
    Check("turns pair 0 at position 1 by +1 radian", _sign),
    Check("pairs the coordinates (2i, 2i + 1)", _pairing),
    Check("equals positions.apply_rope on a (40, 16) input", _frequencies),
]


def check_rope(fn: Callable, *, show: bool = True) -> Report:
    """Check the reader's ``rope(X)`` for X (T, d_h); print one line and return the report."""
    return run_checks(fn, CHECKS, show=show)
