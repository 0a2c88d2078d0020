"""The notebook formatter (scripts/fit_code_width.py): what ``--check`` fails on, what it repairs.

Each kind of damage the check names is fed to it in a tiny notebook: a line that is only a
closing bracket and a comment, a string literal split where it fits joined, a code line over 88
characters. A clean notebook passes. ``fit`` repairs the first two, leaves the program unchanged
(same AST), and is a fixed point: formatting its output again changes nothing.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import nbformat
import pytest

from scripts import fit_code_width as fcw
from tests.notebooks import ROOT

SCRIPT = ROOT / "scripts" / "fit_code_width.py"

CLEAN = (
    "import numpy as np\n"
    "\n"
    "X = np.ones((6, 3))  # (6, 3)\n"
    "# (6, 6): every row against every row, scaled by the square root of the width\n"
    "scores = X @ X.T / np.sqrt(X.shape[-1]) + np.zeros((X.shape[0], X.shape[0]))\n"
    'print(f"{scores.shape}: the scores of every query against every key, one row each")'
)
BRACKET_COMMENT = "x = f(\n    1, 2\n)  # (6, 3)"
SPLIT_STRING = 'print(\n    f"did "\n    f"move: {x}"\n)'
THREE_PIECES = (
    "print(\n"
    '    f"max |attn(Pi X) - attn(X)| = {gap:.3g}  (the outputs "\n'
    '    f"did "\n'
    '    f"move: they were reordered, as the permutation moved their rows)"\n'
    ")"
)
LONG_LINE = 'print("' + "a long message that nobody has shortened yet, " * 2 + '")'


def notebook(tmp_path, *sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    return path


def check(path):
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", str(path)], capture_output=True, text=True
    )


def test_a_clean_notebook_passes(tmp_path):
    run = check(notebook(tmp_path, CLEAN))
    assert run.returncode == 0, run.stdout
    assert "0 line(s) with damage" in run.stdout


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (BRACKET_COMMENT, "a closing bracket with a comment"),
        ("y = [\n    [1, 2],\n    [3, 4],\n]  # (2, 2)", "a closing bracket with a comment"),
        (SPLIT_STRING, "a string split where it fits joined on one line"),
        (THREE_PIECES, "a string split where it fits joined on one line"),
        ('s = (\n    "abc "\n    "def"\n)', "a string split where it fits joined on one line"),
        (LONG_LINE, f"{len(LONG_LINE)} characters"),
        (
            'def f(x):\n    """Sum the rows of x, one by one, and\n    return\n    them.\n    """\n'
            "    return x.sum(0)",
            "a word stranded on its own line",
        ),
        (
            "# the rows are summed one by one, and the result is\n# returned\ny = 1",
            "a word stranded on its own line",
        ),
    ],
    ids=[
        "bracket-comment",
        "nested-bracket-comment",
        "split-f-string",
        "three-pieces",
        "split-plain",
        "over-88",
        "stranded-docstring-word",
        "stranded-comment-word",
    ],
)
def test_check_fails_on_each_kind_of_damage(tmp_path, source, message):
    run = check(notebook(tmp_path, CLEAN, source))
    assert run.returncode == 1
    assert "cell 1 line" in run.stdout and message in run.stdout, run.stdout
    assert "cell 0 line" not in run.stdout


def test_a_string_split_only_where_it_must_passes():
    halves = (
        "message = (\n"
        '    "the first half of a sentence that is long enough to need the whole line, "\n'
        '    "and the second half that could never fit on the line above it"\n'
        ")"
    )
    assert fcw.damage(halves) == []
    assert fcw.damage('pair = ("a" "b")') == []  # on one line: not split over lines


def test_a_wrapped_line_that_fits_passes():
    assert fcw.damage("total = f(\n    alpha,\n    beta,\n)") == []
    assert fcw.damage("if x:  # a comment on a line that is code\n    pass") == []


@pytest.mark.parametrize("source", [BRACKET_COMMENT, SPLIT_STRING, THREE_PIECES])
def test_fit_repairs_without_changing_the_program(source):
    fitted = fcw.fit(source)
    assert fcw.damage(fitted) == []
    assert fcw.fit(fitted) == fitted
    assert ast.dump(ast.parse(_joined(fitted))) == ast.dump(ast.parse(_joined(source)))


def test_a_comment_that_does_not_fit_goes_above_its_statement():
    source = (
        "weights = softmax(scores - scores.max(axis=-1, keepdims=True), axis=-1)"
        "  # (B, h, T, S): rows sum to one\n"
        "out = weights @ V"
    )
    assert fcw.fit(source).split("\n") == [
        "# (B, h, T, S): rows sum to one",
        "weights = softmax(scores - scores.max(axis=-1, keepdims=True), axis=-1)",
        "out = weights @ V",
    ]
    assert fcw.fit(BRACKET_COMMENT) == "x = f(1, 2)  # (6, 3)"


def test_fit_joins_a_docstring_broken_into_stranded_words():
    source = 'def f(x):\n    """One number per row\n    of x.\n    """\n    return x'
    assert fcw.fit(source) == 'def f(x):\n    """One number per row of x."""\n    return x'


def test_join_exploded_joins_what_a_narrower_width_broke_open():
    source = 'print(\n    "first T at which attention was slower:",\n    crossover,\n)'
    assert fcw.fit(source) == source
    assert fcw.fit(source, join_exploded=True) == (
        'print("first T at which attention was slower:", crossover)'
    )


def _joined(source: str) -> str:
    """The source with each f-string's adjacent constant parts merged, for comparing ASTs."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            values = []
            for v in node.values:
                if values and isinstance(v, ast.Constant) and isinstance(values[-1], ast.Constant):
                    values[-1] = ast.Constant(values[-1].value + v.value)
                else:
                    values.append(v)
            node.values = values
    return ast.unparse(tree)


