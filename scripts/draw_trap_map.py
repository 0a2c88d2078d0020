"""Draw assets/trap_map.svg: where each of chapter 13's nine silent traps sits.

Usage: python scripts/draw_trap_map.py [OUTPUT.svg]

One row of boxes follows a multi-head self-attention layer from the token embeddings to its
output: add positions, project and split into heads, score and scale, mask, softmax over the
keys, weight the values, merge. A numbered red disc marks the step where each trap enters:
7 no positions, 3 the wrong split, 1 no scale, 4 and 5 the wrong mask, 2 the mask after the
softmax, 6 the wrong axis. Traps 8 (a finite-difference check of a backward pass) and 9
(the map read as an explanation) act on the testing and on the reading of the layer, drawn
below the row. The SVG is deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# (label of the step, the traps that enter there)
STEPS = [
    ("token\nembeddings", []),
    ("+ positions", [7]),
    ("project,\nsplit heads", [3]),
    ("scores\n$QK^\\top/\\sqrt{d_h}$", [1]),
    ("+ mask\n($-\\infty$)", [4, 5]),
    ("softmax\nover keys", [2, 6]),
    ("weights\n$\\times V$", []),
    ("merge heads,\n$W_O$", []),
]
BOX_W, BOX_H, GAP = 1.25, 0.9, 0.45
RED = "#b03a2e"


def disc(ax, x, y, n):
    ax.add_patch(Circle((x, y), 0.17, facecolor=RED, edgecolor="none"))
    ax.text(x, y, str(n), ha="center", va="center", color="white", fontsize=9, weight="bold")


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "trap-map"
    plt.rcParams["svg.fonttype"] = "path"  # the text as outlines, whatever ran before
    width = len(STEPS) * (BOX_W + GAP)
    fig, ax = plt.subplots(figsize=(width * 0.95, 3.0))
    ax.set_xlim(-0.2, width)
    ax.set_ylim(-1.35, 1.4)
    ax.set_axis_off()
    centres = []
    for k, (label, traps) in enumerate(STEPS):
        x0 = k * (BOX_W + GAP)
        ax.add_patch(
            FancyBboxPatch(
                (x0, 0),
                BOX_W,
                BOX_H,
                boxstyle="round,pad=0.02,rounding_size=0.08",
                facecolor="#fbe3c8",
                edgecolor="#333333",
                lw=0.9,
            )
        )
        ax.text(x0 + BOX_W / 2, BOX_H / 2, label, ha="center", va="center", fontsize=8.5)
        for m, n in enumerate(traps):
            disc(ax, x0 + BOX_W / 2 + (m - (len(traps) - 1) / 2) * 0.4, BOX_H + 0.25, n)
        centres.append(x0 + BOX_W / 2)
        if k:
            ax.add_patch(
                FancyArrowPatch(
                    (x0 - GAP + 0.03, BOX_H / 2),
                    (x0 - 0.03, BOX_H / 2),
                    arrowstyle="-|>",
                    mutation_scale=10,
                    color="#333333",
                    lw=0.9,
                )
            )
    # the two traps outside the forward pass
    below = [
        (
            centres[3],
            8,
            "checking a backward pass by finite\ndifferences: $\\varepsilon$ too large",
        ),
        (centres[6], 9, "reading the weights as\nthe reason for the output"),
    ]
    for x, n, text in below:
        ax.add_patch(
            FancyArrowPatch(
                (x, -0.05),
                (x, -0.75),
                arrowstyle="-",
                linestyle="--",
                color="#777777",
                lw=0.9,
            )
        )
        disc(ax, x - 0.05, -0.95, n)
        ax.text(x + 0.2, -0.95, text, ha="left", va="center", fontsize=8.5)
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "trap_map.svg")
