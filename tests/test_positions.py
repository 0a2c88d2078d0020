"""Tests of npformer.core.positions: sinusoids, shift matrices, RoPE, Shaw, T5, ALiBi, bad
inputs."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.core.attention import scaled_dot_product_attention
from npformer.core.multi_head import init_multi_head_params, multi_head_attention
from npformer.core.positions import (
    add_positions,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    attention_with_bias,
    init_learned_positions,
    interpolate_positions,
    relative_position_index,
    rope_angles,
    rope_pairing_permutation,
    rope_rotation_matrix,
    shaw_attention,
    sinusoidal_frequencies,
    sinusoidal_positions,
    sinusoidal_shift_matrix,
    t5_bias,
    t5_relative_bucket,
)

even_widths = st.integers(1, 16).map(lambda n: 2 * n)


# --- sinusoids -------------------------------------------------------------------------------


def test_sinusoids_follow_the_formula_with_i_indexing_pairs():
    n, d = 20, 12
    pe = sinusoidal_positions(n, d)
    for pos in range(n):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert math.isclose(pe[pos, 2 * i], math.sin(angle), abs_tol=1e-12)
            assert math.isclose(pe[pos, 2 * i + 1], math.cos(angle), abs_tol=1e-12)
    np.testing.assert_allclose(sinusoidal_frequencies(d)[[0, -1]], [1.0, 10000 ** (-10 / 12)])


@given(
    d=even_widths,
    pos=st.integers(0, 500),
    k=st.integers(-200, 200),
    other=st.integers(0, 500),
)
def test_sinusoidal_shift_matrices_do_not_depend_on_pos(d, pos, k, other):
    M = sinusoidal_shift_matrix(k, d)
    pe = sinusoidal_positions(1200, d)
    for p in (pos, other):
        if p + k >= 0:
            np.testing.assert_allclose(M @ pe[p], pe[p + k], rtol=0, atol=1e-9)
    # block diagonal rotations: orthogonal, and M_k M_l = M_(k+l)
    np.testing.assert_allclose(M @ M.T, np.eye(d), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        M @ sinusoidal_shift_matrix(3, d), sinusoidal_shift_matrix(k + 3, d), rtol=0, atol=1e-9
    )


# --- learned table, sqrt(d) --------------------------------------------------------------------


def test_learned_table_and_add_positions():
    rng = np.random.default_rng(0)
    table = init_learned_positions(10, 8, rng)
    assert table.shape == (10, 8) and table.size == 80
    X = rng.standard_normal((2, 6, 8))
    np.testing.assert_array_equal(add_positions(X, table), X + table[:6])
    np.testing.assert_allclose(
        add_positions(X, table, scale_embeddings=True), X * math.sqrt(8) + table[:6]
    )
    with pytest.raises(ValueError, match=r"T=11 .*\(10, 8\) stops at T_max=10"):
        add_positions(rng.standard_normal((1, 11, 8)), table)


# --- RoPE --------------------------------------------------------------------------------------


def test_rope_is_the_block_rotation_and_the_rotations_compose():
    rng = np.random.default_rng(1)
    d, T = 8, 6
    X = rng.standard_normal((T, d))
    out = apply_rope(X)
    for m in range(T):
        np.testing.assert_allclose(out[m], rope_rotation_matrix(m, d) @ X[m], atol=1e-12)
    for m, n in [(0, 5), (3, 7), (11, 2)]:
        np.testing.assert_allclose(
            rope_rotation_matrix(m, d).T @ rope_rotation_matrix(n, d),
            rope_rotation_matrix(n - m, d),
            rtol=0,
            atol=1e-12,
        )
    # norms are kept: a rotation
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(X, axis=-1))


@given(
    d=even_widths,
    T=st.integers(1, 6),
    shift=st.integers(-50, 1000),
    seed=st.integers(0, 2**32 - 1),
)
def test_rope_scores_are_invariant_to_shifting_both_positions(d, T, shift, seed):
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((2, 3, T, d))
    pos = rng.integers(0, 100, size=T)
    scores = apply_rope(Q, pos) @ apply_rope(K, pos).swapaxes(-1, -2)  # (3, T, T)
    shifted = apply_rope(Q, pos + shift) @ apply_rope(K, pos + shift).swapaxes(-1, -2)
    np.testing.assert_allclose(shifted, scores, rtol=0, atol=1e-9 * (1 + np.abs(scores).max()))


def test_half_pairing_is_the_adjacent_one_with_permuted_columns():
    rng = np.random.default_rng(3)
    T, d = 9, 12
    X = rng.standard_normal((2, T, d))
    perm = rope_pairing_permutation(d)
    np.testing.assert_array_equal(np.sort(perm), np.arange(d))
    np.testing.assert_allclose(
        apply_rope(X)[..., perm], apply_rope(X[..., perm], pairing="half"), rtol=0, atol=1e-12
    )
    # without the permutation the two layouts give different scores for the same q, k
    Q, K = rng.standard_normal((2, T, d))
    adjacent = apply_rope(Q) @ apply_rope(K).T
    half = apply_rope(Q, pairing="half") @ apply_rope(K, pairing="half").T
    assert np.abs(adjacent - half).max() > 0.1
    permuted = apply_rope(Q[:, perm], pairing="half") @ apply_rope(K[:, perm], pairing="half").T
    np.testing.assert_allclose(permuted, adjacent, rtol=0, atol=1e-12)
    # pair i of the half layout is (i, i + d/2), turned by m w_i
    e = np.zeros((T, d))
    e[:, 1] = 1.0
    out = apply_rope(e, pairing="half")
    theta = np.arange(T) * sinusoidal_frequencies(d)[1]
    np.testing.assert_allclose(out[:, 1], np.cos(theta), atol=1e-12)
    np.testing.assert_allclose(out[:, 1 + d // 2], np.sin(theta), atol=1e-12)
    assert np.abs(np.delete(out, [1, 1 + d // 2], axis=1)).max() == 0


def test_half_pairing_matches_a_torch_rotate_half_twin():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    T, d = 7, 16
    X = rng.standard_normal((3, T, d))
    x = torch.tensor(X, dtype=torch.float64)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)  # (T, d/2)
    emb = torch.cat([freqs, freqs], dim=-1)  # (T, d)

    def rotate_half(v):
        v1, v2 = v[..., : d // 2], v[..., d // 2 :]
        return torch.cat([-v2, v1], dim=-1)

    expected = x * emb.cos() + rotate_half(x) * emb.sin()
    np.testing.assert_allclose(apply_rope(X, pairing="half"), expected.numpy(), atol=1e-12)


def test_rope_pairing_rejects_unknown_layouts():
    with pytest.raises(ValueError, match=r"apply_rope: pairing must be one of \('adjacent'"):
        apply_rope(np.zeros((2, 4)), pairing="interleaved")


def test_rope_angles_and_interpolation():
    d = 8
    angles = rope_angles(np.arange(5), d)
    assert angles.shape == (5, 4)
    np.testing.assert_allclose(angles[:, 0], np.arange(5))
    pos = interpolate_positions(np.arange(8), train_length=4, target_length=8)
    np.testing.assert_array_equal(pos, np.arange(8) / 2)
    assert interpolate_positions(np.arange(4096), 2048, 4096).max() < 2048


# --- Shaw, T5, ALiBi ---------------------------------------------------------------------------


def test_relative_index_is_clipped():
    idx = relative_position_index(5, max_distance=2)
    expected = np.clip(np.arange(5)[None, :] - np.arange(5)[:, None], -2, 2) + 2
    np.testing.assert_array_equal(idx, expected)
    # queries are the last T of S positions
    np.testing.assert_array_equal(relative_position_index(2, 5, 2), expected[-2:])


def test_shaw_attention_equals_the_loop_definition():
    rng = np.random.default_rng(2)
    B, T, d, k = 2, 5, 4, 2
    Q, K, V = rng.standard_normal((3, B, T, d))
    A_k, A_v = rng.standard_normal((2, 2 * k + 1, d))
    mask = np.tril(np.ones((T, T), dtype=bool))
    out, w = shaw_attention(Q, K, V, A_k, A_v, mask=mask)
    for b in range(B):
        for i in range(T):
            e = np.array(
                [Q[b, i] @ (K[b, j] + A_k[np.clip(j - i, -k, k) + k]) for j in range(T)]
            ) / math.sqrt(d)
            e = np.where(mask[i], e, -np.inf)
            p = np.exp(e - e.max())
            p /= p.sum()
            z = sum(p[j] * (V[b, j] + A_v[np.clip(j - i, -k, k) + k]) for j in range(T))
            np.testing.assert_allclose(w[b, i], p, atol=1e-12)
            np.testing.assert_allclose(out[b, i], z, atol=1e-12)
    # zero relative vectors give plain attention
    ref, _ = scaled_dot_product_attention(Q, K, V, mask=mask)
    zero = np.zeros_like(A_k)
    np.testing.assert_allclose(shaw_attention(Q, K, V, zero, zero, mask)[0], ref, atol=1e-12)


def test_t5_buckets_match_the_reference_definition():
    def reference(rp, bidirectional, nb, max_distance):
        bucket = 0
        if bidirectional:
            nb //= 2
            bucket += nb if rp > 0 else 0
            n = abs(rp)
        else:
            n = -min(rp, 0)
        max_exact = nb // 2
        if n < max_exact:
            return bucket + n
        large = max_exact + int(
            math.log(n / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact)
        )
        return bucket + min(large, nb - 1)

    rp = np.arange(-300, 301)
    for bidirectional in (True, False):
        for nb, md in [(32, 128), (8, 20)]:
            got = t5_relative_bucket(rp, bidirectional, nb, md)
            want = [reference(int(r), bidirectional, nb, md) for r in rp]
            np.testing.assert_array_equal(got, want)
            assert got.min() == 0 and got.max() == nb - 1
    b = t5_relative_bucket(rp)
    assert np.all(np.diff(b[rp <= 0]) <= 0) and np.all(np.diff(b[rp > 0]) >= 0)


def test_t5_bias_reads_the_table():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((32, 4))
    bias = t5_bias(5, 7, table)
    assert bias.shape == (4, 5, 7)
    rel = np.arange(7)[None, :] - (np.arange(5)[:, None] + 2)
    np.testing.assert_array_equal(bias[2], table[t5_relative_bucket(rel), 2])


def test_alibi_slopes_and_bias():
    np.testing.assert_array_equal(alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    np.testing.assert_allclose(alibi_slopes(4), 2.0 ** (-2.0 * np.arange(1, 5)))
    six = alibi_slopes(6)  # 4 slopes of h = 4, then every other of h = 8
    np.testing.assert_allclose(six, [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3])
    bias = alibi_bias(2, 4)
    i, j = np.arange(4)[:, None], np.arange(4)[None, :]
    lower = j <= i
    np.testing.assert_array_equal(bias[0][lower], (-(2.0**-4) * (i - j))[lower])
    np.testing.assert_array_equal(bias[1], -(2.0**-8) * np.abs(i - j))


def test_bias_of_zero_is_plain_attention_and_alibi_prefers_recent_keys():
    rng = np.random.default_rng(4)
    Q, K, V = rng.standard_normal((3, 2, 4, 6, 8))
    ref, _ = scaled_dot_product_attention(Q, K, V)
    out, _ = attention_with_bias(Q, K, V, np.zeros((4, 6, 6)))
    np.testing.assert_allclose(out, ref, atol=1e-12)
    # with equal content scores, ALiBi's weights decrease with distance
    _, w = attention_with_bias(
        np.zeros((1, 4, 6, 8)), np.zeros((1, 4, 6, 8)), V[:1], alibi_bias(4, 6)
    )
    assert np.all(np.diff(w[0, :, -1, :], axis=-1) > 0)


def test_positions_break_permutation_equivariance():
    rng = np.random.default_rng(5)
    B, T, d, h = 1, 6, 8, 2
    X = rng.standard_normal((B, T, d))
    p = init_multi_head_params(d, rng)
    perm = rng.permutation(T)
    Xp = X + sinusoidal_positions(T, d)
    Xperm = X[:, perm] + sinusoidal_positions(T, d)
    out, _ = multi_head_attention(Xp, Xp, p, h)
    out_perm, _ = multi_head_attention(Xperm, Xperm, p, h)
    assert np.abs(out_perm - out[:, perm]).max() > 1e-2


# --- bad inputs --------------------------------------------------------------------------------


def test_odd_or_bad_widths_are_rejected():
    with pytest.raises(ValueError, match=r"apply_rope: X of shape \(4, 5\) has an odd width"):
        apply_rope(np.zeros((4, 5)))


def test_relative_schemes_reject_bad_inputs():
    with pytest.raises(ValueError, match="num_buckets=7 must be even"):
        t5_relative_bucket(np.arange(3), num_buckets=7)


def test_shaw_attention_rejects_bad_shapes():
    Q = np.zeros((2, 4, 6))
    A = np.zeros((5, 6))
    with pytest.raises(ValueError, match=r"rel_keys \(4, 6\) and rel_values \(5, 6\)"):
        shaw_attention(Q, Q, Q, np.zeros((4, 6)), A)
    with pytest.raises(
        ValueError, match=r"mask of shape \(3, 3\) does not broadcast .*\(2, 4, 4\)"
    ):
        shaw_attention(Q, Q, Q, A, A, mask=np.ones((3, 3), dtype=bool))


def test_attention_with_bias_rejects_bad_shapes():
    Q = np.zeros((2, 4, 6))
    with pytest.raises(ValueError, match=r"K has shape \(2, 4, 6\) and V has shape \(2, 3, 6\)"):
        attention_with_bias(Q, Q, np.zeros((2, 3, 6)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 2\) does not broadcast"):
        attention_with_bias(Q, Q, Q, np.zeros((4, 4)), mask=np.ones((2, 2), dtype=bool))
    with pytest.raises(ValueError, match=r"leading axes of Q \(2, 4, 6\) and K \(3, 4, 6\)"):
        attention_with_bias(Q, np.zeros((3, 4, 6)), np.zeros((3, 4, 6)), np.zeros((4, 4)))


def test_unscaled_variants_equal_unscaled_plain_attention():
    rng = np.random.default_rng(6)
    Q, K, V = rng.standard_normal((3, 2, 5, 4))
    ref, _ = scaled_dot_product_attention(Q, K, V, scale=False)
    zero = np.zeros((5, 4))  # k = 2: five zero relative vectors
    np.testing.assert_allclose(shaw_attention(Q, K, V, zero, zero, scale=False)[0], ref, atol=1e-12)
    out, _ = attention_with_bias(Q, K, V, np.zeros((5, 5)), scale=False)
    np.testing.assert_allclose(out, ref, atol=1e-12)
