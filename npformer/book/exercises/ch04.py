"""Checkers for chapter 04's exercise: the reader writes ``split_heads`` and ``merge_heads``.

``check_split_heads(fn)`` expects ``fn(X, num_heads)`` to turn X (B, T, d) into (B, h, T, d_h)
with head k owning columns k d_h ... (k + 1) d_h - 1 of every token; ``check_merge_heads(fn)``
expects ``fn(H)`` to be its exact inverse, (B, h, T, d_h) -> (B, T, h d_h). The checks use the
10 t + c matrix of the chapter, so a failure shows which numbers went where. Typical mistakes
each fail a check: a reshape without the transpose, the head axis cut the wrong way
(reshape to (B, T, d_h, h)), a transpose that leaves the head axis last, and a merge that is a
plain reshape and so does not undo the transpose. Tested in ``tests/test_exercises_ch04.py``.
"""

from __future__ import annotations

import numpy as np

from npformer.book.exercises import Check, Report, compare, run_checks
from npformer.core.multi_head import merge_heads, split_heads


def _numbered(B: int, T: int, d: int) -> np.ndarray:
    """X[b, t, c] = 100 b + 10 t + c: every entry says where it came from."""
    b, t, c = np.meshgrid(np.arange(B), np.arange(T), np.arange(d), indexing="ij")
    return (100.0 * b + 10.0 * t + c).astype(np.float64)


def _shape(got, expected=(1, 2, 3, 2)):
    got = np.asarray(got)
    if got.shape != expected:
        return f"expected shape {expected}, got shape {got.shape}"
    return None


def _split_case(B, T, d, h):
    X = _numbered(B, T, d)
    return lambda fn: compare(split_heads(X, h), fn(X.copy(), h), rtol=0, atol=0)


def _split_owns_columns(fn):
    X = _numbered(1, 3, 6)  # (1, 3, 6), h = 3 heads of width 2
    got = np.asarray(fn(X.copy(), 3))
    if got.shape != (1, 3, 3, 2):
        return f"expected shape (1, 3, 3, 2), got shape {got.shape}"
    for k in range(3):
        own = X[0, :, 2 * k : 2 * k + 2]  # (T, d_h): columns 2k, 2k + 1 of every token
        if not np.array_equal(got[0, k], own):
            return (
                f"head {k} should hold columns {2 * k}-{2 * k + 1} of every token, "
                f"{own.tolist()}, got {got[0, k].tolist()}"
            )
    return None


SPLIT_CHECKS = [
    Check("shape (1, 3, 4), h = 2 -> (1, 2, 3, 2)", lambda fn: _shape(fn(_numbered(1, 3, 4), 2))),
    Check("head k owns columns k d_h .. (k + 1) d_h - 1 (d = 6, h = 3)", _split_owns_columns),
    Check("values, B = 2, T = 5, d = 8, h = 4", _split_case(2, 5, 8, 4)),
    Check("h = 1 keeps every token whole", _split_case(2, 4, 6, 1)),
    Check("h = d: heads of width 1", _split_case(1, 3, 4, 4)),
]


def _merge_inverts(B, T, d, h):
    X = _numbered(B, T, d)

    def run(fn):
        problem = compare(X, fn(split_heads(X, h).copy()), rtol=0, atol=0)
        return None if problem is None else f"merge(split(X)) is not X: {problem}"

    return run


def _merge_values(fn):
    H = _numbered(2, 3, 4).reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).copy()  # (B, h, T, d_h)
    return compare(merge_heads(H), fn(H.copy()), rtol=0, atol=0)


MERGE_CHECKS = [
    Check(
        "shape (1, 2, 3, 2) -> (1, 3, 4)",
        lambda fn: _shape(fn(split_heads(_numbered(1, 3, 4), 2).copy()), (1, 3, 4)),
    ),
    Check("merge(split(X)) = X, T = 3, d = 4, h = 2", _merge_inverts(1, 3, 4, 2)),
    Check("merge(split(X)) = X, B = 2, T = 5, d = 12, h = 3", _merge_inverts(2, 5, 12, 3)),
    Check("values of a (2, 2, 3, 2) input", _merge_values),
    Check("h = 1", _merge_inverts(2, 4, 6, 1)),
]


def check_split_heads(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(X, num_heads)``: (B, T, d) -> (B, h, T, d / h), head k's columns."""
    return run_checks(fn, SPLIT_CHECKS, show=show)


def check_merge_heads(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(H)``: (B, h, T, d_h) -> (B, T, h d_h), the inverse of the split."""
    return run_checks(fn, MERGE_CHECKS, show=show)
