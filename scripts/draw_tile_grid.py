"""Draw assets/tile_grid.svg: the tiles blocked causal attention computes at T = 2048.

Usage: python scripts/draw_tile_grid.py [OUTPUT.svg]

Rows are tiles of 128 queries, columns tiles of 256 keys (the package's defaults). Each tile is
coloured by what ``npformer.core.blocked_attention``'s loop does with it: computed whole, computed
and masked inside (it crosses the diagonal), or skipped. The classification comes from
``tile_counts``'s own loop, and the totals printed on the figure are checked against it. The
SVG is deterministic (no date, fixed ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from npformer.core.blocked_attention import _tiles, tile_counts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
T, BLOCK_Q, BLOCK_K = 2048, 128, 256
COLOURS = {"full": "#4C72B0", "diagonal": "#DD8452", "skipped": "#FFFFFF"}


def classify() -> dict[tuple[int, int], str]:
    """(query tile, key tile) -> 'full', 'diagonal' or 'skipped', from the forward pass's loop."""
    kinds = {(i, j): "skipped" for i in range(T // BLOCK_Q) for j in range(T // BLOCK_K)}
    for i0, _, keys in _tiles(T, T, True, BLOCK_Q, BLOCK_K):
        for j0, _, crosses in keys:
            kinds[(i0 // BLOCK_Q, j0 // BLOCK_K)] = "diagonal" if crosses else "full"
    return kinds


def main(out: Path) -> None:
    kinds = classify()
    counts = tile_counts(T, block_q=BLOCK_Q, block_k=BLOCK_K)
    n_full = sum(k == "full" for k in kinds.values())
    n_diag = sum(k == "diagonal" for k in kinds.values())
    assert (n_full + n_diag, n_diag, len(kinds)) == (
        counts.tile_pairs,
        counts.diagonal_pairs,
        counts.all_pairs,
    )
    plt.rcParams["svg.hashsalt"] = "tile-grid"
    plt.rcParams["svg.fonttype"] = "none"
    fig, ax = plt.subplots(figsize=(5.6, 6.2))
    for (i, j), kind in kinds.items():
        ax.add_patch(
            Rectangle(
                (j * BLOCK_K, i * BLOCK_Q),
                BLOCK_K,
                BLOCK_Q,
                facecolor=COLOURS[kind],
                edgecolor="#555555",
                linewidth=0.6,
                hatch="//" if kind == "diagonal" else None,
            )
        )
    ax.plot([0, T], [0, T], color="black", linewidth=1.2)  # the causal diagonal: key = query
    ax.set_xlim(0, T)
    ax.set_ylim(T, 0)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, T + 1, 512))
    ax.set_yticks(range(0, T + 1, 512))
    ax.set_xlabel(f"keys, in tiles of {BLOCK_K}")
    ax.set_ylabel(f"queries, in tiles of {BLOCK_Q}")
    handles = [
        Rectangle((0, 0), 1, 1, facecolor=COLOURS["full"], edgecolor="#555555"),
        Rectangle((0, 0), 1, 1, facecolor=COLOURS["diagonal"], edgecolor="#555555", hatch="//"),
        Rectangle((0, 0), 1, 1, facecolor=COLOURS["skipped"], edgecolor="#555555"),
    ]
    labels = [
        f"computed whole: {n_full}",
        f"crosses the diagonal, masked inside: {n_diag}",
        f"skipped, all in the future: {len(kinds) - n_full - n_diag}",
    ]
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    ax.set_title(f"causal attention, T = {T}: {counts.tile_pairs} of {counts.all_pairs} tile pairs")
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "tile_grid.svg")
