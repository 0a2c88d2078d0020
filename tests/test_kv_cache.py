"""Tests of npformer.core.kv_cache: cached = uncached, GQA = MHA with repeated heads, memory,
errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.core.attention import multi_head
from npformer.core.kv_cache import (
    KVCache,
    attention_only_forward,
    generate_with_cache,
    generate_without_cache,
    grouped_query_attention,
    init_attention_only_model,
    kv_cache_bytes,
    layer_norm_last_row,
    next_input,
    repeat_kv_heads,
)
from npformer.core.masks import causal_mask
from npformer.core.multi_head import multi_head_attention


def mha_params_with_repeated_kv(params, num_heads, num_kv_heads):
    """Multi-head parameters (zero biases) whose head i uses the K, V columns of group i // r."""
    d = params["W_q"].shape[0]
    d_h = d // num_heads
    r = num_heads // num_kv_heads

    def widen(W):  # (d, g d_h) -> (d, h d_h): each group's columns repeated r times
        return np.repeat(W.reshape(d, num_kv_heads, d_h), r, axis=1).reshape(d, d)

    zeros = np.zeros(d)
    return {
        "W_q": params["W_q"],
        "W_k": widen(params["W_k"]),
        "W_v": widen(params["W_v"]),
        "W_o": params["W_o"],
        "b_q": zeros,
        "b_k": zeros,
        "b_v": zeros,
        "b_o": zeros,
    }


gqa_shapes = st.tuples(
    st.integers(1, 2),  # B
    st.integers(1, 6),  # T
    st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (6, 3), (6, 2)]),  # (h, g)
    st.integers(1, 4),  # d_h
    st.integers(0, 2**32 - 1),  # seed
)


# --- memory ------------------------------------------------------------------------------------


def test_memory_formula_gives_the_sources_figures():
    assert kv_cache_bytes(4, 8, 32, 160, 1, 8) == 2.5 * 2**20  # the toy model, float64
    assert kv_cache_bytes(32, 32, 128, 4096, 1, 2) == 2 * 2**30  # 32 KV heads, float16
    assert kv_cache_bytes(32, 1, 128, 4096, 1, 2) == 2**30 / 16  # multi-query: 0.0625 GiB
    assert kv_cache_bytes(24, 8, 64, 8192, 4, 2) == 1.5 * 2**30  # exercise 2


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4, 8])
def test_cache_holds_exactly_the_formulas_bytes(num_kv_heads):
    rng = np.random.default_rng(num_kv_heads)
    layers = init_attention_only_model(3, 16, 8, num_kv_heads, rng)
    cache = KVCache(3, 2, num_kv_heads, 12, 2)
    generate_with_cache(rng.standard_normal((2, 4, 16)), layers, 8, 8, num_kv_heads, cache)
    assert cache.nbytes == kv_cache_bytes(3, num_kv_heads, 2, 12, 2, 8)
    assert cache.length == 4 + 8 - 1  # the last vector is never fed back


# --- the cache object --------------------------------------------------------------------------


def test_write_is_in_place_and_returns_views_of_the_past():
    cache = KVCache(2, 1, 2, 5, 3)
    rng = np.random.default_rng(0)
    K1, V1 = rng.standard_normal((1, 2, 2, 3)), rng.standard_normal((1, 2, 2, 3))
    K, V = cache.write(1, K1, V1)
    assert K.shape == (1, 2, 2, 3) and np.shares_memory(K, cache.K)
    cache.advance(2)
    K2, V2 = rng.standard_normal((1, 2, 1, 3)), rng.standard_normal((1, 2, 1, 3))
    K, V = cache.write(1, K2, V2)
    np.testing.assert_array_equal(K, np.concatenate([K1, K2], axis=2))
    np.testing.assert_array_equal(V, np.concatenate([V1, V2], axis=2))
    assert np.shares_memory(V, cache.V)
    np.testing.assert_array_equal(cache.K[0], 0.0)  # the other layer is untouched


