"""Checker for chapter 01's exercise: the reader writes a numerically stable row softmax.

``check_row_softmax(fn)`` expects ``fn(z)`` to return softmax(z) along the LAST axis (the keys),
for an array of any rank, without overflowing on large scores. Its checks are chosen so that
each typical mistake fails one of them with a readable case: the wrong axis, no max subtraction
(overflow to nan), normalizing by the max instead of the sum, one global max instead of a max
per row (underflow to 0 / 0 on rows far apart). Tested in ``tests/test_exercises_ch01.py``.
"""

from __future__ import annotations

import numpy as np

from npformer.book.exercises import Check, Report, compare, fmt, run_checks
from npformer.core.attention import softmax


def _call(fn, z):
    """The reader's function on a copy of z, with NumPy's overflow warnings silenced."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return fn(np.array(z, dtype=np.float64))


def _matches(z):
    return lambda fn: compare(softmax(z, axis=-1), _call(fn, z), rtol=1e-9, atol=1e-12)


def _rows_sum_to_one(fn):
    z = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 5.0, -1.0], [2.0, -3.0, 0.5, 1.0]])  # (3, 4)
    got = _call(fn, z)
    if got is None or np.shape(got) != z.shape:
        return compare(softmax(z), got)
    sums = np.asarray(got, dtype=np.float64).sum(axis=-1)
    if not np.allclose(sums, 1.0, rtol=0, atol=1e-9):
        return f"on a (3, 4) array the rows sum to {fmt(sums)}, not 1 (the keys are the last axis)"
    return None


def _shift_invariant(fn):
    z = np.array([[0.5, -1.0, 2.0], [3.0, 3.0, 0.0]])  # (2, 3)
    shift = np.array([[100.0], [-50.0]])  # one constant per row
    a, b = _call(fn, z), _call(fn, z + shift)
    if a is None or b is None:
        return "the function returned None"
    if compare(a, b, rtol=1e-9, atol=1e-12) is not None:
        return f"adding 100 and -50 to the two rows changed the weights from {fmt(a)} to {fmt(b)}"
    return None


CHECKS = [
    Check("one row, [2, 1, 0]", _matches(np.array([2.0, 1.0, 0.0]))),
    Check("every row of a (3, 4) array sums to one", _rows_sum_to_one),
    Check(
        "a (2, 3, 5) batch, softmax along the last axis",
        _matches(
            np.linspace(-2.0, 3.0, 30).reshape(2, 3, 5) * np.array([1.0, -1.0, 0.5, 2.0, 0.0])
        ),
    ),
    Check(
        "large scores, [1000, 999, 998]: no overflow", _matches(np.array([1000.0, 999.0, 998.0]))
    ),
    Check("a constant added to a row changes nothing", _shift_invariant),
    Check(
        "two rows far apart, [0, 1, 2] and [-1000, -1001, -1002]",
        _matches(np.array([[0.0, 1.0, 2.0], [-1000.0, -1001.0, -1002.0]])),
    ),
]


def check_row_softmax(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(z)``: a stable softmax of ``z`` along its last axis."""
    return run_checks(fn, CHECKS, show=show)
