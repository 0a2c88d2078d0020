"""The built book, opened in headless Chromium as a reader would, with no network.

Builds the book into a temporary folder, serves it on localhost, and opens every chapter page
once, at 1280 px; the tests read what that one pass measured. Per page: math is typeset by
the local MathJax (no raw ``\\(`` left in the text); every image the page references exists in
the build; notebook pages carry the Colab and Binder launch links. In the built HTML: each
chapter's exercises are numbered from 1 (and so are their solutions and the exercises page),
and its reading time stands under its title. At 1280 px, light and dark, no code block, output
block (the text a cell prints, or the HTML it shows), table or display equation is wider than
the page column, folded content unfolded; every interactive figure fills the column, with both
axes titled and no tick label overlapping another or clipped. Where the page's contents are
not beside the article (below 1500 px), the article header's button opens them.
Skipped, with instructions, where Chromium is not installed (under CI a skip fails the run).
"""

from __future__ import annotations

import functools
import html
import http.server
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from scripts.headless_chromium import CHROMIUM
from tests.notebooks import CHAPTERS, ROOT
from tests.webdriver import browser, needs_browser  # noqa: F401  (fixture)

sys.path.insert(0, str(ROOT / "_ext"))
import reading_time  # noqa: E402

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not found: install it with `apt-get install -y chromium` "
    "(Debian) to run the browser check",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).parent / "jupyter-book"
    build = subprocess.run(
        [str(jb), "build", "--all", "-W", "--keep-going", "--path-output", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        pytest.fail(f"the book does not build cleanly:\n{(build.stdout + build.stderr)[-3000:]}")
    root = out / "_build" / "html"
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def visible_text(dom: str) -> str:
    dom = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", dom))


@needs_browser
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_page_renders_offline(site, pages, chapter):
    root, _ = site
    page = root / "chapters" / f"{chapter.stem}.html"
    assert page.exists(), f"{page.name} was not built"
    dom = pages[chapter.stem]["dom"]

    text = visible_text(dom)
    assert "\\(" not in text and "\\[" not in text, f"{page.name}: raw TeX left untypeset"
    if 'class="math' in page.read_text():
        assert "<mjx-container" in dom, f"{page.name}: MathJax did not typeset the math"

    for src in re.findall(r'<img[^>]+src="([^"]+)"', dom):
        parsed = urlparse(src)
        if parsed.scheme == "data":
            continue
        if parsed.scheme in ("http", "https"):
            assert parsed.netloc.startswith("127.0.0.1"), f"{page.name}: remote image {src}"
            target = root / parsed.path.lstrip("/")
        else:
            target = (page.parent / parsed.path).resolve()
        assert target.exists(), f"{page.name}: missing image {src}"

    assert "colab.research.google.com/github/" in dom, f"{page.name}: no Colab launch link"
    assert "mybinder.org" in dom, f"{page.name}: no Binder launch link"


# The interactive figures at 1280 px: each fills the column, names both axes, and its tick
# labels neither overlap one another nor stick out of the figure (where they would be clipped).
FIGURES_JS = r"""
const done = arguments[arguments.length - 1];
function measure() {
  const article = document.querySelector('article.bd-article') || document.body;
  const style = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(style.paddingLeft)
    - parseFloat(style.paddingRight);
  return [...document.querySelectorAll('.npformer-interactive')].map(function (fig) {
    const svg = fig.querySelector('svg'), box = svg.getBoundingClientRect();
    const titles = [...svg.querySelectorAll('.npformer-axis-title')]
      .filter(t => t.textContent.trim()).map(t => t.dataset.axis).sort();
    const ticks = [...svg.querySelectorAll('text')].filter(
      t => !t.matches('.npformer-value, .npformer-legend, .npformer-axis-title'));
    const boxes = ticks.map(t => t.getBoundingClientRect());
    const overlapping = [], outside = [];
    boxes.forEach(function (a, i) {
      if (a.left < box.left - 0.5 || a.right > box.right + 0.5 || a.top < box.top - 0.5
          || a.bottom > box.bottom + 0.5) outside.push(ticks[i].textContent);
      boxes.slice(i + 1).forEach(function (b, j) {
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 0.5 && h > 0.5) overlapping.push(ticks[i].textContent + ' / '
                                                 + ticks[i + 1 + j].textContent);
      });
    });
    return {id: fig.id, width: box.width, column: column, titles: titles,
            ticks: ticks.length, overlapping: overlapping, outside: outside};
  });
}
document.fonts.ready.then(() => requestAnimationFrame(() => done(measure())));
"""


@needs_browser
def test_interactive_figures_fill_the_column_with_legible_axes(pages):
    problems, seen = {}, []
    for path in CHAPTERS:
        for fig in pages[path.stem]["figures"]:
            seen.append(fig["id"])
            wrong = []
            if fig["width"] < 0.9 * fig["column"]:
                wrong.append(f"{fig['width']:.0f} px wide in a {fig['column']:.0f} px column")
            if fig["titles"] != ["x", "y"]:
                wrong.append(f"axis titles {fig['titles']}, expected one per axis")
            if not fig["ticks"]:
                wrong.append("no tick labels")
            if fig["overlapping"]:
                wrong.append(f"overlapping tick labels {fig['overlapping'][:3]}")
            if fig["outside"]:
                wrong.append(f"tick labels clipped {fig['outside'][:3]}")
            if wrong:
                problems[f"{path.stem} {fig['id']}"] = wrong
    assert len(seen) >= 3, f"expected the book's three interactive figures, found {seen}"
    assert not problems, "\n".join(f"{page}: {'; '.join(why)}" for page, why in problems.items())


EXERCISE_TITLE = re.compile(r'<span class="caption-number">Exercise (\d+) </span>')
SOLUTION_TITLE = re.compile(r"Solution to<a [^>]*> Exercise (\d+)")


# "Going deeper" pages (NN_deeper_*) are investigations beside a chapter, without exercises
MAIN_PATH = [p for p in CHAPTERS if "_deeper_" not in p.stem]


@pytest.mark.parametrize("chapter", MAIN_PATH, ids=[p.stem for p in MAIN_PATH])
def test_exercises_count_from_one_in_every_chapter(site, chapter):
    root, _ = site
    page = (root / "chapters" / f"{chapter.stem}.html").read_text()
    numbers = EXERCISE_TITLE.findall(page)
    assert numbers, f"{chapter.stem}: no numbered exercise"
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)], (chapter.stem, numbers)
    assert SOLUTION_TITLE.findall(page) == numbers, f"{chapter.stem}: solutions name others"


