"""Tests for npformer.core.masks and for the masked attention built from them."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.core.attention import masked_softmax, scaled_dot_product_attention, softmax
from npformer.core.masks import causal_mask, combine_masks, key_padding_to_scores, padding_mask

sizes = st.integers(1, 9)
seeds = st.integers(0, 2**32 - 1)


@st.composite
def batches(draw):
    """A padded batch: B, S, lengths in [1, S] (at least one real key each), heads, width."""
    B = draw(st.integers(1, 4))
    S = draw(sizes)
    lengths = draw(st.lists(st.integers(1, S), min_size=B, max_size=B))
    return B, S, np.array(lengths), draw(st.integers(1, 3)), draw(st.integers(1, 6))


def qkv(rng, lead, T, S, d_h, d_v=None):
    Q = rng.normal(size=(*lead, T, d_h))
    K = rng.normal(size=(*lead, S, d_h))
    V = rng.normal(size=(*lead, S, d_v or d_h))
    return Q, K, V


# ----- the masks themselves -----


@given(T=sizes, extra=st.integers(0, 5))
def test_causal_mask_is_the_rule_and_the_last_rows_of_the_square(T, extra):
    S = T + extra
    M = causal_mask(T, S)
    assert M.shape == (T, S) and M.dtype == np.bool_
    i, j = np.indices((T, S))
    np.testing.assert_array_equal(M, j <= i + (S - T))
    np.testing.assert_array_equal(M, causal_mask(S)[S - T :])
    np.testing.assert_array_equal(causal_mask(S), np.tril(np.ones((S, S), dtype=bool)))
    assert M[-1].all()  # the newest query sees every key


def test_causal_mask_default_and_numpy_integers():
    np.testing.assert_array_equal(causal_mask(4), causal_mask(4, 4))
    np.testing.assert_array_equal(causal_mask(np.int64(3), np.int32(5)), causal_mask(3, 5))


@given(S=sizes, data=st.data())
def test_padding_mask_marks_the_first_length_positions(S, data):
    lengths = data.draw(st.lists(st.integers(0, S), min_size=1, max_size=5))
    pad = padding_mask(lengths, S)
    assert pad.shape == (len(lengths), S) and pad.dtype == np.bool_
    np.testing.assert_array_equal(pad.sum(axis=1), lengths)
    for b, length in enumerate(lengths):
        assert pad[b, :length].all() and not pad[b, length:].any()


def test_key_padding_to_scores_is_a_broadcasting_view():
    pad = padding_mask([3, 1], 4)
    view = key_padding_to_scores(pad)
    assert view.shape == (2, 1, 1, 4) and np.shares_memory(view, pad)
    assert np.broadcast_shapes(view.shape, (2, 3, 5, 4)) == (2, 3, 5, 4)


@given(T=sizes, seed=seeds)
def test_combine_masks_is_a_broadcast_and(T, seed):
    rng = np.random.default_rng(seed)
    B, h = 2, 3
    a = causal_mask(T)  # (T, S)
    b = rng.random((B, 1, 1, T)) < 0.5  # (B, 1, 1, S)
    c = rng.random((h, T, 1)) < 0.5  # (h, T, 1)
    out = combine_masks(a, None, b, c)
    assert out.shape == (B, h, T, T)
    np.testing.assert_array_equal(out, a & b & c)
    np.testing.assert_array_equal(combine_masks(a), a)
    assert combine_masks() is None and combine_masks(None, None) is None


# ----- masked attention built from them -----


@given(batch=batches(), seed=seeds)
def test_rows_sum_to_one_with_causal_and_padding_masks(batch, seed):
    B, S, lengths, h, d_h = batch
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, (B, h), S, S, d_h)
    mask = combine_masks(causal_mask(S), key_padding_to_scores(padding_mask(lengths, S)))
    _, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
    P = cache.weights  # (B, h, T, S)
    np.testing.assert_allclose(P.sum(axis=-1), 1, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(P[~np.broadcast_to(mask, P.shape)], 0)


@given(T=st.integers(2, 9), d_h=st.integers(1, 6), seed=seeds, data=st.data())
def test_changing_a_future_token_leaves_earlier_causal_outputs_unchanged(T, d_h, seed, data):
    t = data.draw(st.integers(1, T - 1))  # the token we change; positions 0..t-1 must not move
    rng = np.random.default_rng(seed)
    d = 2 * d_h
    W_q, W_k, W_v = (rng.normal(size=(d, d_h)) for _ in range(3))
    X = rng.normal(size=(2, T, d))  # (B, T, d)
    X2 = X.copy()
    X2[:, t] = rng.normal(size=(2, d))

    def attend(X, mask):
        return scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v, mask=mask)[0]

    M = causal_mask(T)
    np.testing.assert_array_equal(attend(X, M)[:, :t], attend(X2, M)[:, :t])
    # without the mask the earlier positions do read token t
    assert np.abs(attend(X, None)[:, :t] - attend(X2, None)[:, :t]).max() > 0


@given(T=sizes, d_h=st.integers(1, 6), seed=seeds)
def test_causal_output_at_t_equals_attention_over_the_prefix(T, d_h, seed):
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, (2,), T, T, d_h)
    full, _ = scaled_dot_product_attention(Q, K, V, mask=causal_mask(T))
    for t in range(T):
        prefix, _ = scaled_dot_product_attention(Q[:, t : t + 1], K[:, : t + 1], V[:, : t + 1])
        np.testing.assert_allclose(full[:, t], prefix[:, 0], rtol=0, atol=1e-12)


@given(T=sizes, extra=st.integers(0, 4), d_h=st.integers(1, 6), seed=seeds)
def test_rectangular_causal_mask_matches_the_last_rows_of_the_square(T, extra, d_h, seed):
    S = T + extra
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, (), S, S, d_h)
    full, _ = scaled_dot_product_attention(Q, K, V, mask=causal_mask(S))
    last, _ = scaled_dot_product_attention(Q[S - T :], K, V, mask=causal_mask(T, S))
    np.testing.assert_allclose(last, full[S - T :], rtol=0, atol=1e-12)


@given(batch=batches(), seed=seeds, extra=st.integers(1, 4))
def test_padding_mask_makes_outputs_independent_of_filler(batch, seed, extra):
    B, S, lengths, h, d_h = batch
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, (B, h), S, S, d_h)
    mask = key_padding_to_scores(padding_mask(lengths, S))
    out, _ = scaled_dot_product_attention(Q, K, V, mask=mask)
    # more filler keys, with arbitrary content, and the padding mask that covers them
    K2 = np.concatenate([K, rng.normal(size=(B, h, extra, d_h)) * 10], axis=-2)
    V2 = np.concatenate([V, rng.normal(size=(B, h, extra, d_h)) * 10], axis=-2)
    mask2 = key_padding_to_scores(padding_mask(lengths, S + extra))
    out2, _ = scaled_dot_product_attention(Q, K2, V2, mask=mask2)
    np.testing.assert_allclose(out2, out, rtol=0, atol=1e-12)
    # and each sequence equals itself computed alone, at its own length
    for b, length in enumerate(lengths):
        alone, _ = scaled_dot_product_attention(Q[b], K[b, :, :length], V[b, :, :length])
        np.testing.assert_allclose(out[b], alone, rtol=0, atol=1e-12)


def test_forgetting_the_padding_mask_changes_the_result():
    rng = np.random.default_rng(0)
    Q, K, V = qkv(rng, (1,), 3, 5, 4)
    mask = key_padding_to_scores(padding_mask([3], 5))[:, 0]  # (B, 1, S)
    alone, _ = scaled_dot_product_attention(Q, K[:, :3], V[:, :3])
    masked, _ = scaled_dot_product_attention(Q, K, V, mask=mask)
    unmasked, _ = scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(masked, alone, rtol=0, atol=1e-14)
    assert np.abs(unmasked - alone).max() > 1e-3


@pytest.mark.parametrize("k", [1, 3, 6])
def test_forgotten_padding_moves_the_output_by_the_filler_share(k):
    """k copies of one filler share one score z_f and take the share k e^z_f / (D + k e^z_f)."""
    from npformer.training.example import running_example

    X = running_example(d=8).X
    short, filler = X[1, :4], X[1, 4]  # "the bank lent money", the <pad> embedding
    d = short.shape[-1]
    alone, _ = scaled_dot_product_attention(short, short, short)
    padded = np.vstack([short, np.tile(filler, (k, 1))])  # (4 + k, d)
    unmasked, _ = scaled_dot_product_attention(padded, padded, padded)
    z_real = short @ short.T / math.sqrt(d)  # (4, 4)
    z_fill = short @ filler / math.sqrt(d)  # (4,)
    D = np.exp(z_real).sum(axis=1)  # (4,)
    share = k * np.exp(z_fill) / (D + k * np.exp(z_fill))  # (4,)
    predicted = share[:, None] * (filler - alone)  # (4, d)
    np.testing.assert_allclose(unmasked[:4] - alone, predicted, rtol=1e-10, atol=1e-13)


@given(batch=batches(), seed=seeds)
def test_right_padding_under_a_causal_mask_needs_no_padding_mask(batch, seed):
    """Right-padded fillers sit in every real query's future: the causal mask hides them."""
    B, S, lengths, h, d_h = batch
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, (B, h), S, S, d_h)
    causal = causal_mask(S)
    both = combine_masks(causal, key_padding_to_scores(padding_mask(lengths, S)))
    out_causal, _ = scaled_dot_product_attention(Q, K, V, mask=causal)
    out_both, _ = scaled_dot_product_attention(Q, K, V, mask=both)
    for b, length in enumerate(lengths):
        np.testing.assert_array_equal(out_causal[b, :, :length], out_both[b, :, :length])


