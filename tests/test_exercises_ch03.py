"""Chapter 03's checker passes the reference and catches typical mistakes of a masked softmax."""

import numpy as np
import pytest

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch03 import check_masked_softmax
from npformer.core.attention import masked_softmax, softmax


def right(scores, mask):
    hidden = np.where(mask, scores, -np.inf)
    top = hidden.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask, np.exp(hidden - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def mask_after_the_softmax(scores, mask):
    return softmax(scores) * mask


def zeros_instead_of_minus_infinity(scores, mask):
    return softmax(np.where(mask, scores, 0.0))


def nan_on_an_empty_row(scores, mask):
    hidden = np.where(mask, scores, -np.inf)
    e = np.exp(hidden - hidden.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def no_max_subtraction(scores, mask):
    e = np.where(mask, np.exp(scores), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def max_over_hidden_keys_too(scores, mask):
    e = np.where(mask, np.exp(scores - scores.max(axis=-1, keepdims=True)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def stub(scores, mask):
    raise NotImplementedError


def test_reference_and_right_answer_pass(capsys):
    assert check_masked_softmax(masked_softmax).ok
    assert check_masked_softmax(right).ok
    assert capsys.readouterr().out == "passed 5 of 5 checks\npassed 5 of 5 checks\n"


def test_stub_is_not_attempted(capsys):
    assert not check_masked_softmax(stub).attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


@pytest.mark.parametrize(
    ("mistake", "failing"),
    [
        (mask_after_the_softmax, "failed check 2 of 5 (a causal mask on 4 positions)"),
        (zeros_instead_of_minus_infinity, "failed check 2 of 5 (a causal mask on 4 positions)"),
        (
            nan_on_an_empty_row,
            "failed check 5 of 5 (rows with no visible key give zero weights, not NaN): "
            "got non-finite values",
        ),
        (no_max_subtraction, "failed check 3 of 5 (scores near +-1000 (no overflow))"),
        (max_over_hidden_keys_too, "failed check 4 of 5 (a hidden key with score 5000"),
    ],
)
def test_typical_mistakes_fail(mistake, failing):
    report = check_masked_softmax(mistake, show=False)
    assert not report.ok
    assert report.line.startswith(failing), report.line
