"""Chapter 10's checker passes the right accuracies and fails each typical mistake on its check."""

import numpy as np

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch10 import CHECKS, check_accuracies


def reference(generated, expected):
    right = generated == expected
    return right.mean(), right.all(axis=1).mean()


def any_instead_of_all(generated, expected):  # an answer counts as right if one token is
    right = generated == expected
    return right.mean(), right.any(axis=1).mean()


def wrong_axis(generated, expected):  # all over the answers instead of over the tokens
    right = generated == expected
    return right.mean(), right.all(axis=0).mean()


def independence(generated, expected):  # per_token ** L: right only if errors are independent
    p = (generated == expected).mean()
    return p, p ** generated.shape[1]


def stub(generated, expected):
    raise NotImplementedError


def test_the_reference_passes_every_check(capsys):
    report = check_accuracies(reference)
    assert report.ok and report.total == len(CHECKS) == 5
    assert capsys.readouterr().out == "passed 5 of 5 checks\n"


def test_the_stub_is_not_attempted(capsys):
    assert not check_accuracies(stub).attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


def test_any_instead_of_all_fails_the_first_example():
    line = check_accuracies(any_instead_of_all, show=False).line
    assert line.startswith("failed check 1 of 5 (two answers of 3 tokens, one token wrong)")
    assert "expected (per_token, per_sequence) = (0.8333, 0.5), got (0.8333, 1)" in line


def test_the_wrong_axis_fails_the_first_example():
    line = check_accuracies(wrong_axis, show=False).line
    assert line.startswith("failed check 1 of 5")
    assert "got (0.8333, 0.6667)" in line


def test_independence_fails_the_first_example():
    line = check_accuracies(independence, show=False).line
    assert line.startswith("failed check 1 of 5")
    assert "got (0.8333, 0.5787)" in line


def test_a_tuple_is_required():
    line = check_accuracies(lambda g, e: np.mean(g == e), show=False).line
    assert line.startswith("failed check 1 of 5") and "expected a pair" in line
