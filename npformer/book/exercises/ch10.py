"""Checker for chapter 10's exercise: the reader writes the two accuracies of true generation.

``check_accuracies(fn)`` expects ``fn(generated, expected)``, two (n, L) integer arrays (n
answers of L tokens), to return ``(per_token, per_sequence)``: the share of answer tokens that
are right, and the share of answers right in full. Its checks are chosen so that each typical
mistake fails one of them with a readable case: ``any`` instead of ``all`` (an answer counted
right when one token is), the sequence axis confused with the token axis (``all(axis=0)``),
and the independence shortcut per_token ** L for the per-sequence accuracy. Tested in
``tests/test_exercises_ch10.py``.
"""

from __future__ import annotations

import numpy as np

from npformer.book.exercises import Check, QuietReport, Report, compare, fmt, run_checks


def reference(generated, expected):
    """The package's definition (``npformer.training.train.evaluate``): (per token, per
    sequence)."""
    right = np.asarray(generated) == np.asarray(expected)  # (n, L)
    return float(right.mean()), float(right.all(axis=1).mean())


def _pair(fn, generated, expected):
    got = fn(np.array(generated), np.array(expected))
    if got is None:
        return None, "the function returned None"
    try:
        tok, seq = got
        return (float(tok), float(seq)), None
    except (TypeError, ValueError):
        return None, f"expected a pair (per_token, per_sequence), got {fmt(np.asarray(got))}"


def _matches(generated, expected):
    def run(fn):
        got, problem = _pair(fn, generated, expected)
        if problem:
            return problem
        want = reference(generated, expected)
        if compare(np.array(want), np.array(got), rtol=1e-12, atol=1e-12) is not None:
            return (
                f"for generated {fmt(np.array(generated))} against expected "
                f"{fmt(np.array(expected))}: expected (per_token, per_sequence) = "
                f"({fmt(want[0])}, {fmt(want[1])}), got ({fmt(got[0])}, {fmt(got[1])})"
            )
        return None

    return run


def _identity(fn):
    """1 - per_sequence = L (1 - per_token) / e_bar on clustered errors (n = 40, L = 5)."""
    rng = np.random.default_rng(10)
    expected = rng.integers(0, 20, size=(40, 5))
    generated = expected.copy()
    failed = rng.random(40) < 0.3
    starts = rng.integers(0, 5, size=40)
    for i in np.flatnonzero(failed):
        generated[i, starts[i] :] = (generated[i, starts[i] :] + 1) % 20  # a tail goes wrong
    got, problem = _pair(fn, generated, expected)
    if problem:
        return problem
    wrong = generated != expected
    e_bar = wrong.sum() / wrong.any(axis=1).sum()
    lhs, rhs = 1 - got[1], 5 * (1 - got[0]) / e_bar
    if not np.isclose(lhs, rhs, rtol=1e-9, atol=1e-12):
        return (
            f"on 40 answers with clustered errors (e_bar = {fmt(e_bar)} wrong tokens per failed "
            f"answer): 1 - per_sequence = {fmt(lhs)} but L (1 - per_token) / e_bar = {fmt(rhs)}"
        )
    return None


CHECKS = [
    Check(
        "two answers of 3 tokens, one token wrong",
        _matches([[1, 2, 3], [1, 2, 4]], [[1, 2, 3], [1, 2, 3]]),
    ),
    Check(
        "four answers of 2 tokens (n > L)",
        _matches([[0, 1], [0, 5], [7, 1], [3, 4]], [[0, 1], [0, 1], [0, 1], [3, 4]]),
    ),
    Check("every answer right", _matches([[4, 5, 6, 7]] * 3, [[4, 5, 6, 7]] * 3)),
    Check(
        "one answer of 4 tokens, first and last wrong",
        _matches([[9, 2, 3, 9]], [[1, 2, 3, 4]]),
    ),
    Check("the identity with the wrong tokens per failed answer", _identity),
]


def check_accuracies(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(generated, expected) -> (per_token, per_sequence)``."""
    return QuietReport(*run_checks(fn, CHECKS, show=show))
