"""Chapter 00's checker passes the reference and catches typical mistakes of a cabinet lookup."""

import numpy as np
import pytest

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch00 import check_cabinet_lookup, reference_lookup
from npformer.core.attention import softmax


def right(question, keys, values):
    return softmax(question @ keys.T, axis=-1) @ values


def no_max_subtraction(question, keys, values):
    e = np.exp(question @ keys.T)
    return (e / e.sum(axis=-1, keepdims=True)) @ values


def softmax_over_questions(question, keys, values):
    return softmax(question @ keys.T, axis=0) @ values


def linear_normalization(question, keys, values):
    z = question @ keys.T
    return (z / z.sum(axis=-1, keepdims=True)) @ values


def returns_the_weights(question, keys, values):
    return softmax(question @ keys.T, axis=-1)


def one_maximum_for_all_rows(question, keys, values):
    z = question @ keys.T
    e = np.exp(z - z.max())  # the largest score of every row, not of each row
    return (e / e.sum(axis=-1, keepdims=True)) @ values


def stub(question, keys, values):
    raise NotImplementedError


def test_reference_and_right_answer_pass(capsys):
    assert check_cabinet_lookup(reference_lookup).ok
    assert check_cabinet_lookup(right).ok
    assert capsys.readouterr().out == "passed 6 of 6 checks\npassed 6 of 6 checks\n"


def test_stub_is_not_attempted(capsys):
    assert not check_cabinet_lookup(stub).attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


@pytest.mark.parametrize(
    ("mistake", "failing"),
    [
        (
            no_max_subtraction,
            "failed check 4 of 6 (similarities near 1000 (no overflow)): got non-finite",
        ),
        (softmax_over_questions, "failed check 3 of 6 (two questions at once, shape (2, 4))"),
        (linear_normalization, "failed check 1 of 6 (the chapter's question, the dripping tap)"),
        (
            one_maximum_for_all_rows,
            "failed check 6 of 6 (two questions far apart (each row its own maximum))",
        ),
        (
            returns_the_weights,
            "failed check 1 of 6 (the chapter's question, the dripping tap): "
            "expected shape (2,), got shape (3,)",
        ),
    ],
)
def test_typical_mistakes_fail(mistake, failing):
    report = check_cabinet_lookup(mistake, show=False)
    assert not report.ok
    assert report.line.startswith(failing), report.line


def test_filing_cabinet_figure_shows_the_prefaces_numbers():
    """The figure is drawn from the checker's cabinet, and the preface prints the same."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location(
        "draw_filing_cabinet", root / "scripts" / "draw_filing_cabinet.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    drawn = module.lookup()
    cells = json.loads((root / "chapters" / "00_preface.ipynb").read_text())["cells"]
    printed = "".join(
        "".join(out.get("text", ""))
        for cell in cells
        if cell["cell_type"] == "code"
        for out in cell.get("outputs", [])
    )
    for topic, z, p in zip(module.CABINET_TOPICS, drawn["scores"], drawn["weights"], strict=True):
        assert f"{topic:>8}: score {z:.1f}, weight {p:.3f}" in printed
    assert "answer: [" + " ".join(f"{a:.3f}" for a in drawn["answer"]) + "]" in printed
    svg = (root / "assets" / "filing_cabinet.svg").read_text()
    assert all(f"p = {p:.2f}" in svg for p in drawn["weights"])
