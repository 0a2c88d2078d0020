"""Tests of npformer.analysis.bootstrap: coverage, the binomial second stage, and bad inputs."""

import itertools

import numpy as np
import pytest

from npformer.analysis.bootstrap import (
    difference_interval,
    holm,
    mean_above_test,
    mean_interval,
    percentile_interval,
    resampled_means,
)


def test_second_stage_is_the_binomial_of_redrawn_prompts():
    """Redrawing prompts explicitly gives the same distribution as the binomial shortcut."""
    rng = np.random.default_rng(0)
    correct = rng.random((4, 200)) < np.array([[0.9], [0.7], [0.95], [0.8]])  # (S, n)
    acc = correct.mean(axis=1)
    draws = resampled_means(acc, 200, np.random.default_rng(1), resamples=20000)
    explicit = []
    for _ in range(4000):
        runs = rng.integers(0, 4, size=4)
        explicit.append(np.mean([correct[s, rng.integers(0, 200, 200)].mean() for s in runs]))
    assert abs(draws.mean() - np.mean(explicit)) < 0.003
    assert abs(draws.std() - np.std(explicit)) < 0.1 * np.std(explicit)


def test_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(2)
    truth, hits = 0.9, 0
    for trial in range(200):
        run_means = np.clip(truth + 0.03 * rng.normal(size=10), 0, 1)
        acc = rng.binomial(500, run_means) / 500
        est = mean_interval(acc, 500, seed=trial)
        hits += est.low <= truth <= est.high
    assert 0.85 <= hits / 200 <= 0.99  # percentile intervals undercover a little at S = 10


def test_difference_interval_separates_a_real_gap_and_not_a_null_one():
    rng = np.random.default_rng(3)
    a = rng.binomial(500, 0.95, size=10) / 500
    b = rng.binomial(500, 0.90, size=10) / 500
    c = rng.binomial(500, 0.95, size=10) / 500
    gap = difference_interval(a, b, 500)
    assert gap.low > 0 and gap.estimate == pytest.approx(a.mean() - b.mean())
    null = difference_interval(a, c, 500)
    assert null.low < 0 < null.high


def test_percentile_interval_is_the_quantiles():
    draws = np.arange(1001, dtype=float)
    np.testing.assert_allclose(percentile_interval(draws, 0.9), (50.0, 950.0))


def test_item_interval_agrees_with_the_binomial_version_on_0_1_items():
    from npformer.analysis.bootstrap import item_mean_interval

    rng = np.random.default_rng(4)
    correct = (rng.random((6, 300)) < np.linspace(0.8, 0.95, 6)[:, None]).astype(float)
    a = item_mean_interval(correct, seed=1)
    b = mean_interval(correct.mean(axis=1), 300, seed=1)
    assert a.estimate == pytest.approx(b.estimate)
    assert abs(a.low - b.low) < 0.01 and abs(a.high - b.high) < 0.01
    with pytest.raises(ValueError, match=r"values must have shape \(S, n\) with S >= 2"):
        item_mean_interval(np.ones((1, 5)))


def test_mean_above_test_counts_every_split():
    """The p-value is the share of all splits whose difference of means is at least the one seen."""
    higher, lower = np.array([0.9, 0.8, 0.95, 0.7]), np.array([0.6, 0.85, 0.5])
    pooled, seen = np.concatenate([higher, lower]), higher.mean() - lower.mean()
    at_least = total = 0
    for first in itertools.combinations(range(7), 4):
        rest = [i for i in range(7) if i not in first]
        diff = pooled[list(first)].mean() - pooled[rest].mean()
        at_least += diff >= seen - 1e-12
        total += 1
    result = mean_above_test(higher, lower)
    assert result.statistic == pytest.approx(seen)
    assert result.pvalue == pytest.approx(at_least / total)  # 35 splits, p = 3/35
    assert mean_above_test(lower, higher).pvalue > 0.9  # one-sided: the other direction


def test_holm_adjusts_in_the_order_given():
    # sorted: 0.005 x 4, 0.01 x 3, 0.03 x 2, 0.04 x 1 -> 0.02, 0.03, 0.06, 0.04 raised to 0.06
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])  # capped at 1
    np.testing.assert_allclose(holm([0.02]), [0.02])  # one test: unchanged
