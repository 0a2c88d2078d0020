"""The book's one figure style: sizes, fonts and colours readable in light and dark themes.

Used by every chapter (``use_book_style()`` in the set-up cell).
"""

from __future__ import annotations

import matplotlib as mpl

#: Sequential colour map for attention weights and heatmaps (perceptually uniform, readable
#: on a light or dark page because the figure keeps its own white background).
HEATMAP_CMAP = "viridis"
#: Diverging colour map for signed quantities (positional encodings, biases).
DIVERGING_CMAP = "RdBu_r"


def use_book_style() -> None:
    """Set matplotlib defaults for every figure of the book."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "figure.facecolor": "white",
            "axes.facecolor": "white",
            "font.size": 10,
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 9,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "image.cmap": HEATMAP_CMAP,
            "axes.prop_cycle": mpl.cycler(
                color=["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
            ),
        }
    )
