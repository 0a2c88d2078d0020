"""Draw assets/block_diagram.svg: one pre-LN Transformer block and what each sub-layer does.

Usage: python scripts/draw_block_diagram.py [OUTPUT.svg]

The figure shows the flow of the residual stream and the parameter count of each sub-layer
in terms of d (with d_ff = 4d); the counts are checked against npformer's block parameter
shapes before drawing. The SVG is deterministic (no date, fixed ids), so
re-running the script gives the same file.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# Sub-layer -> (count as a function of d, label on the figure); d_ff = 4d.
COUNTS = {
    "ln1": (lambda d: 2 * d, "2d parameters"),
    "attn": (lambda d: 4 * d * d + 4 * d, "4d\u00b2 + 4d parameters"),
    "ln2": (lambda d: 2 * d, "2d parameters"),
    "ffn": (lambda d: 8 * d * d + 5 * d, "8d\u00b2 + 5d parameters"),
}


def check_counts() -> None:
    """The labels' formulas against the package's parameter shapes, at two widths."""
    from npformer.core.block import block_parameter_shapes
    from npformer.core.config import DecoderConfig

    for d in (32, 512):
        config = DecoderConfig(
            vocab_size=10, d_model=d, num_heads=4, num_layers=1, d_ff=4 * d, max_len=8
        )
        sizes = {key: 0 for key in COUNTS}
        for name, shape in block_parameter_shapes(config, 0).items():
            sizes[name.split(".")[1]] += math.prod(shape)
        for key, (formula, _) in COUNTS.items():
            assert sizes[key] == formula(d), (key, d, sizes[key], formula(d))


def box(ax, y, text, sub, color, height=0.9, count=None):
    ax.add_patch(
        FancyBboxPatch(
            (0.75, y - height / 2),
            4.5,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.15",
            facecolor=color,
            edgecolor="#333333",
            linewidth=1.2,
        )
    )
    top = 0.13 if count is None else 0.27
    ax.text(3.0, y + top, text, ha="center", va="center", fontsize=11, weight="bold")
    ax.text(3.0, y + top - 0.35, sub, ha="center", va="center", fontsize=8.5, color="#333333")
    if count is not None:
        label = COUNTS[count][1]
        ax.text(3.0, y - 0.36, label, ha="center", va="center", fontsize=8.5, color="#1f4e8c")


def plus(ax, y):
    ax.add_patch(plt.Circle((3.0, y), 0.25, facecolor="white", edgecolor="#333333", lw=1.2))
    ax.text(3.0, y - 0.02, "+", ha="center", va="center", fontsize=14)


def arrow(ax, y0, y1, x=3.0):
    ax.add_patch(
        FancyArrowPatch(
            (x, y0), (x, y1), arrowstyle="-|>", mutation_scale=12, color="#333333", lw=1.2
        )
    )


def residual(ax, y_from, y_to):
    ax.plot([3.0, 0.4, 0.4], [y_from, y_from, y_to], ls="--", color="#555555", lw=1.2)
    ax.add_patch(
        FancyArrowPatch(
            (0.4, y_to),
            (2.75, y_to),
            arrowstyle="-|>",
            mutation_scale=12,
            color="#555555",
            lw=1.2,
            ls="--",
        )
    )


def main(out: Path) -> None:
    check_counts()
    plt.rcParams["svg.hashsalt"] = "block-diagram"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(4.4, 7.4))
    ax.set_xlim(0, 5.5)
    ax.set_ylim(0.9, 11.2)
    ax.axis("off")
    ax.text(3.0, 10.85, "input x: (B, T, d)", ha="center", va="center", fontsize=10)
    y_split1, y_ln1, y_att, y_add1 = 10.2, 9.3, 7.9, 6.7
    y_split2, y_ln2, y_ffn, y_add2 = 6.1, 5.2, 3.7, 2.4
    arrow(ax, 10.65, y_ln1 + 0.55)
    box(ax, y_ln1, "LayerNorm", "rescales each position's d values", "#e8eef7", 1.1, "ln1")
    arrow(ax, y_ln1 - 0.55, y_att + 0.6)
    box(
        ax,
        y_att,
        "Masked multi-head attention",
        "each position reads itself and earlier ones",
        "#fbe3c8",
        height=1.2,
        count="attn",
    )
    arrow(ax, y_att - 0.6, y_add1 + 0.25)
    plus(ax, y_add1)
    residual(ax, y_split1, y_add1)
    arrow(ax, y_add1 - 0.25, y_ln2 + 0.55)
    box(ax, y_ln2, "LayerNorm", "rescales each position's d values", "#e8eef7", 1.1, "ln2")
    arrow(ax, y_ln2 - 0.55, y_ffn + 0.6)
    box(
        ax,
        y_ffn,
        "Feed-forward network",
        "each position alone: d -> 4d -> d",
        "#d9eed9",
        height=1.2,
        count="ffn",
    )
    arrow(ax, y_ffn - 0.6, y_add2 + 0.25)
    plus(ax, y_add2)
    residual(ax, y_split2, y_add2)
    arrow(ax, y_add2 - 0.25, 1.45)
    ax.text(3.0, 1.2, "output: (B, T, d), to the next block", ha="center", va="center", fontsize=10)
    ax.text(
        0.25,
        (y_split1 + y_add1) / 2,
        "residual",
        rotation=90,
        ha="center",
        va="center",
        fontsize=8.5,
        color="#555555",
    )
    ax.text(
        0.25,
        (y_split2 + y_add2) / 2,
        "residual",
        rotation=90,
        ha="center",
        va="center",
        fontsize=8.5,
        color="#555555",
    )
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "block_diagram.svg")
