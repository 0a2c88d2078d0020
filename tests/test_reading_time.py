"""The chapters' reading time (`_ext/reading_time.py`): the rule, its wording, and agreement with
the shared reading tool on every chapter.

The tool (`../shared/tools/reading.py`, outside this repository) is not run here: no test reads
files outside the checkout. Its figures for every chapter are frozen below instead. When a chapter
changes, these figures go stale and the test says so: re-measure with
`python ../shared/tools/reading.py --json` from the checkout and update MEASURED_BY_THE_TOOL.
"""

from __future__ import annotations

import sys

import pytest

from tests.notebooks import CHAPTERS, ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import reading_time as R  # noqa: E402

# chapter: (words, code lines, output lines, minutes to 0.1), as the tool printed them
# (`reading.py --json`, sha256 dd49ea8e...a7431) for the notebooks of commit a60a98d.
MEASURED_BY_THE_TOOL = {
    "00_preface": (4389, 424, 58, 44.1),
    "01_attention": (3814, 587, 71, 49.6),
    "02_scaling": (3092, 610, 57, 46.9),
    "03_masks": (3196, 647, 99, 50.0),
    "04_multi_head": (3344, 659, 82, 51.0),
    "05_positions": (4756, 1020, 81, 76.1),
    "06_block": (5969, 1387, 100, 100.9),
    "07_encoder_decoder": (5667, 1046, 86, 82.1),
    "08_quadratic_cost": (4535, 686, 64, 58.0),
    "09_kv_cache": (4652, 855, 68, 67.1),
    "10_experiment": (4804, 932, 107, 72.4),
    "11_ablations": (5928, 945, 156, 79.5),
    "12_attention_maps": (6349, 1460, 171, 107.6),
    "13_pitfalls": (4153, 722, 90, 58.4),
    "14_measuring": (2116, 225, 23, 22.2),
}


def test_every_chapter_has_the_tools_figures():
    assert sorted(MEASURED_BY_THE_TOOL) == [p.stem for p in CHAPTERS], (
        "the chapters changed: measure the new ones with ../shared/tools/reading.py --json"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_agrees_with_the_reading_tool(chapter):
    m = R.measure_file(chapter)
    ours = (m["words"], m["code"], m["outputs"], round(m["minutes"], 1))
    assert ours == MEASURED_BY_THE_TOOL[chapter.stem], (
        f"{chapter.stem}: ours {ours}, the tool's {MEASURED_BY_THE_TOOL[chapter.stem]}. If the "
        "chapter was edited, re-measure it with ../shared/tools/reading.py --json"
    )


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text, outputs=(), tags=()):
    return {
        "cell_type": "code",
        "metadata": {"tags": list(tags)},
        "source": text,
        "outputs": list(outputs),
    }


def stream(lines):
    return {"output_type": "stream", "name": "stdout", "text": "".join(f"{x}\n" for x in lines)}


def picture():
    data = {"image/png": "iVBOR", "text/plain": "<Figure size 640x480 with 1 Axes>"}
    return {"output_type": "display_data", "data": data, "metadata": {}}


def test_words_count_inline_math_as_one_and_skip_folded_text():
    nb = {
        "cells": [
            md("# A title\n\nThe score $q \\cdot k$ is one word here."),
            md("```{dropdown} Hidden heading\nnone of these words count\n```\nafter it"),
            md(":::{note}\nkept words\n:::"),
            md("```{admonition} Folded by its class\n:class: dropdown\nnot counted\n```"),
            md("```{solution-start} ex-one\n:class: dropdown\n```"),
            {"cell_type": "raw", "metadata": {}, "source": "raw cells are not read"},
        ]
    }
    # A title / The score x is one word here / after it / kept words
    assert R.measure(nb)["words"] == 2 + 7 + 2 + 2


def test_code_and_outputs_count_only_what_is_unfolded():
    nb = {
        "cells": [
            code("a = 1\n\nb = 2\nprint(a + b)", [stream(["3", "done"])]),
            code("x = 1\ny = 2", [stream(["folded code, shown output"])], tags=["hide-input"]),
            code("secret = 1", [stream(["gone"])], tags=["remove-cell"]),
            code("z = 3\nz", [stream(["a", "b", "c"])], tags=["hide-output"]),
            code("plot()", [picture()]),
        ]
    }
    m = R.measure(nb)
    assert (m["words"], m["code"], m["outputs"]) == (0, 3 + 2 + 1, 2 + 1)
    assert m["minutes"] == pytest.approx(6 / 20 + 3 / 60)


def test_minutes_weigh_words_code_and_output():
    nb = {"cells": [md(" ".join(["word"] * 400)), code("\n".join(["x = 1"] * 40))]}
    nb["cells"][1]["outputs"] = [stream(["out"] * 120)]
    assert R.measure(nb)["minutes"] == pytest.approx(2 + 2 + 2)


@pytest.mark.parametrize(
    "minutes, text",
    [
        (0.2, "About 1 minute to read"),
        (7.4, "About 7 minutes to read"),
        (22.2, "About 20 minutes to read"),
        (49.6, "About 50 minutes to read"),
        (58.0, "About 1 hour to read"),
        (76.1, "About 1 hour 15 minutes to read"),
        (107.6, "About 1 hour 50 minutes to read"),
        (131.0, "About 2 hours 10 minutes to read"),
    ],
)
def test_the_line_a_reader_sees(minutes, text):
    assert R.reading_time_text(minutes) == text
