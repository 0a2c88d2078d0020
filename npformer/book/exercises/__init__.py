"""Checkers for the exercises in which the reader writes a function (every chapter has one).

A checker runs a short list of property checks of the reader's function against the package's
reference and prints ONE deterministic line, so that nbval can compare it exactly:

- ``not attempted yet (solution below)`` when the function raises ``NotImplementedError``
  (the stub the chapter ships);
- ``passed N of N checks`` when every check holds;
- ``failed check k of N (<what it checks>): <the first failing case, with its numbers>``
  otherwise. Later checks are not run: the first failure is the one to fix.

Each chapter's checkers live in ``npformer.book.exercises.chNN`` and are built from
:func:`run_checks` and :class:`Check`. Every checker is tested against the reference and against
typical mistakes in ``tests/test_exercises.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

NOT_ATTEMPTED = "not attempted yet (solution below)"


class Check(NamedTuple):
    """One property check: ``run(fn)`` returns None when it holds, or a message saying why not."""

    what: str
    run: Callable[[Callable], str | None]


class Report(NamedTuple):
    """What a checker found; ``line`` is what it printed."""

    attempted: bool
    passed: int
    total: int
    line: str

    @property
    def ok(self) -> bool:
        return self.attempted and self.passed == self.total


class QuietReport(Report):
    """A :class:`Report` that a notebook does not display a second time.

    The checker has already printed its one line; without this, a cell ending in the call
    would also show the report's repr (a trailing semicolon does not always suppress it).
    """

    __slots__ = ()

    def _ipython_display_(self):
        pass


def fmt(x, digits: int = 4) -> str:
    """Format a number or an array with ``digits`` significant digits, machine-independently."""
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.integer):
        return np.array2string(arr, separator=", ") if arr.ndim else str(arr.item())
    if arr.ndim == 0:
        return f"{float(arr):.{digits}g}"
    with np.printoptions(precision=digits, suppress=True, floatmode="maxprec", threshold=12):
        return np.array2string(arr.astype(float), separator=", ")


def compare(expected, got, rtol: float = 1e-6, atol: float = 1e-9) -> str | None:
    """None if ``got`` matches ``expected`` in shape and value, else a message with both."""
    if got is None:
        return "the function returned None"
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.shape != expected.shape:
        return f"expected shape {expected.shape}, got shape {got.shape}"
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(expected)):
        return f"got non-finite values {fmt(got)}"
    if not np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True):
        worst = np.unravel_index(np.argmax(np.abs(got - expected)), got.shape)
        where = tuple(int(i) for i in worst)
        return f"expected {fmt(expected)}, got {fmt(got)} (largest gap at index {where})"
    return None


def run_checks(fn: Callable, checks: Sequence[Check], *, show: bool = True) -> Report:
    """Run ``checks`` on the reader's ``fn`` in order; print and return the one-line verdict."""
    if not callable(fn):
        raise ValueError(f"run_checks: fn must be a function, got {type(fn).__name__}")
    checks = list(checks)
    total = len(checks)
    passed = 0
    attempted = True
    line = f"passed {total} of {total} checks"
    for k, check in enumerate(checks, start=1):
        try:
            problem = check.run(fn)
        except NotImplementedError:
            attempted, line = False, NOT_ATTEMPTED
            break
        except Exception as exc:  # a reader's function may raise anything: report it, do not crash
            problem = f"raised {type(exc).__name__}: {exc}"
        if problem is not None:
            line = f"failed check {k} of {total} ({check.what}): {problem}"
            break
        passed += 1
    if show:
        print(line)
    return Report(attempted, passed, total, line)
