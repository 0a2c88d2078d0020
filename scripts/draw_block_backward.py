"""Draw assets/block_forward_backward.svg: one pre-LN block, its forward pass and its backward pass.

Usage: python scripts/draw_block_backward.py [OUTPUT.svg]

Left column: the forward pass, top to bottom, with what each step computes. Right column: the
backward pass, bottom to top, with the gradient each step sends on; a dotted line joins each
step to its backward, which reads what the forward step kept (its cache). The two residual sums
appear twice: forward they add the sub-layer's output to the stream, backward they add the
stream's gradient to the sub-layer's. The SVG is deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# (forward title, forward formula, backward formula, colour), top to bottom
STEPS = [
    (
        "LayerNorm 1",
        r"$h_1 = \gamma_1 \odot \hat{x} + \beta_1$",
        r"$dx = r\,(g - \bar{g} - \hat{x}\,\overline{g\hat{x}}) + d_1$,  $g = \gamma_1 \odot dh_1$",
        "#e8eef7",
    ),
    (
        "Q, K, V",
        r"$[Q\,|\,K\,|\,V] = h_1 W_{qkv} + b_{qkv}$",
        r"$dW_{qkv} = h_1^\top [dQ\,|\,dK\,|\,dV]$",
        "#fdebd3",
    ),
    (
        "scores, softmax",
        r"$Z = c\,QK^\top$ (+ mask),  $P = \mathrm{softmax}(Z)$",
        r"$dZ = P \odot (dP - \mathrm{rowsum}(dP \odot P))$"
        "\n"
        r"$dQ = c\,dZ\,K$,   $dK = c\,dZ^\top Q$",
        "#fdebd3",
    ),
    ("weighted sum", r"$Y = P\,V$", r"$dP = dY\,V^\top$,   $dV = P^\top dY$", "#fdebd3"),
    (
        "output projection",
        r"$a = \mathrm{merge}(Y)\,W_o + b_o$",
        r"$dW_o = \mathrm{merge}(Y)^\top d_1$,   $dY = d_1 W_o^\top$",
        "#fdebd3",
    ),
    ("residual 1", r"$x_1 = x + a$", r"$d_1 = dx_1$ (to $a$ and on to $x$)", "#ffffff"),
    (
        "LayerNorm 2",
        r"$h_2 = \mathrm{LN}_2(x_1)$",
        r"$dx_1 = \mathrm{LN}_2'(dh_2) + dy$",
        "#e8eef7",
    ),
    (
        "FFN",
        r"$u = \mathrm{ReLU}(h_2 W_1 + b_1)$,   $f = u\,W_2 + b_2$",
        r"$dW_2 = u^\top dy$,  $du = dy W_2^\top \odot [\mathrm{pre} > 0]$,  $dh_2 = du\,W_1^\top$",
        "#e3f1e3",
    ),
    ("residual 2", r"$y = x_1 + f$", r"$dy$ goes to $f$ and to $x_1$", "#ffffff"),
]


def box(ax, x, y, w, h, title, text, color):
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=color,
            edgecolor="#333333",
            linewidth=1.0,
        )
    )
    ax.text(x, y + h / 2 - 0.2, title, ha="center", va="center", fontsize=9.5, weight="bold")
    ax.text(x, y - 0.13, text, ha="center", va="center", fontsize=8.5, linespacing=1.4)


def arrow(ax, x0, y0, x1, y1, color="#333333", ls="-"):
    ax.add_patch(
        FancyArrowPatch(
            (x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=10, color=color, lw=1.1, ls=ls
        )
    )


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "block-forward-backward"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(11.5, 9.6))
    n = len(STEPS)
    top, gap = n * 1.05, 1.05
    ax.set_xlim(0, 12.3)
    ax.set_ylim(-0.9, top + 1.0)
    ax.axis("off")
    xf, xb, w = 2.9, 8.3, 5.0
    ax.text(xf, top + 0.65, "forward: x (B, T, d) in, top to bottom", ha="center", fontsize=10.5)
    ax.text(xb, top + 0.65, "backward: dy in, bottom to top", ha="center", fontsize=10.5)
    ys = [top - gap * i for i in range(n)]
    for y, (title, fwd, bwd, color) in zip(ys, STEPS, strict=True):
        h = 0.8 if "\n" not in bwd else 0.98
        box(ax, xf, y, w, 0.8, title, fwd, color)
        box(ax, xb, y, w + 0.4, h, title + ", backward", bwd, color)
        ax.plot([xf + w / 2, xb - (w + 0.4) / 2], [y, y], ls=":", color="#888888", lw=1.0)
    for y0, y1 in zip(ys[:-1], ys[1:], strict=True):
        arrow(ax, xf, y0 - 0.4, xf, y1 + 0.4)
        arrow(ax, xb, y1 + 0.45, xb, y0 - 0.45, color="#b03a2e")
    arrow(ax, xf, top + 0.45, xf, ys[0] + 0.4)
    ax.text(xf, ys[-1] - 0.75, "y (B, T, d) out", ha="center", fontsize=9.5)
    arrow(ax, xb, ys[-1] - 0.85, xb, ys[-1] - 0.45, color="#b03a2e")
    ax.text(xb + 0.2, ys[-1] - 0.75, "dy = dL/dy", ha="left", fontsize=9.5, color="#b03a2e")
    arrow(ax, xb + 2.75, ys[0], xb + 3.05, ys[0], color="#b03a2e")
    ax.text(xb + 3.1, ys[0], "dx = dL/dx", ha="left", va="center", fontsize=9.5, color="#b03a2e")
    ax.text(
        5.6,
        ys[-1] - 1.15,
        "dotted: the backward step reads what its forward step kept (inputs, P, x_hat, r)",
        ha="center",
        fontsize=8.5,
        color="#555555",
    )
    fig.savefig(out, format=out.suffix[1:], bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "block_forward_backward.svg")
