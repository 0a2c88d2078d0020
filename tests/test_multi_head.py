"""Tests of npformer.core.multi_head: split/merge, the h = 1 identity, equivariance, torch,
errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.core.attention import scaled_dot_product_attention
from npformer.core.multi_head import (
    init_multi_head_params,
    merge_heads,
    multi_head_attention,
    multi_head_attention_backward,
    split_heads,
)


def random_params(d, rng, dtype=np.float64):
    """Parameters with non-zero biases, so that every bias is exercised."""
    params = init_multi_head_params(d, rng, dtype=dtype)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        params[name] = rng.standard_normal(d).astype(dtype)
    return params


shapes = st.tuples(
    st.integers(1, 3),  # B
    st.integers(1, 6),  # T
    st.integers(1, 4),  # h
    st.integers(1, 4),  # d_h
    st.integers(0, 2**32 - 1),  # seed
)


@given(shapes)
def test_split_merge_round_trip_exactly(shape):
    B, T, h, d_h, seed = shape
    X = np.random.default_rng(seed).standard_normal((B, T, h * d_h))
    heads = split_heads(X, h)
    assert heads.shape == (B, h, T, d_h)
    np.testing.assert_array_equal(merge_heads(heads), X)
    np.testing.assert_array_equal(split_heads(merge_heads(heads), h), heads)
    # head k owns the contiguous columns k d_h .. (k + 1) d_h - 1
    for k in range(h):
        np.testing.assert_array_equal(heads[:, k], X[:, :, k * d_h : (k + 1) * d_h])


def test_parameter_count_is_4d2_plus_4d_for_every_h():
    d = 16
    params = init_multi_head_params(d, np.random.default_rng(0))
    assert sum(p.size for p in params.values()) == 4 * d * d + 4 * d
    assert {p.shape for p in params.values()} == {(d, d), (d,)}


def test_one_head_equals_single_head_attention_on_projected_inputs():
    rng = np.random.default_rng(1)
    B, T, S, d = 2, 5, 7, 8
    X_q, X_kv = rng.standard_normal((B, T, d)), rng.standard_normal((B, S, d))
    p = random_params(d, rng)
    out, cache = multi_head_attention(X_q, X_kv, p, num_heads=1)
    single, _ = scaled_dot_product_attention(
        X_q @ p["W_q"] + p["b_q"], X_kv @ p["W_k"] + p["b_k"], X_kv @ p["W_v"] + p["b_v"]
    )
    np.testing.assert_allclose(out, single @ p["W_o"] + p["b_o"], rtol=0, atol=1e-12)
    assert cache.attention.weights.shape == (B, 1, T, S)


def test_each_head_attends_on_its_own_slice():
    rng = np.random.default_rng(2)
    B, T, d, h = 2, 4, 12, 3
    X = rng.standard_normal((B, T, d))
    p = random_params(d, rng)
    out, cache = multi_head_attention(X, X, p, num_heads=h)
    d_h = d // h
    pieces = []
    for k in range(h):
        cols = slice(k * d_h, (k + 1) * d_h)
        Qk = X @ p["W_q"][:, cols] + p["b_q"][cols]
        Kk = X @ p["W_k"][:, cols] + p["b_k"][cols]
        Vk = X @ p["W_v"][:, cols] + p["b_v"][cols]
        pieces.append(scaled_dot_product_attention(Qk, Kk, Vk)[0])
    expected = np.concatenate(pieces, axis=-1) @ p["W_o"] + p["b_o"]
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cache.attention.weights.sum(-1), 1.0, rtol=0, atol=1e-12)


@given(shapes)
def test_without_positions_attention_is_permutation_equivariant(shape):
    B, T, h, d_h, seed = shape
    rng = np.random.default_rng(seed)
    d = h * d_h
    X = rng.standard_normal((B, T, d))
    p = random_params(d, rng)
    perm = rng.permutation(T)
    out, _ = multi_head_attention(X, X, p, h)
    out_perm, _ = multi_head_attention(X[:, perm], X[:, perm], p, h)
    np.testing.assert_allclose(out_perm, out[:, perm], rtol=0, atol=1e-10)


@given(shapes)
def test_keys_and_values_can_be_permuted_freely(shape):
    """Permuting the keys/values only (no mask, no positions) changes nothing at all."""
    B, T, h, d_h, seed = shape
    rng = np.random.default_rng(seed)
    d = h * d_h
    X_q, X_kv = rng.standard_normal((B, T, d)), rng.standard_normal((B, T + 1, d))
    p = random_params(d, rng)
    perm = rng.permutation(T + 1)
    out, _ = multi_head_attention(X_q, X_kv, p, h)
    out_perm, _ = multi_head_attention(X_q, X_kv[:, perm], p, h)
    np.testing.assert_allclose(out_perm, out, rtol=0, atol=1e-10)


def test_masks_of_several_shapes_broadcast():
    rng = np.random.default_rng(3)
    B, T, d, h = 2, 4, 8, 2
    X = rng.standard_normal((B, T, d))
    p = random_params(d, rng)
    causal = np.tril(np.ones((T, T), dtype=bool))
    out_2d, _ = multi_head_attention(X, X, p, h, mask=causal)
    out_4d, _ = multi_head_attention(X, X, p, h, mask=causal[None, None])
    np.testing.assert_array_equal(out_2d, out_4d)
    # causal: changing the last token leaves the earlier outputs untouched
    X2 = X.copy()
    X2[:, -1] += 1.0
    out_2, _ = multi_head_attention(X2, X2, p, h, mask=causal)
    np.testing.assert_allclose(out_2[:, :-1], out_2d[:, :-1], rtol=0, atol=1e-12)
    assert np.abs(out_2[:, -1] - out_2d[:, -1]).max() > 1e-3


def test_float32_stays_float32():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((1, 3, 8)).astype(np.float32)
    p = init_multi_head_params(8, rng, dtype=np.float32)
    out, cache = multi_head_attention(X, X, p, 2)
    assert out.dtype == np.float32 and cache.attention.weights.dtype == np.float32


# --- torch reference ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "B, T, S, d, h, masked",
    [
        (2, 5, 5, 8, 2, False),
        (2, 5, 5, 8, 2, True),
        (3, 4, 6, 12, 3, True),
        (1, 7, 7, 16, 8, False),
    ],
)
def test_matches_torch_multihead_attention(B, T, S, d, h, masked):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10 * B + h)
    X_q, X_kv = rng.standard_normal((B, T, d)), rng.standard_normal((B, S, d))
    p = random_params(d, rng)
    mask = np.arange(S)[None, :] <= np.arange(T)[:, None] + (S - T) if masked else None

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        # torch stores a linear layer's weight as (d_out, d_in): ours transposed
        mha.in_proj_weight.copy_(
            torch.from_numpy(np.concatenate([p["W_q"].T, p["W_k"].T, p["W_v"].T]))
        )
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([p["b_q"], p["b_k"], p["b_v"]])))
        mha.out_proj.weight.copy_(torch.from_numpy(p["W_o"].T))
        mha.out_proj.bias.copy_(torch.from_numpy(p["b_o"]))
        attn_mask = None if mask is None else torch.from_numpy(~mask)  # torch: True = blocked
        ref, ref_w = mha(
            torch.from_numpy(X_q),
            torch.from_numpy(X_kv),
            torch.from_numpy(X_kv),
            attn_mask=attn_mask,
            need_weights=True,
            average_attn_weights=False,
        )
    out, cache = multi_head_attention(X_q, X_kv, p, h, mask=mask)
    assert np.abs(out - ref.numpy()).max() < 1e-12
    assert np.abs(cache.attention.weights - ref_w.numpy()).max() < 1e-12


def test_matches_torch_with_a_key_padding_mask():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    B, T, d, h = 3, 6, 8, 4
    X = rng.standard_normal((B, T, d))
    p = random_params(d, rng)
    lengths = np.array([6, 3, 1])
    real = np.arange(T)[None, :] < lengths[:, None]  # (B, S) True = real token
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.from_numpy(np.concatenate([p["W_q"].T, p["W_k"].T, p["W_v"].T]))
        )
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([p["b_q"], p["b_k"], p["b_v"]])))
        mha.out_proj.weight.copy_(torch.from_numpy(p["W_o"].T))
        mha.out_proj.bias.copy_(torch.from_numpy(p["b_o"]))
        Xt = torch.from_numpy(X)
        ref, _ = mha(Xt, Xt, Xt, key_padding_mask=torch.from_numpy(~real), need_weights=False)
    out, _ = multi_head_attention(X, X, p, h, mask=real[:, None, None, :])
    assert np.abs(out - ref.numpy()).max() < 1e-12


# --- bad inputs ----------------------------------------------------------------------------


def _numerical_gradient(loss, array, eps=1e-6):
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        old = array[index]
        array[index] = old + eps
        plus = loss()
        array[index] = old - eps
        minus = loss()
        array[index] = old
        grad[index] = (plus - minus) / (2 * eps)
    return grad


@pytest.mark.parametrize("scale", [True, False])
def test_backward_matches_central_differences_with_cross_attention_and_padding(scale):
    rng = np.random.default_rng(11)
    B, T, S, d, h = 2, 3, 4, 4, 2
    X_q, X_kv = rng.standard_normal((B, T, d)), rng.standard_normal((B, S, d))
    params = random_params(d, rng)
    mask = np.ones((B, 1, 1, S), dtype=bool)
    mask[1, ..., 3:] = False  # the second sequence has 3 keys
    R = rng.standard_normal((B, T, d))  # the loss is sum(out * R), so d_out = R

    def loss():
        return float((multi_head_attention(X_q, X_kv, params, h, mask, scale)[0] * R).sum())

    _, cache = multi_head_attention(X_q, X_kv, params, h, mask, scale)
    dX_q, dX_kv, grads = multi_head_attention_backward(R, cache, params)
    assert list(grads) == list(params)
    for name, array in params.items():
        np.testing.assert_allclose(grads[name], _numerical_gradient(loss, array), atol=1e-7)
    np.testing.assert_allclose(dX_q, _numerical_gradient(loss, X_q), atol=1e-7)
    np.testing.assert_allclose(dX_kv, _numerical_gradient(loss, X_kv), atol=1e-7)
    assert np.all(dX_kv[1, 3] == 0)  # a padded key receives nothing


def test_backward_of_self_attention_is_the_sum_of_the_two_input_gradients():
    rng = np.random.default_rng(12)
    X, params = rng.standard_normal((2, 5, 6)), random_params(6, rng)
    R = rng.standard_normal((2, 5, 6))

    def loss():
        return float(
            (multi_head_attention(X, X, params, 3, np.tril(np.ones((5, 5), bool)))[0] * R).sum()
        )

    _, cache = multi_head_attention(X, X, params, 3, np.tril(np.ones((5, 5), bool)))
    dX_q, dX_kv, _ = multi_head_attention_backward(R, cache, params)
    np.testing.assert_allclose(dX_q + dX_kv, _numerical_gradient(loss, X), atol=1e-7)


def test_split_heads_rejects_bad_inputs():
    X = np.zeros((2, 3, 8))
    with pytest.raises(ValueError, match="d_model=8 must be a positive multiple of num_heads=3"):
        split_heads(X, 3)


def test_multi_head_attention_rejects_bad_inputs():
    rng = np.random.default_rng(0)
    p = init_multi_head_params(8, rng)
    X = rng.standard_normal((2, 3, 8))
    with pytest.raises(ValueError, match="d_model=8 must be a positive multiple of num_heads=3"):
        multi_head_attention(X, X, p, 3)
    not_broadcast = r"mask of shape \(4, 4\) does not broadcast to scores of shape \(2, 2, 3, 3\)"
    with pytest.raises(ValueError, match=not_broadcast):
        multi_head_attention(X, X, p, 2, mask=np.ones((4, 4), dtype=bool))
