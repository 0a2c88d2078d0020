"""Tests of npformer.analysis.direction_ablation: the projection's properties, equality with the
model's forward pass when nothing is removed, that removing a used direction changes the output, and
bad inputs."""

import numpy as np
import pytest

from npformer.analysis.direction_ablation import (
    forward_removing,
    generate_removing,
    orthonormal_basis,
    random_directions,
    remove_directions,
)
from npformer.analysis.probe import (
    class_mean_directions,
    fit_linear_probe,
    probe_accuracy,
    probe_directions,
)
from npformer.core.model import forward, hidden_states, init_params
from npformer.training.tasks import with_separator
from npformer.training.train import TrainConfig, generate, model_logits


def test_projection_properties():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 7, 8))  # (..., d)
    D = rng.normal(size=(3, 8))  # not orthonormal
    c = rng.normal(size=8)
    y = remove_directions(x, D, c)
    Q = orthonormal_basis(D)
    np.testing.assert_allclose(Q @ Q.T, np.eye(3), atol=1e-12)
    # every removed direction now reads the centre's value, for every vector
    np.testing.assert_allclose(y @ Q.T, np.broadcast_to(c @ Q.T, (5, 7, 3)), atol=1e-12)
    np.testing.assert_allclose(remove_directions(y, D, c), y, atol=1e-12)  # idempotent
    # what is orthogonal to the directions is untouched
    perp = x - (x @ Q.T) @ Q
    np.testing.assert_allclose(remove_directions(perp + c, D, c), perp + c, atol=1e-12)
    assert remove_directions(x.astype(np.float32), D).dtype == np.float32


def test_random_directions_are_orthonormal():
    D = random_directions(np.random.default_rng(1), 5, 32)
    np.testing.assert_allclose(D @ D.T, np.eye(5), atol=1e-12)


def model(positions=False, ln="pre"):
    config = TrainConfig(positions=positions, ln=ln, d_model=16, num_heads=2).model_config()
    return init_params(config, np.random.default_rng(0), dtype=np.float64), config


@pytest.mark.parametrize(
    "ln, positions",
    [("pre", True), ("post", True), ("pre", "sinusoidal"), ("pre", "rope"), ("pre", "alibi")],
)
def test_without_directions_equals_the_model(ln, positions):
    params, config = model(positions=positions, ln=ln)
    tokens = np.random.default_rng(2).integers(0, 21, size=(3, 12))
    for layer in (0, 1):  # the model's own forward pass: bit for bit
        np.testing.assert_array_equal(
            forward_removing(params, config, tokens, layer), forward(params, config, tokens)[0]
        )


@pytest.mark.parametrize("positions", [True, "rope", "alibi"])
@pytest.mark.parametrize("ln", ["pre", "post"])
def test_removal_after_block_0_equals_running_block_1_on_the_projected_stream(positions, ln):
    from npformer.core.block import block_forward, layer_norm

    params, config = model(positions=positions, ln=ln)
    tokens = np.random.default_rng(6).integers(0, 21, size=(3, 12))
    D = random_directions(np.random.default_rng(7), 4, 16)
    c = np.random.default_rng(8).normal(size=16)
    x1 = remove_directions(hidden_states(params, config, tokens)[1], D, c)  # (B, T, d)
    x2, _ = block_forward(x1, params, config, 1, None)
    if config.final_ln:
        x2 = layer_norm(x2, params["ln_f.gamma"], params["ln_f.beta"])[0]
    expected = x2 @ params["W_out"] + params["b_out"]
    got = forward_removing(params, config, tokens, 0, D, c)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert np.abs(got - forward(params, config, tokens)[0]).max() > 1e-3


def test_removal_changes_the_next_block_input_exactly_as_asked():
    params, config = model()
    tokens = np.random.default_rng(3).integers(0, 21, size=(4, 12))
    D = random_directions(np.random.default_rng(4), 3, 16)
    # removing after the last block changes the logits exactly by the projected final state
    x = hidden_states(params, config, tokens)[-1]
    from npformer.core.block import layer_norm

    x2 = remove_directions(x, D)
    expected = layer_norm(x2, params["ln_f.gamma"], params["ln_f.beta"])[0] @ params["W_out"]
    got = forward_removing(params, config, tokens, 1, D)
    np.testing.assert_allclose(got, expected + params["b_out"], rtol=1e-10, atol=1e-12)
    assert not np.allclose(got, forward(params, config, tokens)[0])


