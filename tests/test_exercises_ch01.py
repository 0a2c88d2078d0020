"""Chapter 01's checker passes a right softmax and fails each typical mistake on its check."""

import numpy as np

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch01 import CHECKS, check_row_softmax


def reference(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def wrong_axis(z):  # normalizes over the first axis: columns sum to one
    e = np.exp(z - z.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def no_max_subtraction(z):  # exp(1000) overflows to inf, inf / inf = nan
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def divided_by_max(z):  # the largest weight is 1 and the row does not sum to one
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.max(axis=-1, keepdims=True)


def global_max(z):  # one max for the whole array: the far row underflows to 0 / 0
    e = np.exp(z - z.max())
    return e / e.sum(axis=-1, keepdims=True)


def stub(z):
    raise NotImplementedError


def test_the_reference_passes_every_check(capsys):
    report = check_row_softmax(reference)
    assert report.ok and report.total == len(CHECKS) == 6
    assert capsys.readouterr().out == "passed 6 of 6 checks\n"


def test_the_stub_is_not_attempted(capsys):
    report = check_row_softmax(stub)
    assert not report.attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


def test_the_wrong_axis_fails_the_row_sums():
    line = check_row_softmax(wrong_axis, show=False).line
    assert line.startswith("failed check 2 of 6 (every row of a (3, 4) array sums to one)")
    assert "the rows sum to" in line


def test_no_max_subtraction_fails_on_large_scores():
    line = check_row_softmax(no_max_subtraction, show=False).line
    assert line.startswith("failed check 4 of 6 (large scores, [1000, 999, 998]: no overflow)")
    assert "non-finite" in line and "nan" in line


def test_dividing_by_the_max_fails_the_first_row():
    line = check_row_softmax(divided_by_max, show=False).line
    assert line.startswith("failed check 1 of 6 (one row, [2, 1, 0]): expected [0.6652, 0.2447")
    assert "got [1.    , 0.3679, 0.1353]" in line


def test_one_global_max_fails_on_rows_far_apart():
    line = check_row_softmax(global_max, show=False).line
    assert line.startswith("failed check 6 of 6 (two rows far apart")
    assert "non-finite" in line


def test_a_softmax_that_edits_its_input_is_still_judged_on_copies():
    def in_place(z):
        z -= z.max(axis=-1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=-1, keepdims=True)
        return z

    assert check_row_softmax(in_place, show=False).ok
