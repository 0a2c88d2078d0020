"""Checker for chapter 08's exercise: merge the online-softmax states of two tiles of keys.

The reader writes ``merge(first, second)``: each argument is the triple ``(m, l, a)`` of one
tile of keys for n queries (running maximum (n, 1), sum of exp(z - m) (n, 1), accumulator of
exp(z - m) v (n, d_v)); the result is the triple of both tiles together. The reference is the
update rule of :mod:`npformer.core.blocked_attention`; the checks compare ``a / l`` and the triple
itself with attention computed over all the keys at once by
``npformer.core.attention.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

import numpy as np

from npformer.book.exercises import Check, compare, run_checks
from npformer.core.attention import scaled_dot_product_attention


def tile_state(q, K, V):
    """The triple (m, l, a) of one tile of keys K, V (S_tile, d) for queries q (n, d_h)."""
    z = q @ K.T / math.sqrt(q.shape[-1])  # (n, S_tile)
    m = z.max(axis=1, keepdims=True)  # (n, 1)
    p = np.exp(z - m)  # (n, S_tile)
    return m, p.sum(axis=1, keepdims=True), p @ V  # (n, 1), (n, 1), (n, d_v)


def reference_merge(first, second):
    """The triple of two tiles together: rescale both to the common maximum, then add."""
    (m1, l1, a1), (m2, l2, a2) = first, second
    m = np.maximum(m1, m2)
    r1, r2 = np.exp(m1 - m), np.exp(m2 - m)
    return m, r1 * l1 + r2 * l2, r1 * a1 + r2 * a2


def _case(seed: int, n: int, sizes: tuple[int, int], shift: float):
    """Queries and two tiles of keys; ``shift`` raises the second tile's scores (its max)."""
    rng = np.random.default_rng(seed)
    d = 4
    q = rng.standard_normal((n, d))
    K1, K2 = rng.standard_normal((sizes[0], d)), rng.standard_normal((sizes[1], d))
    K2 = K2 + shift * q.mean(axis=0) / max(np.linalg.norm(q.mean(axis=0)), 1e-12)
    V1, V2 = rng.standard_normal((sizes[0], 3)), rng.standard_normal((sizes[1], 3))
    return q, (K1, V1), (K2, V2)


def _attention_check(seed, n, sizes, shift):
    def run(merge):
        q, (K1, V1), (K2, V2) = _case(seed, n, sizes, shift)
        got = merge(tile_state(q, K1, V1), tile_state(q, K2, V2))
        if not isinstance(got, tuple) or len(got) != 3:
            return f"expected a triple (m, l, a), got {type(got).__name__}"
        m, l, a = got
        expected, _ = scaled_dot_product_attention(q, np.vstack([K1, K2]), np.vstack([V1, V2]))
        return compare(expected, np.asarray(a) / np.asarray(l), rtol=1e-9, atol=1e-12)

    return run


def _triple_check(seed, n, sizes, shift, part):
    names = {0: "m", 1: "l", 2: "a"}

    def run(merge):
        q, (K1, V1), (K2, V2) = _case(seed, n, sizes, shift)
        first, second = tile_state(q, K1, V1), tile_state(q, K2, V2)
        got = merge(first, second)
        expected = reference_merge(first, second)
        problem = compare(expected[part], got[part], rtol=1e-9, atol=1e-12)
        return None if problem is None else f"{names[part]}: {problem}"

    return run


def _order_check(merge):
    q, (K1, V1), (K2, V2) = _case(5, 2, (3, 4), 2.0)
    one, two = tile_state(q, K1, V1), tile_state(q, K2, V2)
    m, l, a = merge(one, two)
    m_s, l_s, a_s = merge(two, one)
    return compare(np.asarray(a) / np.asarray(l), np.asarray(a_s) / np.asarray(l_s), rtol=1e-9)


CHECKS = [
    Check(
        "2 queries, tiles of 3 and 5 keys: a / l equals attention over all 8",
        _attention_check(0, 2, (3, 5), 0.0),
    ),
    Check("the second tile holds the larger scores: a / l", _attention_check(1, 3, (4, 4), 6.0)),
    Check("the first tile holds the larger scores: a / l", _attention_check(2, 3, (4, 4), -6.0)),
    Check(
        "the merged maximum m, whichever tile holds the larger scores",
        lambda merge: (
            _triple_check(3, 2, (3, 3), -4.0, 0)(merge)
            or _triple_check(3, 2, (3, 3), 4.0, 0)(merge)
        ),
    ),
    Check("the merged sum l, relative to the merged maximum", _triple_check(3, 2, (3, 3), 4.0, 1)),
    Check("the merged accumulator a", _triple_check(3, 2, (3, 3), 4.0, 2)),
    Check("the order of the two tiles does not matter", _order_check),
]


def check_merge(merge, *, show: bool = True):
    """Run the checks on the reader's ``merge(first, second)`` and print one line."""
    return run_checks(merge, CHECKS, show=show)
