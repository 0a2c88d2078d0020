"""Draw assets/heads_example.svg: two heads as two slices of the same queries.

Usage: python scripts/draw_heads_example.py [OUTPUT.svg]

Chapter 04 shows it before any code. The running example's first sentence ("a storm hit the
river bank today", d = 8) is projected to queries Q (7, 8) with random weights (query and
key weights three times their initial scale, for contrast); columns 0-3 belong to head 0 and
columns 4-7 to head 1. Each head compares its own slice of the queries
with its own slice of the keys and gets its own (7, 7) table of weights: two selections per
word from one layer. The numbers come from ``npformer.core.multi_head``, not typed in. The SVG is
deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from npformer.core.multi_head import init_multi_head_params, multi_head_attention  # noqa: E402
from npformer.training.example import running_example  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HEAD_COLOURS = ("#0072B2", "#D55E00")


def main(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "heads-example"
    words, _, _, X = running_example(d=8)
    words = words[0]
    params = init_multi_head_params(8, np.random.default_rng(4))
    # larger random query and key weights than at initialization, so the maps show contrast
    params["W_q"] *= 3.0
    params["W_k"] *= 3.0
    _, cache = multi_head_attention(X[:1], X[:1], params, num_heads=2)
    Q = X[0] @ params["W_q"]  # (T, d)
    weights = cache.attention.weights[0]  # (h, T, T)
    fig, axes = plt.subplots(1, 3, figsize=(12.5, 4.2), gridspec_kw={"width_ratios": [8, 7, 7]})
    ax = axes[0]
    ax.imshow(Q, cmap="RdBu_r", vmin=-np.abs(Q).max(), vmax=np.abs(Q).max())
    for k, colour in enumerate(HEAD_COLOURS):
        ax.add_patch(
            Rectangle((4 * k - 0.5, -0.5), 4, 7, fill=False, lw=3, ec=colour, clip_on=False)
        )
        ax.text(
            4 * k + 1.5,
            -0.9,
            f"head {k}: columns {4 * k}-{4 * k + 3}",
            ha="center",
            color=colour,
            fontsize=10,
            fontweight="bold",
        )
    ax.set(yticks=range(7), yticklabels=words, xticks=range(8), xlabel="column of Q")
    ax.set_title("queries Q = X W_Q, one row per word (7, 8)", pad=34, fontsize=11)
    for k in range(2):
        ax = axes[k + 1]
        ax.imshow(weights[k], cmap="Greys", vmin=0, vmax=1)
        ax.set(xticks=range(7), yticks=range(7), yticklabels=words)
        ax.set_xticklabels(words, rotation=60, ha="right")
        ax.set_xlabel("key word")
        ax.set_title(
            f"head {k}: its own weights (7, 7)",
            color=HEAD_COLOURS[k],
            fontsize=11,
            fontweight="bold",
            pad=22,
        )
        for spine in ax.spines.values():
            spine.set(edgecolor=HEAD_COLOURS[k], linewidth=3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "heads_example.svg")
