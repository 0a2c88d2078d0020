"""Draw assets/attention_words.svg: attention over the running example, one word per row.

Usage: python scripts/draw_attention_words.py [OUTPUT.svg]

Chapter 01 shows it before any code. The sentence "a storm hit the river bank today" enters
as X, one row per word; three maps give each word a query, a key and a value; the scores
compare every query with every key (rows and columns named by the words); a softmax along
each row turns them into weights; the weights average the value rows. The row of "bank" is
followed all the way through. Schematic: the cells carry no numbers. Deterministic SVG.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

from npformer.training.example import SENTENCES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORDS = SENTENCES[0]
T, D, D_H = len(WORDS), 8, 4
ROW = WORDS.index("bank")  # the query followed through the figure
CELL = 0.36
COLORS = {"X": "#eeeeee", "Q": "#cfe2f3", "K": "#fce5cd", "V": "#d9ead3", "Z": "#eeeeee"}
COLORS["P"] = "#fff2cc"
HIGHLIGHT = "#e69138"


def grid(ax, x, y, rows, cols, color, name, note, lit_row=None, row_words=False):
    """A rows x cols grid with its top-left corner at (x, y); returns its right edge."""
    for i in range(rows):
        for j in range(cols):
            ax.add_patch(
                Rectangle(
                    (x + j * CELL, y - (i + 1) * CELL),
                    CELL,
                    CELL,
                    facecolor=HIGHLIGHT if i == lit_row else color,
                    edgecolor="#444444",
                    linewidth=0.7,
                )
            )
    if row_words:
        for i, w in enumerate(WORDS):
            weight = "bold" if i == lit_row else "normal"
            ax.text(
                x - 0.08,
                y - (i + 0.5) * CELL,
                w,
                ha="right",
                va="center",
                fontsize=9,
                weight=weight,
            )
    cx = x + cols * CELL / 2
    ax.text(cx, y + 0.12, name, ha="center", va="bottom", fontsize=11, weight="bold")
    ax.text(cx, y - rows * CELL - 0.12, note, ha="center", va="top", fontsize=8.5)
    return x + cols * CELL


def key_words(ax, x, y):
    """The words over the columns of a T x T grid whose top-left corner is (x, y)."""
    for j, w in enumerate(WORDS):
        ax.text(
            x + (j + 0.5) * CELL, y + 0.05, w, ha="center", va="bottom", fontsize=8, rotation=60
        )


def arrow(ax, x0, x1, y, above, below=""):
    ax.add_patch(
        FancyArrowPatch(
            (x0, y), (x1, y), arrowstyle="-|>", mutation_scale=13, color="#333333", lw=1.2
        )
    )
    ax.text((x0 + x1) / 2, y + 0.12, above, ha="center", va="bottom", fontsize=9)
    if below:
        ax.text((x0 + x1) / 2, y - 0.12, below, ha="center", va="top", fontsize=8)


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "attention-words"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(12, 7.4))
    ax.set_xlim(-0.2, 19.0)
    ax.set_ylim(-6.9, 4.3)
    ax.axis("off")
    mid = lambda top: top - T * CELL / 2  # noqa: E731

    # top line: X and its three projections
    top = 3.4
    x = grid(ax, 1.6, top, T, D, COLORS["X"], "X", "one row per word, (T, d)", ROW, True)
    right_of_x = x
    for name, x0, text in [
        ("Q", 7.0, "queries: what\nthe word seeks"),
        ("K", 10.6, "keys: how it\ncan be found"),
        ("V", 14.2, "values: what\nit hands over"),
    ]:
        lit = ROW if name == "Q" else None  # bank's key and value serve every query
        grid(ax, x0, top, T, D_H, COLORS[name], f"{name} = X W_{name}", text, lit)
    arrow(ax, right_of_x + 0.15, 6.85, mid(top), "three maps", "W_Q, W_K, W_V")

    # bottom line: scores, weights, output
    top = -1.2
    x = grid(
        ax, 1.6, top, T, T, COLORS["Z"], "", "Z = Q K\u1d40 / \u221ad_h\n(query, key)", ROW, True
    )
    key_words(ax, 1.6, top)
    arrow(ax, x + 0.15, x + 1.75, mid(top), "softmax", "each row,\nover the keys")
    x0 = x + 1.9
    x = grid(ax, x0, top, T, T, COLORS["P"], "", "P: weights", ROW)
    key_words(ax, x0, top)
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
    ax.text(x + 0.85, mid(top), "\u00d7", ha="center", va="center", fontsize=15)
    x = grid(ax, x + 1.2, top, T, D_H, COLORS["V"], "", "V", None)
    ax.text(x + 0.35, mid(top), "=", ha="center", va="center", fontsize=15)
    grid(
        ax,
        x + 0.7,
        top,
        T,
        D_H,
        COLORS["Q"],
        "",
        "Y = P V: each word's\nweighted average\nof the values",
        ROW,
    )

    ax.text(
        -0.1,
        -5.6,
        "The orange row follows \u201cbank\u201d: its query meets the key of every word "
        "(a row of scores), a softmax along that row makes\nweights that sum to one, and "
        "its output is the values averaged with those weights. Every word does the same, "
        "at once.",
        ha="left",
        va="center",
        fontsize=9.5,
        color="#333333",
    )
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "attention_words.svg")
