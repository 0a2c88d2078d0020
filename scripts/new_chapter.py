"""Scaffold a new chapter notebook with the book's fixed opening cells.

Usage: python scripts/new_chapter.py chapters/14_topic.ipynb "Title of the chapter" BUDGET_SECONDS

Writes the hidden install cell (so the chapter runs in Colab and Binder), the title with the
"you will" list, and the set-up cell; then add the chapter to _toc.yml and run
``make execute NB=chapters/14_topic.ipynb``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
INSTALL_CELL = """\
# Colab / Binder: install this book's package when it is missing; does nothing where it is installed.
import importlib.util
import subprocess
import sys

REPOSITORY_URL = "{url}"
if importlib.util.find_spec("npformer") is None:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", f"npformer[book] @ git+{{REPOSITORY_URL}}"])"""

SETUP_CELL = """\
import matplotlib.pyplot as plt
import numpy as np

from npformer.book.plotting import use_book_style

use_book_style()
rng = np.random.default_rng(0)
np.set_printoptions(precision=4, suppress=True)"""


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def install_cell() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(INSTALL_CELL.format(url=repository_url()))
    cell.metadata["tags"] = ["remove-cell"]
    return cell


def main(path: str, title: str, budget: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["book"] = {"budget_seconds": int(budget)}
    nb.cells = [
        install_cell(),
        nbformat.v4.new_markdown_cell(
            f"# {title}\n\nIn this chapter you will:\n\n- ...\n\n**Prerequisites:** ..."
        ),
        nbformat.v4.new_code_cell(SETUP_CELL),
    ]
    nbformat.write(nb, path)
    print(f"wrote {path}; add it to _toc.yml, then: make execute NB={path}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
