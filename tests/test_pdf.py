"""The print edition: one PDF of the whole book, built offline, with math typeset.

Runs `make pdf`'s own command (scripts/build_pdf.py) into a temporary folder, so CI need not
build the PDF a second time, and reads it back with poppler's
pdfinfo, pdftotext and pdftoppm: the page count, every chapter's title and reading time, the
exercises' solutions numbered from 1 in every chapter, every figure, no TeX left raw, every
chapter at the top of the page the contents give, and no empty code box. Skipped, with
instructions, where Chromium or poppler is missing (under CI a skip fails the run).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.notebooks import CHAPTERS, ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import build_pdf  # noqa: E402

sys.path.insert(0, str(ROOT / "_ext"))
import reading_time  # noqa: E402

TOOLS = [shutil.which(t) for t in ("pdfinfo", "pdftotext", "pdfimages", "pdftoppm")]
pytestmark = pytest.mark.skipif(
    None in TOOLS or not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="the PDF test needs Chromium and poppler-utils: "
    "apt-get install -y chromium poppler-utils",
)


def chapter_title(path: Path) -> str:
    for cell in json.loads(path.read_text())["cells"]:
        m = re.search(r"^# (.+)$", "".join(cell["source"]), re.M)
        if cell["cell_type"] == "markdown" and m:
            return m.group(1)
    raise AssertionError(f"{path.name} has no title")


@pytest.fixture(scope="module")
def pdf(tmp_path_factory):
    out = tmp_path_factory.mktemp("pdf") / "book.pdf"
    script = [sys.executable, str(ROOT / "scripts" / "build_pdf.py"), str(out)]
    made = subprocess.run(script, capture_output=True, text=True, cwd=ROOT)
    assert made.returncode in (0, 1) and out.exists(), made.stdout + made.stderr
    info = subprocess.run(["pdfinfo", str(out)], capture_output=True, text=True, check=True)
    pages = int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.M).group(1))
    text = subprocess.run(
        ["pdftotext", "-layout", str(out), "-"], capture_output=True, text=True, check=True
    ).stdout
    return out, pages, text, made


def flat(s: str) -> str:
    return re.sub(r"\s+", " ", s)


def test_page_count(pdf):
    _, pages, _, _ = pdf
    # about twenty pages a chapter and ten a "Going deeper" page; a build that lost its
    # notebooks would have a handful
    assert 10 * len(CHAPTERS) <= pages <= 60 * len(CHAPTERS), pages


def test_every_chapter_title_is_in_it(pdf):
    _, _, text, _ = pdf
    body = flat(text)
    missing = [p.stem for p in CHAPTERS if flat(chapter_title(p)) not in body]
    assert not missing


def test_no_raw_tex_is_left(pdf):
    """Math left untypeset keeps its delimiters; code cells may hold TeX in strings (plot labels
    such as r"$\\sqrt{d_k}$"), so commands like \\sqrt are not a sign of failure."""
    _, _, text, _ = pdf
    for raw in ("\\(", "\\)", "\\[", "\\]", "$$"):
        assert raw not in text, f"raw TeX delimiter {raw!r} in the PDF"


def test_solutions_are_printed(pdf):
    _, _, text, _ = pdf
    exercises = sum(
        "".join(c["source"]).count("{solution-start}")
        for p in CHAPTERS
        for c in json.loads(p.read_text())["cells"]
    )
    assert flat(text).count("Solution to Exercise") == exercises
    # numbered per page: every page with exercises has a first one, none has more than nine
    with_exercises = [p for p in CHAPTERS if "{solution-start}" in p.read_text()]
    assert flat(text).count("Solution to Exercise 1 (") == len(with_exercises)


def test_every_chapter_shows_its_reading_time(pdf):
    _, _, text, _ = pdf
    body = flat(text)
    for path in CHAPTERS:
        title = flat(chapter_title(path))
        line = reading_time.reading_time_text(reading_time.measure_file(path)["minutes"])
        assert f"{title} {line}" in body, f"{path.stem}: no {line!r} under its title"


def test_figures_are_present(pdf):
    out, _, _, _ = pdf
    listed = subprocess.run(["pdfimages", "-list", str(out)], capture_output=True, text=True)
    images = len(listed.stdout.splitlines()) - 2  # two header lines
    pngs = sum(
        "image/png" in o.get("data", {})
        for p in CHAPTERS
        for c in json.loads(p.read_text())["cells"]
        for o in c.get("outputs", [])
    )
    assert images >= pngs, (images, pngs)


def test_every_chapter_starts_at_the_top_of_the_page_the_contents_give(pdf):
    out, _, _, _ = pdf
    texts = build_pdf.page_texts(out)
    titles = build_pdf.toc_titles()
    # the contents list the pages in _toc.yml's order, "Going deeper" pages under their chapter
    assert sorted(flat(chapter_title(p)) for p in CHAPTERS) == sorted(titles[: len(CHAPTERS)])
    numbers = build_pdf.printed_numbers(texts, build_pdf.toc_titles(top_level=True))
    missing = [t for t, n in numbers.items() if n is None]
    assert not missing, f"the contents give no page for {missing}"
    wrong = {t: n for t, n in numbers.items() if not flat(texts[n - 1]).startswith(t)}
    assert not wrong, f"these chapters do not start at the top of the page given: {wrong}"
    assert list(numbers.values()) == sorted(numbers.values())


def test_no_code_box_is_left_empty(pdf):
    """`make pdf` checks its pages (build_pdf.problems: chapter starts, the contents' numbers,
    empty code boxes) and exits 1 on any problem, naming it."""
    _, pages, _, made = pdf
    assert made.returncode == 0, made.stdout
    assert re.search(rf"^pdf: .*, {pages} pages$", made.stdout, re.M), made.stdout


def page_with(*boxes):
    """A white page, 120 x 100 pixels, with grey boxes (top, bottom, fill, text rows)."""
    a = np.full((120, 100), 255, dtype=np.uint8)
    for top, bottom, fill, text in boxes:
        a[top:bottom, 10:90] = fill
        a[top:bottom, 10] = a[top:bottom, 89] = 186  # the borders
        for y in text:
            a[y, 15:60:3] = 40  # a line of code
    return Image.fromarray(a)


def test_the_empty_box_check_sees_an_empty_box_and_only_that():
    assert build_pdf.empty_boxes(page_with((90, 120, 247, []))) == [(90, 120)]
    assert build_pdf.empty_boxes(page_with((10, 40, 247, [15, 25]))) == []
    shadow = page_with((10, 40, 247, []))
    a = np.asarray(shadow).copy()
    a[10:40, 11:89] = np.linspace(233, 254, 78).astype(np.uint8)  # a gradient, not a box
    assert build_pdf.empty_boxes(Image.fromarray(a)) == []
    two = page_with((5, 30, 247, [10, 20]), (60, 66, 247, []))
    assert build_pdf.empty_boxes(two) == [(60, 66)]


def test_a_contents_number_off_its_titles_line_is_found():
    # (page, left, baseline, text) in pt, as pdftotext's boxes give them, on a 612 pt page
    title = [(1, 88.0, 199.3, "Scaled"), (1, 128.0, 199.3, "attention")]
    off = functools.partial(build_pdf.numbers_off_the_line, width=612.0)
    assert off([*title, (1, 569.0, 199.3, "34")]) == []
    assert off([*title, (1, 569.0, 196.3, "34")]) == ["34 (page 1)"]
    # a number inside a line of text is not a contents number
    assert off([*title, (1, 300.0, 150.0, "2017")]) == []