@given(T=sizes, S=sizes, seed=seeds)
def test_fully_masked_rows_give_zero_weights_and_zero_output(T, S, seed):
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, (2,), T, S, 3)
    mask = rng.random((2, T, S)) < 0.5
    mask[:, 0] = False  # query 0 sees nothing
    out, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
    assert np.isfinite(out).all() and np.isfinite(cache.weights).all()
    empty = ~mask.any(axis=-1)  # (B, T)
    np.testing.assert_array_equal(cache.weights[empty], 0)
    np.testing.assert_array_equal(out[empty], 0)
    np.testing.assert_allclose(cache.weights.sum(axis=-1)[~empty], 1, rtol=0, atol=1e-12)


def test_naive_formula_gives_nan_on_a_fully_masked_row():
    scores = np.zeros((2, 3))
    mask = np.array([[False, False, False], [True, False, True]])
    masked = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        naive = softmax(masked)
    assert np.isnan(naive[0]).all()
    safe = masked_softmax(scores, mask)
    np.testing.assert_array_equal(safe[0], 0)
    np.testing.assert_allclose(safe[1], [0.5, 0, 0.5])


def test_zeroing_after_the_softmax_breaks_the_row_sums():
    scores = np.random.default_rng(3).normal(size=(5, 5))
    wrong = softmax(scores) * causal_mask(5)
    right = masked_softmax(scores, causal_mask(5))
    assert np.all(wrong.sum(axis=1)[:-1] < 1)
    np.testing.assert_allclose(wrong[-1], right[-1], rtol=0, atol=1e-15)
    assert math.isclose(float(wrong.sum(axis=1)[1]), 0.0314, abs_tol=5e-5)