def test_cache_errors_name_the_shapes():
    """The forward pass checks its cache once; ``write``, called in every layer, trusts it."""
    rng = np.random.default_rng(0)
    layers = init_attention_only_model(2, 6, 2, 2, rng)  # d_h = 3
    X = rng.standard_normal((1, 3, 6))
    with pytest.raises(
        ValueError, match=r"cache has shape \(2, 1, 3, 4, 3\).*\(2, 1, 2, max_len, 3\)"
    ):
        attention_only_forward(X, layers, 2, 2, KVCache(2, 1, 3, 4, 3))
    with pytest.raises(ValueError, match=r"cache holds float32 \(shape \(2, 1, 2, 4, 3\)\)"):
        attention_only_forward(X, layers, 2, 2, KVCache(2, 1, 2, 4, 3, dtype=np.float32))
    cache = KVCache(2, 1, 2, 4, 3)
    attention_only_forward(X, layers, 2, 2, cache)
    with pytest.raises(ValueError, match="length 3 \\+ 2 exceeds max_len 4"):
        cache.advance(2)


# --- grouped-query attention -------------------------------------------------------------------


@given(gqa_shapes)
def test_grouped_query_equals_multi_head_with_repeated_kv_heads(shape):
    B, T, (h, g), d_h, seed = shape
    rng = np.random.default_rng(seed)
    d = h * d_h
    params = init_attention_only_model(1, d, h, g, rng)[0]
    X = rng.standard_normal((B, T, d))
    out = grouped_query_attention(X, params, h, g)
    ref, _ = multi_head_attention(
        X, X, mha_params_with_repeated_kv(params, h, g), h, mask=causal_mask(T)
    )
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    # the attention layer with num_kv_heads = g gives the toy model's layer, cached or not
    q, k, v = X @ params["W_q"], X @ params["W_k"], X @ params["W_v"]  # (B, T, d), (B, T, g d_h)
    factor = 1.0 / np.sqrt(d_h)
    merged, cache = multi_head(q, k, v, h, g, factor=factor, causal=True)
    np.testing.assert_array_equal(merged @ params["W_o"], out)
    # one key-value head (or h of them) broadcasts over the h query heads as they are
    grouped = (B, h, T, T) if g in (1, h) else (B, g, h // g, T, T)
    assert cache.core.weights.shape == grouped
    kv = KVCache(1, B, g, T, d_h)
    rows = [multi_head(q[:, :1], k[:, :1], v[:, :1], h, g, factor=factor, kv_cache=kv)[0]]
    kv.advance(1)
    for t in range(1, T):
        rows.append(multi_head(q[:, t : t + 1], k[:, t : t + 1], v[:, t : t + 1], h, g,
                               factor=factor, kv_cache=kv)[0])  # fmt: skip
        kv.advance(1)
    np.testing.assert_allclose(np.concatenate(rows, axis=1), merged, rtol=0, atol=1e-12)


def test_groups_equal_heads_is_plain_multi_head_attention():
    rng = np.random.default_rng(1)
    d, h = 12, 3
    params = init_attention_only_model(1, d, h, h, rng)[0]
    X = rng.standard_normal((2, 5, d))
    mha = dict(params, b_q=np.zeros(d), b_k=np.zeros(d), b_v=np.zeros(d), b_o=np.zeros(d))
    ref, _ = multi_head_attention(X, X, mha, h, mask=causal_mask(5))
    np.testing.assert_allclose(grouped_query_attention(X, params, h, h), ref, rtol=0, atol=1e-12)


def test_repeat_kv_heads_maps_head_i_to_group_i_over_r():
    K = np.arange(2 * 3 * 4 * 5, dtype=float).reshape(2, 3, 4, 5)
    R = repeat_kv_heads(K, 6)
    assert R.shape == (2, 6, 4, 5)
    for i in range(6):
        np.testing.assert_array_equal(R[:, i], K[:, i // 2])
    with pytest.raises(
        ValueError, match=r"num_heads=4 is not a multiple of the 3 .*\(2, 3, 4, 5\)"
    ):
        repeat_kv_heads(K, 4)


@given(gqa_shapes)
def test_rows_fed_through_the_cache_equal_the_full_forward(shape):
    """A prefill of some rows, then the rest one by one: same outputs as one causal forward."""
    B, T, (h, g), d_h, seed = shape
    rng = np.random.default_rng(seed)
    d = h * d_h
    layers = init_attention_only_model(2, d, h, g, rng)
    X = rng.standard_normal((B, T + 2, d))
    full = attention_only_forward(X, layers, h, g)
    cache = KVCache(2, B, g, T + 2, d_h)
    pieces = [attention_only_forward(X[:, :2], layers, h, g, cache)]
    for t in range(2, T + 2):
        pieces.append(attention_only_forward(X[:, t : t + 1], layers, h, g, cache))
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, rtol=0, atol=1e-12)
    assert cache.length == T + 2


def test_forward_leaves_its_input_unchanged():
    """The residual is added in place to each layer's fresh output, never to the caller's X."""
    rng = np.random.default_rng(6)
    layers = init_attention_only_model(2, 16, 4, 2, rng)
    X = rng.standard_normal((2, 5, 16))
    X_before = X.copy()
    Y = attention_only_forward(X, layers, 4, 2)
    cache = KVCache(2, 2, 2, 6, 4)
    Y_cached = attention_only_forward(X, layers, 4, 2, cache)
    np.testing.assert_array_equal(X, X_before)
    assert not np.shares_memory(Y, X) and not np.shares_memory(Y_cached, X)
    np.testing.assert_allclose(Y_cached, Y, rtol=0, atol=1e-12)


def test_causal_changing_a_later_row_leaves_earlier_outputs_unchanged():
    rng = np.random.default_rng(2)
    layers = init_attention_only_model(3, 16, 4, 2, rng)
    X = rng.standard_normal((2, 6, 16))
    X2 = X.copy()
    X2[:, 4] += 1.0
    Y, Y2 = attention_only_forward(X, layers, 4, 2), attention_only_forward(X2, layers, 4, 2)
    np.testing.assert_allclose(Y2[:, :4], Y[:, :4], rtol=0, atol=1e-12)
    assert np.abs(Y2[:, 4:] - Y[:, 4:]).min() > 0


@pytest.mark.parametrize("h, g", [(4, 4), (4, 2), (4, 1)])
def test_matches_torch_scaled_dot_product_attention_with_gqa(h, g):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10 + g)
    B, T, d = 2, 7, 16
    d_h = d // h
    p = init_attention_only_model(1, d, h, g, rng)[0]
    X = rng.standard_normal((B, T, d))
    Xt = torch.from_numpy(X)
    q = (Xt @ torch.from_numpy(p["W_q"])).view(B, T, h, d_h).transpose(1, 2)
    k = (Xt @ torch.from_numpy(p["W_k"])).view(B, T, g, d_h).transpose(1, 2)
    v = (Xt @ torch.from_numpy(p["W_v"])).view(B, T, g, d_h).transpose(1, 2)
    heads = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True
    )
    ref = heads.transpose(1, 2).reshape(B, T, d) @ torch.from_numpy(p["W_o"])
    out = grouped_query_attention(X, p, h, g)
    assert np.abs(out - ref.numpy()).max() < 1e-12


