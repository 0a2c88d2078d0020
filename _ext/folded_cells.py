"""Folded content in the single-page HTML build, the source of the PDF.

Extensions teach Sphinx how to write their nodes per builder. myst-nb (the ``HideCodeCellNode``
around the code or output of a cell tagged ``hide-input``, ``hide-output`` or ``hide-cell``)
and sphinx-design (``{dropdown}``) register writers for the "html" builder only. Sphinx falls
back to the "html" writers for another HTML builder only when no extension registered writers
for that builder by name; the theme does register some for "singlehtml", so the single-page
build stops on the first folded cell or dropdown. When the single-page builder starts, every
"html" writer it lacks is lent to it: the PDF shows folded content as the web page does.
"""

from __future__ import annotations

from typing import Any


def _lend_html_writers(app: Any) -> None:
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node_name, writers in handlers.get("html", {}).items():
        single.setdefault(node_name, writers)


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _lend_html_writers)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
