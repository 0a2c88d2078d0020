"""Change the repository URL in its one place (_config.yml) and in every notebook's install cell.

Usage: python scripts/set_repository_url.py https://github.com/OWNER/NAME
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CONFIG_LINE = re.compile(r'^(  url: )"[^"]+"$', re.MULTILINE)
CELL_LINE = re.compile(r'^REPOSITORY_URL = "[^"]+"$', re.MULTILINE)


def main(url: str) -> None:
    config = ROOT / "_config.yml"
    text, count = CONFIG_LINE.subn(rf'\g<1>"{url}"', config.read_text())
    assert count == 1, "expected one repository url line in _config.yml"
    config.write_text(text)
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nb.cells[0].source = CELL_LINE.sub(f'REPOSITORY_URL = "{url}"', nb.cells[0].source)
        nbformat.write(nb, path)
        print("updated", path.name)


if __name__ == "__main__":
    main(sys.argv[1])
