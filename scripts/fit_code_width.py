"""Format the notebooks' code to the book's width, 88 characters (`make format-notebooks`).

The page column shows at least 88 characters of code at 1280 px and wider, also inside an
exercise or solution box. ``ruff format`` lays code out at 88 and joins what fits on one line
(brackets, implicitly concatenated strings). What it would leave bent is put right:

- a trailing comment that does not fit on its line is moved onto its own line above the
  statement (or above the item inside brackets) it describes, with that line's indentation;
  it stays at the end of the line when the laid-out line fits with it. (ruff would otherwise
  break the statement open and leave the comment behind a closing bracket: ``)  # (6, 3)``.)
  The trailing comma that such a break left before the bracket goes too, so the statement can
  join again;
- a string literal split over lines into adjacent literals is re-packed into as few lines as
  fit (each piece joined to the one above while the line fits);
- a docstring broken over lines with no blank line in it is joined when it fits on one line;
- in a block of full-line comments, a sentence broken over lines (continued in lower case) is
  joined when it fits on one line, or re-wrapped when it has a stranded short line; a
  full-line comment over the width is wrapped.

A cell whose program (its AST, blind to layout) would change is left as it is.

``--check`` changes nothing and exits 1 when a cell would change or its code has damage a
formatter cannot repair: a line that is only closing bracket(s) and a comment; a split string
(two adjacent literals on consecutive lines that would fit joined on the first one); a word
or two stranded on a line of their own inside a docstring, or continuing a comment's sentence
in lower case, where they fit on the line above; a line over 88 characters (a long string,
say, for a human to shorten). Each is listed with its cell.

``--join-exploded`` also joins the brackets that a trailing comma holds open one item per
line, wherever they fit on one line: for code that was formatted to a narrower width, whose
brackets the width broke open and ruff would otherwise keep open. Re-read what it joins: a
table that reads better one row per line can be opened again by hand with a trailing comma,
and the formatter (without the option) keeps it open from then on. It also drops the
parentheses such a width put around the tuple of an unpacking assignment that now fits on one
line (``a, b = (x, y)``).

Usage: python scripts/fit_code_width.py [--check] [--join-exploded] [NOTEBOOK ...]
"""

from __future__ import annotations

import ast
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
WIDTH = 88
LIFTED = "# <<lifted>> "  # marks, between two passes, a comment moved above its statement
BRACKET_COMMENT = re.compile(r"^\s*[\)\]\}]+[\)\]\},:]*\s*#")
# a line that starts with a closing bracket and ends with a comment: ``).max()  # (B, T)``
BRACKET_LEAD = re.compile(r"^\s*[\)\]\}]")
STRING_PREFIX = re.compile(r"^([rRbBuUfF]*)('''|\"\"\"|'|\")")


def ruff_format(source: str, join_exploded: bool = False) -> str:
    ruff = Path(sys.executable).parent / "ruff"
    options = ["--config", "format.skip-magic-trailing-comma=true"] if join_exploded else []
    run = subprocess.run(
        [str(ruff), "format", "--isolated", f"--line-length={WIDTH}", *options, "-"],
        input=source,
        capture_output=True,
        text=True,
    )
    return run.stdout if run.returncode == 0 else source