def test_grouped_query_attention_errors_name_the_shapes():
    rng = np.random.default_rng(3)
    p = init_attention_only_model(1, 8, 4, 2, rng)[0]
    X = rng.standard_normal((1, 3, 8))
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads=4"):
        grouped_query_attention(X, p, 4, 3)
    with pytest.raises(ValueError, match="num_kv_heads=8 must divide num_heads=4"):
        grouped_query_attention(X, p, 4, 8)
    with pytest.raises(ValueError, match="d_model=8 must be a positive multiple of num_heads=3"):
        grouped_query_attention(X, p, 3, 1)
    with pytest.raises(ValueError, match=r"X must have shape \(B, n, d\), got shape \(3, 8\)"):
        grouped_query_attention(X[0], p, 4, 2)
    with pytest.raises(ValueError, match=r"X must be a floating array, got dtype int64"):
        grouped_query_attention(X.astype(np.int64), p, 4, 2)
    with pytest.raises(ValueError, match="params lacks 'W_o'"):
        grouped_query_attention(X, {k: v for k, v in p.items() if k != "W_o"}, 4, 2)


def test_init_rejects_bad_sizes():
    rng = np.random.default_rng(0)
    layers = init_attention_only_model(2, 8, 4, 2, rng, dtype=np.float32)
    assert [p["W_k"].shape for p in layers] == [(8, 4), (8, 4)]
    assert all(W.dtype == np.float32 for p in layers for W in p.values())


