"""Chapter 13's checker passes a right causality check and fails typical wrong ones."""

import numpy as np
import pytest

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch13 import CASES, T_CASE, X_CASE, check_causality_check


def reference(attention, X):
    out = attention(X)
    for t in range(1, len(X)):
        edited = X.copy()
        edited[t] += 1.0
        if not np.array_equal(attention(edited)[:t], out[:t]):
            return False
    return True


def stub(attention, X):
    raise NotImplementedError


def test_the_cases_are_what_they_claim():
    for name, attention, causal in CASES:
        assert reference(attention, X_CASE.copy()) == causal, name
        assert attention(X_CASE).shape == X_CASE.shape


def test_reference_passes_and_stub_is_not_attempted():
    assert check_causality_check(reference, show=False).line == "passed 9 of 9 checks"
    assert check_causality_check(stub, show=False).line == NOT_ATTEMPTED


def test_comparing_position_t_too_calls_a_causal_layer_leaking():
    def wrong(attention, X):
        out = attention(X)
        for t in range(len(X)):
            edited = X.copy()
            edited[t] += 1.0
            if not np.array_equal(attention(edited)[: t + 1], out[: t + 1]):
                return False
        return True

    line = check_causality_check(wrong, show=False).line
    assert line.startswith("failed check 1 of 9 (a correct causal layer: causal)")
    assert "said leaking" in line


def test_comparing_the_outputs_after_the_edit_sees_nothing():
    def wrong(attention, X):
        out = attention(X)
        edited = X.copy()
        edited[2] += 1.0
        return bool(np.array_equal(attention(edited)[3:], out[3:]))

    line = check_causality_check(wrong, show=False).line
    assert line.startswith("failed check 1 of 9")


def test_editing_only_the_first_token_cannot_see_a_leak():
    def wrong(attention, X):
        edited = X.copy()
        edited[0] += 1.0
        return bool(np.array_equal(attention(edited)[:0], attention(X)[:0]))

    line = check_causality_check(wrong, show=False).line
    assert line.startswith("failed check 2 of 9 (a layer with no mask: leaks)")
    assert "said causal" in line


@pytest.mark.parametrize("t", range(1, T_CASE))
def test_no_check_that_edits_one_token_passes(t):
    def wrong(attention, X):  # edits token t alone, compares every output before it
        edited = X.copy()
        edited[t] += 1.0
        return bool(np.array_equal(attention(edited)[:t], attention(X)[:t]))

    line = check_causality_check(wrong, show=False).line
    assert line.startswith("failed check") and "(a causal mask with one stray entry" in line, line
    assert "said causal" in line


def test_a_loose_tolerance_misses_a_small_leak():
    def wrong(attention, X):
        out = attention(X)
        for t in range(1, len(X)):
            edited = X.copy()
            edited[t] += 1.0
            if not np.allclose(attention(edited)[:t], out[:t]):  # default rtol 1e-5, atol 1e-8
                return False
        return True

    line = check_causality_check(wrong, show=False).line
    assert line.startswith("failed check 7 of 9 (a mask of -15 instead of -inf")


def test_checking_row_sums_is_not_a_causality_check():
    def wrong(attention, X):  # "rows sum to one" on the output cannot be computed: guess causal
        return bool(np.isfinite(attention(X)).all())

    line = check_causality_check(wrong, show=False).line
    assert line.startswith("failed check 2 of 9")


def test_a_non_boolean_answer_is_reported():
    line = check_causality_check(lambda attention, X: "yes", show=False).line
    assert "must return True or False" in line
