"""Draw assets/filing_cabinet.svg: attention as a look-up in a filing cabinet (the preface).

Usage: python scripts/draw_filing_cabinet.py [OUTPUT.svg]

A question (the query) is matched against the label on each folder's tab (the keys) by a dot
product; a softmax turns the three scores into weights that sum to one; the answer is the
weights' average of the folders' contents (the values). The numbers on the figure are those of
the preface's cabinet (``npformer.book.exercises.ch00``), computed here with
``npformer.core.attention.softmax``. The SVG is deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Polygon  # noqa: E402

from npformer.book.exercises.ch00 import (  # noqa: E402
    CABINET_KEYS,
    CABINET_QUESTION,
    CABINET_TOPICS,
    CABINET_VALUES,
)
from npformer.core.attention import softmax  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COLOURS = ["#4c72b0", "#dd8452", "#55a868"]


def lookup() -> dict[str, np.ndarray]:
    """Scores, weights and answer of the preface's question."""
    scores = CABINET_KEYS @ CABINET_QUESTION  # (S,)
    weights = softmax(scores)  # (S,)
    answer = weights @ CABINET_VALUES  # (d_v,)
    return {"scores": scores, "weights": weights, "answer": answer}


def vec(v) -> str:
    return "(" + ", ".join(f"{x:.1f}" for x in v) + ")"


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "filing-cabinet"
    plt.rcParams["svg.fonttype"] = "none"
    r = lookup()
    fig, ax = plt.subplots(figsize=(10, 4.4))
    ax.set(xlim=(0, 10), ylim=(0, 4.6))
    ax.axis("off")

    # the question
    ax.add_patch(FancyBboxPatch((0.1, 1.7), 1.9, 1.2, boxstyle="round,pad=0.05", fc="#f2f2f2"))
    ax.text(1.05, 2.6, "query q", ha="center", weight="bold", fontsize=11)
    ax.text(1.05, 2.25, "“the kitchen tap drips”", ha="center", fontsize=8.5, style="italic")
    ax.text(1.05, 1.9, f"q = {vec(CABINET_QUESTION)}", ha="center", fontsize=9)

    # the folders: a tab (the key) above a body (the value)
    tops = [4.0, 2.65, 1.3]
    for j, (topic, top) in enumerate(zip(CABINET_TOPICS, tops, strict=True)):
        c = COLOURS[j]
        ax.add_patch(Polygon([(4.3, top), (4.4, top + 0.3), (5.7, top + 0.3), (5.8, top)], fc=c))
        ax.text(5.05, top + 0.08, f"key: {topic}", ha="center", color="w", fontsize=8.5)
        ax.add_patch(
            FancyBboxPatch(
                (4.3, top - 0.85), 2.3, 0.85, boxstyle="square,pad=0", fc="w", ec=c, lw=1.5
            )
        )
        ax.text(5.45, top - 0.3, f"k = {vec(CABINET_KEYS[j])}", ha="center", fontsize=8)
        ax.text(5.45, top - 0.65, f"value v = {vec(CABINET_VALUES[j])}", ha="center", fontsize=8)
        p = r["weights"][j]
        ax.add_patch(
            FancyArrowPatch(
                (2.05, 2.3),
                (4.25, top + 0.1),
                arrowstyle="-|>",
                mutation_scale=10,
                lw=0.6 + 6 * p,
                color=c,
                alpha=0.85,
            )
        )
        ax.text(
            3.15,
            0.5 * 2.3 + 0.5 * (top + 0.1),
            f"q·k = {r['scores'][j]:.1f}, p = {p:.2f}",
            ha="center",
            va="center",
            fontsize=8,
            color=c,
            bbox={"fc": "w", "ec": c, "boxstyle": "round,pad=0.2"},
        )
        ax.add_patch(
            FancyArrowPatch(
                (6.65, top - 0.42),
                (7.75, 2.3),
                arrowstyle="-|>",
                mutation_scale=10,
                lw=0.6 + 6 * p,
                color=c,
                alpha=0.85,
            )
        )

    # the answer
    ax.add_patch(FancyBboxPatch((7.8, 1.7), 2.1, 1.2, boxstyle="round,pad=0.05", fc="#f2f2f2"))
    ax.text(8.85, 2.6, "answer y", ha="center", weight="bold", fontsize=11)
    ax.text(8.85, 2.25, "Σ p_j v_j", ha="center", fontsize=9)
    ax.text(
        8.85, 1.9, "= (" + ", ".join(f"{x:.2f}" for x in r["answer"]) + ")", ha="center", fontsize=9
    )

    ax.text(2.4, 0.1, "1. match: q · k_j\n2. softmax: weights p_j, sum 1", ha="center", fontsize=9)
    ax.text(5.6, 0.1, "the folders:\nlabel = key, content = value", ha="center", fontsize=9)
    ax.text(8.85, 0.1, "3. read: the contents,\nweighted by p_j", ha="center", fontsize=9)
    fig.savefig(
        out,
        format=out.suffix[1:],
        bbox_inches="tight",
        metadata={"Date": None} if out.suffix == ".svg" else None,
    )
    plt.close(fig)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "filing_cabinet.svg")
