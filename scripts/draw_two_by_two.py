"""Draw assets/two_by_two.svg: the four arms of chapter 11's experiment on the scale.

Usage: python scripts/draw_two_by_two.py [OUTPUT.svg]

Chapter 11's "Going deeper" page on the scale shows it before the code of the four arms.
An unscaled head with query and key weights W computes the scores of a scaled head with
weights c W (c = d_h^(1/4)), and Adam's step of about eta on W is a step of about c eta on
c W. So, read as scaled heads, the arms differ in two knobs: rows, the size of the initial
query and key weights (x 1 or x c, the initial scores x 1 or x c^2); columns, the learning
rate on those weights (x 1 or x c). The start is C against A and D against B; the step is B
against A and D against C. The diagonal holds the two real heads. The SVG is deterministic
(no date, fixed ids).
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
# (row, column): the initial query and key weights x 1 / x c, their learning rate x 1 / x c
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
        ax.text(x + 0.1, y + h - 0.08, arm, fontsize=12, weight="bold", va="top")
        ax.text(x + w / 2, y + h / 2 + 0.1, name, fontsize=10, ha="center")
        ax.text(x + w / 2, y + h / 2 - 0.3, init, fontsize=9, ha="center", color="#333333")
    for col, label in enumerate(("x 1", "x c")):
        ax.text(col * w + w / 2, 2 * h + 0.12, label, ha="center", va="bottom", fontsize=10)
    for row, label in enumerate(("x 1", "x c")):
        y = (1 - row) * h + h / 2
        ax.text(-0.15, y, label, ha="right", va="center", fontsize=10)
    ax.text(w, 2 * h + 0.5, "learning rate on the Q/K weights", ha="center", fontsize=11)
    ax.text(-1.3, 2 * h + 0.12, "initial Q/K weights", ha="center", va="bottom", fontsize=11)
    ax.text(
        w,
        -0.3,
        "read as scaled heads; c = d_h^(1/4): 1.68 at width 8, 2.83 at width 64\n"
        "blue: the two real heads; start: C vs A, D vs B; step: B vs A, D vs C",
        ha="center",
        va="top",
        fontsize=9,
    )
    ax.set_xlim(-2.4, 2 * w + 0.1)
    ax.set_ylim(-0.7, 2 * h + 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "two_by_two.svg")
