"""Tests of npformer.training.extrapolation: the task's batches, the untrained rows of the learned
table, accuracy by position, the runner, and bad inputs."""

import numpy as np
import pytest

from npformer.core.model import init_params
from npformer.training.extrapolation import (
    CHANCE,
    EXPERIMENT,
    ExtrapolationConfig,
    accuracy_by_position,
    fine_tune,
    in_range_accuracy,
    k_back_batch,
    past_training_accuracy,
    run_configs,
    run_one,
    train_k_back,
)
from npformer.training.tasks import ALPHABET_SIZE


def test_k_back_batch_targets_are_the_symbol_k_back():
    tokens, targets, loss_mask = k_back_batch(np.random.default_rng(0), 5, 9, 3)
    assert tokens.shape == targets.shape == loss_mask.shape == (5, 9)
    np.testing.assert_array_equal(targets[:, 3:], tokens[:, :-3])
    np.testing.assert_array_equal(loss_mask, np.repeat([[0, 0, 0] + [1] * 6], 5, axis=0))
    assert tokens.min() >= 0 and tokens.max() < ALPHABET_SIZE
    assert CHANCE == 1 / ALPHABET_SIZE


def test_untrained_rows_of_the_learned_table_keep_their_initial_values():
    config = ExtrapolationConfig(positions="learned", steps=3, train_length=6, longest=24)
    params, losses = train_k_back(config)
    start = init_params(config.model_config(), np.random.default_rng(config.seed), dtype=np.float32)
    np.testing.assert_array_equal(params["pos_emb"][6:], start["pos_emb"][6:])
    assert np.abs(params["pos_emb"][:6] - start["pos_emb"][:6]).max() > 0
    assert losses.shape == (3,) and np.all(np.isfinite(losses))


@pytest.mark.parametrize("scheme", ["learned", "sinusoidal", "rope", "alibi", "none"])
def test_every_scheme_runs_at_every_length(scheme):
    config = ExtrapolationConfig(positions=scheme, steps=2, train_length=16, longest=64)
    result = run_one(config, keep=True)
    assert set(result.accuracy) == {16 * f for f in EXPERIMENT["length_factors"]} == {16, 32, 64}
    for L, acc in result.accuracy.items():
        assert acc.shape == (L,) and np.all(np.isnan(acc[:2])) and np.all(acc[2:] >= 0)
    assert 0 <= in_range_accuracy(result) <= 1
    assert 0 <= past_training_accuracy(result, 64) <= 1


def test_accuracy_by_position_of_a_perfect_and_of_a_copying_model(monkeypatch):
    config = ExtrapolationConfig(steps=1, train_length=8, longest=16, offset=2)
    params = init_params(config.model_config(), np.random.default_rng(0))

    def fake_forward(params, model_config, tokens, attn_mask=None, shift=2):
        onehot = np.eye(ALPHABET_SIZE)[np.roll(tokens, shift, axis=1)]  # (n, T, V)
        return onehot, None

    import npformer.training.extrapolation as ex

    monkeypatch.setattr(ex, "forward", fake_forward)
    acc = accuracy_by_position(params, config, 16, n=300)
    np.testing.assert_array_equal(acc[2:], 1.0)
    monkeypatch.setattr(ex, "forward", lambda p, c, t, a=None: fake_forward(p, c, t, shift=0))
    acc = accuracy_by_position(params, config, 16, n=4000)
    assert abs(np.nanmean(acc) - CHANCE) < 0.01  # its own symbol: right by chance only


def test_a_short_training_learns_the_task_with_rope():
    config = ExtrapolationConfig(positions="rope", steps=150, train_length=8, longest=16, offset=1)
    result = run_one(config)
    assert in_range_accuracy(result) > 0.5  # ten times chance


def test_run_configs_keeps_the_order_and_matches_a_single_run():
    configs = [ExtrapolationConfig(positions=s, steps=5) for s in ("alibi", "learned")]
    results = run_configs(configs, workers=1)
    assert [r.config.positions for r in results] == ["alibi", "learned"]
    alone = run_one(configs[1])
    np.testing.assert_array_equal(alone.losses, results[1].losses)


def test_bad_inputs_are_refused():
    config = ExtrapolationConfig(steps=1)
    result = run_one(config)
    with pytest.raises(ValueError, match="length=16 must be an evaluated length above n=16"):
        past_training_accuracy(result, 16)


