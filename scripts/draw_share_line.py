"""Draw assets/share_line.svg: chapter 12's two patching shares on the line of the margin.

Usage: python scripts/draw_share_line.py [OUTPUT.svg]

One axis, the mean logit difference D over prompts. The corrupted run sits below zero (it
leads with its own symbol), the clean run above; the gap between the runs is the yardstick of
both shares. Denoising starts from the corrupted run and moves up: its share is the part of the
gap it recovers. Noising starts from the clean run and moves down: its share is the part of
the gap it removes. Below, the clean lead alone (from zero to the clean run), the other
yardstick the chapter compares. The positions are schematic, not measured. The SVG is
deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# schematic positions on the axis of the mean logit difference
CORRUPT, CLEAN, DENOISED, NOISED = -1.2, 1.0, -0.45, 0.35
RUN, PATCH = "#444444", "#1f77b4"


def bracket(ax, x0, x1, y, text, color):
    """A horizontal span from x0 to x1 at height y, labelled above its middle."""
    ax.annotate("", (x0, y), (x1, y), arrowprops={"arrowstyle": "<->", "color": color, "lw": 1.2})
    ax.text((x0 + x1) / 2, y + 0.06, text, ha="center", va="bottom", fontsize=9, color=color)


def draw(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "share-line"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(8.0, 2.9))
    ax.annotate("", (1.25, 0), (-1.4, 0), arrowprops={"arrowstyle": "->", "color": "#888888"})
    points = (
        (CORRUPT, "corrupted run", RUN),
        (0.0, "0", "#888888"),
        (DENOISED, "denoised", PATCH),
        (NOISED, "noised", PATCH),
        (CLEAN, "clean run", RUN),
    )
    for x, label, color in points:
        ax.plot([x], [0], "o", color=color, ms=6)
        ax.text(x, -0.12, label, ha="center", va="top", fontsize=9, color=color)
    bracket(ax, CORRUPT, CLEAN, 0.95, "the gap between the runs (both shares' yardstick)", RUN)
    bracket(ax, CORRUPT, DENOISED, 0.55, "denoising share: recovered / gap", PATCH)
    bracket(ax, NOISED, CLEAN, 0.25, "noising share: removed / gap", PATCH)
    bracket(ax, 0.0, CLEAN, -0.55, "the clean lead alone", RUN)
    ax.text(1.3, 0, "mean logit difference D", ha="left", va="center", fontsize=9, color="#444444")
    ax.set_xlim(-1.45, 2.1)
    ax.set_ylim(-0.8, 1.2)
    ax.axis("off")
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "share_line.svg")
