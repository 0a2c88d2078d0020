"""Number the exercises of each page from 1 (a Sphinx extension, registered in `_config.yml`).

sphinx-exercise numbers exercises with Sphinx's figure numbering, which counts across the whole
book when the table of contents is not numbered: the first exercise of chapter 01 came out as
"Exercise 3". This extension runs after Sphinx has assigned those numbers and restarts the count
on every page, in the order the exercises appear there. Exercise titles, the solutions' "Solution
to Exercise N" and every reference to an exercise (`{ref}`, `{numref}`) read the same numbers,
so they follow.
"""

from __future__ import annotations

from typing import Any

FIGTYPE = "exercise"


def number_per_page(fignumbers: dict[str, dict[str, dict[str, tuple[int, ...]]]]) -> list[str]:
    """Renumber every page's exercises 1, 2, ... in their current order; return the pages changed.

    `fignumbers` is Sphinx's `env.toc_fignumbers`: page -> figure type -> element id -> number.
    """
    changed = []
    for docname, by_type in fignumbers.items():
        numbers = by_type.get(FIGTYPE)
        if not numbers:
            continue
        in_order = sorted(numbers, key=numbers.__getitem__)
        renumbered = {fig_id: (n,) for n, fig_id in enumerate(in_order, start=1)}
        if renumbered != numbers:
            by_type[FIGTYPE] = renumbered
            changed.append(docname)
    return changed


def _renumber(app: Any, env: Any) -> list[str]:
    return number_per_page(env.toc_fignumbers)


def setup(app: Any) -> dict[str, Any]:
    # Sphinx assigns figure numbers in its own `env-get-updated` handler (priority 500); ours
    # runs after it.
    app.connect("env-get-updated", _renumber, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
