"""Sums and maxima over a short last axis, done the fast way.

Used by the hot paths of chapters 06 and 10 (layer norm, the attention core, the loss).
NumPy's reductions over a SHORT last axis (d = 32, T = 12) cost several times a matrix product
with a vector of ones, which BLAS does in one pass; the trainer of chapter 10 runs dozens per
step, so the hot paths use these helpers. They compute the same sums and maxima (the sums up to
the order of the additions).
"""

from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=128)
def cached_ones(n: int, dtype: np.dtype, column: bool) -> np.ndarray:
    ones = np.ones((n, 1) if column else (n,), dtype=dtype)
    ones.flags.writeable = False
    return ones


def sum_last(x: np.ndarray) -> np.ndarray:
    """Sums over the last axis, kept as an axis of length 1: (..., n) -> (..., 1)."""
    return x @ cached_ones(x.shape[-1], x.dtype, True)


def sum_rows(x: np.ndarray, out=None) -> np.ndarray:
    """Sums over the rows of a matrix: (N, n) -> (n,) (e.g. a bias gradient)."""
    return np.matmul(cached_ones(x.shape[0], x.dtype, False), x, out=out)


def max_last(x: np.ndarray) -> np.ndarray:
    """Maxima over the last axis by halving, (..., n) -> (..., 1): log2(n) elementwise maxima."""
    if x.shape[-1] == 1:
        return x.copy()
    while x.shape[-1] > 1:
        n = x.shape[-1]
        h = n // 2
        m = np.maximum(x[..., :h], x[..., h : 2 * h])  # (..., h)
        if n % 2:  # fold the odd one out into column 0
            np.maximum(m[..., :1], x[..., 2 * h :], out=m[..., :1])
        x = m
    return x