def _tokens(source: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def _statement_starts(tokens: list[tokenize.TokenInfo]) -> dict[int, int]:
    """For each physical row (1-based), the row on which its logical line starts."""
    start_of, start, depth = {}, None, 0
    for tok in tokens:
        if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if start is None and tok.type not in (tokenize.NL, tokenize.COMMENT):
            start = tok.start[0]
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        for row in range(tok.start[0], tok.end[0] + 1):
            start_of.setdefault(row, start if start is not None else row)
        if tok.type == tokenize.NEWLINE:
            start = None
    return start_of


def _depths(tokens: list[tokenize.TokenInfo]) -> tuple[dict[int, int], dict[int, int]]:
    """Bracket depth at the start and at the end of each physical row (1-based)."""
    first, last, depth = {}, {}, 0
    for tok in tokens:
        first.setdefault(tok.start[0], depth)
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        last[tok.end[0]] = depth
    return first, last


def _opening_rows(tokens: list[tokenize.TokenInfo]) -> dict[tuple[int, int], int]:
    """For each closing bracket (by position), the row of the bracket it closes."""
    stack, opened = [], {}
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            stack.append(tok.start[0])
        elif tok.type == tokenize.OP and tok.string in ")]}" and stack:
            opened[tok.start] = stack.pop()
    return opened


def lift_comments(source: str, drop_commas: bool = True) -> str:
    """Move the trailing comment of a bent or over-long line above what it describes.

    A comment at the end of a line that starts with a closing bracket (ruff broke the
    statement open to keep the comment on it) goes above the line that opened the first of
    those brackets: the statement's first line, or an item inside an outer bracket. The
    trailing comma before those brackets, which only held them open, is dropped. A comment at
    the end of an over-long line that starts a statement goes above the statement. Both are
    marked, so that ``settle_comments`` can put them back at the end of the line once the code
    is laid out again, if they fit there. A trailing comment on an over-long line inside
    brackets goes on its own line above it.
    """
    lines = source.split("\n")
    tokens = _tokens(source)
    if tokens is None:
        return source
    start_of = _statement_starts(tokens)
    opened = _opening_rows(tokens)
    above: dict[int, list[str]] = {}
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        line = lines[row - 1]
        code = line[:col].rstrip()
        if not code.strip() or tok.string.startswith(("# fmt:", "# noqa", "# type:")):
            continue
        start = start_of.get(row, row)
        bent = BRACKET_LEAD.match(line) is not None
        if not bent and len(line) <= WIDTH:
            continue
        text = tok.string.lstrip("#").strip()
        if bent:
            target = opened.get((row, len(line) - len(line.lstrip())), start)
        else:
            target = start if start == row else row
        indent = re.match(r"\s*", lines[target - 1]).group(0)
        mark = LIFTED if bent or start == row else "# "
        above.setdefault(target - 1, []).append(indent + mark + text)
        lines[row - 1] = code
        if bent and drop_commas and row >= 2 and lines[row - 2].rstrip().endswith(","):
            lines[row - 2] = lines[row - 2].rstrip()[:-1]
    for index in sorted(above, reverse=True):
        lines[index:index] = above[index]
    lifted = "\n".join(lines)
    if drop_commas and program(lifted) != program(source):  # a one-item tuple, say
        return lift_comments(source, drop_commas=False)
    return lifted


def settle_comments(source: str) -> str:
    """Put each lifted comment at the end of the line below it if that line is a whole
    statement or a whole item inside brackets and the comment fits there; else leave it above.
    """
    lines = source.split("\n")
    tokens = _tokens(source) or []
    start_of = _statement_starts(tokens)
    first, last = _depths(tokens)
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(LIFTED):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        comments = []
        while i < len(lines) and lines[i].lstrip().startswith(LIFTED):
            comments.append("# " + lines[i].lstrip()[len(LIFTED) :])
            i += 1
        row = i + 1  # the line below, 1-based
        nxt = lines[i] if i < len(lines) else ""
        whole = (
            nxt.strip()
            and "#" not in nxt
            and not nxt.rstrip().endswith(":")
            and first.get(row) == last.get(row)
            and (
                first.get(row, 0) > 0  # a whole item inside brackets
                or start_of.get(row) == row != start_of.get(row + 1, row + 1)  # a statement
            )
        )
        if whole and len(comments) == 1 and len(nxt) + 2 + len(comments[0]) <= WIDTH:
            out.append(f"{nxt}  {comments[0]}")
            i += 1
        else:
            out += [indent + c for c in comments]
    return "\n".join(out)


def program(source: str) -> str | None:
    """The program a cell's code stands for, blind to layout: its AST, with the constant parts
    of each f-string merged and each docstring's whitespace collapsed. None if it does not parse.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            doc = body[0].value
            if isinstance(doc, ast.Constant) and isinstance(doc.value, str):
                doc.value = " ".join(doc.value.split())
        if isinstance(node, ast.JoinedStr):
            values = []
            for v in node.values:
                if values and isinstance(v, ast.Constant) and isinstance(values[-1], ast.Constant):
                    values[-1] = ast.Constant(values[-1].value + v.value)
                else:
                    values.append(v)
            node.values = values
    return ast.dump(tree)


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


def _sentences(block: list[str]) -> list[list[str]]:
    """A block of comment texts cut where a line does not continue the one above (a line that
    does not start in lower case starts a new group)."""
    groups: list[list[str]] = []
    for part in block:
        if groups and part[:1].islower():
            groups[-1].append(part)
        else:
            groups.append([part])
    return groups


def reflow_comment_blocks(source: str) -> str:
    """Re-wrap a block of full-line comments that an earlier wrap left with a stranded word.

    Consecutive comment lines of one indentation are cut into groups, each a line and the
    lines below it that continue it (start in lower case). A group is re-wrapped as one
    paragraph when one of its lines, not the last, is shorter than 25 characters, or when it
    fits on one line; other groups keep their line breaks.
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
        while j < len(lines) and lines[j].startswith(indent + "# "):
            j += 1
        for block in _sentences([line[len(indent) + 2 :] for line in lines[i:j]]):
            text = " ".join(part.strip() for part in block)
            stranded = any(len(block[k]) < 25 for k in range(len(block) - 1))
            if stranded or (len(block) > 1 and len(indent) + 2 + len(text) <= WIDTH):
                out += textwrap.wrap(
                    text, WIDTH, initial_indent=indent + "# ", subsequent_indent=indent + "# "
                )
            else:
                out += [indent + "# " + part for part in block]
        i = j
    return "\n".join(out)


def join_docstrings(source: str) -> str:
    """Join a docstring broken over lines (no blank line in it) when it fits on one line."""
    lines = source.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r'^(\s*)"""(\S.*)$', lines[i])
        if not m or m.group(2).endswith('"""'):
            out.append(lines[i])
            i += 1
            continue
        indent, parts, j = m.group(1), [m.group(2).strip()], i + 1
        while j < len(lines) and lines[j].strip() and '"""' not in lines[j]:
            parts.append(lines[j].strip())
            j += 1
        closing = lines[j].strip() if j < len(lines) else ""
        if closing.endswith('"""') and closing.count('"""') == 1:
            parts.append(closing[:-3].strip())
            text = " ".join(p for p in parts if p)
            joined = f'{indent}"""{text}"""'
            if len(joined) <= WIDTH and '"' not in text[-1:]:
                out.append(joined)
                i = j + 1
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _literal(text: str) -> tuple[str, str, str] | None:
    """(prefix, quote, body) of a one-line, single-quoted-kind string literal, else None."""
    head = STRING_PREFIX.match(text)
    if not head or head.group(2) in ("'''", '"""') or not text.endswith(head.group(2)):
        return None
    return head.group(1), head.group(2), text[len(head.group(0)) : -1]


