"""Tests of npformer.core.attention (chapter 01): softmax, masked_softmax,
scaled_dot_product_attention.

- agreement with torch.nn.functional.scaled_dot_product_attention in float64, with and without
  causal and padding masks, on several shapes;
- rows of the weights sum to one, masked weights are exactly zero, a query with every key masked
  reads zeros (not NaN);
- float32 stays float32;
- bad inputs raise ValueError naming the shapes;
- hypothesis properties: row sums, shift invariance, causality.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from npformer.core.attention import (
    AttentionCache,
    masked_softmax,
    scaled_dot_product_attention,
    softmax,
)

# (B, h, T, S, d_h): square self-attention shapes, cross-attention shapes (T != S), one head,
# a single query, a single key.
SHAPES = [
    (1, 1, 1, 1, 1),
    (2, 3, 5, 5, 8),
    (3, 2, 7, 7, 16),
    (2, 4, 4, 9, 8),
    (1, 2, 6, 3, 4),
    (4, 1, 1, 12, 32),
]


def random_qkv(shape, seed, dtype=np.float64):
    B, h, T, S, d_h = shape
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(B, h, T, d_h)).astype(dtype)
    K = rng.normal(size=(B, h, S, d_h)).astype(dtype)
    V = rng.normal(size=(B, h, S, d_h)).astype(dtype)
    return Q, K, V


def causal(T, S):
    """Query i (the last T of S positions) may see keys j <= i + (S - T)."""
    return np.tril(np.ones((T, S), dtype=bool), k=S - T)


def key_padding(B, S, seed):
    """(B, 1, 1, S) mask with at least one real key per sequence (lengths in 1..S)."""
    lengths = np.random.default_rng(seed).integers(1, S + 1, size=B)
    return (np.arange(S)[None, :] < lengths[:, None])[:, None, None, :]


# ---------------------------------------------------------------------------------------------
# Agreement with torch (float64)
# ---------------------------------------------------------------------------------------------


MASKINGS = ["none", "causal_mask", "padding", "causal_and_padding"]
CASES = [(shape, m) for shape in SHAPES for m in MASKINGS] + [
    (shape, "is_causal")
    for shape in SHAPES
    if shape[2] == shape[3]  # torch aligns top-left if T != S
]


@pytest.mark.parametrize(("shape", "masking"), CASES, ids=str)
def test_matches_torch_sdpa_in_float64(shape, masking):
    torch = pytest.importorskip("torch")
    B, h, T, S, d_h = shape
    Q, K, V = random_qkv(shape, seed=sum(shape))
    mask = {
        "none": None,
        "is_causal": causal(T, S),
        "causal_mask": causal(T, S),
        "padding": key_padding(B, S, seed=T),
        "causal_and_padding": causal(T, S) & key_padding(B, S, seed=T),
    }[masking]
    ours, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
    Qt, Kt, Vt = (torch.from_numpy(a) for a in (Q, K, V))
    if masking == "is_causal":
        ref = torch.nn.functional.scaled_dot_product_attention(Qt, Kt, Vt, is_causal=True)
    else:
        attn_mask = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
        ref = torch.nn.functional.scaled_dot_product_attention(Qt, Kt, Vt, attn_mask=attn_mask)
    assert ours.shape == (B, h, T, d_h) and cache.weights.shape == (B, h, T, S)
    assert np.abs(ours - ref.numpy()).max() < 1e-12


def test_fully_masked_rows_agree_with_torch():
    """torch's SDPA also returns zeros for a query whose keys are all masked."""
    torch = pytest.importorskip("torch")
    Q, K, V = random_qkv((2, 2, 6, 3, 4), seed=21)
    mask = causal(6, 3)  # queries 0..2 see no key at all
    assert not mask[:3].any()
    ours, _ = scaled_dot_product_attention(Q, K, V, mask=mask)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (Q, K, V)), attn_mask=torch.from_numpy(mask)
    ).numpy()
    assert not ours[..., :3, :].any()
    assert np.isfinite(ref).all() and np.abs(ours - ref).max() < 1e-12