def test_the_exercises_page_follows_the_chapters_numbers(site):
    root, _ = site
    page = (root / "exercises.html").read_text()
    listed = re.findall(r'href="chapters/([^".#]+)\.html#[^"]+"><span[^>]*>Exercise (\d+)<', page)
    for chapter in CHAPTERS:
        numbers = [n for stem, n in listed if stem == chapter.stem]
        in_chapter = EXERCISE_TITLE.findall(
            (root / "chapters" / f"{chapter.stem}.html").read_text()
        )
        assert numbers == in_chapter, (chapter.stem, numbers, in_chapter)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_the_reading_time_stands_under_the_title(site, chapter):
    root, _ = site
    page = (root / "chapters" / f"{chapter.stem}.html").read_text()
    line = reading_time.reading_time_text(reading_time.measure_file(chapter)["minutes"])
    under_title = rf'</h1>\s*<p class="reading-time"><em>{re.escape(line)}</em></p>'
    assert re.search(under_title, page), f"{chapter.stem}: no {line!r} under the title"
    assert page.count('class="reading-time"') == 1


# Horizontal overflow at 1280 px: a code block, an output, a table or a display equation wider
# than the column would hide its end behind a scrollbar that is easy to miss. Folded content
# (dropdowns, toggles) is unfolded first, as a reader who opens it would see it.
OVERFLOW_JS = r"""
document.querySelectorAll('.toggle-hidden').forEach((el) => el.classList.remove('toggle-hidden'));
document.querySelectorAll('details').forEach((el) => { el.open = true; });
const over = [];
const wide = (el) => el.scrollWidth > el.clientWidth + 1;
for (const pre of document.querySelectorAll('div.cell_input pre, div.highlight pre')) {
  if (pre.offsetParent && !pre.closest('div.cell_output') && wide(pre)) {
    over.push('code: ' + pre.textContent.slice(0, 60));
  }
}
for (const out of document.querySelectorAll('div.cell_output div.output')) {
  if (!out.offsetParent) continue;
  const parts = [out, ...out.querySelectorAll('pre, table')];
  if (parts.some((el) => wide(el) || el.getBoundingClientRect().width > out.clientWidth + 1)) {
    over.push('output: ' + out.textContent.trim().slice(0, 60));
  }
}
for (const table of document.querySelectorAll('article table')) {
  if (!table.offsetParent || table.closest('div.cell_output')) continue;
  const box = table.parentElement;
  if (wide(box) || table.getBoundingClientRect().width > box.clientWidth + 1) {
    over.push('table: ' + table.textContent.trim().slice(0, 60));
  }
}
for (const eq of document.querySelectorAll('div.math')) {
  if (!eq.offsetParent) continue;
  const box = eq.querySelector('mjx-container') || eq;
  const math = box.querySelector('mjx-math');
  const width = math ? math.getBoundingClientRect().width : 0;
  if (wide(box) || width > eq.clientWidth + 1) {
    over.push('equation: ' + eq.textContent.trim().slice(0, 60));
  }
}
return over;
"""
MATHJAX_DONE_JS = """
const done = arguments[arguments.length - 1];
let tries = 0;
const wait = () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    MathJax.startup.promise.then(() => done(true));
  } else if (tries++ < 200) {
    setTimeout(wait, 100);
  } else {
    done(false);
  }
};
wait();
"""