def _merge(a: tuple[str, str, str], b: tuple[str, str, str]) -> tuple[str, str, str] | None:
    """One literal equal to the implicit concatenation of ``a`` and ``b``, if one is simple."""
    (pa, qa, ba), (pb, qb, bb) = a, b
    fa, fb = "f" in pa.lower(), "f" in pb.lower()
    rest_a, rest_b = pa.lower().replace("f", ""), pb.lower().replace("f", "")
    if qa != qb or rest_a != rest_b or "\\N{" in ba + bb:
        return None
    if fa and not fb:
        bb = bb.replace("{", "{{").replace("}", "}}")
    elif fb and not fa:
        ba = ba.replace("{", "{{").replace("}", "}}")
    return (pa if fa or not fb else pb), qa, ba + bb


def join_strings(source: str) -> str:
    """Re-pack a string literal that is split over lines into as few lines as fit the width.

    A run of implicitly concatenated literals, one per line, is joined greedily: each literal
    is appended to the one above while the joined line fits in the width. Python concatenates
    adjacent literals, so the program is unchanged; the breaks that remain are the ones the
    width needs.
    """
    lines = source.split("\n")
    tokens = _tokens(source)
    if tokens is None:
        return source
    edits = []
    for run in _string_runs(tokens):
        rows = [s[0] for s, _ in run]
        if any(s[0] != e[0] for s, e in run) or rows != list(range(rows[0], rows[0] + len(run))):
            continue
        parts = [_literal(_text(lines, s, e)) for s, e in run]
        if None in parts:
            continue
        lead = lines[rows[0] - 1][: run[0][0][1]]
        trail = lines[rows[-1] - 1][run[-1][1][1] :]
        if any(lines[r - 1][run[k][1][1] :].strip() for k, r in enumerate(rows[:-1])):
            continue  # something (a comment) follows a literal inside the run
        indent = re.match(r"\s*", lines[rows[1] - 1]).group(0)
        out, current, current_lead = [], parts[0], lead
        for k, part in enumerate(parts[1:], 1):
            merged = _merge(current, part)
            tail = trail if k == len(parts) - 1 else ""
            if merged and len(current_lead) + len("".join(merged)) + 1 + len(tail) <= WIDTH:
                current = merged
            else:
                out.append(current_lead + current[0] + current[1] + current[2] + current[1])
                current, current_lead = part, indent
        out.append(current_lead + current[0] + current[1] + current[2] + current[1] + trail)
        edits.append((rows[0] - 1, rows[-1], out))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last] = new
    return "\n".join(lines)


