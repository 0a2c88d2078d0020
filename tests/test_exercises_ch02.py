"""Chapter 02's checker passes the reference and catches typical mistakes of a softmax backward."""

import pytest

from npformer.analysis.scaling import softmax_backward, softmax_jacobian
from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch02 import check_softmax_backward


def through_the_jacobian(p, dp):
    return (softmax_jacobian(p) @ dp[..., None])[..., 0]


def no_row_sum_term(p, dp):
    return p * dp


def sums_over_everything(p, dp):
    return p * (dp - (p * dp).sum())


def forgets_the_factor_p(p, dp):
    return dp - (p * dp).sum(axis=-1, keepdims=True)


def wrong_sign(p, dp):
    return p * ((p * dp).sum(axis=-1, keepdims=True) - dp)


def stub(p, dp):
    raise NotImplementedError


def test_reference_and_the_full_jacobian_pass(capsys):
    assert check_softmax_backward(softmax_backward).ok
    assert check_softmax_backward(through_the_jacobian).ok
    assert capsys.readouterr().out == "passed 5 of 5 checks\npassed 5 of 5 checks\n"


def test_stub_is_not_attempted(capsys):
    assert not check_softmax_backward(stub).attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


@pytest.mark.parametrize(
    ("mistake", "failing"),
    [
        (no_row_sum_term, "failed check 1 of 5 (one row of 4 weights)"),
        (sums_over_everything, "failed check 2 of 5 (rows of dz sum to zero)"),
        (forgets_the_factor_p, "failed check 1 of 5 (one row of 4 weights)"),
        (wrong_sign, "failed check 1 of 5 (one row of 4 weights)"),
    ],
)
def test_typical_mistakes_fail(mistake, failing):
    report = check_softmax_backward(mistake, show=False)
    assert not report.ok
    assert report.line.startswith(failing), report.line


def test_summing_over_the_wrong_axis_is_caught():
    def over_the_first_axis(p, dp):
        return p * (dp - (p * dp).sum(axis=0, keepdims=True))

    line = check_softmax_backward(over_the_first_axis, show=False).line
    # right on one row (axis 0 is the last axis there), wrong on a stack of rows
    assert line.startswith("failed check 2 of 5 (rows of dz sum to zero)"), line
