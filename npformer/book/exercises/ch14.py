"""The appendix's checked exercise: the reader turns alternating timings into one ratio.

The reader's ``fn(baseline_seconds, candidate_seconds) -> float`` gets the times of a baseline
and a candidate measured in alternating pairs (pair i: one call of each, back to back) and must
return the median over the pairs of baseline time / candidate time, as
``npformer.book.measuring.side_by_side`` does, refusing sequences of unequal length with ValueError.
``check_pair_ratio(fn)`` runs it on made-up timings (a steady machine, one disturbed pair,
drifting load, an even number of pairs) and prints one line (see :mod:`npformer.book.exercises`).
"""

from __future__ import annotations

import numpy as np

from npformer.book.exercises import Check, Report, compare, fmt, run_checks

# A steady machine: the candidate is twice as fast in every pair.
STEADY = ([2.0, 2.0, 2.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0])
# One pair disturbed (the baseline's call was interrupted): pair ratios 2.0 2.1 1.9 8.0 2.14.
DISTURBED = ([2.0, 4.2, 1.9, 16.0, 3.0], [1.0, 2.0, 1.0, 2.0, 1.4])
# Load drifting upwards: both sides slow down together, the pair ratios stay 1.5 and 1.6.
DRIFT = ([1.5, 3.2, 6.0, 12.8, 24.0], [1.0, 2.0, 4.0, 8.0, 16.0])
# An even number of pairs: the median is the mean of the two middle ratios (2.0 and 3.0).
EVEN = ([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0])


def reference(baseline_seconds, candidate_seconds) -> float:
    """Median over pairs of baseline / candidate time."""
    b = np.asarray(baseline_seconds, dtype=float)
    c = np.asarray(candidate_seconds, dtype=float)
    if b.shape != c.shape or b.ndim != 1 or len(b) == 0:
        raise ValueError(
            f"pair_ratio: baseline_seconds {b.shape} and candidate_seconds {c.shape} must be "
            f"two non-empty 1-D sequences of the same length"
        )
    return float(np.median(b / c))


def _value(name: str, times) -> Check:
    def run(fn):
        return compare(reference(*times), fn(list(times[0]), list(times[1])), rtol=1e-9)

    return Check(name, run)


def _refuses_unequal_lengths(fn):
    try:
        got = fn([1.0, 2.0, 3.0], [1.0, 1.0])
    except ValueError:
        return None
    return f"three baseline times and two candidate times gave {fmt(got)} instead of ValueError"


CHECKS = [
    _value("a steady machine, the candidate twice as fast", STEADY),
    _value("one disturbed pair moves nothing", DISTURBED),
    _value("load drifting during the run", DRIFT),
    _value("an even number of pairs", EVEN),
    Check("sequences of unequal length are refused", _refuses_unequal_lengths),
]


def check_pair_ratio(fn, *, show: bool = True) -> Report:
    """Run the checks on the reader's ``fn``; print and return the verdict."""
    return run_checks(fn, CHECKS, show=show)
