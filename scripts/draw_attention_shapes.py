"""Draw assets/attention_shapes.svg: the shapes of Q K^T -> P -> P V, one cell per number.

Usage: python scripts/draw_attention_shapes.py [OUTPUT.svg]

Chapter 01 shows it. The grids are drawn to scale for T = 4 queries, S = 6 keys and a head
width d_h = d_v = 3, so a reader can count the cells: each matrix product's inner dimensions
meet and disappear. One query row is highlighted all the way through: its scores, its weights
(one softmax over the keys) and its output row. The SVG is deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
T, S, D_H = 4, 6, 3
ROW = 1  # the query row followed through the figure
CELL = 0.42
COLORS = {"Q": "#cfe2f3", "K": "#fce5cd", "V": "#d9ead3", "Z": "#eeeeee", "P": "#fff2cc"}
HIGHLIGHT = "#e69138"


def grid(ax, x, y, rows, cols, color, name, shape, highlight_row=None, highlight_col=None):
    """A rows x cols grid whose top-left corner is (x, y); returns its right edge."""
    for i in range(rows):
        for j in range(cols):
            lit = i == highlight_row or j == highlight_col
            ax.add_patch(
                Rectangle(
                    (x + j * CELL, y - (i + 1) * CELL),
                    CELL,
                    CELL,
                    facecolor=HIGHLIGHT if lit else color,
                    edgecolor="#444444",
                    linewidth=0.8,
                )
            )
    cx = x + cols * CELL / 2
    ax.text(cx, y + 0.32, name, ha="center", va="bottom", fontsize=12, weight="bold")
    ax.text(cx, y - rows * CELL - 0.18, shape, ha="center", va="top", fontsize=9.5)
    return x + cols * CELL


def symbol(ax, x, y, text, size=15):
    ax.text(x, y, text, ha="center", va="center", fontsize=size)


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "attention-shapes"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(12, 3.6))
    ax.set_xlim(0, 18.6)
    ax.set_ylim(-2.1, 3.3)
    ax.axis("off")
    top = 2.2
    mid = top - T * CELL / 2

    # scores: Q (T, d_h) times K^T (d_h, S) -> Z (T, S)
    x = grid(ax, 0.2, top, T, D_H, COLORS["Q"], "Q", "(T, d_h)", highlight_row=ROW)
    symbol(ax, x + 0.3, mid, "\u00d7")
    kt_top = top - (T - D_H) * CELL / 2
    x = grid(ax, x + 0.6, kt_top, D_H, S, COLORS["K"], "K\u1d40", "(d_h, S)")
    symbol(ax, x + 0.95, mid, "/ \u221ad_h  =", size=12)
    x = grid(ax, x + 1.85, top, T, S, COLORS["Z"], "Z", "(T, S) scores", highlight_row=ROW)
    z_right = x

    # softmax over each row (the keys axis)
    ax.add_patch(
        FancyArrowPatch(
            (z_right + 0.15, mid),
            (z_right + 1.45, mid),
            arrowstyle="-|>",
            mutation_scale=14,
            color="#333333",
            lw=1.3,
        )
    )
    ax.text(z_right + 0.8, mid + 0.3, "softmax", ha="center", va="bottom", fontsize=10)
    ax.text(z_right + 0.8, mid - 0.3, "each row,\nover keys", ha="center", va="top", fontsize=8.5)
    x = grid(ax, z_right + 1.6, top, T, S, COLORS["P"], "P", "(T, S) weights", highlight_row=ROW)
    ax.text(
        x + 0.08,
        top - (ROW + 0.5) * CELL,
        "\u03a3 = 1",
        ha="left",
        va="center",
        fontsize=9,
        color=HIGHLIGHT,
        weight="bold",
    )

    # output: P (T, S) times V (S, d_v) -> Y (T, d_v)
    symbol(ax, x + 1.25, mid, "\u00d7")
    v_top = top + (S - T) * CELL / 2
    x = grid(ax, x + 1.6, v_top, S, D_H, COLORS["V"], "V", "(S, d_v)")
    symbol(ax, x + 0.35, mid, "=")
    grid(ax, x + 0.7, top, T, D_H, COLORS["Q"], "Y = PV", "(T, d_v)", highlight_row=ROW)

    ax.text(
        0.2,
        -1.55,
        f"Drawn for T = {T} queries, S = {S} keys, d_h = d_v = {D_H}. The orange row follows one "
        "query: its scores against every key, its weights (one softmax along the row, summing "
        "to one),\nand its output, a weighted average of the value rows. Inner dimensions meet "
        "and vanish: d_h in Q K\u1d40, S in P V.",
        ha="left",
        va="center",
        fontsize=9,
        color="#333333",
    )
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "attention_shapes.svg")
