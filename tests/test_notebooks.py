"""Notebook hygiene: every chapter is stored as one clean top-to-bottom run.

Checked for every notebook in chapters/: executed top to bottom in one run; no error output and
no traceback; nothing on stderr that looks like a warning; no machine paths or memory addresses
in outputs; the hidden install cell first, naming the repository URL of _config.yml; an
execution budget in the metadata; every ``nbval-ignore-output`` cell followed by an assertion
of its claim; every chapter listed in _toc.yml. Prints the number of ignored cells per notebook.
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.notebooks import CHAPTERS, ROOT, URL_LINE, code_cells, config, read, tags

MACHINE_PATH = re.compile(r"(/work/|/tmp/|/root/|/home/|\.venv/|site-packages)")
ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
ASSERTS = re.compile(r"\bassert\b|np\.testing\.|assert_allclose|assert_array")

ids = [p.name for p in CHAPTERS]


def output_text(out) -> str:
    if "text" in out:
        return "".join(out["text"])
    data = out.get("data", {})
    return "".join(data.get("text/plain", "")) + "".join(data.get("text/html", ""))


def test_there_are_chapters():
    assert CHAPTERS, "no notebooks in chapters/"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_executed_top_to_bottom_in_one_run(path):
    counts = [c.execution_count for c in code_cells(read(path))]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: execution counts {counts}; run `make execute NB=chapters/{path.name}`"
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_outputs_are_clean(path):
    problems = []
    for i, cell in enumerate(read(path).cells):
        for out in cell.get("outputs", []):
            text = output_text(out)
            if out["output_type"] == "error" or "Traceback" in text:
                problems.append(f"cell {i}: error output")
            if out.get("name") == "stderr":
                problems.append(f"cell {i}: stderr output {text[:80]!r}")
            if MACHINE_PATH.search(text):
                problems.append(f"cell {i}: machine path {MACHINE_PATH.search(text).group(0)!r}")
            if ADDRESS.search(text):
                problems.append(f"cell {i}: memory address in output")
    assert not problems, f"{path.name}: " + "; ".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_install_cell_comes_first_and_names_the_configured_url(path):
    first = read(path).cells[0]
    assert first.cell_type == "code" and "remove-cell" in tags(first), (
        f"{path.name}: the first cell must be the install cell tagged remove-cell"
    )
    match = URL_LINE.search(first.source)
    assert match, f"{path.name}: the install cell must define REPOSITORY_URL"
    assert match.group(1) == config()["repository"]["url"], (
        f"{path.name}: install cell URL {match.group(1)} differs from _config.yml; "
        "run scripts/set_repository_url.py"
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_budget_is_declared(path):
    budget = read(path).metadata.get("book", {}).get("budget_seconds")
    assert isinstance(budget, int) and 0 < budget <= 600, f"{path.name}: budget {budget!r}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_ignored_outputs_have_their_claim_asserted(path):
    cells = read(path).cells
    ignored, missing = 0, []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code" or "nbval-ignore-output" not in tags(cell):
            continue
        ignored += 1
        following = cells[i + 1].source if i + 1 < len(cells) else ""
        if not (ASSERTS.search(cell.source) or ASSERTS.search(following)):
            missing.append(i)
    print(f"{path.name}: {ignored} nbval-ignore-output cell(s)")
    assert not missing, f"{path.name}: ignored cells {missing} assert nothing here or next"


GLUE = "application/papermill.record/text/plain"
LONG_FLOAT = re.compile(r"-?\d+\.\d*(e-?\d+)?")


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_glued_floats_in_compared_cells_are_rounded(path):
    # nbval compares a glue record as text: a float glued at full precision differs in its
    # last digits under other BLAS or SIMD kernels. Glue it rounded to the digits the prose
    # prints (round(x, 3)), or from a cell whose output is not compared.
    long = []
    for i, cell in enumerate(read(path).cells):
        if cell.cell_type != "code" or "nbval-ignore-output" in tags(cell):
            continue
        for out in cell.get("outputs", []):
            text = out.get("data", {}).get(GLUE, "")
            if LONG_FLOAT.fullmatch(text):
                mantissa = text.split("e")[0].lstrip("-").replace(".", "").lstrip("0")
                if len(mantissa) > 7:
                    long.append(f"cell {i}: {text}")
    assert not long, f"{path.name}: glued floats not rounded: " + "; ".join(long)


def test_every_chapter_is_in_the_table_of_contents():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = set()

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                listed.add(entry["file"])
            walk(entry.get("chapters") or entry.get("sections"))
            for part in entry.get("parts", []) if isinstance(entry, dict) else []:
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    missing = [p.name for p in CHAPTERS if f"chapters/{p.stem}" not in listed]
    assert not missing, f"not in _toc.yml: {missing}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_every_figure_has_a_caption_and_alt_text(path):
    missing = []
    for i, cell in enumerate(read(path).cells):
        has_image = any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
        if not has_image:
            continue
        meta = cell.metadata.get("mystnb", {})
        if not meta.get("figure", {}).get("caption") or not meta.get("image", {}).get("alt"):
            missing.append(i)
    assert not missing, f"{path.name}: figure cells {missing} lack mystnb figure caption or alt"


MAIN_PATH = [p for p in CHAPTERS if "_deeper_" not in p.stem]
DEEPER = [p for p in CHAPTERS if "_deeper_" in p.stem]


def _links(path, target) -> bool:
    prose = "".join(c.source for c in read(path).cells if c.cell_type == "markdown")
    return f"({target.name})" in prose or f"({target.stem}" in prose


@pytest.mark.parametrize("path", MAIN_PATH[:-1], ids=[p.name for p in MAIN_PATH[:-1]])
def test_every_chapter_links_to_the_next(path):
    following = MAIN_PATH[MAIN_PATH.index(path) + 1]
    assert _links(path, following), (
        f"{path.name} does not link to the next chapter, {following.name}"
    )


@pytest.mark.parametrize("path", DEEPER, ids=[p.name for p in DEEPER])
def test_every_deeper_page_and_its_chapter_link_to_each_other(path):
    """A "Going deeper" page NN_deeper_<slug> links back to chapter NN, and NN links to it."""
    (chapter,) = [p for p in MAIN_PATH if p.stem[:3] == path.stem[:3]]
    assert _links(path, chapter), f"{path.name} does not link back to {chapter.name}"
    assert _links(chapter, path), f"{chapter.name} does not link to {path.name}"


def test_every_exercise_is_listed_on_the_exercises_page():
    page = (ROOT / "exercises.md").read_text()
    labels = []
    for path in CHAPTERS:
        for cell in read(path).cells:
            if cell.cell_type == "markdown":
                labels += re.findall(r"```\{exercise\}[^\n]*\n:label:\s*(\S+)", cell.source)
    assert labels, "no exercises found"
    missing = [label for label in labels if f"{{ref}}`{label}`" not in page]
    assert not missing, f"exercises.md does not list {missing}"


TIMER = re.compile(r"perf_counter|process_time|timeit|best_time|time_pairs|median_time|min_time")


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_timing_claims_are_declared(path):
    """A chapter with a cell that reads a clock and asserts declares whether its asserts depend
    on wall time (``book.timing_claims`` true or false), so that the loaded run of
    `make test-portable` re-executes those that do with every core busy."""
    nb = read(path)
    declared = nb.metadata.get("book", {}).get("timing_claims")
    timed = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and TIMER.search(c.source) and ASSERTS.search(c.source)
    ]
    if timed:
        assert declared in (True, False), (
            f"{path.name}: cells {timed} read a clock and assert: declare book.timing_claims"
        )


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_code_fits_the_page_column(path):
    """Every code cell is formatted to 88 characters (the page column shows more from 1280 px)
    and undamaged: no line that is only a closing bracket and a comment, no split string, no line
    over 88 (``scripts/fit_code_width.py --check``; tests/test_fit_code_width.py tests it)."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fit_code_width.py"), "--check", str(path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:]
