"""Checker for chapter 00's exercise: look a question up in the filing cabinet.

Taught in chapter 00 (``chapters/00_preface.ipynb``). The reader writes
``fn(question, keys, values)``: similarity by dot products, a softmax over the folders, and the
weighted average of the contents. ``question`` is one query (d_k,) or several (n, d_k); keys
(S, d_k); values (S, d_v). The reference is the attention core without the 1/sqrt(d_k).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npformer.book.exercises import Check, Report, compare, run_checks
from npformer.core.attention import scaled_dot_product_attention


def reference_lookup(question, keys, values) -> np.ndarray:
    """softmax(question . keys) @ values, for one question (d_k,) or several (n, d_k)."""
    q = np.asarray(question, dtype=float)
    Q = q[None, :] if q.ndim == 1 else q  # (n, d_k)
    out, _ = scaled_dot_product_attention(
        Q, np.asarray(keys, float), np.asarray(values, float), scale=False
    )  # (n, d_v)
    return out[0] if q.ndim == 1 else out


CABINET_TOPICS = ("recipes", "repairs", "garden")
CABINET_KEYS = np.eye(3)  # (S, d_k): one label direction per topic
CABINET_VALUES = np.array([[0.9, 0.2], [0.1, 0.7], [0.4, 0.9]])  # (S, d_v)
CABINET_QUESTION = np.array([1.0, 2.5, 0.0])  # (d_k,): "the kitchen tap drips"


def _against_reference(question, keys=CABINET_KEYS, values=CABINET_VALUES):
    def run(fn: Callable) -> str | None:
        with np.errstate(all="ignore"):
            got = fn(np.array(question, float), keys.copy(), values.copy())
        return compare(reference_lookup(question, keys, values), got, rtol=1e-9, atol=1e-12)

    return run


_rng = np.random.default_rng(0)
_keys5 = _rng.normal(size=(5, 4))  # (S, d_k)
_values5 = _rng.normal(size=(5, 3))  # (S, d_v)

CHECKS = [
    Check("the chapter's question, the dripping tap", _against_reference(CABINET_QUESTION)),
    Check("a question that matches no label", _against_reference([0.0, 0.0, 0.0])),
    Check(
        "two questions at once, shape (2, 4)",
        _against_reference(_rng.normal(size=(2, 4)), _keys5, _values5),
    ),
    Check(
        "similarities near 1000 (no overflow)",
        _against_reference([1000.0, 999.0, 1001.0], np.eye(3) + 0.0),
    ),
    Check(
        "a question against 5 random folders",
        _against_reference(_rng.normal(size=4), _keys5, _values5),
    ),
    Check(
        "two questions far apart (each row its own maximum)",
        _against_reference([[1000.0, 999.0, 1001.0], [0.5, 0.0, -0.5]]),
    ),
]


def check_cabinet_lookup(fn: Callable, *, show: bool = True) -> Report:
    """Check the reader's ``fn(question, keys, values) -> answer``; print one line."""
    return run_checks(fn, CHECKS, show=show)
