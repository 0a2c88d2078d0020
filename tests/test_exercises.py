"""The exercise-checker framework: its three verdicts, and that it cannot crash on a reader's bug.

Each chapter's checkers are tested against the reference and typical mistakes in
``tests/test_exercises_chNN.py``.
"""

import numpy as np
import pytest

from npformer.book.exercises import NOT_ATTEMPTED, Check, compare, fmt, run_checks

CHECKS = [
    Check("doubles a vector", lambda fn: compare(np.array([2.0, 4.0]), fn(np.array([1.0, 2.0])))),
    Check("keeps the shape", lambda fn: compare(np.zeros((2, 3)), fn(np.zeros((2, 3))))),
]


def stub(x):
    raise NotImplementedError


def test_stub_is_not_attempted(capsys):
    report = run_checks(stub, CHECKS)
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"
    assert not report.attempted and not report.ok


def test_right_answer_passes(capsys):
    report = run_checks(lambda x: 2 * x, CHECKS)
    assert capsys.readouterr().out == "passed 2 of 2 checks\n"
    assert report.ok and report.passed == 2


def test_wrong_value_names_the_case():
    report = run_checks(lambda x: 3 * x, CHECKS, show=False)
    assert report.line.startswith("failed check 1 of 2 (doubles a vector): expected [2., 4.]")
    assert "got [3., 6.]" in report.line


def test_wrong_shape_and_exceptions_are_reported():
    assert (
        "expected shape (2, 3), got shape (6,)"
        in run_checks(lambda x: 2 * x.ravel(), CHECKS, show=False).line
    )
    line = run_checks(lambda x: x[5], CHECKS, show=False).line
    assert line.startswith("failed check 1 of 2 (doubles a vector): raised IndexError")
    assert "returned None" in run_checks(lambda x: None, CHECKS, show=False).line


def test_fmt_is_short_and_stable():
    assert fmt(np.float64(1 / 3)) == "0.3333"
    assert fmt(np.array([1, 2])) == "[1, 2]"


def test_run_checks_refuses_a_non_function():
    with pytest.raises(ValueError, match="fn must be a function"):
        run_checks(3, CHECKS)
