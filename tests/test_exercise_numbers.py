"""Exercises numbered from 1 on every page (`_ext/exercise_numbers.py`).

The built pages are checked in `tests/test_browser.py`; here, the renumbering itself.
"""

from __future__ import annotations

import sys

from tests.notebooks import ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import exercise_numbers as E  # noqa: E402


def test_each_page_counts_from_one_in_page_order():
    # Sphinx's numbers count across the book; ids are listed in no particular order
    fignumbers = {
        "chapters/00_preface": {"exercise": {"ex-a": (1,), "ex-b": (2,)}},
        "chapters/01_attention": {
            "exercise": {"ex-e": (5,), "ex-c": (3,), "ex-d": (4,)},
            "figure": {"fig-x": (7,)},
        },
        "intro": {"figure": {"fig-y": (1,)}},
    }
    changed = E.number_per_page(fignumbers)
    assert changed == ["chapters/01_attention"]
    assert fignumbers["chapters/00_preface"]["exercise"] == {"ex-a": (1,), "ex-b": (2,)}
    assert fignumbers["chapters/01_attention"]["exercise"] == {
        "ex-c": (1,),
        "ex-d": (2,),
        "ex-e": (3,),
    }
    # other numbered things are left alone
    assert fignumbers["chapters/01_attention"]["figure"] == {"fig-x": (7,)}
    assert fignumbers["intro"] == {"figure": {"fig-y": (1,)}}


def test_a_second_pass_changes_nothing():
    fignumbers = {"p": {"exercise": {"ex-a": (4,), "ex-b": (6,)}}}
    assert E.number_per_page(fignumbers) == ["p"]
    assert E.number_per_page(fignumbers) == []
    assert fignumbers == {"p": {"exercise": {"ex-a": (1,), "ex-b": (2,)}}}


def test_it_is_registered_with_the_book():
    from tests.notebooks import config

    local = config()["sphinx"]["local_extensions"]
    assert local["exercise_numbers"] == "_ext" and local["reading_time"] == "_ext"
