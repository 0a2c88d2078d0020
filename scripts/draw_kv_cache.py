"""Draw assets/kv_cache_filling.svg: a KV cache filling slot by slot, and the new token's offset.

Usage: python scripts/draw_kv_cache.py [OUTPUT.svg]

A cache of 10 slots receives a prefill of 4 prompt tokens, then one generated token per step.
Each row of the figure is one forward pass. The slots each pass writes, and the position it
gives its new token, are read from a real ``npformer.core.kv_cache.KVCache`` as it fills (its
``length`` before the pass is the offset), not drawn by hand. The SVG is deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from npformer.core.kv_cache import KVCache  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MAX_LEN, PROMPT, STEPS = 10, 4, 4
COLOURS = {"kept": "#9DB4D3", "written": "#DD8452", "empty": "#FFFFFF"}


def passes() -> list[tuple[int, int]]:
    """(offset, rows written) of each forward pass, read from a filling KVCache."""
    cache = KVCache(1, 1, 1, MAX_LEN, 1)
    out = []
    for n in [PROMPT] + [1] * STEPS:
        offset = cache.length
        cache.write(0, np.ones((1, 1, n, 1)), np.ones((1, 1, n, 1)))
        cache.advance(n)
        filled = int(np.count_nonzero(cache.K[0, 0, 0, :, 0]))
        assert filled == cache.length == offset + n
        out.append((offset, n))
    return out


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "kv-cache-filling"
    plt.rcParams["svg.fonttype"] = "none"
    rows = passes()
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    for r, (offset, n) in enumerate(rows):
        for slot in range(MAX_LEN):
            if slot < offset:
                kind = "kept"
            elif slot < offset + n:
                kind = "written"
            else:
                kind = "empty"
            ax.add_patch(
                Rectangle((slot, r), 1, 0.8, facecolor=COLOURS[kind], edgecolor="#555555", lw=0.8)
            )
        label = f"prefill: {n} prompt tokens" if r == 0 else f"step {r}: 1 new token"
        ax.text(-0.3, r + 0.4, label, ha="right", va="center", fontsize=10)
        where = "positions 0-3" if r == 0 else f"position {offset} = cache.length"
        ax.text(MAX_LEN + 0.3, r + 0.4, where, ha="left", va="center", fontsize=10)
    ax.set_xlim(-4.2, MAX_LEN + 4.2)
    ax.set_ylim(len(rows) + 0.1, -0.9)
    for slot in range(MAX_LEN):
        ax.text(slot + 0.5, -0.3, str(slot), ha="center", va="center", fontsize=9)
    ax.text(MAX_LEN / 2, -0.75, "cache slot (position)", ha="center", va="center", fontsize=10)
    ax.axis("off")
    handles = [Rectangle((0, 0), 1, 1, facecolor=COLOURS[k], edgecolor="#555555") for k in COLOURS]
    labels = [
        "kept from earlier passes, read again",
        "written by this pass (its keys and values)",
        "allocated, still empty",
    ]
    ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=3,
        frameon=False,
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(
        out, format=out.suffix[1:], metadata={"Date": None} if out.suffix == ".svg" else None
    )
    plt.close(fig)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "kv_cache_filling.svg")
