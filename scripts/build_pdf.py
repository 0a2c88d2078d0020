"""Build the print edition: the whole book as one PDF, offline (`make pdf`).

Usage: python scripts/build_pdf.py [OUTPUT.pdf]   (default: _build/pdf/attention-derived.pdf)

Jupyter Book builds the book as one single HTML page (math typeset by the local MathJax, the
exercises' solutions printed open by the theme's print rules, the page rules of
``_static/print.css``), and Debian's headless Chromium prints that page to PDF, twice. Chromium
cannot number the entries of a table of contents, so the first print finds the page on which
each chapter starts, the numbers are written into the contents, and the second print is the
edition. The numbers cannot move between the two prints: every chapter starts on a new page and
a number shares its line with its title; the build checks that they did not.

The pages are then read back (poppler's pdftotext and pdftoppm) and the build fails on a
chapter that does not start at the top of a page, on a contents number that does not stand on
its title's line, and on an empty code box (the box of a cell left at the foot of a page while
its code moved on to the next). No network is used:
Chromium's background services are switched off.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from headless_chromium import CHROMIUM, OFFLINE_FLAGS
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "_build" / "pdf" / "attention-derived.pdf"
CHROMIUM_FLAGS = [
    *OFFLINE_FLAGS,
    "--no-pdf-header-footer",
    # time for MathJax to typeset the whole book before printing
    "--virtual-time-budget=60000",
]
# one entry of the contents the theme prints: <li ...><a ... href="#document-...">Title</a>
ENTRY = re.compile(
    r'(<li class="toctree-l1[^"]*">)'  # 1: the entry
    r'(<a class="reference internal[^"]*" href="#document-[^"]+">)(.*?)</a>'  # 2: link, 3: title
)
LETTER_WIDTH = 612.0  # pt: Chromium prints on US Letter
DPI = 30  # enough to see a code box (about 14 pixels a line of code)


def chromium() -> str:
    if CHROMIUM is None:
        raise SystemExit("build_pdf: headless Chromium not found: apt-get install -y chromium")
    return CHROMIUM


def flat(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def toc_span(page_html: str) -> tuple[int, int]:
    """Where the contents the theme prints lie in the page: from its id to the end of its list."""
    start = page_html.index('id="jb-print-toc"')
    return start, page_html.index("</nav>", start)


def contents(page_html: str) -> list[str]:
    """The titles the printed contents lists, in order (text only)."""
    toc = page_html[slice(*toc_span(page_html))]
    return [flat(html.unescape(re.sub(r"<[^>]+>", "", m.group(3)))) for m in ENTRY.finditer(toc)]


def page_texts(pdf: Path) -> list[str]:
    """The text of every page, in order."""
    run = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True)
    run.check_returncode()
    return run.stdout.split("\f")[:-1]


def start_pages(texts: list[str], titles: list[str]) -> dict[str, int | None]:
    """The page (from 1) at whose top each title stands, searched in order; None if nowhere."""
    found, page = {}, 1
    for title in titles:
        hit = next((p for p in range(page, len(texts)) if flat(texts[p]).startswith(title)), None)
        found[title] = None if hit is None else hit + 1
        page = hit + 1 if hit is not None else page
    return found


def numbered(page_html: str, pages: dict[str, int | None]) -> str:
    """The page with each contents entry's page number written before its title."""
    start, end = toc_span(page_html)

    def number(m: re.Match) -> str:
        title = flat(html.unescape(re.sub(r"<[^>]+>", "", m.group(3))))
        link = m.group(0)[len(m.group(1)) :]
        return f'{m.group(1)}<span class="print-page">{pages[title]}</span>{link}'

    return page_html[:start] + ENTRY.sub(number, page_html[start:end]) + page_html[end:]


def toc_titles(top_level: bool = False) -> list[str]:
    """The titles of the pages `_toc.yml` lists, in order: each file's first heading.

    ``top_level``: only the chapters, without the pages nested under them ("Going deeper"),
    which the printed contents do not list."""
    indent = "  " if top_level else r"\s*"
    files = re.findall(rf"^{indent}- file: (\S+)", (ROOT / "_toc.yml").read_text(), re.M)
    titles = []
    for name in files:
        path = next(ROOT.glob(f"{name}.*"))
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            text = path.read_text()
        titles.append(flat(re.search(r"^# (.+)$", text, re.M).group(1)))
    return titles


def printed_numbers(texts: list[str], titles: list[str]) -> dict[str, int | None]:
    """Title -> the page number the contents print beside it (None: not there). The contents
    are the pages before the first chapter's."""
    first = next(i for i, t in enumerate(texts) if i > 0 and flat(t).startswith(titles[0]))
    lines = {flat(line) for page in texts[:first] for line in page.splitlines()}
    found = {}
    for title in titles:
        hits = [x for x in lines if re.fullmatch(re.escape(title) + r" \d+", x)]
        found[title] = int(hits[0].rsplit(" ", 1)[1]) if len(hits) == 1 else None
    return found


