"""Tests of npformer.training.seq2seq: the reversal task, a short training run, the exposure-bias
counts."""

import numpy as np
import pytest

from npformer.training.seq2seq import (
    START,
    Seq2SeqRun,
    exposure_bias,
    reversal_batch,
    train_reversal,
)


def test_reversal_batch_layout():
    batch = reversal_batch(np.random.default_rng(0), 4, 5, 6)
    assert batch.src.min() >= 1 and batch.src.max() <= 6
    np.testing.assert_array_equal(batch.tgt_out, batch.src[:, ::-1])
    assert np.all(batch.tgt_in[:, 0] == START)
    np.testing.assert_array_equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])


def test_training_learns_and_the_counts_are_consistent():
    run = Seq2SeqRun(length=6, num_symbols=6, steps=150, warmup=30, seed=1)
    result = train_reversal(run)
    assert result.losses[-10:].mean() < 0.5 * result.losses[:10].mean()
    assert np.argmax(result.rates) == run.warmup - 1  # the schedule peaks at the warm-up step
    src = np.random.default_rng(5).integers(1, 7, (200, 6))
    e = exposure_bias(result.params, result.config, src, plant_at=2)
    assert e.teacher_forced.shape == e.free_running.shape == (6,)
    assert e.teacher_forced[0] == e.free_running[0]  # position 0 reads only the start token
    assert e.teacher_forced.mean() > 3 / 6  # far above chance (1/6)
    assert 0 <= e.sequence_free_running <= e.free_running.min()
    assert np.isnan(e.after_first_error[0]) and np.isnan(e.forced_after_first_error[0])
    defined = ~np.isnan(e.after_first_error)
    assert np.array_equal(defined, ~np.isnan(e.forced_after_first_error))
    # the sources behind each after-first-error accuracy: none at t = 0, never fewer later
    assert np.array_equal(defined, e.after_counts > 0) and e.after_counts[0] == 0
    assert np.all(np.diff(e.after_counts) >= 0) and e.after_counts[-1] <= len(src)
    assert np.all(
        (0 <= e.forced_after_first_error[defined]) & (e.forced_after_first_error[defined] <= 1)
    )


def test_bad_arguments():
    run = Seq2SeqRun(length=4, num_symbols=4, steps=1)
    result = train_reversal(run)
    src = np.ones((3, 4), dtype=int)
    with pytest.raises(ValueError, match="plant_at must lie"):
        exposure_bias(result.params, result.config, src, plant_at=3)


def test_without_the_ramp_the_rate_starts_at_its_peak():
    run = Seq2SeqRun(length=4, num_symbols=4, steps=12, warmup=5, ramp=False)
    rates = train_reversal(run).rates
    assert np.all(rates[:5] == rates[4]) and rates[5] < rates[4]
    ramped = train_reversal(Seq2SeqRun(length=4, num_symbols=4, steps=12, warmup=5)).rates
    np.testing.assert_array_equal(rates[4:], ramped[4:])  # the same decay after the warm-up
    assert np.isclose(ramped[0], rates[0] / 5)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("steps", 0, "every size, steps and warmup must be >= 1"),
        ("length", 0, "every size, steps and warmup must be >= 1"),
        ("smoothing", 1.0, "smoothing must lie in"),
        ("factor", 0.0, "factor be > 0"),
        ("moment_warmup", -1, "moment_warmup >= 0"),
    ],
)
def test_run_rejects_bad_fields(field, value, message):
    with pytest.raises(ValueError, match=message):
        Seq2SeqRun(**{field: value})


def test_moment_warmup_keeps_weights_and_batches():
    plain = Seq2SeqRun(length=4, num_symbols=4, steps=2, warmup=2, seed=3)
    warmed = Seq2SeqRun(length=4, num_symbols=4, steps=2, warmup=2, seed=3, moment_warmup=5)
    a, b = train_reversal(plain), train_reversal(warmed)
    assert a.losses[0] == b.losses[0]  # same initial weights, same first batch
    np.testing.assert_array_equal(a.rates, b.rates)
    assert not np.array_equal(a.params["tok_emb"], b.params["tok_emb"])  # other moments
    v_only = Seq2SeqRun(
        length=4, num_symbols=4, steps=2, warmup=2, seed=3, moment_warmup=5, fill_momentum=False
    )
    c = train_reversal(v_only)
    assert c.losses[0] == a.losses[0]  # same initial weights, same first batch
    for other in (a, b):  # v filled without m: neither plain Adam nor both moments filled
        assert not np.array_equal(c.params["tok_emb"], other.params["tok_emb"])