def drop_format_skips(source: str) -> str:
    """Remove ``# fmt: skip`` from a cell with an over-long line: the column wins over layout."""
    if not any(len(line) > WIDTH for line in source.split("\n")):
        return source
    return re.sub(r"\s*# fmt: (skip|off|on)\b", "", source)


def unwrap_tuples(source: str) -> str:
    """Drop the parentheses a narrower width put around a tuple on the right of an unpacking
    assignment (``a, b = (x, y)`` -> ``a, b = x, y``) where the assignment is on one line."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.split("\n")
    spans = []
    for node in ast.walk(tree):
        value = getattr(node, "value", None)
        if not (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(value, ast.Tuple)
            and len(value.elts) > 1
            and node.lineno == node.end_lineno
        ):
            continue
        line = lines[value.lineno - 1]
        a, b = value.col_offset, value.end_col_offset
        if line[a] == "(" and line[b - 1] == ")":
            spans.append((value.lineno - 1, a, b))
    before = program(source)
    for row, a, b in sorted(spans, reverse=True):
        line = lines[row]
        lines[row] = line[:a] + line[a + 1 : b - 1] + line[b:]
        if program("\n".join(lines)) != before:  # (x, y), z: the brackets were not one pair
            lines[row] = line
    return "\n".join(lines)


def fit(source: str, join_exploded: bool = False) -> str:
    """The cell's code laid out at the width; ``join_exploded`` also joins every bracket that
    a trailing comma holds open, one item per line, when it fits on one line (for code that
    was formatted to a narrower width)."""
    if source.lstrip().startswith(("%", "!")):
        return source
    current = ruff_format(join_docstrings(drop_format_skips(source)), join_exploded)
    if join_exploded:
        current = ruff_format(unwrap_tuples(current))
    for _ in range(6):
        lifted = lift_comments(current)
        new = ruff_format(lifted)
        new = ruff_format(settle_comments(new)) if LIFTED in new else new
        new = ruff_format(join_strings(new))
        new = ruff_format(reflow_comment_blocks(wrap_comment_lines(join_docstrings(new))))
        if new == current:
            break
        current = new
    current = current.rstrip("\n")
    return current if program(current) == program(source) else source


def _string_runs(tokens: list[tokenize.TokenInfo]) -> list[list[tuple]]:
    """Runs of two or more adjacent string literals (across line breaks), as (start, end)."""
    runs, run, depth, start = [], [], 0, None
    for tok in tokens:
        kind = tokenize.tok_name[tok.type]
        if kind == "FSTRING_START":  # Python 3.12+: an f-string is several tokens
            depth += 1
            start = tok.start if depth == 1 else start
            continue
        if depth:
            if kind == "FSTRING_END":
                depth -= 1
                if not depth:
                    run.append((start, tok.end))
            continue
        if tok.type == tokenize.STRING:
            run.append((tok.start, tok.end))
        elif tok.type != tokenize.NL:
            if len(run) > 1:
                runs.append(run)
            run = []
    if len(run) > 1:
        runs.append(run)
    return runs


def _text(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    (r0, c0), (r1, c1) = start, end
    if r0 == r1:
        return lines[r0 - 1][c0:c1]
    return "\n".join([lines[r0 - 1][c0:], *lines[r0 : r1 - 1], lines[r1 - 1][:c1]])


def _stranded(lines: list[str]) -> list[tuple[int, str]]:
    """Lines of one or two words that a wrap left alone although they fit on the line above:
    inside a docstring (any such line), or in a block of comments (a word that continues the
    sentence above in lower case)."""
    found = []
    doc_rows = set()
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        tree = None
    for node in ast.walk(tree) if tree else []:
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                doc_rows.update(range(value.lineno + 1, value.end_lineno))  # inner lines
    for n in range(2, len(lines) + 1):
        line, above = lines[n - 1], lines[n - 2]
        text = line.strip()
        if n in doc_rows and 0 < len(text.split()) <= 2 and above.strip():
            if len(above) + 1 + len(text) <= WIDTH and not above.strip().startswith('"""'):
                found.append((n, "a word stranded on its own line"))
        is_comment = text.startswith("#") and above.strip().startswith("#")
        same_indent = len(line) - len(line.lstrip()) == len(above) - len(above.lstrip())
        words = text[1:].split()
        if is_comment and same_indent and 0 < len(words) <= 2 and words[0][0].islower():
            if not above.rstrip().endswith((".", ":", ";", "?", "!")):
                if len(above) + 1 + len(text[1:].strip()) <= WIDTH:
                    found.append((n, "a word stranded on its own line"))
    return found


