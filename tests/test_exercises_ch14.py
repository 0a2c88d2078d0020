"""The appendix's checker passes the median of pair ratios and fails typical wrong summaries."""

import numpy as np
import pytest

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch14 import DISTURBED, check_pair_ratio, reference
from npformer.book.measuring import side_by_side


def stub(b, c):
    raise NotImplementedError


def test_reference_passes_and_stub_is_not_attempted():
    assert check_pair_ratio(reference, show=False).line == "passed 5 of 5 checks"
    assert check_pair_ratio(stub, show=False).line == NOT_ATTEMPTED


def test_reference_agrees_with_the_package_on_an_odd_count():
    # side_by_side times real calls; here both sides are the same function: ratio about 1
    assert 0.2 < side_by_side(lambda: sum(range(2000)), lambda: sum(range(2000)), pairs=5) < 5
    assert reference(*DISTURBED) == pytest.approx(2.1)


def inverted(b, c):
    return float(np.median(np.asarray(c) / np.asarray(b)))


def mean_of_ratios(b, c):
    return float(np.mean(np.asarray(b) / np.asarray(c)))


def ratio_of_medians(b, c):
    return float(np.median(b) / np.median(c))


def ratio_of_totals(b, c):
    return float(np.sum(b) / np.sum(c))


def upper_middle(b, c):
    r = sorted(np.asarray(b) / np.asarray(c))
    return float(r[len(r) // 2])


def no_length_check(b, c):
    n = min(len(b), len(c))
    return float(np.median(np.asarray(b[:n]) / np.asarray(c[:n])))


@pytest.mark.parametrize(
    "mistake, failing",
    [
        (inverted, "failed check 1 of 5 (a steady machine"),
        (mean_of_ratios, "failed check 2 of 5 (one disturbed pair moves nothing)"),
        (ratio_of_medians, "failed check 2 of 5 (one disturbed pair moves nothing)"),
        (ratio_of_totals, "failed check 2 of 5 (one disturbed pair moves nothing)"),
        (upper_middle, "failed check 4 of 5 (an even number of pairs)"),
        (no_length_check, "failed check 5 of 5 (sequences of unequal length are refused)"),
    ],
)
def test_typical_mistakes_fail_where_expected(mistake, failing):
    assert check_pair_ratio(mistake, show=False).line.startswith(failing)
