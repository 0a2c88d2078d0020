"""Chapter 12's checked exercise: the reader writes the total variation between distributions.

``check_total_variation(fn)`` runs property checks of ``fn(p, q) -> (...)`` against the
package's :func:`npformer.interventions.total_variation` and prints one line (see
:mod:`npformer.exercises`).
"""

from __future__ import annotations

import numpy as np

from npformer.exercises import Check, Report, compare, fmt, run_checks
from npformer.interventions import total_variation


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
