"""Draw assets/headline_pointer_map.svg: the attention map of a trained pointer head (landing page).

Usage: python scripts/draw_headline_map.py [OUTPUT.svg]

Trains chapter 10's copy model (L = 6, seed 0, the source's configuration: a few seconds), runs
it on chapter 10's prompt [17 3 0 12 7 9 SEP 17 3 0 12 7] and draws the layer-0 head whose
answer rows put the most weight on one key, with the weights written in the cells. Training
results depend on the floating-point kernels, so the figure is a picture of one run (chapter 10
measures the spread); the SVG itself is deterministic for a given run (fixed hash salt, no date).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from npformer.core.model import forward  # noqa: E402
from npformer.training.tasks import SEP  # noqa: E402
from npformer.training.train import TrainConfig, train  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROMPT = [17, 3, 0, 12, 7, 9]


def draw(out: Path) -> None:
    config = TrainConfig(task="copy", length=6, seed=0)
    result = train(config)
    tokens = np.array([PROMPT + [SEP] + PROMPT[:-1]])  # (1, 12): the model's input
    _, cache = forward(result.params, config.model_config(), tokens)
    weights = cache.blocks[0].attn.weights[0]  # (h, T, T) layer 0
    answer_rows = slice(len(PROMPT), 2 * len(PROMPT))  # rows that predict answer symbols
    head = int(np.argmax(weights[:, answer_rows].max(axis=-1).mean(axis=-1)))
    w = weights[head]
    labels = [str(t) for t in PROMPT] + ["SEP"] + [str(t) for t in PROMPT[:-1]]

    plt.rcParams["svg.hashsalt"] = "headline-map"
    fig, ax = plt.subplots(figsize=(5.6, 5.0))
    ax.imshow(w, cmap="Blues", vmin=0, vmax=1)
    for i in range(w.shape[0]):
        for j in range(i + 1):
            if w[i, j] >= 0.05:
                colour = "white" if w[i, j] > 0.6 else "#222222"
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7, color=colour)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("key (the token read)")
    ax.set_ylabel("query (the position predicting the next token)")
    ax.set_title(
        f"Trained copy model, layer 0, head {head}: each answer row\n"
        "reads the prompt symbol it must write next",
        fontsize=10,
    )
    fig.savefig(out, format=out.suffix[1:], bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    print(f"head {head}: answer rows' mean largest weight {w[answer_rows].max(axis=-1).mean():.3f}")


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "headline_pointer_map.svg")
