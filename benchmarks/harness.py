"""Side-by-side comparisons for `make bench`.

Each ``benchmarks/bench_<topic>.py`` defines ``run(report)`` and calls
``report(name, value, target)`` once per comparison, where ``value`` is a ratio with the
baseline in the numerator (higher is better) and ``target`` the minimum it must reach.
Timings alternate A and B in one process and take the median of the per-pair ratios, so that
machine load that drifts during the run hits both sides alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def best_time(fn: Callable[[], object], repeats: int = 3) -> float:
    """Minimum wall time of ``fn()`` over ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def median_time_ratio(
    baseline: Callable[[], object],
    candidate: Callable[[], object],
    pairs: int = 7,
    warmup: int = 1,
) -> tuple[float, float, float]:
    """Alternate baseline and candidate ``pairs`` times; return (median ratio, t_base, t_cand).

    The ratio is baseline time / candidate time for each adjacent pair; the times returned are
    the medians of each side, for printing.
    """
    for _ in range(warmup):
        baseline()
        candidate()
    ratios, t_base, t_cand = [], [], []
    for i in range(pairs):
        # Alternate which side goes first, so neither always runs on a warmer cache.
        order = (baseline, candidate) if i % 2 == 0 else (candidate, baseline)
        times = {}
        for fn in order:
            start = time.perf_counter()
            fn()
            times[fn] = time.perf_counter() - start
        t_base.append(times[baseline])
        t_cand.append(times[candidate])
        ratios.append(times[baseline] / times[candidate])
    return statistics.median(ratios), statistics.median(t_base), statistics.median(t_cand)
