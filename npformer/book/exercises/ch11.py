"""Checker for chapter 11's exercise: the reader writes the projection that removes directions.

``check_remove_directions(fn)`` expects ``fn(x, directions, center)`` to return
x - ((x - c) Q^T) Q, where Q (k, d) is an orthonormal basis of the span of the rows of
``directions`` (k, d), not necessarily orthonormal themselves, for x of shape (..., d). Its
checks are chosen so that each typical mistake fails one of them with a readable case: a
direction used without normalizing it, the centre ignored (projecting around zero), two
non-orthogonal directions removed one after the other without orthogonalizing them, and the
component along the directions returned instead of removed. The package's reference is
``npformer.analysis.direction_ablation.remove_directions``. Tested in
``tests/test_exercises_ch11.py``.
"""

from __future__ import annotations

import numpy as np

from npformer.analysis.direction_ablation import remove_directions
from npformer.book.exercises import Check, QuietReport, Report, compare, run_checks


def _matches(x, directions, center):
    x, directions, center = (np.array(a, dtype=np.float64) for a in (x, directions, center))

    def run(fn):
        got = fn(x.copy(), directions.copy(), center.copy())
        return compare(remove_directions(x, directions, center), got, rtol=1e-9, atol=1e-12)

    return run


def _idempotent(fn):
    rng = np.random.default_rng(11)
    x, D, c = rng.normal(size=(6, 5)), rng.normal(size=(2, 5)), rng.normal(size=5)
    once = fn(x, D, c)
    if once is None:
        return "the function returned None"
    twice = fn(np.asarray(once, dtype=np.float64), D, c)
    problem = compare(once, twice, rtol=1e-9, atol=1e-12)
    return (
        None if problem is None else f"removing the directions twice changed the result: {problem}"
    )


CHECKS = [
    Check("x = [3, 4], one unit direction [1, 0], centre 0", _matches([3, 4], [[1, 0]], [0, 0])),
    Check("the same direction not normalized, [2, 0]", _matches([3, 4], [[2, 0]], [0, 0])),
    Check("a centre c = [1, 1]: only the variation is removed", _matches([3, 4], [[1, 0]], [1, 1])),
    Check(
        "two directions not orthogonal, [1, 0, 0] and [1, 1, 0]",
        _matches([1, 2, 3], [[1, 0, 0], [1, 1, 0]], [0, 0, 0]),
    ),
    Check(
        "a (4, 5, 3) batch, two random directions, a random centre",
        _matches(
            np.random.default_rng(12).normal(size=(4, 5, 3)),
            np.random.default_rng(13).normal(size=(2, 3)),
            np.random.default_rng(14).normal(size=3),
        ),
    ),
    Check("removing twice is removing once", _idempotent),
]


def check_remove_directions(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(x, directions, center)``: remove the directions' variation."""
    return QuietReport(*run_checks(fn, CHECKS, show=show))