def test_a_comment_behind_an_inner_bracket_stays_with_its_item():
    source = (
        "scores = {\n"
        '    "pre": np.array(\n'
        "        [1.0, 2.0],\n"
        "    ),  # (seeds, 2)\n"
        '    "post": np.zeros(2),\n'
        "}"
    )
    fitted = fcw.fit(source)
    assert fitted.split("\n")[1] == '    "pre": np.array([1.0, 2.0]),  # (seeds, 2)'
    assert fcw.damage(fitted) == []


def test_a_one_item_tuple_keeps_its_comma():
    source = "offsets = (\n    2,\n)  # " + "the token two back, the only offset of this task " * 2
    fitted = fcw.fit(source)
    assert ast.literal_eval(fitted.split("= ", 1)[1].split("#")[0].strip()) == (2,)
    assert fcw.program(fitted) == fcw.program(source)
    assert fcw.damage(fitted) == []


def test_fit_leaves_a_cell_alone_rather_than_change_its_program():
    assert fcw.unwrap_tuples("DEPTHS, SEEDS = (6, 12, 24), range(8)") == (
        "DEPTHS, SEEDS = (6, 12, 24), range(8)"
    )
    assert fcw.unwrap_tuples("near, far = (a[:2], a[-2:])") == "near, far = a[:2], a[-2:]"


def test_a_comment_that_broke_a_statement_open_moves_above_it():
    source = (
        "w_nopad = multi_head.multi_head_attention(X, X, params, h)[\n"
        "    1\n"
        "].attention.weights  # (B, h, T, S), the weights of every head of the layer"
    )
    assert fcw.fit(source).split("\n") == [
        "# (B, h, T, S), the weights of every head of the layer",
        "w_nopad = multi_head.multi_head_attention(X, X, params, h)[1].attention.weights",
    ]


def test_a_comment_broken_at_a_narrower_width_is_joined_when_it_fits():
    source = (
        "# what passes with the bug: shapes, the vocabulary, the cache's length,\n"
        "# the first token\n"
        "# Two sentences: this one\n"
        "# Stays apart.\n"
        "x = 1"
    )
    assert fcw.fit(source).split("\n") == [
        "# what passes with the bug: shapes, the vocabulary, the cache's length, the first token",
        "# Two sentences: this one",
        "# Stays apart.",
        "x = 1",
    ]


def test_a_short_comment_that_stands_alone_is_not_stranded(tmp_path):
    # a shape comment under a sentence, and a new sentence, are lines of their own
    source = "# the sum over the seeds, then the mean.\n# (5,)\n# Then\ny = 1"
    run = check(notebook(tmp_path, source))
    assert run.returncode == 0 and "a word stranded" not in run.stdout, run.stdout