@pytest.mark.parametrize("shape", SHAPES[1:4], ids=str)
def test_unscaled_matches_torch_with_scale_one(shape):
    torch = pytest.importorskip("torch")
    Q, K, V = random_qkv(shape, seed=7)
    ours, cache = scaled_dot_product_attention(Q, K, V, scale=False)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (Q, K, V)), scale=1.0
    )
    assert cache.scale == 1.0
    assert np.abs(ours - ref.numpy()).max() < 1e-12


@pytest.mark.parametrize("shape", SHAPES[1:4], ids=str)
def test_weights_match_a_torch_softmax_of_the_masked_scores(shape):
    torch = pytest.importorskip("torch")
    B, h, T, S, d_h = shape
    Q, K, V = random_qkv(shape, seed=11)
    mask = causal(T, S) & key_padding(B, S, seed=3) if S <= T else key_padding(B, S, seed=3)
    _, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
    Qt, Kt = torch.from_numpy(Q), torch.from_numpy(K)
    scores = Qt @ Kt.transpose(-1, -2) / math.sqrt(d_h)
    scores = scores.masked_fill(~torch.from_numpy(np.ascontiguousarray(mask)), float("-inf"))
    ref = torch.softmax(scores, dim=-1).numpy()
    assert np.abs(cache.weights - ref).max() < 1e-12


