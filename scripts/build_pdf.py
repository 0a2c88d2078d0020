"""Build the print edition: the whole book as one PDF, offline (`make pdf`).

Usage: python scripts/build_pdf.py [OUTPUT.pdf]   (default: _build/pdf/attention-derived.pdf)

Jupyter Book builds the book as one single HTML page (math typeset by the local MathJax, the
exercises' solutions printed open by the theme's print rules), and Debian's headless Chromium
prints that page to PDF. No network is used: Chromium's background services are switched off.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from headless_chromium import CHROMIUM, OFFLINE_FLAGS

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "_build" / "pdf" / "attention-derived.pdf"
CHROMIUM_FLAGS = [
    *OFFLINE_FLAGS,
    "--no-pdf-header-footer",
    # time for MathJax to typeset the whole book before printing
    "--virtual-time-budget=60000",
]


def chromium() -> str:
    if CHROMIUM is None:
        raise SystemExit("build_pdf: headless Chromium not found: apt-get install -y chromium")
    return CHROMIUM


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
        subprocess.run(
            [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}",
             f"--print-to-pdf={out}", page.as_uri()],
            check=True,
            capture_output=True,
            timeout=600,
        )  # fmt: skip
    if not out.exists() or out.stat().st_size == 0:
        raise SystemExit(f"build_pdf: Chromium wrote no PDF at {out}")
    return out


if __name__ == "__main__":
    target = build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
    print(f"pdf: {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
