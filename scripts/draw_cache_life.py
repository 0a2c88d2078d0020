"""Draw assets/kv_cache_life.svg: a sliding-window cache wrapping, and a left-padded batch.

Usage: python scripts/draw_cache_life.py [OUTPUT.svg]

Left: a ``RollingKVCache`` of 4 slots receives a prefill of 3 tokens, then one token per pass;
each row is one pass and each slot shows the position it holds, read from the cache's
``key_positions`` (not drawn by hand). Right: three prompts of 2, 4 and 3 tokens left-padded
to one width, then two generated columns; each cell shows the position its token gets, the
pads are the cells ``left_padding_mask`` hides from every query. The SVG is deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from npformer.core.kv_cache import RollingKVCache  # noqa: E402
from npformer.core.masks import left_padding_mask  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WINDOW, PREFILL, LAST = 4, 3, 9
LENGTHS, GENERATED = [2, 4, 3], 2
COLOURS = {"kept": "#9DB4D3", "written": "#DD8452", "empty": "#FFFFFF", "pad": "#D9D9D9"}


def ring_rows() -> list[tuple[int, np.ndarray]]:
    """(slot written first, positions held by the slots) after each pass, from a real cache."""
    cache = RollingKVCache(1, 1, 1, WINDOW, 1)
    rows = []
    for n in [PREFILL] + [1] * (LAST + 1 - PREFILL):
        held = cache.key_positions(n)  # (S,) position in each slot after this pass
        first = cache.length % WINDOW
        cache.write(0, np.ones((1, 1, n, 1)), np.ones((1, 1, n, 1)))
        cache.advance(n)
        rows.append((first, n, held))
    return rows


def box(ax, x, y, kind, text):
    ax.add_patch(Rectangle((x, y), 1, 0.8, facecolor=COLOURS[kind], edgecolor="#555555", lw=0.8))
    ax.text(x + 0.5, y + 0.4, text, ha="center", va="center", fontsize=9)


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "kv-cache-life"
    plt.rcParams["svg.fonttype"] = "none"
    fig, (ring, ragged) = plt.subplots(1, 2, figsize=(9.6, 4.6), width_ratios=[1, 1.15])
    rows = ring_rows()
    for r, (first, n, held) in enumerate(rows):
        for slot in range(WINDOW):
            if slot >= len(held):
                box(ring, slot, r, "empty", "")
                continue
            written = first <= slot < first + n
            box(ring, slot, r, "written" if written else "kept", str(held[slot]))
        label = f"prefill {n}" if r == 0 else f"token {held[first]}"
        ring.text(-0.2, r + 0.4, label, ha="right", va="center", fontsize=9)
        if r and held[first] >= WINDOW:
            note = f"evicts {held[first] - WINDOW}"
            ring.text(WINDOW + 0.2, r + 0.4, note, ha="left", va="center", fontsize=9)
    for slot in range(WINDOW):
        ring.text(slot + 0.5, -0.3, f"slot {slot}", ha="center", va="center", fontsize=9)
    title = f"a window of {WINDOW} slots: position p goes to slot p mod {WINDOW}"
    ring.set_title(title, fontsize=10)
    ring.set_xlim(-2.4, WINDOW + 2.2)
    ring.set_ylim(len(rows) + 0.1, -0.7)
    ring.axis("off")

    width = max(LENGTHS)
    pad = width - np.array(LENGTHS)  # (B,) pad columns at the left of each row
    mask = left_padding_mask(pad, width + GENERATED - 1, 1)[:, 0, 0]  # (B, S): last query
    for b in range(len(LENGTHS)):
        for j in range(width + GENERATED):
            if not mask[b, j]:
                box(ragged, j, b, "pad", "pad")
            else:
                kind = "written" if j >= width else "kept"
                box(ragged, j, b, kind, str(j - pad[b]))
        ragged.text(-0.2, b + 0.4, f"prompt of {LENGTHS[b]}", ha="right", va="center", fontsize=9)
    for j in range(width + GENERATED):
        ragged.text(j + 0.5, -0.3, f"col {j}", ha="center", va="center", fontsize=9)
    ragged.set_title("left padding: one column per step, positions per row", fontsize=10)
    ragged.set_xlim(-2.6, width + GENERATED + 0.2)
    ragged.set_ylim(len(LENGTHS) + 0.1, -0.7)
    ragged.axis("off")

    handles = [Rectangle((0, 0), 1, 1, facecolor=COLOURS[k], edgecolor="#555555") for k in COLOURS]
    labels = [
        "kept, read again",
        "written by this pass (right: generated)",
        "not yet written",
        "pad: hidden from every query",
    ]
    fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(
        out, format=out.suffix[1:], metadata={"Date": None} if out.suffix == ".svg" else None
    )
    plt.close(fig)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "kv_cache_life.svg")