# ---------------------------------------------------------------------------------------------
# Weights: rows sum to one, masked entries are exactly zero, all-masked rows read nothing
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_row_of_the_weights_sums_to_one(shape):
    B, h, T, S, d_h = shape
    Q, K, V = random_qkv(shape, seed=1)
    for mask in (None, key_padding(B, S, seed=2)):
        _, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
        np.testing.assert_allclose(cache.weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
        assert (cache.weights >= 0).all()


def test_cache_holds_inputs_weights_and_scale():
    Q, K, V = random_qkv((2, 3, 5, 6, 16), seed=4)
    out, cache = scaled_dot_product_attention(Q, K, V)
    assert isinstance(cache, AttentionCache)
    assert cache.Q is Q and cache.K is K and cache.V is V
    assert cache.scale == 1.0 / math.sqrt(16)
    np.testing.assert_allclose(out, cache.weights @ V, rtol=0, atol=1e-14)


def test_masked_weights_are_exactly_zero():
    B, h, T, S, d_h = 3, 2, 6, 6, 8
    Q, K, V = random_qkv((B, h, T, S, d_h), seed=5)
    mask = causal(T, S) & key_padding(B, S, seed=6)
    _, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
    hidden = ~np.broadcast_to(mask, cache.weights.shape)
    assert hidden.any()
    assert (cache.weights[hidden] == 0.0).all()
    assert (cache.weights[~hidden] > 0.0).all()


def test_masked_softmax_with_mask_none_is_softmax():
    x = np.random.default_rng(8).normal(size=(3, 4, 5))
    np.testing.assert_array_equal(masked_softmax(x), softmax(x))


def test_a_query_with_every_key_masked_reads_zeros_not_nan():
    T, S, d_h = 4, 5, 8
    Q, K, V = random_qkv((1, 1, T, S, d_h), seed=9)
    mask = np.ones((T, S), dtype=bool)
    mask[2] = False  # query 2 may attend to nothing
    with warnings.catch_warnings(), np.errstate(divide="raise", invalid="raise", over="raise"):
        warnings.simplefilter("error")
        out, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
        weights = masked_softmax(np.random.default_rng(1).normal(size=(T, S)), mask)
    for w in (cache.weights[0, 0], weights):
        assert np.isfinite(w).all()
        np.testing.assert_array_equal(w[2], np.zeros(S))
        np.testing.assert_allclose(np.delete(w, 2, axis=0).sum(axis=-1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(out[0, 0, 2], np.zeros(d_h))
    assert np.isfinite(out).all()


def test_every_key_masked_everywhere_gives_all_zeros():
    Q, K, V = random_qkv((2, 1, 3, 4, 8), seed=10)
    out, cache = scaled_dot_product_attention(Q, K, V, mask=np.zeros((3, 4), dtype=bool))
    assert not out.any() and not cache.weights.any()


def test_softmax_along_another_axis_sums_to_one_there():
    x = np.random.default_rng(12).normal(size=(3, 4, 5))
    for axis in (0, 1, 2, -2):
        np.testing.assert_allclose(softmax(x, axis=axis).sum(axis=axis), 1.0, atol=1e-12)


def test_softmax_does_not_overflow_on_large_scores():
    x = np.array([1000.0, 999.0, 998.0])
    with np.errstate(over="raise", invalid="raise"):
        p = softmax(x)
    np.testing.assert_allclose(p, softmax(x - 1000.0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(p, np.exp([0, -1, -2]) / np.exp([0, -1, -2]).sum(), atol=1e-15)


# ---------------------------------------------------------------------------------------------
# dtype: float32 stays float32
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_low_precision_inputs_keep_their_dtype(dtype):
    Q, K, V = random_qkv((2, 2, 5, 6, 8), seed=13, dtype=dtype)
    scores = Q @ K.swapaxes(-1, -2)
    mask = causal(5, 6)
    assert softmax(scores).dtype == dtype
    assert masked_softmax(scores).dtype == dtype
    assert masked_softmax(scores, mask).dtype == dtype
    for kwargs in ({}, {"mask": mask}, {"scale": False}, {"mask": mask, "scale": False}):
        out, cache = scaled_dot_product_attention(Q, K, V, **kwargs)
        assert out.dtype == dtype and cache.weights.dtype == dtype, kwargs


def test_float32_result_is_close_to_float64():
    Q, K, V = random_qkv((2, 2, 5, 6, 8), seed=14)
    out64, _ = scaled_dot_product_attention(Q, K, V, mask=causal(5, 6))
    out32, _ = scaled_dot_product_attention(
        *(a.astype(np.float32) for a in (Q, K, V)), mask=causal(5, 6)
    )
    np.testing.assert_allclose(out32, out64, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Bad inputs: ValueError naming the function and the shapes
# ---------------------------------------------------------------------------------------------


def test_wrong_rank_is_rejected():
    ok = np.ones((5, 8))
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: Q .*shape \(8,\)"):
        scaled_dot_product_attention(np.ones(8), ok, ok)
    with pytest.raises(ValueError, match=r"K .*shape \(8,\)"):
        scaled_dot_product_attention(ok, np.ones(8), ok)
    with pytest.raises(ValueError, match=r"V .*shape \(8,\)"):
        scaled_dot_product_attention(ok, ok, np.ones(8))
    with pytest.raises(ValueError, match=r"softmax: x .*shape \(\)"):
        softmax(np.float64(1.0))


def test_key_and_value_length_mismatch_is_rejected():
    Q, K = np.ones((2, 5, 8)), np.ones((2, 5, 8))
    V = np.ones((2, 6, 8))
    with pytest.raises(ValueError, match=r"K has shape \(2, 5, 8\) and V has shape \(2, 6, 8\)"):
        scaled_dot_product_attention(Q, K, V)


def test_query_and_key_width_mismatch_is_rejected():
    Q, K, V = np.ones((2, 5, 8)), np.ones((2, 5, 4)), np.ones((2, 5, 4))
    with pytest.raises(ValueError, match=r"Q has shape \(2, 5, 8\) and K has shape \(2, 5, 4\)"):
        scaled_dot_product_attention(Q, K, V)


def test_leading_axes_that_do_not_broadcast_are_rejected():
    Q, K = np.ones((2, 5, 8)), np.ones((3, 5, 8))
    with pytest.raises(ValueError, match=r"Q \(2, 5, 8\) and K \(3, 5, 8\) do not broadcast"):
        scaled_dot_product_attention(Q, K, K)


def test_mask_that_does_not_broadcast_is_rejected():
    Q, K, V = random_qkv((2, 1, 5, 5, 8), seed=0)
    Q, K, V = Q[:, 0], K[:, 0], V[:, 0]  # (2, 5, 8)
    bad = np.ones((3, 3), dtype=bool)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3\) .*\(2, 5, 5\)"):
        scaled_dot_product_attention(Q, K, V, mask=bad)
    # A (B, 1, 1, S) padding mask against 3-D scores would silently add an axis: rejected.
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 1, 5\) .*\(2, 5, 5\)"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((2, 1, 1, 5), dtype=bool))
    with pytest.raises(ValueError, match=r"masked_softmax: mask of shape \(4,\) .*\(2, 5, 5\)"):
        masked_softmax(np.ones((2, 5, 5)), np.ones(4, dtype=bool))


def test_mask_that_is_not_boolean_is_rejected():
    Q = np.ones((5, 8))
    with pytest.raises(ValueError, match=r"mask must be boolean .*float64 with shape \(5, 5\)"):
        scaled_dot_product_attention(Q, Q, Q, mask=np.ones((5, 5)))


def test_integer_arrays_are_rejected():
    good, ints = np.ones((5, 8)), np.ones((5, 8), dtype=np.int64)
    for args, name in (
        ((ints, good, good), "Q"),
        ((good, ints, good), "K"),
        ((good, good, ints), "V"),
    ):
        with pytest.raises(
            ValueError,
            match=rf"{name} must be a floating array, got dtype int64 with shape \(5, 8\)",
        ):
            scaled_dot_product_attention(*args)
    with pytest.raises(ValueError, match=r"softmax: x must be a floating array, got dtype int64"):
        softmax(np.arange(4))
    with pytest.raises(ValueError, match=r"masked_softmax: scores .*int64 with shape \(2, 2\)"):
        masked_softmax(np.ones((2, 2), dtype=np.int64), np.ones((2, 2), dtype=bool))


def test_mixed_dtypes_are_rejected():
    Q32 = np.ones((5, 8), dtype=np.float32)
    K64 = np.ones((5, 8))
    with pytest.raises(ValueError, match=r"Q float32 \(5, 8\), K float64 \(5, 8\), V float64"):
        scaled_dot_product_attention(Q32, K64, K64)


def test_softmax_axis_out_of_range_is_rejected():
    with pytest.raises(ValueError, match=r"softmax: axis 2 is out of range for shape \(3, 4\)"):
        softmax(np.ones((3, 4)), axis=2)


# ---------------------------------------------------------------------------------------------
# Properties (hypothesis; profile from tests/conftest.py)
# ---------------------------------------------------------------------------------------------

dims = st.integers(min_value=1, max_value=6)


@given(
    B=dims,
    T=dims,
    S=dims,
    d_h=dims,
    seed=st.integers(0, 2**32 - 1),
    spread=st.sampled_from([0.1, 1.0, 30.0]),
)
def test_property_rows_sum_to_one(B, T, S, d_h, seed, spread):
    rng = np.random.default_rng(seed)
    Q = spread * rng.normal(size=(B, T, d_h))
    K = spread * rng.normal(size=(B, S, d_h))
    V = rng.normal(size=(B, S, d_h))
    out, cache = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (B, T, d_h) and cache.weights.shape == (B, T, S)
    np.testing.assert_allclose(cache.weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@given(
    x=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
        elements=st.floats(-30, 30),
    ),
    shift=st.floats(-50, 50),
)
def test_property_softmax_is_invariant_to_a_constant_shift(x, shift):
    np.testing.assert_allclose(softmax(x + shift), softmax(x), rtol=1e-12, atol=1e-13)


@given(T=st.integers(2, 7), d_h=dims, t=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_property_causal_outputs_ignore_future_keys_and_values(T, d_h, t, seed):
    t = min(t, T - 1)  # positions >= t are "the future"
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.normal(size=(2, T, d_h)) for _ in range(3))
    K2, V2 = K.copy(), V.copy()
    K2[:, t:] = rng.normal(size=K2[:, t:].shape) * 10
    V2[:, t:] = rng.normal(size=V2[:, t:].shape) * 10
    out, _ = scaled_dot_product_attention(Q, K, V, mask=causal(T, T))
    out2, _ = scaled_dot_product_attention(Q, K2, V2, mask=causal(T, T))
    np.testing.assert_array_equal(out2[:, :t], out[:, :t])
    assert not np.allclose(out2[:, t:], out[:, t:])


# ----------------------------------------------------------------------------- score bias, causal


def _numeric_grad(f, x, eps=1e-6):
    from npformer.core.gradcheck import central_difference

    flat = x.reshape(-1)
    return np.array([central_difference(f, flat, i, eps)[0] for i in range(flat.size)]).reshape(
        x.shape
    )


@pytest.mark.parametrize("bias_shape", [(2, 3, 4, 5), (3, 4, 5), (3, 1, 5), (4, 5), (1, 5)])
@pytest.mark.parametrize("masked", [False, True])
def test_bias_gradients_match_central_differences(bias_shape, masked):
    from npformer.core.attention import scaled_dot_product_attention_backward

    rng = np.random.default_rng(21)
    Q, K, V = (
        rng.normal(size=(2, 3, 4, 6)),
        rng.normal(size=(2, 3, 5, 6)),
        rng.normal(size=(2, 3, 5, 2)),
    )
    bias = rng.normal(size=bias_shape)
    mask = np.tril(np.ones((4, 5), dtype=bool), 1) if masked else None
    out, cache = scaled_dot_product_attention(Q, K, V, mask=mask, bias=bias)
    w = rng.normal(size=out.shape)
    f = lambda: float(np.sum(w * scaled_dot_product_attention(Q, K, V, mask=mask, bias=bias)[0]))
    dQ, dK, dV, dB = scaled_dot_product_attention_backward(w, cache, bias_grad=True)
    assert dB.shape == bias.shape
    for analytic, x in ((dQ, Q), (dK, K), (dV, V), (dB, bias)):
        np.testing.assert_allclose(analytic, _numeric_grad(f, x), rtol=1e-5, atol=1e-8)
    # without the flag the same three gradients come back, and only three
    assert all(
        np.array_equal(a, b)
        for a, b in zip(scaled_dot_product_attention_backward(w, cache), (dQ, dK, dV), strict=True)
    )


def test_bias_enters_after_the_scale_and_before_the_mask():
    rng = np.random.default_rng(22)
    Q, K, V = rng.normal(size=(3, 4, 8)), rng.normal(size=(3, 6, 8)), rng.normal(size=(3, 6, 5))
    bias = rng.normal(size=(4, 6))
    mask = rng.random((3, 4, 6)) < 0.7
    mask[..., 0] = True
    out, cache = scaled_dot_product_attention(Q, K, V, mask=mask, bias=bias)
    scores = Q @ K.swapaxes(-1, -2) / math.sqrt(8) + bias
    expected = masked_softmax(scores, mask)
    np.testing.assert_allclose(cache.weights, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out, expected @ V, rtol=0, atol=1e-14)
    assert np.all(cache.weights[~np.broadcast_to(mask, cache.weights.shape)] == 0)


@pytest.mark.parametrize("masked", [False, True])
def test_no_bias_and_a_zero_bias_give_the_same_numbers_as_the_plain_path(masked):
    """bias=None is the old path, bit for bit; a zero bias adds exact zeros."""
    rng = np.random.default_rng(23)
    Q, K, V = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    mask = np.tril(np.ones((5, 7), dtype=bool), 2) if masked else None
    plain = masked_softmax(Q @ K.swapaxes(-1, -2) * (1.0 / math.sqrt(4)), mask)
    out0, c0 = scaled_dot_product_attention(Q, K, V, mask)
    out1, c1 = scaled_dot_product_attention(Q, K, V, mask, bias=np.zeros((5, 7)))
    assert np.array_equal(c0.weights, plain) and np.array_equal(out0, plain @ V)
    assert np.array_equal(c1.weights, c0.weights) and np.array_equal(out1, out0)
    assert c0.bias_shape is None and c1.bias_shape == (5, 7)


@pytest.mark.parametrize("T, S", [(5, 5), (3, 7), (1, 4)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_causal_fast_path_equals_the_causal_mask(T, S, with_bias):
    from npformer.core.attention import scaled_dot_product_attention_backward
    from npformer.core.masks import causal_mask

    rng = np.random.default_rng(24)
    Q, K, V = (
        rng.normal(size=(2, 3, T, 4)),
        rng.normal(size=(2, 3, S, 4)),
        rng.normal(size=(2, 3, S, 4)),
    )
    bias = rng.normal(size=(3, T, S)) if with_bias else None
    out, cache = scaled_dot_product_attention(Q, K, V, bias=bias, causal=True)
    ref, ref_cache = scaled_dot_product_attention(Q, K, V, causal_mask(T, S), bias=bias)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14)
    np.testing.assert_allclose(cache.weights, ref_cache.weights, rtol=0, atol=1e-15)
    assert np.all(cache.weights[..., ~causal_mask(T, S)] == 0)
    d_out = rng.normal(size=out.shape)
    for g, r in zip(
        scaled_dot_product_attention_backward(d_out, cache),
        scaled_dot_product_attention_backward(d_out, ref_cache),
        strict=True,
    ):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-13)
    # causal combined with a padding mask: the AND of both
    pad = np.ones((2, 1, 1, S), dtype=bool)
    pad[0, ..., 0] = False
    both, _ = scaled_dot_product_attention(Q, K, V, pad, causal=True)
    ref_both, _ = scaled_dot_product_attention(Q, K, V, pad & causal_mask(T, S))
    np.testing.assert_allclose(both, ref_both, rtol=0, atol=1e-14)


def test_bias_and_causal_bad_inputs():

    rng = np.random.default_rng(25)
    Q, K, V = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))
    with pytest.raises(ValueError, match=r"bias of shape \(3, 2, 4, 5\) does not broadcast"):
        scaled_dot_product_attention(Q, K, V, bias=np.zeros((3, 2, 4, 5)))  # adds an axis
    with pytest.raises(ValueError, match=r"causal=True needs at least as many keys"):
        scaled_dot_product_attention(K, Q, V[:, :4], causal=True)
    with pytest.raises(ValueError, match=r"causal must be True or False, got 1"):
        scaled_dot_product_attention(Q, K, V, causal=1)
    with pytest.raises(ValueError, match=r"scale must be True or False, got 0.5"):
        scaled_dot_product_attention(Q, K, V, scale=0.5)
    with pytest.raises(ValueError, match=r"width d_h = 0"):
        scaled_dot_product_attention(Q[..., :0], K[..., :0], V)
    out, cache = scaled_dot_product_attention(Q, K, V)


def test_torch_reference_catches_an_unscaled_score_and_a_leaky_mask():
    """Chapter 01's comparison with torch (tolerance 1e-14) fails on two slips in the formula.

    Scores left unscaled, and a causal mask that lets every query see one key of the future:
    both miss torch's answer by more than 0.1 on the running example's shapes.
    """
    torch = pytest.importorskip("torch")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    Q, K, V = np.random.default_rng(7).normal(size=(3, 2, 7, 4))  # (B, T, d_h) each
    Qt, Kt, Vt = (torch.from_numpy(a) for a in (Q, K, V))
    ref, ref_causal = sdpa(Qt, Kt, Vt).numpy(), sdpa(Qt, Kt, Vt, is_causal=True).numpy()
    right, _ = scaled_dot_product_attention(Q, K, V)
    right_causal, _ = scaled_dot_product_attention(Q, K, V, mask=causal(7, 7))
    assert np.abs(right - ref).max() < 1e-14 and np.abs(right_causal - ref_causal).max() < 1e-14
    unscaled, _ = scaled_dot_product_attention(Q * math.sqrt(4), K, V)  # scores Q K^T
    leaky = np.tril(np.ones((7, 7), dtype=bool), k=1)  # key j <= i + 1
    leaky_causal, _ = scaled_dot_product_attention(Q, K, V, mask=leaky)
    assert np.abs(unscaled - ref).max() > 0.1
    assert np.abs(leaky_causal - ref_causal).max() > 0.1


def test_causal_call_leaves_nothing_resident():
    # Chapter 08 measures the causal path's peak after a warm-up call: anything the first call
    # keeps (a cached mask or bias) would be hidden from that figure, so nothing may stay.
    import tracemalloc

    T = 256
    Q, K, V = np.random.default_rng(0).standard_normal((3, T, 16))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out, cache = scaled_dot_product_attention(Q, K, V, causal=True)
        del out, cache
        left = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert left < 8 * T * T / 4  # a cached (T, T) float64 array would leave 8 T^2 bytes
