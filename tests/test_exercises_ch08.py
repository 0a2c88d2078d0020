"""Chapter 08's checker passes the reference merge and fails typical mistakes."""

import numpy as np

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch08 import CHECKS, check_merge, reference_merge


def test_reference_passes():
    report = check_merge(reference_merge, show=False)
    assert report.ok and report.line == f"passed {len(CHECKS)} of {len(CHECKS)} checks"


def test_stub_is_not_attempted():
    def merge(first, second):
        raise NotImplementedError

    assert check_merge(merge, show=False).line == NOT_ATTEMPTED


def no_rescale(first, second):
    (m1, l1, a1), (m2, l2, a2) = first, second
    return np.maximum(m1, m2), l1 + l2, a1 + a2


def denominator_not_rescaled(first, second):
    (m1, l1, a1), (m2, l2, a2) = first, second
    m = np.maximum(m1, m2)
    r1, r2 = np.exp(m1 - m), np.exp(m2 - m)
    return m, l1 + l2, r1 * a1 + r2 * a2


def keeps_the_second_maximum(first, second):
    (m1, l1, a1), (m2, l2, a2) = first, second
    r1 = np.exp(m1 - m2)
    return m2, r1 * l1 + l2, r1 * a1 + a2


def keeps_the_first_maximum(first, second):
    # l and a right, relative to the larger maximum; m the first tile's, whichever is larger
    m, l, a = reference_merge(first, second)
    return first[0], l, a


def rescale_with_wrong_sign(first, second):
    (m1, l1, a1), (m2, l2, a2) = first, second
    m = np.maximum(m1, m2)
    r1, r2 = np.exp(m - m1), np.exp(m - m2)
    return m, r1 * l1 + r2 * l2, r1 * a1 + r2 * a2


def test_mistakes_fail_where_expected():
    lines = {
        fn.__name__: check_merge(fn, show=False).line
        for fn in (
            no_rescale,
            denominator_not_rescaled,
            keeps_the_second_maximum,
            keeps_the_first_maximum,
            rescale_with_wrong_sign,
        )
    }
    for name in ("no_rescale", "denominator_not_rescaled", "rescale_with_wrong_sign"):
        assert lines[name].startswith("failed check 1 of 7 (2 queries, tiles of 3 and 5 keys"), name
        assert "expected [[" in lines[name] and "got [[" in lines[name]
    # a / l does not depend on the reference maximum, so only the check of m itself (and the
    # risk of overflow) tells that the larger of the two maxima must be kept
    assert lines["keeps_the_second_maximum"].startswith("failed check 4 of 7 (the merged maximum m")
    assert lines["keeps_the_first_maximum"].startswith("failed check 4 of 7 (the merged maximum m")
