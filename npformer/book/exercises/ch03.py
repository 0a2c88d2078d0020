"""Checker for chapter 03's exercise: a masked softmax that is right on every row.

Taught in chapter 03 (``chapters/03_masks.ipynb``). The reader writes ``fn(scores, mask)``
returning the weights: -inf on the hidden scores before the softmax, the row maximum taken over
the visible scores, and all-zero weights (no NaN) on a row with no visible key. The reference is
:func:`npformer.core.attention.masked_softmax`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npformer.book.exercises import Check, Report, compare, run_checks
from npformer.core.attention import masked_softmax
from npformer.core.masks import causal_mask


def _against_reference(scores, mask) -> Callable[[Callable], str | None]:
    def run(fn: Callable) -> str | None:
        with np.errstate(all="ignore"):
            got = fn(scores.copy(), mask.copy())
        return compare(masked_softmax(scores, mask), got, rtol=1e-9, atol=1e-12)

    return run


_rng = np.random.default_rng(0)
_plain = _rng.normal(size=(3, 4))  # (T, S)
_causal = _rng.normal(size=(4, 4))  # (T, S)
_large = np.array([[1000.0, 998.0, 1001.0], [-1000.0, -1003.0, -999.0]])  # (T, S)
_hidden_giant = np.array([[0.3, -0.2, 5000.0, 0.1]])  # the giant score is hidden
_batch = _rng.normal(size=(2, 3, 5))  # (B, T, S)
_left_pad = causal_mask(5)[None] & np.array([[False, False, True, True, True]])[:, None, :]

CHECKS = [
    Check("nothing masked: the plain softmax", _against_reference(_plain, np.ones((3, 4), bool))),
    Check("a causal mask on 4 positions", _against_reference(_causal, causal_mask(4))),
    Check("scores near +-1000 (no overflow)", _against_reference(_large, np.ones((2, 3), bool))),
    Check(
        "a hidden key with score 5000 (the max over visible keys only)",
        _against_reference(_hidden_giant, np.array([[True, True, False, True]])),
    ),
    Check(
        "rows with no visible key give zero weights, not NaN",
        _against_reference(_batch, np.broadcast_to(_left_pad, (2, 5, 5))[:, :3]),
    ),
]


def check_masked_softmax(fn: Callable, *, show: bool = True) -> Report:
    """Check the reader's ``fn(scores, mask) -> weights``; print one line."""
    return run_checks(fn, CHECKS, show=show)