def test_interpolation_is_the_decoder_with_its_rope_positions_squeezed():
    import dataclasses

    from npformer.core.model import forward
    from npformer.training.extrapolation import k_back_batch

    config = ExtrapolationConfig(positions="rope", steps=2, train_length=8, longest=16)
    result = run_one(config, keep=True)
    assert set(result.interpolated) == {16}
    same = accuracy_by_position(result.params, config, 8, interpolate=True)  # n / n = 1
    np.testing.assert_array_equal(same, result.accuracy[8])
    tokens, _, _ = k_back_batch(np.random.default_rng(12345), 512, 16, config.offset)
    squeezed = dataclasses.replace(config.model_config(), rope_scale=8 / 16)
    right = forward(result.params, squeezed, tokens)[0].argmax(-1)[:, 2:] == tokens[:, :-2]
    np.testing.assert_array_equal(result.interpolated[16][2:], right.mean(axis=0))
    assert not np.array_equal(result.interpolated[16], result.accuracy[16])
    assert run_one(ExtrapolationConfig(positions="alibi", steps=1)).interpolated is None


def test_a_window_as_long_as_the_sequence_changes_nothing_and_a_short_one_does():
    config = ExtrapolationConfig(positions="rope", steps=30, train_length=8, longest=16)
    result = run_one(config, keep=True)
    assert set(result.windowed) == {16}
    full = accuracy_by_position(result.params, config, 16, window=16)
    np.testing.assert_array_equal(full, result.accuracy[16])
    one_key = accuracy_by_position(result.params, config, 16, window=1)  # only itself: chance
    assert abs(np.nanmean(one_key) - CHANCE) < 0.03


def test_visible_distances_equal_the_window_they_describe_and_read_offset_rescores():
    config = ExtrapolationConfig(positions="rope", steps=30, train_length=8, longest=32)
    result = run_one(config, keep=True)
    assert set(result.near_far) == {32} and set(result.interpolated_read) == {16, 32}
    window = accuracy_by_position(result.params, config, 16, window=5)
    listed = accuracy_by_position(result.params, config, 16, distances=np.arange(5))
    np.testing.assert_array_equal(window, listed)
    listed = [0, 1, 2, 3, 24, 25, 26, 27]  # 4n = 32: the last n/2 keys and n/2 from 3n back
    near_far = accuracy_by_position(result.params, config, 32, distances=listed)
    np.testing.assert_array_equal(near_far, result.near_far[32])
    # read_offset = k gives the task's own accuracy; another offset scores other tokens
    np.testing.assert_array_equal(
        accuracy_by_position(result.params, config, 16, read_offset=2), result.accuracy[16]
    )
    shifted = accuracy_by_position(result.params, config, 16, read_offset=5)
    assert np.isnan(shifted[:5]).all() and not np.isnan(shifted[5:]).any()
    interpolated = accuracy_by_position(result.params, config, 16, interpolate=True, read_offset=4)
    np.testing.assert_array_equal(interpolated, result.interpolated_read[16])


def test_fine_tune_trains_a_copy_and_interpolation_changes_the_positions_it_trains_on():
    config = ExtrapolationConfig(positions="rope", steps=3, train_length=6, longest=24)
    params, _ = train_k_back(config)
    before = {name: value.copy() for name, value in params.items()}
    tuned, losses = fine_tune(params, config, 12, 4, interpolate=False)
    squeezed, _ = fine_tune(params, config, 12, 4, interpolate=True)
    for name in params:  # the given weights are left alone
        np.testing.assert_array_equal(params[name], before[name])
    assert losses.shape == (4,) and np.all(np.isfinite(losses))
    assert max(np.abs(tuned[n] - params[n]).max() for n in params) > 0
    assert max(np.abs(tuned[n] - squeezed[n]).max() for n in params) > 0
    again, _ = fine_tune(params, config, 12, 4, interpolate=False)
    for name in params:  # same seed, same batches: the same weights
        np.testing.assert_array_equal(again[name], tuned[name])


def test_fine_tune_refuses_interpolation_without_rope_and_bad_lengths():
    config = ExtrapolationConfig(positions="alibi", steps=2, train_length=6, longest=24)
    params, _ = train_k_back(config)
    with pytest.raises(ValueError, match="interpolate"):
        fine_tune(params, config, 12, 2, interpolate=True)
