"""Shared facts about the book's notebooks, for the tests that check them."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
URL_LINE = re.compile(r'^REPOSITORY_URL = "([^"]+)"$', re.MULTILINE)


def config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))
