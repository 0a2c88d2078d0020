"""Tests for npformer.analysis.scaling: the softmax Jacobian, entropy, sensitivity and the
measurement."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.analysis.scaling import (
    ScalingStats,
    entropy,
    measure_scaling,
    score_statistics,
    sensitivity,
    softmax_jacobian,
)
from npformer.core.attention import softmax

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=2)  # leading axes
widths = st.integers(1, 9)  # S
seeds = st.integers(0, 2**32 - 1)
temperatures = st.sampled_from([0.1, 1.0, 5.0, 30.0])


def random_weights(lead, S, seed, temperature):
    rng = np.random.default_rng(seed)
    return softmax(rng.normal(size=(*lead, S)) * temperature)  # (..., S)


@given(lead=shapes, S=widths, seed=seeds)
def test_jacobian_matches_central_differences(lead, S, seed):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(*lead, S))  # (..., S)
    J = softmax_jacobian(softmax(s))  # (..., S, S)
    eps = 1e-6
    for j in range(S):
        step = np.zeros(S)
        step[j] = eps
        column = (softmax(s + step) - softmax(s - step)) / (2 * eps)  # (..., S)
        np.testing.assert_allclose(J[..., :, j], column, rtol=0, atol=1e-8)


@given(lead=shapes, S=widths, seed=seeds, temperature=temperatures)
def test_jacobian_is_symmetric_with_zero_row_sums(lead, S, seed, temperature):
    p = random_weights(lead, S, seed, temperature)
    J = softmax_jacobian(p)
    assert J.shape == (*lead, S, S)
    np.testing.assert_array_equal(J, np.swapaxes(J, -1, -2))
    np.testing.assert_allclose(J.sum(axis=-1), 0, atol=1e-15)


@given(lead=shapes, S=widths, seed=seeds, temperature=temperatures)
def test_sensitivity_is_the_trace_and_obeys_its_bounds(lead, S, seed, temperature):
    p = random_weights(lead, S, seed, temperature)
    sens = sensitivity(p)
    assert sens.shape == tuple(lead)
    np.testing.assert_allclose(sens, np.trace(softmax_jacobian(p), axis1=-2, axis2=-1), atol=1e-15)
    np.testing.assert_allclose(sens, 1 - (p**2).sum(axis=-1), atol=1e-14)
    assert np.all(sens >= 0)
    assert np.all(sens <= 1 - 1 / S + 1e-15)
    assert np.all(sens <= 2 * (1 - p.max(axis=-1)) + 1e-15)


@given(lead=shapes, S=widths, seed=seeds, temperature=temperatures)
def test_entropy_lies_between_zero_and_log_S(lead, S, seed, temperature):
    p = random_weights(lead, S, seed, temperature)
    H = entropy(p)
    assert H.shape == tuple(lead)
    assert np.all(H >= 0)
    assert np.all(H <= math.log(S) + 1e-12)


@pytest.mark.parametrize("S", [1, 2, 64])
def test_extremes_uniform_and_one_hot(S):
    uniform, one_hot = np.full(S, 1 / S), np.eye(S)[0]
    np.testing.assert_allclose(entropy(uniform), math.log(S), atol=1e-14)
    np.testing.assert_allclose(sensitivity(uniform), 1 - 1 / S, atol=1e-15)
    assert entropy(one_hot) == 0 and not np.signbit(entropy(one_hot))
    assert sensitivity(one_hot) == 0


def test_entropy_treats_zero_weights_as_zero_terms():
    p = np.array([0.5, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(entropy(p), math.log(2), rtol=1e-15)
    assert np.isfinite(entropy(np.array([1.0, 0.0])))


def test_functions_keep_float32():
    p = np.full((2, 4), 0.25, dtype=np.float32)
    assert softmax_jacobian(p).dtype == np.float32
    assert entropy(p).dtype == np.float32
    assert sensitivity(p).dtype == np.float32


def test_measure_scaling_is_deterministic_and_consistent():
    a = measure_scaling(16, scale=False, seed=3, keys=8, draws=50)
    b = measure_scaling(16, scale=False, seed=3, keys=8, draws=50)
    c = measure_scaling(16, scale=True, seed=3, keys=8, draws=50)
    assert isinstance(a, ScalingStats) and a == b
    assert (a.d_k, a.scale, c.scale) == (16, False, True)
    assert a.score_variance == c.score_variance  # same draws, raw scores
    np.testing.assert_allclose(a.score_sd, 4 * c.score_sd, rtol=1e-12)
    assert 1 / 8 <= c.max_weight <= a.max_weight <= 1
    assert a.sensitivity < c.sensitivity <= 1 - 1 / 8
    assert a.entropy < c.entropy <= math.log(8)


@pytest.mark.parametrize("d_k", [4, 64])
def test_measure_scaling_variance_is_d_k(d_k):
    st_raw = measure_scaling(d_k, scale=False, seed=11, keys=16, draws=200)
    st_scaled = measure_scaling(d_k, scale=True, seed=11, keys=16, draws=200)
    # 51 200 products-sums: the sample variance is within a few percent of d_k
    assert abs(st_raw.score_variance / d_k - 1) < 0.05
    assert abs(st_scaled.score_sd - 1) < 0.03


# the first source's table as printed: Var(q.k), sd of the scores, max weight, entropy,
# sensitivity, from its draws seeded with 100 + d_k
SOURCE_TABLE = {
    (8, False): (7.98, 2.825, 0.4240, 2.0727, 0.7203),
    (8, True): (7.98, 0.999, 0.1063, 3.6936, 0.9596),
    (64, False): (63.99, 8.000, 0.7913, 0.5835, 0.2908),
    (64, True): (63.99, 1.000, 0.1072, 3.6861, 0.9610),
    (512, False): (512.59, 22.641, 0.9303, 0.1760, 0.0998),
    (512, True): (512.59, 1.001, 0.1075, 3.6848, 0.9611),
}


@pytest.mark.parametrize("d_k, scale", SOURCE_TABLE)
def test_measure_scaling_reproduces_the_source_table(d_k, scale):
    st = measure_scaling(d_k, scale=scale, seed=100 + d_k)
    ours = (
        round(st.score_variance, 2),
        round(st.score_sd, 3),
        round(st.max_weight, 4),
        round(st.entropy, 4),
        round(st.sensitivity, 4),
    )
    assert ours == SOURCE_TABLE[d_k, scale]


# ----- bad inputs -----


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d_k": 0}, r"measure_scaling: d_k=0, keys=4 and draws=2 must be >= 1"),
        ({"keys": -1}, r"measure_scaling: d_k=8, keys=-1 and draws=2 must be >= 1"),
        ({"draws": 0}, r"measure_scaling: d_k=8, keys=4 and draws=0 must be >= 1"),
    ],
)
def test_measure_scaling_rejects_bad_sizes(kwargs, match):
    args = {"d_k": 8, "scale": True, "seed": 0, "keys": 4, "draws": 2} | kwargs
    with pytest.raises(ValueError, match=match):
        measure_scaling(**args)


@pytest.mark.parametrize("scale", [False, True])
def test_measure_scaling_is_score_statistics_of_its_draw(scale):
    rng = np.random.default_rng(5)
    Q = rng.normal(size=(30, 8, 6))
    K = rng.normal(size=(30, 8, 6))
    assert measure_scaling(6, scale=scale, seed=5, keys=8, draws=30) == score_statistics(
        Q, K, scale
    )


def test_score_statistics_broadcasts_leading_axes():
    rng = np.random.default_rng(0)
    Q, K = rng.normal(size=(3, 4, 5)), rng.normal(size=(1, 6, 5))
    stats = score_statistics(Q, K, True)
    same = score_statistics(Q, np.broadcast_to(K, (3, 6, 5)), True)
    assert stats == same and stats.d_k == 5


@given(lead=shapes, S=widths, seed=seeds, temperature=temperatures)
def test_softmax_backward_is_the_jacobian_times_dp(lead, S, seed, temperature):
    from npformer.analysis.scaling import softmax_backward

    p = random_weights(lead, S, seed, temperature)
    dp = np.random.default_rng(seed + 1).normal(size=p.shape)
    dz = softmax_backward(p, dp)
    np.testing.assert_allclose(dz, (softmax_jacobian(p) @ dp[..., None])[..., 0], atol=1e-14)
    np.testing.assert_allclose(dz.sum(axis=-1), 0, atol=1e-14)


def test_softmax_backward_rejects_bad_inputs():
    from npformer.analysis.scaling import softmax_backward

    with pytest.raises(ValueError, match=r"softmax_backward: p has shape \(3,\) but dp"):
        softmax_backward(np.ones(3) / 3, np.ones(4))


@pytest.mark.parametrize("score_scale", [1.0, 0.25, 1 / 64])
def test_row_gradients_agree_with_the_attention_core_and_differences(score_scale):
    from npformer.analysis.scaling import row_gradients
    from npformer.core.attention import (
        scaled_dot_product_attention,
        scaled_dot_product_attention_backward,
    )

    rng = np.random.default_rng(5)
    Q, K = rng.normal(size=(2, 2, 5, 4))
    V, d_out = rng.normal(size=(2, 2, 5, 3))
    g = row_gradients(Q, K, V, d_out, score_scale)
    assert g.max_weight.shape == g.dZ_norm.shape == g.dQ_norm.shape == (2, 5)

    def loss(Q_):
        out, _ = scaled_dot_product_attention(score_scale * Q_, K, V, scale=False)
        return float((out * d_out).sum())

    eps = 1e-6
    dQ = np.zeros_like(Q)
    for idx in np.ndindex(Q.shape):
        step = np.zeros_like(Q)
        step[idx] = eps
        dQ[idx] = (loss(Q + step) - loss(Q - step)) / (2 * eps)
    np.testing.assert_allclose(g.dQ_norm, np.linalg.norm(dQ, axis=-1), rtol=1e-6)
    # dZ: the core's dQ is score_scale * dZ K, so ||dZ|| must reproduce it through K
    out, cache = scaled_dot_product_attention(score_scale * Q, K, V, scale=False)
    dQc, _, _ = scaled_dot_product_attention_backward(d_out, cache)
    dP = d_out @ V.swapaxes(-1, -2)
    P = cache.weights
    dZ = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(dQc, dZ @ K, atol=1e-12)
    np.testing.assert_allclose(g.dZ_norm, np.linalg.norm(dZ, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(g.max_weight, P.max(axis=-1), rtol=0)


def test_row_gradients_rejects_bad_inputs():
    from npformer.analysis.scaling import row_gradients

    Q = K = V = np.zeros((4, 3))
    with pytest.raises(ValueError, match=r"d_out has shape \(4, 2\)"):
        row_gradients(Q, K, V, np.zeros((4, 2)), 1.0)


def test_softmax_backward_obeys_the_one_minus_p_max_squared_bound():
    """Chapter 02: ||dz||_1 <= (1 - p_max^2) R, nearly attained; (1 - p_max) R is too tight."""
    from npformer.analysis.scaling import softmax_backward

    rng = np.random.default_rng(29)
    spread = np.exp(rng.uniform(np.log(0.1), np.log(30), size=(20_000, 1)))  # (n, 1)
    p = softmax(rng.normal(size=(20_000, 64)) * spread)  # (n, S)
    dp = rng.normal(size=(20_000, 64))  # (n, S)
    dz_l1 = np.abs(softmax_backward(p, dp)).sum(axis=-1)  # (n,)
    R = np.ptp(dp, axis=-1)  # (n,)
    slack = np.sort(p, axis=-1)[:, :-1].sum(axis=-1)  # (n,) 1 - p_max without cancellation
    bound = slack * (1 + p.max(axis=-1)) * R  # (1 - p_max^2) R
    assert np.all(dz_l1 <= bound * (1 + 1e-12))
    assert (dz_l1 / bound).max() > 0.9  # close to tight
    assert (dz_l1 > slack * R).sum() > 100  # the smaller (1 - p_max) R fails