def empty_boxes(image: Image.Image, min_rows: int = 4) -> list[tuple[int, int]]:
    """Bands of a grey page image (white paper) that are a code box with nothing in it.

    A row is inside a box when, between its first and last non-white pixel, almost nothing is
    white (a line of text outside a box is mostly white between its words). A band of such rows
    is an empty box when one flat grey fills most of it (a box's background; a shadow is a
    gradient) and nothing in it is dark (no ink: no code). Returns (first row, end row) pairs.
    """
    a = np.asarray(image.convert("L"), dtype=np.int16)
    inside = np.zeros(len(a), dtype=bool)
    for y, row in enumerate(a):
        ink = np.flatnonzero(row < 255)
        if len(ink) > 0.5 * a.shape[1]:
            span = row[ink[0] + 2 : ink[-1] - 1]
            inside[y] = span.size > 0.5 * a.shape[1] and (span == 255).mean() < 0.05
    bands, y = [], 0
    while y < len(a):
        z = y
        while z < len(a) and inside[z]:
            z += 1
        if z - y >= min_rows:
            band = a[y:z]
            cols = np.flatnonzero(band.min(axis=0) < 255)
            inner = band[:, cols[0] + 3 : cols[-1] - 2]  # without the box's borders
            values, counts = np.unique(inner, return_counts=True)
            grey = values[counts.argmax()]
            if counts.max() >= 0.6 * inner.size and 235 <= grey <= 252 and inner.min() > 200:
                bands.append((y, z))
        y = max(z, y + 1)
    return bands


def page_words(pdf: Path, last: int) -> list[tuple[int, float, float, str]]:
    """(page, left, baseline, text) of every word on pages 1..last (pdftotext's boxes, in pt)."""
    run = subprocess.run(
        ["pdftotext", "-bbox", "-f", "1", "-l", str(last), str(pdf), "-"],
        capture_output=True,
        text=True,
    )
    run.check_returncode()
    words = []
    for page, body in enumerate(run.stdout.split("<page ")[1:], start=1):
        for x, y, text in re.findall(r'<word xMin="([\d.]+)" yMin="[\d.]+" xMax="[\d.]+" '
                                     r'yMax="([\d.]+)">([^<]*)</word>', body):  # fmt: skip
            words.append((page, float(x), float(y), html.unescape(text)))
    return words


def numbers_off_the_line(words: list[tuple[int, float, float, str]], width: float) -> list[str]:
    """Page numbers of the contents (a number in the right fifth of a page ``width`` pt wide)
    that do not stand on the baseline of a title's words (within 0.5 pt)."""
    right = 0.8 * width
    off = []
    for page, x, y, text in words:
        if x >= right and text.isdigit():
            line = [w for p, wx, wy, w in words if p == page and wx < right and abs(wy - y) < 0.5]
            if not line:
                off.append(f"{text} (page {page})")
    return off


def page_images(pdf: Path, folder: Path) -> list[Path]:
    subprocess.run(["pdftoppm", "-r", str(DPI), "-gray", str(pdf), str(folder / "p")], check=True)
    return sorted(folder.glob("p-*.pgm"))


def problems(pdf: Path, titles: list[str]) -> list[str]:
    """What is wrong with the pages of ``pdf``: chapters that do not start a page, contents
    numbers off their title's line, empty boxes."""
    found = []
    starts = start_pages(page_texts(pdf), titles)
    found += [f"{t!r} does not start at the top of a page" for t, p in starts.items() if p is None]
    if starts[titles[0]]:
        words = page_words(pdf, starts[titles[0]] - 1)  # the pages of the contents
        off = numbers_off_the_line(words, width=LETTER_WIDTH)
        found += [f"contents: {n} is not on its title's line" for n in off]
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(page_images(pdf, Path(tmp)), start=1):
            found += [f"page {i}: an empty code box, rows {a}-{b} at {DPI} dpi" for a, b in
                      empty_boxes(Image.open(path))]  # fmt: skip
    return found


def print_page(page: Path, out: Path, profile: Path) -> None:
    subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--print-to-pdf={out}",
         page.as_uri()],
        check=True,
        capture_output=True,
        timeout=600,
    )  # fmt: skip
    if not out.exists() or out.stat().st_size == 0:
        raise SystemExit(f"build_pdf: Chromium wrote no PDF at {out}")


def build(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    jb = Path(sys.executable).parent / "jupyter-book"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [str(jb), "build", "--all", "-W", "--keep-going", "--builder", "singlehtml",
             "--path-output", tmp, str(ROOT)],
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        page = Path(tmp) / "_build" / "singlehtml" / "intro.html"
        source = page.read_text()
        titles = contents(source)
        first = Path(tmp) / "first.pdf"
        print_page(page, first, Path(tmp) / "profile")
        starts = start_pages(page_texts(first), titles)
        lost = [t for t, p in starts.items() if p is None]
        if lost:
            raise SystemExit(f"build_pdf: no page starts with these chapters: {lost}")
        page.write_text(numbered(source, starts))
        print_page(page, out, Path(tmp) / "profile")
    moved = {t: p for t, p in start_pages(page_texts(out), titles).items() if p != starts[t]}
    if moved:
        raise SystemExit(f"build_pdf: chapters moved after numbering the contents: {moved}")
    return out


if __name__ == "__main__":
    target = build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
    texts = page_texts(target)
    shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
    print(f"pdf: {shown}, {len(texts)} pages")
    wrong = problems(target, toc_titles())
    for line in wrong:
        print(f"build_pdf: {line}")
    sys.exit(1 if wrong else 0)
