"""Checker for chapter 09's exercise: the bytes of a KV cache, from a model's shape.

The reader writes ``cache_bytes(num_layers, num_heads, num_kv_heads, d_model, seq_len, batch,
dtype)``: the bytes of the keys and values a decoder caches for ``batch`` sequences of
``seq_len`` positions, with ``num_kv_heads`` key-value heads of width d_model / num_heads and
numbers of ``dtype``. The reference is ``npformer.core.kv_cache.kv_cache_bytes``, and each check
also compares with the bytes of a real ``KVCache`` of that shape where it is small enough to
allocate.
"""

from __future__ import annotations

import numpy as np

from npformer.book.exercises import Check, run_checks
from npformer.core.kv_cache import KVCache, kv_cache_bytes


def reference_cache_bytes(num_layers, num_heads, num_kv_heads, d_model, seq_len, batch, dtype):
    """2 x layers x kv_heads x d_head x T x batch x bytes per number."""
    d_head = d_model // num_heads
    return kv_cache_bytes(
        num_layers, num_kv_heads, d_head, seq_len, batch, np.dtype(dtype).itemsize
    )


def _check(args, allocate: bool):
    def run(fn):
        got = fn(*args)
        expected = reference_cache_bytes(*args)
        if allocate:  # the bytes a real cache of that shape holds
            L, h, g, d, T, B, dtype = args
            real = KVCache(L, B, g, T, d // h, dtype=dtype).nbytes
            assert real == expected
        if got is None:
            return "the function returned None"
        if not isinstance(got, (int, np.integer)) and not float(got).is_integer():
            return f"expected a whole number of bytes {expected:,}, got {got!r}"
        if int(got) != expected:
            return f"expected {expected:,} bytes, got {int(got):,} ({int(got) / expected:.4g} x)"
        return None

    return run


CASES = [
    (
        "the toy model: 4 layers, 8 heads, d = 256, T = 160, float64",
        (4, 8, 8, 256, 160, 1, np.float64),
        True,
    ),
    ("a batch of 3 sequences, float32", (2, 4, 4, 64, 10, 3, np.float32), True),
    (
        "grouped-query: 8 query heads share 2 key-value heads",
        (3, 8, 2, 64, 12, 2, np.float64),
        True,
    ),
    (
        "multi-query, float16: 32 layers, d = 4096, T = 4096",
        (32, 32, 1, 4096, 4096, 1, np.float16),
        False,
    ),
    (
        "32 layers, 32 KV heads of 128, T = 4096, float16",
        (32, 32, 32, 4096, 4096, 1, np.float16),
        False,
    ),
]
CHECKS = [Check(what, _check(args, allocate)) for what, args, allocate in CASES]


def check_cache_bytes(fn, *, show: bool = True):
    """Run the checks on the reader's ``cache_bytes`` and print one line."""
    return run_checks(fn, CHECKS, show=show)
