"""Draw assets/mask_before_after.svg: a causal mask applied before the softmax, and after it.

Usage: python scripts/draw_mask_diagram.py [OUTPUT.svg]

Top row: scores Z, the mask added as -inf on the future keys, the softmax; every row of the
result sums to one. Bottom row: the softmax of the unmasked scores, then the future weights set
to zero; the rows keep only the share of weight the softmax had put on the past. The numbers are
computed with ``npformer.core.attention.softmax`` and ``npformer.core.masks.causal_mask`` from the
weight-free scores x x^T / sqrt(d) of the running example's first four words ("a storm hit
the", ``npformer.training.example``) rounded to one decimal, and the row sums printed on the figure
are checked here. The SVG is deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

from npformer.core.attention import masked_softmax, softmax  # noqa: E402
from npformer.core.masks import causal_mask  # noqa: E402
from npformer.training.example import running_example  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
T = 4


def matrices() -> dict[str, np.ndarray]:
    """The five matrices of the figure, and the row sums of the two results."""
    x = running_example(d=8).X[0, :T]  # (T, d): "a storm hit the"
    scores = np.round(x @ x.T / np.sqrt(x.shape[-1]), 1)  # (T, S)
    mask = causal_mask(T)  # (T, S)
    before = masked_softmax(scores, mask)  # (T, S)
    plain = softmax(scores)  # (T, S)
    after = plain * mask  # (T, S)
    np.testing.assert_allclose(before.sum(axis=1), 1, atol=1e-15)
    assert np.all(after.sum(axis=1)[:-1] < 1) and abs(after.sum(axis=1)[-1] - 1) < 1e-15
    return {
        "scores": scores,
        "masked": np.where(mask, scores, -np.inf),
        "before": before,
        "plain": plain,
        "after": after,
    }


def grid(ax, x0, y0, M, title, cell=0.5, fmt="{:.2f}", hidden=None, sums=False):
    """Draw matrix M with its top-left corner at (x0, y0); grey out the cells in ``hidden``."""
    n = M.shape[0]
    for i in range(n):
        for j in range(n):
            grey = hidden is not None and hidden[i, j]
            ax.add_patch(
                Rectangle(
                    (x0 + j * cell, y0 - (i + 1) * cell),
                    cell,
                    cell,
                    facecolor="#d9d9d9" if grey else "#fbe3c8",
                    edgecolor="#333333",
                    lw=0.8,
                )
            )
            v = M[i, j]
            text = "-inf" if np.isneginf(v) else fmt.format(v)
            if grey and not np.isneginf(v) and v == 0:
                text = "0"
            ax.text(
                x0 + (j + 0.5) * cell,
                y0 - (i + 0.5) * cell,
                text,
                ha="center",
                va="center",
                fontsize=7.5,
            )
    ax.text(x0 + n * cell / 2, y0 + 0.22, title, ha="center", va="bottom", fontsize=9.5)
    if sums:
        for i in range(n):
            ax.text(
                x0 + n * cell + 0.12,
                y0 - (i + 0.5) * cell,
                f"{M[i].sum():.2f}",
                ha="left",
                va="center",
                fontsize=8,
                color="#b03a2e" if abs(M[i].sum() - 1) > 1e-12 else "#1e6b35",
                weight="bold",
            )
        ax.text(x0 + n * cell + 0.12, y0 + 0.05, "row sum", fontsize=7.5, ha="left")


def arrow(ax, x0, x1, y, label):
    ax.add_patch(
        FancyArrowPatch((x0, y), (x1, y), arrowstyle="-|>", mutation_scale=12, color="#333333")
    )
    ax.text((x0 + x1) / 2, y + 0.12, label, ha="center", va="bottom", fontsize=8.5)


def main(out: Path) -> None:
    m = matrices()
    future = ~causal_mask(T)
    plt.rcParams["svg.hashsalt"] = "mask-diagram"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(9.6, 5.4))
    ax.set_xlim(0, 10.4)
    ax.set_ylim(-0.8, 6.0)
    ax.axis("off")
    top, bottom, w = 5.0, 1.8, 2.0  # y of the grids' top edges; grid width
    ax.text(
        0.0,
        top + 0.75,
        "right: -inf BEFORE the softmax",
        fontsize=11,
        weight="bold",
        color="#1e6b35",
    )
    grid(ax, 0.2, top, m["scores"], "scores Z", fmt="{:.1f}")
    arrow(ax, 2.35, 3.45, top - 1.0, "add -inf on j > i")
    grid(ax, 3.6, top, m["masked"], "Z with the mask", fmt="{:.1f}", hidden=future)
    arrow(ax, 5.75, 6.85, top - 1.0, "softmax")
    grid(ax, 7.0, top, m["before"], "weights P", hidden=future, sums=True)
    ax.text(
        0.0,
        bottom + 0.75,
        "wrong: zeros AFTER the softmax",
        fontsize=11,
        weight="bold",
        color="#b03a2e",
    )
    grid(ax, 0.2, bottom, m["scores"], "scores Z", fmt="{:.1f}")
    arrow(ax, 2.35, 3.45, bottom - 1.0, "softmax")
    grid(ax, 3.6, bottom, m["plain"], "softmax(Z): reads the future")
    arrow(ax, 5.75, 6.85, bottom - 1.0, "set j > i to 0")
    grid(ax, 7.0, bottom, m["after"], "weights P'", hidden=future, sums=True)
    ax.text(
        5.2,
        -0.6,
        "The denominator of P' still counts the future keys: each row keeps only the weight "
        "the softmax had left on the past.",
        ha="center",
        fontsize=8.5,
        color="#333333",
    )
    del w
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "mask_before_after.svg")
