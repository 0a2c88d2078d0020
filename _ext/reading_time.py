"""Each chapter's reading time, printed under its title when the book is built.

The rule counts what a reader sees on the page by default:

- words of the markdown cells, each inline `$...$` counted as one word, leaving out the text of
  folded directives (`{dropdown}`, `{toggle}`, or any directive with `:class: dropdown` among its
  first options);
- non-blank lines of the code cells a reader sees, leaving out cells folded or removed by their
  tags (`hide-input`, `hide-cell`, `remove-input`, `remove-cell`);
- lines of text output, leaving out outputs folded or removed by their tags (`hide-output`,
  `remove-output`, `remove-cell`, `hide-cell`) and outputs that are a picture or HTML;

and minutes = words / 200 + code lines / 20 + output lines / 60.

As a Sphinx extension (registered in `_config.yml`) it inserts "About 50 minutes to read" under
the title of every notebook page, computed from the notebook being built, so the figure cannot
fall behind the chapter. `tests/test_reading_time.py` checks the rule.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 20
OUTPUT_LINES_PER_MINUTE = 60

HIDDEN_CODE_TAGS = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
HIDDEN_OUTPUT_TAGS = {"hide-output", "remove-output", "remove-cell", "hide-cell"}
FOLDED_DIRECTIVES = ("dropdown", "toggle")
PICTURE_TYPES = {"image/png", "image/svg+xml", "text/html"}

DIRECTIVE_OPENING = re.compile(r"^(`{3,}|:{3,})\s*\{([\w-]+)\}")
DROPDOWN_CLASS = re.compile(r"^\s*:class:.*\bdropdown\b")
INLINE_MATH = re.compile(r"\$[^$]*\$")
WORD = re.compile(r"[A-Za-z0-9']+")


def visible_markdown(source: str) -> str:
    """The markdown a reader sees unfolded: directive fences dropped, folded directives' text
    left out, every other directive's body kept."""
    kept: list[str] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        opening = DIRECTIVE_OPENING.match(lines[i])
        if not opening:
            kept.append(lines[i])
            i += 1
            continue
        fence, name = opening.groups()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        block = lines[i : end + 1]
        folded = name in FOLDED_DIRECTIVES or any(DROPDOWN_CLASS.match(b) for b in block[1:6])
        if not folded:
            kept.extend(block[1:-1])
        i = end + 1
    return "\n".join(kept)


def count_words(markdown: str) -> int:
    return len(WORD.findall(INLINE_MATH.sub(" x ", visible_markdown(markdown))))


def output_lines(output: dict) -> int:
    data = output.get("data", {})
    if PICTURE_TYPES & set(data):
        return 0
    text = "".join(output.get("text", "")) or "".join(data.get("text/plain", ""))
    return len(text.splitlines())


def measure(notebook: dict) -> dict[str, float]:
    """Words, code lines and output lines a reader sees in a notebook (its parsed JSON), and
    the minutes they take."""
    words = code = outputs = 0
    for cell in notebook["cells"]:
        source = "".join(cell.get("source", ""))
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            words += count_words(source)
        elif cell["cell_type"] == "code":
            if not tags & HIDDEN_CODE_TAGS:
                code += sum(1 for line in source.splitlines() if line.strip())
            if not tags & HIDDEN_OUTPUT_TAGS:
                outputs += sum(output_lines(o) for o in cell.get("outputs", []))
    minutes = (
        words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE + outputs / OUTPUT_LINES_PER_MINUTE
    )
    return {"words": words, "code": code, "outputs": outputs, "minutes": minutes}


def measure_file(path: str | Path) -> dict[str, float]:
    return measure(json.loads(Path(path).read_text(encoding="utf-8")))


def rounded_minutes(minutes: float) -> int:
    """To the minute below ten minutes, to five minutes above: a reading time is an estimate."""
    if minutes < 10:
        return max(1, round(minutes))
    return 5 * round(minutes / 5)


def reading_time_text(minutes: float) -> str:
    """'About 7 minutes to read', 'About 45 minutes to read', 'About 1 hour 40 minutes to
    read'."""
    total = rounded_minutes(minutes)
    hours, rest = divmod(total, 60)
    parts = []
    if hours:
        parts.append(f"{hours} hour" + ("s" if hours > 1 else ""))
    if rest:
        parts.append(f"{rest} minute" + ("s" if rest > 1 else ""))
    return f"About {' '.join(parts)} to read"


# The Sphinx extension.


def _insert_under_title(app: Any, doctree: Any) -> None:
    from docutils import nodes

    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix != ".ipynb":
        return
    section = doctree.next_node(nodes.section)
    if section is None or not section.children or not isinstance(section[0], nodes.title):
        return
    text = reading_time_text(measure_file(source)["minutes"])
    line = nodes.paragraph("", "", nodes.emphasis(text, text), classes=["reading-time"])
    section.insert(1, line)


def setup(app: Any) -> dict[str, Any]:
    app.connect("doctree-read", _insert_under_title)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
