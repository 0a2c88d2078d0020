"""Checker for chapter 02's exercise: the gradient through the softmax, dz = J dp.

Taught in chapter 02 (``chapters/02_scaling.ipynb``). The reader writes ``fn(p, dp)`` returning
the gradient on the scores given the weights ``p`` (..., S) of a softmax and the gradient ``dp``
on them; the reference is :func:`npformer.analysis.scaling.softmax_backward`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npformer.analysis.scaling import softmax_backward
from npformer.book.exercises import Check, Report, compare, fmt, run_checks
from npformer.core.attention import softmax


def _case(seed: int, shape: tuple[int, ...], spread: float = 1.0):
    rng = np.random.default_rng(seed)
    p = softmax(spread * rng.normal(size=shape))  # (..., S)
    dp = rng.normal(size=shape)  # (..., S)
    return p, dp


def _against_reference(p, dp) -> Callable[[Callable], str | None]:
    def run(fn: Callable) -> str | None:
        with np.errstate(all="ignore"):
            got = fn(p.copy(), dp.copy())
        return compare(softmax_backward(p, dp), got, rtol=1e-9, atol=1e-12)

    return run


def _rows_sum_to_zero(fn: Callable) -> str | None:
    p, dp = _case(3, (4, 6), spread=2.0)
    with np.errstate(all="ignore"):
        got = np.asarray(fn(p, dp), dtype=float)
    if got.shape != p.shape:
        return f"expected shape {p.shape}, got shape {got.shape}"
    sums = got.sum(axis=-1)  # (4,)
    if not np.allclose(sums, 0, atol=1e-12):
        return f"the rows of dz sum to {fmt(sums)}, not to 0 (the weights always sum to one)"
    return None


def _one_hot_passes_nothing(fn: Callable) -> str | None:
    p = np.array([0.0, 1.0, 0.0, 0.0])  # (S,) a saturated row
    dp = np.array([0.5, -2.0, 3.0, 1.0])  # (S,)
    with np.errstate(all="ignore"):
        got = fn(p, dp)
    return compare(np.zeros(4), got, atol=1e-15)


CHECKS = [
    Check("one row of 4 weights", _against_reference(*_case(0, (4,)))),
    Check("rows of dz sum to zero", _rows_sum_to_zero),
    Check("a stack of rows, shape (2, 3, 5)", _against_reference(*_case(1, (2, 3, 5)))),
    Check("a one-hot row passes no gradient", _one_hot_passes_nothing),
    Check("a nearly saturated row, scores spread by 30", _against_reference(*_case(2, (3, 7), 30))),
]


def check_softmax_backward(fn: Callable, *, show: bool = True) -> Report:
    """Check the reader's ``fn(p, dp) -> dz`` (J dp row by row); print one line."""
    return run_checks(fn, CHECKS, show=show)
