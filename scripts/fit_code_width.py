"""Format the notebooks' code to the width of the book's page column (`make format-notebooks`).

At 1280 px the page column shows 75 characters of code, and 73 inside an exercise or a solution
box: formatted to 72 they fit everywhere. ``ruff format`` wraps code at that
width, but not comments: a trailing comment that makes a line too long is moved, with its
indentation, onto its own line above the code it describes, and the cell is formatted again.
Lines that are still too long (a long string, say) are listed for a human to shorten;
``--check`` exits 1 while any remain or any cell would change.

Usage: python scripts/fit_code_width.py [--check] [NOTEBOOK ...]
"""

from __future__ import annotations

import glob
import io
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 72


def ruff_format(source: str) -> str:
    ruff = Path(sys.executable).parent / "ruff"
    run = subprocess.run(
        [str(ruff), "format", "--isolated", f"--line-length={WIDTH}", "-"],
        input=source,
        capture_output=True,
        text=True,
    )
    return run.stdout if run.returncode == 0 else source


def wrap_comment_lines(source: str) -> str:
    """Wrap each over-long comment that stands on a line of its own."""
    out = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        if len(line) > WIDTH and stripped.startswith("# "):
            indent = line[: len(line) - len(stripped)]
            out += textwrap.wrap(
                stripped[2:], WIDTH, initial_indent=indent + "# ", subsequent_indent=indent + "# "
            )
        else:
            out.append(line)
    return "\n".join(out)


def reflow_comment_blocks(source: str) -> str:
    """Re-wrap a block of full-line comments that an earlier wrap left with a stranded word.

    A block (consecutive comment lines of one indentation) is re-wrapped as one paragraph when
    one of its lines, not the last, is shorter than 25 characters and the next line continues
    the sentence (starts in lower case); other blocks keep their line breaks.
    """
    lines = source.split("\n")
    out, i = [], 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith("# "):
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(stripped)]
        j = i
        while (
            j < len(lines)
            and lines[j].startswith(indent + "# ")
            and (lines[j][len(indent) :].startswith("# "))
        ):
            j += 1
        block = [line[len(indent) + 2 :] for line in lines[i:j]]
        stranded = any(
            len(block[k]) < 25 and block[k + 1][:1].islower() for k in range(len(block) - 1)
        )
        if stranded:
            text = " ".join(part.strip() for part in block)
            out += textwrap.wrap(
                text, WIDTH, initial_indent=indent + "# ", subsequent_indent=indent + "# "
            )
        else:
            out += lines[i:j]
        i = j
    return "\n".join(out)


def lift_comments(source: str) -> str:
    """Move each trailing comment of an over-long line onto its own line above it."""
    lines = source.split("\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    moves = {}
    for tok in tokens:
        row, col = tok.start
        line = lines[row - 1]
        if tok.type == tokenize.COMMENT and len(line) > WIDTH and line[:col].strip():
            moves[row - 1] = col
    for index in sorted(moves, reverse=True):
        line = lines[index]
        col = moves[index]
        indent = line[: len(line) - len(line.lstrip())]
        lines[index : index + 1] = [indent + line[col:].strip(), line[:col].rstrip()]
    return "\n".join(lines)


def _split_point(body: str, limit: int) -> int | None:
    """Index of a space in ``body`` (a string literal's text) outside braces, at most ``limit``."""
    depth, best, i = 0, None, 0
    while i < len(body) and i <= limit:
        c = body[i]
        if c in "{}" and body[i : i + 2] in ("{{", "}}"):
            i += 2
            continue
        depth += c == "{"
        depth -= c == "}"
        if c == " " and depth == 0 and i > 0:
            best = i + 1  # keep the space at the end of the first part
        i += 1
    return best


def split_strings(source: str) -> str:
    """Split the longest one-line string literal of each over-long line into two adjacent ones.

    Adjacent literals are concatenated by Python, so the program prints the same; the split is
    at a space outside any f-string replacement field. A literal not inside brackets is wrapped
    in parentheses.
    """
    lines = source.split("\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    depth_at = {}
    depth = 0
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        depth_at[tok.start] = depth
    edits = {}
    for tok in tokens:
        (row, col), (erow, ecol) = tok.start, tok.end
        # only the literal that crosses the column's edge, on a line of its own making
        if tok.type != tokenize.STRING or row != erow or not col < WIDTH < ecol:
            continue
        text = tok.string
        prefix = text[: len(text) - len(text.lstrip("rbfuRBFU"))]
        quote = text[len(prefix)]
        if text[len(prefix) : len(prefix) + 3] in ('"""', "'''"):
            continue
        body = text[len(prefix) + 1 : -1]
        cut = _split_point(body, WIDTH - col - len(prefix) - 3)
        if cut is None or cut >= len(body) or body[cut - 2 : cut] == "\\ ":
            continue
        first = f"{prefix}{quote}{body[:cut]}{quote}"
        second = f"{prefix}{quote}{body[cut:]}{quote}"
        joined = f"{first} {second}" if depth_at[tok.start] > 0 else f"({first} {second})"
        edits[row - 1] = (joined, col, ecol)
    for index, (joined, col, ecol) in edits.items():
        line = lines[index]
        lines[index] = line[:col] + joined + line[ecol:]
    return "\n".join(lines)


def drop_format_skips(source: str) -> str:
    """Remove ``# fmt: skip`` from a cell with an over-long line: the column wins over layout."""
    if not any(len(line) > WIDTH for line in source.split("\n")):
        return source
    return re.sub(r"\s*# fmt: (skip|off|on)\b", "", source)


def wrap_docstrings(source: str) -> str:
    """Turn an over-long one-line docstring into a wrapped multi-line one."""
    out = []
    for line in source.split("\n"):
        m = re.match(r'^(\s*)"""(.*)"""$', line)
        if len(line) > WIDTH and m:
            indent, text = m.groups()
            body = textwrap.wrap(text, WIDTH - len(indent) - 3)
            if len(body) == 1:  # one line would be joined back by the formatter: split it
                body = textwrap.wrap(text, len(text) // 2 + 1)
            out += [f'{indent}"""{body[0]}', *(indent + b for b in body[1:]), f'{indent}"""']
        else:
            out.append(line)
    return "\n".join(out)


def fit(source: str) -> str:
    if source.lstrip().startswith(("%", "!")):
        return source
    current = ruff_format(wrap_docstrings(drop_format_skips(source)))
    for _ in range(6):
        new = ruff_format(
            reflow_comment_blocks(
                wrap_docstrings(wrap_comment_lines(split_strings(lift_comments(current))))
            )
        )
        if new == current:
            break
        current = new
    return current.rstrip("\n")


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"] or sorted(glob.glob(str(ROOT / "chapters/*.ipynb")))
    changed, long_lines = [], []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        dirty = False
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or "remove-cell" in cell.metadata.get("tags", []):
                continue
            new = fit(cell.source)
            if new != cell.source:
                dirty = True
                cell.source = new
            for line in new.split("\n"):
                if len(line) > WIDTH:
                    long_lines.append(f"{Path(path).name} cell {i}: {len(line)} chars: {line}")
        if dirty:
            changed.append(path)
            if not check:
                nbformat.write(nb, path)
    for line in long_lines:
        print(line)
    verb = "would change" if check else "changed"
    print(
        f"fit_code_width: {verb} {len(changed)} notebook(s); {len(long_lines)} line(s) over {WIDTH}"
    )
    return 1 if check and (changed or long_lines) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
