"""Chapter 12's checker passes the reference and fails typical mistakes, naming the case."""

import numpy as np

from npformer.analysis.interventions import total_variation
from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch12 import check_logit_difference, check_total_variation


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


# ----------------------------------------------------------------------------- logit difference


def by_hand_logit_difference(logits, target):
    logits = np.asarray(logits, dtype=float)
    correct = np.take_along_axis(logits, np.asarray(target)[..., None], axis=-1)[..., 0]
    others = logits.copy()
    np.put_along_axis(others, np.asarray(target)[..., None], -np.inf, axis=-1)
    return correct - others.max(axis=-1)


def test_logit_difference_reference_passes_and_stub_is_not_attempted():
    assert check_logit_difference(by_hand_logit_difference, show=False).line == (
        "passed 5 of 5 checks"
    )
    assert check_logit_difference(stub, show=False).line == NOT_ATTEMPTED


def test_logit_difference_against_the_largest_logit_fails_when_the_target_leads():
    # the commonest slip: subtract the largest logit of the row, the target's own included
    line = check_logit_difference(
        lambda x, t: np.take_along_axis(x, t[..., None], -1)[..., 0] - x.max(-1), show=False
    ).line
    assert line.startswith("failed check 1 of 5 (two rows by hand: 2 and -2.5)")


def test_logit_difference_that_masks_the_target_by_value_fails_the_tie():
    def by_value(x, t):
        x = np.asarray(x, dtype=float)
        correct = np.take_along_axis(x, np.asarray(t)[..., None], -1)[..., 0]
        # every logit equal to the target's is dropped, a tied rival too
        return correct - np.where(x == correct[..., None], -np.inf, x).max(-1)

    line = check_logit_difference(by_value, show=False).line
    assert line.startswith("failed check 2 of 5 (a tie with the target gives 0)")


def test_logit_difference_that_overwrites_the_logits_fails():
    def in_place(x, t):
        correct = np.take_along_axis(x, t[..., None], -1)[..., 0].copy()
        np.put_along_axis(x, t[..., None], -np.inf, axis=-1)
        return correct - x.max(-1)

    line = check_logit_difference(in_place, show=False).line
    assert line.startswith("failed check 4 of 5 (the logits are left as they were)")


def test_logit_difference_over_the_wrong_axis_fails_the_batch():
    def first_axis(x, t):
        return by_hand_logit_difference(np.moveaxis(np.asarray(x), 0, -1)[..., : x.shape[0]], t)

    line = check_logit_difference(first_axis, show=False).line
    assert line.startswith("failed check ")
