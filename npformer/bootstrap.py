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

from npformer.validation import float_array, int_at_least, number_array


def _scores(fn: str, name: str, x) -> np.ndarray:
    """0/1 or fractional scores as float64: numbers or bools, nothing else."""
    arr = np.asarray(x)
    return (arr if arr.dtype == np.bool_ else number_array(fn, name, arr)).astype(float)


class Interval(NamedTuple):
    """A point estimate and its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float


def _check_accuracies(fn: str, name: str, accuracies) -> np.ndarray:
    a = float_array(fn, name, _scores(fn, name, accuracies))
    if a.ndim != 1 or a.size < 2:
        raise ValueError(f"{fn}: {name} must be a 1-d array of >= 2 runs, got shape {a.shape}")
    if (a < 0).any() or (a > 1).any():
        raise ValueError(f"{fn}: {name} must lie in [0, 1], got values in [{a.min()}, {a.max()}]")
    return a


def _check_common(fn: str, n, resamples, level):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{fn}: n must be a positive integer (prompts per run), got {n!r}")
    ok = not isinstance(resamples, bool) and isinstance(resamples, (int, np.integer))
    if not ok or resamples < 1000:
        raise ValueError(f"{fn}: resamples must be an integer >= 1000, got {resamples!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"{fn}: level must be a float in (0, 1), got {level!r}")


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
    _check_common("mean_interval", n, resamples, level)
    a = _check_accuracies("mean_interval", "accuracies", accuracies)
    seed = int_at_least("mean_interval", "seed", seed, minimum=0)
    draws = resampled_means(a, n, np.random.default_rng(seed), resamples)
    return Interval(float(a.mean()), *percentile_interval(draws, level))


def difference_interval(
    first, second, n: int, seed: int = 0, resamples: int = 2000, level: float = 0.95
) -> Interval:
    """mean(first) - mean(second) and its interval; the two groups are redrawn independently."""
    fn = "difference_interval"
    _check_common(fn, n, resamples, level)
    a = _check_accuracies(fn, "first", first)
    b = _check_accuracies(fn, "second", second)
    rng = np.random.default_rng(int_at_least(fn, "seed", seed, minimum=0))
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
    fn = "item_mean_interval"
    v = float_array(fn, "values", _scores(fn, "values", values), min_rank=2)
    if v.ndim != 2 or v.shape[0] < 2 or v.shape[1] < 1:
        raise ValueError(f"{fn}: values must have shape (S, n) with S >= 2 runs, got {v.shape}")
    _check_common(fn, v.shape[1], resamples, level)
    rng = np.random.default_rng(int_at_least(fn, "seed", seed, minimum=0))
    S, n = v.shape
    draws = np.empty(resamples)
    for start in range(0, resamples, 250):
        stop = min(resamples, start + 250)
        runs = rng.integers(0, S, size=(stop - start, S, 1))  # (R, S, 1)
        items = rng.integers(0, n, size=(stop - start, S, n))  # (R, S, n)
        draws[start:stop] = v[runs, items].mean(axis=(1, 2))
    return Interval(float(v.mean()), *percentile_interval(draws, level))
