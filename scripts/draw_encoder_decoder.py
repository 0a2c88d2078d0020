"""Draw assets/encoder_decoder.svg: the encoder-decoder and its three attentions.

Usage: python scripts/draw_encoder_decoder.py [OUTPUT.svg]

Left, the encoder layer: self-attention over the whole source (every source position may
read every other), then the feed-forward network. Right, the decoder layer: causal
self-attention over the target written so far, cross-attention whose queries come from the
decoder and whose keys and values come from the encoder's memory, then the feed-forward
network. Each attention carries a small grid of who may read whom (filled = allowed; the
decoder's grid is ``npformer.core.masks.causal_mask``). The SVG is deterministic (no date,
fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

from npformer.core.masks import causal_mask  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COLOURS = {"enc": "#cfe2f3", "causal": "#fbe3c8", "cross": "#d9ead3", "ffn": "#eeeeee"}


def box(ax, x, y, w, h, text, colour):
    ax.add_patch(
        FancyBboxPatch(
            (x, y), w, h, boxstyle="round,pad=0.04", facecolor=colour, edgecolor="#333333"
        )
    )
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=9)


def pattern(ax, x, y, allowed, colour, cell=0.16):
    """A small grid: row i = a query position, column j = a key position."""
    rows, cols = allowed.shape
    for i in range(rows):
        for j in range(cols):
            ax.add_patch(
                Rectangle(
                    (x + j * cell, y - (i + 1) * cell),
                    cell,
                    cell,
                    facecolor=colour if allowed[i, j] else "white",
                    edgecolor="#555555",
                    lw=0.5,
                )
            )


def arrow(ax, start, end, text=None, rad=0.0):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=11,
            color="#333333",
            lw=1.1,
            connectionstyle=f"arc3,rad={rad}",
        )
    )
    if text:
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        ax.text(mid[0], mid[1] + 0.12, text, ha="center", fontsize=8, style="italic")


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "encoder-decoder"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(9.6, 5.6))
    ax.set_xlim(0, 10.6)
    ax.set_ylim(-0.4, 6.4)
    ax.axis("off")
    S, T = 4, 3
    # encoder stack
    ax.text(2.0, 6.15, "encoder (N layers)", ha="center", fontsize=10, weight="bold")
    ax.add_patch(Rectangle((0.3, 1.3), 3.4, 4.6, fill=False, ls="--", ec="#777777"))
    box(ax, 0.6, 2.2, 2.8, 0.8, "1. self-attention\nall source positions", COLOURS["enc"])
    pattern(ax, 3.8, 3.0, np.ones((S, S), bool), COLOURS["enc"])
    box(ax, 0.6, 3.9, 2.8, 0.8, "feed-forward\n(each position alone)", COLOURS["ffn"])
    arrow(ax, (2.0, 3.0), (2.0, 3.86))
    box(ax, 0.6, 0.1, 2.8, 0.7, "source tokens x (S of them)", "white")
    arrow(ax, (2.0, 0.84), (2.0, 2.16))
    ax.text(2.1, 1.45, "embed + positions", fontsize=8, style="italic")
    # decoder stack
    ax.text(7.6, 6.15, "decoder (N layers)", ha="center", fontsize=10, weight="bold")
    ax.add_patch(Rectangle((5.9, 0.95), 3.4, 4.95, fill=False, ls="--", ec="#777777"))
    box(ax, 6.2, 1.2, 2.8, 0.8, "2. masked self-attention\nthe target so far", COLOURS["causal"])
    pattern(ax, 9.45, 1.95, causal_mask(T), COLOURS["causal"])
    box(ax, 6.2, 2.9, 2.8, 0.8, "3. cross-attention\nqueries from the decoder", COLOURS["cross"])
    pattern(ax, 9.45, 3.65, np.ones((T, S), bool), COLOURS["cross"])
    box(ax, 6.2, 4.6, 2.8, 0.8, "feed-forward\n(each position alone)", COLOURS["ffn"])
    arrow(ax, (7.6, 2.0), (7.6, 2.86))
    arrow(ax, (7.6, 3.7), (7.6, 4.56))
    arrow(ax, (7.6, 5.4), (7.6, 6.0))
    ax.text(7.6, 6.0, "", fontsize=8)
    box(ax, 6.2, -0.35, 2.8, 0.7, "<s>, y1 ... y(T-1)", "white")
    arrow(ax, (7.6, 0.39), (7.6, 1.16))
    box(ax, 4.15, 5.0, 1.4, 0.8, "memory\n(S, d)", "#fff2cc")
    arrow(ax, (2.0, 4.7), (4.1, 5.4))
    arrow(ax, (4.85, 4.96), (6.15, 3.3))
    ax.text(5.0, 3.9, "keys and\nvalues", fontsize=8, style="italic")
    ax.text(9.3, 0.4, "who may read whom:\nrow = query, column = key", fontsize=7.5)
    ax.text(10.35, 6.05, "scores for y1 ... yT", ha="right", fontsize=8, style="italic")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "encoder_decoder.svg")
