"""Tests of npformer.book.plotting's one computation: the moving average of a training curve."""

import numpy as np

from npformer.book.plotting import moving_average


def test_moving_average_is_the_mean_of_each_window():
    values = np.array([1.0, 3.0, 2.0, 6.0, 4.0])
    np.testing.assert_allclose(moving_average(values, 2), [2.0, 2.5, 4.0, 5.0])
    np.testing.assert_allclose(moving_average(values, 5), [3.2])
    # a ramp's window mean is the ramp at the window's middle: no shift hidden in it
    ramp = np.arange(1.0, 101.0)
    np.testing.assert_allclose(moving_average(ramp, 25), np.arange(13.0, 89.0))
