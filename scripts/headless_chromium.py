"""Debian's Chromium, headless and offline: where it is, and the flags every caller starts it with.

Used by ``scripts/build_pdf.py`` (the print edition) and by the browser tests
(``tests/webdriver.py``, ``tests/test_browser.py``). The flags switch off the GPU and the
background services that would reach the network; each caller adds its own (window size,
virtual time, PDF options).
"""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OFFLINE_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
