"""Tests of npformer.training.schedules: the 2017 warm-up schedule's shape, peak and bad
arguments."""

import math

import pytest

from npformer.training.schedules import warmup_inverse_sqrt


def test_the_paper_numbers_and_shape():
    d, w = 512, 4000
    rates = [warmup_inverse_sqrt(s, d, w) for s in range(1, 3 * w)]
    peak = max(range(len(rates)), key=rates.__getitem__) + 1
    assert peak == w
    assert math.isclose(rates[w - 1], (d * w) ** -0.5)  # about 7.0e-4 for the base model
    assert math.isclose(warmup_inverse_sqrt(1, d, w), d**-0.5 * w**-1.5)
    assert math.isclose(warmup_inverse_sqrt(2, d, w), 2 * warmup_inverse_sqrt(1, d, w))  # linear
    assert math.isclose(warmup_inverse_sqrt(4 * w, d, w), warmup_inverse_sqrt(w, d, w) / 2)
    assert math.isclose(
        warmup_inverse_sqrt(10, 32, 5, factor=2.0), 2 * warmup_inverse_sqrt(10, 32, 5)
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 512, 4000), "step=0, d_model=512 and warmup=4000 must be >= 1"),
        ((1, 0, 4000), "step=1, d_model=0 and warmup=4000 must be >= 1"),
        ((1, 512, 0), "warmup=0 must be >= 1"),
    ],
)
def test_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        warmup_inverse_sqrt(*args)
