"""Chapter 05's checker: the reference passes, the stub is not attempted, each typical RoPE
mistake fails at the check that names it."""

import numpy as np
import pytest

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch05 import CHECKS, check_rope
from npformer.core.positions import apply_rope


def _rope(X, sign=1.0, swap=False, half=False, columns=False):
    T, d = X.shape
    i = np.arange(d // 2)
    exponent = (2 * (2 * i) / d) if columns else (2 * i / d)  # the bug: i over the d columns
    theta = sign * np.arange(T)[:, None] * 10000.0 ** (-exponent)  # (T, d/2)
    c, s = np.cos(theta), np.sin(theta)
    if swap:
        c, s = s, c
    a, b = (
        (slice(0, d // 2), slice(d // 2, None)) if half else (slice(0, None, 2), slice(1, None, 2))
    )
    out = np.empty_like(X)
    out[:, a] = X[:, a] * c - X[:, b] * s
    out[:, b] = X[:, a] * s + X[:, b] * c
    return out


def stub(X):
    raise NotImplementedError


def test_reference_and_a_rewrite_pass(capsys):
    assert check_rope(apply_rope).ok
    assert check_rope(_rope).ok
    assert capsys.readouterr().out == f"passed {len(CHECKS)} of {len(CHECKS)} checks\n" * 2


def test_stub_is_not_attempted(capsys):
    report = check_rope(stub)
    assert not report.attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [
        (lambda X: _rope(X, swap=True), "failed check 2 of 6 (leaves position 0 unchanged)"),
        (lambda X: X * 1.1, "failed check 2 of 6 (leaves position 0 unchanged)"),
        (lambda X: _rope(X, sign=-1.0), "failed check 4 of 6 (turns pair 0 at position 1 by +1"),
        (lambda X: _rope(X, half=True), "failed check 5 of 6 (pairs the coordinates (2i, 2i + 1))"),
        (lambda X: _rope(X, columns=True), "failed check 6 of 6 (equals positions.apply_rope"),
        (lambda X: X[:, :-1], "failed check 1 of 6 (returns an array of the shape of X)"),
    ],
    ids=["sin-cos-swapped", "not-a-rotation", "wrong-sign", "half-pairing", "i-over-d", "shape"],
)
def test_typical_mistakes_fail_where_expected(mistake, expected):
    report = check_rope(mistake, show=False)
    assert not report.ok and report.attempted
    assert report.line.startswith(expected), report.line


def test_messages_carry_the_numbers():
    line = check_rope(lambda X: _rope(X, columns=True), show=False).line
    assert "pair i = 1 turns at the wrong rate" in line
    line = check_rope(lambda X: _rope(X, half=True), show=False).line
    assert "leaked into columns [1, 5]" in line
    line = check_rope(lambda X: _rope(X, sign=-1.0), show=False).line
    assert "expected [0.5403, 0.8415], got [ 0.5403, -0.8415]" in line
