"""Count the package's argument checks: code lines, check lines and their share, per module.

``python scripts/count_checks.py [PACKAGE_DIR]`` (default ``npformer``) prints one row per
module and a total: code lines, check lines, their share, and the number of ``raise ValueError``
statements (``raise ValueError`` and ``raise ValueError(...)``).

Code lines are the lines of a module that hold code: blank lines, comment-only lines and the
lines of docstrings (a string expression opening a module, class or function body) are left
out. Check lines are those code lines that belong to one of these:

- an ``if`` statement whose body only raises ``ValueError`` or ``TypeError``: its lines from
  the ``if`` (or ``elif``) to the end of its body, the test and the raise included (an
  ``else`` branch is counted on its own, by the same rule for its statements);
- an ``else`` branch or an ``except`` handler whose body only raises ``ValueError`` or
  ``TypeError``: the raising statements (and the ``except`` line);
- a statement that only calls a function imported from ``npformer.core.validation``, or (outside
  ``exercises/``) a function whose name starts with ``_check`` or ``check_``: an expression
  statement, an assignment, or a ``return``, whose value is that call;
- a function whose name starts with ``_check`` or ``check_``, outside ``exercises/`` (there
  they are the readers' exercise checkers and their parts, not argument checks): all its lines;
- every code line of ``core/validation.py``.

Each line counts once, whatever it belongs to. ``assert`` statements are not counted as checks
(an internal invariant, like nanoGPT's one assert); their number is printed apart.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path
from typing import NamedTuple

RAISED = {"ValueError", "TypeError"}
SKIPPED_TOKENS = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.ENCODING,
}


class Count(NamedTuple):
    code: int
    checks: int
    raise_value_error: int
    asserts: int


def _lines(node: ast.AST) -> set[int]:
    return set(range(node.lineno, node.end_lineno + 1))


def code_lines(source: str) -> set[int]:
    """Line numbers that hold a token other than a comment, docstrings left out."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in SKIPPED_TOKENS:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                lines -= _lines(body[0])
    return lines


def _raised_name(stmt: ast.stmt) -> str | None:
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return None
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return exc.id if isinstance(exc, ast.Name) else None


def _only_raises(body: list[ast.stmt]) -> bool:
    return bool(body) and all(_raised_name(s) in RAISED for s in body)


def _validation_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("validation"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _calls_check(value: ast.expr | None, names: set[str], in_exercises: bool) -> bool:
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if isinstance(func, ast.Name) and name in names:
        return True
    return not in_exercises and name is not None and name.startswith(("_check", "check_"))


def check_lines(
    source: str, *, in_exercises: bool = False, is_validation: bool = False
) -> set[int]:
    """Line numbers of argument checks, by the rules of the module docstring."""
    code = code_lines(source)
    if is_validation:
        return code
    tree = ast.parse(source)
    names = _validation_names(tree)
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            if _only_raises(node.body):
                lines.update(range(node.lineno, node.body[-1].end_lineno + 1))
            if _only_raises(node.orelse):
                for stmt in node.orelse:
                    lines |= _lines(stmt)
        elif isinstance(node, ast.ExceptHandler) and _only_raises(node.body):
            lines |= _lines(node)
        elif isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)):
            if _calls_check(node.value, names, in_exercises):
                lines |= _lines(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith(("_check", "check_")) and not in_exercises:
                lines |= _lines(node)
                lines.update(d.lineno for d in node.decorator_list)
    return lines & code


def count(source: str, *, in_exercises: bool = False, is_validation: bool = False) -> Count:
    tree = ast.parse(source)
    raises = sum(_raised_name(node) == "ValueError" for node in ast.walk(tree))
    asserts = sum(isinstance(node, ast.Assert) for node in ast.walk(tree))
    checks = check_lines(source, in_exercises=in_exercises, is_validation=is_validation)
    return Count(len(code_lines(source)), len(checks), raises, asserts)


def count_package(package: Path) -> dict[str, Count]:
    """One Count per module of ``package`` (its sub-folders included), keyed by relative path."""
    counts = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        counts[rel] = count(
            path.read_text(encoding="utf-8"),
            in_exercises="exercises" in path.relative_to(package).parts,
            is_validation=rel == "core/validation.py",
        )
    return counts


def table(counts: dict[str, Count]) -> str:
    total = Count(*(sum(c[i] for c in counts.values()) for i in range(4)))
    rows = [f"{'module':<28} {'code':>6} {'checks':>6} {'share':>6} {'raise VE':>8} {'assert':>6}"]
    for name, c in [*counts.items(), ("TOTAL", total)]:
        share = c.checks / c.code if c.code else 0.0
        rows.append(
            f"{name:<28} {c.code:>6} {c.checks:>6} {share:>6.1%} {c.raise_value_error:>8} "
            f"{c.asserts:>6}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="npformer", type=Path)
    args = parser.parse_args(argv)
    print(table(count_package(args.package)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