@needs_browser
@pytest.mark.parametrize("mode", ["light", "dark"])
def test_nothing_scrolls_sideways_at_1280_px(pages, mode):
    found = {stem: page[mode] for stem, page in pages.items() if page[mode]}
    listed = [f"{stem}: {block}" for stem, blocks in found.items() for block in blocks]
    assert not found, f"{len(listed)} blocks wider than the column:\n" + "\n".join(listed)


@pytest.fixture(scope="module")
def pages(site, browser):  # noqa: F811
    """Each chapter opened once at 1280 px: its DOM once MathJax has run, its interactive
    figures' measurements, then the blocks wider than the column in light and in dark."""
    _, url = site
    browser.set_window_size(1280, 900)
    assert browser.execute_script("return window.innerWidth") == 1280
    out = {}
    for path in CHAPTERS:
        browser.get(f"{url}/chapters/{path.stem}.html")
        assert browser.execute_async_script(MATHJAX_DONE_JS), f"{path.stem}: MathJax never ran"
        page = {"dom": browser.page_source, "figures": browser.execute_async_script(FIGURES_JS)}
        for mode in ("light", "dark"):
            browser.execute_script(f"document.documentElement.dataset.theme = '{mode}';")
            page[mode] = browser.execute_script(OVERFLOW_JS)
        out[path.stem] = page
    return out


# Below 1500 px the page's contents are not beside the article: the visible "On this page"
# button of the article header must open them (in the theme's dialog) at every width.
@needs_browser
@pytest.mark.parametrize("width", [1100, 1280])
def test_the_contents_open_from_the_article_header(site, browser, width):  # noqa: F811
    from selenium.webdriver.common.by import By

    _, url = site
    browser.set_window_size(width, 900)
    browser.get(f"{url}/chapters/01_attention.html")
    assert not browser.find_element(By.CSS_SELECTOR, "div.bd-sidebar-secondary").is_displayed()
    buttons = browser.find_elements(By.CSS_SELECTOR, "button.secondary-toggle")
    visible = [button for button in buttons if button.is_displayed()]
    assert len(visible) == 1, f"{len(visible)} visible contents buttons at {width} px"
    visible[0].click()
    dialog = browser.find_element(By.ID, "pst-secondary-sidebar-modal")
    assert browser.execute_script("return arguments[0].open", dialog), "no contents dialog"
    links = [a.text for a in dialog.find_elements(By.CSS_SELECTOR, "a") if a.is_displayed()]
    assert "The derivation" in links and "Exercises" in links, links
