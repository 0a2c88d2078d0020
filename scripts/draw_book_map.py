"""Draw assets/book_map.svg: the chapters of the book and what each builds on (landing page).

Usage: python scripts/draw_book_map.py [OUTPUT.svg]

Chapters are read from _toc.yml (titles from each notebook's first heading), so a new chapter
that is not placed on the map fails loudly instead of vanishing from it. The SVG is
deterministic (fixed hash salt, no date): re-running the script gives the same file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import matplotlib
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# (column, row) of each chapter: columns are the book's four parts, rows run down the page.
PLACE = {
    "00": (0, 0), "01": (0, 1), "02": (0, 2), "03": (0, 3),
    "04": (1, 0), "05": (1, 1), "06": (1, 2), "07": (1, 3),
    "08": (2, 0), "09": (2, 1), "14": (2, 2),
    "10": (3, 0), "11": (3, 1), "12": (3, 2), "13": (3, 3),
}  # fmt: skip
PARTS = ["Attention itself", "The Transformer", "What it costs", "Training and reading it"]
COLORS = ["#dbe9f6", "#e4f2df", "#fbe7d3", "#ece1f3"]
# What each chapter builds on most directly. Only arrows within a part or between neighbouring
# parts are drawn, so that no arrow crosses a box; the prerequisites of each chapter are listed
# at its start.
BUILDS_ON = {
    "01": ["00"], "02": ["01"], "03": ["02"], "04": ["01", "03"], "05": ["04"], "06": ["05"],
    "07": ["06", "03"], "08": ["04"], "09": ["08", "06"], "14": ["09"], "10": ["09"],
    "11": ["10"], "12": ["11"], "13": ["12", "09"],
}  # fmt: skip
SHORT = {
    "00": "Preface: the filing cabinet\nand the recurrent wall",
    "01": "Scaled dot-product\nattention",
    "02": "Why divide by sqrt(d_k)",
    "03": "Masks",
    "04": "Multi-head attention",
    "05": "Positions",
    "06": "The block and its\nbackward pass",
    "07": "The encoder-decoder",
    "08": "The quadratic cost",
    "09": "The KV cache",
    "10": "Copy and sort:\nthe experiment",
    "11": "Ablations",
    "12": "Reading attention maps",
    "13": "Trade-offs and traps",
    "14": "Appendix: measuring\nhonestly",
}


def chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbers = []
    for entry in toc["chapters"]:
        m = re.match(r"chapters/(\d\d)_", entry["file"])
        if m:
            numbers.append(m.group(1))
    missing = [n for n in numbers if n not in PLACE]
    if missing:
        raise SystemExit(f"draw_book_map: place chapter(s) {missing} on the map (PLACE)")
    return numbers


def title(number: str) -> str:
    path = next((ROOT / "chapters").glob(f"{number}_*.ipynb"))
    for cell in json.loads(path.read_text())["cells"]:
        m = re.search(r"^# (.+)$", "".join(cell["source"]), re.M)
        if cell["cell_type"] == "markdown" and m:
            return m.group(1)
    return path.stem


def draw(out: Path) -> None:
    plt.rcParams["svg.hashsalt"] = "book-map"
    present = chapters()
    fig, ax = plt.subplots(figsize=(12, 6.2))
    ax.set_xlim(-0.1, 4.1)
    ax.set_ylim(4.25, -0.75)
    ax.axis("off")
    w, h = 0.86, 0.62
    centre = {n: (PLACE[n][0] + 0.5, PLACE[n][1] + 0.25) for n in present}
    for col, part in enumerate(PARTS):
        ax.text(col + 0.5, -0.45, part, ha="center", va="center", fontsize=12, weight="bold")
    for n in present:
        x, y = centre[n]
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0.01,rounding_size=0.06",
                facecolor=COLORS[PLACE[n][0]],
                edgecolor="#444444",
                linewidth=1.0,
                gid=f"chapter-{n}",
            )
        )
        ax.text(x, y - 0.17, n, ha="center", va="center", fontsize=9, color="#555555")
        ax.text(x, y + 0.06, SHORT.get(n, title(n)), ha="center", va="center", fontsize=9.5)
    for n, bases in BUILDS_ON.items():
        for b in bases:
            if n not in centre or b not in centre:
                continue
            (x0, y0), (x1, y1) = centre[b], centre[n]
            gap = PLACE[n][0] - PLACE[b][0]
            if gap == 0 and PLACE[n][1] - PLACE[b][1] == 1:
                start, end = (x0, y0 + h / 2), (x1, y1 - h / 2)
            elif gap == 1:
                start, end = (x0 + w / 2, y0), (x1 - w / 2, y1)
            else:
                raise SystemExit(f"draw_book_map: arrow {b} -> {n} would cross boxes")
            ax.add_patch(
                FancyArrowPatch(
                    start, end, arrowstyle="-|>", mutation_scale=10, color="#777777", linewidth=0.9
                )
            )
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "book_map.svg")