# ----- bad inputs -----


def test_causal_mask_rejects_bad_sizes():
    with pytest.raises(
        ValueError, match=r"causal_mask: S=2 keys is fewer than T=4 queries.*\(4, 2\)"
    ):
        causal_mask(4, 2)


@pytest.mark.parametrize("lengths", [[1, 4], [-1]])
def test_padding_mask_rejects_bad_inputs(lengths):
    with pytest.raises(ValueError, match=r"padding_mask: every length must lie in \[0, S=3\]"):
        padding_mask(lengths, 3)


def test_attention_rejects_a_mask_that_does_not_broadcast():
    rng = np.random.default_rng(0)
    Q, K, V = qkv(rng, (2,), 4, 5, 3)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not .*\(2, 4, 5\)"):
        scaled_dot_product_attention(Q, K, V, mask=causal_mask(4))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 1, 5\) does not .*\(2, 4, 5\)"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((3, 1, 5), dtype=bool))


def test_mask_diagram_numbers_are_the_ones_its_caption_quotes():
    """Chapter 03's figure caption quotes the zeroed rows' sums 0.92, 0.64, 0.75, 1.00."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "draw_mask_diagram.py"
    spec = importlib.util.spec_from_file_location("draw_mask_diagram", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    m = module.matrices()
    assert [round(float(s), 2) for s in m["after"].sum(axis=1)] == [0.92, 0.64, 0.75, 1.00]
    np.testing.assert_allclose(m["before"].sum(axis=1), 1, atol=1e-15)
