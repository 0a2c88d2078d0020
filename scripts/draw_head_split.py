"""Draw assets/head_split.svg: splitting a (T, d) matrix into heads, reshape THEN transpose.

Usage: python scripts/draw_head_split.py [OUTPUT.svg]

Chapter 04 shows it. One sequence (the batch axis is left out) of T = 3 tokens and width d = 4
is split into h = 2 heads of width d_h = 2. Every cell holds 10 t + c (t the token, c the
column) and is coloured by the head that owns its column, so a reader can follow each number.
Top: the right path, reshape to (T, h, d_h) then transpose to (h, T, d_h); merging walks it
back. Bottom: the wrong path, a single reshape to (h, T, d_h), which mixes tokens and heads.
The numbers are computed with ``npformer.core.multi_head.split_heads`` and a plain reshape, not
typed in. The SVG is deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

from npformer.core.multi_head import merge_heads, split_heads  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
T, D, H = 3, 4, 2
D_H = D // H
CELL = 0.5
HEAD_COLORS = ("#cfe2f3", "#f9cb9c")


def cell(ax, x, y, value):
    """One cell at top-left (x, y), coloured by the head that owns the value's column."""
    column = int(round(value)) % 10
    ax.add_patch(
        Rectangle(
            (x, y - CELL),
            CELL,
            CELL,
            facecolor=HEAD_COLORS[column // D_H],
            edgecolor="#444444",
            linewidth=0.8,
        )
    )
    ax.text(
        x + CELL / 2, y - CELL / 2, f"{int(round(value))}", ha="center", va="center", fontsize=9
    )


def matrix(ax, x, y, M, title, shape):
    rows, cols = M.shape
    for i in range(rows):
        for j in range(cols):
            cell(ax, x + j * CELL, y - i * CELL, M[i, j])
    ax.text(x + cols * CELL / 2, y + 0.2, title, ha="center", va="bottom", fontsize=10)
    ax.text(x + cols * CELL / 2, y - rows * CELL - 0.12, shape, ha="center", va="top", fontsize=9)
    return x + cols * CELL


def arrow(ax, x0, x1, y, label, below=None):
    ax.add_patch(
        FancyArrowPatch(
            (x0, y), (x1, y), arrowstyle="-|>", mutation_scale=13, color="#333333", lw=1.2
        )
    )
    ax.text((x0 + x1) / 2, y + 0.12, label, ha="center", va="bottom", fontsize=9.5)
    if below:
        ax.text((x0 + x1) / 2, y - 0.12, below, ha="center", va="top", fontsize=8.5)


def main(out: Path) -> None:
    X = (10.0 * np.arange(T)[:, None] + np.arange(D))[None]  # (1, T, d): entry 10 t + c
    split = split_heads(X, H)[0]  # (h, T, d_h), the right way
    assert np.array_equal(merge_heads(split[None]), X)  # merge walks the same path back
    middle = X.reshape(1, T, H, D_H)[0]  # (T, h, d_h), after the reshape alone
    wrong = X.reshape(1, H, T, D_H)[0]  # (h, T, d_h), one reshape and no transpose
    assert not np.array_equal(wrong, split)

    plt.rcParams["svg.hashsalt"] = "head-split"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(11.5, 4.4))
    ax.set_xlim(0, 18.0)
    ax.set_ylim(-3.8, 2.7)
    ax.axis("off")
    top = 1.6
    mid = top - T * CELL / 2

    # the right path
    x = matrix(ax, 0.3, top, X[0], "X", "(T, d)")
    arrow(ax, x + 0.2, x + 2.8, mid, "reshape", "(T, d) \u2192 (T, h, d_h)")
    x0 = x + 3.0
    for t in range(T):  # each token's row, cut into h blocks with a gap between them
        for k in range(H):
            for c in range(D_H):
                cell(ax, x0 + k * (D_H * CELL + 0.15) + c * CELL, top - t * CELL, middle[t, k, c])
    width = H * D_H * CELL + (H - 1) * 0.15
    ax.text(x0 + width / 2, top + 0.2, "token t: h blocks", ha="center", va="bottom", fontsize=10)
    ax.text(x0 + width / 2, top - T * CELL - 0.12, "(T, h, d_h)", ha="center", va="top", fontsize=9)
    x = x0 + width
    arrow(ax, x + 0.2, x + 2.8, mid, "transpose", "swap the T and h axes")
    x = x + 3.0
    for k in range(H):
        x = matrix(ax, x, top, split[k], f"head {k}", "(T, d_h)") + 0.35
    ax.text(x + 0.05, mid, "(h, T, d_h):\neach head\nsees every\ntoken", va="center", fontsize=9)

    # the merge, walking back
    ax.add_patch(
        FancyArrowPatch(
            (15.0, top - T * CELL - 0.6),
            (1.3, top - T * CELL - 0.6),
            arrowstyle="-|>",
            mutation_scale=13,
            color="#555555",
            lw=1.1,
            ls="--",
        )
    )
    ax.text(
        8.2,
        top - T * CELL - 0.72,
        "merge = the same path backwards: transpose back to (T, h, d_h), then reshape to (T, d)",
        ha="center",
        va="top",
        fontsize=9.5,
        color="#333333",
    )

    # the wrong path
    low = -1.9
    x = matrix(ax, 0.3, low, X[0], "X", "(T, d)")
    arrow(ax, x + 0.2, x + 5.8, low - T * CELL / 2, "reshape straight to (h, T, d_h)", "no error")
    x = x + 6.0
    for k in range(H):
        x = matrix(ax, x, low, wrong[k], f"wrong head {k}", "(T, d_h)") + 1.5
    ax.text(
        x + 0.05,
        low - T * CELL / 2,
        "right shape, wrong numbers:\nrows are pieces of the\nwrong tokens, and a head\nmixes "
        "both colours",
        va="center",
        fontsize=9,
    )
    ax.text(
        0.3,
        2.45,
        f"T = {T} tokens, d = {D}, h = {H} heads of d_h = {D_H}; cell = 10 t + c; colour = "
        "the head that owns column c",
        fontsize=9.5,
        color="#333333",
    )
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "head_split.svg")