# --- generation --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed, B, h, g", [(0, 1, 8, 8), (1, 2, 4, 2), (2, 3, 4, 1)])
def test_generation_with_cache_equals_generation_without(seed, B, h, g):
    rng = np.random.default_rng(seed)
    d = 4 * h
    layers = init_attention_only_model(3, d, h, g, rng)
    prompt = rng.standard_normal((B, 5, d))
    without = generate_without_cache(prompt, layers, 12, h, g)
    with_ = generate_with_cache(prompt, layers, 12, h, g)
    assert without.shape == with_.shape == (B, 17, d)
    np.testing.assert_array_equal(with_[:, :5], prompt)
    assert np.abs(without - with_).max() < 1e-12
    np.testing.assert_allclose(np.linalg.norm(with_[:, 5:], axis=-1), np.sqrt(d), rtol=1e-12)


def test_next_input_is_the_last_row_at_norm_sqrt_d():
    Y = np.arange(24, dtype=float).reshape(2, 3, 4)
    x = next_input(Y)
    assert x.shape == (2, 1, 4)
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 2.0)
    np.testing.assert_allclose(x[:, 0], Y[:, -1] / np.linalg.norm(Y[:, -1], axis=-1)[:, None] * 2)


@pytest.mark.parametrize("seed, B, h, g", [(3, 1, 8, 8), (4, 2, 4, 2)])
def test_generation_with_layer_norm_feedback_is_the_same_with_and_without_cache(seed, B, h, g):
    rng = np.random.default_rng(seed)
    d = 4 * h
    layers = init_attention_only_model(2, d, h, g, rng)
    prompt = rng.standard_normal((B, 6, d))
    without = generate_without_cache(prompt, layers, 10, h, g, feedback=layer_norm_last_row)
    with_ = generate_with_cache(prompt, layers, 10, h, g, feedback=layer_norm_last_row)
    assert np.abs(without - with_).max() < 1e-12
    # the fed-back rows are the layer norm's, not next_input's
    np.testing.assert_allclose(with_[:, 6:].mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(with_[:, 6:].std(axis=-1), 1.0, rtol=1e-12)
    assert np.abs(with_ - generate_with_cache(prompt, layers, 10, h, g)).max() > 0.1


def test_layer_norm_last_row_centres_and_scales_the_last_row():
    Y = np.random.default_rng(0).standard_normal((2, 3, 5)) * 4 + 7
    x = layer_norm_last_row(Y)
    assert x.shape == (2, 1, 5)
    y = Y[:, -1:]
    np.testing.assert_allclose(x, (y - y.mean(-1, keepdims=True)) / y.std(-1, keepdims=True))


def test_generation_errors():
    rng = np.random.default_rng(4)
    layers = init_attention_only_model(2, 8, 2, 1, rng)
    prompt = rng.standard_normal((1, 3, 8))
    cache = KVCache(2, 1, 1, 8, 4)
    cache.advance(1)
    with pytest.raises(ValueError, match="the cache must start empty, it holds 1 positions"):
        generate_with_cache(prompt, layers, 2, 2, 1, cache)
    with pytest.raises(ValueError, match="the cache holds 3 layers, the model has 2"):
        generate_with_cache(prompt, layers, 2, 2, 1, KVCache(3, 1, 1, 8, 4))
    with pytest.raises(ValueError, match="attention_only_forward: the model needs at least one"):
        attention_only_forward(prompt, [], 2, 1)


# ----------------------------------------------------------------------------- the trained decoder

from npformer.core.model import (  # noqa: E402
    DecoderConfig,
    decoder_cache,
    forward,
    generate_greedy_with_cache,
    init_params,
)
from npformer.training.train import generate, model_logits  # noqa: E402

SCHEMES = ["learned", "sinusoidal", "rope", "alibi", "none"]


def _decoder(ln="pre", activation="relu", final_ln=True, seed=0, positions="learned"):
    config = DecoderConfig(
        vocab_size=11,
        d_model=16,
        num_heads=4,
        num_layers=2,
        d_ff=32,
        max_len=12,
        ln=ln,
        activation=activation,
        final_ln=final_ln,
        positions=positions,
    )
    params = init_params(config, np.random.default_rng(seed))
    # larger embeddings than the initialization's, so that positions change the argmax
    params = {k: (3 * v if k in ("tok_emb", "pos_emb") else v) for k, v in params.items()}
    return config, params


def _prefill_then_one_by_one(params, config, tokens, prefill):
    """Logits of a prefill over tokens[:, :prefill], then of each later token, with one cache."""
    B, T = tokens.shape
    cache = decoder_cache(config, B, T, params["tok_emb"].dtype)
    parts = [forward(params, config, tokens[:, :prefill], cache=cache)[0]]
    for t in range(prefill, T):
        parts.append(forward(params, config, tokens[:, t : t + 1], cache=cache)[0])
    assert cache.length == T
    return np.concatenate(parts, axis=1)  # (B, T, vocab)


@pytest.mark.parametrize("positions", SCHEMES)
def test_a_reset_cache_serves_a_second_request_like_a_fresh_one(positions):
    config, params = _decoder(positions=positions)
    rng = np.random.default_rng(7)
    first, second = rng.integers(0, 11, size=(2, 2, 10))  # two requests, (B, T) each
    cache = decoder_cache(config, 2, 10)
    for t in range(10):  # the first request fills the cache
        forward(params, config, first[:, t : t + 1], cache=cache)
    with pytest.raises(ValueError, match=r"overflow the cache of shape \(2, 2, 4, 10, 4\)"):
        forward(params, config, second[:, :1], cache=cache)  # full: refused, not overwritten
    cache.reset()
    assert cache.length == 0 and cache.max_len == 10
    reused = [forward(params, config, second[:, :4], cache=cache)[0]]
    for t in range(4, 10):
        reused.append(forward(params, config, second[:, t : t + 1], cache=cache)[0])
    full, _ = forward(params, config, second)  # (B, T, vocab): no cache
    assert np.abs(np.concatenate(reused, axis=1) - full).max() < 1e-10


@pytest.mark.parametrize("ln", ["pre", "post"])
@pytest.mark.parametrize("positions", SCHEMES)
def test_cached_forward_equals_the_uncached_forward(positions, ln):
    """A prefill then one token per call: the logits of one uncached pass, in float64."""
    config, params = _decoder(ln, positions=positions)
    tokens = np.random.default_rng(1).integers(0, 11, size=(3, 12))
    full, _ = forward(params, config, tokens)  # (B, T, vocab)
    for prefill in (1, 4):
        cached = _prefill_then_one_by_one(params, config, tokens, prefill)
        assert np.abs(cached - full).max() < 1e-10


@pytest.mark.parametrize(
    "ln, activation, final_ln", [("post", "gelu", False), ("pre", "swiglu", True)]
)
def test_cached_forward_with_other_activations_and_no_final_norm(ln, activation, final_ln):
    config, params = _decoder(ln, activation, final_ln, positions="rope")
    tokens = np.random.default_rng(3).integers(0, 11, size=(2, 9))
    full, _ = forward(params, config, tokens)
    assert np.abs(_prefill_then_one_by_one(params, config, tokens, 3) - full).max() < 1e-10


def test_rope_scale_and_float32_go_through_the_cache():
    config = DecoderConfig(11, 16, 4, 2, 32, 12, positions="rope", rope_scale=0.5)
    params = init_params(config, np.random.default_rng(4), dtype=np.float32)
    tokens = np.random.default_rng(5).integers(0, 11, size=(2, 10))
    full, _ = forward(params, config, tokens)
    cached = _prefill_then_one_by_one(params, config, tokens, 2)
    assert cached.dtype == np.float32
    assert np.abs(cached - full).max() < 1e-4


@pytest.mark.parametrize("ln", ["pre", "post"])
@pytest.mark.parametrize("positions", SCHEMES)
def test_cached_greedy_decoding_is_token_identical(positions, ln):
    config, params = _decoder(ln, positions=positions)
    start = np.random.default_rng(2).integers(0, 11, size=(20, 4))
    expected = generate(model_logits(params, config), start, 8)
    assert np.array_equal(generate_greedy_with_cache(params, config, start, 8), expected)


def test_forgotten_position_offset_is_caught_by_the_token_check():
    config, params = _decoder()
    start = np.random.default_rng(2).integers(0, 11, size=(20, 4))
    expected = generate(model_logits(params, config), start, 8)
    buggy = generate_greedy_with_cache(params, config, start, 8, position_offset=False)
    assert np.array_equal(buggy[:, 0], expected[:, 0])  # the prefill has its positions
    assert not np.array_equal(buggy, expected)


def test_explicit_positions_equal_the_default_ones():
    config, params = _decoder(positions="alibi")
    tokens = np.random.default_rng(6).integers(0, 11, size=(2, 6))
    cache = decoder_cache(config, 2)
    forward(params, config, tokens[:, :4], cache=cache)
    default, _ = forward(params, config, tokens[:, 4:], cache=decoder_cache(config, 2))
    a = forward(params, config, tokens[:, 4:], cache=cache, positions=np.arange(4, 6))[0]
    full, _ = forward(params, config, tokens)
    assert np.abs(a - full[:, 4:]).max() < 1e-10
    assert np.abs(default - full[:, 4:]).max() > 1e-3  # no cache: positions 0, 1


def test_forward_with_cache_bad_inputs():
    config, params = _decoder()
    tokens = np.zeros((2, 2), dtype=int)
    with pytest.raises(ValueError, match=r"forward: cache has shape \(2, 3, 4, 12, 4\).*\(2, 2, 4"):
        forward(params, config, tokens, cache=decoder_cache(config, 3))
    with pytest.raises(ValueError, match="forward: cache must be a KVCache, got tuple"):
        forward(params, config, tokens, cache=())
    short = decoder_cache(config, 2, 3)
    forward(params, config, tokens, cache=short)
    with pytest.raises(ValueError, match=r"cache holds float32.*float64"):
        forward(params, config, tokens, cache=decoder_cache(config, 2, dtype=np.float32))
    full = decoder_cache(config, 2, 20)
    forward(params, config, np.zeros((2, 11), dtype=int), cache=full)
    with pytest.raises(ValueError, match="reach position 12, outside the 12 rows"):
        forward(params, config, tokens, cache=full)
    with pytest.raises(ValueError, match="start"):
        generate_greedy_with_cache(params, config, np.zeros(3, dtype=int), 2)
    empty = generate_greedy_with_cache(params, config, np.zeros((1, 3), dtype=int), 0)
    assert empty.shape == (1, 0)


@pytest.mark.parametrize("g", [8, 4, 2, 1])
def test_grouped_query_attention_equals_torch_sdpa_enable_gqa(g):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(20 + g)
    params = init_attention_only_model(1, 64, 8, g, rng)[0]
    X = rng.standard_normal((2, 10, 64))  # (B, T, d)
    t = {name: torch.from_numpy(W) for name, W in params.items()}
    x = torch.from_numpy(X)
    q = (x @ t["W_q"]).view(2, 10, 8, 8).transpose(1, 2)  # (B, h, T, d_h)
    k = (x @ t["W_k"]).view(2, 10, g, 8).transpose(1, 2)  # (B, g, T, d_h)
    v = (x @ t["W_v"]).view(2, 10, g, 8).transpose(1, 2)
    heads = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True
    )
    reference = (heads.transpose(1, 2).reshape(2, 10, 64) @ t["W_o"]).numpy()
    np.testing.assert_allclose(
        grouped_query_attention(X, params, 8, g), reference, rtol=0, atol=1e-12
    )
