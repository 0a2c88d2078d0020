"""The book's one figure style: sizes, fonts and colours readable in light and dark themes.

Used by every chapter (``use_book_style()`` in the set-up cell).
"""

from __future__ import annotations

import matplotlib as mpl
import numpy as np

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


def signed_heatmap(ax, values, xlabels, ylabels, label: str):
    """Draw a signed (rows, columns) array on ``ax`` with a diverging map centred on 0.

    The colour limits are symmetric, +-max|values|, so white means 0 in every figure that uses
    it (the head x position patching map of chapter 12's deeper pages). Returns the image, for
    a colour bar labelled ``label``.
    """
    values = np.asarray(values, dtype=float)
    if values.shape != (len(ylabels), len(xlabels)):  # else the ticks would be mislabelled
        raise ValueError(
            f"signed_heatmap: values of shape {values.shape} need {len(ylabels)} row labels "
            f"and {len(xlabels)} column labels"
        )
    limit = float(np.abs(values).max()) or 1.0
    image = ax.imshow(values, cmap=DIVERGING_CMAP, vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(len(xlabels)), labels=xlabels, fontsize=8)
    ax.set_yticks(range(len(ylabels)), labels=ylabels, fontsize=8)
    ax.grid(False)
    ax.figure.colorbar(image, ax=ax, label=label)
    return image


def moving_average(values, width: int = 25) -> np.ndarray:
    """The mean of each ``width`` consecutive values, (n,) -> (n - width + 1,).

    Point i averages values[i : i + width], so it belongs at step i + width (steps counted
    from 1): the training-curve figures of chapters 10 and 11 plot it against
    ``np.arange(width, n + 1)``.
    """
    return np.convolve(np.asarray(values, dtype=float), np.ones(width) / width, mode="valid")
