"""Chapter 13's checked exercise: the reader writes a causality check for an attention layer.

The reader's ``fn(attention, X) -> bool`` must say whether ``attention`` (a function from a
(T, d) array to a (T, d) array) keeps the future invisible: True when editing any token t leaves
every output before t unchanged, False when some edit moves an earlier output.
``check_causality_check(fn)`` runs it on nine attention layers, some causal and some leaking
(as chapter 13's traps do), and prints one line (see :mod:`npformer.book.exercises`). Two of the
leaks are single stray entries of the mask, far apart and sparing query 0 and the last key, so
that no check built on one edited token sees both.
"""

from __future__ import annotations

import math

import numpy as np

from npformer.book.exercises import Check, Report, run_checks
from npformer.core.attention import masked_softmax, softmax
from npformer.core.masks import causal_mask

T_CASE, D_CASE = 6, 8
_rng = np.random.default_rng(13)
_W = {n: _rng.standard_normal((D_CASE, D_CASE)) / math.sqrt(D_CASE) for n in "qkv"}
X_CASE = np.random.default_rng(14).standard_normal((T_CASE, D_CASE))  # (T, d)


def _qkv(X):
    return X @ _W["q"], X @ _W["k"], X @ _W["v"]  # (T, d) each


def _scores(X):
    Q, K, _ = _qkv(X)
    return Q @ K.T / math.sqrt(D_CASE)  # (T, T)


def causal(X):
    """Correct: -inf on the future keys, softmax over the keys."""
    return masked_softmax(_scores(X), causal_mask(len(X))) @ _qkv(X)[2]


def no_mask(X):
    """Leaks: no mask at all."""
    return softmax(_scores(X)) @ _qkv(X)[2]


def wrong_axis(X):
    """Leaks: causal scores, softmax over the queries."""
    return softmax(np.where(causal_mask(len(X)), _scores(X), -np.inf), axis=-2) @ _qkv(X)[2]


def mask_after_softmax(X):
    """Leaks: the future's weight is zeroed after a softmax over every key."""
    return (softmax(_scores(X)) * causal_mask(len(X))) @ _qkv(X)[2]


def one_key_ahead(X):
    """Leaks: the mask is off by one and shows each query the next key."""
    return (
        masked_softmax(_scores(X), causal_mask(len(X), len(X)) | np.eye(len(X), k=1, dtype=bool))
        @ _qkv(X)[2]
    )


def diagonal_hidden(X):
    """Causal (too strict): each query sees only the keys before it; row 0 reads nothing."""
    return (
        masked_softmax(_scores(X), np.tril(np.ones((len(X), len(X)), dtype=bool), k=-1))
        @ _qkv(X)[2]
    )


def finite_mask(X):
    """Leaks, slightly: the future gets a score of -15 instead of -inf (weights near 3e-7)."""
    return softmax(np.where(causal_mask(len(X)), _scores(X), -15.0)) @ _qkv(X)[2]


def _one_stray_key(T, query, key):
    mask = causal_mask(T)
    mask[query, key] = True  # this query may also read this one future key
    return mask


def query_1_reads_key_2(X):
    """Leaks: a causal mask with one stray entry, query 1 reading key 2."""
    return masked_softmax(_scores(X), _one_stray_key(len(X), 1, 2)) @ _qkv(X)[2]


def query_3_reads_key_4(X):
    """Leaks: a causal mask with one stray entry, query 3 reading key 4 (chapter 13's)."""
    return masked_softmax(_scores(X), _one_stray_key(len(X), 3, 4)) @ _qkv(X)[2]


CASES = [
    ("a correct causal layer", causal, True),
    ("a layer with no mask", no_mask, False),
    ("a causal mask with the softmax over the queries", wrong_axis, False),
    ("the mask applied after the softmax", mask_after_softmax, False),
    ("a mask off by one (one future key visible)", one_key_ahead, False),
    ("a mask that also hides the diagonal (no future visible)", diagonal_hidden, True),
    ("a mask of -15 instead of -inf (a leak of about 3e-7)", finite_mask, False),
    ("a causal mask with one stray entry: query 1 reads key 2", query_1_reads_key_2, False),
    ("a causal mask with one stray entry: query 3 reads key 4", query_3_reads_key_4, False),
]


def _case(name, attention, expected):
    def run(fn):
        got = fn(attention, X_CASE.copy())
        if not isinstance(got, (bool, np.bool_)):
            return f"the check must return True or False, got {got!r} on {name}"
        if bool(got) != expected:
            verdict = "causal" if got else "leaking"
            return f"said {verdict} for {name}, which {'is causal' if expected else 'leaks'}"
        return None

    return Check(f"{name}: {'causal' if expected else 'leaks'}", run)


CHECKS = [_case(*case) for case in CASES]


def check_causality_check(fn, *, show: bool = True) -> Report:
    """Check the reader's ``fn(attention, X) -> bool`` on nine layers, causal and leaking."""
    return run_checks(fn, CHECKS, show=show)
