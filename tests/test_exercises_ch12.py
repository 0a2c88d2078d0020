"""Chapter 12's checker passes the reference and fails typical mistakes, naming the case."""

import numpy as np

from npformer.exercises import NOT_ATTEMPTED
from npformer.exercises.ch12 import check_total_variation
from npformer.interventions import total_variation


def stub(p, q):
    raise NotImplementedError


def test_reference_and_a_by_hand_answer_pass():
    assert check_total_variation(total_variation, show=False).line == "passed 5 of 5 checks"
    line = check_total_variation(lambda p, q: 0.5 * np.abs(p - q).sum(axis=-1), show=False).line
    assert line == "passed 5 of 5 checks"


def test_stub_is_not_attempted():
    assert check_total_variation(stub, show=False).line == NOT_ATTEMPTED


def test_forgetting_the_half_fails_the_disjoint_case():
    line = check_total_variation(lambda p, q: np.abs(p - q).sum(axis=-1), show=False).line
    assert line.startswith("failed check 1 of 5 (disjoint supports give 1)")
    assert "got 2" in line


def test_no_absolute_value_fails():
    line = check_total_variation(lambda p, q: 0.5 * (p - q).sum(axis=-1), show=False).line
    assert line.startswith("failed check 1 of 5 (disjoint supports give 1)")


def test_largest_single_difference_fails_the_case_by_hand():
    line = check_total_variation(lambda p, q: np.abs(p - q).max(axis=-1), show=False).line
    assert line.startswith("failed check 3 of 5 (a case by hand: 0.6)")


def test_summing_over_every_axis_fails_the_batch():
    line = check_total_variation(lambda p, q: 0.5 * np.abs(p - q).sum(), show=False).line
    assert line.startswith("failed check 4 of 5 (a batch (2, 3, 5) reduces the last axis)")
    assert "expected shape (2, 3), got shape ()" in line


def test_wrong_axis_fails_the_batch():
    line = check_total_variation(lambda p, q: 0.5 * np.abs(p - q).sum(axis=0), show=False).line
    assert line.startswith("failed check 4 of 5")
