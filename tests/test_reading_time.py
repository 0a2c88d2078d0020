"""The chapters' reading time (`_ext/reading_time.py`): the rule and its wording.

The rule is the shared reading tool's (words/200 + code lines/20 + output lines/60, counting
only what a reader sees unfolded). The tool lives outside this repository, so no test runs it;
the small notebooks below were also measured with it, and it gives the counts asserted here.
The chapters themselves are not frozen: any edit changes their counts, and the book computes
them afresh at every build.
"""

from __future__ import annotations

import sys

import pytest

from tests.notebooks import ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import reading_time as R  # noqa: E402


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