def test_probe_directions_carry_what_the_probe_reads():
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 4, size=3000)
    X = rng.normal(size=(4, 10))[labels] + 0.3 * rng.normal(size=(3000, 10))
    probe = fit_linear_probe(X[:2000], labels[:2000], 4)
    before = probe_accuracy(probe, X[2000:], labels[2000:])
    assert before > 0.9
    D = probe_directions(probe)
    assert D.shape == (3, 10)
    np.testing.assert_allclose(D @ D.T, np.eye(3), atol=1e-10)
    removed = remove_directions(X, D, X[:2000].mean(0))
    # the probe's class scores, up to a shift common to all classes, no longer depend on x
    scores = (removed - probe.mean) / probe.std @ probe.weights[:-1]  # (N, C)
    centred = scores - scores.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(centred, np.broadcast_to(centred[0], centred.shape), atol=1e-9)
    refit = fit_linear_probe(removed[:2000], labels[:2000], 4)
    # a new probe finds much less (not nothing: one projection is not all linear information)
    assert probe_accuracy(refit, removed[2000:], labels[2000:]) < before - 0.3


def test_class_mean_directions_leave_a_least_squares_probe_nothing():
    rng = np.random.default_rng(7)
    labels = np.tile(np.arange(4), 750)
    # correlated features, so that the covariance tilts a probe's weights
    mix = rng.normal(size=(10, 10))
    X = (0.5 * rng.normal(size=(4, 10))[labels] + rng.normal(size=(3000, 10))) @ mix
    fit, held_out = slice(0, 2000), slice(2000, None)
    before = probe_accuracy(fit_linear_probe(X[fit], labels[fit], 4), X[held_out], labels[held_out])
    assert before > 0.5
    D = class_mean_directions(X[fit], labels[fit], 4)
    assert D.shape == (3, 10)
    np.testing.assert_allclose(D @ D.T, np.eye(3), atol=1e-10)
    center = X[fit].mean(axis=0)
    removed = remove_directions(X, D, center)
    # every class mean moves onto the overall mean, so a refitted probe has nothing to weigh
    means = np.stack([removed[fit][labels[fit] == c].mean(axis=0) for c in range(4)])
    np.testing.assert_allclose(means, np.broadcast_to(center, means.shape), atol=1e-9)
    refit = fit_linear_probe(removed[fit], labels[fit], 4)
    assert np.abs(refit.weights[:-1]).max() < 1e-8
    # the probe's own weight directions are tilted by the covariance: removing them leaves
    # a refitted probe much of what it read
    weights = probe_directions(fit_linear_probe(X[fit], labels[fit], 4))
    by_weights = remove_directions(X, weights, center)
    again = fit_linear_probe(by_weights[fit], labels[fit], 4)
    left = probe_accuracy(again, by_weights[held_out], labels[held_out])
    assert left > 0.4  # chance: 0.25


def test_class_mean_directions_refuse_a_missing_class():
    X = np.random.default_rng(8).normal(size=(6, 3))
    with pytest.raises(ValueError, match="every class"):
        class_mean_directions(X, np.array([0, 1, 0, 1, 0, 1]), 3)


def test_generate_removing_without_directions_is_generate():
    params, config = model()
    start = with_separator(np.random.default_rng(6).integers(0, 20, size=(5, 6)))
    np.testing.assert_array_equal(
        generate_removing(params, config, start, 6, after_block=0),
        generate(model_logits(params, config), start, 6),
    )


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda p, c, t: forward_removing(p, c, t, 0, np.ones((2, 16))), r"\(2, 16\) are dep"),
        (lambda p, c, t: remove_directions(np.ones(3), np.ones((2, 3))), r"\(2, 3\) are dependent"),
    ],
)
def test_bad_inputs(call, match):
    params, config = model()
    with pytest.raises(ValueError, match=match):
        call(params, config, np.zeros((1, 12), dtype=int))