def damage(source: str) -> list[tuple[int, str]]:
    """(line number, what) for each bent line, split string and line over the width."""
    found = []
    lines = source.split("\n")
    for n, line in enumerate(lines, 1):
        if BRACKET_COMMENT.match(line):
            found.append((n, "a closing bracket with a comment"))
        if len(line) > WIDTH:
            found.append((n, f"{len(line)} characters"))
    tokens = _tokens(source)
    found += _stranded(lines)
    for run in _string_runs(tokens or []):
        for (s0, e0), (s1, e1) in zip(run, run[1:], strict=False):
            a, b = _literal(_text(lines, s0, e0)), _literal(_text(lines, s1, e1))
            merged = _merge(a, b) if a and b else None
            if merged is None or s0[0] == s1[0]:
                continue
            tail = lines[e1[0] - 1][e1[1] :] if e1 == run[-1][1] else ""
            if s0[1] + len("".join(merged)) + 1 + len(tail) <= WIDTH:
                found.append((s0[0], "a string split where it fits joined on one line"))
    return sorted(found)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    join_exploded = "--join-exploded" in argv
    paths = [a for a in argv if not a.startswith("--")] or sorted(
        glob.glob(str(ROOT / "chapters/*.ipynb"))
    )
    changed, damaged = [], []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        dirty = False
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or "remove-cell" in cell.metadata.get("tags", []):
                continue
            stored, new = cell.source, fit(cell.source, join_exploded)
            if new != stored:
                dirty = True
                if check:
                    print(f"{Path(path).name} cell {i}: would be reformatted")
                cell.source = new
            shown = stored if check else new  # --check reports the stored code
            lines = shown.split("\n")
            for n, what in damage(shown):
                damaged.append(f"{Path(path).name} cell {i} line {n}: {what}: {lines[n - 1]}")
        if dirty:
            changed.append(path)
            if not check:
                nbformat.write(nb, path)
    for line in damaged:
        print(line)
    verb = "would change" if check else "changed"
    print(
        f"fit_code_width: {verb} {len(changed)} notebook(s); {len(damaged)} line(s) with"
        f" damage (bracket-comment, split string, stranded word, over {WIDTH})"
    )
    return 1 if (check and changed) or damaged else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
