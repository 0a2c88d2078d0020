"""The gradient-check tools (chapter 06)."""

import numpy as np
import pytest

from npformer.core.gradcheck import (
    central_difference,
    gradient_check,
    kink_crossed,
    normwise_relative_error,
    relative_error,
)


def test_relative_error():
    np.testing.assert_array_equal(relative_error([1.0, 0.0, -2.0], [1.0, 0.0, 2.0]), [0, 0, 2])
    assert normwise_relative_error({"a": np.array([3.0, 4.0])}, {"a": np.array([3.0, 0.0])}) == (
        pytest.approx(4 / 3)
    )
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        relative_error(np.zeros(2), np.zeros(3))


def test_central_difference_restores_and_is_second_order():
    x = np.array([0.3, -1.2])
    f = lambda: float(np.sum(np.sin(x)))
    est, plus, minus = central_difference(f, x, 1, 1e-3)
    assert x[1] == -1.2  # restored exactly
    assert abs(est - np.cos(-1.2)) < 1e-6 < 1e-3  # error ~ eps^2 / 6
    assert plus == pytest.approx(np.sin(0.3) + np.sin(-1.2 + 1e-3))
    with pytest.raises(ValueError, match="float64.*float32.*\\(2,\\)"):
        central_difference(f, x.astype(np.float32), 0, 1e-3)


def test_gradient_check_and_kink_on_relu():
    w = np.array([0.5, -2e-7, 1.0])  # w[1] sits next to the kink
    f = lambda: float(np.sum(np.maximum(w, 0) ** 2 + w))
    grads = {"w": 2 * np.maximum(w, 0) + 1}
    coordinates = {"w": np.arange(3)}
    fine = gradient_check(f, {"w": w}, grads, coordinates, 1e-8)
    assert fine.worst < 1e-6 and fine.failures(1e-5) == []
    coarse = gradient_check(f, {"w": w}, grads, coordinates, 1e-3)
    assert coarse.failures(1e-5) == [("w", 1)]
    pre = lambda: w.copy()
    assert kink_crossed(pre, w, 1, 1e-3) and not kink_crossed(pre, w, 1, 1e-8)
    assert not kink_crossed(pre, w, 0, 1e-3)
    np.testing.assert_array_equal(w, [0.5, -2e-7, 1.0])
