"""Chapter 12's checked exercises: the reader writes a logit difference or a total variation.

``check_logit_difference(fn)`` runs property checks of ``fn(logits, target) -> (...)`` against
:func:`npformer.analysis.interventions.logit_difference` (the measure of chapter 12's patching);
``check_total_variation(fn)`` runs property checks of ``fn(p, q) -> (...)`` against the
package's :func:`npformer.analysis.interventions.total_variation`. Each prints one line (see
:mod:`npformer.book.exercises`).
"""

from __future__ import annotations

import numpy as np

from npformer.analysis.interventions import logit_difference, total_variation
from npformer.book.exercises import Check, Report, compare, fmt, run_checks


def _pair(shape, seed):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
    q = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
    return p, q


def _disjoint(fn):
    p, q = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.5, 0.5])
    got = fn(p, q)
    if got is None or not np.isclose(np.asarray(got, dtype=float), 1.0):
        return f"TV({fmt(p)}, {fmt(q)}) should be 1 (disjoint supports), got {fmt(got)}"
    return None


def _equal(fn):
    p = np.array([0.2, 0.3, 0.5])
    got = fn(p, p)
    if got is None or not np.isclose(np.asarray(got, dtype=float), 0.0, atol=1e-12):
        return f"TV(p, p) should be 0 for p = {fmt(p)}, got {fmt(got)}"
    return None


def _known(fn):
    p, q = np.array([0.4, 0.4, 0.1, 0.1]), np.array([0.1, 0.1, 0.4, 0.4])
    return compare(np.float64(0.6), fn(p, q))


def _batched(fn):
    p, q = _pair((2, 3, 5), seed=1)  # two batch axes, 5 outcomes: reduce over the last axis only
    return compare(total_variation(p, q), fn(p, q), rtol=1e-10)


def _symmetric(fn):
    p, q = _pair((4, 7), seed=2)
    a, b = fn(p, q), fn(q, p)
    if a is None or b is None:
        return "the function returned None"
    if not np.allclose(a, b, rtol=1e-12, atol=1e-15):
        return f"TV(p, q) = {fmt(a)} but TV(q, p) = {fmt(b)}"
    return None


CHECKS = [
    Check("disjoint supports give 1", _disjoint),
    Check("equal distributions give 0", _equal),
    Check("a case by hand: 0.6", _known),
    Check("a batch (2, 3, 5) reduces the last axis", _batched),
    Check("TV(p, q) = TV(q, p)", _symmetric),
]


def check_total_variation(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(p, q)``: TV over the last axis, shape (...), in [0, 1]."""
    return run_checks(fn, CHECKS, show=show)


# ----------------------------------------------------------------------------- logit difference


def _ld_by_hand(fn):
    # the target leads: 3 - 1; the target trails: 0.5 - 3 (the best other is the largest logit)
    logits = np.array([[1.0, 3.0, 0.5, -2.0], [1.0, 3.0, 0.5, -2.0]])
    return compare(np.array([2.0, -2.5]), fn(logits, np.array([1, 2])))


def _ld_tie(fn):
    # another token ties with the target: the difference is 0 (the rival is found by its
    # index, not by its value, so the tied token still counts)
    logits = np.array([2.0, 5.0, 5.0, 1.0])
    return compare(np.float64(0.0), fn(logits, np.array(1)))


def _ld_batched(fn):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 3, 7))
    target = rng.integers(0, 7, size=(2, 3))
    return compare(logit_difference(logits, target), fn(logits, target), rtol=1e-10)


def _ld_leaves_input(fn):
    logits = np.random.default_rng(4).normal(size=(5, 6))
    kept = logits.copy()
    fn(logits, np.arange(5))
    if not np.array_equal(logits, kept):
        return "the function changed the logits it was given"
    return None


def _ld_shift(fn):
    # adding one number to every logit of a row changes no difference
    logits = np.random.default_rng(5).normal(size=(4, 6))
    target = np.array([0, 5, 2, 2])
    a, b = fn(logits, target), fn(logits + np.array([[10.0], [-3.0], [0.5], [100.0]]), target)
    if a is None or b is None:
        return "the function returned None"
    return compare(a, b, rtol=1e-9, atol=1e-9)


LOGIT_DIFFERENCE_CHECKS = [
    Check("two rows by hand: 2 and -2.5", _ld_by_hand),
    Check("a tie with the target gives 0", _ld_tie),
    Check("a batch (2, 3, 7) reduces the last axis", _ld_batched),
    Check("the logits are left as they were", _ld_leaves_input),
    Check("a constant added to a row changes nothing", _ld_shift),
]


def check_logit_difference(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(logits, target)``: the target's logit minus the best other.

    Shapes: logits (..., V), target (...) integer; the result has shape (...).
    """
    return run_checks(fn, LOGIT_DIFFERENCE_CHECKS, show=show)
