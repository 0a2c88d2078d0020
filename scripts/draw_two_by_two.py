"""Draw assets/two_by_two.svg: the 2 x 2 design of chapter 11's wide-head experiment.

Usage: python scripts/draw_two_by_two.py [OUTPUT.svg]

Chapter 11's "Going deeper" page on the scale shows it before the code of its four arms.
Removing the 1/sqrt(d_h) scale from a head of width 64 changes two things at once, read in
the scaled head's terms, with c = 64^(1/4) = 2 sqrt 2: the initial size of the query and key
weights (x c) and the effective learning rate on the scores (x c). Rows: the initial size;
columns: the rate. The four cells are the four arms, A to D, each with what it is in its own
terms (scaled or not, its query and key initialization). The diagonal holds the two real
heads; the other two cells are the arms added to take the factors apart. The SVG is
deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REAL, ADDED = "#cfe2f3", "#f4f4f4"
# (row, column): initial Q/K size x1 / x c, effective rate x1 / x c
ARMS = {
    (0, 0): ("A", "scaled head", "Q/K init as usual", REAL),
    (0, 1): ("B", "unscaled head, small init", "Q/K init / c", ADDED),
    (1, 0): ("C", "scaled head, large init", "Q/K init x c", ADDED),
    (1, 1): ("D", "unscaled head", "Q/K init as usual", REAL),
}


def draw(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "two-by-two"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(8.0, 4.0))
    w, h = 3.6, 1.5
    for (row, col), (arm, name, init, color) in ARMS.items():
        x, y = col * w, (1 - row) * h
        ax.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor="#444444", linewidth=1))
        ax.text(x + 0.15, y + h - 0.2, arm, fontsize=13, weight="bold", va="top")
        ax.text(x + w / 2, y + h / 2 + 0.12, name, fontsize=10, ha="center")
        ax.text(x + w / 2, y + h / 2 - 0.28, init, fontsize=9, ha="center", color="#333333")
    for col, label in enumerate(("x 1", "x c")):
        ax.text(col * w + w / 2, 2 * h + 0.12, label, ha="center", va="bottom", fontsize=10)
    for row, label in enumerate(("x 1", "x c")):
        y = (1 - row) * h + h / 2
        ax.text(-0.15, y, label, ha="right", va="center", fontsize=10)
    ax.text(w, 2 * h + 0.5, "effective learning rate on the scores", ha="center", fontsize=11)
    ax.text(
        -0.75,
        h,
        "initial size of the\nquery and key weights",
        ha="right",
        va="center",
        fontsize=11,
    )
    ax.text(
        w,
        -0.3,
        "c = d_h^(1/4): 1.68 at width 8, 2.83 at width 64;  blue: the two real heads",
        ha="center",
        va="top",
        fontsize=9,
    )
    ax.set_xlim(-3.0, 2 * w + 0.1)
    ax.set_ylim(-0.7, 2 * h + 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "two_by_two.svg")
