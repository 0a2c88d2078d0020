"""The check counter (scripts/count_checks.py): which lines it counts as argument checks.

Small source strings, one rule each: a line that must count and one that must not, docstrings
and comments out of the code lines, and the numbers of the package's own table adding up.
"""

from __future__ import annotations

import textwrap

from scripts import count_checks as cc
from tests.notebooks import ROOT


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_code_lines_leave_out_blanks_comments_and_docstrings():
    source = _src('''
        """Module docstring,
        over two lines."""

        # a comment
        def f(x):
            """Docstring."""
            return x  # trailing comment: the line is code
        ''')
    assert cc.code_lines(source) == {5, 7}


def test_an_if_that_only_raises_counts_with_its_test():
    source = _src("""
        def f(x):
            if x.ndim != 2:
                raise ValueError(
                    f"x must be 2-D, got {x.shape}"
                )
            return x
        """)
    assert cc.check_lines(source) == {2, 3, 4, 5}
    assert cc.count(source) == cc.Count(code=6, checks=4, raise_value_error=1, asserts=0)


def test_an_if_that_also_computes_does_not_count():
    source = _src("""
        def f(x):
            if x.ndim != 2:
                x = x.reshape(2, -1)
                raise ValueError("reshaped")
            if x.ndim == 2:
                raise RuntimeError("not an argument check")
            assert x.ndim == 2
            return x
        """)
    assert cc.check_lines(source) == set()
    assert cc.count(source).asserts == 1


def test_calls_of_validation_count_and_other_calls_do_not():
    source = _src("""
        from npformer.core.validation import float_array, int_at_least
        import numpy as np

        def f(x, n):
            x = float_array("f", "x", x)
            int_at_least("f", "n", n)
            y = np.asarray(x)
            return float_array("f", "y", y)
        """)
    assert cc.check_lines(source) == {5, 6, 8}


def test_calls_of_check_functions_count_outside_exercises():
    source = _src("""
        def f(x, config):
            _check_config("f", config)
            x = check_tokens("f", "x", x, config)
            y = checked(x)
            return y
        """)
    assert cc.check_lines(source) == {2, 3}
    assert cc.check_lines(source, in_exercises=True) == set()


def test_else_and_except_branches_that_only_raise():
    source = _src("""
        def f(kind, v):
            if kind == "a":
                out = 1
            else:
                raise ValueError(f"kind must be 'a', got {kind!r}")
            try:
                return int(v) + out
            except TypeError:
                raise TypeError("v must be a number") from None
        """)
    assert cc.check_lines(source) == {5, 8, 9}


def test_check_functions_count_whole_outside_exercises_only():
    source = _src("""
        def _check_shapes(x, y):
            n = x.shape[0]
            return n == y.shape[0]

        def check_answer(fn):
            return fn(1) == 2
        """)
    assert cc.check_lines(source) == {1, 2, 3, 5, 6}
    assert cc.check_lines(source, in_exercises=True) == set()


def test_validation_module_counts_whole():
    source = _src('''
        """Checks."""
        def positive(x):
            return x > 0
        ''')
    assert cc.check_lines(source, is_validation=True) == {2, 3}


def test_package_table_adds_up():
    counts = cc.count_package(ROOT / "npformer")
    assert (
        "core/validation.py" not in counts
        or counts["core/validation.py"].checks == counts["core/validation.py"].code
    )
    assert all(0 <= c.checks <= c.code for c in counts.values())
    total_line = cc.table(counts).splitlines()[-1].split()
    assert total_line[0] == "TOTAL"
    assert int(total_line[1]) == sum(c.code for c in counts.values())
    assert int(total_line[2]) == sum(c.checks for c in counts.values())
