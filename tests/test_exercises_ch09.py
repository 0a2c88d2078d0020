"""Chapter 09's checker passes the reference cache size and fails typical mistakes."""

import numpy as np

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch09 import CHECKS, check_cache_bytes, reference_cache_bytes


def test_reference_passes():
    report = check_cache_bytes(reference_cache_bytes, show=False)
    assert report.ok and report.line == f"passed {len(CHECKS)} of {len(CHECKS)} checks"


def test_stub_is_not_attempted():
    def cache_bytes(*args):
        raise NotImplementedError

    assert check_cache_bytes(cache_bytes, show=False).line == NOT_ATTEMPTED


def keys_only(L, h, g, d, T, B, dtype):  # forgets the values: no factor 2
    return L * g * (d // h) * T * B * np.dtype(dtype).itemsize


def query_heads(L, h, g, d, T, B, dtype):  # counts a key-value head per query head
    return 2 * L * h * (d // h) * T * B * np.dtype(dtype).itemsize


def bits(L, h, g, d, T, B, dtype):  # bits, not bytes
    return 2 * L * g * (d // h) * T * B * np.dtype(dtype).itemsize * 8


def one_layer(L, h, g, d, T, B, dtype):  # one cache for the whole model
    return 2 * g * (d // h) * T * B * np.dtype(dtype).itemsize


def no_batch(L, h, g, d, T, B, dtype):  # one sequence whatever the batch
    return 2 * L * g * (d // h) * T * np.dtype(dtype).itemsize


def test_mistakes_fail_where_expected():
    line = {
        f.__name__: check_cache_bytes(f, show=False).line
        for f in (keys_only, query_heads, bits, one_layer, no_batch)
    }
    assert line["keys_only"].startswith("failed check 1 of 5") and "(0.5 x)" in line["keys_only"]
    assert line["bits"].startswith("failed check 1 of 5") and "(8 x)" in line["bits"]
    assert line["one_layer"].startswith("failed check 1 of 5") and "(0.25 x)" in line["one_layer"]
    assert (
        line["no_batch"].startswith("failed check 2 of 5 (a batch of 3")
        and "(0.3333 x)" in line["no_batch"]
    )
    assert (
        line["query_heads"].startswith("failed check 3 of 5 (grouped-query")
        and "(4 x)" in line["query_heads"]
    )
