"""Tests of npformer.core.blocked_attention (chapter 08): tiled attention with an online softmax.

- the forward pass equals the naive ``scaled_dot_product_attention`` (causal or not, S >= T,
  leading axes, tile sizes that do not divide T or S, float32) and torch's SDPA;
- the backward pass equals the naive backward and torch's autograd, and passes central
  differences in float64;
- keys in tiles entirely after a query tile are never read; peak memory is linear in T;
- hypothesis: random shapes and tile sizes agree with the naive version;
- bad inputs raise ValueError naming the shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.book.measuring import peak_extra_bytes
from npformer.core.attention import (
    scaled_dot_product_attention,
    scaled_dot_product_attention_backward,
)
from npformer.core.blocked_attention import (
    blocked_attention,
    blocked_attention_backward,
    tile_counts,
)
from npformer.core.gradcheck import gradient_check, select_coordinates
from npformer.core.masks import causal_mask

# (lead, T, S, d_h, d_v, block_q, block_k, causal)
CASES = [
    ((), 1, 1, 1, 1, 1, 1, True),
    ((), 7, 7, 4, 3, 2, 3, True),
    ((), 37, 50, 8, 5, 8, 16, True),  # S > T: the queries are the last T positions
    ((), 300, 300, 16, 16, 128, 256, True),
    ((), 300, 300, 16, 16, 64, 32, True),  # key tiles smaller than query tiles
    ((), 40, 33, 8, 8, 8, 8, False),  # no mask: S < T is fine
    ((2, 3), 20, 20, 8, 4, 8, 8, True),
    ((2,), 9, 12, 4, 6, 128, 256, False),  # one tile holds everything
]


def qkv(lead, T, S, d_h, d_v, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=lead + (T, d_h)).astype(dtype)
    K = rng.normal(size=lead + (S, d_h)).astype(dtype)
    V = rng.normal(size=lead + (S, d_v)).astype(dtype)
    return Q, K, V


def naive(Q, K, V, causal):
    mask = causal_mask(Q.shape[-2], K.shape[-2]) if causal else None
    return scaled_dot_product_attention(Q, K, V, mask=mask)


@pytest.mark.parametrize("case", CASES)
def test_forward_equals_naive(case):
    lead, T, S, d_h, d_v, bq, bk, causal = case
    Q, K, V = qkv(lead, T, S, d_h, d_v, seed=T + S)
    out, cache = blocked_attention(Q, K, V, causal=causal, block_q=bq, block_k=bk)
    ref, ref_cache = naive(Q, K, V, causal)
    assert out.shape == ref.shape and out.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    # The saved statistic is the log-sum-exp of each row's visible scaled scores.
    scores = (Q @ K.swapaxes(-1, -2)) * ref_cache.scale
    if causal:
        scores = np.where(causal_mask(T, S), scores, -np.inf)
    expected = np.log(np.exp(scores).sum(axis=-1))
    np.testing.assert_allclose(cache.logsumexp, expected, rtol=0, atol=1e-12)


def test_unscaled_and_float32():
    Q, K, V = qkv((2,), 30, 30, 8, 8, seed=1)
    out, _ = blocked_attention(Q, K, V, scale=False, block_q=8, block_k=16)
    ref, _ = scaled_dot_product_attention(Q, K, V, mask=causal_mask(30), scale=False)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    Q32, K32, V32 = (x.astype(np.float32) for x in (Q, K, V))
    out32, cache32 = blocked_attention(Q32, K32, V32, block_q=8, block_k=16)
    assert out32.dtype == np.float32 and cache32.logsumexp.dtype == np.float32
    np.testing.assert_allclose(out32, naive(Q32, K32, V32, True)[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_backward_equals_naive_backward(case):
    lead, T, S, d_h, d_v, bq, bk, causal = case
    Q, K, V = qkv(lead, T, S, d_h, d_v, seed=2 * T + S)
    out, cache = blocked_attention(Q, K, V, causal=causal, block_q=bq, block_k=bk)
    d_out = np.random.default_rng(5).normal(size=out.shape)
    grads = blocked_attention_backward(d_out, cache)
    _, ref_cache = naive(Q, K, V, causal)
    naive_grads = scaled_dot_product_attention_backward(d_out, ref_cache)
    for g, ref, x in zip(grads, naive_grads, (Q, K, V), strict=True):
        assert g.shape == x.shape
        np.testing.assert_allclose(g, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal, T, S", [(True, 5, 5), (True, 3, 6), (False, 4, 5)])
def test_backward_central_differences(causal, T, S):
    Q, K, V = qkv((), T, S, 3, 2, seed=7)
    R = np.random.default_rng(8).normal(size=(T, 2))  # loss = sum(out * R), so dL/dout = R
    params = {"Q": Q, "K": K, "V": V}

    def loss():
        out, _ = blocked_attention(Q, K, V, causal=causal, block_q=2, block_k=2)
        return float((out * R).sum())

    _, cache = blocked_attention(Q, K, V, causal=causal, block_q=2, block_k=2)
    dQ, dK, dV = blocked_attention_backward(R, cache)
    grads = {"Q": dQ, "K": dK, "V": dV}
    check = gradient_check(loss, params, grads, select_coordinates(grads, threshold=1e-8), 1e-6)
    assert len(check.names) > 0.8 * (Q.size + K.size + V.size)
    assert check.worst < 1e-6, check.failures(1e-6)


def test_agrees_with_torch():
    torch = pytest.importorskip("torch")
    Q, K, V = qkv((2, 2), 33, 33, 8, 8, seed=3)
    d_out = np.random.default_rng(4).normal(size=(2, 2, 33, 8))
    out, cache = blocked_attention(Q, K, V, block_q=16, block_k=8)
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (Q, K, V))
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    ref.backward(torch.tensor(d_out))
    np.testing.assert_allclose(out, ref.detach().numpy(), rtol=0, atol=1e-12)
    for g, t in zip(blocked_attention_backward(d_out, cache), (tq, tk, tv), strict=True):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=0, atol=1e-12)


def test_causal_tiles_after_the_queries_are_never_read():
    # Keys and values from position 32 on are NaN. With query tiles of 16 the tiles holding
    # queries 0..31 end at key 31, so their outputs must be finite and equal to attention over
    # the first 32 positions; NaN in a skipped tile would otherwise reach them through P V.
    Q, K, V = qkv((), 64, 64, 8, 8, seed=9)
    K[32:], V[32:] = np.nan, np.nan
    out, _ = blocked_attention(Q, K, V, block_q=16, block_k=16)
    ref, _ = naive(Q[:32], K[:32], V[:32], True)
    np.testing.assert_allclose(out[:32], ref, rtol=0, atol=1e-12)
    assert np.isnan(out[32:]).all()


def test_peak_memory_is_linear_in_T():
    peaks = {}
    for T in (512, 1024, 2048):
        Q, K, V = qkv((), T, T, 64, 64, seed=T)
        peaks[T] = peak_extra_bytes(lambda Q=Q, K=K, V=V: blocked_attention(Q, K, V))
        io_bytes = 4 * Q.nbytes  # Q, K, V and the output
        assert peaks[T] < io_bytes, (T, peaks[T], io_bytes)  # a fixed set of tiles, then O(T)
    # Each extra position costs the same bytes: its output row and its log-sum-exp, 8 * (64 + 1).
    per_position = [(peaks[2 * T] - peaks[T]) / T for T in (512, 1024)]
    for b in per_position:
        assert abs(b - 8 * (64 + 1)) < 8, per_position
    Q, K, V = qkv((), 1024, 1024, 64, 64, seed=0)
    naive_peak = peak_extra_bytes(lambda: naive(Q, K, V, True))
    assert naive_peak >= 8 * 1024**2


@given(
    T=st.integers(1, 24),
    extra=st.integers(0, 6),
    block_q=st.integers(1, 9),
    block_k=st.integers(1, 9),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_random_shapes_and_tiles(T, extra, block_q, block_k, causal, seed):
    S = T + extra
    Q, K, V = qkv((), T, S, 4, 3, seed)
    out, cache = blocked_attention(Q, K, V, causal=causal, block_q=block_q, block_k=block_k)
    ref, ref_cache = naive(Q, K, V, causal)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    d_out = np.ones_like(out)
    for g, r in zip(
        blocked_attention_backward(d_out, cache),
        scaled_dot_product_attention_backward(d_out, ref_cache),
        strict=True,
    ):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-12)


def test_no_queries():
    Q, K, V = qkv((), 0, 3, 4, 2, seed=0)
    out, cache = blocked_attention(Q, K, V)
    assert out.shape == (0, 2) and cache.logsumexp.shape == (0,)
    dQ, dK, dV = blocked_attention_backward(np.zeros((0, 2)), cache)
    assert dQ.shape == (0, 4) and not dK.any() and not dV.any()


@pytest.mark.parametrize(
    "T, S, causal, bq, bk",
    [
        (2048, 2048, True, 128, 256),
        (300, 300, True, 128, 256),
        (100, 120, True, 32, 48),
        (512, 512, False, 128, 256),
    ],
)
def test_tile_counts_match_the_forward_pass(monkeypatch, T, S, causal, bq, bk):
    """Two BLAS calls per computed tile pair, counted on the real forward pass."""
    calls = []
    real = np.matmul

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    rng = np.random.default_rng(0)
    Q, K, V = rng.standard_normal((T, 8)), rng.standard_normal((S, 8)), rng.standard_normal((S, 8))
    monkeypatch.setattr(np, "matmul", counting)
    blocked_attention(Q, K, V, causal=causal, block_q=bq, block_k=bk)
    monkeypatch.undo()
    counts = tile_counts(T, S, causal, bq, bk)
    assert len(calls) == 2 * counts.tile_pairs
    # brute force: every visible score lies in a computed tile, and no tile is wholly masked
    assert counts.visible <= counts.cells <= T * S
    if not causal:
        assert counts.tile_pairs == counts.all_pairs and counts.cells == T * S


def test_tile_counts_of_the_chapter():
    c = tile_counts(2048)
    assert (c.tile_pairs, c.all_pairs, c.diagonal_pairs) == (72, 128, 16)
    assert c.cells == 128 * 128 * 136 and c.visible == 2048 * 2049 // 2


def test_tile_counts_bad_arguments():
    with pytest.raises(ValueError, match="S >= T"):
        tile_counts(10, 5)


def test_backward_memory_stays_linear():
    # Chapter 08: the blocked backward allocates dQ, dK, dV, O(T) bytes and a few tiles; the
    # naive backward allocates at least two (T, T) float64 matrices besides its cached weights.
    T, d_h = 2048, 64
    Q, K, V = qkv((), T, T, d_h, d_h, seed=2)
    d_out = np.ones((T, d_h))
    _, naive_cache = naive(Q, K, V, True)
    _, blocked_cache = blocked_attention(Q, K, V)
    naive_back = peak_extra_bytes(lambda: scaled_dot_product_attention_backward(d_out, naive_cache))
    blocked_back = peak_extra_bytes(lambda: blocked_attention_backward(d_out, blocked_cache))
    grads_bytes = 3 * 8 * T * d_h
    assert naive_back >= 2 * 8 * T**2, naive_back
    assert blocked_back < 2 * grads_bytes, blocked_back
