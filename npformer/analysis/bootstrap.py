"""Percentile bootstrap intervals for accuracies measured over several training runs.

Taught in chapter 10 (``chapters/10_experiment.ipynb``); chapter 11 uses it for the ablations.

An accuracy measured over seeds has two sources of scatter: the training run (the seed, and the
machine's floating-point kernels) and the finite set of held-out prompts. The two-stage
bootstrap redraws both: draw S runs with replacement from the S runs, then for each drawn run
redraw its n prompts with replacement, and take the mean accuracy. For a 0/1 outcome the second
stage is exactly a binomial draw, Binomial(n, a_s) / n, so no prompt indices are needed. The
percentile interval at level 1 - alpha is the alpha/2 and 1 - alpha/2 quantiles of the
redrawn means (Efron and Tibshirani 1993).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Interval(NamedTuple):
    """A point estimate and its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float


def resampled_means(accuracies, n: int, rng: np.random.Generator, resamples: int = 2000):
    """Two-stage bootstrap draws of the mean accuracy over runs: (resamples,) float64.

    ``accuracies`` (S,) array: each run's accuracy on its n held-out items (0/1 outcomes).
    """
    S = accuracies.size
    runs = rng.integers(0, S, size=(resamples, S))  # (R, S) runs drawn
    items = rng.binomial(n, accuracies[runs]) / n  # (R, S) prompts redrawn within each run
    return items.mean(axis=1)  # (R,)


def percentile_interval(draws, level: float = 0.95) -> tuple[float, float]:
    """The (1 - level)/2 and (1 + level)/2 quantiles of the bootstrap ``draws``."""
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def mean_interval(
    accuracies, n: int, seed: int = 0, resamples: int = 2000, level: float = 0.95
) -> Interval:
    """The mean accuracy over runs and its two-stage percentile bootstrap interval."""
    a = np.asarray(accuracies, dtype=float)
    draws = resampled_means(a, n, np.random.default_rng(seed), resamples)
    return Interval(float(a.mean()), *percentile_interval(draws, level))


def difference_interval(
    first, second, n: int, seed: int = 0, resamples: int = 2000, level: float = 0.95
) -> Interval:
    """mean(first) - mean(second) and its interval; the two groups are redrawn independently."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    rng = np.random.default_rng(seed)
    draws = resampled_means(a, n, rng, resamples) - resampled_means(b, n, rng, resamples)
    return Interval(float(a.mean() - b.mean()), *percentile_interval(draws, level))


def item_mean_interval(
    values, seed: int = 0, resamples: int = 2000, level: float = 0.95
) -> Interval:
    """The mean of per-item scores over runs, with its two-stage percentile interval.

    ``values`` (S, n): the score of each of n held-out items (in [0, 1], e.g. the share of an
    answer's tokens that are right) in each of S runs. Each resample draws S runs with
    replacement, then n items with replacement within each drawn run.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or v.shape[0] < 2:  # one run would give an interval of width zero
        raise ValueError(
            f"item_mean_interval: values must have shape (S, n) with S >= 2 runs, got {v.shape}"
        )
    rng = np.random.default_rng(seed)
    S, n = v.shape
    draws = np.empty(resamples)
    for start in range(0, resamples, 250):
        stop = min(resamples, start + 250)
        runs = rng.integers(0, S, size=(stop - start, S, 1))  # (R, S, 1)
        items = rng.integers(0, n, size=(stop - start, S, n))  # (R, S, n)
        draws[start:stop] = v[runs, items].mean(axis=(1, 2))
    return Interval(float(v.mean()), *percentile_interval(draws, level))


def mean_above_test(higher, lower):
    """Exact one-sided permutation test that the mean of ``higher`` exceeds that of ``lower``.

    Every split of the pooled values into two groups of the given sizes is enumerated (SciPy's
    ``permutation_test`` with ``n_resamples=inf``), so the p-value is exact: the share of splits
    whose difference of means is at least the observed one. Returns SciPy's result:
    ``statistic`` (mean of ``higher`` minus mean of ``lower``) and ``pvalue``. Used by chapter 10
    and its going-deeper page on the per-run accuracies of two lengths.
    """
    from scipy import stats  # the book's extra; the core package does not need it

    return stats.permutation_test(
        (np.asarray(higher, dtype=float), np.asarray(lower, dtype=float)),
        lambda a, b, axis: a.mean(axis=axis) - b.mean(axis=axis),
        permutation_type="independent",
        alternative="greater",
        n_resamples=np.inf,  # every split: exact
        vectorized=True,
    )


def holm(pvalues) -> np.ndarray:
    """Holm's step-down correction of m p-values (Holm 1979), returned in their own order.

    The k-th smallest p (k from 1) is multiplied by m - k + 1; in that order each product is
    raised to the largest before it, and capped at 1. Rejecting every hypothesis whose adjusted
    p is below alpha keeps the chance of any false rejection at most alpha, however the tests
    depend on one another. Used by chapter 07's and chapter 11's going-deeper pages.
    """
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1)), 1)
    return adjusted
