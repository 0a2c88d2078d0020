"""The checker of chapter 07's exercise passes the reference and catches typical mistakes."""

import numpy as np

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch07 import CHECKS, check_label_smoothing


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def right(logits, targets, smoothing):
    V = logits.shape[-1]
    q = np.full(logits.shape, smoothing / V)
    np.put_along_axis(q, targets[..., None], 1 - smoothing + smoothing / V, axis=-1)
    return float(-(q * log_softmax(logits)).sum(-1).mean())


def no_uniform_share(logits, targets, smoothing):  # q = (1 - eps) onehot: sums to 1 - eps
    lp = np.take_along_axis(log_softmax(logits), targets[..., None], -1)[..., 0]
    return float(-((1 - smoothing) * lp).mean())


def share_over_the_others(logits, targets, smoothing):  # eps / (V - 1), none on the target
    V = logits.shape[-1]
    q = np.full(logits.shape, smoothing / (V - 1))
    np.put_along_axis(q, targets[..., None], 1 - smoothing, axis=-1)
    return float(-(q * log_softmax(logits)).sum(-1).mean())


def naive_log(logits, targets, smoothing):  # log(exp(z) / sum exp(z)) without the shift
    V = logits.shape[-1]
    with np.errstate(all="ignore"):
        p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        q = np.full(logits.shape, smoothing / V)
        np.put_along_axis(q, targets[..., None], 1 - smoothing + smoothing / V, axis=-1)
        return float(-(q * np.log(p)).sum(-1).mean())


def summed_not_averaged(logits, targets, smoothing):
    return right(logits, targets, smoothing) * targets.size


def smoothing_swapped(logits, targets, smoothing):  # 1 - eps spread, eps on the target
    return right(logits, targets, 1 - smoothing) if smoothing > 0 else right(logits, targets, 0)


def stub(logits, targets, smoothing):
    raise NotImplementedError


def test_reference_passes(capsys):
    report = check_label_smoothing(right)
    assert report.ok and report.total == len(CHECKS) == 6
    assert capsys.readouterr().out == "passed 6 of 6 checks\n"


def test_stub_is_not_attempted(capsys):
    assert not check_label_smoothing(stub).attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


def test_no_uniform_share_fails_on_equal_logits():
    line = check_label_smoothing(no_uniform_share, show=False).line
    assert line.startswith("failed check 2 of 6 (equal logits cost log V)")


def test_share_over_the_others_fails_on_the_value():
    line = check_label_smoothing(share_over_the_others, show=False).line
    assert line.startswith("failed check 3 of 6 (value against the reference)")


def test_naive_log_fails_on_large_logits():
    line = check_label_smoothing(naive_log, show=False).line
    assert line.startswith("failed check 5 of 6 (large logits stay finite)")


def test_sum_fails_at_once():
    line = check_label_smoothing(summed_not_averaged, show=False).line
    assert line.startswith("failed check 1 of 6 (smoothing 0 is the plain cross-entropy)")


def test_swapped_smoothing_fails_on_the_value():
    line = check_label_smoothing(smoothing_swapped, show=False).line
    assert line.startswith("failed check 3 of 6")
