"""Tests of npformer.core.label_smoothing: torch's label_smoothing, gradient, floor, bad inputs."""

import numpy as np
import pytest

from npformer.core.label_smoothing import (
    label_smoothed_cross_entropy,
    label_smoothed_cross_entropy_backward,
    smoothed_targets,
)
from npformer.core.model import masked_cross_entropy


def case(seed=0, shape=(3, 4), V=7):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape + (V,)) * 3, rng.integers(0, V, shape)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.4])
def test_equals_torch_cross_entropy_with_label_smoothing(smoothing):
    torch = pytest.importorskip("torch")
    logits, targets = case()
    mask = np.ones(targets.shape)
    mask[1, 2:] = 0
    ours, _ = label_smoothed_cross_entropy(logits, targets, smoothing, mask)
    t = torch.from_numpy(targets.copy())
    t[torch.from_numpy(mask == 0)] = -100
    ref = torch.nn.functional.cross_entropy(
        torch.from_numpy(logits).reshape(-1, 7), t.reshape(-1), label_smoothing=smoothing
    )
    assert abs(ours - ref.item()) < 1e-12


def test_zero_smoothing_is_the_plain_cross_entropy():
    logits, targets = case(1)
    ours, _ = label_smoothed_cross_entropy(logits, targets, 0.0)
    plain, _ = masked_cross_entropy(logits, targets, np.ones(targets.shape))
    assert abs(ours - plain) < 1e-12


def test_gradient_matches_central_differences():
    logits, targets = case(2)
    mask = np.array([1, 1, 0, 1])
    _, cache = label_smoothed_cross_entropy(logits, targets, 0.1, mask)
    grad = label_smoothed_cross_entropy_backward(cache)
    num = np.zeros_like(logits)
    for i in np.ndindex(logits.shape):
        old = logits[i]
        logits[i] = old + 1e-6
        plus = label_smoothed_cross_entropy(logits, targets, 0.1, mask)[0]
        logits[i] = old - 1e-6
        minus = label_smoothed_cross_entropy(logits, targets, 0.1, mask)[0]
        logits[i] = old
        num[i] = (plus - minus) / 2e-6
    np.testing.assert_allclose(grad, num, atol=1e-8)
    assert np.all(grad[:, 2] == 0)  # a masked position gets no gradient


def test_the_floor_is_the_entropy_of_the_targets_and_large_logits_do_not_overflow():
    V, eps = 5, 0.1
    targets = np.array([[0, 3]])
    q = smoothed_targets(targets, V, eps)
    np.testing.assert_allclose(q.sum(-1), 1.0)
    entropy = -(q * np.log(q)).sum(-1).mean()
    best, _ = label_smoothed_cross_entropy(np.log(q), targets, eps)
    assert abs(best - entropy) < 1e-12
    confident = np.where(np.arange(V) == targets[..., None], 1000.0, -1000.0)
    loss, cache = label_smoothed_cross_entropy(confident, targets, eps)
    assert np.isfinite(loss) and loss > 100  # a certain answer costs a lot under smoothing
    assert np.all(np.isfinite(label_smoothed_cross_entropy_backward(cache)))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(smoothing=1.0), "smoothing must lie in"),
        (dict(smoothing=-0.1), "smoothing must lie in"),
        (dict(loss_mask=np.zeros((3, 4))), "at least one 1"),
    ],
)
def test_bad_arguments(kwargs, message):
    logits, targets = case()
    with pytest.raises(ValueError, match=message):
        label_smoothed_cross_entropy(logits, targets, **kwargs)


def test_bad_targets_and_logits():
    logits, targets = case()
    with pytest.raises(ValueError, match="must match logits"):
        label_smoothed_cross_entropy(logits, targets[:, :2])
